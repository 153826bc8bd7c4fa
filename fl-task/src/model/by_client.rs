//! Convolutions grouped by client (`stacked.rs`: several networks side by side, each group
//! of channels one client's layer) on the CPU kernels: each group's channels are gathered
//! into a contiguous block, run through the kernel the client's lone layer runs (planar or
//! channels-last), and written back into their channels. So a stacked network's layer
//! computes, bit for bit, what each client's layer computes alone, in one autodiff op
//! (`conv_op.rs`) instead of one per client.

use fl_kernels::{Geom, channels_last, conv};

/// Where one group's values lie in an activation of `clients` groups: `rows` runs of
/// `block` values, `stride` apart, the group's first at `g · block`. Planar
/// `[n, clients·c, h, w]`: a row is a sample, a block its `c` planes; channels-last
/// `[n, h, w, clients·c]`: a row is a pixel, a block its `c` channels. (The layout is a
/// flag rather than `conv_op::Layout`, so that this leaf does not import its caller.)
#[derive(Clone, Copy)]
struct Runs {
    rows: usize,
    block: usize,
    stride: usize,
}

impl Runs {
    fn of(channels_last: bool, clients: usize, [n, c, h, w]: [usize; 4]) -> Self {
        let (rows, block) = if channels_last {
            (n * h * w, c)
        } else {
            (n, c * h * w)
        };
        Runs {
            rows,
            block,
            stride: clients * block,
        }
    }

    /// Group `g`'s values of `src`, contiguous.
    fn gather(self, src: &[f32], g: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.rows * self.block);
        for r in 0..self.rows {
            let from = r * self.stride + g * self.block;
            out.extend_from_slice(&src[from..from + self.block]);
        }
        out
    }

    /// The inverse of [`Runs::gather`]: `part` written into group `g`'s values of `dst`.
    fn scatter(self, dst: &mut [f32], part: &[f32], g: usize) {
        for (r, src) in part.chunks_exact(self.block).enumerate() {
            let to = r * self.stride + g * self.block;
            dst[to..to + self.block].copy_from_slice(src);
        }
    }
}

/// One group's (dense) filter bank size.
fn weight_len(geom: &Geom) -> usize {
    geom.cout * geom.cin * geom.k * geom.k
}

/// The runs of one group's input and output.
fn runs(geom: &Geom, clients: usize, channels_last: bool) -> (Runs, Runs) {
    (
        Runs::of(channels_last, clients, [geom.n, geom.cin, geom.h, geom.w]),
        Runs::of(
            channels_last,
            clients,
            [geom.n, geom.cout, geom.ho(), geom.wo()],
        ),
    )
}

/// Forward of `clients` groups side by side, `geom` one group's dense convolution: `x`
/// with `clients · cin` channels, `weight` `[clients · cout, cin, k, k]`, planar or
/// channels-last.
pub(super) fn forward(
    geom: &Geom,
    clients: usize,
    channels_last: bool,
    x: &[f32],
    weight: &[f32],
) -> Vec<f32> {
    let (xr, yr) = runs(geom, clients, channels_last);
    let mut out = vec![0.0f32; yr.rows * yr.stride];
    for (g, w) in weight.chunks_exact(weight_len(geom)).enumerate() {
        let xg = xr.gather(x, g);
        let y = if channels_last {
            channels_last::forward(geom, &xg, w, None)
        } else {
            conv::forward(geom, &xg, w)
        };
        yr.scatter(&mut out, &y, g);
    }
    out
}

/// Input and weight gradients of [`forward`], each only if asked for.
pub(super) fn backward(
    geom: &Geom,
    clients: usize,
    channels_last: bool,
    (x, weight, grad): (&[f32], &[f32], &[f32]),
    (want_dx, want_dw): (bool, bool),
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let (xr, yr) = runs(geom, clients, channels_last);
    let mut dx = want_dx.then(|| vec![0.0f32; xr.rows * xr.stride]);
    let mut dw = want_dw.then(|| Vec::with_capacity(clients * weight_len(geom)));
    for (g, w) in weight.chunks_exact(weight_len(geom)).enumerate() {
        let (xg, gg) = (xr.gather(x, g), yr.gather(grad, g));
        let (dxg, dwg) = if channels_last {
            channels_last::backward(geom, &xg, w, &gg, want_dx, want_dw)
        } else {
            conv::backward(geom, &xg, w, &gg, want_dx, want_dw)
        };
        if let (Some(dx), Some(dxg)) = (dx.as_mut(), dxg) {
            xr.scatter(dx, &dxg, g);
        }
        if let (Some(dw), Some(dwg)) = (dw.as_mut(), dwg) {
            dw.extend_from_slice(&dwg);
        }
    }
    (dx, dw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_then_scatter_round_trips() {
        for channels_last in [false, true] {
            let (clients, dims) = (3, [2, 2, 3, 4]);
            let r = Runs::of(channels_last, clients, dims);
            let src: Vec<f32> = (0..r.rows * r.stride).map(|v| v as f32).collect();
            let mut back = vec![0.0; src.len()];
            for g in 0..clients {
                let part = r.gather(&src, g);
                assert_eq!(part.len(), 2 * 2 * 3 * 4);
                r.scatter(&mut back, &part, g);
            }
            assert_eq!(back, src, "channels-last {channels_last}");
        }
    }
}
