//! The round loop of a live job: per round, open a request with the manager, collect
//! updates until enough arrived or the deadline passed, aggregate them, have the manager
//! judge the round by venn-core's close rule (retrying an abort up to `max_attempts`),
//! install the new global model, evaluate it, and report the round.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use datasets::HeldOut;
use fl_task::EvalStats;
use fl_task::task::{FlTask, ServerState};
use venn_api::client::JobSession;
use venn_api::manager::{RoundMetrics, RoundStatus, SubmitRound, Submitted};
use venn_core::RoundOutcome;

use super::report::{JobReport, RoundRow};
use super::server::{JobShared, OpenSlot};
use super::{JobConfig, RunOptions, epoch_now};
use crate::error::JobError;

/// What the round loop works with: the job, its data and its two connections.
pub(super) struct Rounds<'a> {
    pub cfg: &'a JobConfig,
    pub task: &'a Arc<dyn FlTask>,
    pub held_out: &'a Arc<HeldOut>,
    pub shared: &'a Arc<JobShared>,
    pub api: &'a JobSession,
    pub opts: &'a RunOptions,
}

/// A round that closed as a success: its new model, the manager's record, the attempts.
struct Done {
    aggregated: Aggregated,
    status: RoundStatus,
    attempts: u32,
}

impl Rounds<'_> {
    /// Every round of the job (until the target accuracy, if it has one).
    pub(super) async fn run(
        &self,
        report: &mut JobReport,
        server_state: &mut ServerState,
    ) -> Result<(), JobError> {
        for r in 0..self.cfg.rounds {
            let done = self.round(r, server_state).await?;
            let accuracy = self.install(r, done, report, server_state).await?;
            if self.cfg.target_accuracy.is_some_and(|a| accuracy >= a) {
                break;
            }
        }
        Ok(())
    }

    /// Round `r` until an attempt succeeds (an error after `max_attempts` aborts).
    async fn round(&self, r: u32, server_state: &ServerState) -> Result<Done, JobError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let sub = self.open().await?;
            let slot = self.collect(&sub).await;
            // Aggregate what arrived, then let the manager judge the round by venn-core's
            // close rule with the updates that could be combined: a success at `needed`,
            // else (at the deadline) the authors' rule with the devices it dispatched. A
            // round whose updates cannot be combined into a finite model is aborted and
            // retried like one that missed its deadline, so one bad device cannot end the
            // job.
            let aggregated = match slot.filter(|s| !s.accepted.is_empty()) {
                Some(s) => self.aggregate(r, s, server_state).await,
                None => None,
            };
            let status = match &aggregated {
                Some(a) => {
                    let results = a.participants as u32;
                    self.api.close_round_judged(sub.round, results).await?
                }
                None => self.api.close_round(sub.round, RoundOutcome::Abort).await?,
            };
            if let Some(aggregated) =
                aggregated.filter(|_| status.outcome == Some(RoundOutcome::Success))
            {
                return Ok(Done {
                    aggregated,
                    status,
                    attempts,
                });
            }
            tracing::warn!(
                job = self.api.job_id,
                round = r,
                attempts,
                "round aborted (deadline missed or aggregation failed); retrying"
            );
            if attempts >= self.cfg.max_attempts {
                return Err(JobError::Manager(format!(
                    "round {r} failed {attempts} times"
                )));
            }
        }
    }

    /// Submits the next request (over-committed; `close_at` the results the job needs)
    /// and opens the job server's slot for it; devices waiting for the round learn either
    /// way (on failure: refused).
    async fn open(&self) -> Result<Submitted, JobError> {
        let (cfg, shared) = (self.cfg, self.shared);
        shared.submitting.store(true, Ordering::SeqCst);
        let sub = self
            .api
            .submit_round(&SubmitRound {
                demand: cfg.demand(),
                deadline_s: cfg.deadline_s,
                min_response_fraction: cfg.min_response_fraction,
                close_at: Some(cfg.needed()),
            })
            .await;
        let opened = {
            let mut slot = shared.slot.lock().unwrap_or_else(|e| e.into_inner());
            shared.submitting.store(false, Ordering::SeqCst);
            sub.inspect(|sub| {
                *slot = Some(OpenSlot {
                    round: sub.round,
                    seed: cfg
                        .seed
                        .wrapping_mul(1_000_003)
                        .wrapping_add(u64::from(sub.round) * 7919 + u64::from(sub.attempt)),
                    accepted: Vec::new(),
                    verified: Default::default(),
                    uploaded: Default::default(),
                });
            })
        };
        shared.opened.notify_waiters();
        Ok(opened?)
    }

    /// Waits for the results the job needs or the round's deadline, whichever comes first,
    /// then takes the round's slot (later uploads are refused).
    async fn collect(&self, sub: &Submitted) -> Option<OpenSlot> {
        let shared = self.shared;
        let needed = self.cfg.needed() as usize;
        let deadline = tokio::time::Instant::now()
            + Duration::from_secs_f64((sub.deadline - epoch_now()).max(0.0));
        loop {
            let notified = shared.notify.notified();
            let have = shared
                .slot
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map_or(0, |s| s.accepted.len());
            if have >= needed || tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        let mut g = shared.slot.lock().unwrap_or_else(|e| e.into_inner());
        shared.closed.fetch_add(1, Ordering::SeqCst);
        g.take()
    }

    /// The slot's updates aggregated, or `None` (logged) when they cannot be combined.
    async fn aggregate(
        &self,
        r: u32,
        slot: OpenSlot,
        server_state: &ServerState,
    ) -> Option<Aggregated> {
        let held = self.held_out.clone();
        match aggregate_checked(self.task, self.shared, slot.accepted, server_state, held).await {
            Ok(a) => Some(a),
            Err(e) => {
                tracing::warn!(job = self.api.job_id, round = r, error = %e, "aggregation failed");
                None
            }
        }
    }

    /// Installs round `r`'s new global model, evaluates it, reports the round (CSV, the
    /// job's results, the manager's status page); returns the accuracy.
    async fn install(
        &self,
        r: u32,
        done: Done,
        report: &mut JobReport,
        server_state: &mut ServerState,
    ) -> Result<f64, JobError> {
        let Done {
            aggregated,
            status,
            attempts,
        } = done;
        *server_state = aggregated.state;
        let participants = aggregated.participants as u32;
        let global = Arc::new(aggregated.global);
        *self.shared.global.lock().unwrap_or_else(|e| e.into_inner()) = global.clone();
        let (t, held) = (self.task.clone(), self.held_out.clone());
        let eval = tokio::task::spawn_blocking(move || t.evaluate(&global, held.test.view()))
            .await
            .map_err(|e| JobError::config(e.to_string()))??;
        let mut row = RoundRow {
            participants,
            stragglers: status.assigned.saturating_sub(participants),
            scheduling_delay_s: status.scheduling_delay_s,
            response_collection_s: status.response_collection_s,
            ..RoundRow::unevaluated(self.opts.t0.elapsed().as_secs_f64(), r, attempts)
        };
        row.set_eval(&eval);
        tracing::info!(
            job = self.api.job_id,
            round = r,
            accuracy = row.accuracy,
            participants,
            "round aggregated"
        );
        self.send_metrics(r, &status, &row, &eval).await;
        report.push(row.clone())?;
        self.shared.update_results(|res| res.rounds.push(row));
        Ok(eval.accuracy)
    }

    /// Evaluation ran after the close (it is not response collection): the metrics follow
    /// in a repeated close, for the manager's status page. Losing them loses nothing the
    /// job needs.
    async fn send_metrics(&self, r: u32, status: &RoundStatus, row: &RoundRow, eval: &EvalStats) {
        let metrics = RoundMetrics {
            accuracy: Some(eval.accuracy).filter(|a| a.is_finite()),
            loss: Some(eval.loss).filter(|l| l.is_finite() && *l >= 0.0),
            participants: Some(row.participants),
            eval_samples: Some(row.eval_samples).filter(|n| *n > 0),
        };
        if let Err(e) = self
            .api
            .close_round_with(status.round, RoundOutcome::Success, Some(metrics))
            .await
        {
            tracing::warn!(job = self.api.job_id, round = r, error = %e, "round metrics not recorded");
        }
    }
}

/// A round's next global model, before it is installed.
struct Aggregated {
    global: Vec<u8>,
    state: ServerState,
    participants: usize,
}

/// The task's aggregation of `updates` on a copy of the server state, then its calibration
/// step on the server's held-out samples where it has one, with the result checked like an
/// upload (the task's own tensors, all finite): a failure leaves the global model and the
/// state as they were.
async fn aggregate_checked(
    task: &Arc<dyn FlTask>,
    shared: &Arc<JobShared>,
    updates: Vec<(Vec<u8>, u64)>,
    state: &ServerState,
    held_out: Arc<HeldOut>,
) -> Result<Aggregated, JobError> {
    let global = shared
        .global
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let (t, mut state) = (task.clone(), state.clone());
    tokio::task::spawn_blocking(move || {
        let mut g = t.aggregate(&global, &updates, &mut state)?;
        if t.calibration_samples() > 0 {
            g = t.calibrate(&g, held_out.calibration.view())?;
        }
        t.check_update(&g)
            .map_err(|e| JobError::fedavg(format!("the new global model: {e}")))?;
        Ok(Aggregated {
            global: g,
            state,
            participants: updates.len(),
        })
    })
    .await
    .map_err(|e| JobError::config(e.to_string()))?
}
