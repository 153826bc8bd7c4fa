//! Training-mode BatchNorm fused with the activation that follows it (none, ReLU, ReLU6) on
//! contiguous NCHW `f32`: batch statistics, normalise + activate, and the backward pass.
//! fl-task's `model/bn_op.rs` wraps these as one Burn autodiff op.
//!
//! Semantics are Burn's `BatchNorm` in training: batch mean and biased variance over
//! (batch, height, width), `epsilon` inside the square root (the caller passes
//! `inv = 1 / √(var + ε)`). The forward reads the input twice (statistics, then normalise +
//! activate), the backward twice (two per-channel sums, then the input gradient), with the
//! activation's mask taken from the saved output. [`forward_add`] adds a residual before
//! the activation (a residual block's sum in the same pass); its gradient is
//! [`activation_gradient`], which also feeds the BatchNorm's backward.
//!
//! Two loop orders of the same arithmetic, by map size:
//! - `planes.rs` (maps of [`ROWS_BELOW`] pixels and more): one `(sample, channel)` plane at a
//!   time, the channel's coefficients as scalars.
//! - `rows.rs` (smaller maps): the activation as `n` rows of `c · h · w`, sums kept per
//!   position over the rows and the channel's coefficients spread along a row. Why: at 4 × 4
//!   or 2 × 2 a plane is 16 or 4 values, too short for a vector loop, and MobileNet-V2 has
//!   33 of its 52 BatchNorms on maps of 16 pixels or fewer (up to 1,280 channels).
//!
//! Channels-last activations (`BnShape::channels_last`) take the row order at every map
//! size: a sample's `h · w · c` values are one row, with the coefficients tiled along it.
//!
//! The row order writes its outputs a row at a time into memory zeroed just before
//! (`scratch::build`); the plane order fills a zeroed buffer plane by plane, as it did in
//! fl-task (a version built piece by piece and compiled `wide!` per plane measured 7–9 %
//! slower on ResNet-18 ×4). Results do not depend on the thread count: every sum runs in a
//! fixed order.

mod planes;
mod rows;

use crate::types::Act;

/// Maps of fewer pixels than this take the row order.
pub const ROWS_BELOW: usize = 64;

/// An activation's shape: `[n, c, h · w]`, or `[n, h · w, c]` when `channels_last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BnShape {
    /// Samples.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Pixels per map (`h · w`).
    pub hw: usize,
    /// Channels innermost (`[n, h, w, c]`, fl-kernels' `channels_last` convolutions); such
    /// activations always take the row order, whose rows are then `h · w` runs of `c`.
    pub channels_last: bool,
}

impl BnShape {
    /// Values per channel in the batch statistics.
    fn count(&self) -> f64 {
        (self.n * self.hw) as f64
    }

    fn len(&self) -> usize {
        self.n * self.c * self.hw
    }

    fn by_rows(&self) -> bool {
        self.channels_last || self.hw < ROWS_BELOW
    }
}

/// The gradients [`backward`] returns.
#[derive(Debug)]
pub struct BnGrads {
    /// With respect to the input, if asked for.
    pub dx: Option<Vec<f32>>,
    /// With respect to `γ`.
    pub dgamma: Vec<f32>,
    /// With respect to `β`.
    pub dbeta: Vec<f32>,
}

/// Per-channel batch mean and biased variance of `x` (two passes: the mean, then squared
/// deviations from it), summed in `f32` within a plane or over the rows and in `f64` across.
pub fn statistics(s: &BnShape, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    assert_eq!(x.len(), s.len(), "batchnorm: input is not n · c · hw");
    if s.by_rows() {
        rows::statistics(s, x)
    } else {
        planes::statistics(s, x)
    }
}

/// `act(γ · (x − mean) · inv + β)`, computed as `x · scale + shift` with `scale = γ · inv`,
/// `shift = β − mean · scale` per channel (the same in both orders, so the same bits).
pub fn forward(
    s: &BnShape,
    x: &[f32],
    mean: &[f32],
    inv: &[f32],
    gamma: &[f32],
    beta: &[f32],
    act: Act,
) -> Vec<f32> {
    forward_add(s, x, None, mean, inv, gamma, beta, act)
}

/// [`forward`] with a residual added before the activation, `act(x · scale + shift + r)`:
/// a residual block's last BatchNorm, its shortcut and the activation after the sum in one
/// pass (ResNet's `relu(bn(conv(…)) + skip)`, MobileNet-V2's `skip + bn(conv(…))`). The
/// sum is rounded as the separate ops round it (`x · scale + shift`, then `+ r`), so the bits
/// are theirs. The gradient that flows back into both the BatchNorm and `r` is
/// [`activation_gradient`]'s.
#[allow(clippy::too_many_arguments)]
pub fn forward_add(
    s: &BnShape,
    x: &[f32],
    residual: Option<&[f32]>,
    mean: &[f32],
    inv: &[f32],
    gamma: &[f32],
    beta: &[f32],
    act: Act,
) -> Vec<f32> {
    assert_eq!(x.len(), s.len(), "batchnorm: input is not n · c · hw");
    if let Some(r) = residual {
        assert_eq!(r.len(), s.len(), "batchnorm: residual is not n · c · hw");
    }
    let scale: Vec<f32> = (0..s.c).map(|ch| gamma[ch] * inv[ch]).collect();
    let shift: Vec<f32> = (0..s.c).map(|ch| beta[ch] - mean[ch] * scale[ch]).collect();
    let c = Coefficients {
        scale: &scale,
        shift: &shift,
        act,
    };
    if s.by_rows() {
        rows::forward(s, x, residual, &c)
    } else {
        planes::forward(s, x, residual, &c)
    }
}

/// The normalisation's per-channel `scale` and `shift` and the activation after it.
struct Coefficients<'a> {
    scale: &'a [f32],
    shift: &'a [f32],
    act: Act,
}

/// `dy` through the activation whose output is `y`: `dy` where it passed gradient, else 0.
/// What flows into a [`forward_add`]'s residual, and into its BatchNorm as [`backward`]'s
/// `dy` with [`Act::None`].
pub fn activation_gradient(y: &[f32], dy: &[f32], act: Act) -> Vec<f32> {
    assert_eq!(
        y.len(),
        dy.len(),
        "batchnorm: output and gradient lengths differ"
    );
    const PIECE: usize = 1 << 14;
    crate::scratch::build(y.len(), PIECE, |i, out| {
        let at = i * PIECE..i * PIECE + out.len();
        masked(out, &y[at.clone()], &dy[at], act)
    })
}

/// `y = act(y + r)` in place: the residual sum after an evaluation-mode convolution whose
/// BatchNorm was folded into it (`Epilogue` without activation), as [`forward_add`] rounds
/// it.
pub fn add_activate(y: &mut [f32], r: &[f32], act: Act) {
    use rayon::prelude::*;
    assert_eq!(y.len(), r.len(), "batchnorm: residual length");
    const PIECE: usize = 1 << 14;
    y.par_chunks_mut(PIECE)
        .zip(r.par_chunks(PIECE))
        .for_each(|(y, r)| sum_activate(y, r, act));
}

crate::simd::wide! {
    /// `y = act(y + r)`.
    fn sum_activate(y: &mut [f32], r: &[f32], act: Act) {
        let all = y.iter_mut().zip(r);
        match act {
            Act::None => all.for_each(|(y, &r)| *y += r),
            Act::Relu => all.for_each(|(y, &r)| *y = (*y + r).max(0.0)),
            Act::Relu6 => all.for_each(|(y, &r)| *y = (*y + r).clamp(0.0, 6.0)),
        }
    }
}

crate::simd::wide! {
    /// `out = dy` where the activation passed gradient at `y`, else 0.
    fn masked(out: &mut [f32], y: &[f32], dy: &[f32], act: Act) {
        match act {
            Act::None => out.copy_from_slice(dy),
            Act::Relu => masked_by::<ReluMask>(out, y, dy),
            Act::Relu6 => masked_by::<Relu6Mask>(out, y, dy),
        }
    }
}

#[inline(always)]
fn masked_by<M: Mask>(out: &mut [f32], y: &[f32], dy: &[f32]) {
    let n = out.len();
    let (y, dy) = (&y[..n], &dy[..n]);
    for j in 0..n {
        out[j] = M::dz(y[j], dy[j]);
    }
}

/// Gradients with respect to `x`, `γ` and `β` from the upstream gradient `dy`, given the
/// forward's input `x`, output `y`, batch `mean` and `inv`.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    s: &BnShape,
    x: &[f32],
    y: &[f32],
    dy: &[f32],
    mean: &[f32],
    inv: &[f32],
    gamma: &[f32],
    act: Act,
    want_dx: bool,
) -> BnGrads {
    assert_eq!(dy.len(), s.len(), "batchnorm: gradient is not n · c · hw");
    let a = saved(s, x, y, mean, inv, gamma);
    let (dbeta, dgamma) = sums(&a, dy, act);
    let dx = want_dx.then(|| {
        let mut dx = dy.to_vec();
        input_gradient_in_place(&a, &mut dx, (&dbeta, &dgamma), act);
        dx
    });
    BnGrads { dx, dgamma, dbeta }
}

/// [`backward`] with the input gradient written over `dy` (always wanted): `(dγ, dβ)`.
/// Why: a fresh activation-sized output is zeroed and written through misses, and
/// BatchNorm's backward is bound by memory on large maps (MobileNet-V2 ×0.25's 48-channel
/// 28 × 28 layer, 3 MB a tensor at batch 20); the upstream gradient is the autodiff's to
/// give away.
#[allow(clippy::too_many_arguments)]
pub fn backward_in_place(
    s: &BnShape,
    x: &[f32],
    y: &[f32],
    dy: &mut [f32],
    mean: &[f32],
    inv: &[f32],
    gamma: &[f32],
    act: Act,
) -> (Vec<f32>, Vec<f32>) {
    assert_eq!(dy.len(), s.len(), "batchnorm: gradient is not n · c · hw");
    let a = saved(s, x, y, mean, inv, gamma);
    let (dbeta, dgamma) = sums(&a, dy, act);
    input_gradient_in_place(&a, dy, (&dbeta, &dgamma), act);
    (dgamma, dbeta)
}

/// The saved tensors, their lengths checked.
fn saved<'a>(
    s: &'a BnShape,
    x: &'a [f32],
    y: &'a [f32],
    mean: &'a [f32],
    inv: &'a [f32],
    gamma: &'a [f32],
) -> Saved<'a> {
    for (name, v) in [("input", x), ("output", y)] {
        assert_eq!(v.len(), s.len(), "batchnorm: {name} is not n · c · hw");
    }
    Saved {
        s,
        x,
        y,
        mean,
        inv,
        gamma,
    }
}

/// `(dβ, dγ)` in the shape's loop order.
fn sums(a: &Saved<'_>, dy: &[f32], act: Act) -> (Vec<f32>, Vec<f32>) {
    if a.s.by_rows() {
        rows::sums(a, dy, act)
    } else {
        planes::sums(a, dy, act)
    }
}

/// The input gradient over `dy`, in the shape's loop order.
fn input_gradient_in_place(a: &Saved<'_>, dy: &mut [f32], d: (&[f32], &[f32]), act: Act) {
    if a.s.by_rows() {
        rows::input_gradient_in_place(a, dy, d, act)
    } else {
        planes::input_gradient_in_place(a, dy, d, act)
    }
}

/// What the backward pass reads besides the upstream gradient.
struct Saved<'a> {
    s: &'a BnShape,
    x: &'a [f32],
    y: &'a [f32],
    mean: &'a [f32],
    inv: &'a [f32],
    gamma: &'a [f32],
}

/// The input gradient's per-channel terms: `dx = k · (dz − mb − (x − mean) · inv · mg)`.
fn dx_terms(a: &Saved<'_>, dbeta: &[f32], dgamma: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let count = a.s.count() as f32;
    let k = (0..a.s.c).map(|ch| a.gamma[ch] * a.inv[ch]).collect();
    let mb = dbeta.iter().map(|v| v / count).collect();
    let mg = dgamma.iter().map(|v| v / count).collect();
    (k, mb, mg)
}

/// The activation's gradient mask, read off its output `y`: one type per activation, so
/// that each backward loop is compiled for one of them, branch-free and vectorised (a
/// run-time `match` inside the loop kept it scalar).
trait Mask: Sync {
    /// `g` where the activation passes gradient at this output, else 0.
    fn dz(y: f32, g: f32) -> f32;
}

struct Identity;
struct ReluMask;
struct Relu6Mask;

impl Mask for Identity {
    #[inline(always)]
    fn dz(_: f32, g: f32) -> f32 {
        g
    }
}

impl Mask for ReluMask {
    #[inline(always)]
    fn dz(y: f32, g: f32) -> f32 {
        if y > 0.0 { g } else { 0.0 }
    }
}

impl Mask for Relu6Mask {
    #[inline(always)]
    fn dz(y: f32, g: f32) -> f32 {
        if y > 0.0 && y < 6.0 { g } else { 0.0 }
    }
}

#[cfg(test)]
mod tests;
