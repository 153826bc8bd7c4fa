//! The tile transforms of Winograd's F(2 × 2, 3 × 3) (`conv_winograd.rs` runs them): a
//! 4 × 4 input tile and 3 × 3 filter give a 2 × 2 output tile with 16 products per channel
//! pair instead of 36. The coefficients are 0, ±½ and ±1, so the result is within a few
//! ulps of the direct convolution's. Every function works on whole channel vectors
//! (channels innermost), so each step is a vector operation across channels.

use crate::conv::winograd::variant::{GradTile, InputTile, OutputTile, Variant};
use crate::simd::{lin, wide};
use crate::types::Geom;

/// F(2 × 2, 3 × 3).
pub(crate) struct F2;

impl Variant for F2 {
    const M: usize = 2;
    /// Flipping a 3 × 3 filter reverses the columns of `G`, which swaps rows 0 and 3 of
    /// `G · w`: the points 0, 1, −1, ∞ map onto themselves.
    const FLIP: Option<[usize; 6]> = Some([3, 1, 2, 0, 0, 0]);

    #[inline(always)]
    fn filter(w: &[f32]) -> [f32; 36] {
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
        let mut u = [0.0f32; 36];
        for (r, row) in t.iter().enumerate() {
            let (a, b, d) = (row[0], row[1], row[2]);
            let v = [a, 0.5 * (a + b + d), 0.5 * (a - b + d), d];
            u[r * 4..r * 4 + 4].copy_from_slice(&v);
        }
        u
    }

    #[inline(always)]
    fn filter_grad(e: impl Fn(usize) -> f32) -> [f32; 9] {
        // Gᵀ = [1 ½ ½ 0; 0 ½ −½ 0; 0 ½ ½ 1], down the rows, then across.
        let cols: [[f32; 3]; 4] = std::array::from_fn(|c| {
            let (a, b, d, f) = (e(c), e(4 + c), e(8 + c), e(12 + c));
            [a + 0.5 * (b + d), 0.5 * (b - d), 0.5 * (b + d) + f]
        });
        let mut out = [0.0f32; 9];
        for i in 0..3 {
            let (a, b, d, f) = (cols[0][i], cols[1][i], cols[2][i], cols[3][i]);
            out[i * 3] = a + 0.5 * (b + d);
            out[i * 3 + 1] = 0.5 * (b - d);
            out[i * 3 + 2] = 0.5 * (b + d) + f;
        }
        out
    }

    const INPUT_TILE: InputTile = input_tile;
    const OUTPUT_TILE: OutputTile = output_tile;
    const GRAD_TILE: GradTile = grad_tile;
}

wide! {
    /// `dM[ξ][tile] = (A · dY · Aᵀ)[ξ]` for the 2 × 2 output-gradient tile at `(y0, x0)` (zero
    /// past the map's edge), across `c` channels; `A = [1 0; 1 1; 1 −1; 0 −1]`. `half` holds
    /// eight scratch vectors; `zero` is `c` zeros.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(crate) fn grad_tile(
        hwc: &[f32],
        g: &Geom,
        y0: usize,
        x0: usize,
        dm: &mut [f32],
        stride: usize,
        at: usize,
        c: usize,
        half: &mut [f32],
        zero: &[f32],
    ) {
        let rows = half;
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
            lin(&mut rows[r(3)..r(3) + c], [(b, -1.0)]);
        }
        // (A · dY) · Aᵀ: the same combination across each row.
        for r in 0..4 {
            let (l, q) = (&rows[r * c..(r + 1) * c], &rows[(4 + r) * c..(5 + r) * c]);
            let dst = |col: usize| (r * 4 + col) * stride + at;
            dm[dst(0)..dst(0) + c].copy_from_slice(l);
            add(&mut dm[dst(1)..dst(1) + c], l, q);
            sub(&mut dm[dst(2)..dst(2) + c], l, q);
            lin(&mut dm[dst(3)..dst(3) + c], [(q, -1.0)]);
        }
    }
}

/// `dst = a − b` over whole channel vectors.
#[inline(always)]
fn sub(dst: &mut [f32], a: &[f32], b: &[f32]) {
    lin(dst, [(a, 1.0), (b, -1.0)]);
}

/// `dst = a + b` over whole channel vectors.
#[inline(always)]
fn add(dst: &mut [f32], a: &[f32], b: &[f32]) {
    lin(dst, [(a, 1.0), (b, 1.0)]);
}

wide! {
    /// `V[ξ][tile] = (Bᵀ · d · B)[ξ]` for the 4 × 4 tile `d` of the padded input at row `y0`,
    /// column `x0`, across all channels; `Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1]`. The 16
    /// planes of `V` are `stride` apart; this tile's channels start at `at` in each.
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
    pub(crate) fn output_tile(
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
            lin(top, [(m0, 1.0), (m1, 1.0), (m2, 1.0)]);
            lin(bottom, [(m1, 1.0), (m2, -1.0), (m3, -1.0)]);
        }
        for row in 0..2 {
            let y = y0 + row;
            if y >= g.h {
                continue;
            }
            let q = |col: usize| &half[(row * 4 + col) * c..(row * 4 + col + 1) * c];
            let (q0, q1, q2, q3) = (q(0), q(1), q(2), q(3));
            let left = (y * g.w + x0) * c;
            lin(&mut hwc[left..left + c], [(q0, 1.0), (q1, 1.0), (q2, 1.0)]);
            if x0 + 1 < g.w {
                let right = left + c;
                lin(&mut hwc[right..right + c], [(q1, 1.0), (q2, -1.0), (q3, -1.0)]);
            }
        }
    }
}
