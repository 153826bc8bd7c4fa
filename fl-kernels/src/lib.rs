//! # fl-kernels — the CPU kernels under fl-task's models
//!
//! Convolution and training-mode BatchNorm, forward and backward, on contiguous NCHW `f32`
//! slices (and channels-last `[n, h, w, c]` ones, which MobileNet-V2 runs in), for the
//! layer shapes ResNet-18 and MobileNet-V2 use on 28 × 28 FEMNIST: nothing here knows Burn (the autodiff glue is fl-task's `model/conv_op.rs` and `model/bn_op.rs`),
//! so every kernel is tested against its definition in `f64` (`test_support.rs`,
//! `batchnorm/tests.rs`). Why each one exists and how
//! fast it is: `fl-job/TRAINING.md`.
//!
//! ## Layout
//! Laid out as burn-ndarray keeps its `ops/` apart from `ops/simd/`:
//! - [`conv`]: the dispatcher ([`conv::forward`], [`conv::backward`]) and the dense
//!   algorithms, `conv/direct.rs` (3 × 3 stride 1, thin layers, explicit vectors),
//!   `conv/im2col.rs` (im2col + GEMM, any geometry), `conv/winograd/` (F(2 × 2) and
//!   F(4 × 4) tiles for 3 × 3 stride 1 on wide layers).
//! - [`channels_last`]: convolutions on `[n, h, w, c]` activations, 1 × 1 ones as plain
//!   GEMMs over pixels (`channels_last/pointwise.rs`; layers with 8 or 16 channels on a
//!   side partly through register-blocked loops, `channels_last/thin.rs`), depthwise ones
//!   by row runs (`depthwise/channels_last.rs`), others through `conv` with the layout
//!   turned around.
//! - [`batchnorm`]: training-mode BatchNorm + activation, forward and backward, in two loop
//!   orders (`planes.rs` for larger maps, `rows.rs` for maps under 64 pixels and for
//!   channels-last activations).
//! - `depthwise/`: `nhwc.rs` (small maps, channels innermost) and `planar.rs` (larger maps)
//!   for NCHW activations; `channels_last.rs` ("same" stride 1) and `pixels.rs` (strided)
//!   for channels-last ones.
//! - `simd/`: `wide!` (a loop compiled for the widest vector set, picked at run time) and
//!   `simd/im2col.rs` (the AVX-512 permutes of im2col).
//! - [`isa`]: the one place that picks the instruction set (pulp: AVX-512, AVX2 + FMA,
//!   NEON or scalar, once per process; `FL_JOB_ISA` lowers it).
//! - [`heap`]: glibc's thresholds set so that freed activations stay in the heap.
//! - Leaves: [`types`] (the shapes and epilogues every kernel shares), `gemm.rs` (the
//!   `gemm` crate behind a bounds-checked call), `layout.rs` (planes ↔ channels innermost),
//!   `scratch.rs` (per-thread buffers, outputs built a piece at a time).
//!
//! Imports run one way: dispatchers (`conv`, `channels_last`) → algorithms → leaves. Results do not depend on the
//! thread count (work is grouped by the geometry, partial sums added in group order).

pub mod batchnorm;
pub mod channels_last;
pub mod conv;
mod depthwise;
mod gemm;
pub mod heap;
pub mod isa;
mod layout;
mod scratch;
mod simd;
#[cfg(test)]
mod test_support;
pub mod types;

pub use conv::{backward, forward, forward_fused};
pub use types::{Act, Epilogue, Geom};
