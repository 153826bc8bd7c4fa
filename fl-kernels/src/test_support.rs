//! Helpers for the kernels' tests: deterministic inputs, the convolution's definition in
//! `f64`, and a tolerance check.

use crate::types::Geom;

/// Deterministic pseudo-random values in [-1, 1).
pub(crate) fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The definition, index by index, in f64: output, and by the chain rule both gradients.
pub(crate) fn naive(g: &Geom, x: &[f32], w: &[f32], go: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (ho, wo, k) = (g.ho(), g.wo(), g.k);
    let cin_per = if g.depthwise { 1 } else { g.cin };
    let mut out = vec![0.0f64; g.n * g.out_len()];
    let mut dx = vec![0.0f64; x.len()];
    let mut dw = vec![0.0f64; w.len()];
    for n in 0..g.n {
        for co in 0..g.cout {
            for oh in 0..ho {
                for ow in 0..wo {
                    let oi = ((n * g.cout + co) * ho + oh) * wo + ow;
                    for ci in 0..cin_per {
                        let c = if g.depthwise { co } else { ci };
                        for kh in 0..k {
                            for kw in 0..k {
                                let ih = (oh * g.stride + kh) as isize - g.pad as isize;
                                let iw = (ow * g.stride + kw) as isize - g.pad as isize;
                                if ih < 0 || iw < 0 || ih >= g.h as isize || iw >= g.w as isize {
                                    continue;
                                }
                                let xi = ((n * g.cin + c) * g.h + ih as usize) * g.w + iw as usize;
                                let wi = ((co * cin_per + ci) * k + kh) * k + kw;
                                out[oi] += x[xi] as f64 * w[wi] as f64;
                                dx[xi] += go[oi] as f64 * w[wi] as f64;
                                dw[wi] += go[oi] as f64 * x[xi] as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    let f = |v: Vec<f64>| v.into_iter().map(|v| v as f32).collect();
    (f(out), f(dx), f(dw))
}

/// A dense 3 × 3, stride-1, padding-1 ("same") geometry.
pub(crate) fn same3x3(n: usize, cin: usize, h: usize, w: usize, cout: usize) -> Geom {
    Geom {
        n,
        cin,
        h,
        w,
        cout,
        k: 3,
        stride: 1,
        pad: 1,
        depthwise: false,
    }
}

pub(crate) fn close(a: &[f32], b: &[f32], what: &str, g: &Geom) {
    assert_eq!(a.len(), b.len(), "{what} length for {g:?}");
    let scale = b.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-5 * scale,
            "{what}[{i}]: {x} vs {y} for {g:?}"
        );
    }
}

/// `[n][c][hw]` → `[n][hw][c]`.
pub(crate) fn to_channels_last(v: &[f32], n: usize, c: usize, hw: usize) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for s in 0..n {
        for ch in 0..c {
            for p in 0..hw {
                out[(s * hw + p) * c + ch] = v[(s * c + ch) * hw + p];
            }
        }
    }
    out
}

/// `[n][hw][c]` → `[n][c][hw]`.
pub(crate) fn to_planes(v: &[f32], n: usize, c: usize, hw: usize) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for s in 0..n {
        for ch in 0..c {
            for p in 0..hw {
                out[(s * c + ch) * hw + p] = v[(s * hw + p) * c + ch];
            }
        }
    }
    out
}
