//! BatchNorm over rows: the activation as `n` rows of `c · h · w` values, for maps of fewer
//! than [`super::ROWS_BELOW`] pixels and for channels-last activations of any size. Per-position sums run down the rows (one vector
//! add per position and sample, whatever the map size), then each channel's `h · w`
//! positions are added up; per-channel coefficients are spread along a row (channels-last:
//! along a tile of it, [`tile`]) so that normalising and the input gradient are one
//! elementwise pass per row.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::{BnShape, Coefficients, Identity, Mask, Relu6Mask, ReluMask, Saved, dx_terms};
use crate::scratch::build_uninit;
use crate::simd::wide;
use crate::types::Act;

/// Positions per parallel piece of a column sum.
const BLOCK: usize = 4096;

/// Pixels a channels-last row's per-channel coefficients are tiled over for the elementwise
/// passes (normalise, input gradient), which walk the row a tile at a time. Why not the
/// whole row: spread along it, each coefficient array was as long as a sample's activation
/// (75 KB for 96 channels on 14 × 14), five of them read per element of the input gradient
/// from L2; a tile of 16 pixels stays in L1.
const TILE_PIXELS: usize = 16;

pub(super) fn statistics(s: &BnShape, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let l = s.c * s.hw;
    let sum = column_sums(l, |acc, at| {
        for r in x.chunks_exact(l) {
            add(acc, &r[at..at + acc.len()]);
        }
    });
    let mean: Vec<f32> = per_channel(s, &sum)
        .into_iter()
        .map(|v| (v / s.count()) as f32)
        .collect();
    let mean_row = spread(s, &mean);
    let sq = column_sums(l, |acc, at| {
        let m = &mean_row[at..at + acc.len()];
        for r in x.chunks_exact(l) {
            add_squared_deviation(acc, &r[at..at + acc.len()], m);
        }
    });
    let var = per_channel(s, &sq)
        .into_iter()
        .map(|v| (v / s.count()) as f32)
        .collect();
    (mean, var)
}

pub(super) fn forward(
    s: &BnShape,
    x: &[f32],
    residual: Option<&[f32]>,
    c: &Coefficients<'_>,
) -> Vec<f32> {
    let l = s.c * s.hw;
    let (a, b) = (tile(s, c.scale), tile(s, c.shift));
    let fill = |i: usize, y: &mut [MaybeUninit<f32>]| {
        let at = i * l..(i + 1) * l;
        match residual {
            None => affine(y, &x[at], &a, &b, c.act),
            Some(r) => affine_add(y, &x[at.clone()], &r[at], &a, &b, c.act),
        }
    };
    // SAFETY: `affine` and `affine_add` write every value of their row (the piece).
    #[allow(unsafe_code)]
    unsafe {
        build_uninit(s.len(), l, fill).0
    }
}

/// `(dβ, dγ)`: per position Σ dz and Σ dz · (x − mean) over the rows, dz being `dy` through
/// the activation; then per channel, the second times 1/σ (x̂ = (x − mean)/σ).
pub(super) fn sums(a: &Saved<'_>, dy: &[f32], act: Act) -> (Vec<f32>, Vec<f32>) {
    let s = a.s;
    let l = s.c * s.hw;
    let mean = spread(s, a.mean);
    let (mut s1, mut s2) = (vec![0.0f32; l], vec![0.0f32; l]);
    s1.par_chunks_mut(BLOCK)
        .zip(s2.par_chunks_mut(BLOCK))
        .enumerate()
        .for_each(|(b, (s1, s2))| {
            let at = b * BLOCK..b * BLOCK + s1.len();
            for i in 0..s.n {
                let row = i * l + at.start..i * l + at.end;
                let inputs = Inputs {
                    x: &a.x[row.clone()],
                    y: &a.y[row.clone()],
                    dy: &dy[row],
                };
                dz_sums(s1, s2, &inputs, &mean[at.clone()], act);
            }
        });
    let dbeta: Vec<f32> = per_channel(s, &s1).into_iter().map(|v| v as f32).collect();
    let dgamma: Vec<f32> = per_channel(s, &s2)
        .into_iter()
        .zip(a.inv)
        .map(|(v, &iv)| (v * iv as f64) as f32)
        .collect();
    (dbeta, dgamma)
}

/// The input gradient written over `dy`, row by row (each element from its own `dy`).
pub(super) fn input_gradient_in_place(
    a: &Saved<'_>,
    dy: &mut [f32],
    (dbeta, dgamma): (&[f32], &[f32]),
    act: Act,
) {
    let s = a.s;
    let l = s.c * s.hw;
    let (k, mb, mg) = dx_terms(a, dbeta, dgamma);
    // `k · (dz − mb − (x − mean) · inv · mg)` as `k · dz + (x − mean) · c1 + c0`: four
    // coefficients an element instead of five. (Not `x · c1 + c0'` with the mean folded
    // into `c0'`: where a channel's mean is large against its spread, that cancels two
    // large terms — 4e-4 relative error at mean/σ ≈ 1e4 against 1e-7.)
    let c1: Vec<f32> = (0..s.c).map(|ch| -k[ch] * a.inv[ch] * mg[ch]).collect();
    let c0: Vec<f32> = (0..s.c).map(|ch| -k[ch] * mb[ch]).collect();
    let terms = Terms {
        k: tile(s, &k),
        mean: tile(s, a.mean),
        c1: tile(s, &c1),
        c0: tile(s, &c0),
    };
    dy.par_chunks_mut(l)
        .zip(a.x.par_chunks(l))
        .zip(a.y.par_chunks(l))
        .for_each(|((g, x), y)| input_gradient(g, x, y, &terms, act));
}

/// One row's (or a piece of it) saved input, output and upstream gradient.
struct Inputs<'a> {
    x: &'a [f32],
    y: &'a [f32],
    dy: &'a [f32],
}

/// The input gradient's per-channel terms, `dx = k · dz + (x − mean) · c1 + c0` (see
/// `super::dx_terms`), [`tile`]d.
struct Terms {
    k: Vec<f32>,
    mean: Vec<f32>,
    c1: Vec<f32>,
    c0: Vec<f32>,
}

/// `l` per-position sums, `f(piece, its first position)` filling pieces of [`BLOCK`] in
/// parallel.
fn column_sums(l: usize, f: impl Fn(&mut [f32], usize) + Sync) -> Vec<f32> {
    let mut acc = vec![0.0f32; l];
    acc.par_chunks_mut(BLOCK)
        .enumerate()
        .for_each(|(b, piece)| f(piece, b * BLOCK));
    acc
}

/// Each channel's `hw` positions of a row added up, in position order, in `f64`.
fn per_channel(s: &BnShape, v: &[f32]) -> Vec<f64> {
    if s.channels_last {
        let mut acc = vec![0.0f64; s.c];
        for p in v.chunks_exact(s.c) {
            for (a, &x) in acc.iter_mut().zip(p) {
                *a += x as f64;
            }
        }
        acc
    } else {
        v.chunks_exact(s.hw)
            .map(|p| p.iter().map(|&x| x as f64).sum())
            .collect()
    }
}

/// Per-channel values laid along one row: each repeated `hw` times (planes), or the
/// channels tiled `hw` times (channels-last).
fn spread(s: &BnShape, per_channel: &[f32]) -> Vec<f32> {
    if s.channels_last {
        per_channel.repeat(s.hw)
    } else {
        per_channel
            .iter()
            .flat_map(|&v| std::iter::repeat_n(v, s.hw))
            .collect()
    }
}

/// Per-channel values laid along the part of a row the elementwise passes take at a time:
/// the whole row for planes ([`spread`]), [`TILE_PIXELS`] pixels' worth channels-last.
fn tile(s: &BnShape, per_channel: &[f32]) -> Vec<f32> {
    if s.channels_last {
        per_channel.repeat(s.hw.min(TILE_PIXELS))
    } else {
        spread(s, per_channel)
    }
}

wide! {
    /// `acc += x`.
    fn add(acc: &mut [f32], x: &[f32]) {
        for (a, &x) in acc.iter_mut().zip(x) {
            *a += x;
        }
    }
}

wide! {
    /// `acc += (x − m)²`.
    fn add_squared_deviation(acc: &mut [f32], x: &[f32], m: &[f32]) {
        for ((a, &x), &m) in acc.iter_mut().zip(x).zip(m) {
            let d = x - m;
            *a += d * d;
        }
    }
}

wide! {
    /// `y = act(x · a + b)` along a row, `a` and `b` [`tile`]d (the row taken a tile at a
    /// time).
    fn affine(y: &mut [MaybeUninit<f32>], x: &[f32], a: &[f32], b: &[f32], act: Act) {
        assert_eq!(y.len(), x.len(), "batchnorm: a row and its output");
        for (y, x) in y.chunks_mut(a.len()).zip(x.chunks(a.len())) {
            let all = y.iter_mut().zip(x).zip(a).zip(b);
            let put = |y: &mut MaybeUninit<f32>, v: f32| *y = MaybeUninit::new(v);
            match act {
                Act::None => all.for_each(|(((y, &x), &a), &b)| put(y, x * a + b)),
                Act::Relu => all.for_each(|(((y, &x), &a), &b)| put(y, (x * a + b).max(0.0))),
                Act::Relu6 => {
                    all.for_each(|(((y, &x), &a), &b)| put(y, (x * a + b).clamp(0.0, 6.0)))
                }
            }
        }
    }
}

wide! {
    /// `y = act(x · a + b + r)` along a row, as [`affine`].
    fn affine_add(
        y: &mut [MaybeUninit<f32>],
        x: &[f32],
        r: &[f32],
        a: &[f32],
        b: &[f32],
        act: Act,
    ) {
        assert!(y.len() == x.len() && y.len() == r.len(), "batchnorm: a row and its output");
        let len = a.len();
        for ((y, x), r) in y.chunks_mut(len).zip(x.chunks(len)).zip(r.chunks(len)) {
            let all = y.iter_mut().zip(x).zip(r).zip(a).zip(b);
            let f = |x: f32, r: f32, a: f32, b: f32| x * a + b + r;
            let put = |y: &mut MaybeUninit<f32>, v: f32| *y = MaybeUninit::new(v);
            match act {
                Act::None => all.for_each(|((((y, &x), &r), &a), &b)| put(y, f(x, r, a, b))),
                Act::Relu => {
                    all.for_each(|((((y, &x), &r), &a), &b)| put(y, f(x, r, a, b).max(0.0)))
                }
                Act::Relu6 => all.for_each(|((((y, &x), &r), &a), &b)| {
                    put(y, f(x, r, a, b).clamp(0.0, 6.0))
                }),
            }
        }
    }
}

wide! {
    /// `s1 += dz`, `s2 += dz · (x − mean)` position by position.
    fn dz_sums(s1: &mut [f32], s2: &mut [f32], v: &Inputs<'_>, mean: &[f32], act: Act) {
        match act {
            Act::None => dz_sums_masked::<Identity>(s1, s2, v, mean),
            Act::Relu => dz_sums_masked::<ReluMask>(s1, s2, v, mean),
            Act::Relu6 => dz_sums_masked::<Relu6Mask>(s1, s2, v, mean),
        }
    }
}

#[inline(always)]
fn dz_sums_masked<M: Mask>(s1: &mut [f32], s2: &mut [f32], v: &Inputs<'_>, mean: &[f32]) {
    let n = s1.len();
    let (s2, x, y, dy, mean) = (&mut s2[..n], &v.x[..n], &v.y[..n], &v.dy[..n], &mean[..n]);
    for j in 0..n {
        let d = M::dz(y[j], dy[j]);
        s1[j] += d;
        s2[j] += d * (x[j] - mean[j]);
    }
}

wide! {
    /// `g = k · dz + (x − mean) · c1 + c0` along a row, `dz` being `g` (the upstream
    /// gradient) through the activation; the terms [`tile`]d (the row taken a tile at a
    /// time).
    fn input_gradient(g: &mut [f32], x: &[f32], y: &[f32], t: &Terms, act: Act) {
        let len = t.k.len();
        let pieces = g.chunks_mut(len).zip(x.chunks(len)).zip(y.chunks(len));
        for ((g, x), y) in pieces {
            match act {
                Act::None => input_gradient_masked::<Identity>(g, x, y, t),
                Act::Relu => input_gradient_masked::<ReluMask>(g, x, y, t),
                Act::Relu6 => input_gradient_masked::<Relu6Mask>(g, x, y, t),
            }
        }
    }
}

#[inline(always)]
fn input_gradient_masked<M: Mask>(g: &mut [f32], x: &[f32], y: &[f32], t: &Terms) {
    let n = g.len();
    let (x, y) = (&x[..n], &y[..n]);
    let (k, m, c1, c0) = (&t.k[..n], &t.mean[..n], &t.c1[..n], &t.c0[..n]);
    for j in 0..n {
        g[j] = k[j] * M::dz(y[j], g[j]) + (x[j] - m[j]) * c1[j] + c0[j];
    }
}
