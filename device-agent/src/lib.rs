//! # device-agent — an emulated device population
//!
//! Emulates a population of edge devices in one process: each checks in with the manager,
//! trains its assigned task on its own FEMNIST writers, and reports or drops off when its
//! availability session ends. Devices speak the protocol of `venn-api` through its typed
//! clients; profiles and availability come from `venn-traces`.
//!
//! ## Layout
//! - [`population`]: device profiles from the shared traces (or synthetic).
//! - [`availability`]: online sessions from a trace or the synthetic generator.
//! - [`agent`]: the device loop (check in, fetch, train, wait, upload or drop off).

pub mod agent;
pub mod availability;
pub mod population;
