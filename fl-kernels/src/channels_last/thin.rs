//! 1 × 1 convolutions with a thin side (8 or 16 channels in or out, the other side a
//! multiple of 8): the three products of a channels-last pointwise layer written as small
//! register-blocked loops instead of `gemm` calls.
//!
//! Why: MobileNet-V2 ×0.25's large maps are all such layers (8 → 48 and 48 → 8 on 28 × 28
//! and 14 × 14, 8 → 8). `gemm` makes the destination's contiguous side its row block, so
//! an 8-channel side fills half of each 16-lane register (`x1x6` micro-kernels), and with
//! `k` = 8 the micro-kernel stores its 18 accumulators every 8 multiply-adds. Per call at
//! batch 20, one thread (`channels_last::tests::mobilenet_layer_times`), 8 → 48 on 28²
//! took 0.27 ms forward and 0.60 ms for both gradients, about three times what its 3 MB
//! of output gradient takes to read.
//!
//! Two forms (every pixel row of `a` `[rows, k]`, `m` `[k, n]` row-major):
//! - [`mix`]: `out[p, ..n] = Σ_t a[p, t] · m[t, ..n]`, [`PIXELS`] rows at a time, one
//!   vector of outputs each: the forward (`m` = Wᵀ) and the input gradient (`m` = W);
//! - [`outer`]: `acc[t, ..n] += Σ_p a[p, t] · b[p, ..n]` with `t` thin, the `t`
//!   accumulators in registers across all pixels: the weight gradient (transposed for a
//!   thin input).
//!
//! Each output is one chain of fused multiply-adds in a fixed order (`t`, or pixels in row
//! order), so the bits do not depend on the thread count.

use pulp::{Simd, WithSimd};

use crate::isa::{self, Dispatch};

/// The thin sides [`outer`] is compiled for.
pub(super) fn thin(c: usize) -> bool {
    c == 8 || c == 16
}

/// Pixel rows per register block in [`mix`]: eight independent accumulator chains, enough
/// to keep two fused multiply-add pipes of four cycles' latency busy.
const PIXELS: usize = 8;

/// `out[p, ..n] = Σ_{t < k} a[p, t] · m[t, ..n]` for `a` `[rows, k]`, `m` `[k, n]`.
pub(super) fn mix(out: &mut [f32], a: &[f32], m: &[f32], k: usize, n: usize) {
    assert!(k > 0 && m.len() == k * n && a.len().is_multiple_of(k));
    assert_eq!(out.len(), a.len() / k * n, "thin::mix: output size");
    isa::arch().run(Mix { out, a, m, k, n });
}

struct Mix<'a> {
    out: &'a mut [f32],
    a: &'a [f32],
    m: &'a [f32],
    k: usize,
    n: usize,
}

impl WithSimd for Mix<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let Mix { out, a, m, k, n } = self;
        let rows = a.len() / k;
        let whole = rows / PIXELS * PIXELS;
        for j in (0..n).step_by(S::F32_LANES) {
            for p in (0..whole).step_by(PIXELS) {
                mix_block::<S, PIXELS>(s, &mut out[p * n..], &a[p * k..], m, (k, n, j));
            }
            for p in whole..rows {
                mix_block::<S, 1>(s, &mut out[p * n..], &a[p * k..], m, (k, n, j));
            }
        }
    }
}

/// Outputs `j..j + lanes` of `PB` pixel rows.
#[inline(always)]
fn mix_block<S: Simd, const PB: usize>(
    s: S,
    out: &mut [f32],
    a: &[f32],
    m: &[f32],
    (k, n, j): (usize, usize, usize),
) {
    let w = S::F32_LANES.min(n - j);
    let a = &a[..PB * k];
    let mut acc = [s.splat_f32s(0.0); PB];
    for t in 0..k {
        let mt = load(s, &m[t * n + j..t * n + j + w]);
        for (b, acc) in acc.iter_mut().enumerate() {
            *acc = s.mul_add_f32s(s.splat_f32s(a[b * k + t]), mt, *acc);
        }
    }
    for (b, acc) in acc.iter().enumerate() {
        store(s, &mut out[b * n + j..b * n + j + w], *acc);
    }
}

/// `acc[t, ..n] += Σ_p a[p, t] · b[p, ..n]` for `a` `[rows, t]` (`t` [`thin`]), `b`
/// `[rows, n]`; pixels in row order.
pub(super) fn outer(acc: &mut [f32], a: &[f32], b: &[f32], t: usize, n: usize) {
    assert!(thin(t) && acc.len() == t * n && a.len().is_multiple_of(t));
    assert_eq!(b.len(), a.len() / t * n, "thin::outer: sizes");
    let on = isa::arch();
    match t {
        8 => on.run(Outer::<8> { acc, a, b, n }),
        _ => on.run(Outer::<16> { acc, a, b, n }),
    }
}

struct Outer<'a, const T: usize> {
    acc: &'a mut [f32],
    a: &'a [f32],
    b: &'a [f32],
    n: usize,
}

impl<const T: usize> WithSimd for Outer<'_, T> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let Outer { acc, a, b, n } = self;
        let rows = a.len() / T;
        for j in (0..n).step_by(S::F32_LANES) {
            let w = S::F32_LANES.min(n - j);
            let mut r: [S::f32s; T] = std::array::from_fn(|t| load(s, &acc[t * n + j..][..w]));
            for (ap, bp) in a.chunks_exact(T).zip(b.chunks_exact(n)).take(rows) {
                let bv = load(s, &bp[j..j + w]);
                for (r, &av) in r.iter_mut().zip(ap) {
                    *r = s.mul_add_f32s(s.splat_f32s(av), bv, *r);
                }
            }
            for (t, r) in r.iter().enumerate() {
                store(s, &mut acc[t * n + j..][..w], *r);
            }
        }
    }
}

/// A vector from `v` (whole, or its first `v.len()` lanes, the rest zero).
#[inline(always)]
fn load<S: Simd>(s: S, v: &[f32]) -> S::f32s {
    if v.len() == S::F32_LANES {
        S::as_simd_f32s(v).0[0]
    } else {
        s.partial_load_f32s(v)
    }
}

/// The first `v.len()` lanes of `x` into `v`.
#[inline(always)]
fn store<S: Simd>(s: S, v: &mut [f32], x: S::f32s) {
    if v.len() == S::F32_LANES {
        S::as_mut_simd_f32s(v).0[0] = x;
    } else {
        s.partial_store_f32s(v, x)
    }
}
