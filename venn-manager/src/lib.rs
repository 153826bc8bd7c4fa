//! # venn-manager — the live resource manager
//!
//! An axum HTTP service that drives `venn-core`'s `ResourceManager` on the wall clock,
//! with its state in embedded SQLite so that a restarted manager resumes every job, round
//! and outstanding task.
//!
//! ## Layout
//! - The wire types, routes and JSON error body live in the `venn-api` crate, shared with
//!   every client.
//! - [`api`]: the router, one file per resource, and the mapping of [`error`]'s domain
//!   errors to HTTP.
//! - [`service`]: the domain logic behind the handlers, one file per resource: the core
//!   updated and the store's writes queued in one critical section, the answer sent once
//!   they committed; the sweeper (venn-core's timers: expired leases, rounds left open
//!   past their deadline), restart recovery.
//! - [`store`]: the SQLite schema and queries; [`writer`]: the one thread that writes
//!   them, committing many writes per transaction; [`metrics`]: Prometheus rendering.
//! - [`history`]: the status page's bounded record of jobs, rounds and supply, restored
//!   from SQLite; [`ui`]: the page itself (server-rendered HTML and SVG at `/`).
//! - [`admission`]: the optional posted-price admission controller on the wall clock,
//!   on venn-core's slot clock (the simulator's rule for slots, capacity and evictions).
//! - [`clock`], [`settings`]: time source and knobs; [`tokens`]: bearer tokens, kept
//!   only as digests and compared in constant time.
//! - [`server`]: serving with background sweeps and graceful shutdown; [`sources`]:
//!   per-address connection shares and request rates.

pub mod admission;
pub mod api;
pub mod clock;
pub mod error;
pub mod history;
pub mod metrics;
pub mod server;
pub mod service;
pub mod settings;
pub mod sources;
pub mod store;
pub mod tokens;
pub mod ui;
pub mod writer;

pub use api::router;
pub use clock::Clock;
pub use service::Manager;
pub use settings::Settings;
