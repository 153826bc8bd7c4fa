//! The live resource manager: an axum HTTP service that drives `venn-core` on the
//! wall clock, with its state in embedded SQLite.
//!
//! Not built yet: the `/v1` API, persistence and `/metrics` will live here.
