//! The background ticker's duties: lease expiry and late-round aborts, admission
//! control's slot closes and evictions, and flushing buffered check-in counts.
//!
//! Each duty queues its writes under the state lock and waits for them after releasing
//! it: nothing is undone when they fail (the core has moved on either way; the error is
//! returned for the ticker to log), and check-ins need not wait behind a flush's rows.

use super::*;

impl Manager {
    /// Fails tasks whose lease ran out and aborts rounds left open well past their
    /// deadline (venn-core's timers, [`ResourceManager::handle_timeout`]), and ends jobs
    /// silent for longer than [`Registration::idle_job_s`](crate::settings::Registration)
    /// (their runners are presumed gone). Returns (tasks expired, rounds aborted).
    pub fn sweep(&self) -> Result<(usize, usize), ServiceError> {
        let now = self.clock.now();
        let mut g = self.lock();
        // venn-core's timers: tasks unreported `lease_grace_s` past their round's deadline
        // have failed, and rounds still open `round_grace_s` past it (their jobs are
        // presumed gone) come back aborted.
        let due = g.core.handle_timeout(now);
        let mut written = Vec::new();
        for e in &due.expired {
            let id = g
                .tasks
                .iter()
                .find(|(_, t)| (t.job, t.round, t.device) == (e.job, e.round, e.device))
                .map(|(id, _)| *id);
            if let Some(id) = id {
                g.forget_task(id);
                written.push(
                    g.store
                        .write(move |s| s.update_task(id, TaskState::Failed, now)),
                );
            }
        }
        for closed in &due.closed {
            written.push(g.record_close(closed.job, &closed.record, None, now));
            tracing::warn!(
                job = closed.job.0,
                round = closed.record.round.0,
                "round left open past its deadline: aborted"
            );
        }
        if let Some(idle) = self.settings.registration.idle_job_s {
            for job in g.silent_jobs(now, idle) {
                g.end(job, false, now)?;
                tracing::warn!(
                    job,
                    idle_s = idle,
                    "job silent too long: ended, its devices released"
                );
            }
        }
        drop(g);
        wait_all(written)?;
        self.metrics
            .tasks_expired
            .fetch_add(due.expired.len() as u64, Relaxed);
        self.metrics
            .rounds_abort
            .fetch_add(due.closed.len() as u64, Relaxed);
        Ok((due.expired.len(), due.closed.len()))
    }

    /// Admission control's share of the 1 s ticker: closes every slot that ended by now
    /// (venn-core's [`SlotClock`](venn_core::admission::SlotClock) judges it), persists
    /// the capacity history, and evicts what the controller evicts (removed from the
    /// core, `evicted` in the store; later calls about the job get 410). Returns the
    /// evicted job ids; does nothing with admission control off or before
    /// [`Manager::admission_timeout`].
    pub fn tick_admission(&self) -> Result<Vec<u64>, ServiceError> {
        let now = self.clock.now();
        let mut guard = self.lock();
        let g = &mut *guard;
        let Some(adm) = g.admission.as_mut() else {
            return Ok(Vec::new());
        };
        if now < adm.poll_timeout() {
            return Ok(Vec::new());
        }
        let closed = adm.handle_timeout(now);
        for j in &closed.judged {
            tracing::debug!(
                slot = j.slot,
                realised = j.realised,
                capacity = j.capacity,
                "admission slot closed"
            );
        }
        let evicted = closed.evicted;
        let (saved, min_slot) = adm.to_persist(now);
        let mut written = vec![
            g.store
                .write(move |s| s.put_admission_slots(&saved, min_slot)),
        ];
        for s in &evicted {
            written.push(g.evict(s.job, now));
        }
        drop(guard);
        wait_all(written)?;
        Ok(evicted.iter().map(|s| s.job.0).collect())
    }

    /// When admission control's open slot ends: [`Manager::tick_admission`] closes it
    /// at the first call from then on (`None` when admission control is off).
    pub fn admission_timeout(&self) -> Option<Time> {
        self.lock().admission.as_ref().map(|a| a.poll_timeout())
    }

    /// Admission control's state for `/v1/status` and `/metrics` (`None` when off).
    pub fn admission_report(&self) -> Option<AdmissionReport> {
        let now = self.clock.now();
        let g = self.lock();
        let active = g.jobs.values().filter(|m| m.plan.is_some()).count();
        g.admission.as_ref().map(|a| a.report(now, active))
    }

    /// Writes buffered check-in counts to the store and prunes old buckets; adds the
    /// check-ins since the last flush to the status page's supply per minute.
    pub fn flush_checkins(&self) -> Result<usize, ServiceError> {
        let now = self.clock.now();
        let total = self.metrics.checkins.load(Relaxed);
        let mut g = self.lock();
        let rows: Vec<(i64, String, u32)> =
            g.checkin_buf.drain().map(|((b, p), c)| (b, p, c)).collect();
        let n = rows.len();
        let fresh = total.saturating_sub(g.checkins_flushed);
        let minute = (now.secs() / 60.0).floor() as i64;
        g.checkins_flushed = total;
        g.history().add_supply(minute, fresh);
        // The open slot's tally, so a restart mid-slot keeps what it counted.
        let slots = g.admission.as_ref().map(|adm| {
            let (mut saved, min_slot) = adm.to_persist(now);
            saved.retain(|s| !s.judged);
            (saved, min_slot)
        });
        let bucket_len = self.settings.supply.window_s / self.settings.supply.buckets as f64;
        let min_bucket = ((now.secs() - self.settings.supply.window_s) / bucket_len).floor() as i64;
        let written = g.store.write(move |s| {
            s.add_checkins(&rows)?;
            s.add_supply_minute(minute, fresh, minute - history::SUPPLY_MINUTES as i64)?;
            if let Some((saved, min_slot)) = &slots {
                s.put_admission_slots(saved, *min_slot)?;
            }
            s.prune_checkins(min_bucket - 1).map(drop)
        });
        drop(g);
        written.wait()?;
        Ok(n)
    }
}

impl Inner {
    /// Jobs with no activity for more than `idle` seconds: no call since then, no open
    /// round whose deadline is that recent, no admitted launch still to come.
    fn silent_jobs(&self, now: Time, idle: f64) -> Vec<u64> {
        self.jobs
            .iter()
            .filter(|(id, meta)| {
                let mut last = meta.active_at;
                if let Some(p) = meta.plan {
                    last = last.max(p.launch_at.secs());
                }
                if let Some(r) = self.core.job(JobId(**id)).and_then(|j| j.current.as_ref()) {
                    last = last.max(r.request.deadline.secs());
                }
                now.secs() - last > idle
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Removes a job the admission controller evicted (it already forgot the job);
    /// returns the ticket of its `evicted` row.
    pub(super) fn evict(&mut self, job: JobId, now: Time) -> Ticket {
        tracing::warn!(
            job = job.0,
            "job evicted by admission control: realised capacity fell short (last admitted, first out)"
        );
        // Gone from the core whatever the store says: the controller already forgot it.
        let stored = self
            .store
            .write(move |s| s.end_job(job.0, JobLifecycle::Evicted, now));
        let _ = self.core.remove_job(job, now);
        self.forget_job(job.0);
        self.forget_tasks(|t| t.job == job);
        self.history()
            .job_ended(job.0, JobLifecycle::Evicted, now.secs());
        stored
    }
}
