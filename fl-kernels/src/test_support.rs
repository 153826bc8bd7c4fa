//! Helpers for the kernels' tests: deterministic inputs, the convolution's definition in
//! `f64`, and a tolerance check.

use crate::types::{Epilogue, Geom};

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

/// Each of `n` samples `[rows][cols]` → `[cols][rows]`: planes to channels-last with
/// `(c, hw)`, back with `(hw, c)`.
pub(crate) fn swap_inner(v: &[f32], n: usize, rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for s in 0..n {
        for r in 0..rows {
            for c in 0..cols {
                out[(s * cols + c) * rows + r] = v[(s * rows + r) * cols + c];
            }
        }
    }
    out
}

/// A 3 × 3 depthwise geometry with padding 1.
pub(crate) fn depthwise3x3(n: usize, c: usize, size: usize, stride: usize) -> Geom {
    Geom {
        n,
        cin: c,
        h: size,
        w: size,
        cout: c,
        k: 3,
        stride,
        pad: 1,
        depthwise: true,
    }
}

/// A kernel's forward, as `conv::forward_fused` and the algorithms' `forward`.
pub(crate) type Forward = fn(&Geom, &[f32], &[f32], Option<&Epilogue<'_>>) -> Vec<f32>;

/// A kernel's backward: `(x, weight, grad_out, want_dx, want_dw)` → `(dx, dw)`.
pub(crate) type Backward =
    fn(&Geom, &[f32], &[f32], &[f32], bool, bool) -> (Option<Vec<f32>>, Option<Vec<f32>>);

/// `forward` (if given) and `backward` on `g` against the definition in `f64`: the output,
/// and both gradients asked for together and each alone; activations handed over
/// channels-last if `channels_last`. Tolerance 1e-5 relative to the largest value.
pub(crate) fn check_conv(
    g: &Geom,
    seed: u64,
    forward: Option<Forward>,
    backward: Backward,
    channels_last: bool,
) {
    let (hw, ohw) = (g.h * g.w, g.ho() * g.wo());
    let x = values(g.n * g.in_len(), seed + 1);
    let w = values(g.weight_len(), seed + 2);
    let go = values(g.n * g.out_len(), seed + 3);
    let (out, dx, dw) = naive(g, &x, &w, &go);
    let (xin, gin) = if channels_last {
        (
            swap_inner(&x, g.n, g.cin, hw),
            swap_inner(&go, g.n, g.cout, ohw),
        )
    } else {
        (x, go)
    };
    let back = |v: Vec<f32>, c: usize, pixels: usize| {
        if channels_last {
            swap_inner(&v, g.n, pixels, c)
        } else {
            v
        }
    };
    if let Some(forward) = forward {
        close(&back(forward(g, &xin, &w, None), g.cout, ohw), &out, "y", g);
    }
    for (want_dx, want_dw) in [(true, true), (true, false), (false, true)] {
        let (gx, gw) = backward(g, &xin, &w, &gin, want_dx, want_dw);
        assert_eq!((gx.is_some(), gw.is_some()), (want_dx, want_dw), "{g:?}");
        if let Some(gx) = gx {
            close(&back(gx, g.cin, hw), &dx, &format!("dx ({want_dw})"), g);
        }
        if let Some(gw) = gw {
            close(&gw, &dw, &format!("dw ({want_dx})"), g);
        }
    }
}
