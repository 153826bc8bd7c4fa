//! fl-job's integration tests, one module per file, in one test binary: one link and one
//! instantiation of the generic code they share instead of one per file (issue 34). Run
//! one file's tests with `cargo test --release -p fl-job --test integration -- <file>::`.

mod common;
mod exchange;
mod fedavg_run;
mod seeded_init;
mod tools;
mod training;
