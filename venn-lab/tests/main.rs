//! venn-lab's integration tests, one module per file, in one test binary: one link and one
//! instantiation of the generic code they share instead of one per file (issue 34). Run
//! one file's tests with `cargo test --release -p venn-lab --test integration -- <file>::`.
//! `tests/k8s.rs` and `tests/podman.rs` stay binaries of their own: they need the cargo
//! feature `k8s`, and CI builds just them with it.

mod agent;
mod differential;
mod e2e;
mod job_server;
mod load;
mod multihost;
mod saved;
mod soak;
mod sweep;
mod virtual_clock;
