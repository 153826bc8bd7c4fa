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

use crate::store::Store;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
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
        let thread = std::thread::Builder::new()
            .name("venn-store-writer".into())
            .spawn(move || run(store, rx, &s))?;
        Ok(Writer {
            tx: Some(tx),
            thread: Some(thread),
            checkpointer,
            stats,
        })
    }

    /// Queues `op`; its ticket completes once the transaction holding it has committed.
    /// Writes apply in the order they were queued.
    pub fn write(
        &self,
        op: impl FnOnce(&mut Store) -> rusqlite::Result<()> + Send + 'static,
    ) -> Ticket {
        let (done, ticket) = slot();
        let job = Job {
            op: Box::new(op),
            done,
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
/// them as one transaction, completes their tickets; until the channel closes.
fn run(mut store: Store, rx: Receiver<Job>, stats: &WriterStats) {
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        drain(&rx, &mut group);
        let n = group.len() as u64;
        if commit_group(&mut store, group) {
            stats.commits.fetch_add(1, Relaxed);
            stats.writes.fetch_add(n, Relaxed);
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
/// every ticket after the commit. Returns whether the transaction committed.
fn commit_group(store: &mut Store, group: Vec<Job>) -> bool {
    if let Err(e) = store.begin() {
        tracing::error!(error = %e, writes = group.len(), "store: cannot begin a transaction");
        let e = WriteError::from(e);
        for j in group {
            j.done.complete(Err(e.clone()));
        }
        return false;
    }
    let mut outcomes = Vec::with_capacity(group.len());
    for j in group {
        let r = store.atomically(j.op);
        if let Err(e) = &r {
            tracing::error!(error = %e, "store: a write failed and was rolled back alone");
        }
        outcomes.push((j.done, r.map_err(WriteError::from)));
    }
    match store.commit() {
        Ok(()) => {
            for (done, r) in outcomes {
                done.complete(r);
            }
            true
        }
        Err(e) => {
            tracing::error!(error = %e, writes = outcomes.len(), "store: a group commit failed, none of its writes was written");
            store.rollback();
            let e = WriteError::from(e);
            for (done, _) in outcomes {
                done.complete(Err(e.clone()));
            }
            false
        }
    }
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
    fn writes_commit_in_order_and_a_failing_one_fails_alone() {
        let (store, path) = temp_store("order");
        let w = Writer::start(store).unwrap();
        let mut tickets = Vec::new();
        for i in 0..1000 {
            tickets.push(w.write(move |s| s.set_meta("k", &i.to_string())));
        }
        // A write that fails half-way, between good ones: its first half is undone.
        let bad = w.write(|s| {
            s.set_meta("partial", "x")?;
            Err(rusqlite::Error::InvalidQuery)
        });
        let after = w.write(|s| s.set_meta("after", "yes"));
        wait_all(tickets).unwrap();
        assert!(matches!(bad.wait(), Err(WriteError::Sql(_))));
        after.wait().unwrap();
        let read = w.read(|s| s.meta("k")).unwrap();
        assert_eq!(read.as_deref(), Some("999"));
        let stats = w.stats().clone();
        drop(w);
        assert_eq!(meta(&path, "k").as_deref(), Some("999"));
        assert_eq!(meta(&path, "after").as_deref(), Some("yes"));
        assert_eq!(meta(&path, "partial"), None);
        // Groups formed: fewer commits than writes.
        assert_eq!(stats.writes.load(Relaxed), 1003);
        assert!(stats.commits.load(Relaxed) < 1003);
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
