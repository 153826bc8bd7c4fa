//! Depthwise convolution for small maps (MobileNet-V2's 7 × 7, 4 × 4 and 2 × 2 stages), with
//! channels innermost: forward, input gradient and filter gradient.
//!
//! Why: the planar kernel (`planar.rs`) works one `(sample, channel)` plane at a
//! time: a padded copy, one multiply-add run per tap, a copy out. On a 4 × 4 or 2 × 2 map
//! each run is 8–24 elements and the per-plane work is mostly overhead, and these stages
//! hold most of the network's channels (576–960): depthwise was 45 % of a MobileNet-V2 ×1.0
//! inference. Here each sample is turned channels-innermost once, every tap is one
//! multiply-add across all channels (hundreds long), and the result is turned back.
//!
//! The forward's arithmetic is the planar kernel's, in the same order (first tap multiplied, then the
//! others added in `(kh, kw)` order, over the same zero padding), so the results are
//! bit-identical and training may use either.

use std::cell::RefCell;

use crate::layout::{from_hwc, to_hwc, transpose};
use crate::scratch::{backward_pieces, build, piece, sum_partials, take, with_local};
use crate::simd::wide;
use crate::types::{Epilogue, Geom};

/// Output maps up to this many pixels take this path.
const MAX_PIXELS: usize = 49;

/// Whether a depthwise geometry takes this path.
pub(crate) fn applies(g: &Geom) -> bool {
    g.depthwise && g.ho() * g.wo() <= MAX_PIXELS
}

thread_local! {
    static BUFFERS: RefCell<Buffers> = RefCell::new(Buffers::default());
}

/// Per-thread scratch, kept from call to call: the padded input and the output of one sample,
/// channels innermost.
#[derive(Default)]
struct Buffers {
    padded: Vec<f32>,
    out: Vec<f32>,
}

/// Depthwise forward `[n, c, h, w]` → `[n, c, ho, wo]`, then `epilogue` per plane.
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    // Taps outermost: `wt[tap][channel]`.
    let wt = transpose(weight, g.cin, g.k * g.k);
    build(g.n * g.out_len(), g.out_len(), |i, o| {
        let xs = piece(x, i, g.in_len());
        with_local(&BUFFERS, |buf| sample_forward(g, xs, &wt, o, buf, epilogue))
    })
}

fn sample_forward(
    g: &Geom,
    xs: &[f32],
    wt: &[f32],
    out: &mut [f32],
    buf: &mut Buffers,
    epilogue: Option<&Epilogue<'_>>,
) {
    let c = g.cin;
    let (ho, wo) = (g.ho(), g.wo());
    let (ph, pw) = (g.h + 2 * g.pad, g.w + 2 * g.pad);
    let padded = take(&mut buf.padded, ph * pw * c);
    // Only the interior is rewritten, so the border stays zero.
    padded.fill(0.0);
    to_hwc(xs, c, g.w, g.pad, pw, padded);
    let acc = take(&mut buf.out, ho * wo * c);
    forward_taps(g, pw, padded, wt, acc);
    from_hwc(acc, c, wo, 0, wo, out);
    if let Some(e) = epilogue {
        for (ch, dst) in out.chunks_exact_mut(ho * wo).enumerate() {
            e.apply(ch, dst);
        }
    }
}

/// Input and filter gradients for a geometry where [`applies`], each only if asked for:
/// per sample, the output gradient turned channels-innermost, then every (pixel, tap) one
/// multiply-add across channels into the padded input gradient and into that sample's
/// share of the filter gradient. The shares are summed in sample order, so the result does
/// not depend on the thread count.
pub(crate) fn backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let (c, kk) = (g.cin, g.k * g.k);
    let wt = transpose(weight, c, kk);
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

wide! {
    /// The forward's multiply-adds: for every output pixel and tap, one across all channels.
    fn forward_taps(g: &Geom, pw: usize, padded: &[f32], wt: &[f32], acc: &mut [f32]) {
        let c = g.cin;
        for (pixel, tap, at) in taps(g, pw) {
            let a = &mut acc[pixel * c..(pixel + 1) * c];
            let (src, w) = (&padded[at..at + c], &wt[tap * c..(tap + 1) * c]);
            if tap == 0 {
                for ((a, x), w) in a.iter_mut().zip(src).zip(w) {
                    *a = w * x;
                }
            } else {
                for ((a, x), w) in a.iter_mut().zip(src).zip(w) {
                    *a += w * x;
                }
            }
        }
    }
}

wide! {
    /// The filter gradient's multiply-adds into one sample's `share` (`[tap][channel]`),
    /// from the output gradient `gh` and the padded input `pad`, channels innermost.
    fn filter_taps(g: &Geom, pw: usize, gh: &[f32], pad: &[f32], share: &mut [f32]) {
        let c = g.cin;
        for (pixel, tap, at) in taps(g, pw) {
            let gp = &gh[pixel * c..(pixel + 1) * c];
            let sh = &mut share[tap * c..(tap + 1) * c];
            for ((d, a), b) in sh.iter_mut().zip(gp).zip(&pad[at..at + c]) {
                *d += a * b;
            }
        }
    }
}

wide! {
    /// The input gradient's multiply-adds into the padded `pad`, from the output gradient
    /// `gh` and the filters `wt` (`[tap][channel]`), channels innermost.
    fn input_taps(g: &Geom, pw: usize, gh: &[f32], wt: &[f32], pad: &mut [f32]) {
        let c = g.cin;
        for (pixel, tap, at) in taps(g, pw) {
            let gp = &gh[pixel * c..(pixel + 1) * c];
            let w = &wt[tap * c..(tap + 1) * c];
            for ((d, a), b) in pad[at..at + c].iter_mut().zip(gp).zip(w) {
                *d += a * b;
            }
        }
    }
}

/// Every output pixel and tap, in the forward's order: `(pixel, tap, at)`, `at` where that
/// tap's input pixel starts in a `pw`-wide padded buffer with channels innermost.
#[inline(always)]
fn taps(g: &Geom, pw: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let (k, s, wo, c) = (g.k, g.stride, g.wo(), g.cin);
    (0..g.ho() * wo).flat_map(move |pixel| {
        let (oh, ow) = (pixel / wo, pixel % wo);
        (0..k * k).map(move |tap| {
            let (kh, kw) = (tap / k, tap % k);
            (pixel, tap, ((oh * s + kh) * pw + ow * s + kw) * c)
        })
    })
}

#[allow(clippy::too_many_arguments)]
fn sample_backward(
    g: &Geom,
    xs: &[f32],
    wt: &[f32],
    gs: &[f32],
    dx: Option<&mut [f32]>,
    want_dw: bool,
    buf: &mut Buffers,
) -> Option<Vec<f32>> {
    let (c, k) = (g.cin, g.k);
    let (ho, wo) = (g.ho(), g.wo());
    let (ph, pw) = (g.h + 2 * g.pad, g.w + 2 * g.pad);
    let Buffers { padded, out } = buf;
    // The output gradient, channels innermost.
    let gh = take(out, ho * wo * c);
    to_hwc(gs, c, wo, 0, wo, gh);
    let mut share = want_dw.then(|| vec![0.0f32; k * k * c]);
    // The padded input (for the filter gradient) or the padded input gradient (for dx):
    // both `ph × pw × c`; the filter gradient is taken first so one buffer serves.
    let pad = take(padded, ph * pw * c);
    if let Some(share) = share.as_mut() {
        pad.fill(0.0);
        to_hwc(xs, c, g.w, g.pad, pw, pad);
        filter_taps(g, pw, gh, pad, share);
    }
    if let Some(dx) = dx {
        pad.fill(0.0);
        input_taps(g, pw, gh, wt, pad);
        from_hwc(pad, c, g.w, g.pad, pw, dx);
    }
    share
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{check_conv, depthwise3x3, values};

    /// 3 × 3 depthwise layers on small maps: stride 1 and 2, odd sizes, down to 2 × 2.
    fn geometries() -> Vec<Geom> {
        [
            (3, 16, 7, 1),
            (2, 24, 7, 2),
            (4, 8, 4, 1),
            (2, 9, 2, 1),
            (3, 5, 4, 2),
        ]
        .into_iter()
        .map(|(n, c, size, stride)| depthwise3x3(n, c, size, stride))
        .collect()
    }

    /// Bit-identical to the planar kernel (which is tested against the definition); the
    /// epilogue is covered by `conv_op`'s fused-evaluation test.
    #[test]
    fn equals_the_planar_kernel_bit_for_bit() {
        for (seed, g) in geometries().into_iter().enumerate() {
            let n = g.n;
            assert!(applies(&g));
            let x = values(n * g.in_len(), seed as u64 * 3 + 1);
            let w = values(g.weight_len(), seed as u64 * 3 + 2);
            let planar = crate::depthwise::planar::forward(&g, &x, &w, None);
            let ours = forward(&g, &x, &w, None);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&ours), bits(&planar), "{g:?}");
        }
    }

    /// Both gradients against the f64 definition (1e-5 relative to the largest value), and
    /// each alone.
    #[test]
    fn gradients_match_the_definition() {
        for (seed, g) in geometries().into_iter().enumerate() {
            check_conv(&g, seed as u64 * 5, None, backward, false);
        }
    }
}
