//! Depthwise convolution one `(sample, channel)` plane at a time: forward, input gradient
//! and filter gradient, for maps larger than `nhwc.rs` takes (MobileNet-V2's
//! 28 × 28 and 14 × 14 stages).
//!
//! Each plane is copied into zero-padded phase planes (one per stride phase), so that every
//! tap is one contiguous multiply-add over an output-sized run. The filter gradient's
//! per-plane shares are summed in plane order, so results do not depend on the thread count.

use rayon::prelude::*;

use crate::scratch::zeroed;
use crate::simd::wide;
use crate::types::{Epilogue, Geom};

/// Scratch for the depthwise kernels. The zero-padded input plane is split into
/// `stride × stride` phase planes (`phase (a, b)` holds padded pixels `(s·r + a, s·c + b)`),
/// each `wq` wide. Tap `(kh, kw)` then reads phase `(kh mod s, kw mod s)` at the fixed offset
/// `(kh / s)·wq + kw / s`, so it is one contiguous multiply-add over an output-sized run
/// (computing a few throw-away columns per row) instead of one short strided loop per row.
struct Padded {
    /// Phase row length (a phase has `ho + (k − 1) / stride + 1` rows).
    wq: usize,
    /// The phase planes, `stride² × hq × wq`; positions no input pixel maps to stay zero.
    input: Vec<f32>,
    /// An output-sized plane, `ho × wq`; where it holds a gradient, its extra columns stay
    /// zero.
    out: Vec<f32>,
    /// Where padded row `py` and padded column `px` go: pixel `(py, px)` is at
    /// `rows[py] + cols[px]` (the phase index separates into a row part and a column part).
    /// Tables, because computing it per pixel meant three integer divisions by a run-time
    /// stride, which made copying a stride-2 plane in cost more than convolving it.
    rows: Vec<usize>,
    cols: Vec<usize>,
    /// For a stride above 1: each phase column's first input pixel `x0` and `cols[x0 + pad]`.
    firsts: Vec<(usize, usize)>,
}

impl Padded {
    fn new(g: &Geom) -> Self {
        let s = g.stride;
        let wq = (g.w + 2 * g.pad).div_ceil(s);
        // Enough rows that the last tap's run of `ho · wq` stays inside its phase.
        let hq = g.ho() + (g.k - 1) / s + 1;
        let phase = hq * wq;
        // Enough entries for every padded pixel and every tap.
        let rows = (0..(g.h + 2 * g.pad).max(g.k))
            .map(|py| (py % s) * s * phase + (py / s) * wq)
            .collect();
        let cols = (0..(g.w + 2 * g.pad).max(g.k))
            .map(|px| (px % s) * phase + px / s)
            .collect::<Vec<_>>();
        let firsts = (0..s.min(g.w))
            .map(|b| (b + s - g.pad % s) % s)
            .filter(|&x0| x0 < g.w)
            .map(|x0| (x0, cols[x0 + g.pad]))
            .collect();
        Padded {
            wq,
            input: vec![0.0; s * s * phase],
            out: vec![0.0; g.ho() * wq],
            rows,
            cols,
            firsts,
        }
    }

    /// Index in `input` of padded pixel `(py, px)`.
    fn at(&self, py: usize, px: usize) -> usize {
        self.rows[py] + self.cols[px]
    }

    /// Where tap `(kh, kw)`'s run starts in `input`.
    fn tap(&self, kh: usize, kw: usize) -> usize {
        self.at(kh, kw)
    }

    /// Scatters `plane` (`h × w`) into the phase planes; nothing else is written, so the
    /// padding stays zero.
    fn load_input(&mut self, g: &Geom, plane: &[f32]) {
        let s = g.stride;
        if s == 1 {
            for (y, row) in plane.chunks_exact(g.w).enumerate() {
                let at = self.at(y + g.pad, g.pad);
                self.input[at..at + g.w].copy_from_slice(row);
            }
            return;
        }
        // One strided copy per phase column: pixels x ≡ b − pad (mod s) land side by side
        // in phase row (y + pad, b).
        let Padded {
            input,
            rows,
            firsts,
            ..
        } = self;
        for (y, row) in plane.chunks_exact(g.w).enumerate() {
            let r = rows[y + g.pad];
            for &(x0, col) in firsts.iter() {
                let dst = &mut input[r + col..];
                for (d, v) in dst.iter_mut().zip(row[x0..].iter().step_by(s)) {
                    *d = *v;
                }
            }
        }
    }

    /// Gathers the input-gradient plane back out of the phase planes.
    fn store_input(&self, g: &Geom, plane: &mut [f32]) {
        for (y, row) in plane.chunks_exact_mut(g.w).enumerate() {
            if g.stride == 1 {
                let at = self.at(y + g.pad, g.pad);
                row.copy_from_slice(&self.input[at..at + g.w]);
            } else {
                let r = self.rows[y + g.pad];
                for (v, c) in row.iter_mut().zip(&self.cols[g.pad..]) {
                    *v = self.input[r + c];
                }
            }
        }
    }

    /// Copies `plane` (`ho × wo`) into `out`'s first `wo` columns; the rest stay zero.
    fn load_out(&mut self, g: &Geom, plane: &[f32]) {
        let wo = g.wo();
        for (r, row) in plane.chunks_exact(wo).enumerate() {
            self.out[r * self.wq..r * self.wq + wo].copy_from_slice(row);
        }
    }
}

wide! {
    /// `acc[i] += w · src[i]` over equal lengths, vectorised by the compiler for the widest
    /// vectors (the same bits on any: one multiply and one add per element).
    #[inline(never)]
    fn axpy(acc: &mut [f32], w: f32, src: &[f32]) {
        for (a, s) in acc.iter_mut().zip(src) {
            *a += w * *s;
        }
    }
}

/// Depthwise forward, one `(sample, channel)` plane at a time: each channel convolved with
/// its own `k × k` filter, then `epilogue`.
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    let (ho, wo, kk) = (g.ho(), g.wo(), g.k * g.k);
    let plane_in = g.h * g.w;
    let mut out = zeroed(g.n * g.out_len());
    out.par_chunks_mut(ho * wo)
        .zip(x.par_chunks(plane_in))
        .enumerate()
        .for_each_init(
            || Padded::new(g),
            |pad, (i, (o, xp))| {
                let c = i % g.cin;
                depthwise_plane_forward(g, pad, xp, &weight[c * kk..(c + 1) * kk], o);
                // The plane is still in cache: finish it here.
                if let Some(e) = epilogue {
                    e.apply(c, o);
                }
            },
        );
    out
}

#[inline(never)]
fn depthwise_plane_forward(g: &Geom, pad: &mut Padded, x: &[f32], wk: &[f32], out: &mut [f32]) {
    let (ho, wo, k, wq) = (g.ho(), g.wo(), g.k, pad.wq);
    pad.load_input(g, x);
    let len = ho * wq;
    // The first tap sets the accumulator, so it is never cleared.
    let first = pad.tap(0, 0);
    scale(&mut pad.out[..len], wk[0], &pad.input[first..first + len]);
    for kh in 0..k {
        for kw in 0..k {
            if kh + kw == 0 {
                continue;
            }
            let at = pad.tap(kh, kw);
            axpy(
                &mut pad.out[..len],
                wk[kh * k + kw],
                &pad.input[at..at + len],
            );
        }
    }
    for (r, row) in out.chunks_exact_mut(wo).enumerate() {
        row.copy_from_slice(&pad.out[r * wq..r * wq + wo]);
    }
}

/// `acc[i] = w · src[i]`.
fn scale(acc: &mut [f32], w: f32, src: &[f32]) {
    for (a, s) in acc.iter_mut().zip(src) {
        *a = w * *s;
    }
}

/// Input gradient: every tap adds the weighted output gradient back at its offset.
#[inline(never)]
fn depthwise_plane_dx(g: &Geom, pad: &mut Padded, gout: &[f32], wk: &[f32], dx: &mut [f32]) {
    let (ho, k) = (g.ho(), g.k);
    pad.load_out(g, gout);
    let len = ho * pad.wq;
    pad.input.fill(0.0);
    for kh in 0..k {
        for kw in 0..k {
            let at = pad.tap(kh, kw);
            axpy(&mut pad.input[at..at + len], wk[kh * k + kw], &pad.out);
        }
    }
    pad.store_input(g, dx);
}

/// This plane's share of the filter gradient: one dot product per tap.
#[inline(never)]
fn depthwise_plane_dw(g: &Geom, pad: &mut Padded, x: &[f32], gout: &[f32], share: &mut [f32]) {
    let (ho, k) = (g.ho(), g.k);
    pad.load_input(g, x);
    pad.load_out(g, gout);
    let len = ho * pad.wq;
    for kh in 0..k {
        for kw in 0..k {
            let at = pad.tap(kh, kw);
            share[kh * k + kw] = dot(&pad.input[at..at + len], &pad.out);
        }
    }
}

/// Depthwise gradients: per (sample, channel) plane the input gradient and that plane's share
/// of the filter gradient, then the shares summed over the batch.
pub(crate) fn backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let (ho, wo, kk) = (g.ho(), g.wo(), g.k * g.k);
    let plane_in = g.h * g.w;
    let planes = g.n * g.cin;
    let mut dx = want_dx.then(|| zeroed(g.n * g.in_len()));
    let mut shares = vec![0.0f32; if want_dw { planes * kk } else { 0 }];
    if let Some(dx) = dx.as_mut() {
        dx.par_chunks_mut(plane_in)
            .zip(grad_out.par_chunks(ho * wo))
            .enumerate()
            .for_each_init(
                || Padded::new(g),
                |pad, (i, (d, go))| {
                    let c = i % g.cin;
                    depthwise_plane_dx(g, pad, go, &weight[c * kk..(c + 1) * kk], d);
                },
            );
    }
    if want_dw {
        shares
            .par_chunks_mut(kk)
            .zip(x.par_chunks(plane_in))
            .zip(grad_out.par_chunks(ho * wo))
            .for_each_init(
                || Padded::new(g),
                |pad, ((s, xp), go)| depthwise_plane_dw(g, pad, xp, go, s),
            );
    }
    let dw = want_dw.then(|| {
        let mut dw = vec![0.0f32; g.cin * kk];
        for (i, s) in shares.chunks(kk).enumerate() {
            let c = i % g.cin;
            for (t, v) in dw[c * kk..(c + 1) * kk].iter_mut().zip(s) {
                *t += *v;
            }
        }
        dw
    });
    (dx, dw)
}

wide! {
/// A dot product in eight lanes, so that the compiler vectorises it.
#[inline(never)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    let tail: f32 = ar.iter().zip(br).map(|(x, y)| x * y).sum();
    lanes.iter().sum::<f32>() + tail
}
}
