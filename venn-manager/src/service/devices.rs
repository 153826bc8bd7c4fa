//! Devices: a check-in, decided by the core and made durable before the device hears
//! of its assignment.
//!
//! The decision and the queueing of its task row happen under the state lock; the wait
//! for the commit happens after it is released, so check-ins decided meanwhile join the
//! same group commit ([`crate::writer`]).

use super::*;
use crate::writer::WriteError;

/// A check-in the core has decided.
enum Decided {
    /// Nothing to write: the answer can go at once.
    Answered(CheckInReply),
    /// An assignment whose task row is queued: answer once it has committed.
    Assigned {
        reply: CheckInReply,
        ticket: Ticket,
        undo: Unassign,
    },
}

/// What undoes an assignment whose row did not commit.
struct Unassign {
    task: u64,
    job: JobId,
    round: RoundId,
    device: DeviceId,
    at: Time,
    /// The writer's epoch when the assignment was queued: after a resynchronisation the
    /// state was rebuilt without it, and there is nothing to take back.
    epoch: u64,
}

impl Manager {
    /// A device checks in. Blocks the calling thread until an assignment is durable;
    /// async callers use [`Manager::check_in_acked`].
    pub fn check_in(&self, req: CheckIn) -> Result<CheckInReply, ServiceError> {
        match self.decide_check_in(req)? {
            Decided::Answered(reply) => Ok(reply),
            Decided::Assigned {
                reply,
                ticket,
                undo,
            } => self.settle_check_in(reply, ticket.wait(), undo),
        }
    }

    /// [`Manager::check_in`] for async callers: the task waits for the commit, not the
    /// thread.
    pub async fn check_in_acked(&self, req: CheckIn) -> Result<CheckInReply, ServiceError> {
        match self.decide_check_in(req)? {
            Decided::Answered(reply) => Ok(reply),
            Decided::Assigned {
                reply,
                ticket,
                undo,
            } => self.settle_check_in(reply, ticket.await, undo),
        }
    }

    /// The reply once the assignment's write is done: the assignment if it committed;
    /// else the core takes the device back (the round may have closed meanwhile, then
    /// there is nothing to take back; or the state was rebuilt from the database, which
    /// never had it) and the check-in fails.
    fn settle_check_in(
        &self,
        reply: CheckInReply,
        written: Result<(), WriteError>,
        undo: Unassign,
    ) -> Result<CheckInReply, ServiceError> {
        match written {
            Ok(()) => {
                self.metrics.assignments.fetch_add(1, Relaxed);
                Ok(reply)
            }
            Err(e) => {
                let mut g = self.lock();
                if g.store.epoch() == undo.epoch {
                    g.forget_task(undo.task);
                    let _ = g
                        .core
                        .task_failed(undo.job, undo.round, undo.device, undo.at);
                }
                drop(g);
                // The writer has logged the failure (once, with the database's path).
                tracing::debug!(job = undo.job.0, device = undo.device.0, error = %e, "assignment not stored: taken back");
                Err(e.into())
            }
        }
    }

    /// Validates a check-in, has the core decide it and queues an assignment's task row.
    fn decide_check_in(&self, req: CheckIn) -> Result<Decided, ServiceError> {
        let online_for = validate(&req)?;
        let p = &req.profile;
        let now = self.clock.now();
        let bucket_len = self.settings.supply.window_s / self.settings.supply.buckets as f64;
        let bucket = (now.secs() / bucket_len).floor() as i64;
        let profile_key = serde_json::to_string(p).map_err(ServiceError::internal)?;
        self.metrics.checkins.fetch_add(1, Relaxed);
        let mut g = self.lock();
        if let Some(adm) = g.admission.as_mut() {
            adm.on_check_in(now);
        }
        let t0 = Instant::now();
        let online_until = online_for.map(|s| Time(now.secs() + s));
        let decision = g
            .core
            .check_in_until(DeviceId(req.device_id), p, now, online_until);
        self.metrics.observe_decision(t0.elapsed().as_secs_f64());
        // Past the class cap the check-in counts in another profile's class: store that
        // one, so the stored rows stay as bounded as the classes.
        let profile_key = match g.core.last_check_in_class() {
            Some(c) if c.profile != *p => {
                serde_json::to_string(&c.profile).map_err(ServiceError::internal)?
            }
            _ => profile_key,
        };
        let Decision::Assigned { job, round } = decision else {
            *g.checkin_buf.entry((bucket, profile_key)).or_default() += 1;
            let busy = g.core.groups().open().is_empty();
            let wait = self.settings.retry_after_s * if busy { 2.0 } else { 1.0 };
            return Ok(Decided::Answered(CheckInReply::Retry {
                retry_after_s: wait,
            }));
        };
        // The assignment must be durable before the device hears of it: its task row is
        // queued below and the reply waits for the ticket.
        *g.checkin_buf.entry((bucket, profile_key)).or_default() += 1;
        let state = g.core.job(job).expect("assigned to a live job");
        let r = state.current.as_ref().expect("assigned to an open round");
        let fulfilled = r.fulfilled_at.is_some();
        let deadline = r.request.deadline.secs();
        let capacity_s = p.task_seconds(state.spec.task_cost);
        let lease_until = deadline + self.settings.lease_grace_s;
        let meta = g.jobs.get(&job.0).expect("live job has meta");
        let (plan_url, model_size_bytes) = (meta.plan_url.clone(), meta.model_size_bytes);
        let attempt = meta.last.map_or(0, |(_, a)| a);
        let id = g.next_task_id;
        g.next_task_id += 1;
        let raw_token = tokens::new_task_token(id);
        let digest = tokens::task_digest(&raw_token).expect("a fresh token is well formed");
        let task = StoredTask {
            id,
            digest: tokens::digest_hex(&digest),
            job_id: job.0,
            round: round.0,
            attempt,
            device_id: req.device_id,
            assigned_at: now.secs(),
            capacity_s,
            lease_until,
            state: TaskState::Assigned,
            reported_at: None,
        };
        g.tasks.insert(
            id,
            TaskMeta {
                job,
                round,
                device: DeviceId(req.device_id),
                digest,
            },
        );
        let epoch = g.store.epoch();
        let ticket = g.store.write(move |s| s.insert_task(&task, fulfilled));
        drop(g);
        Ok(Decided::Assigned {
            reply: CheckInReply::Assigned {
                assignment: Assignment {
                    job_id: job.0,
                    round: round.0,
                    plan_url,
                    task_token: raw_token,
                    lease_s: lease_until - now.secs(),
                    model_size_bytes,
                },
            },
            ticket,
            undo: Unassign {
                task: id,
                job,
                round,
                device: DeviceId(req.device_id),
                at: now,
                epoch,
            },
        })
    }
}

/// The profile's numbers finite and positive where they must be, its tags bounded, and
/// `online_for_s` in range (returned).
fn validate(req: &CheckIn) -> Result<Option<f64>, ServiceError> {
    let p = &req.profile;
    for (f, v) in [
        ("profile.cpu_score", p.cpu_score),
        ("profile.mem_score", p.mem_score),
        ("profile.os_version", p.os_version),
        ("profile.ms_per_sample", p.ms_per_sample),
        ("profile.bandwidth_kbps", p.bandwidth_kbps),
    ] {
        finite(f, v)?;
    }
    check_tags("profile.tags", &p.tags)?;
    if p.ms_per_sample <= 0.0 || p.bandwidth_kbps <= 0.0 {
        return Err(ServiceError::field(
            "profile",
            "ms_per_sample and bandwidth_kbps must be positive",
        ));
    }
    match req.online_for_s {
        None => Ok(None),
        Some(v) if v.is_finite() && (0.0..=MAX_ONLINE_FOR_S).contains(&v) => Ok(Some(v)),
        Some(_) => Err(ServiceError::field(
            "online_for_s",
            format!("must be a number of seconds in [0, {MAX_ONLINE_FOR_S}]"),
        )),
    }
}
