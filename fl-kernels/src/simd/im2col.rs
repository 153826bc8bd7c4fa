//! im2col pieces in AVX-512. Maps of at most 16 pixels (ResNet-18's 4 × 4 stage): a channel
//! plane fits one register, and each of the `k²` im2col rows it feeds is one masked permute
//! of that register and one store. Larger maps at stride 1 with "same" padding (7 × 7 and
//! up): an im2col row is the plane shifted by one offset with the taps that fall outside
//! zeroed, so each 16 of its elements are one masked load at that offset and one store, the
//! masks computed once per geometry and thread. Stride-2 rows ([`copy_strided`],
//! [`add_strided`]): every other element of two registers, one two-register permute per 16
//! outputs.
//!
//! Why: `conv_im2col::im2col` builds a row per (channel, tap) with a shifted copy and then
//! zeroes the borders row by row; on a 4 × 4 map a row is 16 elements in four runs of four,
//! so the bookkeeping outweighed the copy: im2col was 19 % of ResNet-18 ×16's 4 × 4 layers
//! (the GEMM 49 %), and those layers run im2col three times per step (forward, the input
//! gradient's convolution, the weight gradient). The stride-2 layers' rows were copied one
//! element at a time: im2col was 28–34 % of those layers.

use crate::types::Geom;

/// Most taps per plane: 3 × 3 kernels.
const MAX_TAPS: usize = 9;

/// Writes sample `x`'s im2col matrix `[cin·k·k, ho·wo]` into `col` (rows `ld` long, from
/// column `off`), if this geometry fits the kernel and the CPU has AVX-512; returns whether
/// it did.
pub(crate) fn im2col(g: &Geom, x: &[f32], col: &mut [f32], ld: usize, off: usize) -> bool {
    let (pixels_in, pixels_out, taps) = (g.h * g.w, g.ho() * g.wo(), g.k * g.k);
    if g.depthwise || taps > MAX_TAPS || !available() {
        return false;
    }
    if pixels_in > 16 || pixels_out > 16 {
        if g.same_size() {
            return shifted(g, x, col, ld, off);
        }
        return g.stride == 2 && g.w <= 32 && g.wo() <= 16 && strided(g, x, col, ld, off);
    }
    check_sizes(g, x.len(), col.len(), ld, off, pixels_out, "im2col");
    // For each tap, the input pixel each output pixel reads, and which of them lie inside.
    let mut index = [[0u32; 16]; MAX_TAPS];
    let mut inside = [0u16; MAX_TAPS];
    for (t, (idx, mask)) in index.iter_mut().zip(&mut inside).enumerate().take(taps) {
        let (kh, kw) = (t / g.k, t % g.k);
        for (p, at) in idx.iter_mut().enumerate().take(pixels_out) {
            let ih = (p / g.wo() * g.stride + kh) as isize - g.pad as isize;
            let iw = (p % g.wo() * g.stride + kw) as isize - g.pad as isize;
            if (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw) {
                *at = (ih as usize * g.w + iw as usize) as u32;
                *mask |= 1 << p;
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512 was checked (`available`); `check_sizes` keeps every masked load
    // (`cin` planes of `pixels_in`) and store (`rows` rows of `pixels_out` from `off`,
    // `ld` apart) inside `x` and `col`.
    #[allow(unsafe_code)]
    unsafe {
        x86::im2col(
            x.as_ptr(),
            g.cin,
            pixels_in,
            &index[..taps],
            &inside[..taps],
            pixels_out,
            col.as_mut_ptr().add(off),
            ld,
        );
    }
    true
}

/// Per tap of a [`Geom::same_size`] geometry: the signed offset from an output pixel to the
/// input pixel it reads, and per 16 output pixels the mask of those whose input lies inside.
struct Shifts {
    key: (usize, usize, usize, usize),
    offsets: Vec<isize>,
    masks: Vec<u16>,
}

impl Shifts {
    fn new(g: &Geom) -> Self {
        let (taps, pixels) = (g.k * g.k, g.h * g.w);
        let vectors = pixels.div_ceil(16);
        let mut masks = vec![0u16; taps * vectors];
        let mut offsets = Vec::with_capacity(taps);
        for t in 0..taps {
            let (dh, dw) = (
                (t / g.k) as isize - g.pad as isize,
                (t % g.k) as isize - g.pad as isize,
            );
            offsets.push(dh * g.w as isize + dw);
            for p in 0..pixels {
                let (ih, iw) = ((p / g.w) as isize + dh, (p % g.w) as isize + dw);
                if (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw) {
                    masks[t * vectors + p / 16] |= 1 << (p % 16);
                }
            }
        }
        Shifts {
            key: (g.h, g.w, g.k, g.pad),
            offsets,
            masks,
        }
    }
}

thread_local! {
    /// The last geometry's [`Shifts`] on this thread (one layer's samples in a row share it).
    static SHIFTS: std::cell::RefCell<Option<Shifts>> = const { std::cell::RefCell::new(None) };
}

/// Panics unless the input (or input gradient) holds `g.cin` planes of `g.h × g.w` and the
/// column buffer its `cin · k²` rows of `pixels`, `ld` apart from column `off`: what the
/// kernels' unchecked loads and stores rely on.
fn check_sizes(
    g: &Geom,
    data: usize,
    col: usize,
    ld: usize,
    off: usize,
    pixels: usize,
    what: &str,
) {
    assert!(data >= g.cin * g.h * g.w, "{what}: input length");
    let rows = g.cin * g.k * g.k;
    assert!(
        rows == 0 || (rows - 1) * ld + off + pixels <= col,
        "{what}: column buffer too small"
    );
}

/// [`im2col`] for a [`Geom::same_size`] geometry of any map size, by masked shifted loads.
fn shifted(g: &Geom, x: &[f32], col: &mut [f32], ld: usize, off: usize) -> bool {
    let pixels = g.h * g.w;
    check_sizes(g, x.len(), col.len(), ld, off, pixels, "im2col");
    SHIFTS.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell
            .as_ref()
            .is_none_or(|s| s.key != (g.h, g.w, g.k, g.pad))
        {
            *cell = Some(Shifts::new(g));
        }
        let sh = cell.as_ref().expect("just set");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512 was checked (`available`); every lane loaded is inside its plane
        // (the masks keep exactly the taps inside the map, and a masked-off lane is neither
        // read nor faulted on); `check_sizes` keeps the stores (`rows` rows of `pixels`
        // from `off`, `ld` apart) inside `col`.
        #[allow(unsafe_code)]
        unsafe {
            x86::im2col_shifted(
                x.as_ptr(),
                g.cin,
                pixels,
                &sh.offsets,
                &sh.masks,
                col.as_mut_ptr().add(off),
                ld,
            );
        }
    });
    true
}

/// [`im2col`] at stride 2 for input rows of up to 32 pixels and output rows of up to 16:
/// per channel, kernel row and output row, the input row in two registers, and each tap's
/// output row one masked two-register permute of them and one store.
fn strided(g: &Geom, x: &[f32], col: &mut [f32], ld: usize, off: usize) -> bool {
    let pixels = g.ho() * g.wo();
    check_sizes(g, x.len(), col.len(), ld, off, pixels, "im2col");
    // Per kernel column: the input column each output column reads, and which lie inside.
    let mut index = [[0u32; 16]; 3];
    let mut inside = [0u16; 3];
    if g.k > index.len() {
        return false;
    }
    for (kw, (idx, mask)) in index.iter_mut().zip(&mut inside).enumerate().take(g.k) {
        for (ow, at) in idx.iter_mut().enumerate().take(g.wo()) {
            let iw = (2 * ow + kw) as isize - g.pad as isize;
            if (0..g.w as isize).contains(&iw) {
                *at = iw as u32;
                *mask |= 1 << ow;
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512 was checked (`available`); loads are masked to the `w` pixels of an
    // input row that exists; `check_sizes` keeps the stores (`rows` rows of `ho · wo`
    // from `off`, `ld` apart) inside `col`.
    #[allow(unsafe_code)]
    unsafe {
        x86::im2col_stride2(
            x.as_ptr(),
            g,
            &index[..g.k],
            &inside[..g.k],
            col.as_mut_ptr().add(off),
            ld,
        );
    }
    true
}

/// The transpose of [`strided`]: adds one sample's column gradient (`[cin·k², ho·wo]`, rows
/// `ld` long, from column `off`) onto its input gradient `dx`, for the geometries
/// [`strided`] takes; returns whether it did. Each element of `dx` gets the additions the
/// plain loop (`conv/im2col.rs`) gives it, in the same order (kernel row, then column), and
/// no others, so the bits are the same.
pub(crate) fn col2im_add(g: &Geom, col: &[f32], ld: usize, off: usize, dx: &mut [f32]) -> bool {
    if g.depthwise || g.stride != 2 || g.w > 32 || g.wo() > 16 || g.k > 3 || !available() {
        return false;
    }
    let pixels = g.ho() * g.wo();
    check_sizes(g, dx.len(), col.len(), ld, off, pixels, "col2im");
    // Per kernel column and half row (input columns 0..16, 16..32): for each input column,
    // the output column whose tap reads it, and which input columns some output reads.
    let mut index = [[[0u32; 16]; 2]; 3];
    let mut hit = [[0u16; 2]; 3];
    for kw in 0..g.k {
        for ow in 0..g.wo() {
            let iw = (2 * ow + kw) as isize - g.pad as isize;
            if (0..g.w as isize).contains(&iw) {
                let iw = iw as usize;
                index[kw][iw / 16][iw % 16] = ow as u32;
                hit[kw][iw / 16] |= 1 << (iw % 16);
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512 was checked (`available`); `check_sizes` keeps the loads (`rows`
    // rows of `ho · wo` from `off`) inside `col`; `dx` is read and written only at the `w`
    // pixels of rows that exist.
    #[allow(unsafe_code)]
    unsafe {
        x86::col2im_stride2(
            col.as_ptr().add(off),
            ld,
            g,
            &index[..g.k],
            &hit[..g.k],
            dx.as_mut_ptr(),
        );
    }
    true
}

/// `dst[i] = src[i·stride]` for every `i` of `dst`: im2col's strided rows. Stride 2 on a CPU
/// with AVX-512 takes the permute kernel; anything else the plain loop.
pub(crate) fn copy_strided(dst: &mut [f32], src: &[f32], stride: usize) {
    let n = dst.len();
    if stride == 2 && available() {
        assert!(
            n == 0 || 2 * (n - 1) < src.len(),
            "copy_strided: source too short"
        );
        // SAFETY: AVX-512 was checked; the kernel's masked loads read only
        // `src[..src.len()]` and its masked stores write only `dst[..n]`.
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        unsafe {
            x86::gather_stride2(dst.as_mut_ptr(), n, src.as_ptr(), src.len());
        }
        return;
    }
    for (o, v) in dst.iter_mut().zip(src.iter().step_by(stride)) {
        *o = *v;
    }
}

/// `dst[i·stride] += src[i]` for every `i` of `src`: col2im's strided rows, the same split
/// as [`copy_strided`]. Each element gets the one addition the plain loop gives it and no
/// other element is written, so the bits are the same either way.
pub(crate) fn add_strided(dst: &mut [f32], src: &[f32], stride: usize) {
    let n = src.len();
    if stride == 2 && available() {
        assert!(
            n == 0 || 2 * (n - 1) < dst.len(),
            "add_strided: destination too short"
        );
        // SAFETY: AVX-512 was checked; the kernel's masked loads and stores touch only
        // `dst[..dst.len()]` and `src[..n]`.
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        unsafe {
            x86::scatter_add_stride2(dst.as_mut_ptr(), src.as_ptr(), n);
        }
        return;
    }
    for (o, v) in dst.iter_mut().step_by(stride).zip(src) {
        *o += *v;
    }
}

/// The kernels are AVX-512 (masked permutes, which no narrower set has); elsewhere, or
/// when `FL_JOB_ISA` lowers the choice, `conv_im2col::im2col` does the work.
fn available() -> bool {
    crate::isa::avx512()
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use std::arch::x86_64::*;

    /// The first `n` lanes.
    fn lanes(n: usize) -> __mmask16 {
        ((1u32 << n.min(16)) - 1) as __mmask16
    }

    /// `dst[2·i] += src[i]` for `i < n`.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `dst` holds at least `2·(n − 1) + 1` elements; `src` holds `n`.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn scatter_add_stride2(dst: *mut f32, src: *const f32, n: usize) {
        unsafe {
            // Source lane i to destination lanes 2i (low register) and 2i − 16 (high).
            let low = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
            let high =
                _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
            const EVEN: __mmask16 = 0x5555;
            for i in (0..n).step_by(16) {
                let v = _mm512_maskz_loadu_ps(lanes(n - i), src.add(i));
                // Exactly the even lanes this chunk adds to: nothing else is read, changed or
                // written back.
                let span = 2 * (n - i);
                let (ma, mb) = (EVEN & lanes(span), EVEN & lanes(span.saturating_sub(16)));
                let (pa, pb) = (dst.add(2 * i), dst.wrapping_add(2 * i + 16));
                let a = _mm512_maskz_loadu_ps(ma, pa);
                let b = _mm512_maskz_loadu_ps(mb, pb);
                let a = _mm512_add_ps(a, _mm512_permutexvar_ps(low, v));
                let b = _mm512_add_ps(b, _mm512_permutexvar_ps(high, v));
                _mm512_mask_storeu_ps(pa, ma, a);
                _mm512_mask_storeu_ps(pb, mb, b);
            }
        }
    }

    /// `dst[i] = src[2·i]` for `i < n`.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `src` holds `len` elements, at least `2·(n − 1) + 1`; `dst`
    /// holds `n`.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn gather_stride2(dst: *mut f32, n: usize, src: *const f32, len: usize) {
        unsafe {
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            for i in (0..n).step_by(16) {
                let left = len - 2 * i;
                // Masked-off lanes are neither read nor faulted on; `wrapping_add` because
                // the second register's address may lie past the end when nothing is read.
                let a = _mm512_maskz_loadu_ps(lanes(left), src.wrapping_add(2 * i));
                let b = _mm512_maskz_loadu_ps(
                    lanes(left.saturating_sub(16)),
                    src.wrapping_add(2 * i + 16),
                );
                let r = _mm512_permutex2var_ps(a, even, b);
                _mm512_mask_storeu_ps(dst.add(i), lanes(n - i), r);
            }
        }
    }

    /// Row `(c, t)` of the im2col matrix, for every plane `c` and tap `t`: 16 pixels at a
    /// time, the plane's elements at `offsets[t]` from them where `masks` (per tap, per 16
    /// pixels) has them, zero elsewhere.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `x` holds `planes` planes of `pixels` elements and every lane a
    /// mask keeps reads inside its plane; `col + (planes·taps − 1)·ld + pixels` stays inside
    /// the column buffer.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn im2col_shifted(
        x: *const f32,
        planes: usize,
        pixels: usize,
        offsets: &[isize],
        masks: &[u16],
        col: *mut f32,
        ld: usize,
    ) {
        unsafe {
            let (taps, vectors) = (offsets.len(), pixels.div_ceil(16));
            for c in 0..planes {
                let plane = x.add(c * pixels);
                for (t, &shift) in offsets.iter().enumerate() {
                    let row = col.add((c * taps + t) * ld);
                    let masks = &masks[t * vectors..(t + 1) * vectors];
                    for (j, &m) in masks.iter().enumerate() {
                        // `wrapping_offset`: a vector's first address may lie before the
                        // plane when its lanes there are masked off.
                        let v = _mm512_maskz_loadu_ps(
                            m,
                            plane.wrapping_offset(16 * j as isize + shift),
                        );
                        _mm512_mask_storeu_ps(row.add(16 * j), lanes(pixels - 16 * j), v);
                    }
                }
            }
        }
    }

    /// Stride-2 im2col rows (`super::strided`): `index[kw]`/`inside[kw]` are the input
    /// columns of kernel column `kw`'s output columns and which of them exist.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `x` holds `g.cin` planes of `g.h × g.w` (`w` ≤ 32, `wo` ≤ 16)
    /// elements; `col + (cin·k² − 1)·ld + ho·wo` stays inside the column buffer.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn im2col_stride2(
        x: *const f32,
        g: &crate::types::Geom,
        index: &[[u32; 16]],
        inside: &[u16],
        col: *mut f32,
        ld: usize,
    ) {
        unsafe {
            let (k, ho, wo) = (g.k, g.ho(), g.wo());
            let (low, high) = (lanes(g.w), lanes(g.w.saturating_sub(16)));
            let store = lanes(wo);
            let mut idx = [_mm512_setzero_si512(); 3];
            for (d, i) in idx.iter_mut().zip(index) {
                *d = _mm512_loadu_si512(i.as_ptr().cast());
            }
            let zero = _mm512_setzero_ps();
            for c in 0..g.cin {
                let plane = x.add(c * g.h * g.w);
                for kh in 0..k {
                    let rows = col.add((c * k + kh) * k * ld);
                    for oh in 0..ho {
                        let ih = (2 * oh + kh) as isize - g.pad as isize;
                        let inside_row = (0..g.h as isize).contains(&ih);
                        let (a, b) = if inside_row {
                            let src = plane.add(ih as usize * g.w);
                            (
                                _mm512_maskz_loadu_ps(low, src),
                                _mm512_maskz_loadu_ps(high, src.wrapping_add(16)),
                            )
                        } else {
                            (zero, zero)
                        };
                        for kw in 0..k {
                            let m = if inside_row { inside[kw] } else { 0 };
                            let r = _mm512_maskz_permutex2var_ps(m, a, idx[kw], b);
                            _mm512_mask_storeu_ps(rows.add(kw * ld + oh * wo), store, r);
                        }
                    }
                }
            }
        }
    }

    /// Stride-2 col2im (`super::col2im_add`): `index[kw][half]`/`hit[kw][half]` say, per
    /// input column of each half row, which output column of kernel column `kw` reads it.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `dx` holds `g.cin` planes of `g.h × g.w` (`w` ≤ 32, `wo` ≤ 16)
    /// elements; `col + (cin·k² − 1)·ld + ho·wo` stays inside the column gradient.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn col2im_stride2(
        col: *const f32,
        ld: usize,
        g: &crate::types::Geom,
        index: &[[[u32; 16]; 2]],
        hit: &[[u16; 2]],
        dx: *mut f32,
    ) {
        unsafe {
            let (k, ho, wo) = (g.k, g.ho(), g.wo());
            let (low, high) = (lanes(g.w), lanes(g.w.saturating_sub(16)));
            let mut idx = [[_mm512_setzero_si512(); 2]; 3];
            for (d, i) in idx.iter_mut().zip(index) {
                for (d, i) in d.iter_mut().zip(i) {
                    *d = _mm512_loadu_si512(i.as_ptr().cast());
                }
            }
            for c in 0..g.cin {
                let plane = dx.add(c * g.h * g.w);
                for kh in 0..k {
                    let rows = col.add((c * k + kh) * k * ld);
                    for oh in 0..ho {
                        let ih = (2 * oh + kh) as isize - g.pad as isize;
                        if !(0..g.h as isize).contains(&ih) {
                            continue;
                        }
                        let dst = plane.add(ih as usize * g.w);
                        let mut a = _mm512_maskz_loadu_ps(low, dst);
                        let mut b = _mm512_maskz_loadu_ps(high, dst.wrapping_add(16));
                        for kw in 0..k {
                            let r = _mm512_maskz_loadu_ps(lanes(wo), rows.add(kw * ld + oh * wo));
                            // Only the lanes this tap reads get an addition (`-0 + 0` is
                            // `+0`: a lane touched needlessly would change its bits).
                            let [ml, mh] = hit[kw];
                            a = _mm512_mask_add_ps(a, ml, a, _mm512_permutexvar_ps(idx[kw][0], r));
                            b = _mm512_mask_add_ps(b, mh, b, _mm512_permutexvar_ps(idx[kw][1], r));
                        }
                        _mm512_mask_storeu_ps(dst, low, a);
                        _mm512_mask_storeu_ps(dst.wrapping_add(16), high, b);
                    }
                }
            }
        }
    }

    /// # Safety
    /// The CPU has AVX-512F; `x` holds `planes` planes of `pixels_in` (≤ 16) elements;
    /// `col + (planes·taps − 1)·ld + pixels_out` (≤ 16) stays inside the column buffer.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn im2col(
        x: *const f32,
        planes: usize,
        pixels_in: usize,
        index: &[[u32; 16]],
        inside: &[u16],
        pixels_out: usize,
        col: *mut f32,
        ld: usize,
    ) {
        unsafe {
            let load = (1u32 << pixels_in).wrapping_sub(1) as u16;
            let store = (1u32 << pixels_out).wrapping_sub(1) as u16;
            let taps = index.len();
            let mut idx = [_mm512_setzero_si512(); super::MAX_TAPS];
            for (d, i) in idx.iter_mut().zip(index) {
                *d = _mm512_loadu_si512(i.as_ptr().cast());
            }
            for c in 0..planes {
                // Masked-off lanes are neither read nor faulted on.
                let v = _mm512_maskz_loadu_ps(load, x.add(c * pixels_in));
                for (t, (i, &m)) in idx[..taps].iter().zip(inside).enumerate() {
                    let row = _mm512_maskz_permutexvar_ps(m, *i, v);
                    _mm512_mask_storeu_ps(col.add((c * taps + t) * ld), store, row);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_onto_every_other_element() {
        for n in [0usize, 1, 7, 14, 16, 17, 40] {
            for extra in [0usize, 1, 5] {
                let len = (2 * n).saturating_sub(1) + extra;
                let src: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 0.0).collect();
                // Negative zeros too: `-0 + 0` is `+0`, so a lane touched needlessly shows.
                let mut dst: Vec<f32> = (0..len + 3)
                    .map(|i| if i % 3 == 0 { -0.0 } else { i as f32 })
                    .collect();
                let mut want = dst.clone();
                for (i, v) in src.iter().enumerate() {
                    want[2 * i] += v;
                }
                add_strided(&mut dst[..len], &src, 2);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&dst), bits(&want), "n {n} extra {extra}");
            }
        }
    }

    #[test]
    fn gathers_every_other_element() {
        for n in [0usize, 1, 7, 14, 16, 17, 40] {
            for extra in [0usize, 1, 5] {
                let src: Vec<f32> = (0..(2 * n).saturating_sub(1) + extra)
                    .map(|i| i as f32)
                    .collect();
                let mut dst = vec![-1.0f32; n + 3];
                copy_strided(&mut dst[..n], &src, 2);
                let want: Vec<f32> = (0..n).map(|i| (2 * i) as f32).collect();
                assert_eq!(&dst[..n], &want[..], "n {n} extra {extra}");
                assert_eq!(&dst[n..], &[-1.0; 3], "wrote past n {n}");
            }
        }
    }

    #[test]
    fn declines_larger_strided_maps_and_depthwise() {
        let g = Geom {
            n: 1,
            cin: 2,
            h: 5,
            w: 5,
            cout: 2,
            k: 3,
            stride: 1,
            pad: 1,
            depthwise: false,
        };
        let mut col = vec![0.0; 18 * 25];
        // A 5 × 5 map at stride 3 (a "same" one at stride 1 takes the shifted loads, one at
        // stride 2 the permutes), and rows wider than two registers at stride 2.
        let strided = Geom { stride: 3, ..g };
        assert!(!im2col(&strided, &[0.0; 50], &mut col, 25, 0));
        let wide = Geom {
            h: 2,
            w: 40,
            stride: 2,
            ..g
        };
        let mut col = vec![0.0; 18 * 20];
        assert!(!im2col(&wide, &[0.0; 160], &mut col, 20, 0));
        let dw = Geom {
            h: 4,
            w: 4,
            cout: 2,
            depthwise: true,
            ..g
        };
        assert!(!im2col(&dw, &[0.0; 32], &mut col, 16, 0));
    }
}
