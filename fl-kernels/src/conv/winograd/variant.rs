//! What one Winograd tile size provides ([`Variant`]): its filter transforms and its tile
//! transforms over whole channel vectors. `winograd_f2.rs` and `winograd_f4.rs` implement
//! it; `conv_winograd.rs` runs either.

use crate::types::Geom;

/// [`Variant::INPUT_TILE`]: `(p, pw, c, y0, x0, half, v, stride, at)`.
pub(crate) type InputTile =
    fn(&[f32], usize, usize, usize, usize, &mut [f32], &mut [f32], usize, usize);
/// [`Variant::OUTPUT_TILE`]: `(m, stride, at, c, half, g, y0, x0, hwc)`.
pub(crate) type OutputTile =
    fn(&[f32], usize, usize, usize, &mut [f32], &Geom, usize, usize, &mut [f32]);
/// [`Variant::GRAD_TILE`]: `(hwc, g, y0, x0, dm, stride, at, c, half, zero)`.
pub(crate) type GradTile =
    fn(&[f32], &Geom, usize, usize, &mut [f32], usize, usize, usize, &mut [f32], &[f32]);

/// One Winograd tile size: its transforms, each over whole channel vectors (the tile
/// transforms are the `wide!` functions of its file, named here).
pub(crate) trait Variant {
    /// Output tile edge `m`.
    const M: usize;
    /// Input tile edge, `m + 2`.
    const A: usize = Self::M + 2;
    /// Transformed elements per channel pair, `(m + 2)²`.
    const XI: usize = Self::A * Self::A;
    /// If flipping a filter permutes the interpolation points, the permutation of the
    /// transformed filter's rows (and columns): the input gradient then reads the forward's
    /// transformed filters with no transform of its own.
    const FLIP: Option<[usize; 6]>;

    /// `G · w · Gᵀ` for one 3 × 3 filter `w` (row-major), row-major `A × A` (the first `XI`).
    fn filter(w: &[f32]) -> [f32; 36];

    /// `Gᵀ · dU · G` (row-major 3 × 3) for the `A × A` values `e(ξ)`.
    fn filter_grad(e: impl Fn(usize) -> f32) -> [f32; 9];

    /// `V[ξ][tile] = (Bᵀ · d · B)[ξ]` for the input tile at `(y0, x0)` of the padded,
    /// channels-innermost input `p` (`pw` wide, `c` channels); the `XI` planes of `v` are
    /// `stride` apart, this tile's channels start at `at`. `half` has `XI · c` scratch.
    const INPUT_TILE: InputTile;

    /// The output pixels of the tile at `(y0, x0)` (those inside the map) from its products
    /// `m` (planes `stride` apart, channels from `at`): `Aᵀ · M · A`, channels-innermost
    /// into `hwc`.
    const OUTPUT_TILE: OutputTile;

    /// `dM[ξ][tile] = (A · dY · Aᵀ)[ξ]` for the output-gradient tile at `(y0, x0)` of the
    /// channels-innermost `hwc` (zero past the map's edge: `zero` is `c` zeros).
    const GRAD_TILE: GradTile;
}
