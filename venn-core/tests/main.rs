//! venn-core's integration tests, one module per file, in one test binary: one link and one
//! instantiation of the generic code they share instead of one per file (issue 34). Run
//! one file's tests with `cargo test --release -p venn-core --test integration -- <file>::`.

mod admission;
mod class_cap;
mod common;
mod custom_policy;
mod delays;
mod fig3;
mod lemma2;
mod offers;
mod props;
mod random_instances;
