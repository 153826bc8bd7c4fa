//! The models' convolutions as one custom Burn op on the `flex` CPU backend, with its own
//! backward pass (the kernels are the fl-kernels crate's).
//!
//! Burn's autodiff takes every op's backward from the backend, so a faster convolution
//! gradient cannot be written as a layer over tensor ops. Instead [`conv2d`] takes the
//! tensors down to their backend primitives (`Tensor::try_into_primitive`, Burn's `extension`
//! feature): on `Autodiff<Flex>` it registers a [`Backward`] step whose gradients come from
//! our kernels; on plain `Flex` (evaluation) it runs the forward kernel. On any other backend
//! (wgpu, cuda, ndarray) it returns `None` and the caller uses Burn's `Conv2d`.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::{Autodiff, Flex};
use burn::nn::PaddingConfig2d;
use burn::nn::conv::Conv2d;
use burn::tensor::{Tensor, TensorData};

use std::sync::atomic::{AtomicBool, Ordering};

use fl_kernels::{Act, Epilogue, Geom};
use fl_kernels::{channels_last, conv};

use super::by_client;

static CPU_KERNELS: AtomicBool = AtomicBool::new(true);

/// Chooses, for the whole process, whether the models' convolutions and training-mode
/// BatchNorm + activation run on fl-job's own CPU kernels (the default) or on Burn's ops.
/// Only the `flex` backend has the kernels; others always use Burn's ops. Turning them off
/// is for measuring what they gain (`fl-job bench --burn-ops`) and for tests that compare
/// the two; the gradients agree (see `tests/training.rs`).
pub fn set_cpu_kernels(enabled: bool) {
    CPU_KERNELS.store(enabled, Ordering::Relaxed);
}

/// Whether fl-job's own CPU kernels are in use (see [`set_cpu_kernels`]).
pub fn cpu_kernels() -> bool {
    CPU_KERNELS.load(Ordering::Relaxed)
}

/// The autodiff backend `Device::flex().autodiff()` builds.
type FlexAd = Autodiff<Flex, NoCheckpointing>;

/// How a model lays out its activations: Burn's `[n, c, h, w]` (ResNet-18), or channels
/// innermost, `[n, h, w, c]` (MobileNet-V2 on the kernels: `fl_kernels::channels_last`).
/// Weights are `[cout, cin/groups, k, k]` either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `[n, c, h, w]`.
    Planar,
    /// `[n, h, w, c]`.
    ChannelsLast,
}

impl Layout {
    /// `[n, c, h, w]` from a tensor's dimensions in this layout.
    pub(crate) fn nchw(self, [a, b, c, d]: [usize; 4]) -> [usize; 4] {
        match self {
            Layout::Planar => [a, b, c, d],
            Layout::ChannelsLast => [a, d, b, c],
        }
    }

    /// A tensor's dimensions in this layout from `[n, c, h, w]`.
    pub(crate) fn dims(self, [n, c, h, w]: [usize; 4]) -> [usize; 4] {
        match self {
            Layout::Planar => [n, c, h, w],
            Layout::ChannelsLast => [n, h, w, c],
        }
    }
}

/// Whether `x` lives on the `flex` backend (with or without autodiff), where the kernels run.
pub(crate) fn on_flex(x: &Tensor<4>) -> bool {
    x.clone().try_into_primitive::<FlexAd>().is_ok()
        || x.clone().try_into_primitive::<Flex>().is_ok()
}

/// Whether [`conv2d`] and the BatchNorm ops of `bn_op` run for this layer and input: the
/// kernels are on, `x` is on `flex`, and the geometry is one they handle.
pub(crate) fn handles(conv: &Conv2d, x: &Tensor<4>, layout: Layout) -> bool {
    let dims = layout.nchw(x.dims());
    cpu_kernels()
        && (geometry(conv, dims).is_some() || client_geometry(conv, dims).is_some())
        && on_flex(x)
}

fn kernel_forward(
    g: &Geom,
    layout: Layout,
    x: &[f32],
    w: &[f32],
    epilogue: Option<&Epilogue<'_>>,
) -> Vec<f32> {
    match layout {
        Layout::Planar => conv::forward_fused(g, x, w, epilogue),
        Layout::ChannelsLast => channels_last::forward(g, x, w, epilogue),
    }
}

/// `conv.forward(x)` through our kernels, `x` and the result in `layout`, or `None` when
/// this convolution or backend is not one they handle (then the caller falls back to
/// `Conv2d::forward`).
pub(crate) fn conv2d(conv: &Conv2d, x: &Tensor<4>, layout: Layout) -> Option<Tensor<4>> {
    if !cpu_kernels() {
        return None;
    }
    match geometry(conv, layout.nchw(x.dims())) {
        Some(geom) => run(geom, 1, x, conv.weight.val(), layout),
        None => grouped_by_client(conv, x, layout),
    }
}

/// A convolution grouped by client (`model/stacked.rs`: `groups` networks side by side,
/// each group of channels one client's layer), each group on the dense kernel its client's
/// lone layer runs (`by_client.rs`). `None` where a group is not a dense convolution the
/// kernels handle.
fn grouped_by_client(conv: &Conv2d, x: &Tensor<4>, layout: Layout) -> Option<Tensor<4>> {
    let geom = client_geometry(conv, layout.nchw(x.dims()))?;
    run(geom, conv.groups, x, conv.weight.val(), layout)
}

/// One client's dense geometry of a convolution grouped by client, if it is one.
fn client_geometry(conv: &Conv2d, [n, cin, h, w]: [usize; 4]) -> Option<Geom> {
    let groups = conv.groups;
    let [cout, cin_per, kh, kw] = conv.weight.shape().dims();
    if groups <= 1 || cin != groups * cin_per || cout % groups != 0 {
        return None;
    }
    geometry_of(
        conv,
        [cout / groups, cin_per, kh, kw],
        1,
        [n, cin_per, h, w],
    )
}

/// `clients` convolutions of geometry `geom` side by side on the kernels (1: a lone dense
/// or depthwise layer), tracked by autodiff where `x` or `weight` is.
fn run(
    geom: Geom,
    clients: usize,
    x: &Tensor<4>,
    weight: Tensor<4>,
    layout: Layout,
) -> Option<Tensor<4>> {
    if let (Ok(xp), Ok(wp)) = (
        x.clone().try_into_primitive::<FlexAd>(),
        weight.clone().try_into_primitive::<FlexAd>(),
    ) {
        return Some(Tensor::from_primitive::<FlexAd>(conv_autodiff(
            xp,
            wp,
            (geom, clients),
            layout,
        )));
    }
    if let (Ok(xp), Ok(wp)) = (
        x.clone().try_into_primitive::<Flex>(),
        weight.try_into_primitive::<Flex>(),
    ) {
        let out = forward_on(&geom, clients, layout, &slice(&xp), &slice(&wp));
        return Some(Tensor::from_primitive::<Flex>(flex_tensor(
            out,
            &out_shape(&geom, clients, layout),
        )));
    }
    None
}

/// The forward kernel of `clients` convolutions of geometry `geom` side by side.
fn forward_on(geom: &Geom, clients: usize, layout: Layout, x: &[f32], w: &[f32]) -> Vec<f32> {
    if clients == 1 {
        kernel_forward(geom, layout, x, w, None)
    } else {
        by_client::forward(geom, clients, layout == Layout::ChannelsLast, x, w)
    }
}

/// Evaluation-mode `act(bn(conv(x)))` in one kernel pass on plain `Flex`: BatchNorm's
/// running statistics folded into a per-channel scale and shift that the convolution applies
/// as it writes each output plane. `None` where [`conv2d`] would not run or `x` is tracked by
/// autodiff (training normalises with batch statistics instead).
pub(crate) fn conv_bn_act_eval(
    conv: &Conv2d,
    bn: &burn::nn::BatchNorm,
    act: Act,
    x: &Tensor<4>,
    layout: Layout,
    skip: Option<&Tensor<4>>,
) -> Option<Tensor<4>> {
    if !cpu_kernels() {
        return None;
    }
    let skip = match skip {
        None => None,
        Some(r) => Some(r.clone().try_into_primitive::<Flex>().ok()?),
    };
    let geom = geometry(conv, layout.nchw(x.dims()))?;
    let prim = |t: Tensor<1>| t.try_into_primitive::<Flex>().ok();
    let xp = x.clone().try_into_primitive::<Flex>().ok()?;
    let wp = conv.weight.val().try_into_primitive::<Flex>().ok()?;
    let (gamma, beta) = (prim(bn.gamma.val())?, prim(bn.beta.val())?);
    let (mean, var) = (
        prim(bn.running_mean.value())?,
        prim(bn.running_var.value())?,
    );
    let eps = bn.epsilon as f32;
    // The same arithmetic as the unfused evaluation BatchNorm (`bn_op::bn_act_eval`).
    let scale: Vec<f32> = slice(&gamma)
        .iter()
        .zip(slice(&var).iter())
        .map(|(g, v)| g * (1.0 / (v + eps).sqrt()))
        .collect();
    let shift: Vec<f32> = slice(&beta)
        .iter()
        .zip(slice(&mean).iter())
        .zip(&scale)
        .map(|((b, m), s)| b - m * s)
        .collect();
    if scale.len() != geom.cout || shift.len() != geom.cout {
        return None;
    }
    // With a residual the activation comes after the sum.
    let epilogue = Epilogue {
        scale: &scale,
        shift: &shift,
        act: if skip.is_some() { Act::None } else { act },
    };
    let mut out = kernel_forward(&geom, layout, &slice(&xp), &slice(&wp), Some(&epilogue));
    if let Some(r) = &skip {
        let r = slice(r);
        if r.len() != out.len() {
            return None;
        }
        fl_kernels::batchnorm::add_activate(&mut out, &r, act);
    }
    Some(Tensor::from_primitive::<Flex>(flex_tensor(
        out,
        &out_shape(&geom, 1, layout),
    )))
}

/// The kernels' geometry for this layer and input, if they handle it: no bias, no dilation,
/// square kernel, equal strides, symmetric explicit padding, dense or depthwise.
fn geometry(conv: &Conv2d, x: [usize; 4]) -> Option<Geom> {
    geometry_of(conv, conv.weight.shape().dims(), conv.groups, x)
}

/// [`geometry`] with the weight's dims and the groups given (one group of a grouped layer).
fn geometry_of(
    conv: &Conv2d,
    [cout, cin_per, kh, kw]: [usize; 4],
    groups: usize,
    [n, cin, h, w]: [usize; 4],
) -> Option<Geom> {
    let pad = match conv.padding {
        PaddingConfig2d::Explicit(top, left, bottom, right)
            if top == left && left == bottom && bottom == right =>
        {
            top
        }
        PaddingConfig2d::Valid => 0,
        _ => return None,
    };
    let depthwise = groups > 1;
    let supported = conv.bias.is_none()
        && conv.dilation == [1, 1]
        && kh == kw
        && conv.stride[0] == conv.stride[1]
        && conv.stride[0] >= 1
        && h + 2 * pad >= kh
        && w + 2 * pad >= kw
        && if depthwise {
            groups == cin && cout == cin && cin_per == 1
        } else {
            cin_per == cin
        };
    supported.then_some(Geom {
        n,
        cin,
        h,
        w,
        cout,
        k: kh,
        stride: conv.stride[0],
        pad,
        depthwise,
    })
}

fn out_shape(g: &Geom, clients: usize, layout: Layout) -> [usize; 4] {
    layout.dims([g.n, clients * g.cout, g.ho(), g.wo()])
}

/// A contiguous `f32` copy-free view of a flex tensor (copied only if it is strided).
pub(super) fn slice(t: &FlexTensor) -> std::borrow::Cow<'_, [f32]> {
    match t.as_slice::<f32>() {
        Some(s) if t.is_contiguous() => std::borrow::Cow::Borrowed(s),
        _ => std::borrow::Cow::Owned(
            t.to_contiguous()
                .as_slice::<f32>()
                .expect("fl-job kernels: flex tensor is not f32")
                .to_vec(),
        ),
    }
}

/// A contiguous flex tensor of these values.
pub(crate) fn flex_tensor(values: Vec<f32>, shape: &[usize]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape.to_vec()))
}

/// The backward step: input and weight gradients from the saved input and weight.
#[derive(Debug)]
struct ConvBackward;

impl Backward<Flex, 2> for ConvBackward {
    /// Input, weight (both flex primitives, shared, not copied), one client's geometry and
    /// the clients side by side, and the layout.
    type State = (FlexTensor, FlexTensor, (Geom, usize), Layout);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let [node_x, node_w] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let (x, w, (geom, clients), layout) = ops.state;
        let (x, w, grad) = (slice(&x), slice(&w), slice(&grad));
        let want = (node_x.is_some(), node_w.is_some());
        let (dx, dw) = match layout {
            _ if clients > 1 => by_client::backward(
                &geom,
                clients,
                layout == Layout::ChannelsLast,
                (&x, &w, &grad),
                want,
            ),
            Layout::Planar => conv::backward(&geom, &x, &w, &grad, want.0, want.1),
            Layout::ChannelsLast => channels_last::backward(&geom, &x, &w, &grad, want.0, want.1),
        };
        if let (Some(node), Some(dx)) = (node_x, dx) {
            let shape = layout.dims([geom.n, clients * geom.cin, geom.h, geom.w]);
            grads.register::<Flex>(node.id, flex_tensor(dx, &shape));
        }
        if let (Some(node), Some(dw)) = (node_w, dw) {
            let cin_per = if geom.depthwise { 1 } else { geom.cin };
            let shape = [clients * geom.cout, cin_per, geom.k, geom.k];
            grads.register::<Flex>(node.id, flex_tensor(dw, &shape));
        }
    }
}

fn conv_autodiff(
    x: burn::backend::tensor::FloatTensor<FlexAd>,
    w: burn::backend::tensor::FloatTensor<FlexAd>,
    (geom, clients): (Geom, usize),
    layout: Layout,
) -> burn::backend::tensor::FloatTensor<FlexAd> {
    let prep = ConvBackward
        .prepare::<NoCheckpointing>([x.node(), w.node()])
        .compute_bound()
        .stateful();
    let (xp, wp) = (x.into_primitive(), w.into_primitive());
    let out = forward_on(&geom, clients, layout, &slice(&xp), &slice(&wp));
    let out = flex_tensor(out, &out_shape(&geom, clients, layout));
    match prep {
        OpsKind::Tracked(prep) => prep.finish((xp, wp, (geom, clients), layout), out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    }
}

#[cfg(test)]
mod tests {
    use burn::nn::conv::Conv2dConfig;
    use burn::tensor::Distribution;

    use super::*;

    fn max_rel_diff<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> f32 {
        let scale = b.clone().abs().max().into_scalar::<f32>().max(1.0);
        (a - b).abs().max().into_scalar::<f32>() / scale
    }

    /// A bias-free `k × k` convolution with "same" padding, as `ConvBn` builds them.
    fn layer(
        channels: [usize; 2],
        k: usize,
        stride: usize,
        groups: usize,
        device: &burn::tensor::Device,
    ) -> Conv2d {
        Conv2dConfig::new(channels, [k, k])
            .with_stride([stride, stride])
            .with_padding(PaddingConfig2d::Explicit(k / 2, k / 2, k / 2, k / 2))
            .with_groups(groups)
            .with_bias(false)
            .init(device)
    }

    /// `(batch, c_in, c_out, size, kernel, stride, groups)`.
    type Case = (usize, usize, usize, usize, usize, usize, usize);

    /// [`conv2d`] in `layout` against Burn's `Conv2d` (its input and output turned into
    /// `layout`): output, input gradient and weight gradient on random inputs, tolerance
    /// 1e-5 relative to the largest value.
    fn check_against_burn(cases: &[Case], layout: Layout) {
        let device = crate::Backend::Flex.device().autodiff();
        let to = |t: Tensor<4>| match layout {
            Layout::Planar => t,
            Layout::ChannelsLast => t.permute([0, 2, 3, 1]),
        };
        for &(n, cin, cout, size, k, stride, groups) in cases {
            let conv = layer([cin, cout], k, stride, groups, &device);
            let x = Tensor::<4>::random([n, cin, size, size], Distribution::Default, &device)
                .require_grad();
            let ours = conv2d(&conv, &to(x.clone()), layout).expect("flex autodiff is handled");
            let theirs = to(conv.forward(x.clone()));
            assert_eq!(ours.dims(), theirs.dims());
            assert!(max_rel_diff(ours.clone(), theirs.clone()) < 1e-5);

            let upstream = Tensor::<4>::random(ours.dims(), Distribution::Default, &device);
            let g_ours = (ours * upstream.clone()).sum().backward();
            let g_theirs = (theirs * upstream).sum().backward();
            let dx = |g| x.grad(g).unwrap();
            let dw = |g| conv.weight.val().grad(g).unwrap();
            let what = format!("{layout:?} {cin}->{cout} k{k} s{stride} g{groups} at {size}");
            assert!(max_rel_diff(dx(&g_ours), dx(&g_theirs)) < 1e-5, "dx {what}");
            assert!(max_rel_diff(dw(&g_ours), dw(&g_theirs)) < 1e-5, "dw {what}");
        }
    }

    /// Planar: the layer shapes the models use, and each dense algorithm.
    #[test]
    fn matches_burn_conv2d_forward_and_gradients() {
        let cases = [
            (3, 1, 8, 9, 3, 1, 1),
            (4, 6, 10, 8, 3, 2, 1),
            (2, 8, 8, 7, 3, 1, 8),
            (3, 8, 8, 9, 3, 2, 8),
            (5, 12, 4, 3, 3, 1, 1),
            (2, 6, 9, 5, 1, 1, 1),
            // Winograd F(2 × 2, 3 × 3) and F(4 × 4, 3 × 3) (`conv_winograd::choose`).
            (2, 32, 40, 14, 3, 1, 1),
            (2, 40, 32, 28, 3, 1, 1),
            // Direct 3 × 3 (`conv_direct::applies`; where the CPU has AVX-512).
            (2, 16, 16, 28, 3, 1, 1),
            (3, 5, 11, 21, 3, 1, 1),
            // Grouped by client (`by_client.rs`): 3 × 3 and a 1 × 1 stride-2 shortcut.
            (3, 6, 8, 9, 3, 1, 2),
            (2, 6, 9, 7, 1, 2, 3),
        ];
        check_against_burn(&cases, Layout::Planar);
    }

    /// Channels-last (`[n, h, w, c]` in and out), for the layers MobileNet-V2 runs that way:
    /// its 1-channel stem, 1 × 1 expansions and projections (one GEMM piece and several),
    /// depthwise at stride 1 and 2 on large and small maps.
    #[test]
    fn channels_last_matches_burn_conv2d() {
        let cases = [
            (3, 1, 8, 28, 3, 1, 1),
            (4, 8, 48, 28, 1, 1, 1),
            (20, 96, 16, 4, 1, 1, 1),
            (3, 48, 48, 28, 3, 2, 48),
            (2, 8, 8, 28, 3, 1, 8),
            (5, 144, 144, 4, 3, 2, 144),
            // Grouped by client (`by_client.rs`).
            (3, 6, 8, 9, 3, 1, 2),
            (2, 6, 9, 7, 1, 1, 3),
        ];
        check_against_burn(&cases, Layout::ChannelsLast);
    }

    /// Without autodiff (evaluation) the forward kernel runs and agrees with Burn.
    #[test]
    fn inference_forward_matches_burn() {
        let device = crate::Backend::Flex.device();
        let conv = Conv2dConfig::new([4, 6], [3, 3])
            .with_stride([2, 2])
            .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
            .with_bias(false)
            .init(&device);
        let x = Tensor::<4>::random([3, 4, 7, 7], Distribution::Default, &device);
        let ours = conv2d(&conv, &x, Layout::Planar).expect("flex is handled");
        assert!(max_rel_diff(ours, conv.forward(x)) < 1e-5);
    }

    /// Evaluation conv + BatchNorm (running statistics) + activation in one pass equals
    /// Burn's `Conv2d`, `BatchNorm` and activation one after another; tolerance 1e-5
    /// relative to the largest value. Dense with stacked samples (4 × 4 maps), one sample per
    /// GEMM, 1 × 1, and depthwise at stride 1 and 2; planar and channels-last.
    #[test]
    fn fused_evaluation_matches_burn_conv_batchnorm_activation() {
        use burn::module::{Param, RunningState};
        use burn::nn::BatchNormConfig;
        use burn::tensor::activation::relu;
        let device = crate::Backend::Flex.device();
        // (batch, c_in, c_out, size, kernel, stride, groups, act)
        let cases = [
            (20, 6, 8, 4, 3, 1, 1, Act::Relu),
            (3, 4, 6, 9, 3, 2, 1, Act::None),
            (5, 6, 9, 5, 1, 1, 1, Act::Relu6),
            (4, 8, 8, 7, 3, 1, 8, Act::Relu6),
            (3, 8, 8, 9, 3, 2, 8, Act::Relu6),
            (2, 12, 16, 28, 3, 1, 1, Act::Relu),
        ];
        for (n, cin, cout, size, k, stride, groups, act) in cases {
            let conv = layer([cin, cout], k, stride, groups, &device);
            let mut bn = BatchNormConfig::new(cout).init(&device);
            let rand = |lo: f64, hi: f64| {
                Tensor::<1>::random([cout], Distribution::Uniform(lo, hi), &device)
            };
            bn.gamma = Param::from_tensor(rand(-2.0, 2.0));
            bn.beta = Param::from_tensor(rand(-1.0, 1.0));
            bn.running_mean = RunningState::new(rand(-0.5, 0.5));
            bn.running_var = RunningState::new(rand(0.1, 3.0));
            let x = Tensor::<4>::random([n, cin, size, size], Distribution::Default, &device);
            let y = bn.forward(conv.forward(x.clone()));
            let skip = Tensor::<4>::random(y.dims(), Distribution::Default, &device);
            let nhwc = |t: Tensor<4>| t.permute([0, 2, 3, 1]);
            // Without and with a residual added before the activation.
            for (r, sum) in [(None, y.clone()), (Some(&skip), y.clone() + skip.clone())] {
                let ours = conv_bn_act_eval(&conv, &bn, act, &x, Layout::Planar, r)
                    .expect("flex is handled");
                let r_cl = r.map(|t| nhwc(t.clone()));
                let ours_cl = conv_bn_act_eval(
                    &conv,
                    &bn,
                    act,
                    &nhwc(x.clone()),
                    Layout::ChannelsLast,
                    r_cl.as_ref(),
                )
                .expect("flex is handled");
                let theirs = match act {
                    Act::None => sum,
                    Act::Relu => relu(sum),
                    Act::Relu6 => sum.clamp(0.0, 6.0),
                };
                assert_eq!(ours.dims(), theirs.dims());
                let what = format!(
                    "{cin}->{cout} k{k} s{stride} g{groups} {act:?} residual {}",
                    r.is_some()
                );
                assert!(max_rel_diff(ours, theirs.clone()) < 1e-5, "{what}");
                assert!(
                    max_rel_diff(ours_cl, nhwc(theirs)) < 1e-5,
                    "channels-last {what}"
                );
            }
        }
    }

    /// Layers the kernels do not handle are left to Burn.
    #[test]
    fn unsupported_layers_fall_back() {
        let device = crate::Backend::Flex.device();
        let with_bias = Conv2dConfig::new([2, 2], [3, 3]).init(&device);
        let x = Tensor::<4>::zeros([1, 2, 5, 5], &device);
        assert!(conv2d(&with_bias, &x, Layout::Planar).is_none());
        let odd = Conv2dConfig::new([4, 6], [3, 3])
            .with_groups(2)
            .with_bias(false)
            .init(&device);
        let x = Tensor::<4>::zeros([1, 5, 5, 4], &device);
        assert!(
            conv2d(&odd, &x, Layout::ChannelsLast).is_some(),
            "grouped by client"
        );
        let x = Tensor::<4>::zeros([1, 6, 5, 5], &device);
        assert!(
            conv2d(&odd, &x, Layout::Planar).is_none(),
            "channels not in whole groups"
        );
    }
}
