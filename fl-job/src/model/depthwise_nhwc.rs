//! Depthwise forward for small maps (MobileNet-V2's 7 × 7, 4 × 4 and 2 × 2 stages), with
//! channels innermost.
//!
//! Why: the planar kernel in `conv_kernels.rs` works one `(sample, channel)` plane at a
//! time: a padded copy, one multiply-add run per tap, a copy out. On a 4 × 4 or 2 × 2 map
//! each run is 8–24 elements and the per-plane work is mostly overhead, and these stages
//! hold most of the network's channels (576–960): depthwise was 45 % of a MobileNet-V2 ×1.0
//! inference. Here each sample is turned channels-innermost once, every tap is one
//! multiply-add across all channels (hundreds long), and the result is turned back.
//!
//! The arithmetic is the planar kernel's, in the same order (first tap multiplied, then the
//! others added in `(kh, kw)` order, over the same zero padding), so the results are
//! bit-identical and training may use either.

use rayon::prelude::*;

use super::conv_kernels::{Epilogue, Geom, take};

/// Output maps up to this many pixels take this path.
const MAX_PIXELS: usize = 49;

/// Whether a depthwise geometry takes this path.
pub(crate) fn applies(g: &Geom) -> bool {
    g.depthwise && g.ho() * g.wo() <= MAX_PIXELS
}

/// Per-thread scratch: the padded input and the output of one sample, channels innermost.
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
    let (c, k) = (g.cin, g.k);
    let kk = k * k;
    // Taps outermost: `wt[tap][channel]`.
    let mut wt = vec![0.0f32; kk * c];
    for ch in 0..c {
        for tap in 0..kk {
            wt[tap * c + ch] = weight[ch * kk + tap];
        }
    }
    let mut out = vec![0.0f32; g.n * g.out_len()];
    out.par_chunks_mut(g.out_len())
        .zip(x.par_chunks(g.in_len()))
        .for_each_init(Buffers::default, |buf, (o, xs)| {
            sample_forward(g, xs, &wt, o, buf, epilogue)
        });
    out
}

fn sample_forward(
    g: &Geom,
    xs: &[f32],
    wt: &[f32],
    out: &mut [f32],
    buf: &mut Buffers,
    epilogue: Option<&Epilogue<'_>>,
) {
    let (c, k, s) = (g.cin, g.k, g.stride);
    let (ho, wo) = (g.ho(), g.wo());
    let (ph, pw) = (g.h + 2 * g.pad, g.w + 2 * g.pad);
    let padded = take(&mut buf.padded, ph * pw * c);
    // Only the interior is rewritten, so the border stays zero.
    padded.fill(0.0);
    let plane = g.h * g.w;
    for (ch, src) in xs.chunks_exact(plane).enumerate() {
        for (y, row) in src.chunks_exact(g.w).enumerate() {
            let at = ((y + g.pad) * pw + g.pad) * c + ch;
            for (x, v) in row.iter().enumerate() {
                padded[at + x * c] = *v;
            }
        }
    }
    let acc = take(&mut buf.out, ho * wo * c);
    for oh in 0..ho {
        for ow in 0..wo {
            let a = &mut acc[(oh * wo + ow) * c..(oh * wo + ow + 1) * c];
            for kh in 0..k {
                for kw in 0..k {
                    let tap = kh * k + kw;
                    let at = ((oh * s + kh) * pw + ow * s + kw) * c;
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
    }
    let pixels = ho * wo;
    for (ch, dst) in out.chunks_exact_mut(pixels).enumerate() {
        for (p, d) in dst.iter_mut().enumerate() {
            *d = acc[p * c + ch];
        }
        if let Some(e) = epilogue {
            e.apply(ch, dst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::conv_kernels::tests::values;

    /// Bit-identical to the planar kernel (which is tested against the definition), at
    /// stride 1 and 2 and odd sizes, with and without an epilogue.
    #[test]
    fn equals_the_planar_kernel_bit_for_bit() {
        for (seed, &(n, c, size, stride)) in [
            (3, 16, 7, 1),
            (2, 24, 7, 2),
            (4, 8, 4, 1),
            (2, 9, 2, 1),
            (3, 5, 4, 2),
        ]
        .iter()
        .enumerate()
        {
            let g = Geom {
                n,
                cin: c,
                h: size,
                w: size,
                cout: c,
                k: 3,
                stride,
                pad: 1,
                depthwise: true,
            };
            assert!(applies(&g));
            let x = values(n * g.in_len(), seed as u64 * 3 + 1);
            let w = values(g.weight_len(), seed as u64 * 3 + 2);
            let planar = super::super::conv_kernels::depthwise_planar_forward(&g, &x, &w, None);
            let ours = forward(&g, &x, &w, None);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&ours), bits(&planar), "{g:?}");
        }
    }
}
