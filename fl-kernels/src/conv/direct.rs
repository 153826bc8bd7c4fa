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
//! input channel, 27 vector accumulators (3 × 9 taps) over all the samples' padded pixels.
//!
//! The input gradient of such a layer is the same convolution of the output gradient with
//! the flipped, transposed filters (`types::flip_transpose`). Samples are computed
//! independently and the weight gradient's groups (fixed by the geometry) are summed in group
//! order, so results are the same at any thread count. Which layers take this path: [`applies`].

use std::cell::RefCell;

use pulp::{Simd, WithSimd};
use rayon::prelude::*;

use crate::isa::{self, Dispatch};
use crate::scratch::{build, piece, take, with_local};
use crate::simd::{copy_run, wide};
use crate::types::{Epilogue, Geom, flip_transpose};

/// Output channels per weight-gradient block: 3 × 9 taps = 27 accumulators on a CPU with
/// 32 registers, plus three output-gradient vectors and one input vector. With 2 × 9 the
/// loop was bound by its loads (11 per 18 multiply-adds, most split across cache lines):
/// ResNet-18 ×16's 32 × 14² layers took 0.55 ms against 0.46 (AVX-512).
const DW_CO: usize = 3;

/// Most channels (in or out) a layer may have to take this path, and fewest pixels per map.
/// Measured per layer on AVX-512 (`conv::tests::layer_times`, batch 20, 2 threads;
/// forward / input gradient / weight gradient, ms): 16 → 16 on 28² 0.45–0.52 / 0.50–0.57 /
/// 0.67–0.70 (im2col) → 0.28–0.31 / 0.32–0.54 / 0.36–0.39; 32 → 32 on 14² 0.48–0.56 /
/// 0.43–0.45 / 0.45–0.47 (Winograd F2) → 0.33–0.38 / 0.34–0.35 / 0.46–0.47; 32 → 32 on 28²
/// 1.41 / 1.29 / 1.23 (Winograd F4) → 0.89 / 0.90 / 1.28. At 64 channels the direct work is
/// four times that and F4 wins; 7 × 7 maps would compute 96 positions for 49.
const MAX_CHANNELS: usize = 32;
const MIN_PIXELS: usize = 196;

/// Whether a geometry takes this path: it [`fits`] and the CPU runs the kernels fast
/// ([`available`]).
pub(crate) fn applies(g: &Geom) -> bool {
    fits(g) && available()
}

/// The geometries this path is for: dense 3 × 3, stride 1, padding 1, thin, large maps.
/// (The kernels compute any dense 3 × 3 stride-1 "same" convolution; this is where they
/// pay.)
pub(crate) fn fits(g: &Geom) -> bool {
    !g.depthwise
        && g.k == 3
        && g.stride == 1
        && g.pad == 1
        && g.cin <= MAX_CHANNELS
        && g.cout <= MAX_CHANNELS
        && g.h * g.w >= MIN_PIXELS
}

/// Whether the layers that [`fits`] take this path on this CPU: with AVX-512 (the widths
/// above were measured there); elsewhere they stay on im2col + GEMM, though the kernels
/// run correctly on every instruction set (`Isa::all`, tested).
///
/// `FL_JOB_DIRECT=off` (read once) turns the path off, to measure it against im2col.
fn available() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *OFF.get_or_init(|| std::env::var("FL_JOB_DIRECT").is_ok_and(|v| v == "off")) {
        return false;
    }
    isa::avx512()
}

/// Whether the direct weight gradient is the one to run for `g` on this CPU, where the
/// layer takes this path for its forward and input gradient.
///
/// Measured on an Intel Xeon with AVX-512 (Sapphire Rapids class, 2026-12-07,
/// `conv::tests::layer_times`, one thread, ms a call at batch 20, direct against the path
/// the layer would take without this one): 4 → 4 on 28² 0.09–0.11 against 0.12, 8 → 8 on
/// 14² 0.11 against 0.17, 8 → 8 on 28² 0.31 against 0.67, 16 → 16 on 28² 1.12–1.20 against
/// 1.43–1.48, 16 → 16 on 14² even (0.32–0.39 against 0.33–0.38); it loses where Winograd
/// takes over, 32 → 32 on 14² (1.24–1.40 against 0.82–0.87), and on the one-channel stem
/// (1 → 16: 0.15 against 0.06, im2col's matrix being nine rows there). So on Intel it runs
/// for 2–16 channels. On AMD's AVX-512 cores (where the path was first measured) it ran
/// everywhere and still does. `FL_JOB_DIRECT_DW=on|off` (read once) overrides, to measure.
pub(crate) fn weight_grad_pays(g: &Geom) -> bool {
    static FORCE: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let force = *FORCE.get_or_init(|| match std::env::var("FL_JOB_DIRECT_DW").as_deref() {
        Ok("on") => Some(true),
        Ok("off") => Some(false),
        _ => None,
    });
    force.unwrap_or_else(|| !isa::intel() || (g.cin > 1 && g.cin.max(g.cout) <= 16))
}

/// How the register blocks are cut on one instruction set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Blocking {
    /// `f32` lanes per vector.
    lanes: usize,
    /// Output channels per forward block (`co · pv` accumulators).
    co: usize,
    /// Vectors of output positions per forward block.
    pv: usize,
    /// Taps per weight-gradient pass (`DW_CO · taps` accumulators): 9, or 3 in three
    /// passes (one per kernel row).
    taps: usize,
}

impl Blocking {
    /// With 32 registers (AVX-512, NEON; or 16 lanes, pulp's emulated AVX-512 in tests):
    /// 8 channels × 3 vectors = 24 forward accumulators plus three inputs and a broadcast
    /// (4 × 6 for layers of at most 4 output channels, which would otherwise compute 8 and
    /// throw half away: ResNet-18 ×4's 4 → 4 layers), and 3 × 9 = 27 weight-gradient ones.
    /// With 16 (AVX2, scalar): 4 × 3 = 12 and 3 × 3 = 9.
    fn of<S: Simd>(cout: usize) -> Self {
        let wide = S::REGISTER_COUNT >= 32 || S::F32_LANES >= 16;
        let (co, pv) = match (wide, cout <= 4) {
            (true, false) => (8, 3),
            (true, true) => (4, 6),
            (false, _) => (4, 3),
        };
        Blocking {
            lanes: S::F32_LANES,
            co,
            pv,
            taps: if wide { 9 } else { 3 },
        }
    }

    /// [`Blocking::of`] the instruction set `on` runs, for `cout` output channels.
    fn on(on: impl Dispatch, cout: usize) -> Self {
        struct Of(usize);
        impl WithSimd for Of {
            type Output = Blocking;
            #[inline(always)]
            fn with_simd<S: Simd>(self, _: S) -> Blocking {
                Blocking::of::<S>(self.0)
            }
        }
        on.run(Of(cout))
    }
}

/// Sizes of the padded layout of one geometry.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// The register blocks it is cut for.
    blocking: Blocking,
    /// Padded row length, `w + 2`.
    wp: usize,
    /// Output positions computed per channel (`h · wp` rounded up to whole blocks).
    q: usize,
    /// Length of one padded input plane: every tap's run of `q` stays inside it.
    plane: usize,
}

impl Plan {
    fn new(g: &Geom, blocking: Blocking) -> Self {
        let wp = g.w + 2;
        let step = blocking.lanes * blocking.pv;
        let q = (g.h * wp).div_ceil(step) * step;
        Plan {
            blocking,
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
/// `epilogue` per output plane, on [`isa::arch`]'s instruction set.
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    forward_on(isa::arch(), g, x, weight, epilogue)
}

/// [`forward`] on the instruction set `on`.
fn forward_on(
    on: impl Dispatch,
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    assert!(
        g.k == 3 && g.stride == 1 && g.pad == 1 && !g.depthwise,
        "conv_direct: geometry {g:?}"
    );
    assert!(x.len() == g.n * g.in_len() && weight.len() == g.weight_len());
    let plan = Plan::new(g, Blocking::on(on, g.cout));
    let co = plan.blocking.co;
    let packed = pack_filters(g.cout, g.cin, co, weight);
    build(g.n * g.out_len(), g.out_len(), |i, o| {
        let xs = piece(x, i, g.in_len());
        with_local(&BUFFERS, |buf| {
            let input = take(&mut buf.input, g.cin * plan.plane);
            pad_planes(xs, g.h, g.w, plan.wp, plan.plane, input);
            let blocks = g.cout.div_ceil(co);
            let wide = take(&mut buf.out, blocks * co * plan.q);
            on.run(SampleForward {
                input,
                packed: &packed,
                cin: g.cin,
                blocks,
                plan,
                out: &mut *wide,
            });
            for (co, dst) in o.chunks_exact_mut(g.h * g.w).enumerate() {
                let src = &wide[co * plan.q..];
                for (r, row) in dst.chunks_exact_mut(g.w).enumerate() {
                    let s = &src[r * plan.wp..r * plan.wp + g.w];
                    match epilogue {
                        Some(e) => e.write(co, row, s),
                        None => copy_run(row, s),
                    }
                }
            }
        })
    })
}

/// Input gradient `[n, cout, h, w]` → `[n, cin, h, w]`: the same convolution of the output
/// gradient with the flipped, transposed filters.
pub(crate) fn input_grad(g: &Geom, grad_out: &[f32], weight: &[f32]) -> Vec<f32> {
    input_grad_on(isa::arch(), g, grad_out, weight)
}

/// [`input_grad`] on the instruction set `on`.
fn input_grad_on(on: impl Dispatch, g: &Geom, grad_out: &[f32], weight: &[f32]) -> Vec<f32> {
    let back = Geom {
        cin: g.cout,
        cout: g.cin,
        ..*g
    };
    forward_on(on, &back, grad_out, &flip_transpose(g, weight), None)
}

/// Weight gradient `[cout, cin, 3, 3]`: per block of output channels and input channel,
/// every tap's products summed over all the samples' maps, the blocks spread over the
/// threads (each block's sum is one fixed chain, so the bits do not depend on them).
pub(crate) fn weight_grad(g: &Geom, x: &[f32], grad_out: &[f32]) -> Vec<f32> {
    weight_grad_on(isa::arch(), g, x, grad_out)
}

/// [`weight_grad`] on the instruction set `on`.
///
/// Why over all samples at once: with the samples cut into groups (each a share of the
/// gradient, the shares summed after), a 28 × 28 map was a group of its own, and each
/// block's 27 horizontal sums came once per sample instead of once per layer.
fn weight_grad_on(on: impl Dispatch, g: &Geom, x: &[f32], grad_out: &[f32]) -> Vec<f32> {
    assert!(x.len() == g.n * g.in_len() && grad_out.len() == g.n * g.out_len());
    if g.n == 0 {
        return vec![0.0; g.weight_len()];
    }
    // Positions in whole vectors only: the weight gradient has no blocks of several vectors
    // (a 4-channel layer's forward blocks of 6 would pad 14 × 16 positions to 288, not 224).
    let plan = Plan::new(
        g,
        Blocking {
            pv: 1,
            ..Blocking::on(on, g.cout)
        },
    );
    let (in_len, out_len) = (g.cin * plan.plane, g.cout * plan.q);
    let blocks = g.cout.div_ceil(DW_CO);
    let channels = |b: usize| -> [usize; DW_CO] {
        // A last partial block repeats its last channel; the copies are dropped.
        std::array::from_fn(|c| (b * DW_CO + c).min(g.cout - 1))
    };
    let sums: Vec<[[f32; 9]; DW_CO]> = with_local(&BUFFERS, |buf| {
        // Every sample's padded input and output gradient in the padded width, once for all
        // the blocks.
        let input = take(&mut buf.input, g.n * in_len);
        input
            .par_chunks_mut(in_len)
            .zip(x.par_chunks(g.in_len()))
            .for_each(|(d, s)| pad_planes(s, g.h, g.w, plan.wp, plan.plane, d));
        let dy = take(&mut buf.out, g.n * out_len);
        dy.par_chunks_mut(out_len)
            .zip(grad_out.par_chunks(g.out_len()))
            .for_each(|(d, s)| widen(s, g.h, g.w, plan.wp, plan.q, d));
        let (input, dy) = (&*input, &*dy);
        (0..blocks * g.cin)
            .into_par_iter()
            .map(|item| {
                let (b, ci) = (item / g.cin, item % g.cin);
                let mut sums = [[0.0f32; 9]; DW_CO];
                on.run(WeightGradBlock {
                    input: &input[ci * plan.plane..],
                    dy: channels(b).map(|c| &dy[c * plan.q..]),
                    samples: g.n,
                    strides: [in_len, out_len],
                    plan,
                    sums: &mut sums,
                });
                sums
            })
            .collect()
    });
    let mut dw = vec![0.0f32; g.weight_len()];
    for (item, block) in sums.iter().enumerate() {
        let (b, ci) = (item / g.cin, item % g.cin);
        for (c, s) in block.iter().enumerate().take(g.cout - b * DW_CO) {
            dw[((b * DW_CO + c) * g.cin + ci) * 9..][..9].copy_from_slice(s);
        }
    }
    dw
}

/// The filters as `[cout / co][cin][9 taps][co]`, so a block's `co` weights for one input
/// channel and tap are contiguous; output channels past `cout` (a last partial block) get
/// zero weights and their outputs are thrown away.
fn pack_filters(cout: usize, cin: usize, co: usize, weight: &[f32]) -> Vec<f32> {
    let blocks = cout.div_ceil(co);
    let mut packed = vec![0.0f32; blocks * cin * 9 * co];
    for o in 0..cout {
        let (b, c) = (o / co, o % co);
        for ci in 0..cin {
            for t in 0..9 {
                packed[((b * cin + ci) * 9 + t) * co + c] = weight[(o * cin + ci) * 9 + t];
            }
        }
    }
    packed
}

wide! {
    /// Copies `[c, h, w]` planes into zero-padded planes `plane` apart, each `wp = w + 2` wide:
    /// pixel `(y, x)` at `(y + 1)·wp + x + 1`. Every element is written (border and tail zero),
    /// so the scratch needs no clearing.
    fn pad_planes(src: &[f32], h: usize, w: usize, wp: usize, plane: usize, dst: &mut [f32]) {
        for (s, d) in src.chunks_exact(h * w).zip(dst.chunks_exact_mut(plane)) {
            d[..wp + 1].fill(0.0);
            for (y, row) in s.chunks_exact(w).enumerate() {
                let at = (y + 1) * wp + 1;
                copy_run(&mut d[at..at + w], row);
                // The right border of this row and the left border of the next.
                d[at + w..at + w + 2].fill(0.0);
            }
            d[(h + 1) * wp + 1..].fill(0.0);
        }
    }
}

wide! {
    /// Copies `[c, h, w]` planes into planes `q` long in the padded width (`wp` per row), with
    /// zeros in the two extra columns and the tail: an output gradient laid out like the
    /// forward's outputs, so that its thrown-away positions add nothing to the weight gradient.
    fn widen(src: &[f32], h: usize, w: usize, wp: usize, q: usize, dst: &mut [f32]) {
        for (s, d) in src.chunks_exact(h * w).zip(dst.chunks_exact_mut(q)) {
            for (y, row) in s.chunks_exact(w).enumerate() {
                copy_run(&mut d[y * wp..y * wp + w], row);
                d[y * wp + w..(y + 1) * wp].fill(0.0);
            }
            d[h * wp..].fill(0.0);
        }
    }
}

/// `(kh, kw)`'s offset in the padded plane from the output position it feeds.
fn tap_offsets(wp: usize) -> [usize; 9] {
    std::array::from_fn(|t| (t / 3) * wp + t % 3)
}

/// One sample's forward in the padded width: `out[co][q]` for `blocks · co` output
/// channels, from `input` (`cin` padded planes `plane` apart) and packed filters.
struct SampleForward<'a> {
    input: &'a [f32],
    packed: &'a [f32],
    cin: usize,
    blocks: usize,
    plan: Plan,
    out: &'a mut [f32],
}

impl WithSimd for SampleForward<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let b = self.plan.blocking;
        assert_eq!(
            b.lanes,
            S::F32_LANES,
            "conv_direct: planned for another vector width"
        );
        match (b.co, b.pv) {
            (8, 3) => sample_forward::<S, 8, 3>(s, self),
            (4, 6) => sample_forward::<S, 4, 6>(s, self),
            _ => sample_forward::<S, 4, 3>(s, self),
        }
    }
}

/// [`SampleForward`] with `CO` output channels per block: for each block of `CO` channels ×
/// `PV` vectors of positions, per input channel and tap `PV` loads, `CO` broadcasts and
/// `CO · PV` fused multiply-adds, the accumulators held in registers throughout. Every
/// output is the same chain of fused multiply-adds (input channels, then taps, in order)
/// whatever the vector width, so the result has the same bits on every instruction set.
#[inline(always)]
fn sample_forward<S: Simd, const CO: usize, const PV: usize>(s: S, a: SampleForward<'_>) {
    let SampleForward {
        input,
        packed,
        cin,
        blocks,
        plan,
        out,
    } = a;
    let (q, plane, step) = (plan.q, plan.plane, S::F32_LANES * PV);
    let offsets = tap_offsets(plan.wp);
    assert_eq!((plan.blocking.co, plan.blocking.pv), (CO, PV));
    // Every read below stays inside these: the last block's last tap ends at `plane`.
    assert!(input.len() >= cin * plane && q + offsets[8] <= plane && q.is_multiple_of(step));
    assert!(packed.len() >= blocks * cin * 9 * CO && out.len() >= blocks * CO * q);
    let zero = s.splat_f32s(0.0);
    for (w, out) in packed
        .chunks_exact(cin * 9 * CO)
        .zip(out.chunks_exact_mut(CO * q))
        .take(blocks)
    {
        for q0 in (0..q).step_by(step) {
            let mut acc = [[zero; PV]; CO];
            for (ci, wc) in w.chunks_exact(9 * CO).enumerate() {
                let p = &input[ci * plane + q0..(ci + 1) * plane];
                for (t, &off) in offsets.iter().enumerate() {
                    let (run, _) = S::as_simd_f32s(&p[off..off + step]);
                    let xs: [S::f32s; PV] = std::array::from_fn(|v| run[v]);
                    for (c, acc) in acc.iter_mut().enumerate() {
                        let wt = s.splat_f32s(wc[t * CO + c]);
                        for (a, x) in acc.iter_mut().zip(&xs) {
                            *a = s.mul_add_f32s(*x, wt, *a);
                        }
                    }
                }
            }
            for (c, acc) in acc.iter().enumerate() {
                let (dst, _) = S::as_mut_simd_f32s(&mut out[c * q + q0..c * q + q0 + step]);
                dst.copy_from_slice(acc);
            }
        }
    }
}

/// For `DW_CO` output-gradient planes `dy` and one padded input plane, of each of `samples`
/// samples (`strides` apart: input, output gradient), the nine taps' sums over `q`
/// positions, into `sums[c][tap]`.
struct WeightGradBlock<'a> {
    input: &'a [f32],
    dy: [&'a [f32]; DW_CO],
    samples: usize,
    strides: [usize; 2],
    plan: Plan,
    sums: &'a mut [[f32; 9]; DW_CO],
}

impl WithSimd for WeightGradBlock<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let b = self.plan.blocking;
        assert_eq!(
            (b.lanes, b.taps),
            (S::F32_LANES, Blocking::of::<S>(0).taps),
            "conv_direct: planned for another vector width"
        );
        let WeightGradBlock {
            input,
            dy,
            samples,
            strides,
            plan,
            sums,
        } = self;
        let args = (input, dy, samples, strides, plan);
        match b.taps {
            9 => weight_grad_taps::<S, 9>(s, args, 0, sums),
            _ => {
                for kh in 0..3 {
                    weight_grad_taps::<S, 3>(s, args, kh, sums);
                }
            }
        }
    }
}

/// [`WeightGradBlock`]'s sums for the `T` taps from kernel row `kh0` on: `DW_CO · T`
/// vector accumulators over every sample's positions, then each reduced by [`hsum`].
#[inline(always)]
fn weight_grad_taps<S: Simd, const T: usize>(
    s: S,
    (input, dy, samples, strides, plan): (&[f32], [&[f32]; DW_CO], usize, [usize; 2], Plan),
    kh0: usize,
    sums: &mut [[f32; 9]; DW_CO],
) {
    let (q, lanes) = (plan.q, S::F32_LANES);
    let offsets = tap_offsets(plan.wp);
    let off: [usize; T] = std::array::from_fn(|t| offsets[kh0 * 3 + t]);
    let zero = s.splat_f32s(0.0);
    let mut acc = [[zero; T]; DW_CO];
    let n = q / lanes;
    for smp in 0..samples {
        let x = &input[smp * strides[0]..];
        let d: [&[S::f32s]; DW_CO] =
            dy.map(|d| S::as_simd_f32s(&d[smp * strides[1]..smp * strides[1] + q]).0);
        let taps: [&[S::f32s]; T] = off.map(|o| S::as_simd_f32s(&x[o..o + q]).0);
        let sample = sample_taps(s, d, taps, n);
        for (acc, sample) in acc.iter_mut().zip(&sample) {
            for (a, v) in acc.iter_mut().zip(sample) {
                *a = s.add_f32s(*a, *v);
            }
        }
    }
    // Summed out of registers through memory: reduced in place (AVX-512's
    // `_mm512_reduce_add_ps`, whose 256- and 128-bit steps can only name the first 16
    // registers), the accumulators were kept there and four spilled on every iteration
    // of the loop above (1.5× the time).
    let mut lanes_buf = [0.0f32; 16];
    assert!(lanes <= lanes_buf.len());
    for (sum, acc) in sums.iter_mut().zip(&acc) {
        for (t, a) in acc.iter().enumerate() {
            let (dst, _) = S::as_mut_simd_f32s(&mut lanes_buf[..lanes]);
            dst[0] = *a;
            sum[kh0 * 3 + t] = hsum(&lanes_buf[..lanes]);
        }
    }
}

/// One sample's `DW_CO · T` tap sums as vectors: `Σ_i d[c][i] · taps[t][i]` over the first
/// `n` vectors of every run.
///
/// Why a function of its own, its accumulators returned by value, and unchecked loads:
/// accumulated across the samples in one array (read back after the loop) and loaded with
/// bounds checks, every multiply-add was also followed by a 64-byte store of its accumulator
/// to the stack — 27 stores an iteration: 16 → 16 on 28² took 3.0–3.5 ms a call, now
/// 1.1–1.2 (im2col's: 1.4; `tests::layer_times`, `WIDTH=16`, one thread, 2026-12-07).
#[inline(always)]
fn sample_taps<S: Simd, const T: usize>(
    s: S,
    d: [&[S::f32s]; DW_CO],
    taps: [&[S::f32s]; T],
    n: usize,
) -> [[S::f32s; T]; DW_CO] {
    assert!(d.iter().chain(&taps).all(|run| run.len() >= n));
    let zero = s.splat_f32s(0.0);
    let mut acc = [[zero; T]; DW_CO];
    for i in 0..n {
        // SAFETY: `i < n` and every run holds at least `n` vectors (asserted above).
        #[allow(unsafe_code)]
        let dv: [S::f32s; DW_CO] = std::array::from_fn(|c| unsafe { *d[c].get_unchecked(i) });
        for (t, tap) in taps.iter().enumerate() {
            // SAFETY: as above.
            #[allow(unsafe_code)]
            let xv = unsafe { *tap.get_unchecked(i) };
            for (acc, dv) in acc.iter_mut().zip(&dv) {
                acc[t] = s.mul_add_f32s(*dv, xv, acc[t]);
            }
        }
    }
    acc
}

/// The lanes' sum, as a fixed tree (the same order on every call): halves added
/// pairwise until one is left. For 16 lanes: `a[i] + a[i + 8]`, then 4, 2, 1.
#[inline(always)]
fn hsum(a: &[f32]) -> f32 {
    let mut s = [0.0f32; 16];
    s[..a.len()].copy_from_slice(a);
    let mut n = a.len();
    while n > 1 {
        n /= 2;
        for i in 0..n {
            s[i] += s[i + n];
        }
    }
    s[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::On;
    use crate::test_support::{close, naive, same3x3 as geom, values};

    /// Every result of one geometry on one instruction set: forward, input gradient,
    /// weight gradient.
    type Results = (Vec<f32>, Vec<f32>, Vec<f32>);

    fn run_on(on: impl Dispatch, g: &Geom, x: &[f32], wt: &[f32], go: &[f32]) -> Results {
        (
            forward_on(on, g, x, wt, None),
            input_grad_on(on, g, go, wt),
            weight_grad_on(on, g, x, go),
        )
    }

    /// One instruction set's [`run_on`].
    type Run = dyn Fn(&Geom, &[f32], &[f32], &[f32]) -> Results + Sync;

    /// Runs `check` on every instruction set this CPU has (`Isa::all`) and on pulp's
    /// software 16-lane type (AVX-512's blocking, on any CPU), naming each in the output.
    fn on_every_isa(mut check: impl FnMut(&str, &Run)) {
        for arch in isa::Isa::all() {
            let name = arch.name();
            eprintln!("conv_direct: checking {name}");
            check(name, &move |g, x, wt, go| run_on(arch, g, x, wt, go));
        }
        eprintln!("conv_direct: checking 16 emulated lanes");
        check("16 emulated lanes", &|g, x, wt, go| {
            run_on(On(pulp::Scalar512b), g, x, wt, go)
        });
    }

    /// Forward, input gradient and weight gradient against the f64 definition, on maps
    /// whose padded width does not divide the block and channel counts that leave partial
    /// blocks (odd output channels, fewer than a block), on every instruction set; the
    /// forward and input gradient have the same bits on all of them.
    #[test]
    fn matches_the_definition() {
        let mut first: Vec<(Vec<f32>, Vec<f32>)> = Vec::new();
        on_every_isa(|name, run| {
            for (i, &(n, cin, h, w, cout)) in [
                (3, 16, 28, 28, 16),
                (2, 1, 28, 28, 16),
                (2, 5, 17, 13, 3),
                (1, 7, 15, 20, 9),
                // Grouped weight gradient (2 samples per group, a last group of 1).
                (5, 32, 14, 14, 32),
                (3, 4, 14, 15, 5),
            ]
            .iter()
            .enumerate()
            {
                let g = geom(n, cin, h, w, cout);
                let x = values(n * g.in_len(), 11);
                let wt = values(g.weight_len(), 12);
                let go = values(n * g.out_len(), 13);
                let (y, dx, dw) = naive(&g, &x, &wt, &go);
                let (fy, fdx, fdw) = run(&g, &x, &wt, &go);
                close(&fy, &y, &format!("forward ({name})"), &g);
                close(&fdx, &dx, &format!("dx ({name})"), &g);
                close(&fdw, &dw, &format!("dw ({name})"), &g);
                match first.get(i) {
                    None => first.push((fy, fdx)),
                    Some((y0, dx0)) => {
                        assert!(y0 == &fy, "forward bits differ on {name} for {g:?}");
                        assert!(dx0 == &fdx, "dx bits differ on {name} for {g:?}");
                    }
                }
            }
        });
    }

    /// An empty batch: no outputs, no input gradient, a zero weight gradient (no panic).
    #[test]
    fn empty_batch() {
        let g = geom(0, 4, 14, 14, 4);
        let wt = values(g.weight_len(), 1);
        on_every_isa(|name, run| {
            let (y, dx, dw) = run(&g, &[], &wt, &[]);
            assert!(y.is_empty() && dx.is_empty(), "{name}");
            assert!(
                dw.len() == g.weight_len() && dw.iter().all(|&v| v == 0.0),
                "{name}"
            );
        });
    }

    /// The same bits at 1, 2 and 3 threads (samples independent; shares summed in order),
    /// on every instruction set.
    #[test]
    fn bit_identical_at_any_thread_count() {
        on_every_isa(|name, run| {
            for g in [geom(5, 16, 28, 28, 16), geom(7, 32, 14, 14, 32)] {
                let x = values(g.n * g.in_len(), 21);
                let wt = values(g.weight_len(), 22);
                let go = values(g.n * g.out_len(), 23);
                let at = |threads: usize| {
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .expect("pool")
                        .install(|| run(&g, &x, &wt, &go))
                };
                let one = at(1);
                for t in [2, 3] {
                    assert!(
                        at(t) == one,
                        "{t} threads differ from 1 on {name} for {g:?}"
                    );
                }
            }
        });
    }

    /// The layers the path is for, and that it is taken exactly where the CPU runs it
    /// fast (AVX-512); elsewhere those layers stay on im2col + GEMM.
    #[test]
    fn takes_thin_large_maps_only() {
        let yes = [
            geom(20, 16, 28, 28, 16),
            geom(20, 1, 28, 28, 16),
            geom(20, 32, 14, 14, 32),
        ];
        let no = [
            geom(20, 64, 28, 28, 64),
            geom(20, 16, 7, 7, 16),
            Geom {
                stride: 2,
                ..geom(20, 16, 28, 28, 16)
            },
        ];
        for g in &yes {
            assert!(fits(g), "{g:?}");
            assert_eq!(applies(g), available(), "{g:?}");
        }
        for g in &no {
            assert!(!fits(g) && !applies(g), "{g:?}");
        }
        if !available() {
            isa::say(&format!(
                "conv_direct: the path is not taken with {} (AVX-512 only); its kernels \
                 are still tested on every instruction set this CPU runs",
                isa::name()
            ));
        }
    }
}
