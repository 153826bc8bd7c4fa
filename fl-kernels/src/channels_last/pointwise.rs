//! 1 × 1 convolutions on channels-last activations: the activation is a `[pixels, cin]`
//! matrix, so the forward and both gradients are one GEMM each over a piece of pixels,
//! with no im2col, no stacking of samples and no layout copies.
//!
//! Why: in NCHW a 1 × 1 convolution is one GEMM per sample, `[cout, cin] · [cin, h·w]`;
//! on MobileNet-V2's 4 × 4 and 2 × 2 maps that is 4–16 columns, so `conv/im2col.rs` stacks
//! samples side by side (a copy in, a copy out, and the same for the gradient), which with
//! the zeroing around it was most of the `memmove`/`memset` in a MobileNet-V2 ×0.25
//! training profile. Channels-last, every layer is `[n·h·w, cin] · Wᵀ` whatever its map.
//!
//! Pieces of [`ROWS`] pixels, fixed by the shape only: the weight gradient's per-piece
//! shares are summed in piece order, so results do not depend on the thread count.

use std::mem::MaybeUninit;

use super::thin;
use crate::gemm::{Mat, matmul, matmul_uninit};
use crate::layout::transpose;
use crate::scratch::{backward_pieces, build, build_uninit, piece, sum_partials};
use crate::simd::epilogue_rows;
use crate::types::{Epilogue, Geom};

/// Pixels per piece: each GEMM is at least this tall (bar the last), and the pieces give
/// two threads work on every MobileNet-V2 layer at batch 20 (80 pixels at 2 × 2).
const ROWS: usize = 1024;

/// A `[rows, cols]` row-major matrix.
fn rows_of(data: &[f32], cols: usize) -> Mat<'_> {
    Mat {
        data,
        rows: data.len() / cols,
        cols,
        rs: cols,
        cs: 1,
    }
}

/// `y[p, cout] = x[p, cin] · Wᵀ` for `x` `[n, h, w, cin]`, then `epilogue` per channel.
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    let (cin, cout) = (g.cin, g.cout);
    let mixed = both_thin(g).then(|| transpose(weight, cout, cin));
    // Wᵀ as a `[cin, cout]` view of the `[cout, cin]` weight.
    let wt = Mat {
        data: weight,
        rows: cin,
        cols: cout,
        rs: 1,
        cs: cin,
    };
    let len = g.n * g.h * g.w * cout;
    if let Some(wt) = &mixed {
        return build(len, ROWS * cout, |i, out| {
            thin::mix(out, piece(x, i, ROWS * cin), wt, cin, cout);
            if let Some(e) = epilogue {
                epilogue_rows(e, out, cout);
            }
        });
    }
    let fill = |i: usize, out: &mut [MaybeUninit<f32>]| {
        matmul_uninit(out, cout, rows_of(piece(x, i, ROWS * cin), cin), wt);
        // SAFETY: the product wrote all of `out` (`rows · cout` values, the piece).
        #[allow(unsafe_code)]
        let out = unsafe { out.assume_init_mut() };
        if let Some(e) = epilogue {
            epilogue_rows(e, out, cout);
        }
    };
    // SAFETY: `fill` writes every value of its piece (the GEMM's whole product).
    #[allow(unsafe_code)]
    unsafe {
        build_uninit(len, ROWS * cout, fill).0
    }
}

/// `dx = dy · W` and `dW = dyᵀ · x`, each only if asked for. With a thin input the weight
/// gradient is [`thin::outer`]'s, transposed (`mobilenet_layer_times`, ms: 8 → 48 on 28²
/// 0.37 → 0.19, on 14² 0.074 → 0.030, 8 → 8 on 28² 0.137 → 0.030); with a thin output
/// `gemm` already runs it with the wide side as its row block (48 → 8 on 14² 0.022 against
/// 0.028).
pub(crate) fn backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let (cin, cout) = (g.cin, g.cout);
    let w = rows_of(weight, cin);
    let thin_input = thin::thin(cin);
    let share = |i: usize, dx: Option<&mut [f32]>| {
        let (xs, gs) = (piece(x, i, ROWS * cin), piece(grad_out, i, ROWS * cout));
        if let Some(dx) = dx {
            if both_thin(g) {
                thin::mix(dx, gs, weight, cout, cin);
            } else {
                matmul(dx, cin, rows_of(gs, cout), w, false);
            }
        }
        want_dw.then(|| {
            let mut dw = vec![0.0f32; cout * cin];
            match thin_input {
                // `[cin, cout]`, turned around once the shares are summed.
                true => thin::outer(&mut dw, xs, gs, cin, cout),
                false => {
                    // dyᵀ as a `[cout, p]` view.
                    let gt = Mat {
                        data: gs,
                        rows: cout,
                        cols: gs.len() / cout,
                        rs: 1,
                        cs: cout,
                    };
                    matmul(&mut dw, cin, gt, rows_of(xs, cin), false);
                }
            }
            dw
        })
    };
    let pixels = g.n * g.h * g.w;
    let (dx, partials) = backward_pieces(want_dx, pixels * cin, ROWS * cin, share);
    let dw = want_dw.then(|| {
        let sum = sum_partials(partials, cout * cin);
        match thin_input {
            true => transpose(&sum, cin, cout),
            false => sum,
        }
    });
    (dx, dw)
}

/// Whether both sides are thin (8 → 8 …): then the forward and the input gradient take
/// [`thin::mix`] too. With one wide side `gemm` was faster at both (`mobilenet_layer_times`,
/// ms: 8 → 48 on 28² forward 0.27 against 0.31, input gradient 0.29 against 0.34; 48 → 8 on
/// 14² 0.061 / 0.039 against 0.074 / 0.052); 8 → 8 on 28² 0.099 / 0.097 → 0.077 / 0.073.
fn both_thin(g: &Geom) -> bool {
    thin::thin(g.cin) && thin::thin(g.cout)
}
