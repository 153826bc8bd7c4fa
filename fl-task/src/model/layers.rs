//! Small building blocks shared by the models: conv + BatchNorm (+ activation).
//!
//! Training-mode BatchNorm is computed here from plain tensor operations rather than by
//! `burn::nn::BatchNorm::forward`: on the `flex` backend Burn's fused op transposes the
//! activation twice per pass (`swap_dims(0, 1)` then a contiguous copy) and reduces it with
//! broadcasts, which made BatchNorm forward + backward about a quarter of a ResNet-18 training
//! step. The version here reduces contiguous axes only and is about twice as fast with the same
//! result (see `fl-job/TRAINING.md`). Evaluation still uses Burn's op, which is cheap.
//!
//! For the same reason 1 × 1 convolutions (ResNet shortcuts, MobileNet expansions and
//! projections) train as matrix products: Burn differentiates a convolution with a transposed
//! convolution and a batch-as-channels convolution, which for a 1 × 1 kernel cost 2–10× the
//! matrix products that compute the same gradients. The weights keep the `Conv2d` layout.

use std::cell::Cell;

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Initializer, PaddingConfig2d};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor, s};

use super::bn_op;
use super::conv_op::{self, Layout};
use super::running;

pub(crate) use fl_kernels::Act;

/// Convolution without bias (BatchNorm follows), then BatchNorm, then an activation.
#[derive(Module, Debug)]
pub struct ConvBn {
    conv: Conv2d,
    bn: BatchNorm,
    /// 0 = none, 1 = ReLU, 2 = ReLU6; a `u8` because module constants must be primitives.
    act: u8,
}

impl ConvBn {
    /// `kernel` × `kernel` convolution with "same" padding for odd kernels, initialised by
    /// Burn's default (Kaiming-uniform over the fan-in, PyTorch's default too).
    pub(crate) fn new(
        channels: [usize; 2],
        kernel: usize,
        stride: usize,
        groups: usize,
        act: Act,
        device: &Device,
    ) -> Self {
        let init = Conv2dConfig::new(channels, [kernel, kernel]).initializer;
        Self::with_init(channels, kernel, stride, groups, act, init, device)
    }

    /// [`ConvBn::new`] with the convolution's weights drawn from `init`.
    pub(crate) fn with_init(
        channels: [usize; 2],
        kernel: usize,
        stride: usize,
        groups: usize,
        act: Act,
        init: Initializer,
        device: &Device,
    ) -> Self {
        let pad = kernel / 2;
        let conv = Conv2dConfig::new(channels, [kernel, kernel])
            .with_stride([stride, stride])
            .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
            .with_groups(groups)
            .with_bias(false)
            .with_initializer(init)
            .init(device);
        let bn = BatchNormConfig::new(channels[1]).init(device);
        let act = match act {
            Act::None => 0,
            Act::Relu => 1,
            Act::Relu6 => 2,
        };
        Self { conv, bn, act }
    }

    /// Forward pass on `[n, c, h, w]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        self.forward_in(x, Layout::Planar)
    }

    /// Forward pass on an activation in `layout`, the result in the same layout.
    /// Channels-last runs on the kernels only: where they do not apply (Burn's ops chosen,
    /// another backend) the activation is turned planar for this layer and back.
    pub(crate) fn forward_in(&self, x: Tensor<4>, layout: Layout) -> Tensor<4> {
        let act = match self.act {
            1 => Act::Relu,
            2 => Act::Relu6,
            _ => Act::None,
        };
        self.forward_with(x, None, act, layout)
    }

    /// A residual block's last layer and its sum: `act(BatchNorm(conv(x)) + skip)`, `act`
    /// applied after the sum (this layer's own activation must be none). On the kernels the
    /// BatchNorm, the sum and the activation are one op (`bn_op`), forward and backward;
    /// elsewhere Burn's ops, with the same result.
    pub(crate) fn forward_add(
        &self,
        x: Tensor<4>,
        skip: Tensor<4>,
        act: Act,
        layout: Layout,
    ) -> Tensor<4> {
        assert_eq!(
            self.act, 0,
            "ConvBn::forward_add: the layer has its own activation"
        );
        self.forward_with(x, Some(skip), act, layout)
    }

    /// [`ConvBn::forward_in`] with `skip` added before the activation `act`.
    fn forward_with(
        &self,
        x: Tensor<4>,
        skip: Option<Tensor<4>>,
        act: Act,
        layout: Layout,
    ) -> Tensor<4> {
        if layout == Layout::ChannelsLast && !conv_op::handles(&self.conv, &x, layout) {
            let planar = |t: Tensor<4>| t.permute([0, 3, 1, 2]);
            let skip = skip.map(planar);
            let y = self.forward_with(planar(x), skip, act, Layout::Planar);
            return y.permute([0, 2, 3, 1]);
        }
        // The same condition as `BatchNorm::forward` for using batch statistics, or a
        // re-estimation of the running statistics (`with_bn_momentum`), which uses them too.
        let training = x.is_autodiff() && self.bn.training.is_enabled();
        let batch_stats = training || MOMENTUM.get().is_some();
        let skip_ref = skip.as_ref();
        if !batch_stats
            && let Some(y) =
                conv_op::conv_bn_act_eval(&self.conv, &self.bn, act, &x, layout, skip_ref)
        {
            return y;
        }
        let pointwise = self.conv.kernel_size == [1, 1] && self.conv.groups == 1;
        let x = if let Some(y) = conv_op::conv2d(&self.conv, &x, layout) {
            y
        } else if training && pointwise {
            conv1x1_train(&self.conv, x)
        } else {
            self.conv.forward(x)
        };
        if batch_stats && conv_op::cpu_kernels() {
            let bn = &self.bn;
            let (gamma, beta) = (bn.gamma.val(), bn.beta.val());
            let out = if training {
                bn_op::bn_act_train(&x, &gamma, &beta, bn.epsilon, act, layout, skip_ref)
            } else {
                bn_op::bn_act_batch(&x, &gamma, &beta, bn.epsilon, act, layout, skip_ref)
            };
            if let Some(out) = out {
                update_running(bn, &out.mean, &out.var);
                return out.y;
            }
        }
        if !batch_stats
            && conv_op::cpu_kernels()
            && let Some(y) = bn_op::bn_act_eval(&x, &self.bn, act, layout, skip_ref)
        {
            return y;
        }
        // Burn's ops from here on are planar; a channels-last activation never gets here
        // (`conv_op::handles` promised the kernels above).
        debug_assert_eq!(
            layout,
            Layout::Planar,
            "channels-last reached Burn's BatchNorm"
        );
        let x = if batch_stats {
            batch_norm_train(&self.bn, x)
        } else {
            self.bn.forward(x)
        };
        let x = match skip {
            Some(skip) => x + skip,
            None => x,
        };
        match act {
            Act::Relu => relu(x),
            Act::Relu6 => x.clamp(0.0, 6.0),
            Act::None => x,
        }
    }
}

/// A bias-free, unpadded 1 × 1 convolution with stride as a matrix product over channels.
///
/// Two layouts, each the faster on its side of the rule below, mostly by 2× or more (measured on
/// every 1 × 1 shape of both models): a per-sample product `[c_out, c_in] · [c_in, h·w]` whose
/// weight gradient sums `n` matrices of `c_out × c_in`, which wins while that is smaller than
/// the activations; otherwise one product over `[c_in, n·h·w]`, which pays for transposing the
/// activations into and out of that layout.
fn conv1x1_train(conv: &Conv2d, x: Tensor<4>) -> Tensor<4> {
    debug_assert!(conv.bias.is_none(), "ConvBn convolutions have no bias");
    let [sh, sw] = conv.stride;
    let [_, _, h, w] = x.dims();
    let x = if sh > 1 || sw > 1 {
        x.slice(s![.., .., 0..h;sh, 0..w;sw])
    } else {
        x
    };
    let [n, cin, h, w] = x.dims();
    let weight = conv.weight.val();
    let cout = weight.dims()[0];
    let weight = weight.reshape([cout, cin]);
    if cout * cin <= (cin + cout) * h * w {
        weight
            .unsqueeze::<3>()
            .matmul(x.reshape([n, cin, h * w]))
            .reshape([n, cout, h, w])
    } else {
        weight
            .matmul(x.swap_dims(0, 1).reshape([cin, n * h * w]))
            .reshape([cout, n, h, w])
            .swap_dims(0, 1)
    }
}

/// BatchNorm with batch statistics, as `BatchNorm::forward` in training mode computes it: biased
/// variance, `epsilon` inside the square root, and the running statistics updated with the
/// layer's momentum from the biased variance. Gradients flow through the statistics as usual.
fn batch_norm_train(bn: &BatchNorm, x: Tensor<4>) -> Tensor<4> {
    let [n, c, h, w] = x.dims();
    let count = (n * h * w) as f64;
    // `[n, c, h·w]` is a free view of the contiguous activation; summing over the batch axis
    // first, then over the (now 1/n as large) spatial axis, keeps every pass contiguous.
    let x = x.reshape([n, c, h * w]);
    let mean = x.clone().sum_dim(0).sum_dim(2).div_scalar(count);
    let centred = x - mean.clone();
    let var = centred
        .clone()
        .square()
        .sum_dim(0)
        .sum_dim(2)
        .div_scalar(count);
    let scale =
        bn.gamma.val().reshape([1, c, 1]) * var.clone().add_scalar(bn.epsilon).sqrt().recip();
    let y = centred * scale + bn.beta.val().reshape([1, c, 1]);

    let values = |t: Tensor<3>| -> Vec<f32> {
        t.detach()
            .into_data()
            .try_to_vec::<f32>()
            .expect("BatchNorm statistics are f32")
    };
    update_running(bn, &values(mean), &values(var));
    y.reshape([n, c, h, w])
}

thread_local! {
    /// While set (by [`with_bn_momentum`]), every BatchNorm on this thread normalises with
    /// its batch's statistics, also without autodiff, and moves its running statistics by
    /// this momentum instead of the layer's own.
    static MOMENTUM: Cell<Option<f64>> = const { Cell::new(None) };
}

/// Runs `f` with every BatchNorm on this thread in batch-statistics mode, its running
/// statistics moved by `momentum` instead of the layer's own (the forward passes run where
/// they are called). Why: the statistics' re-estimation (`crate::calibrate`) needs a
/// cumulative mean over its batches, a momentum of `batch / samples so far`, while
/// `momentum` is a constant of Burn's layer; and it needs no gradients, so plain tensors
/// (no autodiff graph to build and drop) take the batch statistics too.
pub(crate) fn with_bn_momentum<R>(momentum: f64, f: impl FnOnce() -> R) -> R {
    /// Restores the previous mode also when `f` panics: pool threads outlive the call, and
    /// one left in this mode would evaluate with batch statistics from then on.
    struct Restore(Option<f64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            MOMENTUM.set(self.0);
        }
    }
    let _restore = Restore(MOMENTUM.replace(Some(momentum)));
    f()
}

/// Moves the running statistics towards this batch's mean and biased variance by the
/// layer's momentum (or the one [`with_bn_momentum`] set), as `BatchNorm::forward` does in
/// training; kept as plain values while a training runs (`running.rs`).
fn update_running(bn: &BatchNorm, mean: &[f32], var: &[f32]) {
    running::update(bn, MOMENTUM.get().unwrap_or(bn.momentum), mean, var);
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::tensor::{Distribution, Tensor};

    use super::*;

    fn max_diff<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> f32 {
        (a - b).abs().max().into_scalar::<f32>()
    }

    /// Output, gradients and running statistics agree with Burn's own training-mode BatchNorm.
    #[test]
    fn batch_norm_train_matches_burn() {
        let device = crate::Backend::Flex.device().autodiff();
        // Two layers with equal values: clones would share their running statistics.
        let layer = || {
            let mut bn = BatchNormConfig::new(3).init(&device);
            bn.gamma = Param::from_tensor(Tensor::from_floats([0.5, 1.5, -2.0], &device));
            bn.beta = Param::from_tensor(Tensor::from_floats([0.1, -0.3, 0.0], &device));
            bn
        };
        let (bn, burn_bn) = (layer(), layer());
        let x = Tensor::<4>::random([4, 3, 5, 5], Distribution::Normal(1.0, 2.0), &device)
            .require_grad();
        let upstream = Tensor::<4>::random([4, 3, 5, 5], Distribution::Default, &device);

        let ours = batch_norm_train(&bn, x.clone());
        let theirs = burn_bn.forward(x.clone());
        assert!(max_diff(ours.clone(), theirs.clone()) < 1e-5);

        let g_ours = (ours * upstream.clone()).sum().backward();
        let g_theirs = (theirs * upstream).sum().backward();
        let grad = |t: &Tensor<1>, g| t.grad(g).unwrap();
        assert!(max_diff(x.grad(&g_ours).unwrap(), x.grad(&g_theirs).unwrap()) < 1e-5);
        assert!(
            max_diff(
                grad(&bn.gamma.val(), &g_ours),
                grad(&burn_bn.gamma.val(), &g_theirs)
            ) < 1e-4
        );
        assert!(
            max_diff(
                grad(&bn.beta.val(), &g_ours),
                grad(&burn_bn.beta.val(), &g_theirs)
            ) < 1e-4
        );
        assert!(max_diff(bn.running_mean.value(), burn_bn.running_mean.value()) < 1e-6);
        assert!(max_diff(bn.running_var.value(), burn_bn.running_var.value()) < 1e-5);
    }

    /// Both layouts of the 1 × 1 product, with and without stride, match `Conv2d` in value and
    /// gradients (odd sizes, so a stride-2 slice must round up as the convolution does).
    #[test]
    fn conv1x1_train_matches_conv2d() {
        let device = crate::Backend::Flex.device().autodiff();
        // (c_in, c_out, size, stride): the first two take the per-sample layout, the last
        // two the transposed one.
        for (cin, cout, size, stride) in
            [(3, 5, 7, 1), (4, 6, 9, 2), (24, 40, 3, 1), (16, 32, 5, 2)]
        {
            let conv = Conv2dConfig::new([cin, cout], [1, 1])
                .with_stride([stride, stride])
                .with_bias(false)
                .init(&device);
            let x = Tensor::<4>::random([2, cin, size, size], Distribution::Default, &device)
                .require_grad();
            let ours = conv1x1_train(&conv, x.clone());
            let theirs = conv.forward(x.clone());
            assert_eq!(ours.dims(), theirs.dims());
            assert!(max_diff(ours.clone(), theirs.clone()) < 1e-5);
            let upstream = Tensor::<4>::random(ours.dims(), Distribution::Default, &device);
            let g_ours = (ours * upstream.clone()).sum().backward();
            let g_theirs = (theirs * upstream).sum().backward();
            let w = conv.weight.val();
            assert!(max_diff(x.grad(&g_ours).unwrap(), x.grad(&g_theirs).unwrap()) < 1e-5);
            assert!(max_diff(w.grad(&g_ours).unwrap(), w.grad(&g_theirs).unwrap()) < 1e-4);
        }
    }
}
