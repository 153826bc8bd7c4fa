//! The one GEMM call: single-threaded `f32` matrix products on strided views, through the
//! `gemm` crate (which picks its own micro-kernel for the CPU at run time).

use std::mem::MaybeUninit;

/// A strided read-only matrix view for [`matmul`].
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a> {
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
pub(crate) fn matmul(dst: &mut [f32], dst_rs: usize, a: Mat<'_>, b: Mat<'_>, accumulate: bool) {
    matmul_strided(dst, dst_rs, 1, a, b, accumulate);
}

/// `dst[rows × cols, row stride dst_rs] = a · b` into uninitialised memory: every element
/// of the product is written (and the rest of `dst` left as it is), none read.
#[allow(unsafe_code)]
pub(crate) fn matmul_uninit(dst: &mut [MaybeUninit<f32>], dst_rs: usize, a: Mat<'_>, b: Mat<'_>) {
    let len = dst.len();
    // SAFETY: `gemm` with `read_dst` false (no accumulation) only writes the destination
    // (`dst := beta·a·b`; its reference implementation shows the read is behind
    // `read_dst`), and `checked_gemm` keeps every write inside `len` elements.
    unsafe {
        checked_gemm(
            dst.as_mut_ptr().cast::<f32>(),
            len,
            (dst_rs, 1),
            a,
            b,
            false,
        )
    }
}

/// [`matmul`] into a destination with row stride `dst_rs` and column stride `dst_cs`.
#[allow(unsafe_code)]
pub(crate) fn matmul_strided(
    dst: &mut [f32],
    dst_rs: usize,
    dst_cs: usize,
    a: Mat<'_>,
    b: Mat<'_>,
    accumulate: bool,
) {
    let len = dst.len();
    // SAFETY: `dst` is borrowed mutably, so it cannot alias `a` or `b`, and it is
    // initialised, so `gemm` may read it when accumulating.
    unsafe { checked_gemm(dst.as_mut_ptr(), len, (dst_rs, dst_cs), a, b, accumulate) }
}

/// `dst (+)= a · b` on a destination of `len` elements at `dst`, after checking that every
/// index the GEMM touches lies inside the three buffers.
///
/// # Safety
///
/// `dst` is valid for `len` writes and does not overlap `a` or `b`; with `accumulate` its
/// elements are initialised.
#[allow(unsafe_code)]
unsafe fn checked_gemm(
    dst: *mut f32,
    len: usize,
    (dst_rs, dst_cs): (usize, usize),
    a: Mat<'_>,
    b: Mat<'_>,
    accumulate: bool,
) {
    let (m, n, k) = (a.rows, b.cols, a.cols);
    assert_eq!(a.cols, b.rows, "matmul: inner dimensions differ");
    assert!(a.fits() && b.fits(), "matmul: operand view out of bounds");
    assert!(
        m == 0 || n == 0 || (m - 1) * dst_rs + (n - 1) * dst_cs < len,
        "matmul: destination too small"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for r in 0..m {
                for c in 0..n {
                    // SAFETY: inside `len` (asserted above).
                    unsafe { dst.add(r * dst_rs + c * dst_cs).write(0.0) };
                }
            }
        }
        return;
    }
    // SAFETY: the asserts above keep every index the GEMM touches inside the three buffers;
    // the caller vouches for `dst`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
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
