//! Event-driven simulator on a virtual clock that replays device-availability and
//! job traces through `venn-core`, and re-derives the Venn paper's evaluation.
//!
//! Modules:
//! - Inputs — the availability trace (Venn CSV, FedScale JSON or a format of your own)
//!   and its 5-day replay, device capacity and eligibility tables, job traces and the
//!   job generator, the synthetic availability generator — live in the `venn-traces`
//!   crate, shared with the device agent.
//! - [`engine`]: the discrete-event loop that drives `venn-core`, its
//!   configuration, and the per-job results and summaries; its docs state the
//!   simulation semantics.
//! - [`experiments`]: breakdowns of per-job results and the scheduler
//!   overhead measurement behind the paper's tables and figures.
//! - [`incentives`]: the misreporting check of posted-price admission.
//!
//! PNG charts are the venn-plot crate's, shared with venn-lab and fl-job.

pub mod engine;
pub mod experiments;
pub mod incentives;
