//! Depthwise convolution on activations that are channels-last already (`[n, h, w, c]`):
//! forward, input gradient and filter gradient, at any map size and stride.
//!
//! Why not `nhwc.rs`'s loops: those run one multiply-add across the `c` channels per output
//! pixel and tap, which on MobileNet-V2 ×0.25's 28 × 28 maps (8 or 48 channels) is a short
//! vector and a loop turn for every 8–48 values. Here a whole output row is one run: for
//! output row `oh` and tap `(kh, kw)` the `wo · c` outputs are contiguous, and so are the
//! inputs they read once the zero-bordered input is split into its `stride²` phases (rows
//! and columns of equal remainder mod the stride, as `planar.rs` does for planes); the
//! filter tap is tiled `wo` times to match. Every run is `wo · c` long (224–1,344 floats on
//! MobileNet-V2 ×0.25's large maps).
//!
//! Results do not depend on the thread count: per-sample filter-gradient shares are summed
//! in sample order.

use std::cell::RefCell;

use super::nhwc::transpose;
use crate::scratch::{backward_pieces, build, piece, sum_partials, take, with_local};
use crate::simd::{epilogue_rows, wide};
use crate::types::{Epilogue, Geom};

/// Where one sample's phases lie: `stride²` buffers of `rows × cols` pixels of `c`
/// channels, phase `(a, b)` holding padded pixel `(y, x)` with `y % s = a`, `x % s = b` at
/// `(y / s, x / s)`.
#[derive(Clone, Copy)]
struct Phases {
    s: usize,
    rows: usize,
    cols: usize,
    c: usize,
}

impl Phases {
    fn of(g: &Geom) -> Self {
        let s = g.stride;
        Phases {
            s,
            rows: (g.h + 2 * g.pad).div_ceil(s),
            cols: (g.w + 2 * g.pad).div_ceil(s),
            c: g.cin,
        }
    }

    fn len(&self) -> usize {
        self.s * self.s * self.rows * self.cols * self.c
    }

    /// Where padded pixel `(y, x)` starts.
    fn at(&self, y: usize, x: usize) -> usize {
        let phase = (y % self.s) * self.s + x % self.s;
        ((phase * self.rows + y / self.s) * self.cols + x / self.s) * self.c
    }

    /// Where the run that tap `(kh, kw)` reads for output row `oh` starts.
    fn run(&self, oh: usize, kh: usize, kw: usize) -> usize {
        self.at(oh * self.s + kh, kw)
    }
}

/// Per-thread scratch, kept from call to call: the phases (of the input or of its
/// gradient) and the filter gradient's per-tap accumulators.
#[derive(Default)]
struct Buffers {
    phases: Vec<f32>,
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

/// One sample `[h][w][c]` into its zero-bordered phases.
fn split(g: &Geom, p: &Phases, xs: &[f32], out: &mut [f32]) {
    out.fill(0.0);
    let c = g.cin;
    for (y, row) in xs.chunks_exact(g.w * c).enumerate() {
        if p.s == 1 {
            let at = p.at(y + g.pad, g.pad);
            out[at..at + row.len()].copy_from_slice(row);
            continue;
        }
        // The row's pixels of one phase column are every `s`-th pixel from `x0`, and lie
        // side by side in that phase: one strided gather each.
        for x0 in 0..p.s.min(g.w) {
            let at = p.at(y + g.pad, x0 + g.pad);
            let count = (g.w - x0).div_ceil(p.s);
            gather(&mut out[at..at + count * c], &row[x0 * c..], c, p.s);
        }
    }
}

wide! {
    /// `dst`'s pixels (runs of `c`) from every `step`-th pixel of `src`. Element loops, not
    /// `copy_from_slice`: a `memcpy` call per 8–48-value pixel was most of the copy's time.
    fn gather(dst: &mut [f32], src: &[f32], c: usize, step: usize) {
        for (k, d) in dst.chunks_exact_mut(c).enumerate() {
            let s = &src[k * step * c..k * step * c + c];
            d.iter_mut().zip(s).for_each(|(d, &v)| *d = v);
        }
    }
}

/// The interior of the phases back into one sample `[h][w][c]` (the inverse of [`split`]).
fn join(g: &Geom, p: &Phases, phases: &[f32], dx: &mut [f32]) {
    let c = g.cin;
    for (y, row) in dx.chunks_exact_mut(g.w * c).enumerate() {
        if p.s == 1 {
            let at = p.at(y + g.pad, g.pad);
            row.copy_from_slice(&phases[at..at + row.len()]);
            continue;
        }
        for x0 in 0..p.s.min(g.w) {
            let at = p.at(y + g.pad, x0 + g.pad);
            let count = (g.w - x0).div_ceil(p.s);
            scatter(&mut row[x0 * c..], &phases[at..at + count * c], c, p.s);
        }
    }
}

wide! {
    /// Every `step`-th pixel of `dst` (runs of `c`) from `src`'s pixels: [`gather`]'s inverse.
    fn scatter(dst: &mut [f32], src: &[f32], c: usize, step: usize) {
        for (k, s) in src.chunks_exact(c).enumerate() {
            let d = &mut dst[k * step * c..k * step * c + c];
            d.iter_mut().zip(s).for_each(|(d, &v)| *d = v);
        }
    }
}

/// Depthwise forward `[n, h, w, c]` → `[n, ho, wo, c]`, then `epilogue` per channel.
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    let (p, wt) = (Phases::of(g), tiled(g, weight));
    if same_stride_one(g) {
        return build(g.n * g.out_len(), g.out_len(), |i, out| {
            same_runs(g, piece(x, i, g.in_len()), &wt, out);
            if let Some(e) = epilogue {
                epilogue_rows(e, out, g.cin);
            }
        });
    }
    build(g.n * g.out_len(), g.out_len(), |i, out| {
        with_local(&BUFFERS, |buf| {
            let phases = take(&mut buf.phases, p.len());
            split(g, &p, piece(x, i, g.in_len()), phases);
            forward_runs(g, &p, phases, &wt, out);
        });
        if let Some(e) = epilogue {
            epilogue_rows(e, out, g.cin);
        }
    })
}

wide! {
    /// One sample's outputs: per output row, the first tap's products, then the other taps
    /// added in `(kh, kw)` order. (Summing a 16-lane chunk over the taps in registers and
    /// storing it once measured 2–6 % slower on MobileNet-V2 ×0.25: a tap's run per pass
    /// vectorises without bounds checks.)
    fn forward_runs(g: &Geom, p: &Phases, phases: &[f32], wt: &[f32], out: &mut [f32]) {
        let (k, len) = (g.k, g.wo() * g.cin);
        for (oh, o) in out.chunks_exact_mut(len).enumerate() {
            for tap in 0..k * k {
                let at = p.run(oh, tap / k, tap % k);
                let (src, w) = (&phases[at..at + len], &wt[tap * len..(tap + 1) * len]);
                if tap == 0 {
                    o.iter_mut().zip(src).zip(w).for_each(|((o, x), w)| *o = x * w);
                } else {
                    o.iter_mut().zip(src).zip(w).for_each(|((o, x), w)| *o += x * w);
                }
            }
        }
    }
}

wide! {
    /// `acc[tap] += dy_row · x_run` over a sample's output rows (`acc` `[tap][wo · c]`).
    fn filter_runs(g: &Geom, p: &Phases, phases: &[f32], gs: &[f32], acc: &mut [f32]) {
        let (k, len) = (g.k, g.wo() * g.cin);
        for (oh, d) in gs.chunks_exact(len).enumerate() {
            for (tap, a) in acc.chunks_exact_mut(len).enumerate() {
                let at = p.run(oh, tap / k, tap % k);
                let src = &phases[at..at + len];
                a.iter_mut().zip(src).zip(d).for_each(|((a, x), d)| *a += x * d);
            }
        }
    }
}

wide! {
    /// `dphases[run] += w_tap · dy_row` for every output row and tap.
    fn input_runs(g: &Geom, p: &Phases, gs: &[f32], wt: &[f32], dphases: &mut [f32]) {
        let (k, len) = (g.k, g.wo() * g.cin);
        for (oh, d) in gs.chunks_exact(len).enumerate() {
            for tap in 0..k * k {
                let at = p.run(oh, tap / k, tap % k);
                let w = &wt[tap * len..(tap + 1) * len];
                let dst = &mut dphases[at..at + len];
                dst.iter_mut().zip(w).zip(d).for_each(|((o, w), d)| *o += w * d);
            }
        }
    }
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

/// Input and filter gradients, each only if asked for.
pub(crate) fn backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let (c, kk) = (g.cin, g.k * g.k);
    let p = Phases::of(g);
    // With "same" padding at stride 1 the input gradient is the output gradient convolved
    // with the flipped filters: the forward's runs, each output written once, instead of
    // nine read-modify-write passes into zeroed phases and a copy out.
    let gather = same_stride_one(g);
    let wt = if gather {
        tiled(g, &flipped(weight, kk))
    } else {
        tiled(g, weight)
    };
    let sample = |i: usize, dx: Option<&mut [f32]>| {
        let (xs, gs) = (piece(x, i, g.in_len()), piece(grad_out, i, g.out_len()));
        with_local(&BUFFERS, |buf| {
            sample_backward(g, &p, xs, &wt, gs, dx, want_dw, buf)
        })
    };
    let (dx, shares) = backward_pieces(want_dx, g.n * g.in_len(), g.in_len(), sample);
    // The shares summed in sample order, `[tap][channel]` back to the filters'
    // `[channel][tap]`.
    let dw = want_dw.then(|| transpose(&sum_partials(shares, kk * c), kk, c));
    (dx, dw)
}

/// One sample's input gradient (into `dx`) and filter-gradient share (`[tap][c]`); `wt`
/// are the tiled filters, flipped where [`same_stride_one`].
#[allow(clippy::too_many_arguments)]
fn sample_backward(
    g: &Geom,
    p: &Phases,
    xs: &[f32],
    wt: &[f32],
    gs: &[f32],
    dx: Option<&mut [f32]>,
    want_dw: bool,
    buf: &mut Buffers,
) -> Option<Vec<f32>> {
    let (c, kk, len) = (g.cin, g.k * g.k, g.wo() * g.cin);
    let Buffers { phases, acc } = buf;
    // One buffer serves the input's phases (filter gradient, taken first) and then the
    // input gradient's.
    let same = same_stride_one(g);
    let phases = take(phases, if same { 0 } else { p.len() });
    let share = want_dw.then(|| {
        let acc = take(acc, kk * len);
        acc.fill(0.0);
        if same {
            same_filter_runs(g, xs, gs, acc);
        } else {
            split(g, p, xs, phases);
            filter_runs(g, p, phases, gs, acc);
        }
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
        if same {
            // `wt` holds the flipped filters; the output gradient is the input's shape.
            same_runs(g, gs, wt, dx);
        } else {
            phases.fill(0.0);
            input_runs(g, p, gs, wt, phases);
            join(g, p, phases, dx);
        }
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
