//! Depthwise convolution on channels-last activations (`[n, h, w, c]`) one pixel at a time,
//! for the layers that are not "same" stride 1 (MobileNet-V2's stride-2 layers): forward,
//! input gradient and filter gradient, each pixel's `c` channels one contiguous run.
//!
//! Why not `channels_last.rs`'s runs of whole rows: at stride 2 a tap's inputs for one output
//! row are every other pixel, so that file split each sample into its four phases (a
//! zero-bordered copy), and the input gradient was scattered into zeroed phases and copied
//! back out. Those copies were most of the time: MobileNet-V2 ×0.25's 48-channel 28 × 28
//! stride-2 layer took 0.48 ms forward and 1.15 ms backward a step (batch 20, one thread)
//! for 0.2 MFLOP. Here every output (and every input-gradient pixel, in gather form) is
//! summed over its valid taps and written once; taps outside the map are skipped.
//!
//! Sums run over the taps in `(kh, kw)` order, the filter gradient over a sample's output
//! pixels in row order, then the samples' shares in sample order: the results do not
//! depend on the thread count.

use crate::layout::transpose;
use crate::scratch::{backward_pieces, build, piece, sum_partials};
use crate::simd::{epilogue_rows, wide};
use crate::types::{Epilogue, Geom};

/// The taps `lo..hi` of a `k`-wide window at output coordinate `o` whose input coordinate
/// `o · stride + t − pad` lies inside `0..size`.
fn taps(o: usize, stride: usize, pad: usize, k: usize, size: usize) -> (usize, usize) {
    let start = o * stride;
    let lo = pad.saturating_sub(start).min(k);
    let hi = (size + pad).saturating_sub(start).clamp(lo, k);
    (lo, hi)
}

/// Depthwise forward `[n, h, w, c]` → `[n, ho, wo, c]`, then `epilogue` per channel.
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    let wt = transpose(weight, g.cin, g.k * g.k);
    build(g.n * g.out_len(), g.out_len(), |i, out| {
        sample_forward(g, piece(x, i, g.in_len()), &wt, out);
        if let Some(e) = epilogue {
            epilogue_rows(e, out, g.cin);
        }
    })
}

wide! {
    /// One sample's outputs (`out` zero on entry): per output pixel, its valid taps'
    /// products added in `(kh, kw)` order. `wt` is `[tap][c]`.
    fn sample_forward(g: &Geom, xs: &[f32], wt: &[f32], out: &mut [f32]) {
        let (c, k, s, p) = (g.cin, g.k, g.stride, g.pad);
        for (oy, orow) in out.chunks_exact_mut(g.wo() * c).enumerate() {
            let (kh0, kh1) = taps(oy, s, p, k, g.h);
            for (ox, o) in orow.chunks_exact_mut(c).enumerate() {
                let (kw0, kw1) = taps(ox, s, p, k, g.w);
                for kh in kh0..kh1 {
                    let iy = oy * s + kh - p;
                    for kw in kw0..kw1 {
                        let at = (iy * g.w + ox * s + kw - p) * c;
                        let (xv, w) = (&xs[at..at + c], &wt[(kh * k + kw) * c..][..c]);
                        o.iter_mut().zip(xv).zip(w).for_each(|((o, x), w)| *o += x * w);
                    }
                }
            }
        }
    }
}

/// The output coordinate that tap `t` of input coordinate `i` comes from, if any:
/// `i = o · stride + t − pad` for an `o` in `0..out`.
fn source(i: usize, t: usize, stride: usize, pad: usize, out: usize) -> Option<usize> {
    let v = (i + pad).checked_sub(t)?;
    (v % stride == 0 && v / stride < out).then_some(v / stride)
}

wide! {
    /// One sample's input gradient (`dx` zero on entry), each input pixel gathered from
    /// the output-gradient pixels its taps fed, in `(kh, kw)` order.
    fn sample_input(g: &Geom, gs: &[f32], wt: &[f32], dx: &mut [f32]) {
        let (c, k, s, p, wo) = (g.cin, g.k, g.stride, g.pad, g.wo());
        for (iy, drow) in dx.chunks_exact_mut(g.w * c).enumerate() {
            for (ix, d) in drow.chunks_exact_mut(c).enumerate() {
                for kh in 0..k {
                    let Some(oy) = source(iy, kh, s, p, g.ho()) else {
                        continue;
                    };
                    for kw in 0..k {
                        let Some(ox) = source(ix, kw, s, p, wo) else {
                            continue;
                        };
                        let at = (oy * wo + ox) * c;
                        let (gv, w) = (&gs[at..at + c], &wt[(kh * k + kw) * c..][..c]);
                        d.iter_mut().zip(gv).zip(w).for_each(|((d, g), w)| *d += g * w);
                    }
                }
            }
        }
    }
}

wide! {
    /// One sample's filter-gradient share `[tap][c]` (`acc` zero on entry): per output
    /// pixel in row order, each valid tap's input times the output gradient.
    fn sample_filter(g: &Geom, xs: &[f32], gs: &[f32], acc: &mut [f32]) {
        let (c, k, s, p) = (g.cin, g.k, g.stride, g.pad);
        for (oy, grow) in gs.chunks_exact(g.wo() * c).enumerate() {
            let (kh0, kh1) = taps(oy, s, p, k, g.h);
            for (ox, gv) in grow.chunks_exact(c).enumerate() {
                let (kw0, kw1) = taps(ox, s, p, k, g.w);
                for kh in kh0..kh1 {
                    let iy = oy * s + kh - p;
                    for kw in kw0..kw1 {
                        let at = (iy * g.w + ox * s + kw - p) * c;
                        let (xv, a) = (&xs[at..at + c], &mut acc[(kh * k + kw) * c..][..c]);
                        a.iter_mut().zip(xv).zip(gv).for_each(|((a, x), g)| *a += x * g);
                    }
                }
            }
        }
    }
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
    let kk = g.k * g.k;
    let wt = transpose(weight, g.cin, kk);
    let sample = |i: usize, dx: Option<&mut [f32]>| {
        let (xs, gs) = (piece(x, i, g.in_len()), piece(grad_out, i, g.out_len()));
        if let Some(dx) = dx {
            sample_input(g, gs, &wt, dx);
        }
        want_dw.then(|| {
            let mut acc = vec![0.0f32; kk * g.cin];
            sample_filter(g, xs, gs, &mut acc);
            acc
        })
    };
    let (dx, shares) = backward_pieces(want_dx, g.n * g.in_len(), g.in_len(), sample);
    // The shares summed in sample order, `[tap][channel]` back to `[channel][tap]`.
    let dw = want_dw.then(|| transpose(&sum_partials(shares, kk * g.cin), kk, g.cin));
    (dx, dw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{check_conv, depthwise3x3};

    /// Output and both gradients (together and each alone) against the f64 definition on
    /// stride-2 layers, even and odd sizes, channel counts in and out of whole vectors, and
    /// a 5 × 5 filter with no padding at stride 3.
    #[test]
    fn matches_the_definition() {
        let cases = [(2, 48, 28), (2, 24, 7), (3, 5, 5), (2, 144, 4), (2, 7, 2)];
        for (seed, (n, c, size)) in cases.into_iter().enumerate() {
            let g = depthwise3x3(n, c, size, 2);
            check_conv(&g, seed as u64 * 5, Some(forward), backward, true);
        }
        let g = Geom {
            k: 5,
            pad: 0,
            stride: 3,
            ..depthwise3x3(2, 6, 11, 1)
        };
        check_conv(&g, 99, Some(forward), backward, true);
    }

    #[test]
    fn taps_inside_the_map() {
        // 3 taps, pad 1, stride 2, 7 wide: output 0 starts at −1, output 3 ends at 7.
        assert_eq!(taps(0, 2, 1, 3, 7), (1, 3));
        assert_eq!(taps(1, 2, 1, 3, 7), (0, 3));
        assert_eq!(taps(3, 2, 1, 3, 7), (0, 2));
        assert_eq!(source(0, 1, 2, 1, 4), Some(0));
        assert_eq!(source(0, 0, 2, 1, 4), None);
        assert_eq!(source(6, 0, 2, 1, 3), None);
    }
}
