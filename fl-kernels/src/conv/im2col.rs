//! Dense convolutions by im2col + GEMM on contiguous NCHW `f32` slices: forward, input
//! gradient and weight gradient, for any geometry (the dispatcher, `conv/mod.rs`, sends
//! the layers that a faster path fits elsewhere).
//!
//! Why our own: on Burn's `flex` backend a 3 × 3 convolution's backward is a transposed
//! convolution (GEMM + col2im scatter over NHWC copies) plus a batch-as-channels convolution,
//! and about half of a training step was data movement around the GEMMs (profile in
//! `fl-job/TRAINING.md`). Here the weight gradient is one GEMM against the im2col matrix, the
//! input gradient one GEMM then a col2im into NCHW, and nothing changes layout.
//!
//! Parallelism is over the batch: the samples are cut into groups and each group runs its
//! GEMMs single-threaded (`gemm::Parallelism::None`), so threads never wait on each other
//! inside a layer. Samples whose output maps are small (ResNet's 4 × 4 stage) share a group,
//! stacked side by side so that each GEMM stays wide. The groups depend on the geometry
//! only, never on the thread count, and the weight gradient sums the groups' shares in
//! group order: results are bit-identical at any number of threads (the virtual clock's
//! determinism test in venn-lab trains at 1 and 2 threads and compares the CSVs).
//!
//! The kernels know nothing of Burn (the autodiff glue is `conv_op.rs`).

use std::cell::RefCell;

use crate::gemm::{Mat, matmul, matmul_strided};
use crate::layout::transpose;
use crate::scratch::{backward_pieces, build, piece, sum_partials, take, with_local};
use crate::simd::im2col as permute;
use crate::types::{Epilogue, Geom};

/// The output columns `lo..hi` whose input column `ow·stride + kw − pad` lies inside `0..w`.
fn valid_cols(g: &Geom, kw: usize, out: usize, size: usize) -> (usize, usize) {
    let shift = kw as isize - g.pad as isize;
    let s = g.stride as isize;
    // ow·s + shift ≥ 0  ⇔  ow ≥ ceil(−shift / s)
    let lo = if shift >= 0 {
        0
    } else {
        ((-shift) + s - 1) / s
    };
    // ow·s + shift ≤ size − 1  ⇔  ow ≤ floor((size − 1 − shift) / s)
    let last = size as isize - 1 - shift;
    let hi = if last < 0 { 0 } else { last / s + 1 };
    let hi = (hi as usize).min(out);
    let lo = (lo as usize).min(hi);
    (lo, hi)
}

/// Input row for output row `oh` and kernel row `kh`, if inside the image.
fn input_row(g: &Geom, oh: usize, kh: usize) -> Option<usize> {
    let ih = (oh * g.stride + kh) as isize - g.pad as isize;
    (ih >= 0 && (ih as usize) < g.h).then_some(ih as usize)
}

/// For [`Geom::same_size`] geometries: the signed shift from an im2col row to its input
/// plane, the range of output rows whose input row exists, and the valid output columns.
fn shift_plan(g: &Geom, kh: usize, kw: usize) -> (isize, usize, usize, usize, usize) {
    let w = g.w as isize;
    let shift = (kh as isize - g.pad as isize) * w + (kw as isize - g.pad as isize);
    let oh_lo = g.pad.saturating_sub(kh).min(g.h);
    let oh_hi = (g.h + g.pad).saturating_sub(kh).min(g.h).max(oh_lo);
    let (lo, hi) = valid_cols(g, kw, g.wo(), g.w);
    (shift, oh_lo, oh_hi, lo, hi)
}

/// The part of `dst[a..b]` (in dst indices) whose source index `i + shift` lies in
/// `0..len` (empty at `b` when none does: a one-row map's first and last kernel rows).
fn overlap(a: usize, b: usize, shift: isize, len: usize) -> (usize, usize) {
    let lo = (a as isize).max(-shift).max(0).min(b as isize) as usize;
    let hi = ((b as isize).min(len as isize - shift).max(lo as isize)) as usize;
    (lo, hi)
}

/// Writes one sample's im2col matrix `[cin·k·k, ho·wo]` into `col`, whose rows are `ld` long,
/// starting at column `off`: by register permutes for maps of up to 16 pixels
/// (`simd/im2col.rs`), otherwise by [`im2col_general`].
fn im2col(g: &Geom, x: &[f32], col: &mut [f32], ld: usize, off: usize) {
    if !permute::im2col(g, x, col, ld, off) {
        im2col_general(g, x, col, ld, off);
    }
}

/// [`im2col`] by row copies, for any geometry.
pub(crate) fn im2col_general(g: &Geom, x: &[f32], col: &mut [f32], ld: usize, off: usize) {
    let (ho, wo, k) = (g.ho(), g.wo(), g.k);
    let plane_len = g.h * g.w;
    for c in 0..g.cin {
        let plane = &x[c * plane_len..(c + 1) * plane_len];
        for kh in 0..k {
            for kw in 0..k {
                let row = (c * k + kh) * k + kw;
                let dst = &mut col[row * ld + off..row * ld + off + ho * wo];
                if g.same_size() {
                    let (shift, oh_lo, oh_hi, lo, hi) = shift_plan(g, kh, kw);
                    let (a, b) = overlap(oh_lo * wo, oh_hi * wo, shift, plane_len);
                    dst[..a].fill(0.0);
                    dst[b..].fill(0.0);
                    if a < b {
                        let from = (a as isize + shift) as usize;
                        dst[a..b].copy_from_slice(&plane[from..from + (b - a)]);
                    }
                    // The shifted copy wrapped these columns round from the next row.
                    if lo > 0 || hi < wo {
                        for r in dst.chunks_exact_mut(wo) {
                            r[..lo].fill(0.0);
                            r[hi..].fill(0.0);
                        }
                    }
                    continue;
                }
                let (lo, hi) = valid_cols(g, kw, wo, g.w);
                for oh in 0..ho {
                    let d = &mut dst[oh * wo..(oh + 1) * wo];
                    let Some(ih) = input_row(g, oh, kh) else {
                        d.fill(0.0);
                        continue;
                    };
                    let src = &plane[ih * g.w..(ih + 1) * g.w];
                    d[..lo].fill(0.0);
                    d[hi..].fill(0.0);
                    if lo < hi {
                        let first = lo * g.stride + kw - g.pad;
                        if g.stride == 1 {
                            d[lo..hi].copy_from_slice(&src[first..first + (hi - lo)]);
                        } else {
                            permute::copy_strided(&mut d[lo..hi], &src[first..], g.stride);
                        }
                    }
                }
            }
        }
    }
}

/// Adds one sample's column gradient (`[cin·k·k, ho·wo]`, rows `ld` long, from column `off`)
/// back onto the input gradient `dx` (`[cin, h, w]`): the transpose of [`im2col`]. The
/// column gradient is scratch: border elements that im2col had zeroed are cleared in it.
fn col2im_add(g: &Geom, col: &mut [f32], ld: usize, off: usize, dx: &mut [f32]) {
    if !permute::col2im_add(g, col, ld, off, dx) {
        col2im_general(g, col, ld, off, dx);
    }
}

/// [`col2im_add`] by row loops, for any geometry.
fn col2im_general(g: &Geom, col: &mut [f32], ld: usize, off: usize, dx: &mut [f32]) {
    let (ho, wo, k) = (g.ho(), g.wo(), g.k);
    let plane_len = g.h * g.w;
    for c in 0..g.cin {
        let plane = &mut dx[c * plane_len..(c + 1) * plane_len];
        for kh in 0..k {
            for kw in 0..k {
                let row = (c * k + kh) * k + kw;
                let srcrow = &mut col[row * ld + off..row * ld + off + ho * wo];
                if g.same_size() {
                    let (shift, oh_lo, oh_hi, lo, hi) = shift_plan(g, kh, kw);
                    // Clear what would wrap onto a neighbouring row, then add in one piece.
                    if lo > 0 || hi < wo {
                        for r in srcrow.chunks_exact_mut(wo) {
                            r[..lo].fill(0.0);
                            r[hi..].fill(0.0);
                        }
                    }
                    let (a, b) = overlap(oh_lo * wo, oh_hi * wo, shift, plane_len);
                    if a < b {
                        let from = (a as isize + shift) as usize;
                        for (d, v) in plane[from..from + (b - a)].iter_mut().zip(&srcrow[a..b]) {
                            *d += *v;
                        }
                    }
                    continue;
                }
                let (lo, hi) = valid_cols(g, kw, wo, g.w);
                if lo >= hi {
                    continue;
                }
                let first = lo * g.stride + kw - g.pad;
                for oh in 0..ho {
                    let Some(ih) = input_row(g, oh, kh) else {
                        continue;
                    };
                    let s = &srcrow[oh * wo + lo..oh * wo + hi];
                    let d = &mut plane[ih * g.w..(ih + 1) * g.w];
                    if g.stride == 1 {
                        for (o, v) in d[first..first + (hi - lo)].iter_mut().zip(s) {
                            *o += *v;
                        }
                    } else {
                        permute::add_strided(&mut d[first..], s, g.stride);
                    }
                }
            }
        }
    }
}

/// Per-thread buffers, grown on first use and kept from call to call ([`with_local`]): every
/// kernel writes all of what it reads back, so they are never cleared.
#[derive(Default)]
struct Scratch {
    col: Vec<f32>,
    dcol: Vec<f32>,
    stacked: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Forward convolution by im2col + GEMM, then `epilogue` on every output channel if given.
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    let group = g.group();
    build(g.n * g.out_len(), group * g.out_len(), |i, out| {
        let xs = piece(x, i, group * g.in_len());
        with_local(&SCRATCH, |scratch| {
            forward_group(g, xs, weight, out, scratch, epilogue)
        })
    })
}

/// One group of samples as one GEMM: `out[cout, gs·spatial] = W[cout, kdim] · col`.
fn forward_group(
    g: &Geom,
    xs: &[f32],
    weight: &[f32],
    out: &mut [f32],
    scratch: &mut Scratch,
    epilogue: Option<&Epilogue<'_>>,
) {
    let gs = xs.len() / g.in_len();
    let spatial = g.ho() * g.wo();
    let (kdim, ld) = (g.kdim(), padded(gs, spatial));
    let w = Mat {
        data: weight,
        rows: g.cout,
        cols: kdim,
        rs: kdim,
        cs: 1,
    };
    let cols: &[f32] = if g.direct(gs) {
        xs
    } else {
        stack_im2col(g, xs, take(&mut scratch.col, kdim * ld), ld)
    };
    let b = Mat {
        data: cols,
        rows: kdim,
        cols: ld,
        rs: ld,
        cs: 1,
    };
    if gs == 1 {
        matmul(out, spatial, w, b, false);
        if let Some(e) = epilogue {
            for (co, plane) in out.chunks_exact_mut(spatial).enumerate() {
                e.apply(co, plane);
            }
        }
        return;
    }
    let tmp = take(&mut scratch.stacked, g.cout * ld);
    matmul(tmp, ld, w, b, false);
    // `[cout, gs·spatial]` → `gs × [cout, spatial]`.
    for (j, o) in out.chunks_exact_mut(g.out_len()).enumerate() {
        for (co, dst) in o.chunks_exact_mut(spatial).enumerate() {
            let src = &tmp[co * ld + j * spatial..co * ld + (j + 1) * spatial];
            match epilogue {
                Some(e) => e.write(co, dst, src),
                None => dst.copy_from_slice(src),
            }
        }
    }
}

/// The row length of a group's stacked matrices: `gs` samples of `spatial` columns, padded
/// to whole vectors of 16 when stacked. Why: the `gemm` crate copies (packs) a product's
/// pixel-indexed operand unless its row count is a multiple of 16; the padding columns cost
/// less than that copy of the im2col matrix. `conv::tests::layer_times`, 1 thread, batch
/// 20, forward ms a call: ResNet-18 ×4 16 → 16 on 7² (245 → 256 columns) 0.069–0.072 →
/// 0.060–0.067, 4 → 8 on 28² stride 2 (392 → 400) 0.069–0.071 → 0.055–0.060, 8 → 16 on
/// 14² stride 2 0.042–0.043 → 0.034–0.038.
fn padded(gs: usize, spatial: usize) -> usize {
    if gs == 1 {
        spatial
    } else {
        (gs * spatial).next_multiple_of(16)
    }
}

/// The im2col matrices of the samples `xs`, side by side in `col` (rows `ld` long), the
/// padding columns after them zero.
fn stack_im2col<'c>(g: &Geom, xs: &[f32], col: &'c mut [f32], ld: usize) -> &'c [f32] {
    let spatial = g.ho() * g.wo();
    let used = xs.len() / g.in_len() * spatial;
    for (j, xj) in xs.chunks_exact(g.in_len()).enumerate() {
        im2col(g, xj, col, ld, j * spatial);
    }
    if used < ld {
        for row in col.chunks_exact_mut(ld) {
            row[used..].fill(0.0);
        }
    }
    col
}

/// Gradients of a dense convolution by im2col + GEMM, each only if asked for.
pub(crate) fn backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let group = g.group();
    let (xc, gc) = (group * g.in_len(), group * g.out_len());
    // Collected in group order, so the sum below is the same at any thread count.
    let group_grads = |i: usize, dx: Option<&mut [f32]>| {
        let (xs, gs) = (piece(x, i, xc), piece(grad_out, i, gc));
        with_local(&SCRATCH, |scratch| {
            backward_group(g, xs, weight, gs, dx, want_dw, scratch)
        })
    };
    let (dx, partials) = backward_pieces(want_dx, g.n * g.in_len(), xc, group_grads);
    let dw = want_dw.then(|| {
        let dw = sum_partials(partials, g.weight_len());
        if dw_transposed(g) {
            transpose(&dw, g.kdim(), g.cout)
        } else {
            dw
        }
    });
    (dx, dw)
}

/// Whether the weight gradient's GEMM writes `dWᵀ` (`[kdim, cout]`). The `gemm` crate
/// computes into column-major destinations and copies (packs) its left operand unless that
/// is column-major too: for the row-major `dW[cout, kdim]` its left operand is the im2col
/// matrix (`kdim × pixels`, copied again whole), for `dWᵀ` the output gradient (`cout ×
/// pixels`, `9·cin / cout` times smaller). That pays while the copy is a large part of the
/// product, i.e. for few output channels, and only for whole vectors of them (the
/// micro-kernel runs 16 rows at a time). `conv::tests::layer_times`, 1 thread, batch 20, ms
/// a call, row-major → transposed: ResNet-18 ×4 16 → 16 on 7² 0.092 → 0.071–0.076, 32 → 32
/// on 4² 0.095–0.101 → 0.078–0.084; ×16 16 → 32 on 28² 0.58 → 0.45–0.46, 32 → 64 on 14²
/// 0.42 → 0.33–0.34; but ×16 128 → 128 on 4² 0.87–0.94 → 1.00–1.02 and ×64 512 → 512
/// 12 → 19 ms.
fn dw_transposed(g: &Geom) -> bool {
    g.cout.is_multiple_of(16) && g.cout <= 64 && g.kdim() > g.cout
}

/// One group's input gradient (written into `dx`) and its share of the weight gradient, each
/// one GEMM over the group's samples stacked side by side.
fn backward_group(
    g: &Geom,
    xs: &[f32],
    weight: &[f32],
    gouts: &[f32],
    dx: Option<&mut [f32]>,
    want_dw: bool,
    scratch: &mut Scratch,
) -> Option<Vec<f32>> {
    let gs = xs.len() / g.in_len();
    let spatial = g.ho() * g.wo();
    let (kdim, ld) = (g.kdim(), padded(gs, spatial));
    let Scratch { col, dcol, stacked } = scratch;
    // The output gradient of these samples as one `[cout, ld]` matrix.
    let gmat: &[f32] = if gs == 1 {
        gouts
    } else {
        let gtmp = take(stacked, g.cout * ld);
        for (co, row) in gtmp.chunks_exact_mut(ld).enumerate() {
            for (j, gj) in gouts.chunks_exact(g.out_len()).enumerate() {
                row[j * spatial..(j + 1) * spatial]
                    .copy_from_slice(&gj[co * spatial..(co + 1) * spatial]);
            }
            row[gs * spatial..].fill(0.0);
        }
        gtmp
    };
    let gm = Mat {
        data: gmat,
        rows: g.cout,
        cols: ld,
        rs: ld,
        cs: 1,
    };
    let dw = want_dw.then(|| {
        let cols: &[f32] = if g.direct(gs) {
            xs
        } else {
            stack_im2col(g, xs, take(col, kdim * ld), ld)
        };
        // dW[cout, kdim] = G[cout, used] · colᵀ[used, kdim] (the padding columns left out),
        // written transposed (`[kdim, cout]`, see [`dw_transposed`]).
        let used = gs * spatial;
        let colt = Mat {
            data: cols,
            rows: used,
            cols: kdim,
            rs: 1,
            cs: ld,
        };
        let gu = Mat { cols: used, ..gm };
        let mut dw = vec![0.0f32; g.cout * kdim];
        if dw_transposed(g) {
            matmul_strided(&mut dw, 1, g.cout, gu, colt, false);
        } else {
            matmul(&mut dw, kdim, gu, colt, false);
        }
        dw
    });
    if let Some(dx) = dx {
        // Wᵀ as a `[kdim, cout]` view of the `[cout, kdim]` weight.
        let wt = Mat {
            data: weight,
            rows: kdim,
            cols: g.cout,
            rs: 1,
            cs: kdim,
        };
        if g.direct(gs) {
            // The column gradient is the input gradient itself.
            matmul(dx, ld, wt, gm, false);
        } else {
            // dcol[kdim, ld] = Wᵀ · G, then back onto the input.
            let dcol = take(dcol, kdim * ld);
            matmul(dcol, ld, wt, gm, false);
            for (j, d) in dx.chunks_exact_mut(g.in_len()).enumerate() {
                col2im_add(g, dcol, ld, j * spatial, d);
            }
        }
    }
    dw
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `simd/im2col.rs`'s matrix is the same as [`im2col_general`]'s (checked against the
    /// convolution's definition through the dispatcher's tests) on 4 × 4, 3 × 3, 2 × 2 and
    /// 4 × 3 maps, strides 1 and 2, padding 0 and 1, kernels 1 and 3, and on larger "same"
    /// maps; nothing outside the sample's columns written. AVX-512 only: elsewhere it says
    /// so and checks nothing.
    #[test]
    fn matches_the_general_im2col() {
        if !crate::isa::avx512() {
            crate::isa::say(&format!(
                "SKIPPED im2col::matches_the_general_im2col: the kernels run {}, not \
                 avx512 (the general im2col, used instead, is tested in conv/mod.rs)",
                crate::isa::name()
            ));
            return;
        }
        for (h, w, k, stride, pad) in [
            (4, 4, 3, 1, 1),
            (3, 3, 3, 1, 1),
            (2, 2, 3, 1, 1),
            (4, 3, 3, 1, 1),
            (4, 4, 3, 2, 1),
            (4, 4, 1, 1, 0),
            (4, 4, 3, 1, 0),
            // Larger "same" maps (masked shifted loads): 7 × 7, 14 × 14, non-square, 1 × 1.
            (7, 7, 3, 1, 1),
            (14, 14, 3, 1, 1),
            (5, 9, 3, 1, 1),
            (6, 5, 1, 1, 0),
            // One row or one column: whole kernel rows (columns) fall outside.
            (1, 5, 3, 1, 1),
            (1, 20, 3, 1, 1),
            (6, 1, 3, 1, 1),
            // Stride 2 on rows of up to 32 pixels (two-register permutes): ResNet-18's
            // downsampling 3 × 3 and 1 × 1 layers, odd sizes.
            (28, 28, 3, 2, 1),
            (14, 14, 3, 2, 1),
            (7, 7, 3, 2, 1),
            (28, 28, 1, 2, 0),
            (9, 31, 3, 2, 1),
            (20, 17, 3, 2, 0),
        ] {
            let g = Geom {
                n: 1,
                cin: 5,
                h,
                w,
                cout: 2,
                k,
                stride,
                pad,
                depthwise: false,
            };
            let x: Vec<f32> = (0..g.cin * h * w).map(|i| i as f32 + 1.0).collect();
            let (rows, cols) = (g.cin * k * k, g.ho() * g.wo());
            let (ld, off) = (cols * 3, cols);
            let mut ours = vec![-7.0f32; rows * ld];
            let mut want = ours.clone();
            assert!(permute::im2col(&g, &x, &mut ours, ld, off));
            im2col_general(&g, &x, &mut want, ld, off);
            assert_eq!(ours, want, "{h}×{w} k{k} s{stride} p{pad}");
        }
    }

    /// `simd/im2col.rs`'s stride-2 col2im adds the same values in the same order as
    /// [`col2im_general`] (the same bits, negative zeros included) and touches nothing else.
    #[test]
    fn strided_col2im_matches_the_general() {
        if !crate::isa::avx512() {
            crate::isa::say("SKIPPED im2col::strided_col2im_matches_the_general: not avx512");
            return;
        }
        for (h, w, k, pad) in [
            (28, 28, 3, 1),
            (14, 14, 3, 1),
            (7, 7, 3, 1),
            (28, 28, 1, 0),
            (9, 31, 3, 1),
            (20, 17, 3, 0),
        ] {
            let g = Geom {
                n: 1,
                cin: 3,
                h,
                w,
                cout: 2,
                k,
                stride: 2,
                pad,
                depthwise: false,
            };
            let (rows, cols) = (g.cin * k * k, g.ho() * g.wo());
            let (ld, off) = (cols * 2 + 1, cols);
            let col: Vec<f32> = (0..rows * ld)
                .map(|i| (i % 13) as f32 * 0.37 - 2.0)
                .collect();
            let dx: Vec<f32> = (0..g.cin * h * w)
                .map(|i| if i % 5 == 0 { -0.0 } else { i as f32 * 0.01 })
                .collect();
            let (mut ours, mut want) = (dx.clone(), dx);
            assert!(permute::col2im_add(&g, &col, ld, off, &mut ours));
            col2im_general(&g, &mut col.clone(), ld, off, &mut want);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&ours), bits(&want), "{h}×{w} k{k} p{pad}");
        }
    }
}
