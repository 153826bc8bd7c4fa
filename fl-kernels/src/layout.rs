//! Conversions between channel planes (`[c][h][w]`, Burn's NCHW per sample) and
//! channels-innermost buffers (`[y][x][c]`, optionally zero-bordered), which the Winograd and
//! depthwise kernels work in; and the plain [`transpose`] of small matrices (filters and
//! their gradients).
//!
//! Why blocked: converting one channel at a time writes the other side with a stride of `c`
//! floats, so every element touches a different cache line and a 28 × 28 × 64 sample walks
//! 230 KB of lines per channel; that loop was 8 % of a ResNet-18 ×64 training step (profile
//! in `fl-job/TRAINING.md`). Here 16 channels × 16 pixels are moved at a time, so both sides
//! of a block stay in a few L1 lines, and whole blocks go through fixed-size arrays that the
//! compiler vectorises.

use crate::simd::wide;

/// `[rows][cols]` → `[cols][rows]`, element by element: for filters and filter gradients
/// (thousands of values), not activations.
pub(crate) fn transpose(src: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0f32; rows * cols];
    for r in 0..rows {
        for col in 0..cols {
            t[col * rows + r] = src[r * cols + col];
        }
    }
    t
}

/// Channels and pixels per block: 16 `f32` are one 64-byte cache line.
const BLOCK: usize = 16;

wide! {
    /// `dst` = `src` (`[c][h][w]`) channels-innermost into a `pw`-wide buffer at `(pad, pad)`:
    /// pixel `(y, x)` of channel `ch` goes to `((y + pad) · pw + x + pad) · c + ch`.
    pub(crate) fn to_hwc(src: &[f32], c: usize, w: usize, pad: usize, pw: usize, dst: &mut [f32]) {
        let plane = src.len() / c;
        // Unbordered, the sample is one long row: whole blocks even on small maps.
        let w = if pad == 0 && pw == w { plane } else { w };
        let h = plane / w;
        for c0 in (0..c).step_by(BLOCK) {
            let cn = BLOCK.min(c - c0);
            for y in 0..h {
                let at = ((y + pad) * pw + pad) * c + c0;
                let row = |k: usize| (c0 + k) * plane + y * w;
                let mut x0 = 0;
                // 16 channels × up to 16 pixels at a time through fixed-size arrays, which
                // the compiler turns into vector loads, shuffles and stores (2.3× the scalar
                // loop). A short run (a 7-wide map) loads 16 floats where the source has
                // them (the extra ones are never stored), else only its own.
                while cn == BLOCK && x0 < w {
                    let xn = BLOCK.min(w - x0);
                    let t: [[f32; BLOCK]; BLOCK] = std::array::from_fn(|k| {
                        let from = row(k) + x0;
                        match src.get(from..from + BLOCK) {
                            Some(s) => s.try_into().expect("16 floats"),
                            None => {
                                let mut t = [0.0; BLOCK];
                                t[..xn].copy_from_slice(&src[from..from + xn]);
                                t
                            }
                        }
                    });
                    for j in 0..xn {
                        let d: &mut [f32; BLOCK] = (&mut dst[at + (x0 + j) * c..][..BLOCK])
                            .try_into()
                            .expect("16 floats");
                        *d = std::array::from_fn(|k| t[k][j]);
                    }
                    x0 += xn;
                }
                for k in 0..cn {
                    for (j, v) in src[row(k) + x0..row(k) + w].iter().enumerate() {
                        dst[at + (x0 + j) * c + k] = *v;
                    }
                }
            }
        }
    }
}

wide! {
    /// The inverse of [`to_hwc`]: `dst` (`[c][h][w]`) from the buffer's interior.
    pub(crate) fn from_hwc(src: &[f32], c: usize, w: usize, pad: usize, pw: usize, dst: &mut [f32]) {
        let plane = dst.len() / c;
        let w = if pad == 0 && pw == w { plane } else { w };
        let h = plane / w;
        for c0 in (0..c).step_by(BLOCK) {
            let cn = BLOCK.min(c - c0);
            for y in 0..h {
                let at = ((y + pad) * pw + pad) * c + c0;
                let row = |k: usize| (c0 + k) * plane + y * w;
                let mut x0 = 0;
                while cn == BLOCK && x0 < w {
                    let xn = BLOCK.min(w - x0);
                    let t: [[f32; BLOCK]; BLOCK] = std::array::from_fn(|j| {
                        if j < xn {
                            src[at + (x0 + j) * c..][..BLOCK]
                                .try_into()
                                .expect("16 floats")
                        } else {
                            [0.0; BLOCK]
                        }
                    });
                    for k in 0..BLOCK {
                        let col: [f32; BLOCK] = std::array::from_fn(|j| t[j][k]);
                        let d = &mut dst[row(k) + x0..][..xn];
                        if xn == BLOCK {
                            d.copy_from_slice(&col);
                        } else {
                            // Element by element: a `copy_from_slice` of a run-time length
                            // is a `memmove` call, which cost more than the block saved.
                            for (d, v) in d.iter_mut().zip(col) {
                                *d = v;
                            }
                        }
                    }
                    x0 += xn;
                }
                for k in 0..cn {
                    let r = row(k);
                    for (j, d) in dst[r + x0..r + w].iter_mut().enumerate() {
                        *d = src[at + (x0 + j) * c + k];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element lands where the formula says, for channel counts and widths on both
    /// sides of a block, and the border is left alone; `from_hwc` undoes it.
    #[test]
    fn round_trips_with_the_border_untouched() {
        for &(c, h, w, pad) in &[
            (1, 1, 1, 0),
            (3, 5, 7, 1),
            (16, 4, 16, 0),
            (33, 6, 17, 1),
            (64, 3, 28, 1),
            (32, 2, 40, 0),
            (48, 7, 7, 1),
            (48, 7, 7, 0),
            (40, 4, 4, 1),
            (16, 2, 2, 0),
            (32, 3, 5, 2),
        ] {
            let (ph, pw) = (h + 2 * pad, w + 2 * pad);
            let src: Vec<f32> = (0..c * h * w).map(|i| i as f32 + 1.0).collect();
            let mut hwc = vec![-1.0f32; ph * pw * c];
            to_hwc(&src, c, w, pad, pw, &mut hwc);
            for ch in 0..c {
                for y in 0..ph {
                    for x in 0..pw {
                        let got = hwc[(y * pw + x) * c + ch];
                        let inside = (pad..pad + h).contains(&y) && (pad..pad + w).contains(&x);
                        let want = if inside {
                            src[ch * h * w + (y - pad) * w + x - pad]
                        } else {
                            -1.0
                        };
                        assert_eq!(got, want, "c {c} h {h} w {w} at ({ch}, {y}, {x})");
                    }
                }
            }
            let mut back = vec![0.0f32; c * h * w];
            from_hwc(&hwc, c, w, pad, pw, &mut back);
            assert_eq!(back, src, "c {c} h {h} w {w}");
        }
    }
}
