//! # venn-api — the testbed's wire protocol, defined once
//!
//! Every type that crosses a socket between the testbed's processes, so the manager,
//! the job runner, the device agent and the lab compile against one definition and a
//! change to an endpoint is a compile error wherever it matters.
//!
//! ## Layout
//! - [`manager`]: request and response bodies of the manager's `/v1` API
//!   (registration, rounds, check-in, tasks, status);
//! - [`paths`]: the `/v1` route templates servers mount and the path builders clients
//!   call, side by side;
//! - [`job`]: the job↔device protocol (plan, weights, update; header and route names);
//! - [`error`]: the JSON error body `{"error": {"code", "message", "field"?}}` and its
//!   stable codes;
//! - `HttpError` (feature `server`): that body with an HTTP status, as an axum response;
//! - [`client`] (feature `client`): typed reqwest clients of the manager and of a job.
//!
//! The types check their shape (serde's `deny_unknown_fields`; the core's `Requirement`
//! and `StatementOfWork` checks). Limits on values — a round's deadline and demand — are
//! the manager's (venn-manager `service/rounds.rs`, with `venn_manager::limits`), and the
//! job runner checks its own configuration before it registers (fl-job
//! `runner/config.rs`), so a bad config fails before any request is sent.

pub mod error;
pub mod job;
pub mod manager;
pub mod paths;

#[cfg(feature = "client")]
pub mod client;
#[cfg(feature = "server")]
mod http_error;

pub use error::{ErrorBody, ErrorDetail, codes};
#[cfg(feature = "server")]
pub use http_error::HttpError;
pub use job::TaskPlan;
