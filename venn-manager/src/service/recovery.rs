//! Restart recovery: rebuilds the core, the task table and admission control from the
//! SQLite snapshot, so a restarted manager resumes every job, round and task.
//!
//! The same rebuild ([`Inner::reload`]) resynchronises a running manager after a failed
//! store write ([`Manager::resync`]): whatever memory held beyond the database — a round
//! closed whose close was never written, a task whose row was refused — is dropped, and
//! the state is what a restart on the same file would find. Only reads are needed, on the
//! reader connection, so it works while the disk is full.

use super::*;
use crate::store::StoredRound;
use venn_core::admission::{AdmittedJob, SavedSlot};

/// What a restore brought back besides the jobs themselves.
#[derive(Default)]
struct RestoreCounts {
    open_rounds: usize,
    outstanding: usize,
    admitted: usize,
}

/// A core with no jobs, configured by `settings`, its policy built by `registry`.
pub(super) fn new_core(
    settings: &Settings,
    registry: &PolicyRegistry,
) -> anyhow::Result<ResourceManager> {
    let cfg = ManagerConfig {
        supply: settings.supply,
        seed: settings.seed,
        fit: settings.fit,
        // Results go to the jobs: each closes its own rounds (judged by the core's
        // rule with its count), and the core aborts a round its job left open.
        closing: RoundClosing::Job {
            grace_s: settings.round_grace_s,
            lease_grace_s: settings.lease_grace_s,
        },
    };
    let mut core = ResourceManager::with_registry(cfg, &settings.policy, registry)?;
    // Profiles come from anonymous clients: key their hash with a secret.
    core.set_profile_hash_key(rand::random());
    core.set_class_cap(settings.max_profile_classes);
    Ok(core)
}

impl Manager {
    /// Rebuilds the state from the database after a failed write, then lets the writer
    /// take writes again. If the rebuild itself fails the writer stays failed (every
    /// write refused) and the next lock tries again.
    pub(super) fn resync(&self, g: &mut Inner) {
        let t0 = Instant::now();
        let Some(registry) = &self.registry else {
            if self.stuck_told.swap(true, Relaxed) {
                return;
            }
            tracing::error!(
                db = %g.reader.path(),
                policy = %self.settings.policy.name(),
                "a store write failed and the custom policy cannot be built again: writes stay refused until the manager is restarted"
            );
            return;
        };
        match g.reload(&self.settings, registry, self.clock.now()) {
            Ok((jobs, open_rounds, tasks, _)) => {
                g.store.resynchronised();
                tracing::info!(
                    jobs,
                    open_rounds,
                    tasks,
                    took_ms = t0.elapsed().as_millis() as u64,
                    "state rebuilt from the database after a failed write"
                );
            }
            Err(e) => tracing::error!(
                db = %g.reader.path(),
                error = %e,
                "cannot rebuild the state from the database; store writes stay refused"
            ),
        }
    }
}

impl Inner {
    /// Replaces everything in memory — core, jobs, tasks, ids, admission control, the
    /// status page's record, unflushed check-in counts — with what the database holds, as
    /// [`Manager::open`] finds it. Reads first: a failed read changes nothing. Returns
    /// (jobs, open rounds, outstanding tasks, admitted jobs).
    pub(super) fn reload(
        &mut self,
        settings: &Settings,
        registry: &PolicyRegistry,
        now: Time,
    ) -> anyhow::Result<(usize, usize, usize, usize)> {
        let core = new_core(settings, registry)?;
        let bucket_len = settings.supply.window_s / settings.supply.buckets as f64;
        let min_bucket = ((now.secs() - settings.supply.window_s) / bucket_len).floor() as i64;
        let snap = self.reader.load(min_bucket)?;
        let min_minute = (now.secs() / 60.0).floor() as i64 - history::SUPPLY_MINUTES as i64;
        let history = History::restore(self.reader.history(
            history::MAX_JOBS,
            history::RESTORE_ROUNDS,
            min_minute,
        )?);
        let admission = match settings.admission {
            Some(p) => Some((p, self.reader.admission_slots()?)),
            None => None,
        };
        self.core = core;
        self.jobs.clear();
        self.tasks.clear();
        self.legacy_tasks.clear();
        self.credential_jobs.clear();
        self.checkin_buf.clear();
        self.admission = None;
        self.next_job_id = snap.max_job_id.map_or(0, |m| m + 1);
        // Ids start at 1: a token's id has no leading zero, and 0 would be "0".
        self.next_task_id = snap.max_task_id.map_or(1, |m| m + 1);
        *self.history() = history;
        self.restore(snap, bucket_len, admission, now)
    }

    fn restore(
        &mut self,
        mut snap: Snapshot,
        bucket_len: f64,
        admission: Option<(AdmissionParams, Vec<SavedSlot>)>,
        now: Time,
    ) -> anyhow::Result<(usize, usize, usize, usize)> {
        for (bucket, profile, count) in &snap.checkins {
            let p: DeviceProfile = serde_json::from_str(profile)?;
            self.core
                .observe_supply(&p, Time((*bucket as f64 + 0.5) * bucket_len), *count);
        }
        if let Some((params, saved)) = admission {
            self.admission = Some(AdmissionState::new(params, now, saved)?);
        }
        let mut counts = RestoreCounts::default();
        for j in std::mem::take(&mut snap.jobs) {
            self.restore_job(j, &mut snap, now, &mut counts)?;
        }
        Ok((
            self.jobs.len(),
            counts.open_rounds,
            counts.outstanding,
            counts.admitted,
        ))
    }

    /// Restores one job: its progress, its open round and tasks, its admission.
    fn restore_job(
        &mut self,
        j: StoredJob,
        snap: &mut Snapshot,
        now: Time,
        counts: &mut RestoreCounts,
    ) -> anyhow::Result<()> {
        let rounds: Vec<_> = snap.rounds.iter().filter(|r| r.job_id == j.id).collect();
        let tasks: Vec<&StoredTask> = snap.tasks.iter().filter(|t| t.job_id == j.id).collect();
        let id = JobId(j.id);
        self.core.restore_job(
            id,
            j.spec.clone(),
            Time(j.registered_at),
            job_progress(&j, &rounds, &tasks),
        )?;
        let last = rounds.last().map(|r| (r.round, r.attempt));
        if let Some(open) = rounds.iter().find(|r| r.closed_at.is_none()) {
            let legacy_below = snap.legacy_tasks_below;
            counts.outstanding += self.restore_open_round(id, open, &tasks, legacy_below, now)?;
            counts.open_rounds += 1;
        }
        let plan = self.restore_admission(j.id, snap.admissions.remove(&j.id), now)?;
        if plan.is_some() {
            counts.admitted += 1;
        }
        self.add_job(
            j.id,
            JobMeta {
                token: j.token,
                plan_url: j.plan_url,
                model_size_bytes: j.model_size_bytes,
                last,
                plan,
                active_at: now.secs(),
                credential: snap.credentials.remove(&j.id),
            },
        );
        Ok(())
    }

    /// Reopens a job's open round in the core and takes its unfinished tasks back into
    /// the task table (those with ids below `legacy_below` also by digest); how many it
    /// took back.
    fn restore_open_round(
        &mut self,
        id: JobId,
        open: &StoredRound,
        tasks: &[&StoredTask],
        legacy_below: u64,
        now: Time,
    ) -> anyhow::Result<usize> {
        let mine: Vec<&&StoredTask> = tasks
            .iter()
            .filter(|t| t.round == open.round && t.attempt == open.attempt)
            .collect();
        let restored = RestoredRound {
            round: RoundId(open.round),
            request: open.request,
            submitted_at: Time(open.submitted_at),
            fulfilled_at: open.fulfilled_at.map(Time),
            tasks: mine
                .iter()
                .map(|t| {
                    (
                        DeviceId(t.device_id),
                        TaskRecord {
                            assigned_at: Time(t.assigned_at),
                            capacity_s: t.capacity_s,
                            state: t.state,
                        },
                    )
                })
                .collect(),
        };
        self.core.restore_round(id, restored, now)?;
        let mut outstanding = 0;
        for t in mine
            .iter()
            .filter(|t| matches!(t.state, TaskState::Assigned | TaskState::Acknowledged))
        {
            let digest = tokens::parse_digest(&t.digest)
                .ok_or_else(|| anyhow::anyhow!("task {}: its stored digest is malformed", t.id))?;
            self.tasks.insert(
                t.id,
                TaskMeta {
                    job: id,
                    round: RoundId(t.round),
                    device: DeviceId(t.device_id),
                    digest,
                },
            );
            // Assigned before schema 8: its token carries no id, it is found by digest.
            if t.id < legacy_below {
                self.legacy_tasks.insert(digest, t.id);
            }
            outstanding += 1;
        }
        Ok(outstanding)
    }

    /// Gives an admitted job back to admission control and holds it until its launch;
    /// its plan, or `None` when admission control is off now (the job is no longer held).
    fn restore_admission(
        &mut self,
        job: u64,
        saved: Option<AdmittedJob>,
        now: Time,
    ) -> anyhow::Result<Option<AdmissionPlan>> {
        let id = JobId(job);
        Ok(match (self.admission.as_mut(), saved) {
            (Some(adm), Some(a)) => {
                let plan = a.plan;
                adm.controller_mut().restore(id, a, now)?;
                self.core.hold_job(id, plan.launch_at)?;
                Some(plan)
            }
            (None, Some(_)) => {
                tracing::warn!(
                    job,
                    "admitted job restored with admission control off: it is no longer held"
                );
                None
            }
            (_, None) => None,
        })
    }
}

/// Where a stored round's scheduling delay ended ([`RoundRecord::scheduled_at`]), from the
/// tasks of its attempt.
fn scheduled_at(r: &StoredRound, tasks: &[&StoredTask]) -> Option<Time> {
    let records: Vec<TaskRecord> = tasks
        .iter()
        .filter(|t| t.round == r.round && t.attempt == r.attempt)
        .map(|t| TaskRecord {
            assigned_at: Time(t.assigned_at),
            capacity_s: t.capacity_s,
            state: t.state,
        })
        .collect();
    RoundRecord::scheduled_at(r.fulfilled_at.map(Time), &records)
}

/// A job's progress as the core restores it: its closed rounds and its finished tasks'
/// response times.
fn job_progress(j: &StoredJob, rounds: &[&StoredRound], tasks: &[&StoredTask]) -> JobProgress {
    let closed = rounds
        .iter()
        .filter_map(|r| {
            Some(RoundRecord {
                round: RoundId(r.round),
                demand: r.request.demand,
                submitted_at: Time(r.submitted_at),
                fulfilled_at: r.fulfilled_at.map(Time),
                scheduled_at: scheduled_at(r, tasks),
                closed_at: Time(r.closed_at?),
                assigned: r.counts.0,
                finished: r.counts.1,
                failed: r.counts.2,
                outcome: r.outcome?,
            })
        })
        .collect();
    let samples = tasks
        .iter()
        .filter(|t| t.state == TaskState::Finished)
        .filter_map(|t| {
            Some(TaskSample {
                capacity_s: t.capacity_s,
                response_s: t.reported_at? - t.assigned_at,
            })
        })
        .collect();
    JobProgress {
        rounds_done: j.rounds_done,
        next_round: j.next_round,
        rounds: closed,
        tasks: samples,
    }
}
