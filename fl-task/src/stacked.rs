//! Client-batched local training: the participants of one round, all starting from the same
//! global weights, train as one computation ([`Stacked`]: every layer grouped by client), so
//! each operation is launched once for all of them instead of once per client.
//!
//! Each client's result is [`train_local`](crate::train_local)'s on its own data and config:
//! bit for bit on the CPU kernels (each group of a grouped layer runs the kernel the
//! client's lone layer runs, `model/by_client.rs`; `tests::each_client_ends_as_if_it_trained_alone`),
//! to float rounding on other backends (Burn's grouped convolution sums in its own order).
//! - every client keeps its own batches (its seed, its epochs, `max_steps`);
//! - clients whose next batch has a different size (a last, partial batch of an epoch) or
//!   who have finished are not stacked with the others for that step: at every step the
//!   clients still training are grouped by batch size, and each group steps as one network
//!   of that many clients;
//! - the loss is the sum of the clients' mean cross-entropies, so each client's gradient is
//!   its own; SGD with momentum and weight decay is element-wise (`sgd.rs`'s formula), so
//!   stepping the stacked tensors steps each client's; BatchNorm statistics are per channel,
//!   so per client.
//!
//! Between steps each client's weights, velocities and running statistics are held apart
//! (one flat tensor each, in the stacked network's visiting order) and concatenated along
//! the client axis for the next step's group.
//!
//! Where it pays: where a step costs per operation more than per sample — a GPU, whose
//! kernel launches dominate a small model's step. On our CPU kernels it does not
//! (`fl-job/TRAINING.md`, "Client-batched training"): the time there is in the kernels'
//! per-sample work, and a K-client step's activations leave the cache.

use std::collections::BTreeMap;
use std::time::Instant;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};
use datasets::{Batch, SampleView};

use crate::config::TrainConfig;
use crate::error::FlError;
use crate::model::{Model, ModelKind, Stacked};
use crate::sgd::FusedSgd;
use crate::tensors::{NamedTensor, is_running_statistic, read_tensors, write_tensors};
use crate::train::TrainStats;

/// One client of a stacked training: its samples and its config (its own seed; learning
/// rate, momentum, weight decay and batch size shared by all).
#[derive(Clone, Copy)]
pub struct StackedClient<'a> {
    /// The client's training samples.
    pub data: SampleView<'a>,
    /// Its local training config.
    pub cfg: &'a TrainConfig,
}

/// Train every client from `global` (of kind `kind`) as one computation on `device`; each
/// result is that client's trained model (evaluation form) and statistics, in input order.
///
/// # Errors
/// If a config is invalid, the clients' learning rate, momentum, weight decay or batch size
/// differ, or a tensor cannot be read.
pub fn train_stacked(
    global: &Model,
    kind: ModelKind,
    clients: &[StackedClient<'_>],
    device: &Device,
) -> Result<Vec<(Model, TrainStats)>, FlError> {
    let Some(first) = clients.first() else {
        return Ok(Vec::new());
    };
    for c in clients {
        c.cfg.validate()?;
        let same = c.cfg.lr == first.cfg.lr
            && c.cfg.momentum == first.cfg.momentum
            && c.cfg.weight_decay == first.cfg.weight_decay
            && c.cfg.batch_size == first.cfg.batch_size;
        if !same {
            return Err(FlError::Config(
                "client-batched training needs one lr, momentum, weight_decay and batch_size \
                 for all clients"
                    .into(),
            ));
        }
    }
    let start = Instant::now();
    let names = read_tensors(global)?;
    let plan = Plan::new(kind, &names, device)?;
    let initial = client_form(&names, device);
    let mut runs: Vec<Run> = clients
        .iter()
        .map(|c| Run::new(c, initial.clone(), &plan, device))
        .collect();
    let trainer = Trainer::new(kind, first.cfg, device);
    let longest = runs.iter().map(|r| r.batches.len()).max().unwrap_or(0);
    for step in 0..longest {
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, r) in runs.iter().enumerate() {
            if let Some(b) = r.batches.get(step) {
                groups.entry(b.len()).or_default().push(i);
            }
        }
        for members in groups.values() {
            trainer.step(&plan, &mut runs, members, step)?;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    runs.into_iter()
        .map(|r| {
            let stats = r.stats(seconds);
            // `valid()`: running states of its own, so that `global` stays as it was.
            let model = write_tensors(global.valid(), model_form(&names, r.values)?)?;
            Ok((model, stats))
        })
        .collect()
}

/// What a stacked network's float tensors are, in visiting order.
struct Plan {
    /// Per tensor: one client's element count, and whether it is trained (not a running
    /// statistic).
    tensors: Vec<(usize, bool)>,
}

impl Plan {
    fn new(kind: ModelKind, names: &[NamedTensor], device: &Device) -> Result<Self, FlError> {
        let one = Stacked::new(kind, 1, device);
        let mut sizes = Sizes(Vec::new());
        one.visit(&mut sizes);
        let sizes_match = sizes.0.len() == names.len()
            && sizes.0.iter().zip(names).all(|(&n, t)| n == t.values.len());
        if !sizes_match {
            return Err(FlError::Tensor(format!(
                "the model's tensors do not match a stacked {kind}'s"
            )));
        }
        let tensors = names
            .iter()
            .map(|t| (t.values.len(), !is_running_statistic(&t.path)))
            .collect();
        Ok(Plan { tensors })
    }
}

/// The model's tensors as one client's flat tensors.
fn client_form(names: &[NamedTensor], device: &Device) -> Vec<Tensor<1>> {
    names
        .iter()
        .map(|t| Tensor::from_data(TensorData::new(t.values.clone(), [t.values.len()]), device))
        .collect()
}

/// A client's flat tensors back as the model's named tensors.
fn model_form(names: &[NamedTensor], values: Vec<Tensor<1>>) -> Result<Vec<NamedTensor>, FlError> {
    names
        .iter()
        .zip(values)
        .map(|(t, v)| {
            let values = v
                .into_data()
                .try_into_vec::<f32>()
                .map_err(|e| FlError::Tensor(format!("{}: {e:?}", t.path)))?;
            Ok(NamedTensor {
                values,
                ..t.clone()
            })
        })
        .collect()
}

/// Element counts of a network's float tensors, in visiting order.
struct Sizes(Vec<usize>);

impl ModuleVisitor for Sizes {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.0.push(param.lazy_shape().num_elements());
    }
}

/// One client's state between steps.
struct Run {
    /// Its batches in training order (every epoch, cut at `max_steps`).
    batches: Vec<Batch>,
    /// Its tensors in the stacked visiting order, flat.
    values: Vec<Tensor<1>>,
    /// Velocities of the trained tensors (zero before the first step: `g + μ·0 = g`).
    velocity: Vec<Tensor<1>>,
    samples: usize,
    loss_sum: f64,
    last_loss: f64,
}

impl Run {
    fn new(c: &StackedClient<'_>, values: Vec<Tensor<1>>, plan: &Plan, device: &Device) -> Self {
        let velocity = plan
            .tensors
            .iter()
            .map(|&(n, _)| Tensor::zeros([n], device))
            .collect();
        Run {
            batches: schedule(c.data, c.cfg),
            values,
            velocity,
            samples: 0,
            loss_sum: 0.0,
            last_loss: f64::NAN,
        }
    }

    fn stats(&self, seconds: f64) -> TrainStats {
        TrainStats {
            steps: self.batches.len(),
            samples: self.samples,
            mean_loss: if self.samples > 0 {
                self.loss_sum / self.samples as f64
            } else {
                f64::NAN
            },
            last_loss: self.last_loss,
            seconds,
        }
    }
}

/// The batches `train_local` would take, in its order: `data.batches` per epoch with seed
/// `seed + epoch`, epochs raised to cover `max_steps`, stopping at `max_steps`.
fn schedule(data: SampleView<'_>, cfg: &TrainConfig) -> Vec<Batch> {
    let max_steps = cfg.max_steps.unwrap_or(usize::MAX);
    (0..crate::train::epochs(data.len(), cfg))
        .flat_map(|e| data.batches(cfg.batch_size, Some(cfg.seed.wrapping_add(e as u64))))
        .take(max_steps)
        .collect()
}

/// What every step shares: the networks per group size, the loss, the optimizer's rule.
struct Trainer {
    kind: ModelKind,
    ad: Device,
    lr: f32,
    sgd: FusedSgd,
    /// A training-mode network per group size, built on first use.
    nets: std::cell::RefCell<BTreeMap<usize, Stacked>>,
}

impl Trainer {
    fn new(kind: ModelKind, cfg: &TrainConfig, device: &Device) -> Self {
        Trainer {
            kind,
            ad: device.clone().autodiff(),
            lr: cfg.lr as f32,
            sgd: FusedSgd::new(cfg.momentum, cfg.weight_decay),
            nets: Default::default(),
        }
    }

    /// The clients `members` take their batch `step` as one network of `members.len()`.
    fn step(
        &self,
        plan: &Plan,
        runs: &mut [Run],
        members: &[usize],
        step: usize,
    ) -> Result<(), FlError> {
        let k = members.len();
        let net = self
            .nets
            .borrow_mut()
            .entry(k)
            // Never initialised: `Load` replaces every tensor without reading it, so the
            // network draws nothing from the process-wide random generator (which seeded
            // initialisations elsewhere rely on) and holds no weights of its own.
            .or_insert_with(|| Stacked::new(self.kind, k, &self.ad))
            .clone();
        let values: Vec<Tensor<1>> = (0..plan.tensors.len())
            .map(|i| stack(runs, members, |r| &r.values[i]))
            .collect();
        let tracked: Vec<Tensor<1>> = values.iter().map(|t| t.clone().autodiff()).collect();
        let net = net.map(&mut Load(tracked.into_iter()));
        let batches: Vec<&Batch> = members.iter().map(|&m| &runs[m].batches[step]).collect();
        // On a pool thread with the others kept spinning, as `train_local`'s steps run.
        let ad = &self.ad;
        let (losses, results) = crate::train::on_worker(|| forward_backward(ad, net, &batches))?;
        for (i, (value, &(n, trained))) in values.into_iter().zip(&plan.tensors).enumerate() {
            let now = results[i].clone();
            let (new, velocity) = if trained {
                let v = stack(runs, members, |r| &r.velocity[i]);
                self.sgd.step_tensors(self.lr, value, now, Some(v))
            } else {
                (now, None)
            };
            for (j, &m) in members.iter().enumerate() {
                runs[m].values[i] = new.clone().narrow(0, j * n, n);
                if let Some(v) = &velocity {
                    runs[m].velocity[i] = v.clone().narrow(0, j * n, n);
                }
            }
        }
        for (&m, loss) in members.iter().zip(losses) {
            let r = &mut runs[m];
            let b = r.batches[step].len();
            r.samples += b;
            r.loss_sum += loss * b as f64;
            r.last_loss = loss;
        }
        Ok(())
    }
}

/// One forward and backward pass of `net` (its clients' weights loaded) on the clients'
/// `batches`: each client's loss, and per float tensor in visiting order a trained
/// tensor's gradient or a running statistic's new value, flat.
fn forward_backward(
    ad: &Device,
    net: Stacked,
    batches: &[&Batch],
) -> Result<(Vec<f64>, Vec<Tensor<1>>), FlError> {
    let (images, labels): (Vec<_>, Vec<_>) = batches.iter().map(|b| b.to_tensors(ad)).unzip();
    let loss_fn = CrossEntropyLossConfig::new().init(ad);
    let ((losses, mut grads), running) = crate::model::collecting_running_stats(|| {
        let logits = net.forward(Tensor::cat(images, 1));
        let losses: Vec<Tensor<1>> = labels
            .into_iter()
            .enumerate()
            .map(|(j, l)| {
                let z = logits
                    .clone()
                    .narrow(0, j, 1)
                    .reshape([l.dims()[0], crate::model::NUM_CLASSES]);
                loss_fn.forward(z, l)
            })
            .collect();
        let losses = Tensor::cat(losses, 0);
        // One read for all clients (one device sync where the backend has a device).
        let values = losses.clone().into_data().try_to_vec::<f32>();
        let total = losses.sum();
        (values, GradientsParams::from_grads(total.backward(), &net))
    });
    let mut read = Read {
        grads: &mut grads,
        out: Vec::new(),
        missing: None,
    };
    running.apply(net).visit(&mut read);
    match read.missing {
        Some(i) => Err(FlError::Tensor(format!(
            "stacked training: trained tensor {i} got no gradient"
        ))),
        None => {
            let losses = losses.map_err(|e| FlError::Tensor(format!("losses: {e:?}")))?;
            Ok((losses.into_iter().map(f64::from).collect(), read.out))
        }
    }
}

/// The `members`' tensors picked by `f`, concatenated in member order.
fn stack(runs: &[Run], members: &[usize], f: impl Fn(&Run) -> &Tensor<1>) -> Tensor<1> {
    Tensor::cat(members.iter().map(|&m| f(&runs[m]).clone()).collect(), 0)
}

/// Writes the group's concatenated tensors (on the autodiff device) into a network without
/// reading (or lazily initialising) the values they replace. Every one is marked as
/// requiring a gradient; BatchNorm's running states clear that on their own.
struct Load(std::vec::IntoIter<Tensor<1>>);

impl ModuleMapper for Load {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let new = self.0.next().expect("one tensor per float parameter");
        let value = new.reshape(param.lazy_shape()).set_require_grad(true);
        Param::initialized(param.id, value)
    }
}

/// After a step, per tensor in visiting order: a trained tensor's gradient, or a running
/// statistic's new value, flat.
struct Read<'a> {
    grads: &'a mut GradientsParams,
    out: Vec<Tensor<1>>,
    /// The first trained tensor that got no gradient, by visiting index.
    missing: Option<usize>,
}

impl ModuleVisitor for Read<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let t = param.val();
        let n = t.shape().num_elements();
        let src = match (self.grads.remove::<D>(param.id), t.is_require_grad()) {
            (Some(g), true) => g,
            (None, true) => {
                self.missing.get_or_insert(self.out.len());
                t
            }
            (_, false) => t,
        };
        self.out.push(src.inner().reshape([n]));
    }
}

#[cfg(test)]
mod tests {
    use datasets::Samples;

    use super::*;
    use crate::train_local;

    /// `n` samples of noise with labels, from `seed`.
    fn samples(n: usize, seed: u64) -> Samples {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        Samples {
            images: (0..n * datasets::IMAGE_PIXELS)
                .map(|_| next() as u8)
                .collect(),
            labels: (0..n).map(|_| (next() % 62) as u8).collect(),
        }
    }

    /// Three clients whose batches differ in count and size (45, 20 and 33 samples at batch
    /// 10, two epochs: partial batches at different steps, so the groups change from step to
    /// step), momentum and weight decay on, one client cut by `max_steps`: each stacked
    /// result is its lone training's, bit for bit (each group of a grouped layer runs the
    /// lone layer's kernel on that client's channels).
    #[test]
    fn each_client_ends_as_if_it_trained_alone() {
        for kind in [
            ModelKind::ResNet18 { base_width: 2 },
            ModelKind::MobileNetV2 { width: 0.1 },
        ] {
            check_alone_and_stacked(kind);
        }
    }

    fn check_alone_and_stacked(kind: ModelKind) {
        let device = crate::Backend::Flex.device();
        let global = kind.init(&device);
        let data: Vec<Samples> = [45, 20, 33]
            .iter()
            .zip(1..)
            .map(|(&n, s)| samples(n, s))
            .collect();
        let cfgs: Vec<TrainConfig> = (0..3)
            .map(|i| TrainConfig {
                lr: 0.05,
                momentum: 0.9,
                weight_decay: 1e-3,
                batch_size: 10,
                local_epochs: 2,
                max_steps: (i == 2).then_some(6),
                seed: 100 + i as u64,
                ..TrainConfig::default()
            })
            .collect();
        let clients: Vec<StackedClient<'_>> = data
            .iter()
            .zip(&cfgs)
            .map(|(d, cfg)| StackedClient {
                data: d.view(),
                cfg,
            })
            .collect();
        let stacked = train_stacked(&global, kind, &clients, &device).unwrap();
        let start = read_tensors(&global).unwrap();
        for (i, (c, (model, stats))) in clients.iter().zip(&stacked).enumerate() {
            let (alone, alone_stats) = train_local(global.clone(), c.data, c.cfg, &device).unwrap();
            assert_eq!(
                (stats.steps, stats.samples, stats.mean_loss, stats.last_loss),
                (
                    alone_stats.steps,
                    alone_stats.samples,
                    alone_stats.mean_loss,
                    alone_stats.last_loss
                ),
                "{kind} client {i}"
            );
            let (a, b) = (read_tensors(&alone).unwrap(), read_tensors(model).unwrap());
            assert_eq!(a, b, "{kind} client {i}");
            assert_ne!(a, start, "{kind} client {i} trained");
        }
        assert_eq!(
            read_tensors(&global).unwrap(),
            start,
            "the global weights untouched"
        );
    }

    #[test]
    fn refuses_clients_it_cannot_step_together() {
        let device = crate::Backend::Flex.device();
        let data = samples(5, 1);
        let cfg = TrainConfig::default();
        let other = TrainConfig {
            lr: cfg.lr * 2.0,
            ..cfg.clone()
        };
        let kind = ModelKind::ResNet18 { base_width: 2 };
        let two = [
            StackedClient {
                data: data.view(),
                cfg: &cfg,
            },
            StackedClient {
                data: data.view(),
                cfg: &other,
            },
        ];
        let err = train_stacked(&kind.init(&device), kind, &two, &device).unwrap_err();
        assert!(err.to_string().contains("one lr"), "{err}");
    }
}
