//! The types every convolution kernel shares, and nothing else: a leaf that the kernels,
//! the dispatcher (`conv/mod.rs`) and the Burn glue (fl-task's `conv_op.rs`, `bn_op.rs`)
//! import, so that no kernel file imports another's types back (the kernel files used to
//! form one import circle through the dispatcher).
//!
//! [`Geom`]: one convolution's shape; [`Act`] and [`Epilogue`]: the activation and the
//! folded evaluation-mode BatchNorm a forward applies as it writes; [`equal_groups`]: how
//! samples are grouped (by the geometry only, so results do not depend on the thread
//! count); [`flip_transpose`]: the filters of a 3 × 3 input gradient.

use rayon::prelude::*;

/// The activation after a convolution + BatchNorm (`layers::ConvBn`), and in an
/// [`Epilogue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// None: `y = x`.
    None,
    /// `max(x, 0)`.
    Relu,
    /// `min(max(x, 0), 6)`, MobileNet-V2's.
    Relu6,
}

/// How many output columns one GEMM should have at least: samples are stacked side by side
/// until their maps reach it (see [`Geom::group`]).
const STACK_COLUMNS: usize = 256;

/// The shape of one convolution: input `[n, cin, h, w]`, weight `[cout, cin / groups, k, k]`,
/// symmetric zero padding `pad`, equal strides. `groups` is 1 (dense) or `cin` with
/// `cout == cin` (depthwise); other groupings are not handled here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geom {
    /// Samples.
    pub n: usize,
    /// Input channels.
    pub cin: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub cout: usize,
    /// Kernel side (square kernels only).
    pub k: usize,
    /// Stride, the same along both axes.
    pub stride: usize,
    /// Zero padding on every side.
    pub pad: usize,
    /// One filter per channel (`groups == cin == cout`) rather than dense.
    pub depthwise: bool,
}

impl Geom {
    /// Output height.
    pub fn ho(&self) -> usize {
        (self.h + 2 * self.pad - self.k) / self.stride + 1
    }

    /// Output width.
    pub fn wo(&self) -> usize {
        (self.w + 2 * self.pad - self.k) / self.stride + 1
    }

    /// Rows of the im2col matrix (dense): `cin · k · k`.
    pub(crate) fn kdim(&self) -> usize {
        self.cin * self.k * self.k
    }

    pub(crate) fn in_len(&self) -> usize {
        self.cin * self.h * self.w
    }

    pub(crate) fn out_len(&self) -> usize {
        self.cout * self.ho() * self.wo()
    }

    /// Weight elements.
    pub(crate) fn weight_len(&self) -> usize {
        if self.depthwise {
            self.cout * self.k * self.k
        } else {
            self.cout * self.kdim()
        }
    }

    /// Stride 1 with output and input maps of the same size ("same" padding): then an
    /// im2col row is the whole input plane shifted by one offset, with the taps that fall
    /// outside zeroed (`conv/im2col.rs` copies it in one piece, `simd/im2col.rs` in masked
    /// loads).
    pub(crate) fn same_size(&self) -> bool {
        self.stride == 1 && self.ho() == self.h && self.wo() == self.w
    }

    /// 1 × 1, stride 1, no padding: the input already is the im2col matrix.
    pub(crate) fn pointwise(&self) -> bool {
        self.k == 1 && self.stride == 1 && self.pad == 0
    }

    /// The im2col matrix is the sample itself: pointwise and one sample per GEMM.
    pub(crate) fn direct(&self, stack: usize) -> bool {
        self.pointwise() && stack == 1
    }

    /// Panics unless `x`, `weight` and the epilogue have this geometry's lengths (the
    /// same in either layout).
    pub(crate) fn check_forward(&self, x: &[f32], weight: &[f32], epilogue: Option<&Epilogue<'_>>) {
        assert_eq!(
            x.len(),
            self.n * self.in_len(),
            "conv forward: input length"
        );
        assert_eq!(
            weight.len(),
            self.weight_len(),
            "conv forward: weight length"
        );
        if let Some(e) = epilogue {
            assert!(
                e.scale.len() == self.cout && e.shift.len() == self.cout,
                "conv forward: epilogue length"
            );
        }
    }

    /// Panics unless `x`, `weight` and `grad_out` have this geometry's lengths.
    pub(crate) fn check_backward(&self, x: &[f32], weight: &[f32], grad_out: &[f32]) {
        assert_eq!(
            x.len(),
            self.n * self.in_len(),
            "conv backward: input length"
        );
        assert_eq!(
            weight.len(),
            self.weight_len(),
            "conv backward: weight length"
        );
        assert_eq!(
            grad_out.len(),
            self.n * self.out_len(),
            "conv backward: grad length"
        );
    }

    /// Samples per group, stacked into one GEMM so that its width reaches a few hundred
    /// columns; groups are made equal in size (20 samples at 16 columns each: two groups of
    /// ten, not 16 + 4) so that they balance over the threads.
    pub(crate) fn group(&self) -> usize {
        group_size(self.n, self.ho() * self.wo())
    }
}

/// Samples per group for `n` samples of `columns` GEMM columns each (see [`Geom::group`]).
pub(crate) fn group_size(n: usize, columns: usize) -> usize {
    equal_groups(n, STACK_COLUMNS, columns)
}

/// Samples per group for `n` samples of `each` elements, so that a group reaches `at_least`
/// elements: groups of equal size (20 samples in want of 16: two groups of ten, not 16 + 4),
/// so that they balance over the threads. Depends on the geometry only, never on the threads.
pub(crate) fn equal_groups(n: usize, at_least: usize, each: usize) -> usize {
    let n = n.max(1);
    let want = at_least.div_ceil(each.max(1)).clamp(1, n);
    n.div_ceil(n.div_ceil(want))
}

/// Per output channel `y = act(x · scale + shift)`, applied as the convolution writes its
/// outputs, while they are still in cache: evaluation-mode BatchNorm and its activation
/// folded into the convolution, which saves a pass over the activations and its buffer.
pub struct Epilogue<'a> {
    /// Per output channel factor (BatchNorm's `γ / √(var + ε)`).
    pub scale: &'a [f32],
    /// Per output channel offset (BatchNorm's `β − mean · scale`).
    pub shift: &'a [f32],
    /// The activation after it.
    pub act: Act,
}

impl Epilogue<'_> {
    /// `dst = act(src · scale[co] + shift[co])`; `match` outside the loop so each vectorises.
    pub(crate) fn write(&self, co: usize, dst: &mut [f32], src: &[f32]) {
        let (a, b) = (self.scale[co], self.shift[co]);
        let pairs = dst.iter_mut().zip(src);
        match self.act {
            Act::None => pairs.for_each(|(d, &v)| *d = v * a + b),
            Act::Relu => pairs.for_each(|(d, &v)| *d = (v * a + b).max(0.0)),
            Act::Relu6 => pairs.for_each(|(d, &v)| *d = (v * a + b).clamp(0.0, 6.0)),
        }
    }

    /// The same in place.
    pub(crate) fn apply(&self, co: usize, data: &mut [f32]) {
        let (a, b) = (self.scale[co], self.shift[co]);
        match self.act {
            Act::None => data.iter_mut().for_each(|d| *d = *d * a + b),
            Act::Relu => data.iter_mut().for_each(|d| *d = (*d * a + b).max(0.0)),
            Act::Relu6 => data
                .iter_mut()
                .for_each(|d| *d = (*d * a + b).clamp(0.0, 6.0)),
        }
    }
}

/// The filters of the input-gradient convolution as plain weights: flipped and transposed,
/// `[cin, cout, 3, 3]`.
pub(crate) fn flip_transpose(g: &Geom, weight: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; weight.len()];
    out.par_chunks_mut(g.cout * 9)
        .enumerate()
        .for_each(|(ci, row)| {
            for (co, dst) in row.chunks_exact_mut(9).enumerate() {
                let src = &weight[(co * g.cin + ci) * 9..][..9];
                for (d, s) in dst.iter_mut().zip(src.iter().rev()) {
                    *d = *s;
                }
            }
        });
    out
}
