//! Depthwise convolution on activations that are channels-last already (`[n, h, w, c]`):
//! forward, input gradient and filter gradient. "Same" stride-1 layers run here; the others
//! (stride 2) one pixel at a time in `pixels.rs`.
//!
//! Why not `nhwc.rs`'s loops: those run one multiply-add across the `c` channels per output
//! pixel and tap, which on MobileNet-V2 ×0.25's 28 × 28 maps (8 or 48 channels) is a short
//! vector and a loop turn for every 8–48 values. Here a whole output row is one run: for
//! output row `oh` and tap `(kh, kw)` the `wo · c` outputs are contiguous, and so are the
//! inputs they read, cut at the map's border; the filter tap is tiled `wo` times to match.
//! Every run is up to `w · c` long (224–1,344 floats on MobileNet-V2 ×0.25's large maps).
//!
//! Results do not depend on the thread count: per-sample filter-gradient shares are summed
//! in sample order.

use std::cell::RefCell;

use super::pixels;
use crate::layout::transpose;
use crate::scratch::{backward_pieces, build, piece, sum_partials, take, with_local};
use crate::simd::{epilogue_rows, wide};
use crate::types::{Epilogue, Geom};

/// Per-thread scratch, kept from call to call: the filter gradient's per-tap accumulators.
#[derive(Default)]
struct Buffers {
    acc: Vec<f32>,
}

thread_local! {
    static BUFFERS: RefCell<Buffers> = RefCell::new(Buffers::default());
}

/// The filters as runs: tap `t`'s `c` weights tiled `wo` times, `[tap][wo · c]`.
fn tiled(g: &Geom, weight: &[f32]) -> Vec<f32> {
    let wt = transpose(weight, g.cin, g.k * g.k);
    // Extended a tap at a time: collected through `flat_map` it was pushed value by value
    // (1 % of a MobileNet-V2 ×0.25 training step).
    let mut out = Vec::with_capacity(wt.len() * g.wo());
    for t in wt.chunks_exact(g.cin) {
        for _ in 0..g.wo() {
            out.extend_from_slice(t);
        }
    }
    out
}

/// Depthwise forward `[n, h, w, c]` → `[n, ho, wo, c]`, then `epilogue` per channel; other
/// than "same" stride-1 layers by pixel (`pixels.rs`).
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    if !same_stride_one(g) {
        return pixels::forward(g, x, weight, epilogue);
    }
    let wt = tiled(g, weight);
    build(g.n * g.out_len(), g.out_len(), |i, out| {
        same_runs(g, piece(x, i, g.in_len()), &wt, out);
        if let Some(e) = epilogue {
            epilogue_rows(e, out, g.cin);
        }
    })
}

/// Stride 1 with "same" padding: output maps the size of the input.
fn same_stride_one(g: &Geom) -> bool {
    g.stride == 1 && 2 * g.pad + 1 == g.k
}

/// Where tap `(kh, kw)` meets output row `oh` of a [`same_stride_one`] layer, on the
/// unbordered input: the input row, and the run's first output pixel, first input pixel
/// and length in pixels (`None` if the tap falls wholly in the border).
fn same_run(g: &Geom, oh: usize, kh: usize, kw: usize) -> Option<(usize, usize, usize, usize)> {
    let iy = (oh + kh).checked_sub(g.pad).filter(|&iy| iy < g.h)?;
    let (o0, i0) = (g.pad.saturating_sub(kw), kw.saturating_sub(g.pad));
    let n = g.w.checked_sub(o0.max(i0)).filter(|&n| n > 0)?;
    Some((iy, o0, i0, n))
}

wide! {
    /// [`forward_runs`] for a [`same_stride_one`] layer straight off one unbordered sample
    /// `[h][w][c]`: each tap's run is cut to the pixels whose input is inside the map, so
    /// there are no phases to copy in. Per output row: zeros, then the taps added in
    /// `(kh, kw)` order — the same sums as over the bordered input, less the border's
    /// products, which are exact zeros.
    fn same_runs(g: &Geom, xs: &[f32], wt: &[f32], out: &mut [f32]) {
        let (k, c, len) = (g.k, g.cin, g.w * g.cin);
        for (oh, o) in out.chunks_exact_mut(len).enumerate() {
            o.fill(0.0);
            for tap in 0..k * k {
                let Some((iy, o0, i0, n)) = same_run(g, oh, tap / k, tap % k) else {
                    continue;
                };
                let dst = &mut o[o0 * c..(o0 + n) * c];
                let src = &xs[iy * len + i0 * c..iy * len + (i0 + n) * c];
                let w = &wt[tap * len + o0 * c..tap * len + (o0 + n) * c];
                dst.iter_mut().zip(src).zip(w).for_each(|((o, x), w)| *o += x * w);
            }
        }
    }
}

wide! {
    /// [`filter_runs`] for a [`same_stride_one`] layer, off the unbordered sample.
    fn same_filter_runs(g: &Geom, xs: &[f32], gs: &[f32], acc: &mut [f32]) {
        let (k, c, len) = (g.k, g.cin, g.w * g.cin);
        for (oh, d) in gs.chunks_exact(len).enumerate() {
            for (tap, a) in acc.chunks_exact_mut(len).enumerate() {
                let Some((iy, o0, i0, n)) = same_run(g, oh, tap / k, tap % k) else {
                    continue;
                };
                let a = &mut a[o0 * c..(o0 + n) * c];
                let src = &xs[iy * len + i0 * c..iy * len + (i0 + n) * c];
                let d = &d[o0 * c..(o0 + n) * c];
                a.iter_mut().zip(src).zip(d).for_each(|((a, x), d)| *a += x * d);
            }
        }
    }
}

/// Each channel's `kk` taps in reverse order (the filter rotated by 180°).
fn flipped(weight: &[f32], kk: usize) -> Vec<f32> {
    weight
        .chunks_exact(kk)
        .flat_map(|f| f.iter().rev().copied())
        .collect()
}

/// Input and filter gradients, each only if asked for; other than "same" stride-1 layers by
/// pixel (`pixels.rs`).
pub(crate) fn backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    if !same_stride_one(g) {
        return pixels::backward(g, x, weight, grad_out, want_dx, want_dw);
    }
    let (c, kk) = (g.cin, g.k * g.k);
    // The input gradient is the output gradient convolved with the flipped filters: the
    // forward's runs, each output written once.
    let wt = tiled(g, &flipped(weight, kk));
    let sample = |i: usize, dx: Option<&mut [f32]>| {
        let (xs, gs) = (piece(x, i, g.in_len()), piece(grad_out, i, g.out_len()));
        with_local(&BUFFERS, |buf| {
            sample_backward(g, xs, &wt, gs, dx, want_dw, buf)
        })
    };
    let (dx, shares) = backward_pieces(want_dx, g.n * g.in_len(), g.in_len(), sample);
    // The shares summed in sample order, `[tap][channel]` back to the filters'
    // `[channel][tap]`.
    let dw = want_dw.then(|| transpose(&sum_partials(shares, kk * c), kk, c));
    (dx, dw)
}

/// One sample's input gradient (into `dx`) and filter-gradient share (`[tap][c]`); `wt`
/// are the flipped filters, tiled.
fn sample_backward(
    g: &Geom,
    xs: &[f32],
    wt: &[f32],
    gs: &[f32],
    dx: Option<&mut [f32]>,
    want_dw: bool,
    buf: &mut Buffers,
) -> Option<Vec<f32>> {
    let (c, kk, len) = (g.cin, g.k * g.k, g.wo() * g.cin);
    let share = want_dw.then(|| {
        let acc = take(&mut buf.acc, kk * len);
        acc.fill(0.0);
        same_filter_runs(g, xs, gs, acc);
        // Each tap's run summed over the row's pixels, per channel.
        let mut share = vec![0.0f32; kk * c];
        for (s, a) in share.chunks_exact_mut(c).zip(acc.chunks_exact(len)) {
            for px in a.chunks_exact(c) {
                s.iter_mut().zip(px).for_each(|(s, v)| *s += v);
            }
        }
        share
    });
    if let Some(dx) = dx {
        // The output gradient has the input's shape.
        same_runs(g, gs, wt, dx);
    }
    share
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{check_conv, depthwise3x3};

    /// Output and both gradients (together and each alone) against the f64 definition,
    /// channels-last, on 3 × 3 layers from 28 × 28 down to 2 × 2, stride 1 and 2, odd sizes.
    #[test]
    fn matches_the_definition() {
        let cases = [
            (2, 8, 28, 1),
            (2, 48, 28, 2),
            (3, 16, 7, 1),
            (2, 24, 7, 2),
            (2, 9, 2, 1),
            (3, 5, 5, 2),
            (2, 144, 4, 2),
        ];
        for (seed, (n, c, size, stride)) in cases.into_iter().enumerate() {
            let g = depthwise3x3(n, c, size, stride);
            check_conv(&g, seed as u64 * 7, Some(forward), backward, true);
        }
    }
}
