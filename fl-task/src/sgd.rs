//! SGD with momentum and weight decay as one parallel pass per parameter on the flex CPU
//! backend, with the same arithmetic as Burn's `Sgd` (bit-identical results, tested).
//!
//! Why: Burn's `Sgd` with momentum runs five element-wise tensor ops per parameter
//! (`grad · 1`, `velocity · μ`, `+`, `· lr`, `−`), each into a fresh buffer and each on one
//! thread. For ResNet-18 at width 64 (11.2 M parameters) that is several hundred MB of memory
//! traffic per step on one core while the other waits (profile in `fl-job/TRAINING.md`;
//! training +3–4 % at 2 threads, alternated A/B). Here each parameter is updated by one pass that reads the parameter, the gradient and the
//! velocity once, split across rayon's threads, in place where Burn no longer shares the
//! buffers.
//!
//! On other backends, or with fl-job's kernels switched off (`fl-job bench --burn-ops`), the
//! step is the same formula as tensor ops.

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::optim::{LearningRate, ModuleOptimizer, Optimizer, RecordState, StateSink, StateSource};
use burn::tensor::{Device, Tensor};
use rayon::prelude::*;

use crate::model::flex_tensor;

/// Elements per parallel task: large enough that splitting costs nothing measurable, small
/// enough that both cores share even a 64 k-element filter bank.
const CHUNK: usize = 1 << 14;

/// `g' = g + λ·p` (with weight decay), `v ← g' + μ·v` (the first step: `v ← g'`),
/// `p ← p − lr·v` (without momentum: `p ← p − lr·g'`). Burn's `Sgd` with
/// `MomentumConfig { dampening: 0, nesterov: false }` computes exactly this, in this order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FusedSgd {
    /// `μ`; `None` is plain SGD.
    momentum: Option<f32>,
    /// `λ`; `None` is no weight decay.
    weight_decay: Option<f32>,
    /// Whether to try the one-pass flex path (off: always the tensor ops; for the tests).
    fused: bool,
}

/// A parameter's velocity (absent without momentum).
#[derive(Clone)]
pub(crate) struct FusedSgdState<const D: usize> {
    velocity: Option<Tensor<D>>,
}

/// What `#[derive(RecordState)]` would write (the derive only works inside `burn-optim`): the
/// velocity as the tensor leaf `velocity`, as Burn's `MomentumState` names it.
impl<const D: usize> RecordState for FusedSgdState<D> {
    fn state_flatten(&self, prefix: &str, out: &mut StateSink) {
        if let Some(v) = &self.velocity {
            out.push_tensor(prefix, "velocity", v.clone().into_data());
        }
    }

    fn state_unflatten(prefix: &str, src: &mut StateSource, device: &Device) -> Option<Self> {
        Some(Self {
            velocity: src
                .take_tensor(prefix, "velocity")
                .map(|data| Tensor::from_data(data, device)),
        })
    }
}

impl FusedSgd {
    /// `momentum` and `weight_decay` of 0 switch those terms off.
    pub(crate) fn new(momentum: f64, weight_decay: f64) -> Self {
        Self {
            momentum: (momentum > 0.0).then_some(momentum as f32),
            weight_decay: (weight_decay > 0.0).then_some(weight_decay as f32),
            fused: true,
        }
    }

    /// The module optimizer `train_local` steps with.
    pub(crate) fn init(self) -> ModuleOptimizer {
        ModuleOptimizer::from(self)
    }

    /// The step as tensor ops (Burn's `Sgd`, op for op): for backends other than flex, and
    /// for client-batched training's concatenated tensors (`stacked.rs`).
    pub(crate) fn step_tensors<const D: usize>(
        &self,
        lr: f32,
        tensor: Tensor<D>,
        mut grad: Tensor<D>,
        velocity: Option<Tensor<D>>,
    ) -> (Tensor<D>, Option<Tensor<D>>) {
        if let Some(wd) = self.weight_decay {
            grad = tensor.clone().mul_scalar(wd).add(grad);
        }
        let velocity = self.momentum.map(|m| match velocity {
            Some(v) => grad.clone().add(v.mul_scalar(m)),
            None => grad.clone(),
        });
        let step = velocity.clone().unwrap_or(grad);
        (tensor - step.mul_scalar(lr), velocity)
    }

    /// The parameter, gradient and velocity as flex primitives (clones of the handles), or
    /// `None` where one is not an f32 flex tensor of the parameter's length.
    fn flex_parts<const D: usize>(
        &self,
        tensor: &Tensor<D>,
        grad: &Tensor<D>,
        velocity: Option<&Tensor<D>>,
    ) -> Option<Parts> {
        if !self.fused || !crate::cpu_kernels() {
            return None;
        }
        let n = tensor.shape().num_elements();
        let flex = |t: &Tensor<D>| {
            t.clone()
                .try_into_primitive::<Flex>()
                .ok()
                .filter(|p: &FlexTensor| p.as_slice::<f32>().is_some_and(|s| s.len() == n))
        };
        Some(Parts {
            p: flex(tensor)?,
            g: flex(grad)?,
            v: match velocity {
                Some(v) => Some(flex(v)?),
                None => None,
            },
        })
    }

    /// The step in one parallel pass over flex buffers, in place where Burn no longer shares
    /// them (the caller has dropped its own handles).
    fn step_flex<const D: usize>(&self, lr: f32, parts: Parts) -> (Tensor<D>, Option<Tensor<D>>) {
        let Parts { p, g, v } = parts;
        let v = match (self.momentum, v) {
            (None, _) => None,
            (Some(_), Some(v)) => Some((v, false)),
            (Some(_), None) => Some((zeros_like(&p), true)),
        };
        let mut p = owned(p);
        let mut v = v.map(|(v, first)| (owned(v), first));
        let gs = g.as_slice::<f32>().expect("checked");
        let ps = p.try_storage_mut::<f32>().expect("owned");
        let rule = Rule {
            lr,
            momentum: self.momentum.unwrap_or(0.0),
            weight_decay: self.weight_decay,
        };
        match v.as_mut() {
            Some((v, first)) => {
                let vs = v.try_storage_mut::<f32>().expect("owned");
                ps.par_chunks_mut(CHUNK)
                    .zip(vs.par_chunks_mut(CHUNK))
                    .zip(gs.par_chunks(CHUNK))
                    .for_each(|((p, v), g)| rule.with_momentum(p, v, g, *first));
            }
            None => ps
                .par_chunks_mut(CHUNK)
                .zip(gs.par_chunks(CHUNK))
                .for_each(|(p, g)| rule.plain(p, g)),
        }
        (
            Tensor::from_primitive::<Flex>(p),
            v.map(|(v, _)| Tensor::from_primitive::<Flex>(v)),
        )
    }
}

/// A step's tensors as flex primitives.
struct Parts {
    p: FlexTensor,
    g: FlexTensor,
    v: Option<FlexTensor>,
}

/// `t` with storage of its own, exactly its elements, contiguous from offset 0: itself where
/// it already is that, else a copy made in parallel.
fn owned(mut t: FlexTensor) -> FlexTensor {
    let len = t.as_slice::<f32>().map_or(0, <[f32]>::len);
    if t.try_storage_mut::<f32>().is_some_and(|s| s.len() == len) {
        return t;
    }
    let src = t.as_slice::<f32>().expect("checked by the caller");
    let mut copy = Vec::with_capacity(src.len());
    copy.par_extend(src.par_iter().copied());
    flex_tensor(copy, &t.layout().shape().to_vec())
}

/// Zeros shaped like `t`, written in parallel.
fn zeros_like(t: &FlexTensor) -> FlexTensor {
    let n = t.as_slice::<f32>().map_or(0, <[f32]>::len);
    let mut zeros = Vec::with_capacity(n);
    zeros.par_extend(rayon::iter::repeat_n(0.0f32, n));
    flex_tensor(zeros, &t.layout().shape().to_vec())
}

/// The scalars of one step, applied chunk by chunk.
#[derive(Clone, Copy)]
struct Rule {
    lr: f32,
    momentum: f32,
    weight_decay: Option<f32>,
}

impl Rule {
    /// The gradient with weight decay, as Burn's `WeightDecay::transform`: `p·λ + g`.
    #[inline(always)]
    fn decayed(&self, p: f32, g: f32) -> f32 {
        match self.weight_decay {
            Some(wd) => p * wd + g,
            None => g,
        }
    }

    /// As Burn's `Momentum::transform` (dampening 0: `g·1 + v·μ`) and `Sgd::step`
    /// (`p − v·lr`); `first`: no velocity yet, `v ← g`.
    fn with_momentum(&self, p: &mut [f32], v: &mut [f32], g: &[f32], first: bool) {
        for ((p, v), &g) in p.iter_mut().zip(v.iter_mut()).zip(g) {
            let g = self.decayed(*p, g);
            *v = if first { g } else { g + *v * self.momentum };
            *p -= *v * self.lr;
        }
    }

    /// Without momentum: `p − g·lr`.
    fn plain(&self, p: &mut [f32], g: &[f32]) {
        for (p, &g) in p.iter_mut().zip(g) {
            *p -= self.decayed(*p, g) * self.lr;
        }
    }
}

impl Optimizer for FusedSgd {
    type State<const D: usize> = FusedSgdState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        // Burn's `mul_scalar(lr)` converts the f64 rate to the element type the same way.
        let lr = lr as f32;
        let velocity = state.and_then(|s| s.velocity);
        let (tensor, velocity) = match self.flex_parts(&tensor, &grad, velocity.as_ref()) {
            Some(parts) => {
                // Drop the caller's handles so that buffers Burn no longer shares are updated
                // in place.
                drop((tensor, grad, velocity));
                self.step_flex(lr, parts)
            }
            None => self.step_tensors(lr, tensor, grad, velocity),
        };
        (tensor, Some(FusedSgdState { velocity }))
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        FusedSgdState {
            velocity: state.velocity.map(|v| v.to_device(device)),
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::decay::WeightDecayConfig;
    use burn::optim::momentum::MomentumConfig;
    use burn::optim::{GradientsParams, SgdConfig};
    use burn::tensor::{Tensor, TensorData};

    use super::*;

    /// A layer, three steps of each optimizer on the same batches, parameters as bits.
    ///
    /// Weights and batches come from a fixed formula, not the device's random generator:
    /// that generator is global to the process, and the lib tests run in parallel, so a seed
    /// set here would not protect the draws from another test's (this flaked on CI).
    fn run(mut optim: ModuleOptimizer) -> Vec<Vec<u32>> {
        let device = Device::flex().autodiff();
        // A deterministic spread of values in (-0.5, 0.5), different for every index.
        let values = |n: usize, salt: usize| -> Vec<f32> {
            (0..n)
                .map(|i| ((i * 7919 + salt * 104_729) % 1000) as f32 / 1000.0 - 0.5)
                .collect()
        };
        let mut layer: Linear = LinearConfig::new(37, 300).init(&device);
        layer.weight = Param::from_tensor(Tensor::<2>::from_data(
            TensorData::new(values(37 * 300, 1), [37, 300]),
            &device,
        ));
        layer.bias = Some(Param::from_tensor(Tensor::<1>::from_data(
            TensorData::new(values(300, 2), [300]),
            &device,
        )));
        for step in 0..3 {
            let x =
                Tensor::<2>::from_data(TensorData::new(values(8 * 37, 3 + step), [8, 37]), &device)
                    .mul_scalar(1.0 + step as f32);
            let loss = layer.forward(x).powi_scalar(2).mean();
            let grads = GradientsParams::from_grads(loss.backward(), &layer);
            layer = optim.step(0.05, layer, grads);
        }
        let bits = |t: Tensor<2>| -> Vec<u32> {
            t.into_data()
                .try_to_vec::<f32>()
                .expect("f32")
                .iter()
                .map(|v| v.to_bits())
                .collect()
        };
        let bias = layer.bias.expect("bias").val().unsqueeze::<2>();
        vec![bits(layer.weight.val()), bits(bias)]
    }

    /// Bit-identical to Burn's `Sgd` (dampening 0) with and without momentum and weight decay,
    /// on the fused flex path and on the tensor-op path, over three steps (the first creates
    /// the velocity, the later ones use it).
    #[test]
    fn equals_burns_sgd_bit_for_bit() {
        for (momentum, wd) in [(0.9, 0.0), (0.0, 0.0), (0.9, 5e-4), (0.0, 1e-3)] {
            let burn = || {
                SgdConfig::new()
                    .with_momentum((momentum > 0.0).then(|| {
                        MomentumConfig::new()
                            .with_momentum(momentum)
                            .with_dampening(0.0)
                    }))
                    .with_weight_decay((wd > 0.0).then(|| WeightDecayConfig::new(wd as f32)))
                    .init()
            };
            let theirs = run(burn());
            for fused in [true, false] {
                let ours = run(FusedSgd {
                    fused,
                    ..FusedSgd::new(momentum, wd)
                }
                .init());
                let differ = ours
                    .iter()
                    .flatten()
                    .zip(theirs.iter().flatten())
                    .filter(|(a, b)| a != b)
                    .count();
                assert_eq!(
                    differ, 0,
                    "momentum {momentum}, weight decay {wd}, fused {fused}: parameters differ"
                );
            }
        }
    }
}
