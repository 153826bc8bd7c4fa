//! Rounds: submission, status and close (success or abort).

use super::*;

impl Manager {
    /// Submits the job's next round request.
    pub fn submit_round(
        &self,
        job: u64,
        token: Option<&str>,
        req: SubmitRound,
    ) -> Result<Submitted, ServiceError> {
        finite("deadline_s", req.deadline_s)?;
        if !(req.deadline_s > 0.0 && req.deadline_s <= limits::MAX_DEADLINE_S) {
            return Err(ServiceError::field(
                "deadline_s",
                format!("must be positive and at most {} s", limits::MAX_DEADLINE_S),
            ));
        }
        if req.demand > limits::MAX_DEMAND {
            return Err(ServiceError::field(
                "demand",
                format!("at most {} devices per round", limits::MAX_DEMAND),
            ));
        }
        finite("min_response_fraction", req.min_response_fraction)?;
        let now = self.clock.now();
        let mut g = self.lock();
        Self::authorize(&mut g, job, token, now)?;
        if req.close_at.is_some_and(|n| n == 0 || n > req.demand) {
            return Err(ServiceError::field(
                "close_at",
                "must be between 1 and the demand",
            ));
        }
        let request =
            RoundRequest::new(req.demand, now + req.deadline_s, req.min_response_fraction)
                .closing_at(req.close_at);
        if let Some(open) = Self::retried_submit(&g, job, &request) {
            return Ok(open);
        }
        if let Some(rule) = self.settings.feasibility {
            super::feasibility::check_round(&g.core, JobId(job), &request, now, rule)?;
        }
        let round = g.core.submit_request(JobId(job), request, now)?;
        let attempt = match g.jobs[&job].last {
            Some((r, a)) if r == round.0 => a + 1,
            _ => 0,
        };
        // Waited for under the lock: a failure is undone in the core before anyone sees
        // the round.
        let written = g
            .store
            .write(move |s| s.insert_round(job, round.0, attempt, &request, now))
            .wait();
        if let Err(e) = written {
            let _ = g
                .core
                .close_round(JobId(job), round, RoundOutcome::Abort, now);
            return Err(e.into());
        }
        g.jobs.get_mut(&job).expect("authorized").last = Some((round.0, attempt));
        tracing::debug!(
            job,
            round = round.0,
            attempt,
            demand = req.demand,
            "round submitted"
        );
        Ok(Submitted {
            round: round.0,
            attempt,
            deadline: request.deadline.secs(),
        })
    }

    /// Status of a round: open or closed (latest attempt).
    pub fn round_status(&self, job: u64, round: u32) -> Result<RoundStatus, ServiceError> {
        let now = self.clock.now();
        let g = self.lock();
        let state = g.core.job(JobId(job)).ok_or_else(|| g.missing(job))?;
        if let Some(r) = state.round(RoundId(round)) {
            return Ok(RoundStatus {
                round,
                state: if r.fulfilled_at.is_some() {
                    RoundState::Fulfilled
                } else {
                    RoundState::Open
                },
                demand: r.request.demand,
                assigned: r.assigned,
                finished: r.finished,
                failed: r.failed,
                submitted_at: r.submitted_at.secs(),
                fulfilled_at: r.fulfilled_at.map(Time::secs),
                closed_at: None,
                outcome: None,
                scheduling_delay_s: r.fulfilled_at.unwrap_or(now).since(r.submitted_at),
                response_collection_s: 0.0,
            });
        }
        let rec = state
            .history
            .rounds
            .iter()
            .rev()
            .find(|r| r.round.0 == round)
            .ok_or_else(|| ServiceError::not_found(format!("job {job} has no round {round}")))?;
        Ok(RoundStatus {
            round,
            state: RoundState::Closed,
            demand: rec.demand,
            assigned: rec.assigned,
            finished: rec.finished,
            failed: rec.failed,
            submitted_at: rec.submitted_at.secs(),
            fulfilled_at: rec.fulfilled_at.map(Time::secs),
            closed_at: Some(rec.closed_at.secs()),
            outcome: Some(rec.outcome),
            scheduling_delay_s: rec.scheduling_delay(),
            response_collection_s: rec.response_collection(),
        })
    }

    /// Closes the job's open round, recording its metrics when given: with the job's
    /// outcome, or judged by venn-core's close rule from the usable results the job holds
    /// ([`CloseWith`]). Repeated for the round's latest attempt, already closed with the
    /// same outcome, it records the metrics only: a job that evaluates after closing
    /// reports them so, and a retried close is harmless.
    pub fn close_round(
        &self,
        job: u64,
        token: Option<&str>,
        round: u32,
        how: CloseWith,
        metrics: Option<RoundMetrics>,
    ) -> Result<RoundStatus, ServiceError> {
        if let Some(m) = &metrics {
            check_metrics(m)?;
        }
        let now = self.clock.now();
        let (outcome, written) = {
            let mut g = self.lock();
            Self::authorize(&mut g, job, token, now)?;
            let open = g
                .core
                .job(JobId(job))
                .and_then(|j| j.current.as_ref())
                .is_some_and(|r| r.round.0 == round);
            // Read in order with the writes: a close queued just before is seen.
            let closed = g.store.read(move |s| s.closed_attempt(job, round))?;
            match (closed, how) {
                // A judged close repeated (its reply lost to a restart, say): the round's
                // status says how it closed.
                (Some(_), CloseWith::Results(_)) if !open => {
                    drop(g);
                    return self.round_status(job, round);
                }
                (Some((attempt, done, closed_at)), CloseWith::Outcome(outcome))
                    if !open && done == outcome =>
                {
                    if let Some(m) = metrics {
                        g.store
                            .write(move |s| s.put_round_metrics(job, round, attempt, &m))
                            .wait()?;
                        g.history().round_metrics(job, round, attempt, closed_at, m);
                    }
                    drop(g);
                    return self.round_status(job, round);
                }
                _ => g.close(JobId(job), RoundId(round), how, metrics, now)?,
            }
        };
        written.wait()?;
        match outcome {
            RoundOutcome::Success => self.metrics.rounds_success.fetch_add(1, Relaxed),
            RoundOutcome::Abort => self.metrics.rounds_abort.fetch_add(1, Relaxed),
        };
        self.round_status(job, round)
    }
}

impl Manager {
    /// The open round a submission repeats, if it does: a job has one round open at a
    /// time, so the same request (demand, fraction, close count) while its round is open
    /// is a retry whose first reply was lost (the manager restarted after its commit, say),
    /// answered with that round as the first would have been.
    fn retried_submit(g: &Inner, job: u64, request: &RoundRequest) -> Option<Submitted> {
        let r = g.core.job(JobId(job))?.current.as_ref()?;
        let same = r.request.demand == request.demand
            && r.request.min_response_fraction == request.min_response_fraction
            && r.request.close_at == request.close_at;
        let (round, attempt) = g.jobs.get(&job)?.last?;
        (same && round == r.round.0).then(|| Submitted {
            round,
            attempt,
            deadline: r.request.deadline.secs(),
        })
    }
}

/// How a job closes its round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CloseWith {
    /// With this outcome, as the job decided it.
    Outcome(RoundOutcome),
    /// Judged by venn-core's close rule, the job holding this many usable results.
    Results(u32),
}

/// Accuracy in [0, 1], loss finite and not negative, participants at most a round's
/// largest demand, a positive evaluation sample count.
fn check_metrics(m: &RoundMetrics) -> Result<(), ServiceError> {
    if m.accuracy.is_some_and(|a| !(0.0..=1.0).contains(&a)) {
        return Err(ServiceError::field(
            "metrics.accuracy",
            "must be a fraction in [0, 1]",
        ));
    }
    if m.loss.is_some_and(|l| !(l.is_finite() && l >= 0.0)) {
        return Err(ServiceError::field(
            "metrics.loss",
            "must be a finite number, not negative",
        ));
    }
    if m.participants.is_some_and(|p| p > limits::MAX_DEMAND) {
        return Err(ServiceError::field(
            "metrics.participants",
            format!("at most {}", limits::MAX_DEMAND),
        ));
    }
    if m.eval_samples == Some(0) {
        return Err(ServiceError::field(
            "metrics.eval_samples",
            "must be at least 1 (omit it when unknown)",
        ));
    }
    Ok(())
}

impl Inner {
    /// Closes `round` of `job` in the core as `how` says, then records it; returns how it
    /// closed and the ticket of its write.
    pub(super) fn close(
        &mut self,
        job: JobId,
        round: RoundId,
        how: CloseWith,
        metrics: Option<RoundMetrics>,
        now: Time,
    ) -> Result<(RoundOutcome, Ticket), ServiceError> {
        let rec = match how {
            CloseWith::Outcome(outcome) => self.core.close_round(job, round, outcome, now)?,
            CloseWith::Results(n) => self.core.judge_round(job, round, Some(n), now)?,
        };
        let written = self.record_close(job, &rec, metrics, now);
        Ok((rec.outcome, written))
    }

    /// Queues a round the core closed (`rec`) for the store — its close and its job's
    /// metrics in one write — shows it, and releases its tasks. The caller waits for the
    /// ticket after releasing the lock: the core has closed the round either way.
    pub(super) fn record_close(
        &mut self,
        job: JobId,
        rec: &RoundRecord,
        metrics: Option<RoundMetrics>,
        now: Time,
    ) -> Ticket {
        let (round, outcome) = (rec.round, rec.outcome);
        let state = self.core.job(job).expect("closed a live job's round");
        let progress = (state.rounds_done, state.next_round);
        let attempt = self
            .jobs
            .get(&job.0)
            .and_then(|m| m.last)
            .map_or(0, |(_, a)| a);
        let written = self.store.write(move |s| {
            s.close_round(job.0, round.0, attempt, outcome, now, progress)?;
            match &metrics {
                Some(m) => s.put_round_metrics(job.0, round.0, attempt, m),
                None => Ok(()),
            }
        });
        self.history().round_closed(HistoryRound {
            job_id: job.0,
            round: round.0,
            attempt,
            demand: rec.demand,
            submitted_at: rec.submitted_at.secs(),
            fulfilled_at: rec.fulfilled_at.map(Time::secs),
            scheduled_at: rec.scheduled_at.map(Time::secs),
            closed_at: rec.closed_at.secs(),
            outcome,
            metrics: metrics.unwrap_or_default(),
        });
        self.forget_tasks(|t| t.job == job && t.round == round);
        tracing::info!(
            job = job.0,
            round = round.0,
            ?outcome,
            sched_delay_s = rec.scheduling_delay(),
            collect_s = rec.response_collection(),
            "round closed"
        );
        written
    }
}
