//! Re-estimating a model's BatchNorm running statistics on data: the server-side step that
//! makes FedAvg's averaged weights evaluate as they train.
//!
//! Why: FedAvg averages the clients' running statistics like any other tensor, but each
//! client's statistics describe its own drifted weights, not their average. Measured on
//! MobileNet-V2 ×0.25 (`fl-job/TRAINING.md`, "MobileNet-V2 under FedAvg"), the averaged
//! running variance is 1.2–1.3× the averaged model's true activation variance at the rounds
//! where accuracy falls back by 3–13 points while the weights themselves score as before.
//! One forward pass of the averaged weights over a few hundred unlabeled samples, BatchNorm
//! normalising with each batch's statistics as in training but with no autodiff graph,
//! measures the statistics that belong to them (as `torch.optim.swa_utils.update_bn` does
//! after weight averaging); training does not use running statistics, so only evaluation
//! changes.

use burn::module::Module;
use burn::tensor::Device;
use datasets::SampleView;

use crate::model::{Model, with_bn_momentum};
use crate::train::on_worker;

/// Samples a forward pass of [`recalibrate_bn`] takes at once. Fixed (not the pool's
/// evaluation batch) so that the statistics do not depend on the thread count.
pub const CALIBRATION_BATCH: usize = 100;

/// `model` with every BatchNorm's running mean and variance replaced by the sample-weighted
/// mean, over `data` in batches of [`CALIBRATION_BATCH`] (in order, unshuffled), of the
/// statistics training-mode BatchNorm measures on each batch with the model's own weights.
/// Everything else is unchanged. With no data the model is returned as it is.
pub fn recalibrate_bn(model: Model, data: SampleView<'_>, device: &Device) -> Model {
    if data.is_empty() {
        return model;
    }
    // No autodiff: on plain tensors the forward records no graph, keeps no activations for a
    // backward pass that never comes, and runs the inference kernels.
    if rayon::current_thread_index().is_none() {
        // One pool thread runs every pass: a layer's running state is updated where the
        // forward runs (see `train::train_local_with`).
        return rayon::scope(|_| recalibrate_on_this_thread(model, data, device));
    }
    recalibrate_on_this_thread(model, data, device)
}

fn recalibrate_on_this_thread(model: Model, data: SampleView<'_>, device: &Device) -> Model {
    // `valid` gives the running statistics state of their own: a clone of a module shares
    // it, and re-estimating must not change the statistics of the model it was cloned from.
    let model = model.to_device(device).valid();
    let mut seen = 0usize;
    for batch in data.batches(CALIBRATION_BATCH, None) {
        seen += batch.len();
        // The running value after this batch: (seen − n)/seen of the mean so far plus
        // n/seen of this batch's; the first batch replaces the averaged statistics outright.
        let momentum = batch.len() as f64 / seen as f64;
        let (images, _) = batch.to_tensors(device);
        on_worker(|| {
            // Plain tensors: BatchNorm takes each batch's statistics in this mode
            // (`with_bn_momentum`) without recording a graph; only those are wanted.
            with_bn_momentum(momentum, || drop(model.forward(images)))
        });
    }
    // Burn's running state keeps the last update pending until a sync, which `valid`
    // does; reading the statistics (as `weights::to_bytes` does) would otherwise see the
    // value before the last batch.
    model.valid()
}
