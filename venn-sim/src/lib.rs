//! Event-driven simulator on a virtual clock that replays device-availability and
//! job traces through `venn-core`, and re-derives the Venn paper's evaluation.
//!
//! Modules:
//! - [`input`]: everything the simulator reads or synthesises before it starts:
//!   the availability trace (Venn CSV or FedScale per-client JSON) and its
//!   5-day replay expansion, device capacity and eligibility tables, job traces
//!   and the job generator, and the synthetic availability generator that stands
//!   in for the FedScale trace we do not have.
//! - [`engine`]: the discrete-event loop that drives `venn-core`, its
//!   configuration, and the per-job results and summaries; its docs state the
//!   simulation semantics.
//! - [`experiments`]: breakdowns of per-job results and the scheduler
//!   overhead measurement behind the paper's tables and figures.
//! - [`incentives`]: the misreporting check of posted-price admission.
//! - [`plot`]: PNG line charts.

pub mod engine;
pub mod experiments;
pub mod incentives;
/// The simulator's inputs live in their own crate, `venn-traces`, shared with the device
/// agent; re-exported under their old name.
pub use venn_traces as input;
pub mod plot;
