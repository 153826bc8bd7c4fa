//! The centralized sanity experiment: train on every writer's train data, test on every
//! writer's test data, and record accuracy against time.

use std::time::{Duration, Instant};

use burn::tensor::Device;
use datasets::{Femnist, Samples};
use serde::{Deserialize, Serialize};

use fl_task::FlError;
use fl_task::TrainConfig;
use fl_task::evaluate;
use fl_task::model::{Model, ModelKind};
use fl_task::train_local_with;

/// Settings of one centralized run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CentralizedConfig {
    /// The model.
    pub model: ModelKind,
    /// SGD settings (`max_steps` and `local_epochs` are ignored: the run is cut into
    /// chunks of `eval_every` steps).
    pub train: TrainConfig,
    /// Stop once this much wall time has passed (checked after each evaluation).
    pub budget: Duration,
    /// Stop after this many passes over the train data.
    pub max_epochs: f64,
    /// SGD steps between evaluations.
    pub eval_every: usize,
    /// Stop early once test accuracy reaches this fraction, if set.
    pub stop_at: Option<f64>,
}

/// One evaluation point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Seconds since the start, training and evaluation together.
    pub wall_s: f64,
    /// Seconds spent training only.
    pub train_s: f64,
    /// Passes over the train data so far.
    pub epoch: f64,
    /// SGD steps so far.
    pub steps: usize,
    /// Mean training loss over the last chunk.
    pub train_loss: f64,
    /// Test accuracy in [0, 1].
    pub test_accuracy: f64,
    /// Test cross-entropy.
    pub test_loss: f64,
}

/// Run the experiment from `initial` (a fresh `cfg.model` when `None`, e.g. to continue a
/// run at a lower learning rate); `on_step(steps)` after each SGD step, `on_point` after
/// each evaluation. Returns the final model and the curve.
pub fn run_centralized(
    data: &Femnist,
    cfg: &CentralizedConfig,
    initial: Option<Model>,
    device: &Device,
    mut on_step: impl FnMut(usize) + Send,
    mut on_point: impl FnMut(&Point),
) -> Result<(Model, Vec<Point>), FlError> {
    cfg.train.validate()?;
    let train = Samples::from_writers(&data.train);
    let test = Samples::from_writers(&data.test);
    if train.labels.is_empty() || test.labels.is_empty() {
        return Err(FlError::Config("no train or no test samples".into()));
    }
    let per_epoch = train.labels.len().div_ceil(cfg.train.batch_size);
    let start = Instant::now();
    let mut model = initial.unwrap_or_else(|| cfg.model.init(device));
    let (mut steps, mut train_s, mut points) = (0usize, 0.0, Vec::new());
    for chunk in 0u64.. {
        // Each chunk takes the first `eval_every` batches of a fresh seeded shuffle:
        // sampling without replacement inside a chunk, reproducible by seed.
        let chunk_cfg = TrainConfig {
            max_steps: Some(cfg.eval_every),
            local_epochs: 1,
            seed: cfg.train.seed.wrapping_mul(1_000_003).wrapping_add(chunk),
            ..cfg.train.clone()
        };
        let done = steps;
        let (m, stats) = train_local_with(model, train.view(), &chunk_cfg, device, |s, _| {
            on_step(done + s)
        })?;
        model = m;
        steps += stats.steps;
        train_s += stats.seconds;
        let eval = evaluate(&model, test.view(), 100, device);
        let p = Point {
            wall_s: start.elapsed().as_secs_f64(),
            train_s,
            epoch: steps as f64 / per_epoch as f64,
            steps,
            train_loss: stats.mean_loss,
            test_accuracy: eval.accuracy,
            test_loss: eval.loss,
        };
        on_point(&p);
        points.push(p);
        let reached = cfg.stop_at.is_some_and(|t| eval.accuracy >= t);
        if reached
            || start.elapsed() >= cfg.budget
            || steps as f64 / per_epoch as f64 >= cfg.max_epochs
        {
            break;
        }
    }
    Ok((model, points))
}
