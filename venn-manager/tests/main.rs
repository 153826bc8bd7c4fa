//! venn-manager's integration tests, one module per file, in one test binary: one link and one
//! instantiation of the generic code they share instead of one per file (issue 34). Run
//! one file's tests with `cargo test --release -p venn-manager --test integration -- <file>::`.

mod admission;
mod api;
mod attack;
mod bounds;
mod browser;
mod client;
mod common;
mod custom_policy;
mod fuzz;
mod recovery;
mod server_limits;
mod ui;
