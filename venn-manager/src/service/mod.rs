//! The manager's domain logic, independent of HTTP: one `ResourceManager` from
//! `venn-core` driven on the wall clock, with every accepted input persisted to SQLite;
//! the sweeper (venn-core's timers: expired leases, rounds left open past their deadline)
//! and restart recovery.
//!
//! Persisting: an input's store writes are queued to the one writer thread
//! ([`crate::writer`]) inside the critical section that updates the core, so they apply
//! in the core's order, and the input is answered only once they have committed. The hot
//! inputs — check-ins and task reports — wait for the commit after releasing the lock (an
//! HTTP handler awaits it: [`Manager::check_in_acked`], [`Manager::report_task_acked`]),
//! so a group commit carries many of them and the lock is never held across SQLite. Rare
//! inputs whose failure must be undone in the core (registration, round submission, a
//! job's end) wait under the lock, as they always wrote, and the HTTP layer runs them on
//! the blocking pool. Reads for the status page never touch SQLite; a read that must see
//! every earlier write goes through the writer ([`Writer::read`]), one that need not (is
//! this dead job evicted?) uses a read-only connection that never waits for writes.
//!
//! With admission control on ([`Settings::admission`]) registration goes through the
//! [`AdmissionController`](venn_core::admission::AdmissionController) in the same critical
//! section: an admitted job is registered and held until its plan's launch, a declined
//! one is not registered at all; the ticker closes slots and evicts
//! ([`Manager::tick_admission`]); finishing a job settles it and cancelling withdraws it.
//!
//! The database is the truth. A write that fails leaves memory ahead of it (the core
//! decided before the write was queued): the writer then refuses every write until the
//! next taker of the state lock has rebuilt the state from the database, as a restart
//! would ([`Manager::resync`], in `recovery`); the requests whose writes failed or were
//! refused get the error, and nothing they did in memory survives the rebuild.
//!
//! One file per resource — `jobs`, `rounds`, `devices`, `tasks` — plus `upkeep` (the
//! background ticker's duties) and `recovery` (restart from SQLite); this file holds the
//! state they share. Errors are [`ServiceError`]s, which the HTTP layer maps to statuses.

mod devices;
mod feasibility;
mod jobs;
mod recovery;
mod rounds;
mod tasks;
mod upkeep;

pub use rounds::CloseWith;

use crate::admission::{AdmissionReport, AdmissionState, check_statement};
use crate::clock::Clock;
use crate::error::ServiceError;
use crate::history::{self, History};
use crate::metrics::Metrics;
use crate::settings::Settings;
use crate::sources::SourceLimits;
use crate::store::{HistoryRound, JobLifecycle, Snapshot, Store, StoredJob, StoredTask};
use crate::tokens;
use crate::writer::{Ticket, Writer, WriterStats, wait_all};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use venn_api::manager::limits;
use venn_api::manager::*;
use venn_core::admission::{Admission, AdmissionParams, AdmissionPlan};
use venn_core::job::{TaskRecord, TaskSample, TaskState};
use venn_core::restore::{JobProgress, RestoredRound};
use venn_core::*;

/// Per-job data the core does not keep.
#[derive(Clone, Debug)]
struct JobMeta {
    token: String,
    plan_url: String,
    model_size_bytes: u64,
    /// Round number and attempt of the latest submitted round.
    last: Option<(u32, u32)>,
    /// The plan admission control admitted the job with, if it did.
    plan: Option<AdmissionPlan>,
    /// When the job last called the manager (registered, submitted or closed a round,
    /// or this process restored it): the idle-job reaper's clock.
    active_at: f64,
    /// The credential it was registered with, for the per-credential quota.
    credential: Option<String>,
}

/// An outstanding task (assigned or acknowledged), kept by its id.
#[derive(Clone, Debug)]
struct TaskMeta {
    job: JobId,
    round: RoundId,
    device: DeviceId,
    /// Its token's digest: a presented token is checked against it.
    digest: tokens::Digest32,
}

/// A task token as presented, hashed before the state lock is taken.
struct PresentedTask {
    /// The id it names (`None`: a token of the older form).
    id: Option<u64>,
    digest: tokens::Digest32,
}

impl PresentedTask {
    /// `None` for a string of no task token's form: refused before it is hashed.
    fn new(token: &str) -> Option<PresentedTask> {
        Some(PresentedTask {
            digest: tokens::task_digest(token)?,
            id: tokens::task_id(token),
        })
    }
}

struct Inner {
    core: ResourceManager,
    /// Every write goes through here, queued in the order the core decided.
    store: Writer,
    /// Reads that need not wait for queued writes (see [`Inner::missing`]).
    reader: Store,
    jobs: HashMap<u64, JobMeta>,
    /// Outstanding tasks by id ([`Inner::find_task`]).
    tasks: HashMap<u64, TaskMeta>,
    /// The ids of outstanding tasks whose tokens are of the older form (no id in them,
    /// assigned before schema 8), by their digest; empties as they end.
    legacy_tasks: HashMap<tokens::Digest32, u64>,
    next_job_id: u64,
    /// The id the next assignment gets (ids only grow: the store appends, see
    /// [`crate::store`]'s schema 8).
    next_task_id: u64,
    checkin_buf: HashMap<(i64, String), u32>,
    /// Admission control, when switched on.
    admission: Option<AdmissionState>,
    /// The status page's record, fed as jobs and rounds change (locked after this).
    history: Arc<Mutex<History>>,
    /// The check-in counter's value at the last flush: the next minute of supply is the
    /// difference.
    checkins_flushed: u64,
    /// Live jobs per registration credential.
    credential_jobs: HashMap<String, usize>,
}

/// The manager as the HTTP handlers (the API and the status page) share it.
pub type AppState = Arc<Manager>;

/// The live resource manager.
pub struct Manager {
    inner: Mutex<Inner>,
    history: Arc<Mutex<History>>,
    clock: Clock,
    settings: Settings,
    /// Counters and histograms for `/metrics`.
    pub metrics: Metrics,
    /// Per-source connection shares and request rates (enforced by the HTTP layer).
    pub sources: Arc<SourceLimits>,
    /// The store writer's commits and writes, for `/metrics`.
    store_stats: Arc<WriterStats>,
    /// What builds the policy again at every resynchronisation (`None`: a custom
    /// policy from a borrowed registry, which cannot be).
    registry: Option<Arc<PolicyRegistry>>,
    /// Whether the operator was told that the state cannot be rebuilt (told once).
    stuck_told: std::sync::atomic::AtomicBool,
}

/// At most [`limits::MAX_TAGS`] tags of at most [`limits::MAX_TAG_BYTES`] each.
fn check_tags(field: &str, tags: &[String]) -> Result<(), ServiceError> {
    if tags.len() > limits::MAX_TAGS {
        return Err(ServiceError::field(
            field,
            format!("at most {} tags", limits::MAX_TAGS),
        ));
    }
    if tags.iter().any(|t| t.len() > limits::MAX_TAG_BYTES) {
        return Err(ServiceError::field(
            field,
            format!("a tag is at most {} bytes", limits::MAX_TAG_BYTES),
        ));
    }
    Ok(())
}

fn finite(field: &str, v: f64) -> Result<(), ServiceError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(ServiceError::field(field, "must be a finite number"))
    }
}

impl Manager {
    /// Opens the manager on the database at `db` (created if missing) and restores every
    /// active job, open round, outstanding task and the recent check-in history. The
    /// policy must be a built-in one.
    pub fn open(settings: Settings, db: &Path, clock: Clock) -> anyhow::Result<Manager> {
        Self::open_with_shared_registry(settings, Arc::new(PolicyRegistry::builtin()), db, clock)
    }

    /// [`Manager::open`], building the settings' policy with `registry` (which may hold
    /// custom policies). A built-in policy can be built again when the manager rebuilds
    /// its state after a failed write; a custom one cannot (the registry is borrowed):
    /// then writes stay refused after a failed write until a restart
    /// ([`Manager::open_with_shared_registry`] has no such limit).
    pub fn open_with_registry(
        settings: Settings,
        registry: &PolicyRegistry,
        db: &Path,
        clock: Clock,
    ) -> anyhow::Result<Manager> {
        let builtin = PolicyRegistry::builtin();
        // Built-in names cannot be registered again: such a policy is the built-in one.
        let again = builtin
            .contains(settings.policy.name())
            .then(|| Arc::new(builtin));
        Self::open_inner(settings, registry, again, db, clock)
    }

    /// [`Manager::open_with_registry`], keeping `registry` to build the policy again
    /// whenever the state is rebuilt from the database.
    pub fn open_with_shared_registry(
        settings: Settings,
        registry: Arc<PolicyRegistry>,
        db: &Path,
        clock: Clock,
    ) -> anyhow::Result<Manager> {
        let again = Some(registry.clone());
        Self::open_inner(settings, &registry, again, db, clock)
    }

    /// Opens with `registry`; `again` builds the policy at a resynchronisation.
    fn open_inner(
        settings: Settings,
        registry: &PolicyRegistry,
        again: Option<Arc<PolicyRegistry>>,
        db: &Path,
        clock: Clock,
    ) -> anyhow::Result<Manager> {
        if let Some(p) = &settings.admission {
            p.validate()?;
        }
        settings.server.validate().map_err(anyhow::Error::msg)?;
        settings
            .registration
            .validate()
            .map_err(anyhow::Error::msg)?;
        let store = Store::open(db)?;
        let policy = settings.policy.name();
        if let Some(p) = store.meta("policy")?
            && p != policy
        {
            tracing::warn!(stored = %p, requested = %policy, "policy changed since the last run");
        }
        store.set_meta("policy", policy)?;
        // Everything else is read on the reader connection, as a resynchronisation reads
        // it ([`Inner::reload`]); the writer starts first, with nothing queued yet.
        let reader = Store::open_reader(db)?;
        let store = Writer::start(store)?;
        let store_stats = store.stats().clone();
        let history = Arc::new(Mutex::new(History::default()));
        let mut inner = Inner {
            core: recovery::new_core(&settings, registry)?,
            store,
            reader,
            jobs: HashMap::new(),
            tasks: HashMap::new(),
            legacy_tasks: HashMap::new(),
            next_job_id: 0,
            next_task_id: 1,
            checkin_buf: HashMap::new(),
            admission: None,
            history: history.clone(),
            checkins_flushed: 0,
            credential_jobs: HashMap::new(),
        };
        let restored = inner.reload(&settings, registry, clock.now())?;
        tracing::info!(
            jobs = restored.0,
            open_rounds = restored.1,
            tasks = restored.2,
            admitted = restored.3,
            admission = settings.admission.is_some(),
            "state restored"
        );
        Ok(Manager {
            inner: Mutex::new(inner),
            history,
            clock,
            sources: Arc::new(SourceLimits::new(&settings.server)),
            settings,
            registry: again,
            stuck_told: Default::default(),
            metrics: Metrics::default(),
            store_stats,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The state lock. If a store write failed since the last call, the state is first
    /// rebuilt from the database ([`Manager::resync`]): no input ever sees, or builds on,
    /// memory that is ahead of the database.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the state as the last completed input left
        // it (every input validates before mutating), so keep serving.
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if g.store.failed() {
            self.resync(&mut g);
        }
        g
    }

    /// A read-only view of the status page's record (jobs in any state, recent rounds,
    /// supply per minute); it never takes the core's lock.
    pub fn with_history<R>(&self, f: impl FnOnce(&History) -> R) -> R {
        f(&lock_history(&self.history))
    }

    /// The store writer's commits and writes so far.
    pub fn store_stats(&self) -> &WriterStats {
        &self.store_stats
    }

    /// For tests: while `full`, every store commit fails with SQLITE_FULL as on a full
    /// disk ([`Writer::simulate_full_disk`]).
    #[doc(hidden)]
    pub fn simulate_full_disk(&self, full: bool) {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .store
            .simulate_full_disk(full);
    }

    /// A read-only view for `/v1/status` and `/metrics`.
    pub fn with_core<R>(&self, f: impl FnOnce(&ResourceManager, Time) -> R) -> R {
        let now = self.clock.now();
        let g = self.lock();
        f(&g.core, now)
    }
}

/// The history's lock, poison-tolerant like the core's.
fn lock_history(h: &Mutex<History>) -> MutexGuard<'_, History> {
    h.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    fn history(&self) -> MutexGuard<'_, History> {
        lock_history(&self.history)
    }

    /// Records a live job of `meta`'s credential.
    fn add_job(&mut self, id: u64, meta: JobMeta) {
        if let Some(c) = &meta.credential {
            *self.credential_jobs.entry(c.clone()).or_default() += 1;
        }
        self.jobs.insert(id, meta);
    }

    /// Forgets a live job, and its place in its credential's quota.
    fn forget_job(&mut self, id: u64) {
        let Some(c) = self.jobs.remove(&id).and_then(|m| m.credential) else {
            return;
        };
        if let Some(n) = self.credential_jobs.get_mut(&c) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.credential_jobs.remove(&c);
            }
        }
    }

    /// The id of the outstanding task a presented token names, if the token is its own:
    /// a token of the task form names its id and must match that task's digest
    /// (compared in constant time); one of the older form is found by digest among the
    /// tasks restored with such tokens.
    fn find_task(&self, presented: &PresentedTask) -> Option<u64> {
        match presented.id {
            Some(id) => self
                .tasks
                .get(&id)
                .filter(|t| tokens::same_digest(&t.digest, &presented.digest))
                .map(|_| id),
            None => self.legacy_tasks.get(&presented.digest).copied(),
        }
    }

    /// Forgets an outstanding task (reported, expired or taken back).
    fn forget_task(&mut self, id: u64) {
        if let Some(t) = self.tasks.remove(&id)
            && !self.legacy_tasks.is_empty()
        {
            self.legacy_tasks.remove(&t.digest);
        }
    }

    /// Forgets every outstanding task that is `gone` (its round closed, its job ended).
    fn forget_tasks(&mut self, gone: impl Fn(&TaskMeta) -> bool) {
        self.tasks.retain(|_, t| !gone(t));
        if !self.legacy_tasks.is_empty() {
            let tasks = &self.tasks;
            self.legacy_tasks.retain(|_, id| tasks.contains_key(id));
        }
    }

    /// 410 for an evicted job, 404 for any other job that is not live. It reads on the
    /// read-only connection, never waiting for the writer: a dead job's row is committed
    /// before its end was answered, and a request racing the eviction itself may hear 404.
    fn missing(&self, job: u64) -> ServiceError {
        match self.reader.job_state(job) {
            Ok(Some((JobLifecycle::Evicted, at))) => ServiceError::Evicted { job, at },
            Ok(_) => ServiceError::not_found(format!("unknown job {job}")),
            Err(e) => e.into(),
        }
    }
}
