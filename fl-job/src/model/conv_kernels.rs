//! CPU convolution kernels on contiguous NCHW `f32` slices: forward, input gradient and
//! weight gradient, for dense convolutions (im2col + GEMM) and depthwise ones (direct loops).
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
//! The autodiff glue that calls these lives in `conv_op.rs`; the kernels know nothing of Burn.

use std::cell::RefCell;
use std::thread::LocalKey;

use rayon::prelude::*;

use super::conv_direct;
use super::conv_winograd;
use super::depthwise_nhwc;
use super::im2col_simd;
use super::layers::Act;

/// How many output columns one GEMM should have at least: samples are stacked side by side
/// until their maps reach it (see [`Geom::stack`]).
const STACK_COLUMNS: usize = 256;

/// The shape of one convolution: input `[n, cin, h, w]`, weight `[cout, cin / groups, k, k]`,
/// symmetric zero padding `pad`, equal strides. `groups` is 1 (dense) or `cin` with
/// `cout == cin` (depthwise); other groupings are not handled here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geom {
    pub n: usize,
    pub cin: usize,
    pub h: usize,
    pub w: usize,
    pub cout: usize,
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
    pub depthwise: bool,
}

impl Geom {
    /// Output height.
    pub fn ho(&self) -> usize {
        (self.h + 2 * self.pad - self.k) / self.stride + 1
    }

    /// Output width.
    pub fn wo(&self) -> usize {
        (self.w + 2 * self.pad - self.k) / self.stride + 1
    }

    /// Rows of the im2col matrix (dense): `cin · k · k`.
    fn kdim(&self) -> usize {
        self.cin * self.k * self.k
    }

    pub fn in_len(&self) -> usize {
        self.cin * self.h * self.w
    }

    pub fn out_len(&self) -> usize {
        self.cout * self.ho() * self.wo()
    }

    /// Weight elements.
    pub fn weight_len(&self) -> usize {
        if self.depthwise {
            self.cout * self.k * self.k
        } else {
            self.cout * self.kdim()
        }
    }

    /// 1 × 1, stride 1, no padding: the input already is the im2col matrix.
    fn pointwise(&self) -> bool {
        self.k == 1 && self.stride == 1 && self.pad == 0
    }

    /// The im2col matrix is the sample itself: pointwise and one sample per GEMM.
    fn direct(&self, stack: usize) -> bool {
        self.pointwise() && stack == 1
    }

    /// Samples per group, stacked into one GEMM so that its width reaches a few hundred
    /// columns; groups are made equal in size (20 samples at 16 columns each: two groups of
    /// ten, not 16 + 4) so that they balance over the threads.
    fn group(&self) -> usize {
        group_size(self.n, self.ho() * self.wo())
    }
}

/// Samples per group for `n` samples of `columns` GEMM columns each (see [`Geom::group`]).
pub(super) fn group_size(n: usize, columns: usize) -> usize {
    equal_groups(n, STACK_COLUMNS, columns)
}

/// Samples per group for `n` samples of `each` elements, so that a group reaches `at_least`
/// elements: groups of equal size (20 samples in want of 16: two groups of ten, not 16 + 4),
/// so that they balance over the threads. Depends on the geometry only, never on the threads.
pub(super) fn equal_groups(n: usize, at_least: usize, each: usize) -> usize {
    let n = n.max(1);
    let want = at_least.div_ceil(each.max(1)).clamp(1, n);
    n.div_ceil(n.div_ceil(want))
}

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

/// Whether output and input maps have the same size at stride 1 ("same" padding): then an
/// im2col row is the whole input plane shifted by one offset, with a few border elements
/// zeroed, and it is copied in one piece instead of row by row.
fn same_size(g: &Geom) -> bool {
    g.stride == 1 && g.ho() == g.h && g.wo() == g.w
}

/// For [`same_size`] geometries: the signed shift from an im2col row to its input plane, the
/// range of output rows whose input row exists, and the valid output columns.
fn shift_plan(g: &Geom, kh: usize, kw: usize) -> (isize, usize, usize, usize, usize) {
    let w = g.w as isize;
    let shift = (kh as isize - g.pad as isize) * w + (kw as isize - g.pad as isize);
    let oh_lo = g.pad.saturating_sub(kh).min(g.h);
    let oh_hi = (g.h + g.pad).saturating_sub(kh).min(g.h).max(oh_lo);
    let (lo, hi) = valid_cols(g, kw, g.wo(), g.w);
    (shift, oh_lo, oh_hi, lo, hi)
}

/// The part of `dst[a..b]` (in dst indices) whose source index `i + shift` lies in
/// `0..len`.
fn overlap(a: usize, b: usize, shift: isize, len: usize) -> (usize, usize) {
    let lo = (a as isize).max(-shift).max(0) as usize;
    let hi = ((b as isize).min(len as isize - shift).max(lo as isize)) as usize;
    (lo, hi)
}

/// Writes one sample's im2col matrix `[cin·k·k, ho·wo]` into `col`, whose rows are `ld` long,
/// starting at column `off`: by register permutes for maps of up to 16 pixels
/// (`im2col_simd`), otherwise by [`im2col_general`].
fn im2col(g: &Geom, x: &[f32], col: &mut [f32], ld: usize, off: usize) {
    if !im2col_simd::im2col(g, x, col, ld, off) {
        im2col_general(g, x, col, ld, off);
    }
}

/// [`im2col`] by row copies, for any geometry.
pub(super) fn im2col_general(g: &Geom, x: &[f32], col: &mut [f32], ld: usize, off: usize) {
    let (ho, wo, k) = (g.ho(), g.wo(), g.k);
    let plane_len = g.h * g.w;
    for c in 0..g.cin {
        let plane = &x[c * plane_len..(c + 1) * plane_len];
        for kh in 0..k {
            for kw in 0..k {
                let row = (c * k + kh) * k + kw;
                let dst = &mut col[row * ld + off..row * ld + off + ho * wo];
                if same_size(g) {
                    let (shift, oh_lo, oh_hi, lo, hi) = shift_plan(g, kh, kw);
                    let (a, b) = overlap(oh_lo * wo, oh_hi * wo, shift, plane_len);
                    dst[..a].fill(0.0);
                    dst[b..].fill(0.0);
                    let from = (a as isize + shift) as usize;
                    dst[a..b].copy_from_slice(&plane[from..from + (b - a)]);
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
                            im2col_simd::copy_strided(&mut d[lo..hi], &src[first..], g.stride);
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
    let (ho, wo, k) = (g.ho(), g.wo(), g.k);
    let plane_len = g.h * g.w;
    for c in 0..g.cin {
        let plane = &mut dx[c * plane_len..(c + 1) * plane_len];
        for kh in 0..k {
            for kw in 0..k {
                let row = (c * k + kh) * k + kw;
                let srcrow = &mut col[row * ld + off..row * ld + off + ho * wo];
                if same_size(g) {
                    let (shift, oh_lo, oh_hi, lo, hi) = shift_plan(g, kh, kw);
                    // Clear what would wrap onto a neighbouring row, then add in one piece.
                    if lo > 0 || hi < wo {
                        for r in srcrow.chunks_exact_mut(wo) {
                            r[..lo].fill(0.0);
                            r[hi..].fill(0.0);
                        }
                    }
                    let (a, b) = overlap(oh_lo * wo, oh_hi * wo, shift, plane_len);
                    let from = (a as isize + shift) as usize;
                    for (d, v) in plane[from..from + (b - a)].iter_mut().zip(&srcrow[a..b]) {
                        *d += *v;
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
                        im2col_simd::add_strided(&mut d[first..], s, g.stride);
                    }
                }
            }
        }
    }
}

/// A strided read-only matrix view for [`matmul`].
#[derive(Clone, Copy)]
pub(super) struct Mat<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    /// Row and column strides, in elements.
    pub rs: usize,
    pub cs: usize,
}

impl Mat<'_> {
    /// Whether every element lies inside `data` (checked before the unsafe GEMM).
    fn fits(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1) * self.rs + (self.cols - 1) * self.cs < self.data.len()
    }
}

/// `dst[rows × cols, row stride dst_rs] (+)= a · b`, single-threaded.
#[allow(unsafe_code)]
pub(super) fn matmul(dst: &mut [f32], dst_rs: usize, a: Mat<'_>, b: Mat<'_>, accumulate: bool) {
    matmul_strided(dst, dst_rs, 1, a, b, accumulate);
}

/// [`matmul`] into a destination with row stride `dst_rs` and column stride `dst_cs`.
#[allow(unsafe_code)]
pub(super) fn matmul_strided(
    dst: &mut [f32],
    dst_rs: usize,
    dst_cs: usize,
    a: Mat<'_>,
    b: Mat<'_>,
    accumulate: bool,
) {
    let (m, n, k) = (a.rows, b.cols, a.cols);
    assert_eq!(a.cols, b.rows, "matmul: inner dimensions differ");
    assert!(a.fits() && b.fits(), "matmul: operand view out of bounds");
    assert!(
        m == 0 || n == 0 || (m - 1) * dst_rs + (n - 1) * dst_cs < dst.len(),
        "matmul: destination too small"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for r in 0..m {
                for c in 0..n {
                    dst[r * dst_rs + c * dst_cs] = 0.0;
                }
            }
        }
        return;
    }
    // SAFETY: the asserts above keep every index the GEMM touches inside the three slices;
    // `dst` is borrowed mutably, so it cannot alias `a` or `b`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            dst_cs as isize,
            dst_rs as isize,
            accumulate,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// Forward convolution: `x` `[n, cin, h, w]`, `weight` `[cout, cin/groups, k, k]` →
/// `[n, cout, ho, wo]`.
pub(crate) fn forward(g: &Geom, x: &[f32], weight: &[f32]) -> Vec<f32> {
    forward_fused(g, x, weight, None)
}

/// Per output channel `y = act(x · scale + shift)`, applied as the convolution writes its
/// outputs, while they are still in cache: evaluation-mode BatchNorm and its activation
/// folded into the convolution, which saves a pass over the activations and its buffer.
pub(crate) struct Epilogue<'a> {
    pub scale: &'a [f32],
    pub shift: &'a [f32],
    pub act: Act,
}

impl Epilogue<'_> {
    /// `dst = act(src · scale[co] + shift[co])`; `match` outside the loop so each vectorises.
    pub(super) fn write(&self, co: usize, dst: &mut [f32], src: &[f32]) {
        let (a, b) = (self.scale[co], self.shift[co]);
        let pairs = dst.iter_mut().zip(src);
        match self.act {
            Act::None => pairs.for_each(|(d, &v)| *d = v * a + b),
            Act::Relu => pairs.for_each(|(d, &v)| *d = (v * a + b).max(0.0)),
            Act::Relu6 => pairs.for_each(|(d, &v)| *d = (v * a + b).clamp(0.0, 6.0)),
        }
    }

    /// The same in place.
    pub(super) fn apply(&self, co: usize, data: &mut [f32]) {
        let (a, b) = (self.scale[co], self.shift[co]);
        match self.act {
            Act::None => data.iter_mut().for_each(|d| *d = *d * a + b),
            Act::Relu => data.iter_mut().for_each(|d| *d = (*d * a + b).max(0.0)),
            Act::Relu6 => data
                .iter_mut()
                .for_each(|d| *d = (*d * a + b).clamp(0.0, 6.0)),
        }
    }
}

/// [`forward`], then `epilogue` on every output channel if given.
pub(crate) fn forward_fused(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    assert_eq!(x.len(), g.n * g.in_len(), "conv forward: input length");
    assert_eq!(weight.len(), g.weight_len(), "conv forward: weight length");
    if let Some(e) = epilogue {
        assert!(
            e.scale.len() == g.cout && e.shift.len() == g.cout,
            "conv forward: epilogue length"
        );
    }
    if g.depthwise {
        return depthwise_forward(g, x, weight, epilogue);
    }
    if conv_direct::applies(g) {
        return conv_direct::forward(g, x, weight, epilogue);
    }
    if conv_winograd::applies(g) {
        return conv_winograd::forward(g, x, weight, epilogue);
    }
    let mut out = zeroed(g.n * g.out_len());
    let group = g.group();
    out.par_chunks_mut(group * g.out_len())
        .zip(x.par_chunks(group * g.in_len()))
        .for_each(|(out, xs)| {
            with_local(&SCRATCH, |scratch| {
                forward_group(g, xs, weight, out, scratch, epilogue)
            })
        });
    out
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

/// Runs `f` with this thread's `T`, kept from call to call. Why not rayon's `map_init`: that
/// makes a fresh `T` for every piece rayon splits a loop into, so every layer regrew (zeroed
/// and page-faulted) its buffers: 7 % of a ResNet-18 training step went to that `memset`. A
/// re-entrant call on the same thread (none of the kernels nests parallel loops, but a
/// future one might steal work while it waits) gets a fresh `T` instead of a borrow panic.
pub(super) fn with_local<T: Default + 'static, R>(
    key: &'static LocalKey<RefCell<T>>,
    f: impl FnOnce(&mut T) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut t) => f(&mut t),
        Err(_) => f(&mut T::default()),
    })
}

/// `len` zeros, written by all the pool's threads for large lengths. Why: `vec![0.0; len]`
/// zeroes (or page-faults in) a layer's whole output on the calling thread while the others
/// wait, 3–4 % of a training step's CPU time here; the kernels then overwrite it.
pub(super) fn zeroed(len: usize) -> Vec<f32> {
    const PARALLEL_FROM: usize = 1 << 16;
    if len < PARALLEL_FROM {
        return vec![0.0; len];
    }
    let mut v = Vec::with_capacity(len);
    v.par_extend(rayon::iter::repeat_n(0.0f32, len));
    v
}

/// The first `len` elements of `buf`, growing it if needed.
pub(super) fn take(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
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
    let (kdim, ld) = (g.kdim(), gs * spatial);
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
        let col = take(&mut scratch.col, kdim * ld);
        for (j, xj) in xs.chunks_exact(g.in_len()).enumerate() {
            im2col(g, xj, col, ld, j * spatial);
        }
        col
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

/// Gradients of a convolution with respect to its input and its weight, each only if asked for.
pub(crate) fn backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    assert_eq!(x.len(), g.n * g.in_len(), "conv backward: input length");
    assert_eq!(weight.len(), g.weight_len(), "conv backward: weight length");
    assert_eq!(
        grad_out.len(),
        g.n * g.out_len(),
        "conv backward: grad length"
    );
    if g.depthwise {
        return depthwise_backward(g, x, weight, grad_out, want_dx, want_dw);
    }
    if conv_direct::applies(g) {
        let dx = want_dx.then(|| conv_direct::input_grad(g, grad_out, weight));
        let dw = want_dw.then(|| conv_direct::weight_grad(g, x, grad_out));
        return (dx, dw);
    }
    if conv_winograd::applies(g) {
        let dx = want_dx.then(|| conv_winograd::input_grad(g, grad_out, weight));
        let dw = want_dw.then(|| conv_winograd::weight_grad(g, x, grad_out));
        return (dx, dw);
    }
    if want_dx && g.k == 3 && g.stride == 1 && g.pad == 1 {
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
        let dx = forward(&back, grad_out, &conv_winograd::flip_transpose(g, weight));
        let (_, dw) = dense_backward(g, x, weight, grad_out, false, want_dw);
        return (Some(dx), dw);
    }
    dense_backward(g, x, weight, grad_out, want_dx, want_dw)
}

/// [`backward`] for dense convolutions by im2col + GEMM.
fn dense_backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let group = g.group();
    let (xc, gc) = (group * g.in_len(), group * g.out_len());
    let mut dx = want_dx.then(|| zeroed(g.n * g.in_len()));
    // Collected in group order, so the sum below is the same at any thread count.
    let partials: Vec<Option<Vec<f32>>> = match dx.as_mut() {
        Some(dx) => dx
            .par_chunks_mut(xc)
            .zip(x.par_chunks(xc))
            .zip(grad_out.par_chunks(gc))
            .map(|((dx, xs), gs)| {
                with_local(&SCRATCH, |scratch| {
                    backward_group(g, xs, weight, gs, Some(dx), want_dw, scratch)
                })
            })
            .collect(),
        None => x
            .par_chunks(xc)
            .zip(grad_out.par_chunks(gc))
            .map(|(xs, gs)| {
                with_local(&SCRATCH, |scratch| {
                    backward_group(g, xs, weight, gs, None, want_dw, scratch)
                })
            })
            .collect(),
    };
    let dw = want_dw.then(|| sum_partials(partials, g.weight_len()));
    (dx, dw)
}

/// Sums the groups' weight gradients, in group order.
pub(super) fn sum_partials(partials: Vec<Option<Vec<f32>>>, len: usize) -> Vec<f32> {
    let mut it = partials.into_iter().flatten();
    let mut total = it.next().unwrap_or_else(|| vec![0.0; len]);
    let rest: Vec<Vec<f32>> = it.collect();
    // In parallel over pieces of the result; each element still adds the partials in group
    // order, so the bits do not depend on the thread count. (Serial, this sum was a
    // millisecond per ResNet-18 ×64 4 × 4 layer with the other thread idle.)
    const PIECE: usize = 1 << 14;
    total.par_chunks_mut(PIECE).enumerate().for_each(|(i, t)| {
        for p in &rest {
            for (t, v) in t.iter_mut().zip(&p[i * PIECE..]) {
                *t += *v;
            }
        }
    });
    total
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
    let (kdim, ld) = (g.kdim(), gs * spatial);
    let Scratch { col, dcol, stacked } = scratch;
    // The output gradient of these samples as one `[cout, ld]` matrix.
    let gmat: &[f32] = if gs == 1 {
        gouts
    } else {
        let gtmp = take(stacked, g.cout * ld);
        for (j, gj) in gouts.chunks_exact(g.out_len()).enumerate() {
            for (co, src) in gj.chunks_exact(spatial).enumerate() {
                gtmp[co * ld + j * spatial..co * ld + (j + 1) * spatial].copy_from_slice(src);
            }
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
            let col = take(col, kdim * ld);
            for (j, xj) in xs.chunks_exact(g.in_len()).enumerate() {
                im2col(g, xj, col, ld, j * spatial);
            }
            col
        };
        // dW[cout, kdim] = G[cout, ld] · colᵀ[ld, kdim]
        let colt = Mat {
            data: cols,
            rows: ld,
            cols: kdim,
            rs: 1,
            cs: ld,
        };
        let mut dw = vec![0.0f32; g.cout * kdim];
        matmul(&mut dw, kdim, gm, colt, false);
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

/// Scratch for the depthwise kernels. The zero-padded input plane is split into
/// `stride × stride` phase planes (`phase (a, b)` holds padded pixels `(s·r + a, s·c + b)`),
/// each `wq` wide. Tap `(kh, kw)` then reads phase `(kh mod s, kw mod s)` at the fixed offset
/// `(kh / s)·wq + kw / s`, so it is one contiguous multiply-add over an output-sized run
/// (computing a few throw-away columns per row) instead of one short strided loop per row.
struct Padded {
    /// Phase rows and row length.
    hq: usize,
    wq: usize,
    /// The phase planes, `stride² × hq × wq`; positions no input pixel maps to stay zero.
    input: Vec<f32>,
    /// An output-sized plane, `ho × wq`; where it holds a gradient, its extra columns stay
    /// zero.
    out: Vec<f32>,
}

impl Padded {
    fn new(g: &Geom) -> Self {
        let s = g.stride;
        let wq = (g.w + 2 * g.pad).div_ceil(s);
        // Enough rows that the last tap's run of `ho · wq` stays inside its phase.
        let hq = g.ho() + (g.k - 1) / s + 1;
        Padded {
            hq,
            wq,
            input: vec![0.0; s * s * hq * wq],
            out: vec![0.0; g.ho() * wq],
        }
    }

    /// Index in `input` of padded pixel `(py, px)`.
    fn at(&self, g: &Geom, py: usize, px: usize) -> usize {
        let s = g.stride;
        (((py % s) * s + px % s) * self.hq + py / s) * self.wq + px / s
    }

    /// Where tap `(kh, kw)`'s run starts in `input`.
    fn tap(&self, g: &Geom, kh: usize, kw: usize) -> usize {
        let s = g.stride;
        (((kh % s) * s + kw % s) * self.hq + kh / s) * self.wq + kw / s
    }

    /// Scatters `plane` (`h × w`) into the phase planes; nothing else is written, so the
    /// padding stays zero.
    fn load_input(&mut self, g: &Geom, plane: &[f32]) {
        let s = g.stride;
        for (y, row) in plane.chunks_exact(g.w).enumerate() {
            if s == 1 {
                let at = self.at(g, y + g.pad, g.pad);
                self.input[at..at + g.w].copy_from_slice(row);
            } else {
                // One strided copy per phase column: pixels x ≡ b − pad (mod s) land side
                // by side in phase row (y + pad, b).
                for b in 0..s.min(g.w) {
                    let x0 = (b + s - g.pad % s) % s;
                    if x0 >= g.w {
                        continue;
                    }
                    let at = self.at(g, y + g.pad, x0 + g.pad);
                    let dst = &mut self.input[at..];
                    for (d, v) in dst.iter_mut().zip(row[x0..].iter().step_by(s)) {
                        *d = *v;
                    }
                }
            }
        }
    }

    /// Gathers the input-gradient plane back out of the phase planes.
    fn store_input(&self, g: &Geom, plane: &mut [f32]) {
        for (y, row) in plane.chunks_exact_mut(g.w).enumerate() {
            if g.stride == 1 {
                let at = self.at(g, y + g.pad, g.pad);
                row.copy_from_slice(&self.input[at..at + g.w]);
            } else {
                for (x, v) in row.iter_mut().enumerate() {
                    *v = self.input[self.at(g, y + g.pad, x + g.pad)];
                }
            }
        }
    }

    /// Copies `plane` (`ho × wo`) into `out`'s first `wo` columns; the rest stay zero.
    fn load_out(&mut self, g: &Geom, plane: &[f32]) {
        let wo = g.wo();
        for (r, row) in plane.chunks_exact(wo).enumerate() {
            self.out[r * self.wq..r * self.wq + wo].copy_from_slice(row);
        }
    }
}

/// `acc[i] += w · src[i]` over equal lengths, vectorised by the compiler.
#[inline(never)]
fn axpy(acc: &mut [f32], w: f32, src: &[f32]) {
    for (a, s) in acc.iter_mut().zip(src) {
        *a += w * *s;
    }
}

/// Depthwise forward: each channel convolved with its own `k × k` filter, then `epilogue`.
fn depthwise_forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    if depthwise_nhwc::applies(g) {
        return depthwise_nhwc::forward(g, x, weight, epilogue);
    }
    depthwise_planar_forward(g, x, weight, epilogue)
}

/// [`depthwise_forward`] one `(sample, channel)` plane at a time.
pub(super) fn depthwise_planar_forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    let (ho, wo, kk) = (g.ho(), g.wo(), g.k * g.k);
    let plane_in = g.h * g.w;
    let mut out = zeroed(g.n * g.out_len());
    out.par_chunks_mut(ho * wo)
        .zip(x.par_chunks(plane_in))
        .enumerate()
        .for_each_init(
            || Padded::new(g),
            |pad, (i, (o, xp))| {
                let c = i % g.cin;
                depthwise_plane_forward(g, pad, xp, &weight[c * kk..(c + 1) * kk], o);
                // The plane is still in cache: finish it here.
                if let Some(e) = epilogue {
                    e.apply(c, o);
                }
            },
        );
    out
}

#[inline(never)]
fn depthwise_plane_forward(g: &Geom, pad: &mut Padded, x: &[f32], wk: &[f32], out: &mut [f32]) {
    let (ho, wo, k, wq) = (g.ho(), g.wo(), g.k, pad.wq);
    pad.load_input(g, x);
    let len = ho * wq;
    // The first tap sets the accumulator, so it is never cleared.
    let first = pad.tap(g, 0, 0);
    scale(&mut pad.out[..len], wk[0], &pad.input[first..first + len]);
    for kh in 0..k {
        for kw in 0..k {
            if kh + kw == 0 {
                continue;
            }
            let at = pad.tap(g, kh, kw);
            axpy(
                &mut pad.out[..len],
                wk[kh * k + kw],
                &pad.input[at..at + len],
            );
        }
    }
    for (r, row) in out.chunks_exact_mut(wo).enumerate() {
        row.copy_from_slice(&pad.out[r * wq..r * wq + wo]);
    }
}

/// `acc[i] = w · src[i]`.
fn scale(acc: &mut [f32], w: f32, src: &[f32]) {
    for (a, s) in acc.iter_mut().zip(src) {
        *a = w * *s;
    }
}

/// Input gradient: every tap adds the weighted output gradient back at its offset.
#[inline(never)]
fn depthwise_plane_dx(g: &Geom, pad: &mut Padded, gout: &[f32], wk: &[f32], dx: &mut [f32]) {
    let (ho, k) = (g.ho(), g.k);
    pad.load_out(g, gout);
    let len = ho * pad.wq;
    pad.input.fill(0.0);
    for kh in 0..k {
        for kw in 0..k {
            let at = pad.tap(g, kh, kw);
            axpy(&mut pad.input[at..at + len], wk[kh * k + kw], &pad.out);
        }
    }
    pad.store_input(g, dx);
}

/// This plane's share of the filter gradient: one dot product per tap.
#[inline(never)]
fn depthwise_plane_dw(g: &Geom, pad: &mut Padded, x: &[f32], gout: &[f32], share: &mut [f32]) {
    let (ho, k) = (g.ho(), g.k);
    pad.load_input(g, x);
    pad.load_out(g, gout);
    let len = ho * pad.wq;
    for kh in 0..k {
        for kw in 0..k {
            let at = pad.tap(g, kh, kw);
            share[kh * k + kw] = dot(&pad.input[at..at + len], &pad.out);
        }
    }
}

/// Depthwise gradients: per (sample, channel) plane the input gradient and that plane's share
/// of the filter gradient, then the shares summed over the batch.
fn depthwise_backward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    grad_out: &[f32],
    want_dx: bool,
    want_dw: bool,
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    if depthwise_nhwc::applies(g) {
        return depthwise_nhwc::backward(g, x, weight, grad_out, want_dx, want_dw);
    }
    let (ho, wo, kk) = (g.ho(), g.wo(), g.k * g.k);
    let plane_in = g.h * g.w;
    let planes = g.n * g.cin;
    let mut dx = want_dx.then(|| zeroed(g.n * g.in_len()));
    let mut shares = vec![0.0f32; if want_dw { planes * kk } else { 0 }];
    if let Some(dx) = dx.as_mut() {
        dx.par_chunks_mut(plane_in)
            .zip(grad_out.par_chunks(ho * wo))
            .enumerate()
            .for_each_init(
                || Padded::new(g),
                |pad, (i, (d, go))| {
                    let c = i % g.cin;
                    depthwise_plane_dx(g, pad, go, &weight[c * kk..(c + 1) * kk], d);
                },
            );
    }
    if want_dw {
        shares
            .par_chunks_mut(kk)
            .zip(x.par_chunks(plane_in))
            .zip(grad_out.par_chunks(ho * wo))
            .for_each_init(
                || Padded::new(g),
                |pad, ((s, xp), go)| depthwise_plane_dw(g, pad, xp, go, s),
            );
    }
    let dw = want_dw.then(|| {
        let mut dw = vec![0.0f32; g.cin * kk];
        for (i, s) in shares.chunks(kk).enumerate() {
            let c = i % g.cin;
            for (t, v) in dw[c * kk..(c + 1) * kk].iter_mut().zip(s) {
                *t += *v;
            }
        }
        dw
    });
    (dx, dw)
}

/// A dot product in eight lanes, so that the compiler vectorises it.
#[inline(never)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    let tail: f32 = ar.iter().zip(br).map(|(x, y)| x * y).sum();
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Deterministic pseudo-random values in [-1, 1).
    pub(in crate::model) fn values(len: usize, seed: u64) -> Vec<f32> {
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
    pub(in crate::model) fn naive(
        g: &Geom,
        x: &[f32],
        w: &[f32],
        go: &[f32],
    ) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
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
                                    if ih < 0 || iw < 0 || ih >= g.h as isize || iw >= g.w as isize
                                    {
                                        continue;
                                    }
                                    let xi =
                                        ((n * g.cin + c) * g.h + ih as usize) * g.w + iw as usize;
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
    pub(in crate::model) fn same3x3(n: usize, cin: usize, h: usize, w: usize, cout: usize) -> Geom {
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

    pub(in crate::model) fn close(a: &[f32], b: &[f32], what: &str, g: &Geom) {
        assert_eq!(a.len(), b.len(), "{what} length for {g:?}");
        let scale = b.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 * scale,
                "{what}[{i}]: {x} vs {y} for {g:?}"
            );
        }
    }

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
            println!(
                "{count} × {cin:>3}→{cout:<3} {size:>2}² k{k} s{stride} {:<9} fwd {f:6.2} dx {dx:6.2} dw {dw:6.2} ms",
                if conv_direct::applies(&g) {
                    "direct"
                } else if conv_winograd::applies(&g) {
                    "winograd"
                } else {
                    "im2col"
                }
            );
        }
        println!(
            "step: fwd {:.1} dx {:.1} dw {:.1} ms, all {:.1}",
            total[0],
            total[1],
            total[2],
            total.iter().sum::<f64>()
        );
    }
}
