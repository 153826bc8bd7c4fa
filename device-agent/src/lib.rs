//! Emulates a population of edge devices in one process: each checks in with the
//! manager, trains its assigned task on its own FEMNIST writers, and reports or drops off.
//! Also home of `venn-lab`, which runs whole local experiments and load tests.
//!
//! ## Layout
//! - [`client`]: HTTP client of the manager's device endpoints.
//! - [`population`]: device profiles from the shared traces (or synthetic).
//! - [`load`]: the check-in load generator (`venn-lab load`).
//! - [`agent`], [`availability`]: the device loop and online sessions (`device-agent`).
//! - [`lab`]: whole experiments: manager + jobs + devices on loopback (`venn-lab run`).

pub mod agent;
pub mod availability;
pub mod client;
pub mod lab;
pub mod load;
pub mod population;
