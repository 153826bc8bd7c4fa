//! Training-mode BatchNorm fused with the activation that follows it (none, ReLU, ReLU6), as
//! one custom op on `Autodiff<Flex>` with its own backward pass.
//!
//! Why: composed from Burn's tensor ops (the fallback in `layers.rs`), BatchNorm is about ten
//! full passes over the activation forward and backward, and ReLU6's backward is `clamp`'s
//! two masks plus `mask_fill`, 18–25 % of a MobileNet-V2 step on `flex`. The loops are
//! fl-kernels' [`fl_kernels::batchnorm`] (two passes forward, two backward, the
//! activation's mask taken from the saved output); this file is the autodiff glue. A
//! residual block's last BatchNorm also takes the block's shortcut, `act(BatchNorm(x) +
//! skip)` as one op (`BnAddActBackward`): Burn's `+` and ReLU after it were two more
//! passes and allocations forward and a mask and a sum backward, 4–5 % of a ResNet-18 ×4
//! training step (perf, 2026-12-07).
//!
//! Semantics are Burn's `BatchNorm` in training: batch mean and biased variance over
//! (batch, height, width), `epsilon` inside the square root; the caller updates the running
//! statistics from the returned mean and variance.

use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;

use super::conv_op::{Layout, flex_tensor, slice};
use fl_kernels::Act;
use fl_kernels::batchnorm::{self, BnGrads, BnShape};

type FlexAd = Autodiff<Flex, NoCheckpointing>;

/// What the fused op returns: the activated output and the batch statistics.
pub(crate) struct BnActOutput {
    /// `act(γ · (x − mean) / √(var + ε) + β)`, shape of `x`.
    pub y: Tensor<4>,
    /// Per-channel batch mean.
    pub mean: Vec<f32>,
    /// Per-channel biased batch variance.
    pub var: Vec<f32>,
}

/// The fused op, or `None` when the tensors are not on `Autodiff<Flex>` (the caller then
/// composes BatchNorm from tensor ops). With `skip`, a residual block's sum:
/// `act(BatchNorm(x) + skip)` in one pass, its gradient flowing into both.
pub(crate) fn bn_act_train(
    x: &Tensor<4>,
    gamma: &Tensor<1>,
    beta: &Tensor<1>,
    epsilon: f64,
    act: Act,
    layout: Layout,
    skip: Option<&Tensor<4>>,
) -> Option<BnActOutput> {
    let xp = x.clone().try_into_primitive::<FlexAd>().ok()?;
    let gp = gamma.clone().try_into_primitive::<FlexAd>().ok()?;
    let bp = beta.clone().try_into_primitive::<FlexAd>().ok()?;
    let rp = match skip {
        Some(r) if r.dims() == x.dims() => Some(r.clone().try_into_primitive::<FlexAd>().ok()?),
        Some(_) => return None,
        None => None,
    };
    let (y, mean, var) = bn_autodiff(xp, gp, bp, rp, Shape::of(x, epsilon, act, layout));
    Some(BnActOutput {
        y: Tensor::from_primitive::<FlexAd>(y),
        mean,
        var,
    })
}

/// Training-mode BatchNorm + activation on plain `Flex` (no autodiff): the batch's own
/// statistics normalise, with the same arithmetic as [`bn_act_train`]'s forward, and no
/// graph is recorded. For re-estimating running statistics (`crate::calibrate`), where no
/// gradient is wanted. `None` on other backends.
pub(crate) fn bn_act_batch(
    x: &Tensor<4>,
    gamma: &Tensor<1>,
    beta: &Tensor<1>,
    epsilon: f64,
    act: Act,
    layout: Layout,
    skip: Option<&Tensor<4>>,
) -> Option<BnActOutput> {
    let xp = x.clone().try_into_primitive::<Flex>().ok()?;
    let gp = gamma.clone().try_into_primitive::<Flex>().ok()?;
    let bp = beta.clone().try_into_primitive::<Flex>().ok()?;
    let rp = flex_skip(x, skip)?;
    let s = Shape::of(x, epsilon, act, layout);
    let r = rp.as_ref().map(slice);
    let f = batch_forward(&s, &slice(&xp), r.as_deref(), &slice(&gp), &slice(&bp));
    Some(BnActOutput {
        y: Tensor::from_primitive::<Flex>(flex_tensor(f.y, &s.dims)),
        mean: f.mean,
        var: f.var,
    })
}

/// Evaluation-mode BatchNorm + activation on plain `Flex` (no autodiff): the running
/// statistics normalise, in one pass. `None` on other backends (the caller uses Burn's
/// `BatchNorm::forward` then the activation).
pub(crate) fn bn_act_eval(
    x: &Tensor<4>,
    bn: &burn::nn::BatchNorm,
    act: Act,
    layout: Layout,
    skip: Option<&Tensor<4>>,
) -> Option<Tensor<4>> {
    let xp = x.clone().try_into_primitive::<Flex>().ok()?;
    let rp = flex_skip(x, skip)?;
    let prim = |t: Tensor<1>| t.try_into_primitive::<Flex>().ok();
    let gamma = prim(bn.gamma.val())?;
    let beta = prim(bn.beta.val())?;
    let mean = prim(bn.running_mean.value())?;
    let var = prim(bn.running_var.value())?;
    let s = Shape::of(x, bn.epsilon, act, layout);
    let inv: Vec<f32> = slice(&var)
        .iter()
        .map(|v| 1.0 / (v + s.eps).sqrt())
        .collect();
    let y = batchnorm::forward_add(
        &s.kernel(),
        &slice(&xp),
        rp.as_ref().map(slice).as_deref(),
        &slice(&mean),
        &inv,
        &slice(&gamma),
        &slice(&beta),
        s.act,
    );
    Some(Tensor::from_primitive::<Flex>(flex_tensor(y, &s.dims)))
}

/// `skip` as a flex primitive: `Some(None)` without one, `None` (not this op) when it is not
/// on `Flex` or not `x`'s shape.
fn flex_skip(x: &Tensor<4>, skip: Option<&Tensor<4>>) -> Option<Option<FlexTensor>> {
    match skip {
        None => Some(None),
        Some(r) if r.dims() == x.dims() => Some(Some(r.clone().try_into_primitive::<Flex>().ok()?)),
        Some(_) => None,
    }
}

#[derive(Debug, Clone, Copy)]
struct Shape {
    dims: [usize; 4],
    n: usize,
    c: usize,
    hw: usize,
    layout: Layout,
    eps: f32,
    act: Act,
}

impl Shape {
    /// The shape of `x` (in `layout`) with BatchNorm's `epsilon` and the activation.
    fn of(x: &Tensor<4>, epsilon: f64, act: Act, layout: Layout) -> Self {
        let dims = x.dims();
        let [n, c, h, w] = layout.nchw(dims);
        Shape {
            dims,
            n,
            c,
            hw: h * w,
            layout,
            eps: epsilon as f32,
            act,
        }
    }

    /// Values in the activation.
    fn kernel_len(&self) -> usize {
        self.n * self.c * self.hw
    }

    /// The kernels' view: `[n, c, h · w]` or `[n, h · w, c]`.
    fn kernel(&self) -> BnShape {
        BnShape {
            n: self.n,
            c: self.c,
            hw: self.hw,
            channels_last: self.layout == Layout::ChannelsLast,
        }
    }
}

#[derive(Debug)]
struct BnActBackward;

/// Saved for the backward pass: input, output, γ, mean, 1/√(var + ε), shape.
type BnState = (
    FlexTensor,
    FlexTensor,
    FlexTensor,
    Vec<f32>,
    Vec<f32>,
    Shape,
);

impl Backward<Flex, 3> for BnActBackward {
    type State = BnState;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _cp: &mut Checkpointer) {
        let ids = ops.parents.map(|p| p.map(|node| node.id));
        let dy = grads.consume::<Flex>(&ops.node);
        let act = ops.state.5.act;
        register_bn_grads(grads, ids, &ops.state, dy, act);
    }
}

/// [`BnActBackward`] with a residual: parents input, γ, β and the residual, which gets the
/// gradient through the activation (as the BatchNorm does).
#[derive(Debug)]
struct BnAddActBackward;

impl Backward<Flex, 4> for BnAddActBackward {
    type State = BnState;

    fn backward(self, ops: Ops<Self::State, 4>, grads: &mut Gradients, _cp: &mut Checkpointer) {
        let [x, g, b, r] = ops.parents.map(|p| p.map(|node| node.id));
        let dy = grads.consume::<Flex>(&ops.node);
        let s = ops.state.5;
        let dz = match s.act {
            Act::None => dy,
            act => {
                let y = &ops.state.1;
                let dz = batchnorm::activation_gradient(&slice(y), &slice(&dy), act);
                flex_tensor(dz, &s.dims)
            }
        };
        // The residual's gradient is `dz` itself: the BatchNorm gets its own copy to
        // overwrite with its input gradient.
        if let Some(id) = r {
            grads.register::<Flex>(id, dz.clone());
        }
        register_bn_grads(grads, [x, g, b], &ops.state, dz, Act::None);
    }
}

/// BatchNorm's gradients from the upstream `dy` (through `act`, whose mask is read off the
/// saved output), registered for those of input, γ and β that want one. The input gradient
/// is written over `dy` where the autodiff gave it away whole (`batchnorm::backward_in_place`;
/// a shared `dy` is copied first).
fn register_bn_grads(
    grads: &mut Gradients,
    [node_x, node_g, node_b]: [Option<NodeId>; 3],
    (x, y, gamma, mean, inv, s): &BnState,
    mut dy: FlexTensor,
    act: Act,
) {
    let (x, y, gamma) = (slice(x), slice(y), slice(gamma));
    let whole = dy.is_contiguous() && dy.bytes().len() == s.kernel_len() * 4;
    let (dgamma, dbeta) = match node_x {
        Some(id) if whole => {
            let d = dy.storage_mut::<f32>();
            let k = &s.kernel();
            let grads_p = batchnorm::backward_in_place(k, &x, &y, d, mean, inv, &gamma, act);
            grads.register::<Flex>(id, dy);
            grads_p
        }
        _ => {
            let k = &s.kernel();
            let want_dx = node_x.is_some();
            let BnGrads { dx, dgamma, dbeta } =
                batchnorm::backward(k, &x, &y, &slice(&dy), mean, inv, &gamma, act, want_dx);
            if let (Some(id), Some(dx)) = (node_x, dx) {
                grads.register::<Flex>(id, flex_tensor(dx, &s.dims));
            }
            (dgamma, dbeta)
        }
    };
    if let Some(id) = node_g {
        grads.register::<Flex>(id, flex_tensor(dgamma, &[s.c]));
    }
    if let Some(id) = node_b {
        grads.register::<Flex>(id, flex_tensor(dbeta, &[s.c]));
    }
}

fn bn_autodiff(
    x: FloatTensor<FlexAd>,
    gamma: FloatTensor<FlexAd>,
    beta: FloatTensor<FlexAd>,
    skip: Option<FloatTensor<FlexAd>>,
    s: Shape,
) -> (FloatTensor<FlexAd>, Vec<f32>, Vec<f32>) {
    let Some(skip) = skip else {
        let prep = BnActBackward
            .prepare::<NoCheckpointing>([x.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful();
        let (f, state) = forward_state(x, gamma, beta, None, s);
        let out = match prep {
            OpsKind::Tracked(prep) => prep.finish(state, f.y),
            OpsKind::UnTracked(prep) => prep.finish(f.y),
        };
        return (out, f.mean, f.var);
    };
    let prep = BnAddActBackward
        .prepare::<NoCheckpointing>([x.node(), gamma.node(), beta.node(), skip.node()])
        .compute_bound()
        .stateful();
    let (f, state) = forward_state(x, gamma, beta, Some(skip.into_primitive()), s);
    let out = match prep {
        OpsKind::Tracked(prep) => prep.finish(state, f.y),
        OpsKind::UnTracked(prep) => prep.finish(f.y),
    };
    (out, f.mean, f.var)
}

/// The training forward on the primitives: the output (as a flex tensor), the statistics,
/// and what the backward pass keeps.
fn forward_state(
    x: FloatTensor<FlexAd>,
    gamma: FloatTensor<FlexAd>,
    beta: FloatTensor<FlexAd>,
    skip: Option<FlexTensor>,
    s: Shape,
) -> (TrainForward, BnState) {
    let (xp, gp, bp) = (
        x.into_primitive(),
        gamma.into_primitive(),
        beta.into_primitive(),
    );
    let r = skip.as_ref().map(slice);
    let f = batch_forward(&s, &slice(&xp), r.as_deref(), &slice(&gp), &slice(&bp));
    let y = flex_tensor(f.y, &s.dims);
    let state = (xp, y.clone(), gp, f.mean.clone(), f.inv, s);
    (
        TrainForward {
            y,
            mean: f.mean,
            var: f.var,
        },
        state,
    )
}

/// [`forward_state`]'s output and batch statistics.
struct TrainForward {
    y: FlexTensor,
    mean: Vec<f32>,
    var: Vec<f32>,
}

/// What [`batch_forward`] returns.
struct BatchForward {
    y: Vec<f32>,
    mean: Vec<f32>,
    var: Vec<f32>,
    /// `1 / √(var + ε)`.
    inv: Vec<f32>,
}

/// The batch's statistics and its normalised, activated output (`skip` added before the
/// activation): the forward that training ([`bn_autodiff`]) and re-estimation
/// ([`bn_act_batch`]) share.
fn batch_forward(
    s: &Shape,
    x: &[f32],
    skip: Option<&[f32]>,
    gamma: &[f32],
    beta: &[f32],
) -> BatchForward {
    let (mean, var) = batchnorm::statistics(&s.kernel(), x);
    let inv: Vec<f32> = var.iter().map(|v| 1.0 / (v + s.eps).sqrt()).collect();
    let y = batchnorm::forward_add(&s.kernel(), x, skip, &mean, &inv, gamma, beta, s.act);
    BatchForward { y, mean, var, inv }
}

#[cfg(test)]
mod tests {
    use burn::nn::BatchNormConfig;
    use burn::tensor::Distribution;
    use burn::tensor::activation::relu;

    use super::*;

    fn max_rel_diff<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> f32 {
        let scale = b.clone().abs().max().into_scalar::<f32>().max(1.0);
        (a - b).abs().max().into_scalar::<f32>() / scale
    }

    /// Evaluation mode: equal to Burn's `BatchNorm::forward` with running statistics, then
    /// the activation.
    #[test]
    fn eval_matches_burn_batch_norm_and_activation() {
        let device = crate::Backend::Flex.device();
        let mut bn = BatchNormConfig::new(3).init(&device);
        bn.gamma = burn::module::Param::from_tensor(Tensor::from_floats([0.5, 1.5, -2.0], &device));
        bn.beta = burn::module::Param::from_tensor(Tensor::from_floats([0.1, 3.0, 0.0], &device));
        bn.running_mean =
            burn::module::RunningState::new(Tensor::from_floats([0.2, -1.0, 0.5], &device));
        bn.running_var =
            burn::module::RunningState::new(Tensor::from_floats([0.5, 2.0, 4.0], &device));
        let x = Tensor::<4>::random([2, 3, 4, 5], Distribution::Normal(0.0, 4.0), &device);
        for act in [Act::None, Act::Relu, Act::Relu6] {
            let ours = bn_act_eval(&x, &bn, act, Layout::Planar, None).unwrap();
            let z = bn.forward(x.clone());
            let activate = |z: Tensor<4>| match act {
                Act::None => z,
                Act::Relu => relu(z),
                Act::Relu6 => z.clamp(0.0, 6.0),
            };
            assert!(max_rel_diff(ours, activate(z.clone())) < 1e-5, "{act:?}");
            let skip = Tensor::<4>::random([2, 3, 4, 5], Distribution::Normal(0.0, 3.0), &device);
            let ours = bn_act_eval(&x, &bn, act, Layout::Planar, Some(&skip)).unwrap();
            assert!(
                max_rel_diff(ours, activate(z + skip)) < 1e-5,
                "{act:?} with a residual"
            );
        }
    }

    /// Channels-last (`[n, h, w, c]`) gives the planar op's output, statistics and
    /// gradients turned channels-last, in training and in evaluation; 1e-5 relative.
    #[test]
    fn channels_last_matches_planar() {
        let device = crate::Backend::Flex.device().autodiff();
        let nhwc = |t: Tensor<4>| t.permute([0, 2, 3, 1]);
        let floats = |v: &Vec<f32>| Tensor::<1>::from_floats(v.as_slice(), &device);
        for act in [Act::None, Act::Relu, Act::Relu6] {
            let eps = BatchNormConfig::new(6).init(&device).epsilon;
            let gamma =
                Tensor::<1>::random([6], Distribution::Uniform(0.5, 2.0), &device).require_grad();
            let beta =
                Tensor::<1>::random([6], Distribution::Uniform(-1.0, 4.0), &device).require_grad();
            let x = Tensor::<4>::random([3, 6, 9, 9], Distribution::Normal(0.5, 3.0), &device)
                .require_grad();
            // A residual too (MobileNet-V2's blocks add theirs channels-last).
            let skip = Tensor::<4>::random([3, 6, 9, 9], Distribution::Default, &device);
            let sl = nhwc(skip.clone());
            let (sp, sl) = if act == Act::None {
                (Some(&skip), Some(&sl))
            } else {
                (None, None)
            };
            let planar = bn_act_train(&x, &gamma, &beta, eps, act, Layout::Planar, sp).unwrap();
            let xl = nhwc(x.clone());
            let cl = bn_act_train(&xl, &gamma, &beta, eps, act, Layout::ChannelsLast, sl).unwrap();
            assert!(
                max_rel_diff(cl.y.clone(), nhwc(planar.y.clone())) < 1e-5,
                "{act:?} y"
            );
            assert!(
                max_rel_diff(floats(&cl.mean), floats(&planar.mean)) < 1e-5,
                "{act:?} mean"
            );
            assert!(
                max_rel_diff(floats(&cl.var), floats(&planar.var)) < 1e-5,
                "{act:?} var"
            );
            let upstream = Tensor::<4>::random([3, 6, 9, 9], Distribution::Default, &device);
            let g_planar = (planar.y * upstream.clone()).sum().backward();
            let g_cl = (cl.y * nhwc(upstream)).sum().backward();
            for (t, name) in [(&gamma, "dgamma"), (&beta, "dbeta")] {
                let (a, b) = (t.grad(&g_cl).unwrap(), t.grad(&g_planar).unwrap());
                assert!(max_rel_diff(a, b) < 1e-5, "{act:?} {name}");
            }
            let (a, b) = (x.grad(&g_cl).unwrap(), x.grad(&g_planar).unwrap());
            assert!(max_rel_diff(a, b) < 1e-5, "{act:?} dx");

            let eval_bn = BatchNormConfig::new(6).init(&crate::Backend::Flex.device());
            let xe = x.clone().inner();
            let pe = bn_act_eval(&xe, &eval_bn, act, Layout::Planar, None).unwrap();
            let ce = bn_act_eval(&nhwc(xe), &eval_bn, act, Layout::ChannelsLast, None).unwrap();
            assert!(max_rel_diff(ce, nhwc(pe)) < 1e-5, "{act:?} evaluation");
        }
    }

    /// Output, batch statistics and all three gradients equal Burn's `BatchNorm` followed by
    /// Burn's activation, for each activation; tolerance 1e-4 relative to the largest value.
    #[test]
    fn matches_burn_batch_norm_and_activation() {
        for residual in [false, true] {
            matches_burn_ops(residual);
        }
    }

    /// [`bn_act_train`] against Burn's ops (BatchNorm from tensor ops, `+ skip` when
    /// `residual`, the activation): outputs, statistics and every gradient, the skip's too.
    fn matches_burn_ops(residual: bool) {
        let device = crate::Backend::Flex.device().autodiff();
        for act in [Act::None, Act::Relu, Act::Relu6] {
            let bn = BatchNormConfig::new(5).init(&device);
            let gamma =
                Tensor::<1>::random([5], Distribution::Uniform(0.5, 2.0), &device).require_grad();
            let beta =
                Tensor::<1>::random([5], Distribution::Uniform(-1.0, 4.0), &device).require_grad();
            // Scaled so that ReLU6's upper bound is crossed too.
            let x = Tensor::<4>::random([4, 5, 3, 6], Distribution::Normal(0.5, 3.0), &device)
                .require_grad();
            let skip = Tensor::<4>::random([4, 5, 3, 6], Distribution::Normal(0.0, 2.0), &device)
                .require_grad();
            let skip_in = residual.then_some(&skip);
            let ours =
                bn_act_train(&x, &gamma, &beta, bn.epsilon, act, Layout::Planar, skip_in).unwrap();

            let [n, c, h, w] = x.dims();
            let flat = x.clone().swap_dims(0, 1).reshape([c, n * h * w]);
            let mean = flat.clone().mean_dim(1);
            let var = (flat - mean.clone()).square().mean_dim(1);
            let xhat = (x.clone() - mean.clone().reshape([1, c, 1, 1]))
                / (var.clone().reshape([1, c, 1, 1]) + bn.epsilon).sqrt();
            let z = xhat * gamma.clone().reshape([1, c, 1, 1]) + beta.clone().reshape([1, c, 1, 1]);
            let z = if residual { z + skip.clone() } else { z };
            let theirs = match act {
                Act::None => z,
                Act::Relu => relu(z),
                Act::Relu6 => z.clamp(0.0, 6.0),
            };
            assert!(
                max_rel_diff(ours.y.clone(), theirs.clone()) < 1e-4,
                "{act:?} y"
            );
            let m = Tensor::<1>::from_floats(ours.mean.as_slice(), &device);
            let v = Tensor::<1>::from_floats(ours.var.as_slice(), &device);
            assert!(max_rel_diff(m, mean.reshape([c])) < 1e-5, "{act:?} mean");
            assert!(max_rel_diff(v, var.reshape([c])) < 1e-5, "{act:?} var");

            let upstream = Tensor::<4>::random([n, c, h, w], Distribution::Default, &device);
            let g_ours = (ours.y * upstream.clone()).sum().backward();
            let g_theirs = (theirs * upstream).sum().backward();
            let dx = |g| x.grad(g).unwrap();
            assert!(
                max_rel_diff(dx(&g_ours), dx(&g_theirs)) < 1e-4,
                "{act:?} dx"
            );
            let dg = |g| gamma.grad(g).unwrap();
            assert!(
                max_rel_diff(dg(&g_ours), dg(&g_theirs)) < 1e-4,
                "{act:?} dgamma"
            );
            let db = |g| beta.grad(g).unwrap();
            assert!(
                max_rel_diff(db(&g_ours), db(&g_theirs)) < 1e-4,
                "{act:?} dbeta"
            );
            if residual {
                let ds = |g| skip.grad(g).unwrap();
                assert!(
                    max_rel_diff(ds(&g_ours), ds(&g_theirs)) < 1e-6,
                    "{act:?} dskip"
                );
            } else {
                assert!(skip.grad(&g_ours).is_none(), "no skip, no gradient for it");
            }
        }
    }
}
