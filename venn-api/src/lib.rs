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
//! Validation that needs no server state lives on the types themselves (serde's
//! `deny_unknown_fields`, the core's `Requirement` and `StatementOfWork` checks).

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
