//! BatchNorm one `(sample, channel)` plane at a time: for maps of
//! [`super::ROWS_BELOW`] pixels and more, where a plane is long enough for a vector loop.

use rayon::prelude::*;

use super::{BnGrads, BnShape, Identity, Mask, Relu6Mask, ReluMask, Saved, dx_terms};
use crate::scratch::build;
use crate::simd::wide;
use crate::types::Act;

/// The `hw`-long planes of channel `ch`, one per sample.
fn planes<'a>(s: &BnShape, data: &'a [f32], ch: usize) -> impl Iterator<Item = &'a [f32]> {
    let (c, hw) = (s.c, s.hw);
    (0..s.n).map(move |i| &data[(i * c + ch) * hw..(i * c + ch + 1) * hw])
}

/// Independent running sums in a lane sum: one AVX-512 register of `f32`.
const LANES: usize = 16;

/// [`LANES`] running sums of `f(v)`, added up at the end: independent lanes let the
/// compiler vectorise a reduction it must otherwise run one add at a time.
#[inline(always)]
fn lane_sum(p: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let chunks = p.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    for x in chunks {
        for i in 0..LANES {
            lanes[i] += f(x[i]);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

wide! {
    /// Σ p.
    fn plane_sum(p: &[f32]) -> f32 {
        lane_sum(p, |v| v)
    }
}

wide! {
    /// Σ (p − m)².
    fn plane_squares(p: &[f32], m: f32) -> f32 {
        lane_sum(p, |v| {
            let d = v - m;
            d * d
        })
    }
}

wide! {
    /// `y = act(x · a + b)`.
    fn affine(y: &mut [f32], x: &[f32], a: f32, b: f32, act: Act) {
        let pairs = y.iter_mut().zip(x);
        match act {
            Act::None => pairs.for_each(|(y, &x)| *y = x * a + b),
            Act::Relu => pairs.for_each(|(y, &x)| *y = (x * a + b).max(0.0)),
            Act::Relu6 => pairs.for_each(|(y, &x)| *y = (x * a + b).clamp(0.0, 6.0)),
        }
    }
}

pub(super) fn statistics(s: &BnShape, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let stats: Vec<(f32, f32)> = (0..s.c)
        .into_par_iter()
        .map(|ch| {
            let sum: f64 = planes(s, x, ch).map(|p| plane_sum(p) as f64).sum();
            let mean = (sum / s.count()) as f32;
            let sq: f64 = planes(s, x, ch)
                .map(|p| plane_squares(p, mean) as f64)
                .sum();
            (mean, (sq / s.count()) as f32)
        })
        .collect();
    stats.into_iter().unzip()
}

pub(super) fn forward(s: &BnShape, x: &[f32], scale: &[f32], shift: &[f32], act: Act) -> Vec<f32> {
    build(s.len(), s.hw, |i, y| {
        let ch = i % s.c;
        affine(y, &x[i * s.hw..(i + 1) * s.hw], scale[ch], shift[ch], act)
    })
}

pub(super) fn backward(a: &Saved<'_>, act: Act, want_dx: bool) -> BnGrads {
    let s = a.s;
    // Per channel: Σ dz and Σ dz · x̂, where dz is dy through the activation.
    let sums: Vec<(f32, f32)> = (0..s.c)
        .into_par_iter()
        .map(|ch| {
            let (mut sdz, mut sdzx) = (0.0f64, 0.0f64);
            let all = planes(s, a.x, ch)
                .zip(planes(s, a.y, ch))
                .zip(planes(s, a.dy, ch));
            for ((x, y), dy) in all {
                let (s1, s2) = dz_sums(&Plane { x, y, dy }, a.mean[ch], act);
                sdz += s1 as f64;
                // x̂ = (x − mean)/σ: the 1/σ is applied once per plane.
                sdzx += s2 as f64 * a.inv[ch] as f64;
            }
            (sdz as f32, sdzx as f32)
        })
        .collect();
    let (dbeta, dgamma): (Vec<f32>, Vec<f32>) = sums.into_iter().unzip();
    let dx = want_dx.then(|| {
        let (k, mb, mg) = dx_terms(a, &dbeta, &dgamma);
        build(s.len(), s.hw, |i, dx| {
            let ch = i % s.c;
            let at = i * s.hw..(i + 1) * s.hw;
            let plane = Plane {
                x: &a.x[at.clone()],
                y: &a.y[at.clone()],
                dy: &a.dy[at],
            };
            let t = [k[ch], mb[ch], a.mean[ch], a.inv[ch], mg[ch]];
            input_gradient(dx, &plane, t, act)
        })
    });
    BnGrads { dx, dgamma, dbeta }
}

/// One plane's saved input, output and upstream gradient.
struct Plane<'a> {
    x: &'a [f32],
    y: &'a [f32],
    dy: &'a [f32],
}

wide! {
    /// Σ dz and Σ dz · (x − mean) over a plane, in [`LANES`] independent lanes each.
    fn dz_sums(p: &Plane<'_>, mean: f32, act: Act) -> (f32, f32) {
        match act {
            Act::None => dz_sums_masked::<Identity>(p, mean),
            Act::Relu => dz_sums_masked::<ReluMask>(p, mean),
            Act::Relu6 => dz_sums_masked::<Relu6Mask>(p, mean),
        }
    }
}

#[inline(always)]
fn dz_sums_masked<M: Mask>(p: &Plane<'_>, m: f32) -> (f32, f32) {
    let (mut l1, mut l2) = ([0.0f32; LANES], [0.0f32; LANES]);
    let (xc, yc, gc) = (
        p.x.chunks_exact(LANES),
        p.y.chunks_exact(LANES),
        p.dy.chunks_exact(LANES),
    );
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
    for ((x, y), g) in xc.zip(yc).zip(gc) {
        for i in 0..LANES {
            let d = M::dz(y[i], g[i]);
            l1[i] += d;
            l2[i] += d * (x[i] - m);
        }
    }
    (l1.iter().sum::<f32>() + t1, l2.iter().sum::<f32>() + t2)
}

wide! {
    /// `dx = k · (dz − mb − (x − mean) · inv · mg)` over a plane; `t = [k, mb, mean, inv, mg]`.
    fn input_gradient(dx: &mut [f32], p: &Plane<'_>, t: [f32; 5], act: Act) {
        match act {
            Act::None => input_gradient_masked::<Identity>(dx, p, t),
            Act::Relu => input_gradient_masked::<ReluMask>(dx, p, t),
            Act::Relu6 => input_gradient_masked::<Relu6Mask>(dx, p, t),
        }
    }
}

#[inline(always)]
fn input_gradient_masked<M: Mask>(dx: &mut [f32], p: &Plane<'_>, [k, mb, m, iv, mg]: [f32; 5]) {
    for (((d, &x), &y), &g) in dx.iter_mut().zip(p.x).zip(p.y).zip(p.dy) {
        *d = k * (M::dz(y, g) - mb - (x - m) * iv * mg);
    }
}
