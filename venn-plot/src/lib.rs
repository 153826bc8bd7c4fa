//! # venn-plot — every PNG the workspace draws, with one font rule
//!
//! - [`accuracy`]: accuracy against time, one curve per policy or job with its 95 % band,
//!   single charts and grids of panels, and estimates with intervals (venn-lab's results
//!   folders, `fl-job fedavg`).
//! - [`bars`]: horizontal stacked bars (what each job's completion time is made of, for
//!   runs without evaluations).
//! - [`lines`]: plain line charts (venn-sim's sweeps, overhead and admission plots).
//! - `font.rs`: the font lookup both use ([`fonts_available`]): `$VENN_PLOT_FONT`, then the
//!   usual system places; without a font the charts are drawn without text.

pub mod accuracy;
pub mod bars;
mod font;
pub mod lines;

pub use font::fonts_available;

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("plot {path}: {what}")]
pub struct PlotError {
    /// The file.
    pub path: String,
    /// What went wrong.
    pub what: String,
}
