//! Direct 3 × 3, stride-1, "same" convolution for thin layers (few channels, large maps):
//! forward, input gradient and weight gradient, with no im2col matrix.
//!
//! Why: ResNet-18 ×16's first stage (16 → 16 channels on 28 × 28 maps) ran im2col + GEMM.
//! Its im2col matrix is nine shifted copies of the input, as large as the GEMM's work is
//! small (144 multiply-adds per copied element), so the copy cost about as much as the
//! arithmetic: `im2col` alone was 10–13 % of a ×16 training step, and Winograd was slower
//! still at 16 channels (its transforms cost per channel what it saves per channel pair).
//!
//! How: each sample's channel planes are copied once into a zero-padded plane `w + 2` wide.
//! Output pixels are then numbered in that width too (`q = oh·(w + 2) + ow`, the two extra
//! columns per row computed and thrown away), and tap `(kh, kw)` of output `q` reads padded
//! input `q + kh·(w + 2) + kw`: every tap is a contiguous run, so a block of `PV` vectors of
//! 16 outputs for `CO` output channels is `CO · PV` fused multiply-adds per input channel and
//! tap, held in registers across all of them (`PV` loads and `CO` broadcasts feed them). The
//! weight gradient is the same walk read the other way: per pair of output channels and one
//! input channel, 18 vector accumulators (2 × 9 taps) over the sample's padded pixels.
//!
//! The input gradient of such a layer is the same convolution of the output gradient with
//! the flipped, transposed filters (`conv_winograd::flip_transpose`). Samples are computed
//! independently and the weight gradient's per-sample shares are summed in sample order, so
//! results are the same at any thread count. Which layers take this path: [`applies`].

use std::cell::RefCell;

use rayon::prelude::*;

use super::conv_kernels::{Epilogue, Geom, sum_partials, take, with_local, zeroed};
use super::conv_winograd::flip_transpose;

/// Lanes per vector chunk (one AVX-512 register of `f32`).
const V: usize = 16;
/// Output channels per register block.
const CO: usize = 8;
/// Vectors of output pixels per register block: `CO · PV` = 24 accumulators, plus `PV`
/// inputs and a broadcast weight, fit AVX-512's 32 registers.
const PV: usize = 3;
/// Output channels per weight-gradient block: 2 × 9 taps = 18 accumulators.
const DW_CO: usize = 2;

/// Most channels (in or out) a layer may have to take this path, and fewest pixels per map.
/// Measured per layer (`conv_kernels::tests::layer_times`, ResNet-18 ×16, batch 20, 2
/// threads): at 32 channels on 14 × 14 maps the forward and input gradient were level with
/// Winograd F(2 × 2) but the weight gradient twice as slow (15 vectors per plane: the final
/// sums weigh as much as the loop), and 7 × 7 maps compute 96 positions for 49.
const MAX_CHANNELS: usize = 16;
const MIN_PIXELS: usize = 400;

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
                sample_forward(
                    input, &packed, g.cin, blocks, plan.wp, plan.q, plan.plane, wide,
                );
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

/// Weight gradient `[cout, cin, 3, 3]`: per sample, every (output channel, input channel,
/// tap) product summed over the map; the samples' shares summed in sample order.
pub(crate) fn weight_grad(g: &Geom, x: &[f32], grad_out: &[f32]) -> Vec<f32> {
    let plan = Plan::new(g);
    let partials: Vec<Option<Vec<f32>>> = x
        .par_chunks(g.in_len())
        .zip(grad_out.par_chunks(g.out_len()))
        .map(|(xs, gs)| {
            with_local(&BUFFERS, |buf| {
                let input = take(&mut buf.input, g.cin * plan.plane);
                pad_planes(xs, g.h, g.w, plan.wp, plan.plane, input);
                let dy = take(&mut buf.out, g.cout * plan.q);
                widen(gs, g.h, g.w, plan.wp, plan.q, dy);
                let mut share = vec![0.0f32; g.weight_len()];
                sample_weight_grad(
                    input, dy, g.cin, g.cout, plan.wp, plan.q, plan.plane, &mut share,
                );
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
#[allow(clippy::too_many_arguments)]
fn sample_forward(
    input: &[f32],
    packed: &[f32],
    cin: usize,
    blocks: usize,
    wp: usize,
    q: usize,
    plane: usize,
    out: &mut [f32],
) {
    let offsets = tap_offsets(wp);
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

/// One sample's share of the weight gradient, added into `share` `[cout, cin, 3, 3]`:
/// `Σ_q dy[co][q] · input[ci][q + offset(tap)]`.
#[allow(clippy::too_many_arguments)]
fn sample_weight_grad(
    input: &[f32],
    dy: &[f32],
    cin: usize,
    cout: usize,
    wp: usize,
    q: usize,
    plane: usize,
    share: &mut [f32],
) {
    let offsets = tap_offsets(wp);
    assert!(input.len() >= cin * plane && q + offsets[8] <= plane && q.is_multiple_of(V));
    assert!(dy.len() >= cout * q && share.len() >= cout * cin * 9);
    for co in (0..cout).step_by(DW_CO) {
        // A last odd channel pairs with itself; its second copy is dropped.
        let pair = [co, (co + 1).min(cout - 1)];
        for ci in 0..cin {
            let mut sums = [[0.0f32; 9]; DW_CO];
            // SAFETY: as in `sample_forward`: AVX-512 was checked, the asserts bound the reads.
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            unsafe {
                x86::weight_grad_pair(
                    input.as_ptr().add(ci * plane),
                    [dy.as_ptr().add(pair[0] * q), dy.as_ptr().add(pair[1] * q)],
                    q,
                    &offsets,
                    &mut sums,
                );
            }
            for (c, s) in sums
                .iter()
                .enumerate()
                .take(if co + 1 < cout { 2 } else { 1 })
            {
                for (t, v) in s.iter().enumerate() {
                    share[(pair[c] * cin + ci) * 9 + t] += v;
                }
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

    /// For two output-gradient planes `dy` and one padded input plane, the nine taps'
    /// sums over `q` positions, into `sums[c][tap]`.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `dy[c] + q` and `input + q + offsets[8]` stay inside their
    /// buffers; `q` is a multiple of 16.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn weight_grad_pair(
        input: *const f32,
        dy: [*const f32; DW_CO],
        q: usize,
        offsets: &[usize; 9],
        sums: &mut [[f32; 9]; DW_CO],
    ) {
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); 9]; DW_CO];
            let taps: [*const f32; 9] = std::array::from_fn(|t| input.add(offsets[t]));
            for q0 in (0..q).step_by(V) {
                let d: [__m512; DW_CO] = std::array::from_fn(|c| _mm512_loadu_ps(dy[c].add(q0)));
                for (t, p) in taps.iter().enumerate() {
                    let x = _mm512_loadu_ps(p.add(q0));
                    for c in 0..DW_CO {
                        acc[c][t] = _mm512_fmadd_ps(d[c], x, acc[c][t]);
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
    use super::super::conv_kernels::tests::{close, naive, values};
    use super::*;

    fn geom(n: usize, cin: usize, h: usize, w: usize, cout: usize) -> Geom {
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
        let g = geom(5, 16, 28, 28, 16);
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
            assert!(run(t) == one, "{t} threads differ from 1");
        }
    }

    #[test]
    fn takes_thin_large_maps_only() {
        assert!(applies(&geom(20, 16, 28, 28, 16)));
        assert!(applies(&geom(20, 1, 28, 28, 16)));
        assert!(!applies(&geom(20, 32, 14, 14, 32)));
        assert!(!applies(&geom(20, 16, 4, 4, 16)));
        assert!(!applies(&Geom {
            stride: 2,
            ..geom(20, 16, 28, 28, 16)
        }));
    }
}
