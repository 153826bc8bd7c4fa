//! Jobs: registration (through admission control when it is on), completion and
//! cancellation, and what the API reads about a job.

use super::*;
use venn_core::admission::{AdmittedJob, StatementOfWork};

/// A registration's rows for the store: the job, and what admission control made of it.
struct Registering<'a> {
    stored: &'a StoredJob,
    admitted: Option<&'a AdmittedJob>,
    statement: Option<&'a StatementOfWork>,
    credential: Option<&'a str>,
}

impl Manager {
    /// Registers a job (`POST /v1/jobs`). With admission control off the statement of
    /// work is ignored. With it on the statement is required (422 naming `statement`
    /// otherwise, or the statement's bad field) and the controller decides: an admitted
    /// job is registered, held until its plan's launch, and answered with the plan; a
    /// declined job is not registered and gets a 409 with the reason and the quote.
    pub fn register_job(&self, req: RegisterJob) -> Result<Registered, ServiceError> {
        self.register_job_as(req, None)
    }

    /// [`Manager::register_job`] for `credential` (the HTTP layer names the operator
    /// token or the source address; `None`: no quota), which may hold at most
    /// [`Registration::max_jobs_per_credential`](crate::settings::Registration) live jobs
    /// (403 `quota_exceeded` past it).
    pub fn register_job_as(
        &self,
        mut req: RegisterJob,
        credential: Option<String>,
    ) -> Result<Registered, ServiceError> {
        let statement = req.statement.take();
        self.check_registration(&req)?;
        let statement = self.statement_for(&req.name, statement)?;
        let now = self.clock.now();
        let mut spec = JobSpec::new(req.name, req.requirement).with_rounds(req.rounds);
        if let Some(c) = req.task_cost {
            spec = spec.with_task_cost(c);
        }
        let mut guard = self.lock();
        let g = &mut *guard;
        self.check_quota(g, credential.as_deref())?;
        let id = JobId(g.next_job_id);
        g.core.register_job_with_id(id, spec.clone(), now)?;
        let admitted = g.admit_registered(id, &spec.name, statement.as_ref(), now)?;
        let raw_token = tokens::new_token();
        let stored = StoredJob {
            id: id.0,
            spec,
            token: tokens::digest(&raw_token).expect("a fresh token is well formed"),
            plan_url: req.plan_url,
            model_size_bytes: req.model_size_bytes,
            registered_at: now.secs(),
            state: JobLifecycle::Active,
            rounds_done: 0,
            next_round: 0,
        };
        g.save_registered(
            &Registering {
                stored: &stored,
                admitted: admitted.as_ref(),
                statement: statement.as_ref(),
                credential: credential.as_deref(),
            },
            now,
        )?;
        g.next_job_id += 1;
        let plan = admitted.map(|a| a.plan);
        let meta = JobMeta {
            token: stored.token.clone(),
            plan_url: stored.plan_url,
            model_size_bytes: stored.model_size_bytes,
            last: None,
            plan,
            active_at: now.secs(),
            credential,
        };
        g.add_job(id.0, meta);
        g.history().job_registered(id.0, &stored.spec, now.secs());
        match plan {
            Some(p) => tracing::info!(
                job = id.0,
                name = %stored.spec.name,
                launch_at = p.launch_at.secs(),
                expected_value = p.expected_value,
                expected_price = p.expected_price,
                "job admitted and registered"
            ),
            None => tracing::info!(job = id.0, name = %stored.spec.name, "job registered"),
        }
        Ok(Registered {
            job_id: id.0,
            token: raw_token,
            plan,
            registered_at: Some(now.secs()),
        })
    }

    /// The checks of a registration's fields that need no lock (422 naming the field).
    fn check_registration(&self, req: &RegisterJob) -> Result<(), ServiceError> {
        if req.name.trim().is_empty() {
            return Err(ServiceError::field("name", "must not be empty"));
        }
        if req.name.len() > limits::MAX_NAME_BYTES {
            return Err(ServiceError::field(
                "name",
                format!("at most {} bytes", limits::MAX_NAME_BYTES),
            ));
        }
        if !(1..=limits::MAX_ROUNDS).contains(&req.rounds) {
            return Err(ServiceError::field(
                "rounds",
                format!("must be in 1..={}", limits::MAX_ROUNDS),
            ));
        }
        if req.plan_url.len() > limits::MAX_URL_BYTES {
            return Err(ServiceError::field(
                "plan_url",
                format!("at most {} bytes", limits::MAX_URL_BYTES),
            ));
        }
        check_tags("requirement.tags", &req.requirement.tags)?;
        if !self.settings.registration.plan_host_allowed(&req.plan_url) {
            return Err(ServiceError::field(
                "plan_url",
                "must be an http:// or https:// URL on loopback or on a host the manager \
                 allows (--plan-host): devices are sent there",
            ));
        }
        Ok(())
    }

    /// The statement of work admission control will judge: required while it is on,
    /// ignored while it is off.
    fn statement_for(
        &self,
        name: &str,
        statement: Option<StatementOfWork>,
    ) -> Result<Option<StatementOfWork>, ServiceError> {
        match (self.settings.admission.as_ref(), statement) {
            (None, s) => {
                if s.is_some() {
                    tracing::debug!(name = %name, "statement of work ignored: admission control is off");
                }
                Ok(None)
            }
            (Some(_), None) => Err(ServiceError::field(
                "statement",
                "required while admission control is on: {value, rounds, demand, round_s}",
            )),
            (Some(params), Some(s)) => {
                s.validate()?;
                check_statement(&s, params)?;
                Ok(Some(s))
            }
        }
    }

    /// 403 `quota_exceeded` when `credential` already holds its quota of live jobs.
    fn check_quota(&self, g: &Inner, credential: Option<&str>) -> Result<(), ServiceError> {
        if let (Some(c), Some(quota)) = (
            credential,
            self.settings.registration.max_jobs_per_credential,
        ) && g.credential_jobs.get(c).copied().unwrap_or(0) >= quota
        {
            return Err(ServiceError::Quota {
                credential: c.to_owned(),
                quota,
            });
        }
        Ok(())
    }

    /// Checks the job's token; an authorised call is activity that keeps the job from
    /// the idle-job reaper.
    pub(super) fn authorize(
        g: &mut Inner,
        job: u64,
        token: Option<&str>,
        now: Time,
    ) -> Result<(), ServiceError> {
        if !g.jobs.contains_key(&job) {
            return Err(g.missing(job));
        }
        let meta = g.jobs.get_mut(&job).expect("checked above");
        match token {
            Some(t) if tokens::matches(&meta.token, t) => {
                meta.active_at = meta.active_at.max(now.secs());
                Ok(())
            }
            _ => Err(ServiceError::Unauthorized("job token")),
        }
    }

    /// Checks the operator token of a registration (`Authorization: Bearer …`), when the
    /// manager has one ([`Registration::operator_token`](crate::settings::Registration)).
    pub fn authorize_registration(&self, bearer: Option<&str>) -> Result<(), ServiceError> {
        match (&self.settings.registration.operator_token, bearer) {
            (None, _) => Ok(()),
            (Some(want), Some(got)) if tokens::same_secret(want, got) => Ok(()),
            _ => Err(ServiceError::Unauthorized("operator token")),
        }
    }

    /// Ends a job: `finished` after its rounds, or `removed` when cancelled.
    pub fn end_job(
        &self,
        job: u64,
        token: Option<&str>,
        finished: bool,
    ) -> Result<(), ServiceError> {
        let now = self.clock.now();
        let mut g = self.lock();
        Self::authorize(&mut g, job, token, now)?;
        g.end(job, finished, now)
    }

    /// Model size and plan URL of a job.
    pub fn job_info(&self, job: u64) -> Option<(String, u64)> {
        let g = self.lock();
        g.jobs
            .get(&job)
            .map(|m| (m.plan_url.clone(), m.model_size_bytes))
    }

    /// The plan a live job was admitted with.
    pub fn admission_plan(&self, job: u64) -> Option<AdmissionPlan> {
        self.lock().jobs.get(&job).and_then(|m| m.plan)
    }

    /// The plans of every live job admission control admitted, by job id.
    pub fn admission_plans(&self) -> Vec<(u64, AdmissionPlan)> {
        let g = self.lock();
        let mut v: Vec<(u64, AdmissionPlan)> = g
            .jobs
            .iter()
            .filter_map(|(id, m)| Some((*id, m.plan?)))
            .collect();
        v.sort_by_key(|p| p.0);
        v
    }

    /// The error for a job that is not live: 410 if admission control evicted it, else 404.
    pub fn missing_job(&self, job: u64) -> ServiceError {
        self.lock().missing(job)
    }
}

impl Inner {
    /// Puts a job the core has just registered before admission control (when it is on
    /// and the job brought a statement): an admitted job is held until its launch, and
    /// one that is declined or fails is removed from the core again.
    fn admit_registered(
        &mut self,
        id: JobId,
        name: &str,
        statement: Option<&StatementOfWork>,
        now: Time,
    ) -> Result<Option<AdmittedJob>, ServiceError> {
        match (self.admission.as_mut(), statement) {
            (Some(adm), Some(sow)) => match adm.submit(id, sow, now) {
                Ok(Admission::Admitted { plan }) => {
                    if let Err(e) = self.core.hold_job(id, plan.launch_at) {
                        adm.controller_mut().withdraw(id, now);
                        let _ = self.core.remove_job(id, now);
                        return Err(e.into());
                    }
                    let a = adm
                        .controller()
                        .admitted(id)
                        .cloned()
                        .expect("just admitted");
                    Ok(Some(a))
                }
                Ok(Admission::Declined { quote, reason }) => {
                    let _ = self.core.remove_job(id, now);
                    tracing::info!(name = %name, %reason, ?quote, "job declined by admission control");
                    Err(ServiceError::Declined { reason, quote })
                }
                Err(e) => {
                    let _ = self.core.remove_job(id, now);
                    Err(e.into())
                }
            },
            _ => Ok(None),
        }
    }

    /// Stores a new job; if the store fails, the job leaves admission control and the
    /// core again, so nothing remembers it.
    fn save_registered(&mut self, r: &Registering<'_>, now: Time) -> Result<(), ServiceError> {
        let id = JobId(r.stored.id);
        let job = r.stored.clone();
        let credential = r.credential.map(str::to_owned);
        let admission = r.admitted.cloned().zip(r.statement.cloned());
        // Waited for under the lock: a failure is undone below before anyone sees the job.
        let saved = self
            .store
            .write(move |s| match &admission {
                Some((a, sow)) => s.insert_admitted_job(&job, a, sow, credential.as_deref()),
                None => s.insert_job(&job, credential.as_deref()),
            })
            .wait();
        if let Err(e) = saved {
            if let Some(adm) = self.admission.as_mut().filter(|_| r.admitted.is_some()) {
                // Counted as withdrawn in the controller's totals; its commitment is undone.
                adm.controller_mut().withdraw(id, now);
            }
            let _ = self.core.remove_job(id, now);
            return Err(e.into());
        }
        Ok(())
    }

    /// Ends a job: `finished` after its rounds, or `removed` (cancelled, or silent for
    /// too long); its devices are released and admission control settles it.
    pub(super) fn end(&mut self, job: u64, finished: bool, now: Time) -> Result<(), ServiceError> {
        let id = JobId(job);
        // The store first: if it fails, nothing has changed anywhere.
        let state = if finished {
            JobLifecycle::Finished
        } else {
            JobLifecycle::Removed
        };
        self.store
            .write(move |s| s.end_job(job, state, now))
            .wait()?;
        if finished {
            self.core.job_finished(id, now)?;
        } else {
            self.core.remove_job(id, now)?;
        }
        self.forget_job(job);
        self.forget_tasks(|t| t.job == id);
        self.history().job_ended(job, state, now.secs());
        tracing::info!(job, finished, "job ended");
        if let Some(adm) = self.admission.as_mut() {
            let ctl = adm.controller_mut();
            let settled = if finished {
                ctl.finished(id, now)
            } else {
                ctl.withdraw(id, now)
            };
            if let Some(s) = settled {
                tracing::info!(
                    job,
                    value = s.value,
                    payment = s.payment,
                    "admitted job settled"
                );
            }
        }
        Ok(())
    }
}
