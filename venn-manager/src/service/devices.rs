//! Devices: a check-in, decided by the core and made durable before the device hears
//! of its assignment.

use super::*;

impl Manager {
    /// A device checks in.
    pub fn check_in(&self, req: CheckIn) -> Result<CheckInReply, ServiceError> {
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
        let online_for = match req.online_for_s {
            None => None,
            Some(v) if v.is_finite() && (0.0..=MAX_ONLINE_FOR_S).contains(&v) => Some(v),
            Some(_) => {
                return Err(ServiceError::field(
                    "online_for_s",
                    format!("must be a number of seconds in [0, {MAX_ONLINE_FOR_S}]"),
                ));
            }
        };
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
            return Ok(CheckInReply::Retry {
                retry_after_s: wait,
            });
        };
        // The assignment must be durable before the device hears of it (below).
        *g.checkin_buf.entry((bucket, profile_key)).or_default() += 1;
        let state = g.core.job(job).expect("assigned to a live job");
        let r = state.current.as_ref().expect("assigned to an open round");
        let fulfilled = r.fulfilled_at.is_some();
        let deadline = r.request.deadline.secs();
        let capacity_s = p.task_seconds(state.spec.task_cost);
        let lease_until = deadline + self.settings.lease_grace_s;
        let meta = g.jobs.get(&job.0).expect("live job has meta").clone();
        let attempt = meta.last.map_or(0, |(_, a)| a);
        let raw_token = tokens::new_token();
        let task = StoredTask {
            token: tokens::digest(&raw_token).expect("a fresh token is well formed"),
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
        if let Err(e) = g.store.insert_task(&task, fulfilled) {
            let _ = g.core.task_failed(job, round, DeviceId(req.device_id), now);
            return Err(e.into());
        }
        g.tasks.insert(
            task.token.clone(),
            TaskMeta {
                job,
                round,
                device: DeviceId(req.device_id),
            },
        );
        drop(g);
        self.metrics.assignments.fetch_add(1, Relaxed);
        Ok(CheckInReply::Assigned {
            assignment: Assignment {
                job_id: job.0,
                round: round.0,
                plan_url: meta.plan_url,
                task_token: raw_token,
                lease_s: lease_until - now.secs(),
                model_size_bytes: meta.model_size_bytes,
            },
        })
    }
}
