//! The tile transforms of Winograd's F(4 × 4, 3 × 3) (`conv_winograd.rs` runs them): a
//! 6 × 6 input tile and 3 × 3 filter give a 4 × 4 output tile with 36 products per channel
//! pair instead of 144 (F(2 × 2, 3 × 3) needs 64 for the same outputs), and the transformed
//! tiles are 36 / 16 floats per output pixel instead of 16 / 4, so a layer also moves less
//! memory. The points are 0, ±1, ±2, ∞ (Lavin & Gray, 2016):
//!
//! ```text
//! Bᵀ = [4  0 −5  0 1 0]    G = [ 1/4     0    0 ]    Aᵀ = [1 1  1 1  1 0]
//!      [0 −4 −4  1 1 0]        [−1/6  −1/6 −1/6 ]         [0 1 −1 2 −2 0]
//!      [0  4 −4 −1 1 0]        [−1/6   1/6 −1/6 ]         [0 1  1 4  4 0]
//!      [0 −2 −1  2 1 0]        [1/24  1/12  1/6 ]         [0 1 −1 8 −8 1]
//!      [0  2 −1 −2 1 0]        [1/24 −1/12  1/6 ]
//!      [0  4  0 −5 0 1]        [   0     0    1 ]
//! ```
//!
//! The larger coefficients cost accuracy: about 1e-6 relative to the largest output on
//! random inputs, against a few ulps for F(2 × 2, 3 × 3) (tests in `conv_winograd.rs`). Every
//! function works on whole channel vectors (channels innermost); each output vector is one
//! [`lin`] call, whose `&mut` destination the compiler knows aliases nothing it reads, so it
//! vectorises without run-time overlap checks.

use crate::conv::winograd::variant::{GradTile, InputTile, OutputTile, Variant};
use crate::simd::{lin, wide};
use crate::types::Geom;

/// F(4 × 4, 3 × 3).
pub(crate) struct F4;

impl Variant for F4 {
    const M: usize = 4;
    /// Flipping a filter maps the point p to 1/p, and ±2 to ±½, which are not points: the
    /// input gradient transforms the flipped filters itself.
    const FLIP: Option<[usize; 6]> = None;

    #[inline(always)]
    fn filter(w: &[f32]) -> [f32; 36] {
        let g = |a: f32, b: f32, c: f32| -> [f32; 6] {
            [
                a / 4.0,
                -(a + b + c) / 6.0,
                -(a - b + c) / 6.0,
                a / 24.0 + b / 12.0 + c / 6.0,
                a / 24.0 - b / 12.0 + c / 6.0,
                c,
            ]
        };
        // G · w down each filter column, then (G · w) · Gᵀ across each row.
        let cols: [[f32; 6]; 3] = std::array::from_fn(|c| g(w[c], w[3 + c], w[6 + c]));
        let mut u = [0.0f32; 36];
        for r in 0..6 {
            u[r * 6..r * 6 + 6].copy_from_slice(&g(cols[0][r], cols[1][r], cols[2][r]));
        }
        u
    }

    #[inline(always)]
    fn filter_grad(e: impl Fn(usize) -> f32) -> [f32; 9] {
        // Gᵀ applied to six values.
        let gt = |u: [f32; 6]| -> [f32; 3] {
            [
                u[0] / 4.0 - u[1] / 6.0 - u[2] / 6.0 + u[3] / 24.0 + u[4] / 24.0,
                -u[1] / 6.0 + u[2] / 6.0 + u[3] / 12.0 - u[4] / 12.0,
                -u[1] / 6.0 - u[2] / 6.0 + u[3] / 6.0 + u[4] / 6.0 + u[5],
            ]
        };
        // Gᵀ · dU down the columns, then across the rows.
        let cols: [[f32; 3]; 6] =
            std::array::from_fn(|c| gt(std::array::from_fn(|r| e(r * 6 + c))));
        let mut out = [0.0f32; 9];
        for i in 0..3 {
            out[i * 3..i * 3 + 3].copy_from_slice(&gt(std::array::from_fn(|c| cols[c][i])));
        }
        out
    }

    const INPUT_TILE: InputTile = input_tile;
    const OUTPUT_TILE: OutputTile = output_tile;
    const GRAD_TILE: GradTile = grad_tile;
}

/// Writes `Bᵀ · x` for six vectors: row `r` to `dst[off(r)..]`, if `off` gives a place.
#[inline(always)]
fn bt_into(x: [&[f32]; 6], dst: &mut [f32], off: impl Fn(usize) -> Option<usize>) {
    let [d0, d1, d2, d3, d4, d5] = x;
    let c = d0.len();
    macro_rules! put {
        ($r:expr, $terms:expr) => {
            if let Some(o) = off($r) {
                lin(&mut dst[o..o + c], $terms);
            }
        };
    }
    put!(0, [(d0, 4.0), (d2, -5.0), (d4, 1.0)]);
    put!(1, [(d1, -4.0), (d2, -4.0), (d3, 1.0), (d4, 1.0)]);
    put!(2, [(d1, 4.0), (d2, -4.0), (d3, -1.0), (d4, 1.0)]);
    put!(3, [(d1, -2.0), (d2, -1.0), (d3, 2.0), (d4, 1.0)]);
    put!(4, [(d1, 2.0), (d2, -1.0), (d3, -2.0), (d4, 1.0)]);
    put!(5, [(d1, 4.0), (d3, -5.0), (d5, 1.0)]);
}

wide! {
    /// `V[ξ][tile] = (Bᵀ · d · B)[ξ]` for the 6 × 6 tile `d` of the padded input at row `y0`,
    /// column `x0`, across all channels. The 36 planes of `V` are `stride` apart; this
    /// tile's channels start at `at` in each. `half` holds 36 scratch vectors.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(crate) fn input_tile(
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
        // Bᵀ · d down each column: `half[(row·6 + col)·c ..]`.
        for col in 0..6 {
            let x = std::array::from_fn(|r| d(r, col));
            bt_into(x, half, |row| Some((row * 6 + col) * c));
        }
        // (Bᵀ · d) · B along each row.
        for row in 0..6 {
            let q = |col: usize| &half[(row * 6 + col) * c..(row * 6 + col + 1) * c];
            bt_into(std::array::from_fn(q), v, |col| {
                Some((row * 6 + col) * stride + at)
            });
        }
    }
}

/// Writes `Aᵀ · x` for six vectors: row `r` to `dst[off(r)..]`, if `off` gives a place.
#[inline(always)]
fn at_into(x: [&[f32]; 6], dst: &mut [f32], off: impl Fn(usize) -> Option<usize>) {
    let [m0, m1, m2, m3, m4, m5] = x;
    let c = m0.len();
    macro_rules! put {
        ($r:expr, $terms:expr) => {
            if let Some(o) = off($r) {
                lin(&mut dst[o..o + c], $terms);
            }
        };
    }
    put!(0, [(m0, 1.0), (m1, 1.0), (m2, 1.0), (m3, 1.0), (m4, 1.0)]);
    put!(1, [(m1, 1.0), (m2, -1.0), (m3, 2.0), (m4, -2.0)]);
    put!(2, [(m1, 1.0), (m2, 1.0), (m3, 4.0), (m4, 4.0)]);
    put!(3, [(m1, 1.0), (m2, -1.0), (m3, 8.0), (m4, -8.0), (m5, 1.0)]);
}

wide! {
    /// Output pixels `(y0 … y0 + 3, x0 … x0 + 3)` (those inside the map) from one tile's
    /// products, across all output channels: `Aᵀ · M · A`, written channels-innermost into
    /// `hwc`. `half` holds 24 scratch vectors.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(crate) fn output_tile(
        m: &[f32],
        stride: usize,
        at0: usize,
        c: usize,
        half: &mut [f32],
        g: &Geom,
        y0: usize,
        x0: usize,
        hwc: &mut [f32],
    ) {
        let e = |xi: usize| &m[xi * stride + at0..xi * stride + at0 + c];
        // Aᵀ · M down each column: `half[(row·6 + col)·c ..]`, four rows.
        for col in 0..6 {
            let x = std::array::from_fn(|r| e(r * 6 + col));
            at_into(x, half, |row| Some((row * 6 + col) * c));
        }
        // (Aᵀ · M) · A along each row, for the pixels inside the map.
        for row in 0..4 {
            let y = y0 + row;
            if y >= g.h {
                break;
            }
            let q = |col: usize| &half[(row * 6 + col) * c..(row * 6 + col + 1) * c];
            at_into(std::array::from_fn(q), hwc, |k| {
                (x0 + k < g.w).then(|| (y * g.w + x0 + k) * c)
            });
        }
    }
}

/// Writes `A · y` for four vectors, `A = (Aᵀ)ᵀ`: row `r` to `dst[off(r)..]`.
#[inline(always)]
fn a_into(y: [&[f32]; 4], dst: &mut [f32], off: impl Fn(usize) -> usize) {
    let [y0, y1, y2, y3] = y;
    let c = y0.len();
    macro_rules! put {
        ($r:expr) => {{
            let o = off($r);
            &mut dst[o..o + c]
        }};
    }
    put!(0).copy_from_slice(y0);
    lin(put!(1), [(y0, 1.0), (y1, 1.0), (y2, 1.0), (y3, 1.0)]);
    lin(put!(2), [(y0, 1.0), (y1, -1.0), (y2, 1.0), (y3, -1.0)]);
    lin(put!(3), [(y0, 1.0), (y1, 2.0), (y2, 4.0), (y3, 8.0)]);
    lin(put!(4), [(y0, 1.0), (y1, -2.0), (y2, 4.0), (y3, -8.0)]);
    put!(5).copy_from_slice(y3);
}

wide! {
    /// `dM[ξ][tile] = (A · dY · Aᵀ)[ξ]` for the 4 × 4 output-gradient tile at `(y0, x0)`
    /// (zero past the map's edge: `zero` is `c` zeros), across `c` channels. `half` holds 24
    /// scratch vectors.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(crate) fn grad_tile(
        hwc: &[f32],
        g: &Geom,
        y0: usize,
        x0: usize,
        dm: &mut [f32],
        stride: usize,
        at0: usize,
        c: usize,
        half: &mut [f32],
        zero: &[f32],
    ) {
        let pixel = |y: usize, x: usize| {
            if y < g.h && x < g.w {
                &hwc[(y * g.w + x) * c..(y * g.w + x + 1) * c]
            } else {
                &zero[..c]
            }
        };
        // A · dY down each of the four columns: `half[(row·4 + col)·c ..]`, six rows.
        for col in 0..4 {
            let y = std::array::from_fn(|r| pixel(y0 + r, x0 + col));
            a_into(y, half, |row| (row * 4 + col) * c);
        }
        // (A · dY) · Aᵀ along each row.
        for row in 0..6 {
            let q = |col: usize| &half[(row * 4 + col) * c..(row * 4 + col + 1) * c];
            a_into(std::array::from_fn(q), dm, |col| (row * 6 + col) * stride + at0);
        }
    }
}
