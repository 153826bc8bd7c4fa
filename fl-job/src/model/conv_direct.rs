//! Direct 3 × 3, stride-1, "same" convolution for thin layers (up to 32 channels, maps of
//! 14 × 14 and up): forward, input gradient and weight gradient, with no im2col matrix.
//!
//! Why: ResNet-18 ×16's first stage (16 → 16 channels on 28 × 28 maps) ran im2col + GEMM.
//! Its im2col matrix is nine shifted copies of the input, as large as the GEMM's work is
//! small (144 multiply-adds per copied element), so the copy cost about as much as the
//! arithmetic: `im2col` alone was 10–13 % of a ×16 training step, and Winograd was slower
//! still at 16 channels (its transforms cost per channel what it saves per channel pair).
//! At 32 channels Winograd's transforms still weigh more than the multiplications it saves.
//!
//! How: each sample's channel planes are copied once into a zero-padded plane `w + 2` wide.
//! Output pixels are then numbered in that width too (`q = oh·(w + 2) + ow`, the two extra
//! columns per row computed and thrown away), and tap `(kh, kw)` of output `q` reads padded
//! input `q + kh·(w + 2) + kw`: every tap is a contiguous run, so a block of `PV` vectors of
//! 16 outputs for `CO` output channels is `CO · PV` fused multiply-adds per input channel and
//! tap, held in registers across all of them (`PV` loads and `CO` broadcasts feed them). The
//! weight gradient is the same walk read the other way: per three output channels and one
//! input channel, 27 vector accumulators (3 × 9 taps) over a group of samples' padded pixels.
//!
//! The input gradient of such a layer is the same convolution of the output gradient with
//! the flipped, transposed filters (`conv_winograd::flip_transpose`). Samples are computed
//! independently and the weight gradient's groups (fixed by the geometry) are summed in group
//! order, so results are the same at any thread count. Which layers take this path: [`applies`].

use std::cell::RefCell;

use rayon::prelude::*;

use super::conv_kernels::{Epilogue, Geom, equal_groups, sum_partials, take, with_local, zeroed};
use super::conv_winograd::flip_transpose;

/// Lanes per vector chunk (one AVX-512 register of `f32`).
const V: usize = 16;
/// Output channels per register block.
const CO: usize = 8;
/// Vectors of output pixels per register block: `CO · PV` = 24 accumulators, plus `PV`
/// inputs and a broadcast weight, fit AVX-512's 32 registers.
const PV: usize = 3;
/// Output channels per weight-gradient block: 3 × 9 taps = 27 accumulators, plus three
/// output-gradient vectors and one input vector. With 2 × 9 the loop was bound by its
/// loads (11 per 18 multiply-adds, most split across cache lines): ResNet-18 ×16's 32 × 14²
/// layers took 0.55 ms against 0.46 now.
const DW_CO: usize = 3;
/// Padded positions per weight-gradient group, at least: samples are grouped (by the
/// geometry only) until their maps reach it, so that the accumulators' final sums, 27
/// horizontal reductions per input channel and block, stay small next to the loop (a
/// 14 × 14 map is only 15 vectors).
const DW_POSITIONS: usize = 480;

/// Most channels (in or out) a layer may have to take this path, and fewest pixels per map.
/// Measured per layer (`conv_kernels::tests::layer_times`, batch 20, 2 threads; forward /
/// input gradient / weight gradient, ms): 16 → 16 on 28² 0.45–0.52 / 0.50–0.57 / 0.67–0.70
/// (im2col) → 0.28–0.31 / 0.32–0.54 / 0.36–0.39; 32 → 32 on 14² 0.48–0.56 / 0.43–0.45 /
/// 0.45–0.47 (Winograd F2) → 0.33–0.38 / 0.34–0.35 / 0.46–0.47; 32 → 32 on 28² 1.41 / 1.29 /
/// 1.23 (Winograd F4) → 0.89 / 0.90 / 1.28. At 64 channels the direct work is four times
/// that and F4 wins; 7 × 7 maps would compute 96 positions for 49.
const MAX_CHANNELS: usize = 32;
const MIN_PIXELS: usize = 196;

/// Whether a geometry takes this path: dense 3 × 3, stride 1, padding 1, thin, large maps.
pub(crate) fn applies(g: &Geom) -> bool {
    available()
        && !g.depthwise
        && g.k == 3
        && g.stride == 1
        && g.pad == 1
        && g.cin <= MAX_CHANNELS
        && g.cout <= MAX_CHANNELS
        && g.h * g.w >= MIN_PIXELS
}

/// The register blocks are written for AVX-512 ([`x86`]); elsewhere the layers stay on
/// im2col + GEMM.
///
/// `FL_JOB_DIRECT=off` (read once) turns the path off, to measure it against im2col.
fn available() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *OFF.get_or_init(|| std::env::var("FL_JOB_DIRECT").is_ok_and(|v| v == "off")) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    return super::simd::has_avx512();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Sizes of the padded layout of one geometry.
#[derive(Clone, Copy)]
struct Plan {
    /// Padded row length, `w + 2`.
    wp: usize,
    /// Output positions computed per channel (`h · wp` rounded up to whole blocks).
    q: usize,
    /// Length of one padded input plane: every tap's run of `q` stays inside it.
    plane: usize,
}

impl Plan {
    fn new(g: &Geom) -> Self {
        let wp = g.w + 2;
        let q = (g.h * wp).div_ceil(V * PV) * V * PV;
        Plan {
            wp,
            q,
            plane: q + 2 * wp + 2,
        }
    }
}

/// Per-thread scratch, kept from call to call: one sample's padded input planes and its
/// output (or output gradient) in the padded width.
#[derive(Default)]
struct Buffers {
    input: Vec<f32>,
    out: Vec<f32>,
}

thread_local! {
    static BUFFERS: RefCell<Buffers> = RefCell::new(Buffers::default());
}

/// Forward `x` `[n, cin, h, w]` ⊛ `weight` `[cout, cin, 3, 3]` → `[n, cout, h, w]`, then
/// `epilogue` per output plane.
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    let plan = Plan::new(g);
    let packed = pack_filters(g.cout, g.cin, weight);
    let mut out = zeroed(g.n * g.out_len());
    out.par_chunks_mut(g.out_len())
        .zip(x.par_chunks(g.in_len()))
        .for_each(|(o, xs)| {
            with_local(&BUFFERS, |buf| {
                let input = take(&mut buf.input, g.cin * plan.plane);
                pad_planes(xs, g.h, g.w, plan.wp, plan.plane, input);
                let blocks = g.cout.div_ceil(CO);
                let wide = take(&mut buf.out, blocks * CO * plan.q);
                sample_forward(input, &packed, g.cin, blocks, &plan, wide);
                for (co, dst) in o.chunks_exact_mut(g.h * g.w).enumerate() {
                    let src = &wide[co * plan.q..];
                    for (r, row) in dst.chunks_exact_mut(g.w).enumerate() {
                        let s = &src[r * plan.wp..r * plan.wp + g.w];
                        match epilogue {
                            Some(e) => e.write(co, row, s),
                            None => row.copy_from_slice(s),
                        }
                    }
                }
            })
        });
    out
}

/// Input gradient `[n, cout, h, w]` → `[n, cin, h, w]`: the same convolution of the output
/// gradient with the flipped, transposed filters.
pub(crate) fn input_grad(g: &Geom, grad_out: &[f32], weight: &[f32]) -> Vec<f32> {
    let back = Geom {
        cin: g.cout,
        cout: g.cin,
        ..*g
    };
    forward(&back, grad_out, &flip_transpose(g, weight), None)
}

/// Weight gradient `[cout, cin, 3, 3]`: per group of samples (fixed by the geometry), every
/// (output channel, input channel, tap) product summed over the maps; the groups' shares
/// summed in group order.
pub(crate) fn weight_grad(g: &Geom, x: &[f32], grad_out: &[f32]) -> Vec<f32> {
    let plan = Plan::new(g);
    let group = equal_groups(g.n, DW_POSITIONS, plan.q);
    let (in_len, out_len) = (g.cin * plan.plane, g.cout * plan.q);
    let partials: Vec<Option<Vec<f32>>> = x
        .par_chunks(group * g.in_len())
        .zip(grad_out.par_chunks(group * g.out_len()))
        .map(|(xs, gs)| {
            with_local(&BUFFERS, |buf| {
                let samples = xs.len() / g.in_len();
                let input = take(&mut buf.input, samples * in_len);
                for (src, dst) in xs
                    .chunks_exact(g.in_len())
                    .zip(input.chunks_exact_mut(in_len))
                {
                    pad_planes(src, g.h, g.w, plan.wp, plan.plane, dst);
                }
                let dy = take(&mut buf.out, samples * out_len);
                for (src, dst) in gs
                    .chunks_exact(g.out_len())
                    .zip(dy.chunks_exact_mut(out_len))
                {
                    widen(src, g.h, g.w, plan.wp, plan.q, dst);
                }
                let mut share = vec![0.0f32; g.weight_len()];
                group_weight_grad(input, dy, samples, g.cin, g.cout, &plan, &mut share);
                Some(share)
            })
        })
        .collect();
    sum_partials(partials, g.weight_len())
}

/// The filters as `[cout / CO][cin][9 taps][CO]`, so a block's `CO` weights for one input
/// channel and tap are contiguous; output channels past `cout` (a last partial block) get
/// zero weights and their outputs are thrown away.
fn pack_filters(cout: usize, cin: usize, weight: &[f32]) -> Vec<f32> {
    let blocks = cout.div_ceil(CO);
    let mut packed = vec![0.0f32; blocks * cin * 9 * CO];
    for co in 0..cout {
        let (b, c) = (co / CO, co % CO);
        for ci in 0..cin {
            for t in 0..9 {
                packed[((b * cin + ci) * 9 + t) * CO + c] = weight[(co * cin + ci) * 9 + t];
            }
        }
    }
    packed
}

/// Copies `[c, h, w]` planes into zero-padded planes `plane` apart, each `wp = w + 2` wide:
/// pixel `(y, x)` at `(y + 1)·wp + x + 1`. Every element is written (border and tail zero),
/// so the scratch needs no clearing.
fn pad_planes(src: &[f32], h: usize, w: usize, wp: usize, plane: usize, dst: &mut [f32]) {
    for (s, d) in src.chunks_exact(h * w).zip(dst.chunks_exact_mut(plane)) {
        d[..wp + 1].fill(0.0);
        for (y, row) in s.chunks_exact(w).enumerate() {
            let at = (y + 1) * wp + 1;
            d[at..at + w].copy_from_slice(row);
            // The right border of this row and the left border of the next.
            d[at + w..at + w + 2].fill(0.0);
        }
        d[(h + 1) * wp + 1..].fill(0.0);
    }
}

/// Copies `[c, h, w]` planes into planes `q` long in the padded width (`wp` per row), with
/// zeros in the two extra columns and the tail: an output gradient laid out like the
/// forward's outputs, so that its thrown-away positions add nothing to the weight gradient.
fn widen(src: &[f32], h: usize, w: usize, wp: usize, q: usize, dst: &mut [f32]) {
    for (s, d) in src.chunks_exact(h * w).zip(dst.chunks_exact_mut(q)) {
        for (y, row) in s.chunks_exact(w).enumerate() {
            d[y * wp..y * wp + w].copy_from_slice(row);
            d[y * wp + w..(y + 1) * wp].fill(0.0);
        }
        d[h * wp..].fill(0.0);
    }
}

/// `(kh, kw)`'s offset in the padded plane from the output position it feeds.
fn tap_offsets(wp: usize) -> [usize; 9] {
    std::array::from_fn(|t| (t / 3) * wp + t % 3)
}

/// One sample's forward in the padded width: `out[co][q]` for `blocks · CO` output
/// channels, from `input` (`cin` padded planes `plane` apart) and `packed` filters.
fn sample_forward(
    input: &[f32],
    packed: &[f32],
    cin: usize,
    blocks: usize,
    plan: &Plan,
    out: &mut [f32],
) {
    let (q, plane) = (plan.q, plan.plane);
    let offsets = tap_offsets(plan.wp);
    // Every read below stays inside these: the last block's last tap ends at `plane`.
    assert!(input.len() >= cin * plane && q + offsets[8] <= plane && q.is_multiple_of(V * PV));
    assert!(packed.len() >= blocks * cin * 9 * CO && out.len() >= blocks * CO * q);
    for b in 0..blocks {
        for q0 in (0..q).step_by(V * PV) {
            // SAFETY: `applies` admitted this geometry only on a CPU with AVX-512, and the
            // asserts above bound every offset the block reads and writes.
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            unsafe {
                x86::forward_block(
                    input.as_ptr().add(q0),
                    plane,
                    packed.as_ptr().add(b * cin * 9 * CO),
                    cin,
                    &offsets,
                    out.as_mut_ptr().add(b * CO * q + q0),
                    q,
                );
            }
        }
    }
}

/// One group's share of the weight gradient, written into `share` `[cout, cin, 3, 3]`:
/// `Σ_samples Σ_q dy[co][q] · input[ci][q + offset(tap)]`, with `input` and `dy` holding
/// `samples` samples' padded planes back to back.
fn group_weight_grad(
    input: &[f32],
    dy: &[f32],
    samples: usize,
    cin: usize,
    cout: usize,
    plan: &Plan,
    share: &mut [f32],
) {
    let (q, plane) = (plan.q, plan.plane);
    let offsets = tap_offsets(plan.wp);
    let strides = [cin * plane, cout * q];
    assert!(q + offsets[8] <= plane && q.is_multiple_of(V));
    assert!(input.len() >= samples * strides[0] && dy.len() >= samples * strides[1]);
    assert!(share.len() >= cout * cin * 9);
    for co in (0..cout).step_by(DW_CO) {
        // A last partial block repeats its last channel; the copies are dropped.
        let block: [usize; DW_CO] = std::array::from_fn(|c| (co + c).min(cout - 1));
        for ci in 0..cin {
            let mut sums = [[0.0f32; 9]; DW_CO];
            // SAFETY: as in `sample_forward`: AVX-512 was checked, the asserts bound the reads.
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            unsafe {
                x86::weight_grad_block(
                    input.as_ptr().add(ci * plane),
                    block.map(|c| dy.as_ptr().add(c * q)),
                    samples,
                    strides,
                    q,
                    &offsets,
                    &mut sums,
                );
            }
            for (c, s) in sums.iter().enumerate().take(cout - co) {
                share[(block[c] * cin + ci) * 9..][..9].copy_from_slice(s);
            }
        }
    }
}

/// The lanes' sum, as a fixed tree (the same order on every call).
#[inline(always)]
fn hsum(a: &[f32; V]) -> f32 {
    let mut s: [f32; 8] = std::array::from_fn(|i| a[i] + a[i + 8]);
    for half in [4, 2, 1] {
        for i in 0..half {
            s[i] += s[i + half];
        }
    }
    s[0]
}

/// The register blocks, in AVX-512. Why intrinsics rather than [`super::simd::wide`]'s
/// compiled loops: written as loops over arrays, the compiler kept the 24 accumulators in
/// memory (the forward ran 60× slower than this).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use super::{CO, DW_CO, PV, V};
    use std::arch::x86_64::*;

    /// `CO` output channels × `PV · 16` positions from `q0` (`input` and `out` already
    /// point there): for each input channel and tap, `PV` loads, `CO` broadcasts and
    /// `CO · PV` fused multiply-adds. Stores the block into `out`, rows `q` apart.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `input + ci·plane + offsets[t] + PV·16` stays inside the input
    /// for every `ci < cin`, `packed` holds `cin · 9 · CO` weights, `out + (CO − 1)·q + PV·16`
    /// stays inside the output.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn forward_block(
        input: *const f32,
        plane: usize,
        packed: *const f32,
        cin: usize,
        offsets: &[usize; 9],
        out: *mut f32,
        q: usize,
    ) {
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); PV]; CO];
            for ci in 0..cin {
                let p = input.add(ci * plane);
                let w = packed.add(ci * 9 * CO);
                for (t, &off) in offsets.iter().enumerate() {
                    let xs: [__m512; PV] =
                        std::array::from_fn(|v| _mm512_loadu_ps(p.add(off + v * V)));
                    for (c, a) in acc.iter_mut().enumerate() {
                        let wt = _mm512_set1_ps(*w.add(t * CO + c));
                        for (a, x) in a.iter_mut().zip(&xs) {
                            *a = _mm512_fmadd_ps(*x, wt, *a);
                        }
                    }
                }
            }
            for (c, a) in acc.iter().enumerate() {
                for (v, x) in a.iter().enumerate() {
                    _mm512_storeu_ps(out.add(c * q + v * V), *x);
                }
            }
        }
    }

    /// For two output-gradient planes `dy` and one padded input plane, of each of `samples`
    /// samples (`strides` apart: input, output gradient), the nine taps' sums over `q`
    /// positions, into `sums[c][tap]`.
    ///
    /// # Safety
    /// The CPU has AVX-512F; for every sample `s`, `dy[c] + s·strides[1] + q` and
    /// `input + s·strides[0] + q + offsets[8]` stay inside their buffers; `q` is a multiple
    /// of 16.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn weight_grad_block(
        input: *const f32,
        dy: [*const f32; DW_CO],
        samples: usize,
        strides: [usize; 2],
        q: usize,
        offsets: &[usize; 9],
        sums: &mut [[f32; 9]; DW_CO],
    ) {
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); 9]; DW_CO];
            for s in 0..samples {
                let (input, dy) = (input.add(s * strides[0]), dy.map(|d| d.add(s * strides[1])));
                let taps: [*const f32; 9] = std::array::from_fn(|t| input.add(offsets[t]));
                for q0 in (0..q).step_by(V) {
                    let d: [__m512; DW_CO] =
                        std::array::from_fn(|c| _mm512_loadu_ps(dy[c].add(q0)));
                    for (t, p) in taps.iter().enumerate() {
                        let x = _mm512_loadu_ps(p.add(q0));
                        for c in 0..DW_CO {
                            acc[c][t] = _mm512_fmadd_ps(d[c], x, acc[c][t]);
                        }
                    }
                }
            }
            // Summed out of registers through memory: reduced in place with
            // `_mm512_reduce_add_ps`, whose 256- and 128-bit steps can only name the first
            // 16 registers, the compiler kept the accumulators there and spilled four of them
            // on every iteration of the loop above (1.5× the time).
            let mut lanes = [[[0.0f32; V]; 9]; DW_CO];
            for (l, a) in lanes.iter_mut().zip(&acc) {
                for (l, a) in l.iter_mut().zip(a) {
                    _mm512_storeu_ps(l.as_mut_ptr(), *a);
                }
            }
            for (s, l) in sums.iter_mut().zip(&lanes) {
                *s = std::array::from_fn(|t| super::hsum(&l[t]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::conv_kernels::tests::{close, naive, same3x3 as geom, values};
    use super::*;

    /// Forward, input gradient and weight gradient against the f64 definition, on maps
    /// whose padded width does not divide the block and channel counts that leave partial
    /// blocks (odd output channels, fewer than `CO`).
    #[test]
    fn matches_the_definition() {
        for &(n, cin, h, w, cout) in &[
            (3, 16, 28, 28, 16),
            (2, 1, 28, 28, 16),
            (2, 5, 17, 13, 3),
            (1, 7, 15, 20, 9),
            // Grouped weight gradient (2 samples per group, a last group of 1).
            (5, 32, 14, 14, 32),
            (3, 4, 14, 15, 5),
        ] {
            let g = geom(n, cin, h, w, cout);
            let x = values(n * g.in_len(), 11);
            let wt = values(g.weight_len(), 12);
            let go = values(n * g.out_len(), 13);
            let (y, dx, dw) = naive(&g, &x, &wt, &go);
            close(&forward(&g, &x, &wt, None), &y, "forward", &g);
            close(&input_grad(&g, &go, &wt), &dx, "dx", &g);
            close(&weight_grad(&g, &x, &go), &dw, "dw", &g);
        }
    }

    /// The same bits at 1, 2 and 3 threads (samples independent; shares summed in order).
    #[test]
    fn bit_identical_at_any_thread_count() {
        for g in [geom(5, 16, 28, 28, 16), geom(7, 32, 14, 14, 32)] {
            same_bits_at_any_thread_count(&g);
        }
    }

    fn same_bits_at_any_thread_count(g: &Geom) {
        let g = *g;
        let x = values(g.n * g.in_len(), 21);
        let wt = values(g.weight_len(), 22);
        let go = values(g.n * g.out_len(), 23);
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool")
                .install(|| {
                    (
                        forward(&g, &x, &wt, None),
                        input_grad(&g, &go, &wt),
                        weight_grad(&g, &x, &go),
                    )
                })
        };
        let one = run(1);
        for t in [2, 3] {
            assert!(run(t) == one, "{t} threads differ from 1 for {g:?}");
        }
    }

    #[test]
    fn takes_thin_large_maps_only() {
        assert!(applies(&geom(20, 16, 28, 28, 16)));
        assert!(applies(&geom(20, 1, 28, 28, 16)));
        assert!(applies(&geom(20, 32, 14, 14, 32)));
        assert!(!applies(&geom(20, 64, 28, 28, 64)));
        assert!(!applies(&geom(20, 16, 7, 7, 16)));
        assert!(!applies(&Geom {
            stride: 2,
            ..geom(20, 16, 28, 28, 16)
        }));
    }
}
