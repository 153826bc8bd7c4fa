//! BatchNorm one `(sample, channel)` plane at a time: for maps of
//! [`super::ROWS_BELOW`] pixels and more, where a plane is long enough for a vector loop.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::{BnShape, Coefficients, Identity, Mask, Relu6Mask, ReluMask, Saved, dx_terms};
use crate::scratch::build_uninit;
use crate::types::Act;

/// The `hw`-long planes of channel `ch`, one per sample.
fn planes<'a>(s: &BnShape, data: &'a [f32], ch: usize) -> impl Iterator<Item = &'a [f32]> {
    let (c, hw) = (s.c, s.hw);
    (0..s.n).map(move |i| &data[(i * c + ch) * hw..(i * c + ch + 1) * hw])
}

/// Eight running sums of `f(v)`, added up at the end: independent lanes let the compiler
/// vectorise a reduction it must otherwise run one add at a time.
fn lane_sum(p: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = p.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    for x in chunks {
        for i in 0..8 {
            lanes[i] += f(x[i]);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

pub(super) fn statistics(s: &BnShape, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let stats: Vec<(f32, f32)> = (0..s.c)
        .into_par_iter()
        .map(|ch| {
            let sum: f64 = planes(s, x, ch).map(|p| lane_sum(p, |v| v) as f64).sum();
            let mean = (sum / s.count()) as f32;
            let sq: f64 = planes(s, x, ch)
                .map(|p| {
                    lane_sum(p, |v| {
                        let d = v - mean;
                        d * d
                    }) as f64
                })
                .sum();
            (mean, (sq / s.count()) as f32)
        })
        .collect();
    stats.into_iter().unzip()
}

pub(super) fn forward(
    s: &BnShape,
    x: &[f32],
    residual: Option<&[f32]>,
    c: &Coefficients<'_>,
) -> Vec<f32> {
    let fill = |i: usize, y: &mut [MaybeUninit<f32>]| {
        let ch = i % s.c;
        let (a, b) = (c.scale[ch], c.shift[ch]);
        let x = &x[i * s.hw..(i + 1) * s.hw];
        match residual {
            None => plane(y, x.iter(), |x| x * a + b, c.act),
            Some(r) => {
                let r = &r[i * s.hw..(i + 1) * s.hw];
                plane(y, x.iter().zip(r), |(x, r)| x * a + b + r, c.act)
            }
        }
    };
    // SAFETY: `plane` writes every value of its plane (the piece): `x` is as long.
    #[allow(unsafe_code)]
    unsafe {
        build_uninit(s.len(), s.hw, fill).0
    }
}

/// `y = act(f(v))` for the values `v` of a plane, `v` as long as `y`.
#[inline(always)]
fn plane<V>(
    y: &mut [MaybeUninit<f32>],
    v: impl ExactSizeIterator<Item = V>,
    f: impl Fn(V) -> f32,
    act: Act,
) {
    assert_eq!(y.len(), v.len(), "batchnorm: a plane and its output");
    let pairs = y.iter_mut().zip(v);
    let put = |y: &mut MaybeUninit<f32>, v: f32| *y = MaybeUninit::new(v);
    match act {
        Act::None => pairs.for_each(|(y, v)| put(y, f(v))),
        Act::Relu => pairs.for_each(|(y, v)| put(y, f(v).max(0.0))),
        Act::Relu6 => pairs.for_each(|(y, v)| put(y, f(v).clamp(0.0, 6.0))),
    }
}

/// `(dβ, dγ)`: per channel Σ dz and Σ dz · x̂, dz being `dy` through the activation.
pub(super) fn sums(a: &Saved<'_>, dy: &[f32], act: Act) -> (Vec<f32>, Vec<f32>) {
    match act {
        Act::None => sums_masked::<Identity>(a, dy),
        Act::Relu => sums_masked::<ReluMask>(a, dy),
        Act::Relu6 => sums_masked::<Relu6Mask>(a, dy),
    }
}

fn sums_masked<M: Mask>(a: &Saved<'_>, dy: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let s = a.s;
    let sums: Vec<(f32, f32)> = (0..s.c)
        .into_par_iter()
        .map(|ch| {
            let (m, iv) = (a.mean[ch], a.inv[ch]);
            let (mut sdz, mut sdzx) = (0.0f64, 0.0f64);
            let all = planes(s, a.x, ch)
                .zip(planes(s, a.y, ch))
                .zip(planes(s, dy, ch));
            for ((xp, yp), gp) in all {
                // Σ dz and Σ dz·(x − mean) in eight independent lanes each, so they
                // vectorise.
                let (mut l1, mut l2) = ([0.0f32; 8], [0.0f32; 8]);
                let (xc, yc, gc) = (xp.chunks_exact(8), yp.chunks_exact(8), gp.chunks_exact(8));
                let (mut t1, mut t2) = (0.0f32, 0.0f32);
                let tail = xc
                    .remainder()
                    .iter()
                    .zip(yc.remainder())
                    .zip(gc.remainder());
                for ((&x, &y), &g) in tail {
                    let d = M::dz(y, g);
                    t1 += d;
                    t2 += d * (x - m);
                }
                for ((x8, y8), g8) in xc.zip(yc).zip(gc) {
                    for i in 0..8 {
                        let d = M::dz(y8[i], g8[i]);
                        l1[i] += d;
                        l2[i] += d * (x8[i] - m);
                    }
                }
                sdz += (l1.iter().sum::<f32>() + t1) as f64;
                // x̂ = (x − mean)/σ: the 1/σ is applied once per plane.
                sdzx += (l2.iter().sum::<f32>() + t2) as f64 * iv as f64;
            }
            (sdz as f32, sdzx as f32)
        })
        .collect();
    sums.into_iter().unzip()
}

/// The input gradient written over `dy`, plane by plane (each element from its own `dy`).
pub(super) fn input_gradient_in_place(
    a: &Saved<'_>,
    dy: &mut [f32],
    (dbeta, dgamma): (&[f32], &[f32]),
    act: Act,
) {
    match act {
        Act::None => in_place_masked::<Identity>(a, dy, dbeta, dgamma),
        Act::Relu => in_place_masked::<ReluMask>(a, dy, dbeta, dgamma),
        Act::Relu6 => in_place_masked::<Relu6Mask>(a, dy, dbeta, dgamma),
    }
}

fn in_place_masked<M: Mask>(a: &Saved<'_>, dy: &mut [f32], dbeta: &[f32], dgamma: &[f32]) {
    let s = a.s;
    let (k, mb, mg) = dx_terms(a, dbeta, dgamma);
    dy.par_chunks_mut(s.hw)
        .zip(a.x.par_chunks(s.hw))
        .zip(a.y.par_chunks(s.hw))
        .enumerate()
        .for_each(|(i, ((g, x), y))| {
            let ch = i % s.c;
            let (m, iv) = (a.mean[ch], a.inv[ch]);
            let (k, mb, mg) = (k[ch], mb[ch], mg[ch]);
            for ((d, &x), &y) in g.iter_mut().zip(x).zip(y) {
                *d = k * (M::dz(y, *d) - mb - (x - m) * iv * mg);
            }
        });
}
