//! Event-driven simulator on a virtual clock that replays device-availability and
//! job traces through `venn-core`, and re-derives the Venn paper's evaluation.
//!
//! Not built yet: trace loaders, the synthetic availability generator, the event
//! loop and the `venn-sim` CLI will live here.
