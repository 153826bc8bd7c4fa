//! Local training: cross-entropy and SGD with momentum (`sgd.rs`) over one partition.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::GradientsParams;
use burn::tensor::Device;
use datasets::SampleView;
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::error::FlError;
use crate::model::Model;
use crate::sgd::FusedSgd;

/// What one call of [`train_local`] did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainStats {
    /// SGD steps taken.
    pub steps: usize,
    /// Samples processed (counting repeats over epochs).
    pub samples: usize,
    /// Mean training loss over all steps, weighted by batch size.
    pub mean_loss: f64,
    /// Training loss of the last step.
    pub last_loss: f64,
    /// Wall time in seconds (of the whole computation, for clients trained together).
    pub seconds: f64,
}

/// Train `model` on `data` with `cfg` on `device` (autodiff is added here) and return the
/// trained model in evaluation form (no autodiff) with statistics.
///
/// A fresh optimizer is made per call: optimizer state is keyed by parameter ids, which a
/// FedAvg or a weight load replaces, so momentum never carries across rounds (as in FedAvg).
/// `on_step(step, loss)` is called after every step, e.g. to drive a progress bar.
///
/// Every step runs on one thread of rayon's pool: Burn's BatchNorm keeps its running
/// statistics' pending updates per thread and averages them when read, so steps spread
/// over whichever pool threads were free gave running statistics (and evaluation results)
/// that depended on the thread count and on timing (found by the FedAvg-against-PyTorch
/// check: evaluation loss 3.958 at 2 threads against 3.949 at 1 after one round).
pub fn train_local_with(
    model: Model,
    data: SampleView<'_>,
    cfg: &TrainConfig,
    device: &Device,
    on_step: impl FnMut(usize, f64) + Send,
) -> Result<(Model, TrainStats), FlError> {
    if rayon::current_thread_index().is_none() {
        // From outside the pool, `scope` runs the closure on one pool thread and waits.
        return rayon::scope(|_| train_steps(model, data, cfg, device, on_step));
    }
    train_steps(model, data, cfg, device, on_step)
}

/// [`train_local_with`]'s loop, on the thread it is called on.
fn train_steps(
    model: Model,
    data: SampleView<'_>,
    cfg: &TrainConfig,
    device: &Device,
    mut on_step: impl FnMut(usize, f64),
) -> Result<(Model, TrainStats), FlError> {
    cfg.validate()?;
    let start = Instant::now();
    let ad = device.clone().autodiff();
    let mut model = model.to_device(&ad).train();
    let mut optim = FusedSgd::new(cfg.momentum, cfg.weight_decay).init();
    let loss_fn = CrossEntropyLossConfig::new().init(&ad);
    let max_steps = cfg.max_steps.unwrap_or(usize::MAX);
    let epochs = epochs(data.len(), cfg);
    let (mut steps, mut samples, mut loss_sum, mut last_loss) = (0, 0, 0.0, f64::NAN);
    // BatchNorm running statistics move as plain values during the steps and are written
    // into the model at the end (`model/running.rs`).
    let (model, running) = crate::model::collecting_running_stats(|| {
        'epochs: for epoch in 0..epochs {
            for batch in data.batches(cfg.batch_size, Some(cfg.seed.wrapping_add(epoch as u64))) {
                if steps >= max_steps {
                    break 'epochs;
                }
                let (images, labels) = batch.to_tensors(&ad);
                let (stepped, value) = on_worker(|| {
                    let loss = loss_fn.forward(model.forward(images), labels);
                    let value: f64 = loss.clone().into_scalar::<f32>().into();
                    let grads = GradientsParams::from_grads(loss.backward(), &model);
                    (optim.step(cfg.lr, model, grads), value)
                });
                model = stepped;
                steps += 1;
                samples += batch.len();
                loss_sum += value * batch.len() as f64;
                last_loss = value;
                on_step(steps, value);
            }
        }
        model
    });
    let model = running.apply(model);
    let stats = TrainStats {
        steps,
        samples,
        mean_loss: if samples > 0 {
            loss_sum / samples as f64
        } else {
            f64::NAN
        },
        last_loss,
        seconds: start.elapsed().as_secs_f64(),
    };
    Ok((model.valid().to_device(device), stats))
}

/// Epochs over `samples` samples: `local_epochs`, raised where `max_steps` needs more steps
/// than they hold (the steps then stop at `max_steps`).
pub(crate) fn epochs(samples: usize, cfg: &TrainConfig) -> usize {
    match cfg.max_steps {
        Some(max_steps) => cfg
            .local_epochs
            .max(1)
            .max(max_steps.div_ceil(samples.div_ceil(cfg.batch_size).max(1))),
        None => cfg.local_epochs,
    }
}

/// Runs `f` on a thread of rayon's pool (in place if already on one) and returns its result,
/// with the pool's other threads kept awake (spinning for work) while it runs.
///
/// Every CPU kernel (Burn's and ours) hands its work to that pool. Called from any other
/// thread, each of the hundreds of parallel loops in a training step would wake a pool
/// thread and put the caller to sleep; on a 2-core virtual machine those wake-ups took about
/// a fifth of the CPU time. Run from a pool thread, the loops split work by stealing instead.
///
/// Even so, between two parallel loops (Burn's element-wise ops run on one thread) the other
/// threads fell asleep within microseconds, and each loop then waited for a futex wake-up:
/// at 2 threads the second core sat idle a third of a ResNet-18 ×16 step, and scheduler
/// wake-ups were 9 % of the CPU time. OpenMP, under PyTorch, spins its threads for a while
/// before sleeping; [`spin_for_work`] does the same with rayon's own `yield_now`.
pub(crate) fn on_worker<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let done = AtomicBool::new(false);
    rayon::scope(|s| {
        let home = rayon::current_thread_index();
        for _ in 1..rayon::current_num_threads() {
            let done = &done;
            s.spawn(move |_| spin_for_work(home, done));
        }
        let out = f();
        done.store(true, Ordering::Release);
        out
    })
}

/// How long a spinning thread looks for work and finds none before it gives up (and sleeps
/// as rayon's threads do): long enough to bridge the serial stretches of a training step,
/// short enough that a spinner which started inside another caller's parallel loop (its
/// thread then holds that loop's work below the spinner) delays it by at most this.
const SPIN_IDLE: Duration = Duration::from_millis(2);

/// Runs the pool's pending work until `done`, or until no work came for [`SPIN_IDLE`]. Not on
/// the caller's own thread (`home`): there it would hold up the very work it waits for.
fn spin_for_work(home: Option<usize>, done: &AtomicBool) {
    if rayon::current_thread_index() == home {
        return;
    }
    let mut idle_since: Option<Instant> = None;
    while !done.load(Ordering::Acquire) {
        match rayon::yield_now() {
            Some(rayon::Yield::Executed) => idle_since = None,
            Some(rayon::Yield::Idle) => {
                if idle_since.get_or_insert_with(Instant::now).elapsed() > SPIN_IDLE {
                    return;
                }
                std::hint::spin_loop();
            }
            None => return,
        }
    }
}

/// [`train_local_with`] without a per-step callback.
pub fn train_local(
    model: Model,
    data: SampleView<'_>,
    cfg: &TrainConfig,
    device: &Device,
) -> Result<(Model, TrainStats), FlError> {
    train_local_with(model, data, cfg, device, |_, _| {})
}
