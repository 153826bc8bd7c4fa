//! 3 × 3, stride-1, "same" convolutions by Winograd's minimal filtering: forward, input
//! gradient (the same kind of convolution of the output gradient with the flipped,
//! transposed filters) and weight gradient, for two tile sizes, F(2 × 2, 3 × 3)
//! (`winograd_f2.rs`) and F(4 × 4, 3 × 3) (`winograd_f4.rs`).
//!
//! Why: ResNet-18 at width 64 spends about two thirds of a training step in the GEMM
//! micro-kernel, already near the core's peak (profile in `fl-job/TRAINING.md`), so only
//! fewer multiplications make it faster. F(m × m, 3 × 3) computes each m × m output tile from
//! an (m + 2)² input tile with (m + 2)² products per channel pair instead of 9m²: 2.25× fewer
//! for m = 2, 4× for m = 4. They run as (m + 2)² independent GEMMs `M[ξ] = U[ξ] · V[ξ]`
//! (`U` the transformed filters `[cout, cin]`, `V` the transformed input tiles
//! `[cin, tiles]`), then each tile is transformed back. The weight gradient is the same
//! product read the other way: `dU[ξ] = Σ_tiles dM[ξ] · V[ξ]ᵀ`, then `dW = Gᵀ · dU · G`.
//!
//! Every buffer keeps channels innermost (tiles `[ξ][tiles][cin]`, products
//! `[ξ][tiles][cout]`, filters column-major), so the tile transforms are vector operations
//! across channels and the GEMMs read their operands without repacking. Which layers take
//! which tile, if any, is [`choose`]'s cost model; the others stay im2col + GEMM.

use rayon::prelude::*;

use std::cell::RefCell;

use crate::gemm::{Mat, matmul_strided};
use crate::layout::{from_hwc, to_hwc};
use crate::scratch::{build, piece, sum_partials, take, with_local};
use crate::types::{Epilogue, Geom, flip_transpose, group_size};
mod f2;
mod f4;
mod variant;

use f2::F2;
use f4::F4;
use variant::Variant;

/// Transformed elements per channel pair of the largest tile, F(4 × 4, 3 × 3)'s 6 × 6.
const MAX_XI: usize = 36;

/// The tile sizes [`choose`] picks from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tile {
    /// F(2 × 2, 3 × 3).
    F2,
    /// F(4 × 4, 3 × 3).
    F4,
}

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

/// Which tile, if any, this geometry takes: dense 3 × 3, stride 1, padding 1, wide enough
/// channels, and enough pixels across the batch to amortise the filter transform.
pub(crate) fn choose(g: &Geom) -> Option<Tile> {
    let products = |m: usize| (m + 2) * (m + 2) * g.h.div_ceil(m) * g.w.div_ceil(m);
    let saving = |m: usize| (9 * g.h * g.w).saturating_sub(products(m)) * g.n;
    if let Some(forced) = forced() {
        return forced.filter(|_| shape_fits(g));
    }
    if !shape_fits(g) || g.cin < MIN_CHANNELS || g.cout < MIN_CHANNELS {
        return None;
    }
    if saving(4) >= saving(2) + F4_EXTRA && g.h >= F4_MIN_SIZE {
        return Some(Tile::F4);
    }
    (saving(2) >= MIN_SAVING).then_some(Tile::F2)
}

/// What F(4 × 4, 3 × 3) must save per channel pair beyond F(2 × 2, 3 × 3)'s: its filter
/// transform is 36/16 the size. Measured per layer (`conv::tests::layer_times`,
/// 2 threads, batch 20): ResNet-18 ×64's 28 × 28 stage 4.0 / 3.9 / 4.0 ms (forward / input
/// gradient / weight gradient, F2) → 2.8 / 2.9 / 2.7 (F4); at 14 × 14 F4 was no faster and
/// at 7 × 7 (2 × 2 tiles per sample, the batch in one group) twice as slow.
const F4_EXTRA: usize = 0;
/// Smallest map edge that takes F(4 × 4, 3 × 3) (see [`F4_EXTRA`]).
const F4_MIN_SIZE: usize = 28;

/// `FL_JOB_WINOGRAD` = `off`, `f2` or `f4` forces that choice on every 3 × 3 stride-1 layer
/// (read once), to measure one path against another; unset, [`choose`] decides.
fn forced() -> Option<Option<Tile>> {
    static FORCED: std::sync::OnceLock<Option<Option<Tile>>> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| match std::env::var("FL_JOB_WINOGRAD").ok()?.as_str() {
        "off" => Some(None),
        "f2" => Some(Some(Tile::F2)),
        "f4" => Some(Some(Tile::F4)),
        _ => None,
    })
}

/// Whether this geometry takes a Winograd path ([`choose`]).
pub(crate) fn applies(g: &Geom) -> bool {
    choose(g).is_some()
}

/// The geometries the transforms are written for, whatever the channel counts.
fn shape_fits(g: &Geom) -> bool {
    !g.depthwise && g.k == 3 && g.stride == 1 && g.pad == 1
}

/// `T[co][ξ][ci] = (G · w[co][ci] · Gᵀ)[ξ]` for `weight` `[cout, cin, 3, 3]`, in parallel
/// over `co`, reading and writing in order.
#[inline(never)]
fn transform_filters<V: Variant>(cout: usize, cin: usize, weight: &[f32]) -> Vec<f32> {
    let mut tmp = vec![0.0f32; V::XI * cout * cin];
    tmp.par_chunks_mut(V::XI * cin)
        .zip(weight.par_chunks(cin * 9))
        .for_each(|(u, wco)| {
            for (ci, w) in wco.chunks_exact(9).enumerate() {
                for (xi, val) in V::filter(w).into_iter().take(V::XI).enumerate() {
                    u[xi * cin + ci] = val;
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
fn transpose_filters<V: Variant>(cout: usize, cin: usize, tmp: &[f32]) -> Vec<f32> {
    const BLOCK: usize = 16;
    let mut u = vec![0.0f32; V::XI * cout * cin];
    u.par_chunks_mut(cin * cout)
        .enumerate()
        .for_each(|(xi, plane)| {
            for c0 in (0..cin).step_by(BLOCK) {
                for o0 in (0..cout).step_by(BLOCK) {
                    for ci in c0..(c0 + BLOCK).min(cin) {
                        for co in o0..(o0 + BLOCK).min(cout) {
                            plane[ci * cout + co] = tmp[(co * V::XI + xi) * cin + ci];
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
    start: [usize; MAX_XI],
    /// Distance between its columns (input channels).
    cs: usize,
}

/// The transformed filters of the input-gradient convolution, read out of the forward's
/// `T[co][ξ][ci]` with no pass of their own, for a tile whose points flipping permutes by
/// `p` ([`Variant::FLIP`]): `U'[a, b]` for the pair `(ci, co)` is `U[p(a), p(b)]` for
/// `(co, ci)`, and `T`'s rows already hold input channels contiguous.
fn backward_filters<V: Variant>(cin: usize, tmp: &[f32], p: [usize; 6]) -> Filters<'_> {
    Filters {
        data: tmp,
        start: std::array::from_fn(|xi| (p[(xi / V::A) % 6] * V::A + p[xi % V::A]) * cin),
        cs: V::XI * cin,
    }
}

/// Forward convolution by [`choose`]'s tile, with `epilogue` applied per output plane.
pub(crate) fn forward(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    match choose(g) {
        Some(Tile::F4) => forward_with::<F4>(g, x, weight, epilogue),
        _ => forward_with::<F2>(g, x, weight, epilogue),
    }
}

/// Input gradient by [`choose`]'s tile: `grad_out` `[n, cout, h, w]` → `[n, cin, h, w]`.
pub(crate) fn input_grad(g: &Geom, grad_out: &[f32], weight: &[f32]) -> Vec<f32> {
    match choose(g) {
        Some(Tile::F4) => input_grad_with::<F4>(g, grad_out, weight),
        _ => input_grad_with::<F2>(g, grad_out, weight),
    }
}

/// Weight gradient by [`choose`]'s tile.
pub(crate) fn weight_grad(g: &Geom, x: &[f32], grad_out: &[f32]) -> Vec<f32> {
    match choose(g) {
        Some(Tile::F4) => weight_grad_with::<F4>(g, x, grad_out),
        _ => weight_grad_with::<F2>(g, x, grad_out),
    }
}

/// Forward convolution with tile `V` for a geometry whose shape fits (whatever [`choose`]
/// would pick).
fn forward_with<V: Variant>(
    g: &Geom,
    x: &[f32],
    weight: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    assert!(shape_fits(g), "winograd: geometry {g:?}");
    let u = transpose_filters::<V>(
        g.cout,
        g.cin,
        &transform_filters::<V>(g.cout, g.cin, weight),
    );
    let filters = Filters {
        data: &u,
        start: std::array::from_fn(|xi| xi * g.cin * g.cout),
        cs: g.cout,
    };
    run::<V>(g, x, &filters, epilogue)
}

/// Input gradient with tile `V`.
fn input_grad_with<V: Variant>(g: &Geom, grad_out: &[f32], weight: &[f32]) -> Vec<f32> {
    assert!(shape_fits(g), "winograd: geometry {g:?}");
    let back = Geom {
        cin: g.cout,
        cout: g.cin,
        ..*g
    };
    match V::FLIP {
        Some(p) => {
            let tmp = transform_filters::<V>(g.cout, g.cin, weight);
            run::<V>(
                &back,
                grad_out,
                &backward_filters::<V>(g.cin, &tmp, p),
                None,
            )
        }
        None => forward_with::<V>(&back, grad_out, &flip_transpose(g, weight), None),
    }
}

/// A group's tiles: `th × tw` per sample (`per`), `t` in all.
struct Tiling {
    th: usize,
    tw: usize,
    per: usize,
    t: usize,
}

/// The tiling of the group of samples `xs`.
fn tiling<V: Variant>(g: &Geom, xs: &[f32]) -> Tiling {
    let (th, tw) = tiles::<V>(g);
    let per = th * tw;
    Tiling {
        th,
        tw,
        per,
        t: xs.len() / g.in_len() * per,
    }
}

/// Tiles per sample: `⌈h/m⌉ × ⌈w/m⌉`.
fn tiles<V: Variant>(g: &Geom) -> (usize, usize) {
    (g.h.div_ceil(V::M), g.w.div_ceil(V::M))
}

fn run<V: Variant>(
    g: &Geom,
    x: &[f32],
    u: &Filters<'_>,
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    assert_eq!(x.len(), g.n * g.in_len(), "winograd: input length");
    let (th, tw) = tiles::<V>(g);
    let group = group_size(g.n, th * tw);
    build(g.n * g.out_len(), group * g.out_len(), |i, out| {
        let xs = piece(x, i, group * g.in_len());
        with_local(&BUFFERS, |buf| {
            group_forward::<V>(g, xs, u, out, buf, epilogue)
        })
    })
}

thread_local! {
    static BUFFERS: RefCell<Buffers> = RefCell::new(Buffers::default());
}

/// Per-thread scratch, grown on first use and kept from call to call; everything read back is
/// written first.
#[derive(Default)]
struct Buffers {
    /// One sample's zero-bordered input, channels innermost: `(m·th + 2) × (m·tw + 2) × cin`.
    padded: Vec<f32>,
    /// Transformed input `[ξ][tiles][cin]`.
    v: Vec<f32>,
    /// Products `[ξ][tiles][cout]`.
    m: Vec<f32>,
    /// Half-transformed tiles, `ξ × channels`.
    half: Vec<f32>,
    /// One sample's output, channels innermost: `h × w × cout`.
    hwc: Vec<f32>,
    /// `cout` zeros: the output gradient past an odd edge.
    zero: Vec<f32>,
}

/// One group of samples. The transforms run across channels, which are innermost in every
/// buffer here, so each step is a vector operation `cin` or `cout` long (tile rows are only
/// 2–14 long); the input is turned channels-innermost on the way in and back on the way out.
#[inline(never)]
fn group_forward<V: Variant>(
    g: &Geom,
    xs: &[f32],
    u: &Filters<'_>,
    out: &mut [f32],
    buf: &mut Buffers,
    epilogue: Option<&Epilogue<'_>>,
) {
    let (cin, cout) = (g.cin, g.cout);
    let Tiling { th, tw, per, t } = tiling::<V>(g, xs);
    let plane = g.h * g.w;
    transform_inputs::<V>(g, xs, buf);
    let Buffers {
        v, m, half, hwc, ..
    } = buf;
    let v = &v[..V::XI * t * cin];
    let m = take(m, V::XI * t * cout);
    for xi in 0..V::XI {
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
                let (y0, x0) = (V::M * ty, V::M * tx);
                (V::OUTPUT_TILE)(m, t * cout, tile * cout, cout, half, g, y0, x0, hwc);
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

/// `buf.v` = the group's transformed input tiles, `[ξ][tiles][cin]`.
fn transform_inputs<V: Variant>(g: &Geom, xs: &[f32], buf: &mut Buffers) {
    let cin = g.cin;
    let Tiling { th, tw, per, t } = tiling::<V>(g, xs);
    let (ph, pw) = (V::M * th + 2, V::M * tw + 2);
    let padded = take(&mut buf.padded, ph * pw * cin);
    // The border (and the bottom/right overhang of sizes that are not a multiple of m)
    // stays zero; only the interior is rewritten per sample.
    padded.fill(0.0);
    let v = take(&mut buf.v, V::XI * t * cin);
    let half = take(&mut buf.half, V::XI * cin.max(g.cout));
    for (j, sample) in xs.chunks_exact(g.in_len()).enumerate() {
        to_hwc(sample, cin, g.w, 1, pw, padded);
        for ty in 0..th {
            for tx in 0..tw {
                let at = (j * per + ty * tw + tx) * cin;
                let (y0, x0) = (V::M * ty, V::M * tx);
                (V::INPUT_TILE)(padded, pw, cin, y0, x0, half, v, t * cin, at);
            }
        }
    }
}

/// Weight gradient with tile `V` for a geometry whose shape fits. Forward is
/// `Y = Aᵀ · Σ_ci (U ⊙ V) · A` per tile, so the gradient of `U[ξ]` is
/// `Σ_tiles (A · dY · Aᵀ)[ξ] · V[ξ]`, `XI` GEMMs whose inner dimension is the tiles, and
/// `dW = Gᵀ · dU · G`. The groups' shares of `dU` are summed in group order, so the result
/// does not depend on the thread count.
fn weight_grad_with<V: Variant>(g: &Geom, x: &[f32], grad_out: &[f32]) -> Vec<f32> {
    assert!(shape_fits(g), "winograd: geometry {g:?}");
    assert_eq!(x.len(), g.n * g.in_len(), "winograd: input length");
    assert_eq!(grad_out.len(), g.n * g.out_len(), "winograd: grad length");
    let (th, tw) = tiles::<V>(g);
    let group = group_size(g.n, th * tw);
    let shares: Vec<Option<Vec<f32>>> = x
        .par_chunks(group * g.in_len())
        .zip(grad_out.par_chunks(group * g.out_len()))
        .map(|(xs, gs)| with_local(&BUFFERS, |buf| Some(group_weight_grad::<V>(g, xs, gs, buf))))
        .collect();
    let du = sum_partials(shares, V::XI * g.cout * g.cin);
    // dW[co][ci] = Gᵀ · dU[·][co][ci] · G, in parallel over output channels.
    let plane = g.cout * g.cin;
    let mut dw = vec![0.0f32; g.cout * g.cin * 9];
    dw.par_chunks_mut(g.cin * 9)
        .enumerate()
        .for_each(|(co, dwc)| {
            for (ci, out) in dwc.chunks_exact_mut(9).enumerate() {
                out.copy_from_slice(&V::filter_grad(|xi| du[xi * plane + co * g.cin + ci]));
            }
        });
    dw
}

/// One group's share of `dU`, `[ξ][cout][cin]`.
#[inline(never)]
fn group_weight_grad<V: Variant>(
    g: &Geom,
    xs: &[f32],
    gouts: &[f32],
    buf: &mut Buffers,
) -> Vec<f32> {
    let (cin, cout) = (g.cin, g.cout);
    let Tiling { th, tw, per, t } = tiling::<V>(g, xs);
    let plane = g.h * g.w;
    transform_inputs::<V>(g, xs, buf);
    let Buffers {
        v,
        m,
        hwc,
        half,
        zero,
        ..
    } = buf;
    let v = &v[..V::XI * t * cin];
    // A · dY · Aᵀ per tile, across output channels, `[ξ][tiles][cout]`; pixels past the
    // map's edge had no output, so their gradient is zero.
    let dm = take(m, V::XI * t * cout);
    let hwc = take(hwc, plane * cout);
    let half = take(half, V::XI * cout);
    let zero = take(zero, cout);
    zero.fill(0.0);
    for (j, gj) in gouts.chunks_exact(g.out_len()).enumerate() {
        to_hwc(gj, cout, g.w, 0, g.w, hwc);
        for ty in 0..th {
            for tx in 0..tw {
                let at = (j * per + ty * tw + tx) * cout;
                let (y0, x0) = (V::M * ty, V::M * tx);
                (V::GRAD_TILE)(hwc, g, y0, x0, dm, t * cout, at, cout, half, zero);
            }
        }
    }
    let mut du = vec![0.0f32; V::XI * cout * cin];
    for xi in 0..V::XI {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{close, naive, same3x3, values};

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
            (2, 3, 9, 11, 4),
            (2, 3, 13, 6, 3),
        ]
        .iter()
        .enumerate()
        {
            let g = same3x3(n, cin, h, w, cout);
            let x = values(n * g.in_len(), seed as u64 * 7 + 1);
            let wt = values(g.weight_len(), seed as u64 * 7 + 2);
            let go = values(n * g.out_len(), seed as u64 * 7 + 3);
            let (out, dx, dw) = naive(&g, &x, &wt, &go);
            close(&forward_with::<F2>(&g, &x, &wt, None), &out, "F2 out", &g);
            close(&input_grad_with::<F2>(&g, &go, &wt), &dx, "F2 dx", &g);
            close(&weight_grad_with::<F2>(&g, &x, &go), &dw, "F2 dw", &g);
            close(&forward_with::<F4>(&g, &x, &wt, None), &out, "F4 out", &g);
            close(&input_grad_with::<F4>(&g, &go, &wt), &dx, "F4 dx", &g);
            close(&weight_grad_with::<F4>(&g, &x, &go), &dw, "F4 dw", &g);
        }
    }

    /// Which layers take which tile: ResNet-18's 28 × 28 stage at batch 20 F(4 × 4), its
    /// 14 × 14 and 7 × 7 stages F(2 × 2), not its 4 × 4 stage nor thin or strided layers, and
    /// the shapes the dispatcher's (`conv/mod.rs`) definition test uses.
    #[test]
    fn chooses_where_it_pays() {
        let g = |n, c, size| same3x3(n, c, size, size, c);
        assert_eq!(choose(&g(20, 64, 28)), Some(Tile::F4));
        assert_eq!(choose(&g(20, 128, 14)), Some(Tile::F2));
        assert_eq!(choose(&g(20, 256, 7)), Some(Tile::F2));
        assert_eq!(choose(&g(20, 512, 4)), None);
        assert_eq!(choose(&g(20, 16, 28)), None);
        assert_eq!(
            choose(&Geom {
                stride: 2,
                ..g(20, 64, 28)
            }),
            None
        );
        assert_eq!(
            choose(&Geom {
                cout: 40,
                ..g(3, 32, 14)
            }),
            Some(Tile::F2)
        );
        assert_eq!(
            choose(&Geom {
                w: 5,
                cin: 33,
                ..g(21, 32, 7)
            }),
            Some(Tile::F2)
        );
        assert_eq!(
            choose(&Geom {
                w: 29,
                cin: 34,
                ..g(2, 32, 30)
            }),
            Some(Tile::F4)
        );
        assert_eq!(
            choose(&Geom {
                cout: 33,
                ..g(2, 32, 28)
            }),
            Some(Tile::F4)
        );
    }
}
