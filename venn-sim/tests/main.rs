//! venn-sim's integration tests, one module per file, in one test binary: one link and one
//! instantiation of the generic code they share instead of one per file (issue 34). Run
//! one file's tests with `cargo test --release -p venn-sim --test integration -- <file>::`.

mod admission;
mod cli;
mod common;
mod contention;
mod scenario;
mod shared_data;
mod throughput;
mod trace_format;
