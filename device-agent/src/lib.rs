//! Emulates a population of edge devices in one process: each checks in with the
//! manager, trains its assigned task on its own FEMNIST writers, and reports or drops off.
//!
//! Not built yet.
