//! The store's one writer: a thread that owns the SQLite connection, takes writes from a
//! channel in the order the core decided them, and commits them in groups.
//!
//! One transaction per assignment made SQLite's per-commit work — the WAL append, its
//! frame checksums, the `fcntl` locks — the manager's bottleneck under load, and did it
//! inside the async handlers under the state lock. Here a write is a closure over the
//! [`Store`], queued with [`Writer::write`] while the caller still holds the state lock
//! (so the channel's order is the decision order: a task's insert comes before its
//! result). The thread takes every write waiting at once, applies each inside its own
//! savepoint (a failing write rolls back alone and reports its own error), commits them
//! as one transaction and only then completes each write's [`Ticket`]. Whatever waits on
//! a ticket — the HTTP reply that carries an assignment — therefore answers only once the
//! write is in the WAL: it survives a killed process (WAL with `synchronous = NORMAL`;
//! only a power loss can drop the last transactions, as before).
//!
//! Groups form by themselves: while one commits, the next writes queue, so under load a
//! commit carries tens of writes and when idle it carries one. No timer waits for more:
//! measured, a 200 µs wait for fuller groups cost more (handlers idle while the writer
//! slept) than the commits it saved. Dropping the [`Writer`] closes the channel and joins the thread after it has
//! committed everything queued, so a manager that is dropped leaves a complete file.
//!
//! Beside it, a checkpointer thread copies committed WAL pages into the database from its
//! own connection every [`CHECKPOINT_EVERY`], without waiting for the writer (PASSIVE).
//! Left to the writer alone, the WAL was copied in-line when it reached its bound
//! (SQLite's autocheckpoint, [`Store::open`]): thousands of pages and two fsyncs while
//! every reply of the next group waited, the manager's worst latencies. The writer still
//! checkpoints in-line at the bound — only that resets the WAL under a steady stream of
//! commits — but finds little left to copy. Durability is SQLite's either way: a commit
//! is in the WAL before its ticket completes.
//!
//! A failed write is the one thing the writer cannot hide: its caller's change is already
//! in the manager's memory (the core decided before the write was queued), so memory is
//! now ahead of the database. The writer therefore marks itself failed at the first
//! failed write (a group's commit, or one write of a group: the rest of that group is
//! refused, so the database keeps a prefix of the decided order) and refuses every later
//! write, at once and with the same cause, until the manager has rebuilt its state from
//! the database and calls [`Writer::resynchronised`]. Writes queued before that call are
//! refused even if the thread reaches them after it (each carries the epoch it was queued
//! in), so nothing decided on the discarded state reaches the file.

use crate::store::Store;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

/// At most this many writes in one transaction: a bound on how long one commit holds the
/// first write of its group waiting.
const MAX_GROUP: usize = 4096;

/// How often the checkpointer copies what the WAL holds into the database.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// Why a queued write did not become durable.
#[derive(Clone, Debug, thiserror::Error)]
pub enum WriteError {
    /// SQLite refused the write, or the commit of its group failed (then nothing of the
    /// group was written).
    #[error("{0}")]
    Sql(Arc<rusqlite::Error>),
    /// The writer thread is gone (it panicked, or the manager is shutting down).
    #[error("the store's writer has stopped")]
    Stopped,
    /// Not tried: an earlier write failed with this error and the manager has not
    /// rebuilt its state from the database since ([`Writer::resynchronised`]).
    #[error(
        "refused until the manager has resynchronised with its database; an earlier write failed: {0}"
    )]
    Refused(Arc<rusqlite::Error>),
}

impl WriteError {
    /// Did the write fail, or was it refused, because the disk is full (SQLITE_FULL)?
    pub fn is_disk_full(&self) -> bool {
        match self {
            WriteError::Sql(e) | WriteError::Refused(e) => is_disk_full(e),
            WriteError::Stopped => false,
        }
    }
}

impl WriteError {
    /// Did the write fail at the storage (an I/O error: SQLite reports a file that
    /// cannot grow, on a full disk, so as well), or was it refused until the manager has
    /// rebuilt its state? Either way nothing of it was stored and a retry may succeed.
    pub fn is_storage_failure(&self) -> bool {
        match self {
            WriteError::Sql(e) => is_io_error(e),
            WriteError::Refused(_) => true,
            WriteError::Stopped => false,
        }
    }
}

/// Is `e` an I/O error of SQLite's files (SQLITE_IOERR and its extended codes)?
pub fn is_io_error(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::SystemIoFailure)
}

/// Is `e` SQLite's "database or disk is full" (SQLITE_FULL)?
pub fn is_disk_full(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
}

impl From<rusqlite::Error> for WriteError {
    fn from(e: rusqlite::Error) -> Self {
        WriteError::Sql(Arc::new(e))
    }
}

/// A write: one or more store calls that commit, or fail, together.
type Op = Box<dyn FnOnce(&mut Store) -> rusqlite::Result<()> + Send>;

/// A queued write and where its outcome goes.
struct Job {
    op: Op,
    done: Done,
    /// [`Health::epoch`] when it was queued: a write from before a resynchronisation was
    /// decided on state the manager has since discarded.
    epoch: u64,
}

/// Whether the writer takes writes, shared by the handle and the thread: only the thread
/// marks it failed, only the manager ([`Writer::resynchronised`]) clears it.
#[derive(Debug, Default)]
struct Health {
    failed: AtomicBool,
    /// Resynchronisations so far.
    epoch: AtomicU64,
    /// Why the last failure failed: what refused writes report.
    cause: Mutex<Option<Arc<rusqlite::Error>>>,
    /// A test's full disk ([`Writer::simulate_full_disk`]): every commit fails with
    /// SQLITE_FULL.
    full: AtomicBool,
}

impl Health {
    fn refusal(&self) -> WriteError {
        match &*self.cause.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => WriteError::Refused(e.clone()),
            None => WriteError::Stopped,
        }
    }

    /// Marks the writer failed with `cause` (the first failure of an episode is logged:
    /// an operator must act on a full disk).
    fn fail(&self, cause: Arc<rusqlite::Error>, db: &str) {
        let disk_full = is_disk_full(&cause);
        tracing::error!(db, error = %cause, disk_full, "store: a write failed; refusing writes until the manager has rebuilt its state from the database");
        *self.cause.lock().unwrap_or_else(|e| e.into_inner()) = Some(cause);
        self.failed.store(true, SeqCst);
    }

    /// The writes of `group` that may be applied: none while failed, and none queued
    /// before the last resynchronisation; the others are refused here.
    fn admit(&self, group: Vec<Job>) -> Vec<Job> {
        let failed = self.failed.load(SeqCst);
        let epoch = self.epoch.load(SeqCst);
        let mut ok = Vec::with_capacity(group.len());
        for j in group {
            if failed || j.epoch != epoch {
                j.done.complete(Err(self.refusal()));
            } else {
                ok.push(j);
            }
        }
        ok
    }
}

/// Commits and writes since the start, for `/metrics`.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Transactions committed.
    pub commits: AtomicU64,
    /// Writes committed in them.
    pub writes: AtomicU64,
    /// Checkpoints the checkpointer thread ran on a WAL that held frames.
    pub checkpoints: AtomicU64,
}

/// The handle on the writer thread: queue writes, read in order with them.
pub struct Writer {
    tx: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// The checkpointer: dropping the sender stops it.
    checkpointer: Option<(Sender<()>, JoinHandle<()>)>,
    stats: Arc<WriterStats>,
    health: Arc<Health>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("stats", &self.stats)
            .finish()
    }
}

impl Writer {
    /// Starts the writer thread, which owns `store` from now on, and the checkpointer
    /// (for a database in a file).
    pub fn start(store: Store) -> std::io::Result<Writer> {
        let stats = Arc::new(WriterStats::default());
        let checkpointer = match store.open_checkpointer() {
            Ok(Some(side)) => Some(start_checkpointer(side, stats.clone())?),
            Ok(None) => None,
            Err(e) => {
                // The writer's in-line checkpoints still bound the WAL.
                tracing::warn!(error = %e, "store: no checkpointer connection, the writer checkpoints alone");
                None
            }
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let s = stats.clone();
        let health = Arc::new(Health::default());
        let h = health.clone();
        let thread = std::thread::Builder::new()
            .name("venn-store-writer".into())
            .spawn(move || run(store, rx, &s, &h))?;
        Ok(Writer {
            tx: Some(tx),
            thread: Some(thread),
            checkpointer,
            stats,
            health,
        })
    }

    /// Has a write failed since the last [`Writer::resynchronised`]? Then every write is
    /// refused, and the manager's memory may be ahead of the database.
    pub fn failed(&self) -> bool {
        self.health.failed.load(SeqCst)
    }

    /// Resynchronisations so far: a write queued in an earlier epoch is never applied.
    pub fn epoch(&self) -> u64 {
        self.health.epoch.load(SeqCst)
    }

    /// The manager has rebuilt its state from the database: take writes again. Writes
    /// still queued from before are refused (the epoch moves on first).
    pub fn resynchronised(&self) {
        self.health.epoch.fetch_add(1, SeqCst);
        self.health.failed.store(false, SeqCst);
    }

    /// For tests: while `full`, every group commit that writes fails with SQLITE_FULL,
    /// as on a full disk (the writes are applied and rolled back, as SQLite does).
    #[doc(hidden)]
    pub fn simulate_full_disk(&self, full: bool) {
        self.health.full.store(full, SeqCst);
    }

    /// Queues `op`; its ticket completes once the transaction holding it has committed.
    /// Writes apply in the order they were queued.
    pub fn write(
        &self,
        op: impl FnOnce(&mut Store) -> rusqlite::Result<()> + Send + 'static,
    ) -> Ticket {
        let (done, ticket) = slot();
        if self.failed() {
            // Fail fast: the thread would refuse it all the same.
            done.complete(Err(self.health.refusal()));
            return ticket;
        }
        let job = Job {
            op: Box::new(op),
            done,
            epoch: self.epoch(),
        };
        // Send fails only once the thread is gone: the job (and its `Done`) is dropped
        // with the error, which completes the ticket as `Stopped`.
        if let Some(tx) = &self.tx {
            let _ = tx.send(job);
        }
        ticket
    }

    /// Reads after every write queued so far has committed (the read runs on the
    /// writer's connection, in order): what a caller reads is what it was acknowledged.
    /// Blocks the calling thread.
    pub fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, WriteError> {
        let out = Arc::new(Mutex::new(None));
        let put = out.clone();
        self.write(move |s| {
            let v = f(s)?;
            *put.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
            Ok(())
        })
        .wait()?;
        let v = out.lock().unwrap_or_else(|e| e.into_inner()).take();
        v.ok_or(WriteError::Stopped)
    }

    /// Commits and writes so far.
    pub fn stats(&self) -> &Arc<WriterStats> {
        &self.stats
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some((stop, t)) = self.checkpointer.take() {
            drop(stop);
            if t.join().is_err() {
                tracing::error!("the store's checkpointer thread panicked");
            }
        }
        // Closing the channel ends the thread's loop once it has committed what is queued.
        drop(self.tx.take());
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the store's writer thread panicked");
        }
    }
}

/// The writer thread: waits for a write, takes every write queued behind it, commits
/// them as one transaction, completes their tickets; until the channel closes. A failure
/// marks `health` failed (module docs).
fn run(mut store: Store, rx: Receiver<Job>, stats: &WriterStats, health: &Health) {
    let db = store.path();
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        drain(&rx, &mut group);
        let group = health.admit(group);
        if group.is_empty() {
            continue;
        }
        let full = health.full.load(SeqCst);
        let written = commit_group(&mut store, group, full, health, &db);
        if written > 0 {
            stats.commits.fetch_add(1, Relaxed);
            stats.writes.fetch_add(written, Relaxed);
        }
    }
    tracing::debug!("store writer stopped: channel closed, everything committed");
}

/// Starts the checkpointer thread on its own connection `side`: a PASSIVE checkpoint
/// every [`CHECKPOINT_EVERY`] until the returned sender is dropped.
fn start_checkpointer(
    side: Store,
    stats: Arc<WriterStats>,
) -> std::io::Result<(Sender<()>, JoinHandle<()>)> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("venn-store-ckpt".into())
        .spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_EVERY) {
                match side.checkpoint() {
                    Ok((frames, _)) if frames > 0 => {
                        stats.checkpoints.fetch_add(1, Relaxed);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "store: background checkpoint failed"),
                }
            }
        })?;
    Ok((stop, thread))
}

/// Moves what is waiting in the channel into `group`, up to [`MAX_GROUP`].
fn drain(rx: &Receiver<Job>, group: &mut Vec<Job>) {
    while group.len() < MAX_GROUP {
        match rx.try_recv() {
            Ok(j) => group.push(j),
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
        }
    }
}

/// Applies `group` in one transaction, each write in its own savepoint, and completes
/// every ticket after the commit. A write that fails rolls back alone and the writes
/// behind it are refused (they may depend on it); the ones before it commit — unless
/// SQLite rolled the whole transaction back (it may on SQLITE_FULL), or the commit fails.
/// A failure marks `health` failed once the file is final and before any ticket completes,
/// so no caller hears of it before the manager can see the mark. Returns how many writes
/// committed (`full`: commits that write fail as on a full disk, for tests).
fn commit_group(store: &mut Store, group: Vec<Job>, full: bool, health: &Health, db: &str) -> u64 {
    if let Err(e) = store.begin() {
        let e = Arc::new(e);
        health.fail(e.clone(), db);
        for j in group {
            j.done.complete(Err(WriteError::Sql(e.clone())));
        }
        return 0;
    }
    let changes = store.total_changes();
    let mut applied = Vec::with_capacity(group.len());
    let mut failed: Option<(Done, Arc<rusqlite::Error>)> = None;
    let mut refused = Vec::new();
    for j in group {
        if failed.is_some() {
            refused.push(j.done);
            continue;
        }
        match store.atomically(j.op) {
            Ok(()) => applied.push(j.done),
            Err(e) => failed = Some((j.done, Arc::new(e))),
        }
    }
    // A simulated full disk fails only a commit that writes, as a real one does (a
    // group of reads commits nothing).
    let committed = if !store.in_transaction() {
        // SQLite rolled the transaction back itself: nothing of the group is written.
        let e = failed.as_ref().map(|f| f.1.clone());
        Err(e.unwrap_or_else(|| Arc::new(rusqlite::Error::InvalidQuery)))
    } else if full && store.total_changes() != changes {
        store.rollback();
        Err(Arc::new(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            Some("database or disk is full (simulated)".into()),
        )))
    } else {
        store.commit().map_err(|e| {
            store.rollback();
            Arc::new(e)
        })
    };
    let cause = match &committed {
        Ok(()) => failed.as_ref().map(|f| f.1.clone()),
        Err(e) => Some(e.clone()),
    };
    if let Some(e) = &cause {
        health.fail(e.clone(), db);
    }
    let n = applied.len() as u64;
    for done in applied {
        done.complete(committed.clone().map_err(WriteError::Sql));
    }
    if let Some((done, e)) = failed {
        done.complete(Err(WriteError::Sql(e)));
    }
    for done in refused {
        done.complete(Err(health.refusal()));
    }
    if committed.is_ok() { n } else { 0 }
}

/// Where a write's outcome meets whoever waits for it, on a thread or in a task.
#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
    ready: Condvar,
}

#[derive(Default)]
struct SlotState {
    outcome: Option<Result<(), WriteError>>,
    waker: Option<Waker>,
    /// A thread blocks in [`Ticket::wait`]: only then is the condvar signalled (a
    /// signal is a futex syscall even with no one waiting, once per write on the
    /// writer thread, where most tickets are awaited by tasks).
    parked: bool,
}

impl Slot {
    fn state(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn slot() -> (Done, Ticket) {
    let s = Arc::new(Slot::default());
    (Done(Some(s.clone())), Ticket(s))
}

/// The writer's end of a slot. Dropped without completing (the writer thread is gone),
/// it completes the ticket as [`WriteError::Stopped`], so no one waits forever.
struct Done(Option<Arc<Slot>>);

impl Done {
    fn complete(mut self, r: Result<(), WriteError>) {
        if let Some(s) = self.0.take() {
            finish(&s, r);
        }
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            finish(&s, Err(WriteError::Stopped));
        }
    }
}

fn finish(s: &Slot, r: Result<(), WriteError>) {
    let (waker, parked) = {
        let mut st = s.state();
        st.outcome = Some(r);
        (st.waker.take(), st.parked)
    };
    if parked {
        s.ready.notify_all();
    }
    if let Some(w) = waker {
        w.wake();
    }
}

/// A queued write's outcome: [`Ticket::wait`] blocks a thread for it, `.await` a task.
/// It is `Ok` only once the write has committed.
#[must_use = "a write is acknowledged only once its ticket says it committed"]
pub struct Ticket(Arc<Slot>);

impl Ticket {
    /// Blocks until the write has committed (or failed).
    pub fn wait(self) -> Result<(), WriteError> {
        let mut st = self.0.state();
        loop {
            if let Some(r) = st.outcome.take() {
                return r;
            }
            st.parked = true;
            st = self.0.ready.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Future for Ticket {
    type Output = Result<(), WriteError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.0.state();
        match st.outcome.take() {
            Some(r) => Poll::Ready(r),
            None => {
                st.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Waits for every ticket; the first failure, if any.
pub fn wait_all(tickets: Vec<Ticket>) -> Result<(), WriteError> {
    let mut first = Ok(());
    for t in tickets {
        if let Err(e) = t.wait()
            && first.is_ok()
        {
            first = Err(e);
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn temp_store(name: &str) -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("venn-writer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.db");
        (Store::open(&path).unwrap(), path)
    }

    fn meta(path: &Path, key: &str) -> Option<String> {
        Store::open(path).unwrap().meta(key).unwrap()
    }

    #[test]
    fn a_failing_write_stops_the_writer_until_it_is_resynchronised() {
        let (store, path) = temp_store("order");
        let w = Writer::start(store).unwrap();
        let mut tickets = Vec::new();
        for i in 0..1000 {
            tickets.push(w.write(move |s| s.set_meta("k", &i.to_string())));
        }
        // A write that fails half-way, between good ones: its first half is undone, and
        // what was queued behind it is refused.
        let bad = w.write(|s| {
            s.set_meta("partial", "x")?;
            Err(rusqlite::Error::InvalidQuery)
        });
        let after = w.write(|s| s.set_meta("after", "yes"));
        wait_all(tickets).unwrap();
        assert!(matches!(bad.wait(), Err(WriteError::Sql(_))));
        assert!(matches!(after.wait(), Err(WriteError::Refused(_))));
        assert!(w.failed());
        // Refused at once until the manager has resynchronised, reads included.
        assert!(matches!(
            w.write(|s| s.set_meta("later", "no")).wait(),
            Err(WriteError::Refused(_))
        ));
        assert!(w.read(|s| s.meta("k")).is_err());
        let epoch = w.epoch();
        w.resynchronised();
        assert!(!w.failed());
        assert_eq!(w.epoch(), epoch + 1);
        let read = w.read(|s| s.meta("k")).unwrap();
        assert_eq!(read.as_deref(), Some("999"));
        let stats = w.stats().clone();
        drop(w);
        assert_eq!(meta(&path, "k").as_deref(), Some("999"));
        assert_eq!(meta(&path, "after"), None);
        assert_eq!(meta(&path, "later"), None);
        assert_eq!(meta(&path, "partial"), None);
        // Groups formed: fewer commits than writes.
        assert_eq!(stats.writes.load(Relaxed), 1001);
        assert!(stats.commits.load(Relaxed) < 1001);
    }

    #[test]
    fn a_full_disk_fails_a_write_as_disk_full_and_refuses_the_next_until_resynchronised() {
        let (store, path) = temp_store("full");
        let w = Writer::start(store).unwrap();
        // The database may not grow: a write needing pages fails with SQLITE_FULL.
        w.read(|s| s.set_max_page_count(1)).unwrap();
        let big = "x".repeat(1 << 20);
        let e = w
            .write(move |s| s.set_meta("big", &big))
            .wait()
            .unwrap_err();
        assert!(matches!(e, WriteError::Sql(_)) && e.is_disk_full(), "{e}");
        let e = w.write(|s| s.set_meta("small", "1")).wait().unwrap_err();
        assert!(
            matches!(e, WriteError::Refused(_)) && e.is_disk_full(),
            "{e}"
        );
        // Space again, once resynchronised.
        w.resynchronised();
        w.read(|s| s.set_max_page_count(1 << 30)).unwrap();
        let big = "y".repeat(1 << 20);
        w.write(move |s| s.set_meta("big", &big)).wait().unwrap();
        drop(w);
        assert_eq!(meta(&path, "big").map(|v| v.len()), Some(1 << 20));
        assert_eq!(meta(&path, "small"), None);
    }

    #[test]
    fn a_write_queued_before_a_resynchronisation_is_never_applied() {
        let (store, path) = temp_store("epoch");
        let w = Writer::start(store).unwrap();
        // Hold the writer thread inside a write while a stale one queues behind it.
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let first = w.write(move |_| {
            let _ = wait.recv();
            Err(rusqlite::Error::InvalidQuery)
        });
        let stale = w.write(|s| s.set_meta("stale", "yes"));
        go.send(()).unwrap();
        assert!(first.wait().is_err());
        // Resynchronised while `stale` may still be queued: it is refused either way.
        w.resynchronised();
        assert!(matches!(stale.wait(), Err(WriteError::Refused(_))));
        w.write(|s| s.set_meta("fresh", "yes")).wait().unwrap();
        drop(w);
        assert_eq!(meta(&path, "stale"), None);
        assert_eq!(meta(&path, "fresh").as_deref(), Some("yes"));
    }

    #[test]
    fn dropping_the_writer_commits_what_is_queued() {
        let (store, path) = temp_store("drop");
        let w = Writer::start(store).unwrap();
        for i in 0..100 {
            // Nobody waits: the writes must commit all the same.
            drop(w.write(move |s| s.set_meta("n", &i.to_string())));
        }
        drop(w);
        assert_eq!(meta(&path, "n").as_deref(), Some("99"));
    }

    #[test]
    fn the_checkpointer_copies_the_wal_while_the_writer_writes() {
        let (store, path) = temp_store("ckpt");
        let w = Writer::start(store).unwrap();
        for i in 0..200 {
            w.write(move |s| s.set_meta("k", &i.to_string()))
                .wait()
                .unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while w.stats().checkpoints.load(Relaxed) == 0 {
            assert!(std::time::Instant::now() < deadline, "no checkpoint ran");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(w);
        assert_eq!(meta(&path, "k").as_deref(), Some("199"));
    }

    #[tokio::test]
    async fn a_task_awaits_its_ticket() {
        let (store, _path) = temp_store("await");
        let w = Writer::start(store).unwrap();
        w.write(|s| s.set_meta("a", "1")).await.unwrap();
        assert_eq!(w.read(|s| s.meta("a")).unwrap().as_deref(), Some("1"));
    }
}
