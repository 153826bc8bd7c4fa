//! FEMNIST in the LEAF JSON format: loading (plain or gzipped), per-writer partitions,
//! the label map and batching.
//!
//! Not built yet.
