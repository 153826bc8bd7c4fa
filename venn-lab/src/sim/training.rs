//! Real training behind the virtual clock: a bounded set of threads that trains each
//! successful round's participants from the job's global weights of that round,
//! aggregates their updates with the task's `aggregate` and evaluates the result.
//!
//! Scheduling does not depend on the weights, so the engine never waits for training
//! except where a result decides what happens next (a job with a target accuracy stops
//! when a round reaches it). Each job is a chain of rounds: round `k + 1` trains from the
//! weights round `k` produced, while different jobs' chains, and the participants within
//! a round, train in parallel. Every input of a training — global weights, the device's
//! FEMNIST writers, a seed derived from (job seed, round, device) — is fixed by the
//! simulation, and updates are aggregated in the order their results arrived on the
//! virtual clock, so the same seed gives the same bytes whatever the thread count.
//!
//! Every training, aggregation and evaluation runs on one of `threads` single-threaded
//! lanes (`fl_task::lanes`), its kernels serially: side by side, two one-thread trainings do
//! about 1.5× the work of one training split over two threads at these model widths, and
//! nothing is nested, so `threads` bounds the CPU used.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use datasets::{Femnist, SampleView, Samples};
use fl_job::runner::RoundRow;
use fl_task::lanes::{Lanes, Spawner};
use fl_task::task::{FlTask, ServerState};
use venn_core::DataPartition;
use venn_core::rng::derive_seed;

use crate::error::LabError;

/// One successful round handed to the trainer by the engine.
#[derive(Debug, Clone)]
pub struct RoundWork {
    /// The job's successful rounds before this one (0-based round number).
    pub round: u32,
    /// Devices whose results the round aggregates, in arrival order.
    pub participants: Vec<u64>,
    /// The CSV row, accuracy and loss to be filled in by evaluation.
    pub row: RoundRow,
}

/// One job as the trainer sees it.
pub struct TrainJob {
    /// The task.
    pub task: Arc<dyn FlTask>,
    /// Seed of the initial weights and of every local training.
    pub seed: u64,
    /// Held-out samples evaluated after each round.
    pub test: Samples,
    /// The server's held-out samples for the task's post-aggregation step
    /// ([`FlTask::calibrate`]: the built-in tasks' BatchNorm statistics); empty when the
    /// task has none.
    pub calibration: Samples,
}

/// What the trainer did for one job.
#[derive(Debug, Clone, Default)]
pub struct JobTraining {
    /// Evaluated rounds, in order.
    pub rows: Vec<RoundRow>,
    /// Why the job's training stopped early, if it did.
    pub error: Option<String>,
    /// Samples trained on (every participant's local data, over its epochs and steps).
    pub samples: u64,
    /// Local trainings.
    pub trainings: u64,
    /// Thread-seconds spent in local training.
    pub train_s: f64,
    /// Thread-seconds spent in evaluation (and in the server's calibration step after
    /// aggregation, where the task has one).
    pub eval_s: f64,
}

/// A job's chain of rounds.
#[derive(Default)]
struct Chain {
    global: Arc<Vec<u8>>,
    server: ServerState,
    queue: VecDeque<RoundWork>,
    /// A round of this job is training or aggregating.
    busy: bool,
    /// Rows in round order; `evaluated[k]` says whether row `k` has its accuracy.
    rows: Vec<RoundRow>,
    evaluated: Vec<bool>,
    evals_pending: usize,
    out: JobTraining,
}

struct Slot {
    job: TrainJob,
    chain: Mutex<Chain>,
}

struct Shared {
    slots: Vec<Slot>,
    data: Arc<Femnist>,
    /// Which writers each device trains on.
    partition: DataPartition,
    cancel: AtomicBool,
    /// Queues work on the trainer's lanes.
    lanes: Spawner,
    /// Notified whenever a chain goes idle, a round is evaluated or a job fails.
    changed: Condvar,
    changed_lock: Mutex<()>,
    samples: AtomicU64,
    /// Train each round's participants as one computation ([`FlTask::train_round_together`])
    /// instead of one lane each.
    stack_clients: bool,
}

/// A trained update and its FedAvg weight (the device's sample count).
type Update = (Vec<u8>, u64);

/// A round in flight: its participants' updates as they finish.
struct InFlight {
    job: usize,
    work: RoundWork,
    global: Arc<Vec<u8>>,
    updates: Mutex<Vec<Option<Update>>>,
    remaining: AtomicUsize,
    failed: Mutex<Option<String>>,
}

/// The lanes and the jobs' chains.
pub struct Trainer {
    // Declared first, so dropped first: runs what is queued, then stops the lanes.
    lanes: Lanes,
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in a training thread must not wedge the run: the data stays usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Trainer {
    /// `threads` single-threaded lanes (0 = one per core) for `jobs`, whose devices train on
    /// `data`'s train writers: device `d` owns writers `(d × W + k) mod n`, `k < W`.
    /// Builds every job's initial weights.
    pub fn new(
        jobs: Vec<TrainJob>,
        data: Arc<Femnist>,
        writers_per_device: usize,
        (threads, stack_clients): (usize, bool),
    ) -> Result<Self, LabError> {
        if data.train.is_empty() {
            return Err(LabError::Setup("the data set has no train writers".into()));
        }
        if writers_per_device == 0 {
            return Err(LabError::Setup(
                "devices.writers_per_device must be at least 1".into(),
            ));
        }
        let lanes = Lanes::new(threads, "venn-lab-train")
            .map_err(|e| LabError::Setup(format!("training threads: {e}")))?;
        let mut slots = Vec::with_capacity(jobs.len());
        for job in jobs {
            let init = job
                .task
                .init(job.seed)
                .map_err(|e| LabError::Setup(format!("initial weights: {e}")))?;
            slots.push(Slot {
                job,
                chain: Mutex::new(Chain {
                    global: Arc::new(init),
                    ..Chain::default()
                }),
            });
        }
        Ok(Trainer {
            shared: Arc::new(Shared {
                lanes: lanes.spawner(),
                slots,
                partition: crate::config::partition(&data, writers_per_device),
                data,
                cancel: AtomicBool::new(false),
                changed: Condvar::new(),
                changed_lock: Mutex::new(()),
                samples: AtomicU64::new(0),
                stack_clients,
            }),
            lanes,
        })
    }

    /// Threads (lanes) training.
    pub fn threads(&self) -> usize {
        self.lanes.threads()
    }

    /// Queues a successful round of `job`; it trains once the job's earlier rounds have.
    pub fn submit(&self, job: usize, work: RoundWork) {
        let mut c = lock(&self.shared.slots[job].chain);
        if c.out.error.is_some() {
            return;
        }
        c.queue.push_back(work);
        if !c.busy {
            start_next(&self.shared, job, &mut c);
        }
    }

    /// Waits for round `round` of `job` to be evaluated; its accuracy, or `None` if the
    /// job's training failed or was cancelled first.
    pub fn wait_accuracy(&self, job: usize, round: u32) -> Option<f64> {
        let k = round as usize;
        loop {
            let g = lock(&self.shared.changed_lock);
            {
                let c = lock(&self.shared.slots[job].chain);
                if c.evaluated.get(k).copied().unwrap_or(false) {
                    return Some(c.rows[k].accuracy);
                }
                if c.out.error.is_some() || (!c.busy && c.queue.is_empty() && c.rows.len() <= k) {
                    return None;
                }
            }
            drop(
                self.shared
                    .changed
                    .wait_timeout(g, Duration::from_millis(100))
                    .unwrap_or_else(|e| e.into_inner()),
            );
        }
    }

    /// Stops taking new work: rounds not yet started are dropped, and the job reports
    /// why.
    pub fn cancel(&self) {
        self.shared.cancel.store(true, Ordering::SeqCst);
    }

    /// Samples trained so far, over all jobs.
    pub fn samples(&self) -> u64 {
        self.shared.samples.load(Ordering::Relaxed)
    }

    /// For the progress display: (rounds evaluated, rounds submitted, the virtual time
    /// (seconds since the start) up to which every job's submitted rounds are evaluated,
    /// or `None` when all are).
    pub fn progress(&self) -> (usize, usize, Option<f64>) {
        let (mut done, mut total, mut front) = (0, 0, None::<f64>);
        for s in &self.shared.slots {
            let c = lock(&s.chain);
            let evaluated = c.evaluated.iter().filter(|e| **e).count();
            done += evaluated;
            total += c.rows.len() + c.queue.len();
            let first_open = c
                .evaluated
                .iter()
                .position(|e| !e)
                .map(|k| c.rows[k].time_s)
                .or_else(|| c.queue.front().map(|w| w.row.time_s));
            if let Some(t) = first_open
                && c.out.error.is_none()
            {
                front = Some(front.map_or(t, |f: f64| f.min(t)));
            }
        }
        (done, total, front)
    }

    /// Waits until every submitted round is trained and evaluated (or the run is
    /// cancelled and in-flight work has drained), calling `tick` about every 200 ms, and
    /// returns each job's rows and counters.
    pub fn finish(self, mut tick: impl FnMut(&Trainer)) -> Vec<JobTraining> {
        loop {
            let idle = self.shared.slots.iter().all(|s| {
                let c = lock(&s.chain);
                !c.busy && (c.queue.is_empty() || c.out.error.is_some()) && c.evals_pending == 0
            });
            if idle {
                break;
            }
            tick(&self);
            let g = lock(&self.shared.changed_lock);
            drop(
                self.shared
                    .changed
                    .wait_timeout(g, Duration::from_millis(200))
                    .unwrap_or_else(|e| e.into_inner()),
            );
        }
        tick(&self);
        let cancelled = self.shared.cancel.load(Ordering::SeqCst);
        self.shared
            .slots
            .iter()
            .map(|s| {
                let mut c = lock(&s.chain);
                let mut out = std::mem::take(&mut c.out);
                let n = c.evaluated.iter().take_while(|e| **e).count();
                out.rows = c.rows[..n].to_vec();
                if out.error.is_none() && cancelled && !c.queue.is_empty() {
                    out.error = Some("cancelled".into());
                }
                out
            })
            .collect()
    }
}

fn notify(shared: &Shared) {
    let _g = lock(&shared.changed_lock);
    shared.changed.notify_all();
}

/// Starts the job's next queued round (the chain is locked and idle).
fn start_next(shared: &Arc<Shared>, job: usize, c: &mut Chain) {
    if shared.cancel.load(Ordering::SeqCst) {
        if !c.queue.is_empty() && c.out.error.is_none() {
            c.out.error = Some("cancelled".into());
        }
        c.busy = false;
        return;
    }
    let Some(work) = c.queue.pop_front() else {
        c.busy = false;
        return;
    };
    c.busy = true;
    let n = work.participants.len();
    let round = Arc::new(InFlight {
        job,
        global: c.global.clone(),
        updates: Mutex::new(vec![None; n]),
        remaining: AtomicUsize::new(n),
        failed: Mutex::new(None),
        work,
    });
    if n == 0 {
        // Nothing to train (a round can succeed at its deadline only with results, so
        // this is defensive): aggregate nothing, keep the weights.
        let sh = shared.clone();
        shared.lanes.spawn(move || finish_round(&sh, &round));
        return;
    }
    if shared.stack_clients {
        let sh = shared.clone();
        shared.lanes.spawn(move || train_together(&sh, &round));
        return;
    }
    for i in 0..n {
        let (sh, round) = (shared.clone(), round.clone());
        shared.lanes.spawn(move || train_one(&sh, &round, i));
    }
}

/// The seed of `device`'s local training in `round` of the job in `slot`.
fn local_seed(slot: &Slot, round: &InFlight, device: u64) -> u64 {
    derive_seed(
        slot.job.seed,
        derive_seed(u64::from(round.work.round), device),
    )
}

/// `device`'s samples gathered from its writers when it has several (`None`: one writer,
/// whose samples are used in place).
fn gathered(shared: &Shared, device: u64) -> Option<Samples> {
    let writers: Vec<usize> = shared.partition.writers(device).collect();
    match writers[..] {
        [_] => None,
        _ => Some(Samples::from_writers(
            writers.iter().map(|&w| &shared.data.train[w]),
        )),
    }
}

/// `device`'s training samples: `own` if it was [`gathered`], else its one writer's.
fn samples_of<'a>(shared: &'a Shared, device: u64, own: &'a Option<Samples>) -> SampleView<'a> {
    match own {
        Some(s) => s.view(),
        None => {
            let w = shared.partition.writers(device).next().expect("a writer");
            shared.data.train[w].view()
        }
    }
}

/// Records a finished local training of `trained` samples that took `secs`.
fn count_training(shared: &Shared, slot: &Slot, trained: u64, secs: f64) {
    shared.samples.fetch_add(trained, Ordering::Relaxed);
    let mut c = lock(&slot.chain);
    c.out.samples += trained;
    c.out.trainings += 1;
    c.out.train_s += secs;
}

/// Trains every participant of `round` as one computation, then aggregates.
fn train_together(shared: &Arc<Shared>, round: &Arc<InFlight>) {
    let slot = &shared.slots[round.job];
    let devices = &round.work.participants;
    let owned: Vec<Option<Samples>> = devices.iter().map(|&d| gathered(shared, d)).collect();
    let clients: Vec<_> = devices
        .iter()
        .zip(&owned)
        .map(|(&d, own)| (samples_of(shared, d, own), local_seed(slot, round, d)))
        .collect();
    let t = Instant::now();
    let result = slot
        .job
        .task
        .train_round_together(&round.global, &clients, round.work.round);
    // One computation: its thread-seconds shared evenly among the clients.
    let secs = t.elapsed().as_secs_f64() / devices.len().max(1) as f64;
    let result = result
        .map_err(|e| e.to_string())
        .and_then(|ups| match ups.len() {
            n if n == devices.len() => Ok(ups),
            n => Err(format!(
                "the task trained {n} updates for {} clients",
                devices.len()
            )),
        });
    match result {
        Ok(ups) => {
            let mut updates = lock(&round.updates);
            for (i, up) in ups.into_iter().enumerate() {
                count_training(shared, slot, up.samples, secs);
                updates[i] = Some((up.weights, up.samples));
            }
        }
        Err(e) => {
            lock(&round.failed).get_or_insert_with(|| format!("round {}: {e}", round.work.round));
        }
    }
    round.remaining.store(0, Ordering::Release);
    finish_round(shared, round);
}

/// Trains participant `i` of `round`; the last one to finish aggregates.
fn train_one(shared: &Arc<Shared>, round: &Arc<InFlight>, i: usize) {
    let slot = &shared.slots[round.job];
    let device = round.work.participants[i];
    let own = gathered(shared, device);
    let data = samples_of(shared, device, &own);
    let seed = local_seed(slot, round, device);
    let t = Instant::now();
    let result = slot
        .job
        .task
        .train_round(&round.global, data, seed, round.work.round);
    let secs = t.elapsed().as_secs_f64();
    match result {
        Ok(up) => {
            // The task reports its local data size (FedAvg's weight) as samples trained.
            count_training(shared, slot, up.samples, secs);
            lock(&round.updates)[i] = Some((up.weights, up.samples));
        }
        Err(e) => {
            lock(&round.failed)
                .get_or_insert_with(|| format!("round {}: device {device}: {e}", round.work.round));
        }
    }
    if round.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
        finish_round(shared, round);
    }
}

/// The server's side of a round: the task's aggregation, then its calibration step on the
/// server's held-out samples when it has one; with the thread-seconds of that step.
fn aggregate(
    job: &TrainJob,
    global: &[u8],
    updates: &[Update],
    server: &mut ServerState,
) -> Result<(Vec<u8>, f64), String> {
    let next = job
        .task
        .aggregate(global, updates, server)
        .map_err(|e| format!("aggregate: {e}"))?;
    if job.task.calibration_samples() == 0 {
        return Ok((next, 0.0));
    }
    let t = Instant::now();
    let next = job
        .task
        .calibrate(&next, job.calibration.view())
        .map_err(|e| format!("calibrate: {e}"))?;
    Ok((next, t.elapsed().as_secs_f64()))
}

/// Aggregates a trained round, queues its evaluation and starts the job's next round.
fn finish_round(shared: &Arc<Shared>, round: &Arc<InFlight>) {
    let job = round.job;
    let slot = &shared.slots[job];
    let failed = lock(&round.failed).take();
    let updates: Vec<Update> = std::mem::take(&mut *lock(&round.updates))
        .into_iter()
        .flatten()
        .collect();
    let mut server = std::mem::take(&mut lock(&slot.chain).server);
    let next = match failed {
        Some(e) => Err(e),
        None if updates.is_empty() => Ok(((*round.global).clone(), 0.0)),
        None => aggregate(&slot.job, &round.global, &updates, &mut server)
            .map_err(|e| format!("round {}: {e}", round.work.round)),
    };
    drop(updates);
    let mut c = lock(&slot.chain);
    c.server = server;
    match next {
        Ok((weights, calibration_s)) => {
            c.out.eval_s += calibration_s;
            let weights = Arc::new(weights);
            c.global = weights.clone();
            let k = c.rows.len();
            c.rows.push(round.work.row.clone());
            c.evaluated.push(false);
            c.evals_pending += 1;
            let sh = shared.clone();
            shared.lanes.spawn(move || evaluate(&sh, job, k, &weights));
            // The next round may start before this one is evaluated.
            start_next(shared, job, &mut c);
        }
        Err(e) => {
            tracing::error!(job, error = %e, "training failed; the job stops");
            c.out.error = Some(e);
            c.busy = false;
            c.queue.clear();
        }
    }
    drop(c);
    notify(shared);
}

/// Evaluates round `k`'s weights and fills in its row.
fn evaluate(shared: &Arc<Shared>, job: usize, k: usize, weights: &[u8]) {
    let slot = &shared.slots[job];
    let t = Instant::now();
    let r = slot.job.task.evaluate(weights, slot.job.test.view());
    let secs = t.elapsed().as_secs_f64();
    let mut c = lock(&slot.chain);
    c.evals_pending -= 1;
    c.out.eval_s += secs;
    match r {
        Ok(st) => {
            c.rows[k].set_eval(&st);
            c.evaluated[k] = true;
        }
        Err(e) => {
            c.out
                .error
                .get_or_insert_with(|| format!("round {k}: evaluate: {e}"));
            c.queue.clear();
        }
    }
    drop(c);
    notify(shared);
}
