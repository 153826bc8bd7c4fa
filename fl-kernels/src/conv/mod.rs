//! The convolution dispatcher: for each layer, which algorithm computes its forward, input
//! gradient and weight gradient ([`path`]); the instruction set every kernel runs is chosen
//! once for the process by `isa.rs`. The kernels work on contiguous NCHW `f32` slices and
//! know nothing of Burn (the autodiff glue that calls this is fl-task's `model/conv_op.rs`).
//!
//! The algorithms, one module each: `direct.rs` (3 × 3 stride 1 on thin layers, explicit
//! vectors over pulp), `winograd/` (3 × 3 stride 1, wide layers), `im2col.rs` (any dense
//! geometry: im2col + GEMM), and the depthwise ones in `../depthwise/`: `nhwc.rs` (small
//! maps) and `planar.rs` (larger maps). Their shared types are in the leaf `types.rs`, so
//! the imports run one way: this file → algorithms → leaves (`types`, `scratch`, `gemm`,
//! `layout`, `simd`, `isa`).
//!
//! Every path gives results that do not depend on the thread count (groups of samples fixed
//! by the geometry, shares summed in group order): venn-lab's virtual-clock determinism test
//! trains at 1 and 2 threads and compares the CSVs.

mod direct;
mod im2col;
mod winograd;

use crate::depthwise::{nhwc, planar};
use crate::types::{Epilogue, Geom, flip_transpose};

/// The algorithm a convolution runs ([`path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// Depthwise, channels innermost (`depthwise/nhwc.rs`): maps up to 7 × 7.
    DepthwiseNhwc,
    /// Depthwise, plane by plane (`depthwise/planar.rs`).
    DepthwisePlanar,
    /// Direct 3 × 3 (`conv/direct.rs`): thin layers on large maps, where the CPU runs it fast.
    Direct,
    /// Winograd F(2 × 2) or F(4 × 4) (`conv/winograd/`): 3 × 3 stride 1, wide layers.
    Winograd,
    /// im2col + GEMM (`conv/im2col.rs`): everything else.
    Im2col,
}

/// Which algorithm `g` runs: the first of the specialised paths that applies (each one's
/// `applies` says where it pays, measured per layer; `fl-job/TRAINING.md`), else im2col.
pub(crate) fn path(g: &Geom) -> Path {
    if g.depthwise {
        if nhwc::applies(g) {
            Path::DepthwiseNhwc
        } else {
            Path::DepthwisePlanar
        }
    } else if direct::applies(g) {
        Path::Direct
    } else if winograd::applies(g) {
        Path::Winograd
    } else {
        Path::Im2col
    }
}

/// Forward convolution: `x` `[n, cin, h, w]`, `weight` `[cout, cin/groups, k, k]` →
/// `[n, cout, ho, wo]`.
pub fn forward(g: &Geom, x: &[f32], weight: &[f32]) -> Vec<f32> {
    forward_fused(g, x, weight, None)
}

/// [`forward`], then `epilogue` on every output channel if given.
pub fn forward_fused(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    g.check_forward(x, weight, epilogue);
    match path(g) {
        Path::DepthwiseNhwc => nhwc::forward(g, x, weight, epilogue),
        Path::DepthwisePlanar => planar::forward(g, x, weight, epilogue),
        Path::Direct => direct::forward(g, x, weight, epilogue),
        Path::Winograd => winograd::forward(g, x, weight, epilogue),
        Path::Im2col => im2col::forward(g, x, weight, epilogue),
    }
}

/// Gradients of a convolution with respect to its input and its weight, each only if asked for.
pub fn backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    g.check_backward(x, weight, grad_out);
    match path(g) {
        Path::DepthwiseNhwc => nhwc::backward(g, x, weight, grad_out, want_dx, want_dw),
        Path::DepthwisePlanar => planar::backward(g, x, weight, grad_out, want_dx, want_dw),
        Path::Direct => (
            want_dx.then(|| direct::input_grad(g, grad_out, weight)),
            want_dw.then(|| {
                if direct::weight_grad_pays(g) {
                    direct::weight_grad(g, x, grad_out)
                } else if winograd::applies(g) {
                    winograd::weight_grad(g, x, grad_out)
                } else {
                    im2col::backward(g, x, weight, grad_out, false, true)
                        .1
                        .expect("asked for the weight gradient")
                }
            }),
        ),
        Path::Winograd => (
            want_dx.then(|| winograd::input_grad(g, grad_out, weight)),
            want_dw.then(|| winograd::weight_grad(g, x, grad_out)),
        ),
        Path::Im2col if want_dx && g.k == 3 && g.stride == 1 && g.pad == 1 => {
            // A "same" 3 × 3 stride-1 convolution's input gradient is the same kind of
            // convolution of the output gradient with the flipped, transposed filters: one
            // im2col + GEMM straight into `dx`, instead of a GEMM into the `cin·9 × pixels`
            // column gradient and the col2im scatter after it. ResNet-18 ×64's 4 × 4 layers:
            // 12.3 → 9.2 ms per call (2 threads, `tests::layer_times`).
            let back = Geom {
                cin: g.cout,
                cout: g.cin,
                ..*g
            };
            let dx = forward(&back, grad_out, &flip_transpose(g, weight));
            let (_, dw) = im2col::backward(g, x, weight, grad_out, false, want_dw);
            (Some(dx), dw)
        }
        Path::Im2col => im2col::backward(g, x, weight, grad_out, want_dx, want_dw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{close, naive, values};

    /// `(n, cin, h, w, cout, k, stride, pad, depthwise)` as a [`Geom`].
    type Shape = (usize, usize, usize, usize, usize, usize, usize, usize, bool);

    fn geom((n, cin, h, w, cout, k, stride, pad, depthwise): Shape) -> Geom {
        Geom {
            n,
            cin,
            h,
            w,
            cout,
            k,
            stride,
            pad,
            depthwise,
        }
    }

    /// Every geometry the two models use, plus odd sizes, against the definition.
    #[test]
    fn kernels_match_the_definition() {
        let geoms = [
            // ResNet stem (one input channel), 3 × 3 stride 1 and 2, odd map sizes.
            (2, 1, 7, 7, 4, 3, 1, 1, false),
            (3, 3, 6, 6, 5, 3, 1, 1, false),
            (3, 4, 7, 7, 6, 3, 2, 1, false),
            (5, 2, 3, 3, 3, 3, 2, 1, false),
            (4, 6, 2, 2, 2, 3, 1, 1, false),
            // One row: the first and last kernel rows read nothing.
            (2, 3, 1, 5, 2, 3, 1, 1, false),
            // Stacked groups padded to whole vectors (245 → 256 and 225 → 240 columns; the
            // second group one sample short), weight gradients written transposed
            // (`im2col::dw_transposed`).
            (11, 16, 7, 7, 16, 3, 1, 1, false),
            (9, 8, 9, 9, 32, 3, 2, 1, false),
            // 1 × 1, including strided ones.
            (3, 5, 4, 4, 7, 1, 1, 0, false),
            (3, 5, 5, 5, 2, 1, 2, 0, false),
            // Depthwise 3 × 3, stride 1 and 2.
            (3, 4, 6, 6, 4, 3, 1, 1, true),
            (2, 3, 7, 7, 3, 3, 2, 1, true),
            (2, 3, 8, 6, 3, 3, 2, 1, true),
            (2, 2, 2, 2, 2, 3, 2, 1, true),
            // Depthwise on maps over 7 × 7 (the planar kernel; smaller ones are
            // channels-innermost, `depthwise_nhwc`).
            (2, 3, 9, 9, 3, 3, 1, 1, true),
            (2, 2, 16, 15, 2, 3, 2, 1, true),
            // 3 × 3 stride 1 that takes the Winograd path (`conv_winograd::applies`): even,
            // odd and non-square maps.
            (3, 32, 14, 14, 40, 3, 1, 1, false),
            (21, 33, 7, 5, 32, 3, 1, 1, false),
            // F(4 × 4, 3 × 3): 28 × 28 and a size that is not a multiple of 4.
            (2, 32, 28, 28, 33, 3, 1, 1, false),
            (2, 34, 30, 29, 32, 3, 1, 1, false),
            // Direct 3 × 3 (`conv_direct::applies`, on AVX-512).
            (3, 16, 28, 28, 16, 3, 1, 1, false),
            (5, 32, 14, 15, 24, 3, 1, 1, false),
        ];
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for (seed, &shape) in geoms.iter().enumerate() {
                let g = geom(shape);
                let n = g.n;
                let x = values(n * g.in_len(), seed as u64 * 3 + 1);
                let wt = values(g.weight_len(), seed as u64 * 3 + 2);
                let go = values(n * g.out_len(), seed as u64 * 3 + 3);
                let (out, dx, dw) = naive(&g, &x, &wt, &go);
                pool.install(|| {
                    close(&forward(&g, &x, &wt), &out, "out", &g);
                    let (gx, gw) = backward(&g, &x, &wt, &go, true, true);
                    close(&gx.unwrap(), &dx, "dx", &g);
                    close(&gw.unwrap(), &dw, "dw", &g);
                    let (none, gw) = backward(&g, &x, &wt, &go, false, true);
                    assert!(none.is_none());
                    close(&gw.unwrap(), &dw, "dw alone", &g);
                    let (gx, none) = backward(&g, &x, &wt, &go, true, false);
                    assert!(none.is_none());
                    close(&gx.unwrap(), &dx, "dx alone", &g);
                });
            }
        }
    }

    /// The groups and the order of the weight-gradient sum do not depend on the thread
    /// count, so neither do the bits (venn-lab's virtual clock relies on it).
    #[test]
    fn results_are_bit_identical_at_any_thread_count() {
        let geoms = [
            // Stacked groups (4 × 4 maps: two groups of ten), one sample per group, Winograd
            // F(2 × 2) and F(4 × 4), direct 3 × 3, depthwise channels-innermost and planar.
            (20, 8, 4, 4, 8, 3, 1, 1, false),
            (20, 16, 7, 7, 16, 3, 1, 1, false),
            (20, 3, 16, 16, 4, 3, 1, 1, false),
            (7, 5, 5, 5, 6, 1, 1, 0, false),
            (20, 32, 7, 7, 32, 3, 1, 1, false),
            (20, 40, 28, 28, 32, 3, 1, 1, false),
            (20, 16, 28, 28, 16, 3, 1, 1, false),
            (20, 6, 8, 8, 6, 3, 2, 1, true),
            (20, 4, 16, 16, 4, 3, 2, 1, true),
        ];
        for (seed, &shape) in geoms.iter().enumerate() {
            let g = geom(shape);
            let n = g.n;
            let x = values(n * g.in_len(), seed as u64 * 5 + 1);
            let wt = values(g.weight_len(), seed as u64 * 5 + 2);
            let go = values(n * g.out_len(), seed as u64 * 5 + 3);
            let run = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| {
                    let (dx, dw) = backward(&g, &x, &wt, &go, true, true);
                    (forward(&g, &x, &wt), dx.unwrap(), dw.unwrap())
                })
            };
            let one = run(1);
            for threads in [2, 3, 4] {
                let other = run(threads);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&one.0),
                    bits(&other.0),
                    "out at {threads} threads, {g:?}"
                );
                assert_eq!(
                    bits(&one.1),
                    bits(&other.1),
                    "dx at {threads} threads, {g:?}"
                );
                assert_eq!(
                    bits(&one.2),
                    bits(&other.2),
                    "dw at {threads} threads, {g:?}"
                );
            }
        }
    }

    /// Not a check: milliseconds per call of every convolution in ResNet-18 ×64 at batch 20
    /// (forward, input gradient, weight gradient) on the current pool, and the step's total
    /// by layer count. `LAYER=i` times one row, `WIDTH=16` another width, `REPS` sets the
    /// repetitions. Run with
    /// `cargo test --release -p fl-job layer_times -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn layer_times() {
        // Timed from a thread of the pool, as training calls the kernels (on a lane or a
        // pool thread): from outside, every parallel loop would pay a cross-thread wake-up.
        rayon::ThreadPoolBuilder::new()
            .build()
            .expect("a thread pool")
            .install(time_layers);
    }

    fn time_layers() {
        // (count in the network, cin, size, cout, k, stride, pad)
        let layers = [
            (1, 1, 28, 64, 3, 1, 1),
            (4, 64, 28, 64, 3, 1, 1),
            (1, 64, 28, 128, 3, 2, 1),
            (1, 64, 28, 128, 1, 2, 0),
            (3, 128, 14, 128, 3, 1, 1),
            (1, 128, 14, 256, 3, 2, 1),
            (1, 128, 14, 256, 1, 2, 0),
            (3, 256, 7, 256, 3, 1, 1),
            (1, 256, 7, 512, 3, 2, 1),
            (1, 256, 7, 512, 1, 2, 0),
            (3, 512, 4, 512, 3, 1, 1),
        ];
        let time = |f: &mut dyn FnMut()| {
            f();
            let start = std::time::Instant::now();
            let reps: usize = std::env::var("REPS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(5);
            for _ in 0..reps {
                f();
            }
            start.elapsed().as_secs_f64() * 1e3 / reps as f64
        };
        // `LAYER=i` times only the i-th row (for a profile of one layer).
        println!("kernels run {}", crate::isa::name());
        let only: Option<usize> = std::env::var("LAYER").ok().and_then(|v| v.parse().ok());
        let mut total = [0.0f64; 3];
        // `WIDTH=w` scales the channels to ResNet-18 ×w (the stem keeps its one input).
        let width: usize = std::env::var("WIDTH")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64);
        for (i, &(count, cin, size, cout, k, stride, pad)) in layers.iter().enumerate() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            let (cin, cout) = ((cin * width / 64).max(1), cout * width / 64);
            let g = geom((20, cin, size, size, cout, k, stride, pad, false));
            let x = values(g.n * g.in_len(), 1);
            let wt = values(g.weight_len(), 2);
            let go = values(g.n * g.out_len(), 3);
            let f = time(&mut || drop(forward(&g, &x, &wt)));
            let dx = time(&mut || drop(backward(&g, &x, &wt, &go, true, false)));
            let dw = time(&mut || drop(backward(&g, &x, &wt, &go, false, true)));
            for (t, v) in total.iter_mut().zip([f, dx, dw]) {
                *t += v * count as f64;
            }
            let path = format!("{:?}", path(&g));
            println!(
                "{count} × {cin:>3}→{cout:<3} {size:>2}² k{k} s{stride} {path:<15} fwd {f:6.3} dx {dx:6.3} dw {dw:6.3} ms",
            );
        }
        println!(
            "step: fwd {:.2} dx {:.2} dw {:.2} ms, all {:.2}",
            total[0],
            total[1],
            total[2],
            total.iter().sum::<f64>()
        );
    }
}
