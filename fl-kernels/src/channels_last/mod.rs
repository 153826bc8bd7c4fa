//! Convolutions on channels-last activations (`[n, h, w, c]`), for networks that keep
//! their activations that way from the stem to the pool (fl-task's MobileNet-V2):
//! 1 × 1 convolutions as plain GEMMs over pixels (`pointwise.rs`), depthwise ones by taps
//! across the channels (`../depthwise/channels_last.rs`), and any other dense geometry (the
//! 3 × 3 stem) through the NCHW kernels of `conv/` with the layout turned around it.
//!
//! Why channels-last: MobileNet-V2 is 1 × 1 convolutions, depthwise 3 × 3 and BatchNorm on
//! maps from 28 × 28 down to 2 × 2. In NCHW the small maps make every kernel work in short
//! planes, so `conv/im2col.rs` stacks samples for its GEMMs and `depthwise/nhwc.rs` turns
//! each sample channels-innermost and back, copies that (with the zeroing before them) were
//! a fifth of a MobileNet-V2 ×0.25 training step. Channels-last every layer's inner loop
//! runs across the channels, whatever the map size, and nothing changes layout in between.
//! The weights keep their usual `[cout, cin/groups, k, k]` layout.
//!
//! Results do not depend on the thread count (pieces fixed by the shape, shares summed in
//! order), as everywhere in this crate.

mod pointwise;
mod thin;

use std::borrow::Cow;

use rayon::prelude::*;

use crate::conv;
use crate::depthwise::channels_last as depthwise;
use crate::layout::{from_hwc, to_hwc};
use crate::types::{Epilogue, Geom};

/// Forward convolution: `x` `[n, h, w, cin]`, `weight` `[cout, cin/groups, k, k]` →
/// `[n, ho, wo, cout]`, then `epilogue` on every output channel if given.
pub fn forward(g: &Geom, x: &[f32], weight: &[f32], epilogue: Option<&Epilogue<'_>>) -> Vec<f32> {
    g.check_forward(x, weight, epilogue);
    if g.depthwise {
        depthwise::forward(g, x, weight, epilogue)
    } else if g.pointwise() {
        pointwise::forward(g, x, weight, epilogue)
    } else {
        let planes = to_planes(x, g.cin, g.h * g.w);
        let out = conv::forward_fused(g, &planes, weight, epilogue);
        to_channels_last(&out, g.cout, g.ho() * g.wo()).into_owned()
    }
}

/// Gradients with respect to the input (`[n, h, w, cin]`) and the weight, each only if
/// asked for; `grad_out` is `[n, ho, wo, cout]`.
pub fn backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    g.check_backward(x, weight, grad_out);
    if g.depthwise {
        depthwise::backward(g, x, weight, grad_out, want_dx, want_dw)
    } else if g.pointwise() {
        pointwise::backward(g, x, weight, grad_out, want_dx, want_dw)
    } else {
        let (xp, gp) = (
            to_planes(x, g.cin, g.h * g.w),
            to_planes(grad_out, g.cout, g.ho() * g.wo()),
        );
        let (dx, dw) = conv::backward(g, &xp, weight, &gp, want_dx, want_dw);
        let dx = dx.map(|d| to_channels_last(&d, g.cin, g.h * g.w).into_owned());
        (dx, dw)
    }
}

/// Samples of `c · hw` values, `[hw][c]` → `[c][hw]` (no copy for one channel).
fn to_planes(v: &[f32], c: usize, hw: usize) -> Cow<'_, [f32]> {
    if c == 1 {
        return Cow::Borrowed(v);
    }
    let mut out = vec![0.0f32; v.len()];
    out.par_chunks_mut(c * hw)
        .zip(v.par_chunks(c * hw))
        .for_each(|(d, s)| from_hwc(s, c, hw, 0, hw, d));
    Cow::Owned(out)
}

/// Samples of `c · hw` values, `[c][hw]` → `[hw][c]` (no copy for one channel).
fn to_channels_last(v: &[f32], c: usize, hw: usize) -> Cow<'_, [f32]> {
    if c == 1 {
        return Cow::Borrowed(v);
    }
    let mut out = vec![0.0f32; v.len()];
    out.par_chunks_mut(c * hw)
        .zip(v.par_chunks(c * hw))
        .for_each(|(d, s)| to_hwc(s, c, hw, 0, hw, d));
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{check_conv, values};

    fn dense(n: usize, cin: usize, size: usize, cout: usize, k: usize, stride: usize) -> Geom {
        Geom {
            n,
            cin,
            h: size,
            w: size,
            cout,
            k,
            stride,
            pad: k / 2,
            depthwise: false,
        }
    }

    /// Pointwise layers (one piece and several, small and large maps) and dense 3 × 3 ones
    /// (MobileNet-V2's 1-channel stem, a strided one) against the f64 definition: output,
    /// both gradients together and each alone; 1e-5 relative to the largest value.
    #[test]
    fn matches_the_definition() {
        let cases = [
            dense(20, 16, 4, 96, 1, 1),
            dense(3, 8, 28, 48, 1, 1),
            // Thin sides (`thin.rs`): 8 → 8 and 16 → 8 (both thin), partial vectors (24 and
            // 40 outputs), pixel counts that leave a remainder row block (3 · 25, 7 · 9).
            dense(3, 8, 5, 8, 1, 1),
            dense(7, 16, 3, 8, 1, 1),
            dense(3, 8, 5, 24, 1, 1),
            dense(7, 16, 3, 40, 1, 1),
            dense(3, 48, 5, 8, 1, 1),
            dense(5, 80, 2, 130, 1, 1),
            dense(3, 1, 28, 8, 3, 1),
            dense(2, 6, 9, 10, 3, 2),
        ];
        for (seed, g) in cases.into_iter().enumerate() {
            check_conv(&g, seed as u64 * 11, Some(forward), backward, true);
        }
    }

    /// Not a check: milliseconds per call of MobileNet-V2 ×0.25's heaviest channels-last
    /// layers at batch 20 (the 28 × 28 and 14 × 14 blocks: forward, input gradient, filter
    /// gradient, both gradients) on one thread, as a lane runs them. `REPS` sets the
    /// repetitions. Run with
    /// `cargo test --release -p fl-kernels mobilenet_layer_times -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn mobilenet_layer_times() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
        pool.expect("a thread pool").install(|| {
            let reps: usize = std::env::var("REPS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(20);
            let depthwise = |c, size, stride| Geom {
                depthwise: true,
                ..dense(20, c, size, c, 3, stride)
            };
            let layers = [
                dense(20, 1, 28, 8, 3, 1),
                depthwise(8, 28, 1),
                dense(20, 8, 28, 8, 1, 1),
                dense(20, 8, 28, 48, 1, 1),
                depthwise(48, 28, 2),
                dense(20, 48, 14, 8, 1, 1),
                dense(20, 8, 14, 48, 1, 1),
                depthwise(48, 14, 1),
                depthwise(48, 14, 2),
            ];
            for g in layers {
                let x = values(g.n * g.in_len(), 1);
                let w = values(g.weight_len(), 2);
                let go = values(g.n * g.out_len(), 3);
                let time = |f: &mut dyn FnMut()| {
                    f();
                    let start = std::time::Instant::now();
                    (0..reps).for_each(|_| f());
                    start.elapsed().as_secs_f64() * 1e3 / reps as f64
                };
                let f = time(&mut || drop(forward(&g, &x, &w, None)));
                let dx = time(&mut || drop(backward(&g, &x, &w, &go, true, false)));
                let dw = time(&mut || drop(backward(&g, &x, &w, &go, false, true)));
                let both = time(&mut || drop(backward(&g, &x, &w, &go, true, true)));
                println!(
                    "{:>2}→{:<2} {}² k{} s{} dw {:5} fwd {f:6.3} dx {dx:6.3} dW {dw:6.3} both {both:6.3} ms",
                    g.cin, g.cout, g.h, g.k, g.stride, g.depthwise
                );
            }
        });
    }

    /// The same bits on one thread and two (pieces fixed by the shape), through `gemm` and
    /// through the thin loops.
    #[test]
    fn bits_do_not_depend_on_the_threads() {
        for g in [
            dense(20, 24, 7, 40, 1, 1),
            dense(20, 8, 9, 48, 1, 1),
            dense(20, 8, 9, 8, 1, 1),
        ] {
            same_bits_on_one_and_two_threads(g);
        }
    }

    fn same_bits_on_one_and_two_threads(g: Geom) {
        let x = values(g.n * g.in_len(), 5);
        let w = values(g.weight_len(), 6);
        let go = values(g.n * g.out_len(), 7);
        let run = |t: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap();
            pool.install(|| {
                (
                    forward(&g, &x, &w, None),
                    backward(&g, &x, &w, &go, true, true),
                )
            })
        };
        assert_eq!(run(1), run(2));
    }
}
