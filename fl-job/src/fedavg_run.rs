//! A reproducible single-job FedAvg run on FEMNIST, outside any scheduler: each round a
//! seeded draw of train writers trains from the global weights through the job's own
//! [`FlTask`] (the code path `venn-lab sim` and `fl-job run` use), the updates are
//! aggregated with the task's FedAvg, and the result is evaluated on a fixed held-out set.
//!
//! Everything that decides the run is derived from one seed by published rules, and the
//! run writes them down (participants, local seeds, the evaluation set, the initial
//! weights), so that another implementation — `fl-job/bench/fedavg_torch.py`, PyTorch —
//! can replay the same writers, batches and starting point and be compared round by round
//! (`fl-job/TRAINING.md`, "FedAvg against PyTorch").

use std::time::Instant;

use datasets::{Femnist, SampleView, Samples, shuffled_indices};
use serde::{Deserialize, Serialize};
use venn_core::rng::derive_seed;

use fl_task::NamedTensor;
use fl_task::TrainConfig;
use fl_task::lanes;
use fl_task::model::ModelKind;
use fl_task::task::{BurnTask, FlTask, LocalUpdate, ServerState};
use fl_task::{EvalStats, FlError};

/// Version of the JSON this module writes ([`FedAvgReport`]).
pub const FEDAVG_SCHEMA: u32 = 1;

/// Settings of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FedAvgConfig {
    /// The model.
    pub model: ModelKind,
    /// FedAvg rounds.
    pub rounds: u32,
    /// Train writers drawn (without replacement) each round.
    pub participants: usize,
    /// Local training (`seed` is ignored: each local training gets [`local_seed`]).
    pub train: TrainConfig,
    /// The run's seed: initial weights, participant draws and local shuffles.
    pub seed: u64,
    /// Held-out test samples evaluated after every round (all when there are fewer).
    pub eval_samples: usize,
    /// Seed of the draw of the evaluation set; fixed, not the run's seed, so that every
    /// seed of a comparison is scored on the same samples.
    pub eval_seed: u64,
    /// Evaluation batch size; 0 (the default) leaves it to `fl_task::auto_eval_batch`
    /// (50 on one thread, 200 on more).
    pub eval_batch: usize,
    /// Held-out samples, after the evaluation set in its draw, on which the server
    /// re-estimates BatchNorm statistics after every round (`fl_task::recalibrate_bn`); 0
    /// (the default) keeps FedAvg's averaged statistics.
    #[serde(default)]
    pub bn_calibration: usize,
    /// Train each round's participants as one computation (`FlTask::train_round_together`)
    /// instead of side by side on lanes. The same updates (bit for bit on the CPU kernels);
    /// there it is slower (`fl-job/TRAINING.md`, "Client-batched training").
    #[serde(default)]
    pub stack_clients: bool,
}

impl Default for FedAvgConfig {
    /// The fig9 ResNet job: ResNet-18 base width 4, 10 participants, lr 0.05, momentum 0.9,
    /// batch 20, one local epoch; 20 rounds scored on 2,000 test samples.
    fn default() -> Self {
        Self {
            model: ModelKind::ResNet18 { base_width: 4 },
            rounds: 20,
            participants: 10,
            train: TrainConfig::default(),
            seed: 0,
            eval_samples: 2000,
            eval_seed: 0,
            eval_batch: 0,
            bn_calibration: 0,
            stack_clients: false,
        }
    }
}

impl FedAvgConfig {
    /// Refuse settings that cannot run on `train_writers` writers, naming the field.
    pub fn validate(&self, train_writers: usize) -> Result<(), FlError> {
        self.model.validate()?;
        self.train.validate()?;
        let bad = |m: String| Err(FlError::Config(m));
        if self.rounds == 0 {
            return bad("rounds must be at least 1".into());
        }
        if self.participants == 0 || self.participants > train_writers {
            return bad(format!(
                "participants must be in 1..={train_writers} (the train writers), got {}",
                self.participants
            ));
        }
        if self.eval_samples == 0 {
            return bad("eval_samples must be at least 1".into());
        }
        if self.bn_calibration > 10_000 {
            return bad(format!(
                "bn_calibration must be at most 10000, got {}",
                self.bn_calibration
            ));
        }
        Ok(())
    }
}

/// The train writers (indices into the id-sorted train list) of round `round` (1-based):
/// the first `k` of a shuffle of `0..n` seeded by `derive_seed(seed, round)`.
pub fn participants(n: usize, k: usize, seed: u64, round: u32) -> Vec<usize> {
    let mut order = shuffled_indices(n, derive_seed(seed, u64::from(round)));
    order.truncate(k);
    order
}

/// The local-training seed of writer `writer` (its index) in round `round`, derived as the
/// simulator derives a device's (`venn-lab/src/sim/training.rs`). Epoch `e` of that
/// training shuffles with `local_seed + e` ([`TrainConfig::seed`]).
pub fn local_seed(seed: u64, round: u32, writer: usize) -> u64 {
    derive_seed(seed, derive_seed(u64::from(round), writer as u64))
}

/// The evaluation set: `n` positions (ascending) in the concatenation of the test
/// writers' samples (id order, file order within a writer), drawn by `eval_seed`.
pub fn eval_positions(total: usize, n: usize, eval_seed: u64) -> Vec<usize> {
    held_out_positions(total, 0, n, eval_seed)
}

/// Positions `skip..skip + n` of the same draw, ascending: with `skip` = the evaluation
/// set's size, the server's calibration set (`FedAvgConfig::bn_calibration`), as
/// `datasets::Femnist::calibration_set` draws it.
pub fn held_out_positions(total: usize, skip: usize, n: usize, eval_seed: u64) -> Vec<usize> {
    let mut pos = shuffled_indices(total, eval_seed);
    pos.truncate(skip.saturating_add(n).min(total));
    pos.drain(..skip.min(pos.len()));
    pos.sort_unstable();
    pos
}

/// One sample of the evaluation set: its writer and its index in that writer's test part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleRef(pub String, pub usize);

/// One round's participant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Participant {
    /// LEAF writer id.
    pub writer: String,
    /// Train samples (its FedAvg weight).
    pub samples: u64,
    /// Seed of its local shuffles.
    pub seed: u64,
    /// Its mean training loss.
    pub train_loss: f64,
}

/// One evaluated round (round 0: the initial weights, no participants).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    /// 1-based round; 0 is the initial model.
    pub round: u32,
    /// Who trained, in aggregation order.
    pub participants: Vec<Participant>,
    /// Mean training loss over the participants, weighted by samples.
    pub train_loss: f64,
    /// Accuracy on the evaluation set, in [0, 1].
    pub accuracy: f64,
    /// Mean cross-entropy on the evaluation set.
    pub loss: f64,
    /// Seconds since the start of the run.
    pub wall_s: f64,
}

/// What a run writes: enough to replay it elsewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FedAvgReport {
    /// [`FEDAVG_SCHEMA`].
    pub schema: u32,
    /// The settings.
    pub config: FedAvgConfig,
    /// The FEMNIST directory read (main writer set).
    pub data: String,
    /// Train writers the participants were drawn from (id order; indices refer to it).
    pub train_writers: usize,
    /// Test samples the evaluation set was drawn from.
    pub test_samples: usize,
    /// The evaluation set, in evaluation order.
    pub eval_set: Vec<SampleRef>,
    /// The server's calibration set (`bn_calibration` samples), in the order it is used;
    /// empty without one.
    #[serde(default)]
    pub calibration_set: Vec<SampleRef>,
    /// For replays to check their shuffle: round 1's first participant's epoch-0 sample
    /// order (indices into its train part), as `datasets::SampleView::batches` draws it.
    pub first_shuffle: Vec<usize>,
    /// Per round, from round 0 (the initial weights).
    pub rounds: Vec<RoundRecord>,
    /// Seconds for the whole run.
    pub wall_s: f64,
}

/// `task`'s evaluation of `weights` on `data`, the samples cut into `lanes` contiguous parts
/// evaluated side by side (`fl_task::lanes`), each a whole number of evaluation batches.
///
/// Why: on two threads one evaluation ran MobileNet-V2 ×0.25 inference at 5,300–5,800
/// samples/s, one thread 4,100–4,300 — two parts side by side keep both cores on their own
/// batches, as the trainings do. Evaluation normalises with the running statistics sample
/// by sample, so the hits are the same as in one piece; the mean loss may differ in its last
/// bits (added up in another grouping).
fn score_on_lanes(
    task: &BurnTask,
    weights: &[u8],
    data: SampleView<'_>,
    lanes: usize,
) -> Result<EvalStats, FlError> {
    if lanes <= 1 || data.len() <= 1 {
        return task.evaluate(weights, data);
    }
    // On a lane (one thread) an unset batch is `auto_eval_batch`'s.
    let batch = match task.eval_batch {
        0 => fl_task::LANE_EVAL_BATCH,
        b => b,
    };
    let part = data.len().div_ceil(lanes).div_ceil(batch) * batch;
    let parts: Vec<_> = (0..data.len().div_ceil(part))
        .map(|i| data.slice(i * part..((i + 1) * part).min(data.len())))
        .collect();
    let scored = lanes::map(lanes, parts.len(), |i| task.evaluate(weights, parts[i]));
    Ok(EvalStats::combine(
        &scored.into_iter().collect::<Result<Vec<_>, _>>()?,
    ))
}

/// The initial weights as named tensors, and the report. `on_round` sees each record as
/// it is made (round 0 first) with the global weights it scored (the task's bytes).
///
/// `lanes` local trainings run side by side, each wholly on one thread (`fl_task::lanes`; 0 =
/// as many as rayon's pool has threads); with 1 they run one after another, each with its
/// kernels over the whole pool (the results are the same bytes either way); the evaluation
/// set is scored in parts on the same lanes ([`score_on_lanes`]). The rest of the run on one
/// thread of rayon's pool. BatchNorm's
/// running statistics are Burn `RunningState`s, which keep one pending update per thread and
/// average the pending values of all threads when read: steps that landed on different
/// threads lost or averaged updates, and the result depended on the thread schedule. On one
/// thread every step updates in place and the statistics are the exact moving average, the
/// same at any thread count.
pub fn run_fedavg(
    data: &Femnist,
    data_dir: &str,
    cfg: &FedAvgConfig,
    lanes: usize,
    on_round: impl FnMut(&RoundRecord, &[u8]) + Send,
) -> Result<(Vec<NamedTensor>, FedAvgReport), FlError> {
    rayon::scope(|_| run_on_one_thread(data, data_dir, cfg, lanes, on_round))
}

/// Round `round`'s local trainings of the writers `picked` from `global`, in draw order:
/// side by side, one per lane (`fl_task::lanes`), the largest first — each the same
/// computation as alone — or all as one computation (`stack_clients`).
fn train_round(
    task: &BurnTask,
    data: &Femnist,
    cfg: &FedAvgConfig,
    (global, round): (&[u8], u32),
    picked: &[usize],
    lanes: usize,
) -> Result<Vec<LocalUpdate>, FlError> {
    // Rounds count from 1 here and from 0 at the manager, whose numbering `lr_decay`
    // follows.
    let seed = |w: usize| local_seed(cfg.seed, round, w);
    if cfg.stack_clients {
        let clients: Vec<_> = picked
            .iter()
            .map(|&w| (data.train[w].view(), seed(w)))
            .collect();
        return task.train_round_together(global, &clients, round - 1);
    }
    let train = |i: usize| {
        let w = picked[i];
        task.train_round(global, data.train[w].view(), seed(w), round - 1)
    };
    if lanes == 1 {
        (0..picked.len()).map(train).collect()
    } else {
        let sizes: Vec<usize> = picked.iter().map(|&w| data.train[w].len()).collect();
        lanes::map_largest_first(lanes, &sizes, train)
            .into_iter()
            .collect()
    }
}

fn run_on_one_thread(
    data: &Femnist,
    data_dir: &str,
    cfg: &FedAvgConfig,
    lanes: usize,
    mut on_round: impl FnMut(&RoundRecord, &[u8]),
) -> Result<(Vec<NamedTensor>, FedAvgReport), FlError> {
    cfg.validate(data.train.len())?;
    let lanes = match lanes {
        0 => rayon::current_num_threads(),
        n => n,
    };
    let start = Instant::now();
    let task = BurnTask {
        name: "fedavg-run".into(),
        kind: cfg.model,
        train: cfg.train.clone(),
        eval_batch: cfg.eval_batch,
        bn_calibration: cfg.bn_calibration,
    };
    let (eval_set, eval) = held_out(data, 0, cfg.eval_samples, cfg.eval_seed)?;
    let (calibration_set, calibration) =
        held_out(data, cfg.eval_samples, cfg.bn_calibration, cfg.eval_seed)?;
    if calibration.labels.len() < cfg.bn_calibration {
        return Err(FlError::Config(format!(
            "bn_calibration: {} samples wanted after the {} evaluated, the test parts hold {} more",
            cfg.bn_calibration,
            cfg.eval_samples,
            calibration.labels.len()
        )));
    }
    let mut global = task.init(cfg.seed)?;
    let initial = task.decode(&global)?;
    let mut state = ServerState::default();
    let score = |w: &[u8]| score_on_lanes(&task, w, eval.view(), lanes);
    let e0 = score(&global)?;
    let mut rounds = vec![RoundRecord {
        round: 0,
        participants: Vec::new(),
        train_loss: f64::NAN,
        accuracy: e0.accuracy,
        loss: e0.loss,
        wall_s: start.elapsed().as_secs_f64(),
    }];
    on_round(&rounds[0], &global);
    let mut first_shuffle = Vec::new();
    for round in 1..=cfg.rounds {
        let picked = participants(data.train.len(), cfg.participants, cfg.seed, round);
        if first_shuffle.is_empty() {
            let w = picked[0];
            first_shuffle = shuffled_indices(data.train[w].len(), local_seed(cfg.seed, round, w));
        }
        let trained = train_round(&task, data, cfg, (&global, round), &picked, lanes)?;
        let mut updates = Vec::with_capacity(picked.len());
        let mut who = Vec::with_capacity(picked.len());
        for (&w, up) in picked.iter().zip(trained) {
            who.push(Participant {
                writer: data.train[w].id.clone(),
                samples: up.samples,
                seed: local_seed(cfg.seed, round, w),
                train_loss: up.loss,
            });
            updates.push((up.weights, up.samples));
        }
        global = task.aggregate(&global, &updates, &mut state)?;
        global = task.calibrate(&global, calibration.view())?;
        let e = score(&global)?;
        let n: u64 = who.iter().map(|p| p.samples).sum();
        let train_loss = who
            .iter()
            .map(|p| p.train_loss * p.samples as f64)
            .sum::<f64>()
            / n.max(1) as f64;
        let rec = RoundRecord {
            round,
            participants: who,
            train_loss,
            accuracy: e.accuracy,
            loss: e.loss,
            wall_s: start.elapsed().as_secs_f64(),
        };
        on_round(&rec, &global);
        rounds.push(rec);
    }
    let report = FedAvgReport {
        schema: FEDAVG_SCHEMA,
        config: cfg.clone(),
        data: data_dir.to_owned(),
        train_writers: data.train.len(),
        test_samples: data.test.iter().map(|w| w.len()).sum(),
        eval_set,
        calibration_set,
        first_shuffle,
        rounds,
        wall_s: start.elapsed().as_secs_f64(),
    };
    Ok((initial, report))
}

/// Held-out samples `skip..skip + n` of the evaluation draw (the evaluation set with `skip`
/// 0), as references and as samples.
fn held_out(
    data: &Femnist,
    skip: usize,
    n: usize,
    eval_seed: u64,
) -> Result<(Vec<SampleRef>, Samples), FlError> {
    let refs: Vec<(usize, usize)> = data
        .test
        .iter()
        .enumerate()
        .flat_map(|(w, writer)| (0..writer.len()).map(move |i| (w, i)))
        .collect();
    if refs.is_empty() {
        return Err(FlError::Config("the data set has no test samples".into()));
    }
    let mut set = Samples::default();
    let mut named = Vec::new();
    for p in held_out_positions(refs.len(), skip, n, eval_seed) {
        let (w, i) = refs[p];
        let writer = &data.test[w];
        let one = writer.view().gather(&[i]);
        set.images.extend_from_slice(&one.images);
        set.labels.extend_from_slice(&one.labels);
        named.push(SampleRef(writer.id.clone(), i));
    }
    Ok((named, set))
}

/// The tensors as one little-endian `f32` blob plus an index (path, shape, offset in
/// values), for readers without Burn (the PyTorch replay's `--init ours`).
pub fn tensors_blob(tensors: &[NamedTensor]) -> (Vec<u8>, serde_json::Value) {
    let mut blob = Vec::new();
    let mut index = Vec::new();
    for t in tensors {
        index.push(serde_json::json!({
            "path": t.path,
            "shape": t.shape,
            "offset": blob.len() / 4,
        }));
        for v in &t.values {
            blob.extend_from_slice(&v.to_le_bytes());
        }
    }
    (blob, serde_json::Value::Array(index))
}

/// The report as CSV: one row per round (participants space-separated).
pub fn rounds_csv(report: &FedAvgReport) -> String {
    let mut out = String::from("round,accuracy,loss,train_loss,samples,wall_s,participants\n");
    for r in &report.rounds {
        let n: u64 = r.participants.iter().map(|p| p.samples).sum();
        let ids: Vec<&str> = r.participants.iter().map(|p| p.writer.as_str()).collect();
        out.push_str(&format!(
            "{},{:.6},{:.6},{:.6},{},{:.3},{}\n",
            r.round,
            r.accuracy,
            r.loss,
            r.train_loss,
            n,
            r.wall_s,
            ids.join(" ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn participants_are_distinct_seeded_and_vary_by_round() {
        let a = participants(396, 10, 7, 1);
        assert_eq!(a, participants(396, 10, 7, 1));
        assert_ne!(a, participants(396, 10, 7, 2));
        assert_ne!(a, participants(396, 10, 8, 1));
        let mut s = a.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 10);
        assert!(a.iter().all(|&w| w < 396));
    }

    #[test]
    fn eval_positions_are_fixed_sorted_and_capped() {
        let p = eval_positions(6512, 2000, 0);
        assert_eq!(p.len(), 2000);
        assert!(p.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(p, eval_positions(6512, 2000, 0));
        assert_eq!(eval_positions(5, 2000, 0), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn config_validation_names_the_field() {
        let cfg = FedAvgConfig::default();
        assert!(cfg.validate(396).is_ok());
        let too_many = FedAvgConfig {
            participants: 400,
            ..cfg.clone()
        };
        assert!(
            too_many
                .validate(396)
                .unwrap_err()
                .to_string()
                .contains("participants")
        );
        let no_rounds = FedAvgConfig { rounds: 0, ..cfg };
        assert!(
            no_rounds
                .validate(396)
                .unwrap_err()
                .to_string()
                .contains("rounds")
        );
    }
}
