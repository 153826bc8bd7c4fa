//! venn-manager's integration tests, one module per file, in one test binary: one link and one
//! instantiation of the generic code they share instead of one per file (issue 34). Run
//! one file's tests with `cargo test --release -p venn-manager --test integration -- <file>::`.
//! `tests/attack.rs` stays a binary of its own: its honest client's p99 bound (50 ms) must
//! not share two cores with the other files' tests.

mod admission;
mod api;
mod bounds;
mod browser;
mod client;
mod common;
mod custom_policy;
mod feasibility;
mod full_disk;
mod fuzz;
mod recovery;
mod server_limits;
mod ui;
