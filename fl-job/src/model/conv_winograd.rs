//! 3 × 3, stride-1, "same" convolutions by Winograd's minimal filtering F(2 × 2, 3 × 3):
//! forward, and the input gradient (which is the same kind of convolution of the output
//! gradient with the flipped, transposed filters).
//!
//! Why: ResNet-18 at width 64 spends about two thirds of a training step in the GEMM
//! micro-kernel, already near the core's peak (profile in `fl-job/TRAINING.md`), so only
//! fewer multiplications make it faster. F(2 × 2, 3 × 3) computes each 2 × 2 output tile
//! from a 4 × 4 input tile with 16 products per channel pair instead of 36: 2.25× fewer,
//! as 16 independent GEMMs `M[ξ] = U[ξ] · V[ξ]` (`U` the transformed filters `[cout, cin]`,
//! `V` the transformed input tiles `[cin, tiles]`), then each tile transformed back. The
//! transforms have coefficients 0, ±½, ±1, so the result is within a few ulps of the
//! direct convolution's (tests against the f64 definition, 1e-5 relative).
//!
//! Every buffer keeps channels innermost (tiles `[16][tiles][cin]`, products
//! `[16][tiles][cout]`, filters column-major), so the tile transforms are vector operations
//! across channels and the GEMMs read their operands without repacking. Only layers where the
//! saving pays for transforming the filters take this path ([`applies`]); the weight gradient
//! stays im2col + GEMM.

use rayon::prelude::*;

use std::cell::RefCell;

use super::conv_kernels::{Epilogue, Geom, Mat, group_size, matmul_strided, take, with_local};
use super::layout::{from_hwc, to_hwc};
use super::simd::wide;

/// Transformed tile elements per channel: 4 × 4.
const XI: usize = 16;

/// Channels on both sides below which the 4 × 4 transforms cost more than the products they
/// save (the GEMMs are then too thin to run at speed). Measured on ResNet-18 at width 16:
/// slower with the first, row-vectorised transforms; with 16 allowed and today's transforms,
/// no difference outside this machine's noise, so the threshold stayed.
const MIN_CHANNELS: usize = 32;

/// Multiply-adds that Winograd must save per filter (channel pair) over the direct
/// convolution, across the batch, to pay for transforming that filter: the filter transform
/// measured about 1,900 multiply-add equivalents per pair here (it is memory-bound: the
/// transformed filters are 16/9 the size of the filters). ResNet-18's 7 × 7 stage at batch
/// 20 saves 3,700 and takes this path; its 4 × 4 stage saves 1,600 and does not.
const MIN_SAVING: usize = 2_500;

/// Whether this geometry takes the Winograd path: dense 3 × 3, stride 1, padding 1, wide
/// enough channels, and enough pixels across the batch to amortise the filter transform.
pub(crate) fn applies(g: &Geom) -> bool {
    let (th, tw) = tiles(g);
    let saving = (9 * g.h * g.w).saturating_sub(16 * th * tw) * g.n;
    shape_fits(g) && g.cin >= MIN_CHANNELS && g.cout >= MIN_CHANNELS && saving >= MIN_SAVING
}

/// The geometries the transforms are written for, whatever the channel counts.
fn shape_fits(g: &Geom) -> bool {
    !g.depthwise && g.k == 3 && g.stride == 1 && g.pad == 1
}

/// `T[co][ξ][ci] = (G · w[co][ci] · Gᵀ)[ξ]` for `weight` `[cout, cin, 3, 3]`, in parallel
/// over `co`, reading and writing in order.
#[inline(never)]
fn transform_filters(cout: usize, cin: usize, weight: &[f32]) -> Vec<f32> {
    let mut tmp = vec![0.0f32; XI * cout * cin];
    tmp.par_chunks_mut(XI * cin)
        .zip(weight.par_chunks(cin * 9))
        .for_each(|(u, wco)| {
            for (ci, w) in wco.chunks_exact(9).enumerate() {
                // Rows: G · w (4 × 3), G = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1].
                let mut t = [[0.0f32; 3]; 4];
                for c in 0..3 {
                    let (a, b, d) = (w[c], w[3 + c], w[6 + c]);
                    t[0][c] = a;
                    t[1][c] = 0.5 * (a + b + d);
                    t[2][c] = 0.5 * (a - b + d);
                    t[3][c] = d;
                }
                // Columns: (G · w) · Gᵀ (4 × 4).
                for (r, row) in t.iter().enumerate() {
                    let (a, b, d) = (row[0], row[1], row[2]);
                    let v = [a, 0.5 * (a + b + d), 0.5 * (a - b + d), d];
                    for (c, val) in v.into_iter().enumerate() {
                        u[(r * 4 + c) * cin + ci] = val;
                    }
                }
            }
        });
    tmp
}

/// `U[ξ][ci][co]` from [`transform_filters`]' `T[co][ξ][ci]`: for each `ξ` a column-major
/// `[cout, cin]` matrix, which the GEMM reads without repacking (read row-major from `T`,
/// the filters were repacked for every group: 30 % of an inference). A blocked transpose,
/// in parallel over `ξ`.
#[inline(never)]
fn transpose_filters(cout: usize, cin: usize, tmp: &[f32]) -> Vec<f32> {
    const BLOCK: usize = 16;
    let mut u = vec![0.0f32; XI * cout * cin];
    u.par_chunks_mut(cin * cout)
        .enumerate()
        .for_each(|(xi, plane)| {
            for c0 in (0..cin).step_by(BLOCK) {
                for o0 in (0..cout).step_by(BLOCK) {
                    for ci in c0..(c0 + BLOCK).min(cin) {
                        for co in o0..(o0 + BLOCK).min(cout) {
                            plane[ci * cout + co] = tmp[(co * XI + xi) * cin + ci];
                        }
                    }
                }
            }
        });
    u
}

/// How the GEMM for each `ξ` finds its `[cout, cin]` filter matrix (column-major: output
/// channels contiguous) in a transformed-filter buffer.
struct Filters<'a> {
    data: &'a [f32],
    /// Where matrix `ξ` starts.
    start: [usize; XI],
    /// Distance between its columns (input channels).
    cs: usize,
}

/// The transformed filters of the input-gradient convolution, read out of the forward's
/// `T[co][ξ][ci]` with no pass of their own. Its filters are the forward's flipped and
/// transposed, and flipping a 3 × 3 filter reverses the columns of `G`, which swaps rows 0
/// and 3 of `G · w`: so `U'[a, b]` for the pair `(ci, co)` is `U[p(a), p(b)]` for `(co, ci)`,
/// `p = (3, 1, 2, 0)`, and `T`'s rows already hold input channels contiguous.
fn backward_filters(cin: usize, tmp: &[f32]) -> Filters<'_> {
    const P: [usize; 4] = [3, 1, 2, 0];
    Filters {
        data: tmp,
        start: std::array::from_fn(|xi| (P[xi / 4] * 4 + P[xi % 4]) * cin),
        cs: XI * cin,
    }
}

/// Forward convolution for a geometry whose shape fits (see [`applies`] for when it pays),
/// with `epilogue` applied per output plane.
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    assert!(shape_fits(g), "winograd: geometry {g:?}");
    let u = transpose_filters(g.cout, g.cin, &transform_filters(g.cout, g.cin, weight));
    let filters = Filters {
        data: &u,
        start: std::array::from_fn(|xi| xi * g.cin * g.cout),
        cs: g.cout,
    };
    run(g, x, &filters, epilogue)
}

/// Input gradient of such a convolution: `grad_out` `[n, cout, h, w]` → `[n, cin, h, w]`.
pub(crate) fn input_grad(g: &Geom, grad_out: &[f32], weight: &[f32]) -> Vec<f32> {
    assert!(shape_fits(g), "winograd: geometry {g:?}");
    let tmp = transform_filters(g.cout, g.cin, weight);
    let back = Geom {
        cin: g.cout,
        cout: g.cin,
        ..*g
    };
    run(&back, grad_out, &backward_filters(g.cin, &tmp), None)
}

/// A group's tiles: `th × tw` per sample (`per`), `t` in all.
struct Tiling {
    th: usize,
    tw: usize,
    per: usize,
    t: usize,
}

/// The tiling of the group of samples `xs`.
fn tiling(g: &Geom, xs: &[f32]) -> Tiling {
    let (th, tw) = tiles(g);
    let per = th * tw;
    Tiling {
        th,
        tw,
        per,
        t: xs.len() / g.in_len() * per,
    }
}

/// Tiles per sample: `⌈h/2⌉ × ⌈w/2⌉`.
fn tiles(g: &Geom) -> (usize, usize) {
    (g.h.div_ceil(2), g.w.div_ceil(2))
}

fn run(g: &Geom, x: &[f32], u: &Filters<'_>, epilogue: Option<&Epilogue<'_>>) -> Vec<f32> {
    assert_eq!(x.len(), g.n * g.in_len(), "winograd: input length");
    let (th, tw) = tiles(g);
    let group = group_size(g.n, th * tw);
    let mut out = vec![0.0f32; g.n * g.out_len()];
    out.par_chunks_mut(group * g.out_len())
        .zip(x.par_chunks(group * g.in_len()))
        .for_each(|(out, xs)| {
            with_local(&BUFFERS, |buf| group_forward(g, xs, u, out, buf, epilogue))
        });
    out
}

thread_local! {
    static BUFFERS: RefCell<Buffers> = RefCell::new(Buffers::default());
}

/// Per-thread scratch, grown on first use and kept from call to call; everything read back is
/// written first.
#[derive(Default)]
struct Buffers {
    /// One sample's zero-bordered input, channels innermost: `(2·th + 2) × (2·tw + 2) × cin`.
    padded: Vec<f32>,
    /// Transformed input `[16][tiles][cin]`.
    v: Vec<f32>,
    /// Products `[16][tiles][cout]`.
    m: Vec<f32>,
    /// Half-transformed tile rows, `16 × channels`.
    half: Vec<f32>,
    /// One sample's output, channels innermost: `h × w × cout`.
    hwc: Vec<f32>,
}

/// One group of samples. The transforms run across channels, which are innermost in every
/// buffer here, so each step is a vector operation `cin` or `cout` long (tile rows are only
/// 2–14 long); the input is turned channels-innermost on the way in and back on the way out.
#[inline(never)]
fn group_forward(
    g: &Geom,
    xs: &[f32],
    u: &Filters<'_>,
    out: &mut [f32],
    buf: &mut Buffers,
    epilogue: Option<&Epilogue<'_>>,
) {
    let (cin, cout) = (g.cin, g.cout);
    let Tiling { th, tw, per, t } = tiling(g, xs);
    let plane = g.h * g.w;
    transform_inputs(g, xs, buf);
    let Buffers {
        v, m, half, hwc, ..
    } = buf;
    let v = &v[..XI * t * cin];
    let m = take(m, XI * t * cout);
    for xi in 0..XI {
        // M[ξ] [cout, t] = U[ξ] [cout, cin] · V[ξ] [cin, t], all three column-major (channels
        // innermost), stored `[t][cout]`.
        let a = Mat {
            data: &u.data[u.start[xi]..],
            rows: cout,
            cols: cin,
            rs: 1,
            cs: u.cs,
        };
        let b = Mat {
            data: &v[xi * t * cin..(xi + 1) * t * cin],
            rows: cin,
            cols: t,
            rs: 1,
            cs: cin,
        };
        let dst = &mut m[xi * t * cout..(xi + 1) * t * cout];
        matmul_strided(dst, 1, cout, a, b, false);
    }
    let hwc = take(hwc, plane * cout);
    for (j, o) in out.chunks_exact_mut(g.out_len()).enumerate() {
        for ty in 0..th {
            for tx in 0..tw {
                let tile = j * per + ty * tw + tx;
                output_tile(m, t * cout, tile * cout, cout, half, g, 2 * ty, 2 * tx, hwc);
            }
        }
        from_hwc(hwc, cout, g.w, 0, g.w, o);
        if let Some(e) = epilogue {
            for (co, dst) in o.chunks_exact_mut(plane).enumerate() {
                e.apply(co, dst);
            }
        }
    }
}

/// `buf.v` = the group's transformed input tiles, `[16][tiles][cin]`.
fn transform_inputs(g: &Geom, xs: &[f32], buf: &mut Buffers) {
    let cin = g.cin;
    let Tiling { th, tw, per, t } = tiling(g, xs);
    let (ph, pw) = (2 * th + 2, 2 * tw + 2);
    let padded = take(&mut buf.padded, ph * pw * cin);
    // The border (and the bottom/right overhang of odd sizes) stays zero; only the interior
    // is rewritten per sample.
    padded.fill(0.0);
    let v = take(&mut buf.v, XI * t * cin);
    let half = take(&mut buf.half, XI * cin.max(g.cout));
    for (j, sample) in xs.chunks_exact(g.in_len()).enumerate() {
        to_hwc(sample, cin, g.w, 1, pw, padded);
        for ty in 0..th {
            for tx in 0..tw {
                let tile = j * per + ty * tw + tx;
                let at = tile * cin;
                input_tile(padded, pw, cin, 2 * ty, 2 * tx, half, v, t * cin, at);
            }
        }
    }
}

/// Weight gradient of a convolution whose shape fits. Forward is `Y = Aᵀ · Σ_ci (U ⊙ V) · A`
/// per tile, so the gradient of `U[ξ]` is `Σ_tiles (A · dY · Aᵀ)[ξ] · V[ξ]`, 16 GEMMs whose
/// inner dimension is the tiles (2.25× fewer products than im2col's), and
/// `dW = Gᵀ · dU · G`. The groups' shares of `dU` are summed in group order, so the result
/// does not depend on the thread count.
pub(crate) fn weight_grad(g: &Geom, x: &[f32], grad_out: &[f32]) -> Vec<f32> {
    assert!(shape_fits(g), "winograd: geometry {g:?}");
    assert_eq!(x.len(), g.n * g.in_len(), "winograd: input length");
    assert_eq!(grad_out.len(), g.n * g.out_len(), "winograd: grad length");
    let (th, tw) = tiles(g);
    let group = group_size(g.n, th * tw);
    let shares: Vec<Vec<f32>> = x
        .par_chunks(group * g.in_len())
        .zip(grad_out.par_chunks(group * g.out_len()))
        .map(|(xs, gs)| with_local(&BUFFERS, |buf| group_weight_grad(g, xs, gs, buf)))
        .collect();
    let mut shares = shares.into_iter();
    let mut du = shares
        .next()
        .unwrap_or_else(|| vec![0.0; XI * g.cout * g.cin]);
    for s in shares {
        for (d, v) in du.iter_mut().zip(&s) {
            *d += *v;
        }
    }
    // dW[co][ci] = Gᵀ · dU[·][co][ci] · G, in parallel over output channels.
    let plane = g.cout * g.cin;
    let mut dw = vec![0.0f32; g.cout * g.cin * 9];
    dw.par_chunks_mut(g.cin * 9)
        .enumerate()
        .for_each(|(co, dwc)| {
            for (ci, out) in dwc.chunks_exact_mut(9).enumerate() {
                let e = |xi: usize| du[xi * plane + co * g.cin + ci];
                // Gᵀ = [1 ½ ½ 0; 0 ½ −½ 0; 0 ½ ½ 1], down the rows, then across.
                let cols: [[f32; 3]; 4] = std::array::from_fn(|c| {
                    let (a, b, d, f) = (e(c), e(4 + c), e(8 + c), e(12 + c));
                    [a + 0.5 * (b + d), 0.5 * (b - d), 0.5 * (b + d) + f]
                });
                for i in 0..3 {
                    let (a, b, d, f) = (cols[0][i], cols[1][i], cols[2][i], cols[3][i]);
                    out[i * 3] = a + 0.5 * (b + d);
                    out[i * 3 + 1] = 0.5 * (b - d);
                    out[i * 3 + 2] = 0.5 * (b + d) + f;
                }
            }
        });
    dw
}

/// One group's share of `dU`, `[16][cout][cin]`.
#[inline(never)]
fn group_weight_grad(g: &Geom, xs: &[f32], gouts: &[f32], buf: &mut Buffers) -> Vec<f32> {
    let (cin, cout) = (g.cin, g.cout);
    let Tiling { th, tw, per, t } = tiling(g, xs);
    let plane = g.h * g.w;
    transform_inputs(g, xs, buf);
    let Buffers {
        v, m, hwc, half, ..
    } = buf;
    let v = &v[..XI * t * cin];
    // A · dY · Aᵀ per tile, across output channels, `[16][tiles][cout]`; pixels past an odd
    // edge had no output, so their gradient is zero.
    let dm = take(m, XI * t * cout);
    let hwc = take(hwc, plane * cout);
    // Rows 0-7: the half-transformed tile; 8: zeros, the gradient past an odd edge.
    let half = take(half, 9 * cout);
    half[8 * cout..].fill(0.0);
    for (j, gj) in gouts.chunks_exact(g.out_len()).enumerate() {
        to_hwc(gj, cout, g.w, 0, g.w, hwc);
        for ty in 0..th {
            for tx in 0..tw {
                let tile = j * per + ty * tw + tx;
                grad_tile(
                    hwc,
                    g,
                    2 * ty,
                    2 * tx,
                    dm,
                    t * cout,
                    tile * cout,
                    cout,
                    half,
                );
            }
        }
    }
    let mut du = vec![0.0f32; XI * cout * cin];
    for xi in 0..XI {
        // dU[ξ] [cout, cin] = dM[ξ] [cout, t] · V[ξ]ᵀ [t, cin].
        let a = Mat {
            data: &dm[xi * t * cout..(xi + 1) * t * cout],
            rows: cout,
            cols: t,
            rs: 1,
            cs: cout,
        };
        let b = Mat {
            data: &v[xi * t * cin..(xi + 1) * t * cin],
            rows: t,
            cols: cin,
            rs: cin,
            cs: 1,
        };
        matmul_strided(
            &mut du[xi * cout * cin..(xi + 1) * cout * cin],
            cin,
            1,
            a,
            b,
            false,
        );
    }
    du
}

wide! {
    /// `dM[ξ][tile] = (A · dY · Aᵀ)[ξ]` for the 2 × 2 output-gradient tile at `(y0, x0)` (zero
    /// past the map's edge), across `c` channels; `A = [1 0; 1 1; 1 −1; 0 −1]`. `half` holds
    /// eight scratch vectors and then a zero one.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn grad_tile(
        hwc: &[f32],
        g: &Geom,
        y0: usize,
        x0: usize,
        dm: &mut [f32],
        stride: usize,
        at: usize,
        c: usize,
        half: &mut [f32],
    ) {
        let (rows, zero) = half.split_at_mut(8 * c);
        let zero = &zero[..c];
        let pixel = |y: usize, x: usize| {
            if y < g.h && x < g.w {
                &hwc[(y * g.w + x) * c..(y * g.w + x + 1) * c]
            } else {
                zero
            }
        };
        // A · dY: rows `(a, a + b, a − b, −b)` of each column, `a`, `b` its two pixels.
        for col in 0..2 {
            let (a, b) = (pixel(y0, x0 + col), pixel(y0 + 1, x0 + col));
            let r = |i: usize| (col * 4 + i) * c;
            rows[r(0)..r(0) + c].copy_from_slice(a);
            add(&mut rows[r(1)..r(1) + c], a, b);
            sub(&mut rows[r(2)..r(2) + c], a, b);
            for (d, v) in rows[r(3)..r(3) + c].iter_mut().zip(b) {
                *d = -*v;
            }
        }
        // (A · dY) · Aᵀ: the same combination across each row.
        for r in 0..4 {
            let (l, q) = (&rows[r * c..(r + 1) * c], &rows[(4 + r) * c..(5 + r) * c]);
            let dst = |col: usize| (r * 4 + col) * stride + at;
            dm[dst(0)..dst(0) + c].copy_from_slice(l);
            add(&mut dm[dst(1)..dst(1) + c], l, q);
            sub(&mut dm[dst(2)..dst(2) + c], l, q);
            for (d, v) in dm[dst(3)..dst(3) + c].iter_mut().zip(q) {
                *d = -*v;
            }
        }
    }
}

/// `dst = a − b` over whole channel vectors.
#[inline(always)]
fn sub(dst: &mut [f32], a: &[f32], b: &[f32]) {
    for ((d, x), y) in dst.iter_mut().zip(a).zip(b) {
        *d = x - y;
    }
}

/// `dst = a + b` over whole channel vectors.
#[inline(always)]
fn add(dst: &mut [f32], a: &[f32], b: &[f32]) {
    for ((d, x), y) in dst.iter_mut().zip(a).zip(b) {
        *d = x + y;
    }
}

wide! {
    /// `V[ξ][tile] = (Bᵀ · d · B)[ξ]` for the 4 × 4 tile `d` of the padded input at row `y0`,
    /// column `x0`, across all channels; `Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1]`. The 16
    /// planes of `V` are `stride` apart; this tile's channels start at `at` in each.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn input_tile(
        p: &[f32],
        pw: usize,
        c: usize,
        y0: usize,
        x0: usize,
        half: &mut [f32],
        v: &mut [f32],
        stride: usize,
        at: usize,
    ) {
        let d = |r: usize, col: usize| {
            let i = ((y0 + r) * pw + x0 + col) * c;
            &p[i..i + c]
        };
        // Bᵀ · d: four rows per column, `half[(row·4 + col)·c ..]`.
        for col in 0..4 {
            let (d0, d1, d2, d3) = (d(0, col), d(1, col), d(2, col), d(3, col));
            let h = |row: usize| (row * 4 + col) * c;
            sub(&mut half[h(0)..h(0) + c], d0, d2);
            add(&mut half[h(1)..h(1) + c], d1, d2);
            sub(&mut half[h(2)..h(2) + c], d2, d1);
            sub(&mut half[h(3)..h(3) + c], d1, d3);
        }
        // (Bᵀ · d) · B along each row.
        for row in 0..4 {
            let q = |col: usize| &half[(row * 4 + col) * c..(row * 4 + col + 1) * c];
            let (q0, q1, q2, q3) = (q(0), q(1), q(2), q(3));
            let dst = |col: usize| (row * 4 + col) * stride + at;
            let (v0, rest) = v.split_at_mut(dst(1));
            sub(&mut v0[dst(0)..dst(0) + c], q0, q2);
            let (v1, rest) = rest.split_at_mut(dst(2) - dst(1));
            add(&mut v1[..c], q1, q2);
            let (v2, v3) = rest.split_at_mut(dst(3) - dst(2));
            sub(&mut v2[..c], q2, q1);
            sub(&mut v3[..c], q1, q3);
        }
    }
}

wide! {
    /// Output pixels `(y0 … y0 + 1, x0 … x0 + 1)` (those inside the map) from one tile's
    /// products, across all output channels: `Aᵀ · M · A`, `Aᵀ = [1 1 1 0; 0 1 −1 −1]`,
    /// written channels-innermost into `hwc`.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn output_tile(
        m: &[f32],
        stride: usize,
        at: usize,
        c: usize,
        half: &mut [f32],
        g: &Geom,
        y0: usize,
        x0: usize,
        hwc: &mut [f32],
    ) {
        let e = |xi: usize| &m[xi * stride + at..xi * stride + at + c];
        // Aᵀ · M: two rows of four, `half[(row·4 + col)·c ..]`.
        for col in 0..4 {
            let (m0, m1, m2, m3) = (e(col), e(4 + col), e(8 + col), e(12 + col));
            let (top, bottom) = half.split_at_mut(4 * c);
            let top = &mut top[col * c..(col + 1) * c];
            let bottom = &mut bottom[col * c..(col + 1) * c];
            for i in 0..c {
                top[i] = m0[i] + m1[i] + m2[i];
                bottom[i] = m1[i] - m2[i] - m3[i];
            }
        }
        for row in 0..2 {
            let y = y0 + row;
            if y >= g.h {
                continue;
            }
            let q = |col: usize| &half[(row * 4 + col) * c..(row * 4 + col + 1) * c];
            let (q0, q1, q2, q3) = (q(0), q(1), q(2), q(3));
            let left = (y * g.w + x0) * c;
            for (i, d) in hwc[left..left + c].iter_mut().enumerate() {
                *d = q0[i] + q1[i] + q2[i];
            }
            if x0 + 1 < g.w {
                let right = left + c;
                for (i, d) in hwc[right..right + c].iter_mut().enumerate() {
                    *d = q1[i] - q2[i] - q3[i];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::conv_kernels::tests::{close, naive, values};

    /// Forward and input gradient against the f64 definition (1e-5 relative to the largest
    /// value) on small channel counts, which [`applies`] would send elsewhere: odd and even,
    /// square and not, down to 1 × 1 and 1 × 2 maps.
    #[test]
    fn matches_the_definition() {
        for (seed, &(n, cin, h, w, cout)) in [
            (2, 3, 6, 6, 4),
            (3, 2, 7, 7, 5),
            (2, 4, 5, 8, 3),
            (2, 3, 2, 2, 2),
            (1, 2, 1, 1, 3),
            (3, 2, 1, 2, 2),
            (20, 5, 4, 4, 6),
        ]
        .iter()
        .enumerate()
        {
            let g = Geom {
                n,
                cin,
                h,
                w,
                cout,
                k: 3,
                stride: 1,
                pad: 1,
                depthwise: false,
            };
            let x = values(n * g.in_len(), seed as u64 * 7 + 1);
            let wt = values(g.weight_len(), seed as u64 * 7 + 2);
            let go = values(n * g.out_len(), seed as u64 * 7 + 3);
            let (out, dx, dw) = naive(&g, &x, &wt, &go);
            close(&forward(&g, &x, &wt, None), &out, "winograd out", &g);
            close(&input_grad(&g, &go, &wt), &dx, "winograd dx", &g);
            close(&weight_grad(&g, &x, &go), &dw, "winograd dw", &g);
        }
    }

    /// Which layers take the path: ResNet-18's 28 × 28 to 7 × 7 stages at batch 20, not its
    /// 4 × 4 stage nor thin layers, and the shapes `conv_kernels`' definition test uses.
    #[test]
    fn applies_where_it_pays() {
        let g = |n, c, size| Geom {
            n,
            cin: c,
            h: size,
            w: size,
            cout: c,
            k: 3,
            stride: 1,
            pad: 1,
            depthwise: false,
        };
        assert!(applies(&g(20, 64, 28)));
        assert!(applies(&g(20, 128, 14)));
        assert!(applies(&g(20, 256, 7)));
        assert!(!applies(&g(20, 512, 4)));
        assert!(!applies(&g(20, 16, 28)));
        assert!(!applies(&Geom {
            stride: 2,
            ..g(20, 64, 28)
        }));
        assert!(applies(&Geom {
            cout: 40,
            ..g(3, 32, 14)
        }));
        assert!(applies(&Geom {
            w: 5,
            cin: 33,
            ..g(21, 32, 7)
        }));
    }
}
