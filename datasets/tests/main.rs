//! datasets' integration tests, one module per file, in one test binary: one link and one
//! instantiation of the generic code they share instead of one per file (issue 34). Run
//! one file's tests with `cargo test --release -p datasets --test integration -- <file>::`.
//! `tests/download.rs` stays a binary of its own: it needs the cargo feature `download`,
//! and CI builds just it with it.

mod leaf_fixtures;
mod lookup;
mod shared_data;
