//! Durable state in embedded SQLite (WAL): jobs, rounds (one row per attempt), tasks, and
//! the check-in time series behind the supply estimate (counts per profile per bucket).
//! Tokens are stored as digests only, and the file is readable by its owner only.
//!
//! Every accepted mutation is written before the API answers: the service queues it to
//! the one writer thread ([`crate::writer`]) inside the same critical section as the core
//! update, in the core's order, and answers once the group transaction holding it has
//! committed. Methods that write several rows use savepoints, so they are atomic alone and
//! inside the writer's group transaction. WAL with `synchronous = NORMAL` survives a
//! killed process (the restart test kills one); only a power loss can drop the last
//! transactions. Check-ins that assign nothing are counted
//! in memory and flushed every second: a crash loses at most a second of supply history,
//! an estimate, never accepted work.
//!
//! With admission control, an admitted job's [`AdmittedJob`] (its plan, prices and
//! expected usage) and statement of work live in `admissions`, written in the same
//! transaction as the job row; an evicted job keeps its row with state `evicted`. The
//! slot clock's capacity history (`admission_slots`: judged slots of the capacity window
//! and the open slot's tally) is written when slots close and with every flush, so a
//! restarted manager forecasts and judges as before it stopped.
//! The status page's history lives beside: a closed round's metrics as its job reported
//! them (`round_metrics`) and all check-ins per minute over the last day
//! (`supply_minutes`, written with every flush).
//! Schema changes are additive (`CREATE TABLE IF NOT EXISTS`, added columns), so a
//! database written by an older manager opens and simply has no admitted jobs; the one
//! exception, schema 8, re-keys `tasks` by id in one transaction when such a database is
//! first opened, and its outstanding tokens keep working ([`rekey_tasks`]).

use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;
use std::path::Path;
use venn_api::manager::RoundMetrics;
use venn_core::admission::{AdmittedJob, SavedSlot, StatementOfWork};
use venn_core::job::TaskState;
use venn_core::{JobSpec, RoundOutcome, RoundRequest, Time};

/// Schema version written to `meta` (2: `admissions`; 3: `admission_slots`; 4: tokens
/// kept as digests; 5: `round_metrics` and `supply_minutes`, for the status page, and
/// `job_credentials`, for the per-credential quota; 6: `round_metrics.eval_samples`;
/// 7: `rounds.close_at`, an over-committed request's own close count; 8: tasks keyed by
/// an id that their tokens carry, see [`rekey_tasks`]).
const SCHEMA_VERSION: &str = "8";

/// The `meta` key under which schema 8's migration notes the first id it did not give
/// to an older task: tasks below it have tokens of the older form (found by digest).
const LEGACY_TASKS_BELOW: &str = "legacy_task_ids_below";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL, token TEXT NOT NULL,
  plan_url TEXT NOT NULL, model_size_bytes INTEGER NOT NULL, registered_at REAL NOT NULL,
  state TEXT NOT NULL, rounds_done INTEGER NOT NULL, next_round INTEGER NOT NULL,
  finished_at REAL);
CREATE TABLE IF NOT EXISTS rounds(
  job_id INTEGER NOT NULL, round INTEGER NOT NULL, attempt INTEGER NOT NULL,
  demand INTEGER NOT NULL, deadline REAL NOT NULL, min_response_fraction REAL NOT NULL,
  submitted_at REAL NOT NULL, fulfilled_at REAL, closed_at REAL, outcome TEXT, close_at INTEGER,
  PRIMARY KEY(job_id, round, attempt));
CREATE TABLE IF NOT EXISTS tasks(
  id INTEGER PRIMARY KEY, digest TEXT NOT NULL, job_id INTEGER NOT NULL, round INTEGER NOT NULL,
  attempt INTEGER NOT NULL, device_id INTEGER NOT NULL, assigned_at REAL NOT NULL,
  capacity_s REAL NOT NULL, lease_until REAL NOT NULL, state TEXT NOT NULL,
  reported_at REAL);
CREATE INDEX IF NOT EXISTS tasks_by_round ON tasks(job_id, round, attempt);
CREATE TABLE IF NOT EXISTS checkins(
  bucket INTEGER NOT NULL, profile TEXT NOT NULL, count INTEGER NOT NULL,
  PRIMARY KEY(bucket, profile));
CREATE TABLE IF NOT EXISTS admissions(
  job_id INTEGER PRIMARY KEY, admitted TEXT NOT NULL, statement TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS admission_slots(
  slot INTEGER PRIMARY KEY, check_ins REAL NOT NULL, watched_s REAL NOT NULL,
  judged INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS round_metrics(
  job_id INTEGER NOT NULL, round INTEGER NOT NULL, attempt INTEGER NOT NULL,
  accuracy REAL, loss REAL, participants INTEGER, eval_samples INTEGER,
  PRIMARY KEY(job_id, round, attempt));
CREATE TABLE IF NOT EXISTS supply_minutes(
  minute INTEGER PRIMARY KEY, check_ins INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS job_credentials(
  job_id INTEGER PRIMARY KEY, credential TEXT NOT NULL);
";

/// Schema 7 added `rounds.close_at` (a request's own close count, when it over-commits); a
/// database from before gets the column, empty: its rounds close at the default count.
fn add_close_at_column(conn: &Connection) -> rusqlite::Result<()> {
    let has: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('rounds') WHERE name = 'close_at'")?
        .exists([])?;
    if !has {
        conn.execute_batch("ALTER TABLE rounds ADD COLUMN close_at INTEGER")?;
    }
    Ok(())
}

/// Schema 6 added `round_metrics.eval_samples` (the size of the set each accuracy was
/// measured on, for its interval); a database from before gets the column, empty for its
/// old rows.
fn add_eval_samples_column(conn: &Connection) -> rusqlite::Result<()> {
    let has: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('round_metrics') WHERE name = 'eval_samples'")?
        .exists([])?;
    if !has {
        conn.execute_batch("ALTER TABLE round_metrics ADD COLUMN eval_samples INTEGER")?;
    }
    Ok(())
}

/// Does `table` have `column`?
fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    conn.prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?
        .exists(params![table, column])
}

/// Schema 8 keys tasks by an `INTEGER PRIMARY KEY` id that their tokens carry
/// ([`crate::tokens`]). Before, the key was the token's digest: random, so every
/// assignment dirtied a random page of its index and a group commit wrote as many index
/// pages as it held assignments (the writer's main cost under load). Now an assignment
/// appends to the table and a report updates a recent row, by id. A database from before
/// gets its rows copied in rowid order (assignment order), each keeping its rowid as its
/// id and its token's digest; their tokens have no id, so the first id after them is
/// noted ([`LEGACY_TASKS_BELOW`]) and a restarted manager finds those tasks by digest.
/// One transaction: a crash leaves the old table or the new one.
fn rekey_tasks(conn: &Connection) -> rusqlite::Result<()> {
    if !has_column(conn, "tasks", "token")? {
        return Ok(());
    }
    conn.execute_batch(
        "BEGIN IMMEDIATE;
         CREATE TABLE tasks_by_id(
           id INTEGER PRIMARY KEY, digest TEXT NOT NULL, job_id INTEGER NOT NULL,
           round INTEGER NOT NULL, attempt INTEGER NOT NULL, device_id INTEGER NOT NULL,
           assigned_at REAL NOT NULL, capacity_s REAL NOT NULL, lease_until REAL NOT NULL,
           state TEXT NOT NULL, reported_at REAL);
         INSERT INTO tasks_by_id
           SELECT rowid, token, job_id, round, attempt, device_id, assigned_at, capacity_s,
                  lease_until, state, reported_at
           FROM tasks ORDER BY rowid;
         INSERT INTO meta(key, value)
           SELECT 'legacy_task_ids_below', COALESCE(MAX(id), 0) + 1 FROM tasks_by_id
           WHERE true ON CONFLICT(key) DO UPDATE SET value = excluded.value;
         DROP TABLE tasks;
         ALTER TABLE tasks_by_id RENAME TO tasks;
         CREATE INDEX tasks_by_round ON tasks(job_id, round, attempt);
         COMMIT;",
    )
    .inspect_err(|_| {
        let _ = conn.execute_batch("ROLLBACK");
    })?;
    let below: String = conn.query_row(
        "SELECT value FROM meta WHERE key = ?1",
        params![LEGACY_TASKS_BELOW],
        |r| r.get(0),
    )?;
    tracing::info!(legacy_ids_below = %below, "store: tasks re-keyed by id (schema 8)");
    Ok(())
}

/// A job row.
#[derive(Clone, Debug)]
pub struct StoredJob {
    /// Id.
    pub id: u64,
    /// Spec as registered.
    pub spec: JobSpec,
    /// Digest of the job token ([`crate::tokens`]).
    pub token: String,
    /// Where devices fetch the plan.
    pub plan_url: String,
    /// Model size in bytes (for transfer estimates).
    pub model_size_bytes: u64,
    /// Registration time.
    pub registered_at: f64,
    /// `active`, `finished`, `removed` or `evicted`.
    pub state: JobLifecycle,
    /// Successful rounds.
    pub rounds_done: u32,
    /// Next round number.
    pub next_round: u32,
}

/// A round attempt row.
#[derive(Clone, Debug)]
pub struct StoredRound {
    /// Job id.
    pub job_id: u64,
    /// Round number.
    pub round: u32,
    /// Attempt (0 first; retries after an abort count up).
    pub attempt: u32,
    /// The request.
    pub request: RoundRequest,
    /// Submission time.
    pub submitted_at: f64,
    /// When fully assigned.
    pub fulfilled_at: Option<f64>,
    /// When closed.
    pub closed_at: Option<f64>,
    /// How it closed.
    pub outcome: Option<RoundOutcome>,
    /// Devices assigned / results / failures (counted from the task rows).
    pub counts: (u32, u32, u32),
}

/// A task row.
#[derive(Clone, Debug)]
pub struct StoredTask {
    /// Id: the row's key, and the first part of its token ([`crate::tokens`]).
    pub id: u64,
    /// Digest of the task token, 64 hex digits ([`crate::tokens`]).
    pub digest: String,
    /// Job id.
    pub job_id: u64,
    /// Round number.
    pub round: u32,
    /// Round attempt.
    pub attempt: u32,
    /// Device.
    pub device_id: u64,
    /// Assignment time.
    pub assigned_at: f64,
    /// Expected task seconds of the device for the job.
    pub capacity_s: f64,
    /// When the lease ends.
    pub lease_until: f64,
    /// Task state.
    pub state: TaskState,
    /// When the result (or failure) was reported.
    pub reported_at: Option<f64>,
}

/// Everything needed to rebuild the manager.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Jobs still active.
    pub jobs: Vec<StoredJob>,
    /// Their rounds, by job then round then attempt.
    pub rounds: Vec<StoredRound>,
    /// Tasks of their rounds.
    pub tasks: Vec<StoredTask>,
    /// Check-in counts: (bucket, profile JSON, count).
    pub checkins: Vec<(i64, String, u32)>,
    /// Admitted jobs among the active ones, by job id.
    pub admissions: HashMap<u64, AdmittedJob>,
    /// Largest job id ever used.
    pub max_job_id: Option<u64>,
    /// Largest task id ever used.
    pub max_task_id: Option<u64>,
    /// Tasks with ids below this one have tokens of the older form, without their id
    /// (written before schema 8): they are found by digest.
    pub legacy_tasks_below: u64,
    /// The registration credential of each active job that had one.
    pub credentials: HashMap<u64, String>,
}

/// Where a job stands in its life, as the `jobs.state` column stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobLifecycle {
    /// Registered and running (restored on restart).
    Active,
    /// Ran all its rounds.
    Finished,
    /// Cancelled by its job.
    Removed,
    /// Evicted by admission control.
    Evicted,
}

impl JobLifecycle {
    /// The column's text.
    pub fn as_str(self) -> &'static str {
        match self {
            JobLifecycle::Active => "active",
            JobLifecycle::Finished => "finished",
            JobLifecycle::Removed => "removed",
            JobLifecycle::Evicted => "evicted",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            JobLifecycle::Active,
            JobLifecycle::Finished,
            JobLifecycle::Removed,
            JobLifecycle::Evicted,
        ]
        .into_iter()
        .find(|l| l.as_str() == s)
    }
}

/// A job as the status page's history keeps it (any state).
#[derive(Clone, Debug)]
pub struct HistoryJob {
    /// Id.
    pub id: u64,
    /// Spec as registered.
    pub spec: JobSpec,
    /// Registration time.
    pub registered_at: f64,
    /// Where it stands.
    pub state: JobLifecycle,
    /// When it ended, if it did.
    pub ended_at: Option<f64>,
}

/// A closed round attempt as the status page's history keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryRound {
    /// Job id.
    pub job_id: u64,
    /// Round number.
    pub round: u32,
    /// Attempt.
    pub attempt: u32,
    /// Devices requested.
    pub demand: u32,
    /// Submission time.
    pub submitted_at: f64,
    /// When fully assigned.
    pub fulfilled_at: Option<f64>,
    /// Where its scheduling delay ended ([`venn_core::RoundRecord::scheduled_at`]): the
    /// full assignment, or the last assignment whose result the round counted.
    pub scheduled_at: Option<f64>,
    /// When closed.
    pub closed_at: f64,
    /// How it closed.
    pub outcome: RoundOutcome,
    /// What its job reported.
    pub metrics: RoundMetrics,
}

/// What the status page's history restores from: the latest jobs and their closed rounds.
#[derive(Debug, Default)]
pub struct HistorySnapshot {
    /// The latest jobs, by id.
    pub jobs: Vec<HistoryJob>,
    /// Their closed rounds, by close time.
    pub rounds: Vec<HistoryRound>,
    /// Check-ins per minute (minute since the epoch, count), by minute.
    pub supply: Vec<(i64, u64)>,
}

impl rusqlite::types::ToSql for JobLifecycle {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(self.as_str().into())
    }
}

impl rusqlite::types::FromSql for JobLifecycle {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let s = v.as_str()?;
        JobLifecycle::parse(s).ok_or_else(|| {
            rusqlite::types::FromSqlError::Other(format!("unknown job state {s:?}").into())
        })
    }
}

/// The SQLite store.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
}

/// Text form of a task state.
pub fn task_state_str(s: TaskState) -> &'static str {
    match s {
        TaskState::Assigned => "assigned",
        TaskState::Acknowledged => "acknowledged",
        TaskState::Finished => "finished",
        TaskState::Failed => "failed",
    }
}

fn parse_task_state(s: &str) -> TaskState {
    match s {
        "acknowledged" => TaskState::Acknowledged,
        "finished" => TaskState::Finished,
        "failed" => TaskState::Failed,
        _ => TaskState::Assigned,
    }
}

fn outcome_str(o: RoundOutcome) -> &'static str {
    match o {
        RoundOutcome::Success => "success",
        RoundOutcome::Abort => "abort",
    }
}

fn parse_outcome(s: &str) -> RoundOutcome {
    if s == "success" {
        RoundOutcome::Success
    } else {
        RoundOutcome::Abort
    }
}

fn json_err(e: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}

fn json_col<T: serde::de::DeserializeOwned>(col: usize, text: &str) -> rusqlite::Result<T> {
    serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(col, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Creates the database file readable by its owner only (0600), or tightens an existing
/// one: it holds the state of every job. SQLite gives its `-wal` and `-shm` files the
/// database file's mode.
fn owner_only(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        for suffix in ["-wal", "-shm"] {
            let p = format!("{}{suffix}", path.display());
            if Path::new(&p).exists() {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))?;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// A database from before schema 4 kept raw tokens: replace each with its digest, so
/// old tokens keep working and none is left readable.
fn hash_stored_tokens(conn: &Connection) -> rusqlite::Result<()> {
    // Tasks re-keyed by schema 8 were hashed on the way (only digests were copied).
    let tables: &[&str] = if has_column(conn, "tasks", "token")? {
        &["jobs", "tasks"]
    } else {
        &["jobs"]
    };
    for table in tables {
        let raw: Vec<String> = conn
            .prepare(&format!(
                "SELECT token FROM {table} WHERE length(token) = {}",
                crate::tokens::TOKEN_LEN
            ))?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for t in raw {
            if let Some(d) = crate::tokens::digest(&t) {
                conn.execute(
                    &format!("UPDATE {table} SET token = ?2 WHERE token = ?1"),
                    params![t, d],
                )?;
            }
        }
    }
    Ok(())
}

fn insert_job_row(
    conn: &Connection,
    j: &StoredJob,
    credential: Option<&str>,
) -> rusqlite::Result<()> {
    let spec = serde_json::to_string(&j.spec).map_err(json_err)?;
    conn.execute(
        "INSERT INTO jobs(id, name, spec, token, plan_url, model_size_bytes, registered_at, state, rounds_done, next_round)
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![j.id as i64, j.spec.name, spec, j.token, j.plan_url, j.model_size_bytes as i64, j.registered_at, j.state, j.rounds_done, j.next_round],
    )?;
    if let Some(c) = credential {
        conn.execute(
            "INSERT INTO job_credentials(job_id, credential) VALUES(?1, ?2)",
            params![j.id as i64, c],
        )?;
    }
    Ok(())
}

impl Store {
    /// Opens (or creates) the database file at `path`.
    pub fn open(path: &Path) -> rusqlite::Result<Store> {
        owner_only(path).map_err(|e| {
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                Some(format!("{}: {e}", path.display())),
            )
        })?;
        let conn = Connection::open(path)?;
        // Room for every cached statement of the writer's hot path (the group's BEGIN,
        // COMMIT and savepoints among them), so none is evicted and prepared again.
        conn.set_prepared_statement_cache_capacity(64);
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Keep more pages in memory (8 MiB, not 2) rather than read them back, and let
        // the WAL grow to 8,192 pages rather than 1,000 before this connection
        // checkpoints in-line, so a page written again and again (a table's last page)
        // is copied to the database once per checkpoint, not dozens of times. The
        // [`crate::writer`]'s checkpointer copies pages meanwhile from its own
        // connection ([`Store::checkpoint`]), so the in-line checkpoint that bounds the
        // WAL finds little left to copy. (A 64 MiB cache measured no better: SQLite scans
        // its larger page hash at every commit.)
        conn.pragma_update(None, "cache_size", -8_192)?;
        conn.pragma_update(None, "wal_autocheckpoint", 8_192)?;
        conn.execute_batch(SCHEMA)?;
        add_eval_samples_column(&conn)?;
        add_close_at_column(&conn)?;
        hash_stored_tokens(&conn)?;
        rekey_tasks(&conn)?;
        conn.execute(
            "INSERT INTO meta(key, value) VALUES('schema_version', ?1)
             ON CONFLICT(key) DO UPDATE SET value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
            params![SCHEMA_VERSION],
        )?;
        Ok(Store { conn })
    }

    /// Rows changed by this connection so far: did a transaction write anything?
    pub(crate) fn total_changes(&self) -> u64 {
        self.conn.total_changes()
    }

    /// Caps the database at `pages` pages (SQLite keeps it at least its current size):
    /// a write that needs a page more fails with SQLITE_FULL, as on a full disk.
    #[cfg(test)]
    pub(crate) fn set_max_page_count(&self, pages: u64) -> rusqlite::Result<u64> {
        self.conn
            .query_row(&format!("PRAGMA max_page_count = {pages}"), [], |r| {
                r.get(0)
            })
    }

    /// The database file's path, for log lines (`:memory:` for an in-memory database).
    pub(crate) fn path(&self) -> String {
        match self.conn.path() {
            Some(p) if !p.is_empty() => p.to_owned(),
            _ => ":memory:".to_owned(),
        }
    }

    /// A connection for checkpoints only, to the database the writer's `self` has open
    /// ([`crate::writer`]'s checkpointer); `None` for an in-memory database.
    pub(crate) fn open_checkpointer(&self) -> rusqlite::Result<Option<Store>> {
        let Some(path) = self.conn.path().filter(|p| !p.is_empty()) else {
            return Ok(None);
        };
        let conn = Connection::open(path)?;
        // As the writer's: the WAL is synced before a checkpoint copies from it, the
        // database after.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        Ok(Some(Store { conn }))
    }

    /// Copies what the WAL holds into the database, as far as it can without waiting
    /// for anyone (a PASSIVE checkpoint: the writer goes on committing meanwhile).
    /// Returns (frames in the WAL, frames copied so far).
    pub(crate) fn checkpoint(&self) -> rusqlite::Result<(i64, i64)> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                Ok((r.get(1)?, r.get(2)?))
            })
    }

    /// A second, read-only connection to the database at `path` (opened by
    /// [`Store::open`] before): WAL lets it read the last committed state while the
    /// writer thread writes, without waiting for it.
    pub fn open_reader(path: &Path) -> rusqlite::Result<Store> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        Ok(Store { conn })
    }

    /// Begins the writer's group transaction ([`crate::writer`]). `IMMEDIATE` takes the
    /// write lock at once, so a group never fails half-way for want of it.
    pub(crate) fn begin(&self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(())
    }

    /// Commits the writer's group transaction.
    pub(crate) fn commit(&self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }

    /// Is the writer's group transaction still open?
    pub(crate) fn in_transaction(&self) -> bool {
        !self.conn.is_autocommit()
    }

    /// Rolls back the writer's group transaction after a failed commit, if SQLite left
    /// it open.
    pub(crate) fn rollback(&self) {
        if !self.conn.is_autocommit()
            && let Err(e) = self.conn.execute_batch("ROLLBACK")
        {
            tracing::error!(error = %e, "store: rollback after a failed commit failed");
        }
    }

    /// Runs `op` inside a savepoint of the group transaction: all of it or, when it
    /// fails, none of it, without touching the group's other writes.
    pub(crate) fn atomically(
        &mut self,
        op: impl FnOnce(&mut Store) -> rusqlite::Result<()>,
    ) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("SAVEPOINT one_write")?
            .execute([])?;
        match op(self) {
            Ok(()) => {
                self.conn.prepare_cached("RELEASE one_write")?.execute([])?;
                Ok(())
            }
            Err(e) => {
                // SQLite may have rolled the whole transaction back already (it may on
                // SQLITE_FULL or an I/O error): then there is no savepoint to go back to,
                // and `e`, not that, is the write's error.
                if let Err(r) = self
                    .conn
                    .execute_batch("ROLLBACK TO one_write; RELEASE one_write")
                {
                    tracing::debug!(error = %r, cause = %e, "store: savepoint gone with its transaction");
                    self.rollback();
                }
                Err(e)
            }
        }
    }

    /// A value from `meta`.
    pub fn meta(&self, key: &str) -> rusqlite::Result<Option<String>> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()
    }

    /// Sets a value in `meta`.
    pub fn set_meta(&self, key: &str, value: &str) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    /// Inserts a new job (with the credential it registered with, if any), in one
    /// transaction.
    pub fn insert_job(&mut self, j: &StoredJob, credential: Option<&str>) -> rusqlite::Result<()> {
        let tx = self.conn.savepoint()?;
        insert_job_row(&tx, j, credential)?;
        tx.commit()
    }

    /// Inserts a new job the admission controller admitted, with its admission record and
    /// statement of work, in one transaction.
    pub fn insert_admitted_job(
        &mut self,
        j: &StoredJob,
        admitted: &AdmittedJob,
        statement: &StatementOfWork,
        credential: Option<&str>,
    ) -> rusqlite::Result<()> {
        let a = serde_json::to_string(admitted).map_err(json_err)?;
        let sow = serde_json::to_string(statement).map_err(json_err)?;
        let tx = self.conn.savepoint()?;
        insert_job_row(&tx, j, credential)?;
        tx.execute(
            "INSERT INTO admissions(job_id, admitted, statement) VALUES(?1, ?2, ?3)",
            params![j.id as i64, a, sow],
        )?;
        tx.commit()
    }

    /// A job's state and end time, if the job was ever registered.
    pub fn job_state(&self, id: u64) -> rusqlite::Result<Option<(JobLifecycle, Option<f64>)>> {
        self.conn
            .query_row(
                "SELECT state, finished_at FROM jobs WHERE id = ?1",
                params![id as i64],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
    }

    /// Records a job's end (finished, removed or evicted).
    pub fn end_job(&self, id: u64, state: JobLifecycle, at: Time) -> rusqlite::Result<()> {
        self.conn.execute(
            "UPDATE jobs SET state = ?2, finished_at = ?3 WHERE id = ?1",
            params![id as i64, state, at.secs()],
        )?;
        Ok(())
    }

    /// Inserts a submitted round attempt.
    pub fn insert_round(
        &self,
        job: u64,
        round: u32,
        attempt: u32,
        req: &RoundRequest,
        at: Time,
    ) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT INTO rounds(job_id, round, attempt, demand, deadline, min_response_fraction, submitted_at, close_at)
             VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![job as i64, round, attempt, req.demand, req.deadline.secs(), req.min_response_fraction, at.secs(), req.close_at],
        )?;
        Ok(())
    }

    /// Records an assignment (and, when it completes the demand, the round's fulfilment).
    /// Round counters are not stored: they are counted from the task rows when loading.
    pub fn insert_task(&mut self, t: &StoredTask, fulfilled: bool) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO tasks(id, digest, job_id, round, attempt, device_id, assigned_at, capacity_s, lease_until, state)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute(params![t.id as i64, t.digest, t.job_id as i64, t.round, t.attempt, t.device_id as i64, t.assigned_at, t.capacity_s, t.lease_until, task_state_str(t.state)])?;
        if fulfilled {
            self.conn
                .prepare_cached("UPDATE rounds SET fulfilled_at = ?4 WHERE job_id = ?1 AND round = ?2 AND attempt = ?3")?
                .execute(params![t.job_id as i64, t.round, t.attempt, t.assigned_at])?;
        }
        Ok(())
    }

    /// Records a task's new state.
    pub fn update_task(&mut self, id: u64, state: TaskState, at: Time) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("UPDATE tasks SET state = ?2, reported_at = ?3 WHERE id = ?1")?
            .execute(params![id as i64, task_state_str(state), at.secs()])?;
        Ok(())
    }

    /// Closes a round attempt and updates the job's progress.
    pub fn close_round(
        &mut self,
        job: u64,
        round: u32,
        attempt: u32,
        outcome: RoundOutcome,
        at: Time,
        progress: (u32, u32),
    ) -> rusqlite::Result<()> {
        let tx = self.conn.savepoint()?;
        tx.execute(
            "UPDATE rounds SET closed_at = ?4, outcome = ?5 WHERE job_id = ?1 AND round = ?2 AND attempt = ?3",
            params![job as i64, round, attempt, at.secs(), outcome_str(outcome)],
        )?;
        tx.execute(
            "UPDATE jobs SET rounds_done = ?2, next_round = ?3 WHERE id = ?1",
            params![job as i64, progress.0, progress.1],
        )?;
        tx.commit()
    }

    /// Adds check-in counts (bucket, profile JSON, count).
    pub fn add_checkins(&mut self, rows: &[(i64, String, u32)]) -> rusqlite::Result<()> {
        let tx = self.conn.savepoint()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO checkins(bucket, profile, count) VALUES(?1, ?2, ?3)
                 ON CONFLICT(bucket, profile) DO UPDATE SET count = count + excluded.count",
            )?;
            for (b, p, c) in rows {
                st.execute(params![b, p, c])?;
            }
        }
        tx.commit()
    }

    /// Writes admission slots (replacing earlier rows of the same slots) and drops rows
    /// of slots before `min_slot`, in one transaction.
    pub fn put_admission_slots(
        &mut self,
        slots: &[SavedSlot],
        min_slot: u64,
    ) -> rusqlite::Result<()> {
        let tx = self.conn.savepoint()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT OR REPLACE INTO admission_slots(slot, check_ins, watched_s, judged)
                 VALUES(?1, ?2, ?3, ?4)",
            )?;
            for s in slots {
                st.execute(params![s.slot as i64, s.check_ins, s.watched_s, s.judged])?;
            }
            tx.execute(
                "DELETE FROM admission_slots WHERE slot < ?1",
                params![min_slot as i64],
            )?;
        }
        tx.commit()
    }

    /// The admission slots written by [`Store::put_admission_slots`], by slot.
    pub fn admission_slots(&self) -> rusqlite::Result<Vec<SavedSlot>> {
        let mut st = self.conn.prepare(
            "SELECT slot, check_ins, watched_s, judged FROM admission_slots ORDER BY slot",
        )?;
        let rows = st.query_map([], |r| {
            Ok(SavedSlot {
                slot: r.get::<_, i64>(0)?.max(0) as u64,
                check_ins: r.get(1)?,
                watched_s: r.get(2)?,
                judged: r.get(3)?,
            })
        })?;
        rows.collect()
    }

    /// Records what a job reported about a closed round attempt (replacing an earlier
    /// report of the same attempt).
    pub fn put_round_metrics(
        &self,
        job: u64,
        round: u32,
        attempt: u32,
        m: &RoundMetrics,
    ) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO round_metrics(job_id, round, attempt, accuracy, loss, participants, eval_samples)
             VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![job as i64, round, attempt, m.accuracy, m.loss, m.participants, m.eval_samples],
        )?;
        Ok(())
    }

    /// The latest closed attempt of a job's round: (attempt, outcome, closed at).
    pub fn closed_attempt(
        &self,
        job: u64,
        round: u32,
    ) -> rusqlite::Result<Option<(u32, RoundOutcome, f64)>> {
        self.conn
            .query_row(
                "SELECT attempt, outcome, closed_at FROM rounds WHERE job_id = ?1 AND round = ?2
                 AND outcome IS NOT NULL ORDER BY attempt DESC LIMIT 1",
                params![job as i64, round],
                |r| Ok((r.get(0)?, parse_outcome(&r.get::<_, String>(1)?), r.get(2)?)),
            )
            .optional()
    }

    /// Adds `n` check-ins to `minute` and drops minutes before `min_minute`.
    pub fn add_supply_minute(&self, minute: i64, n: u64, min_minute: i64) -> rusqlite::Result<()> {
        if n > 0 {
            self.conn
                .prepare_cached(
                    "INSERT INTO supply_minutes(minute, check_ins) VALUES(?1, ?2)
                     ON CONFLICT(minute) DO UPDATE SET check_ins = check_ins + excluded.check_ins",
                )?
                .execute(params![minute, n as i64])?;
        }
        self.conn
            .prepare_cached("DELETE FROM supply_minutes WHERE minute < ?1")?
            .execute(params![min_minute])?;
        Ok(())
    }

    /// The status page's history: the latest `max_jobs` jobs in any state, up to
    /// `max_rounds` of their latest closed rounds with metrics, and the check-ins per
    /// minute from `min_minute` on.
    pub fn history(
        &self,
        max_jobs: usize,
        max_rounds: usize,
        min_minute: i64,
    ) -> rusqlite::Result<HistorySnapshot> {
        let mut snap = HistorySnapshot::default();
        let mut st = self.conn.prepare(
            "SELECT id, spec, registered_at, state, finished_at FROM jobs ORDER BY id DESC LIMIT ?1",
        )?;
        let rows = st.query_map(params![max_jobs as i64], |r| {
            let spec: String = r.get(1)?;
            Ok(HistoryJob {
                id: r.get::<_, i64>(0)? as u64,
                spec: json_col(1, &spec)?,
                registered_at: r.get(2)?,
                state: r.get(3)?,
                ended_at: r.get(4)?,
            })
        })?;
        for j in rows {
            snap.jobs.push(j?);
        }
        snap.jobs.reverse();
        let Some(first) = snap.jobs.first().map(|j| j.id) else {
            return Ok(snap);
        };
        let mut st = self.conn.prepare(
            "SELECT r.job_id, r.round, r.attempt, r.demand, r.submitted_at, r.fulfilled_at,
                    r.closed_at, r.outcome, m.accuracy, m.loss, m.participants, m.eval_samples,
                    COALESCE(r.fulfilled_at,
                      (SELECT MAX(t.assigned_at) FROM tasks t
                       WHERE (t.job_id, t.round, t.attempt) = (r.job_id, r.round, r.attempt)
                         AND t.state = 'finished'))
             FROM rounds r LEFT JOIN round_metrics m
               ON (m.job_id, m.round, m.attempt) = (r.job_id, r.round, r.attempt)
             WHERE r.job_id >= ?1 AND r.outcome IS NOT NULL
             ORDER BY r.closed_at DESC LIMIT ?2",
        )?;
        let rows = st.query_map(params![first as i64, max_rounds as i64], |r| {
            Ok(HistoryRound {
                job_id: r.get::<_, i64>(0)? as u64,
                round: r.get(1)?,
                attempt: r.get(2)?,
                demand: r.get(3)?,
                submitted_at: r.get(4)?,
                fulfilled_at: r.get(5)?,
                scheduled_at: r.get(12)?,
                closed_at: r.get(6)?,
                outcome: parse_outcome(&r.get::<_, String>(7)?),
                metrics: RoundMetrics {
                    accuracy: r.get(8)?,
                    loss: r.get(9)?,
                    participants: r.get(10)?,
                    eval_samples: r.get(11)?,
                },
            })
        })?;
        for r in rows {
            snap.rounds.push(r?);
        }
        snap.rounds.reverse();
        let mut st = self.conn.prepare(
            "SELECT minute, check_ins FROM supply_minutes WHERE minute >= ?1 ORDER BY minute",
        )?;
        let rows = st.query_map(params![min_minute], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64))
        })?;
        for m in rows {
            snap.supply.push(m?);
        }
        Ok(snap)
    }

    /// Drops check-in buckets older than `min_bucket`.
    pub fn prune_checkins(&self, min_bucket: i64) -> rusqlite::Result<usize> {
        self.conn.execute(
            "DELETE FROM checkins WHERE bucket < ?1",
            params![min_bucket],
        )
    }

    /// Reads what a restart needs: active jobs, their rounds and tasks, recent check-ins.
    pub fn load(&self, min_bucket: i64) -> rusqlite::Result<Snapshot> {
        let mut snap = Snapshot {
            max_job_id: self
                .conn
                .query_row("SELECT MAX(id) FROM jobs", [], |r| {
                    r.get::<_, Option<i64>>(0)
                })?
                .map(|v| v as u64),
            max_task_id: self
                .conn
                .query_row("SELECT MAX(id) FROM tasks", [], |r| {
                    r.get::<_, Option<i64>>(0)
                })?
                .map(|v| v as u64),
            legacy_tasks_below: self
                .meta(LEGACY_TASKS_BELOW)?
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            ..Snapshot::default()
        };
        self.load_jobs(&mut snap)?;
        self.load_rounds(&mut snap)?;
        self.load_tasks(&mut snap)?;
        let mut st = self.conn.prepare(
            "SELECT bucket, profile, count FROM checkins WHERE bucket >= ?1 ORDER BY bucket",
        )?;
        let rows = st.query_map(params![min_bucket], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
        for c in rows {
            snap.checkins.push(c?);
        }
        let mut st = self.conn.prepare(
            "SELECT a.job_id, a.admitted FROM admissions a JOIN jobs j ON j.id = a.job_id
             WHERE j.state = 'active'",
        )?;
        let rows = st.query_map([], |r| {
            let a: String = r.get(1)?;
            Ok((r.get::<_, i64>(0)? as u64, json_col::<AdmittedJob>(1, &a)?))
        })?;
        for a in rows {
            let (id, a) = a?;
            snap.admissions.insert(id, a);
        }
        let mut st = self.conn.prepare(
            "SELECT c.job_id, c.credential FROM job_credentials c JOIN jobs j ON j.id = c.job_id
             WHERE j.state = 'active'",
        )?;
        let rows = st.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))?;
        for c in rows {
            let (id, c) = c?;
            snap.credentials.insert(id, c);
        }
        Ok(snap)
    }

    /// The active jobs, into `snap`.
    fn load_jobs(&self, snap: &mut Snapshot) -> rusqlite::Result<()> {
        let mut st = self.conn.prepare(
            "SELECT id, spec, token, plan_url, model_size_bytes, registered_at, state, rounds_done, next_round
             FROM jobs WHERE state = 'active' ORDER BY id",
        )?;
        let rows = st.query_map([], |r| {
            let spec: String = r.get(1)?;
            Ok(StoredJob {
                id: r.get::<_, i64>(0)? as u64,
                spec: json_col(1, &spec)?,
                token: r.get(2)?,
                plan_url: r.get(3)?,
                model_size_bytes: r.get::<_, i64>(4)? as u64,
                registered_at: r.get(5)?,
                state: r.get(6)?,
                rounds_done: r.get(7)?,
                next_round: r.get(8)?,
            })
        })?;
        for j in rows {
            snap.jobs.push(j?);
        }
        Ok(())
    }

    /// The active jobs' rounds with their task counts, into `snap`.
    fn load_rounds(&self, snap: &mut Snapshot) -> rusqlite::Result<()> {
        let mut st = self.conn.prepare(
            "SELECT r.job_id, r.round, r.attempt, demand, deadline, min_response_fraction, submitted_at,
                    fulfilled_at, closed_at, outcome,
                    (SELECT COUNT(*) FROM tasks t WHERE (t.job_id, t.round, t.attempt) = (r.job_id, r.round, r.attempt)),
                    (SELECT COUNT(*) FROM tasks t WHERE (t.job_id, t.round, t.attempt) = (r.job_id, r.round, r.attempt) AND t.state = 'finished'),
                    (SELECT COUNT(*) FROM tasks t WHERE (t.job_id, t.round, t.attempt) = (r.job_id, r.round, r.attempt) AND t.state = 'failed'),
                    r.close_at
             FROM rounds r JOIN jobs j ON j.id = r.job_id WHERE j.state = 'active'
             ORDER BY r.job_id, r.round, r.attempt",
        )?;
        let rows = st.query_map([], |r| {
            let outcome: Option<String> = r.get(9)?;
            Ok(StoredRound {
                job_id: r.get::<_, i64>(0)? as u64,
                round: r.get(1)?,
                attempt: r.get(2)?,
                request: RoundRequest {
                    demand: r.get(3)?,
                    deadline: Time(r.get(4)?),
                    min_response_fraction: r.get(5)?,
                    close_at: r.get(13)?,
                },
                submitted_at: r.get(6)?,
                fulfilled_at: r.get(7)?,
                closed_at: r.get(8)?,
                outcome: outcome.as_deref().map(parse_outcome),
                counts: (r.get(10)?, r.get(11)?, r.get(12)?),
            })
        })?;
        for r in rows {
            snap.rounds.push(r?);
        }
        Ok(())
    }

    /// The active jobs' tasks, into `snap`.
    fn load_tasks(&self, snap: &mut Snapshot) -> rusqlite::Result<()> {
        let mut st = self.conn.prepare(
            "SELECT t.id, t.digest, t.job_id, t.round, t.attempt, t.device_id, t.assigned_at, t.capacity_s, t.lease_until, t.state, t.reported_at
             FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE j.state = 'active' ORDER BY t.id",
        )?;
        let rows = st.query_map([], |r| {
            let state: String = r.get(9)?;
            Ok(StoredTask {
                id: r.get::<_, i64>(0)? as u64,
                digest: r.get(1)?,
                job_id: r.get::<_, i64>(2)? as u64,
                round: r.get(3)?,
                attempt: r.get(4)?,
                device_id: r.get::<_, i64>(5)? as u64,
                assigned_at: r.get(6)?,
                capacity_s: r.get(7)?,
                lease_until: r.get(8)?,
                state: parse_task_state(&state),
                reported_at: r.get(10)?,
            })
        })?;
        for t in rows {
            snap.tasks.push(t?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_from_before_eval_samples_gets_the_column() {
        let dir = std::env::temp_dir().join(format!("venn-store-mig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.db");
        {
            // Schema 5's table, with a row reported before the column existed.
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE round_metrics(
                   job_id INTEGER NOT NULL, round INTEGER NOT NULL, attempt INTEGER NOT NULL,
                   accuracy REAL, loss REAL, participants INTEGER,
                   PRIMARY KEY(job_id, round, attempt));
                 INSERT INTO round_metrics VALUES(1, 0, 0, 0.5, 1.0, 3);",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let m = RoundMetrics {
            accuracy: Some(0.6),
            loss: Some(0.9),
            participants: Some(4),
            eval_samples: Some(2000),
        };
        store.put_round_metrics(1, 1, 0, &m).unwrap();
        let rows: Vec<(u32, Option<u32>)> = store
            .conn
            .prepare("SELECT round, eval_samples FROM round_metrics ORDER BY round")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, vec![(0, None), (1, Some(2000))]);
        assert_eq!(store.meta("schema_version").unwrap().as_deref(), Some("8"));
        drop(store);
        // Opening it again leaves the column alone.
        Store::open(&path).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_database_from_before_task_ids_is_rekeyed_in_assignment_order() {
        let dir = std::env::temp_dir().join(format!("venn-store-rekey-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.db");
        let _ = std::fs::remove_file(&path);
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        {
            // Schema 7's tasks, keyed by digest; rowids in assignment order, one gap.
            let c = Connection::open(&path).unwrap();
            c.execute_batch(&format!(
                "CREATE TABLE tasks(
                   token TEXT PRIMARY KEY, job_id INTEGER NOT NULL, round INTEGER NOT NULL,
                   attempt INTEGER NOT NULL, device_id INTEGER NOT NULL, assigned_at REAL NOT NULL,
                   capacity_s REAL NOT NULL, lease_until REAL NOT NULL, state TEXT NOT NULL,
                   reported_at REAL);
                 CREATE INDEX tasks_by_round ON tasks(job_id, round, attempt);
                 INSERT INTO tasks(rowid, token, job_id, round, attempt, device_id, assigned_at,
                   capacity_s, lease_until, state, reported_at)
                 VALUES(3, '{a}', 1, 0, 0, 7, 10.0, 5.0, 700.0, 'finished', 20.0),
                       (5, '{b}', 1, 0, 0, 8, 11.0, 5.0, 700.0, 'assigned', NULL);"
            ))
            .unwrap();
        }
        let mut store = Store::open(&path).unwrap();
        let rows: Vec<(i64, String, i64, Option<f64>)> = store
            .conn
            .prepare("SELECT id, digest, device_id, reported_at FROM tasks ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, vec![(3, a, 7, Some(20.0)), (5, b, 8, None)]);
        assert_eq!(
            store.meta(LEGACY_TASKS_BELOW).unwrap().as_deref(),
            Some("6")
        );
        let snap = store.load(0).unwrap();
        assert_eq!((snap.max_task_id, snap.legacy_tasks_below), (Some(5), 6));
        // Reports go by id now.
        store
            .update_task(5, TaskState::Finished, Time(30.0))
            .unwrap();
        let state: String = store
            .conn
            .query_row("SELECT state FROM tasks WHERE id = 5", [], |r| r.get(0))
            .unwrap();
        assert_eq!(state, "finished");
        drop(store);
        // Opening it again changes nothing.
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.meta(LEGACY_TASKS_BELOW).unwrap().as_deref(),
            Some("6")
        );
        assert_eq!(store.meta("schema_version").unwrap().as_deref(), Some("8"));
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_database_from_before_close_at_gets_the_column() {
        let dir = std::env::temp_dir().join(format!("venn-store-close-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.db");
        {
            // Schema 6's rounds table, with a round submitted before the column existed.
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE rounds(
                   job_id INTEGER NOT NULL, round INTEGER NOT NULL, attempt INTEGER NOT NULL,
                   demand INTEGER NOT NULL, deadline REAL NOT NULL, min_response_fraction REAL NOT NULL,
                   submitted_at REAL NOT NULL, fulfilled_at REAL, closed_at REAL, outcome TEXT,
                   PRIMARY KEY(job_id, round, attempt));
                 INSERT INTO rounds VALUES(1, 0, 0, 5, 100.0, 0.8, 0.0, NULL, NULL, NULL);",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let req = RoundRequest::new(10, Time(200.0), 0.8).closing_at(Some(6));
        store.insert_round(1, 1, 0, &req, Time(100.0)).unwrap();
        let rows: Vec<(u32, Option<u32>)> = store
            .conn
            .prepare("SELECT round, close_at FROM rounds ORDER BY round")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, vec![(0, None), (1, Some(6))]);
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
