//! Single-threaded lanes: many independent trainings (a round's participants, several
//! jobs' rounds) run side by side, each on one thread whose kernels run serially, instead of
//! one after another with every kernel split over all threads.
//!
//! Why: at the widths two cores can afford, one training does not keep two threads busy. On
//! the 2-core machine (2026-12-06, `fl-job bench --batch 20`) ResNet-18 ×4 trained 2,129
//! samples/s on one rayon thread and 2,465–2,900 on two, while two one-thread trainings
//! side by side (`taskset -c 0` / `-c 1`) did 1,818 + 2,096 = 3,914. A larger batch does not
//! close that gap (2,269 samples/s at batch 200 on one thread, MobileNet-V2 ×0.25 646 against
//! 627; on 2026-12-07, with faster kernels, batch 200 was 6–16 % *slower* per sample than
//! batch 20): the time is in the kernels' per-sample work, not in per-step overhead, so the
//! lever is keeping every core on its own training rather than stacking trainings into
//! bigger steps.
//!
//! Each lane is a rayon pool of one thread: the kernels' parallel loops (`par_iter`,
//! `rayon::scope`) run in place on it, so a lane never steals another lane's work or spins
//! waiting for it. The kernels' results do not depend on the thread count, so a training
//! gives the same bytes on a lane as on the whole pool.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// One unit of work for a lane.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// The threads to use for `threads` (0 = one per available core).
pub fn resolve_threads(threads: usize) -> usize {
    if threads > 0 {
        threads
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// A rayon pool of one thread named `name`.
fn one_thread_pool(name: String) -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .thread_name(move |_| name.clone())
        .build()
}

/// `f(i)` for every `i < n` on `threads` single-threaded lanes (0 = one per core), results
/// in index order. Items are handed out in index order as lanes free up.
///
/// # Panics
/// If a lane's pool cannot be built (the OS refused a thread) or `f` panics.
pub fn map<T: Send>(threads: usize, n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let order: Vec<usize> = (0..n).collect();
    map_in_order(threads, &order, f)
}

/// [`map`] with the largest items (by `sizes[i]`) handed out first, so that the lanes
/// finish together instead of one lane ending on a long item alone; results in index order.
pub fn map_largest_first<T: Send>(
    threads: usize,
    sizes: &[usize],
    f: impl Fn(usize) -> T + Sync,
) -> Vec<T> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    // Stable: equal sizes keep index order, so the hand-out order is reproducible.
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    map_in_order(threads, &order, f)
}

/// `f(i)` for every `i` in `order` (a permutation of `0..order.len()`), handed out in that
/// order; results in index order.
fn map_in_order<T: Send>(threads: usize, order: &[usize], f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let n = order.len();
    let lanes = resolve_threads(threads).min(n.max(1));
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    if lanes <= 1 {
        let pool = one_thread_pool("fl-job-lane-0".into()).expect("fl-job: lane thread");
        pool.install(|| order.iter().for_each(|&i| out[i] = Some(f(i))));
    } else {
        let next = AtomicUsize::new(0);
        let slots = Mutex::new(&mut out);
        std::thread::scope(|s| {
            for lane in 0..lanes {
                let (next, slots, f) = (&next, &slots, &f);
                s.spawn(move || {
                    let pool = one_thread_pool(format!("fl-job-lane-{lane}"))
                        .expect("fl-job: lane thread");
                    pool.install(|| {
                        while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                            let v = f(i);
                            lock(slots)[i] = Some(v);
                        }
                    });
                });
            }
        });
    }
    out.into_iter()
        .map(|v| v.expect("every index ran"))
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking job must not wedge the other lanes: the queue stays usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The queue the lanes share.
#[derive(Default)]
struct Queue {
    jobs: Mutex<(VecDeque<Job>, bool)>,
    ready: Condvar,
}

/// Long-lived lanes fed from one first-in-first-out queue: for work that arrives over time
/// and spawns more work (the simulator's trainer: a round's trainings, then its aggregation,
/// then its evaluation and the next round).
pub struct Lanes {
    queue: Arc<Queue>,
    workers: Vec<JoinHandle<()>>,
}

impl Lanes {
    /// `threads` lanes (0 = one per core), their threads named `name-N`.
    pub fn new(threads: usize, name: &str) -> std::io::Result<Self> {
        let queue = Arc::new(Queue::default());
        let mut workers = Vec::new();
        for lane in 0..resolve_threads(threads) {
            let pool = one_thread_pool(format!("{name}-{lane}")).map_err(std::io::Error::other)?;
            let q = queue.clone();
            workers.push(
                std::thread::Builder::new()
                    .name(format!("{name}-feed-{lane}"))
                    .spawn(move || feed(&q, &pool))?,
            );
        }
        Ok(Self { queue, workers })
    }

    /// Lanes (threads).
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// A handle that queues work from anywhere, including from inside a job.
    pub fn spawner(&self) -> Spawner {
        Spawner(self.queue.clone())
    }
}

impl Drop for Lanes {
    /// Runs what is queued, then stops the lanes.
    fn drop(&mut self) {
        lock(&self.queue.jobs).1 = true;
        self.queue.ready.notify_all();
        for w in self.workers.drain(..) {
            // A job that panicked was already reported by the panic hook.
            let _ = w.join();
        }
    }
}

/// Queues jobs on [`Lanes`].
#[derive(Clone)]
pub struct Spawner(Arc<Queue>);

impl Spawner {
    /// Runs `f` on the first free lane, after the jobs queued before it have started.
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        lock(&self.0.jobs).0.push_back(Box::new(f));
        self.0.ready.notify_one();
    }
}

/// A lane's loop: takes jobs until the queue is closed and empty, running each on `pool`.
fn feed(q: &Queue, pool: &rayon::ThreadPool) {
    loop {
        let job = {
            let mut g = lock(&q.jobs);
            loop {
                if let Some(job) = g.0.pop_front() {
                    break job;
                }
                if g.1 {
                    return;
                }
                g = q.ready.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        };
        // A panic ends this job only; the lane takes the next.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.install(job)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn map_keeps_index_order_and_runs_each_item_on_a_one_thread_pool() {
        for threads in [1, 2, 3] {
            let out = map(threads, 7, |i| (i * i, rayon::current_num_threads()));
            assert_eq!(
                out.iter().map(|v| v.0).collect::<Vec<_>>(),
                vec![0, 1, 4, 9, 16, 25, 36]
            );
            assert!(out.iter().all(|v| v.1 == 1), "{out:?}");
        }
        assert!(map(2, 0, |i| i).is_empty());
        let sizes = [3, 9, 1, 9, 5];
        let order = Mutex::new(Vec::new());
        let out = map_largest_first(1, &sizes, |i| {
            lock(&order).push(i);
            sizes[i] * 10
        });
        assert_eq!(out, vec![30, 90, 10, 90, 50]);
        assert_eq!(*lock(&order), vec![1, 3, 4, 0, 2]);
    }

    #[test]
    fn lanes_run_jobs_that_spawn_jobs_and_survive_a_panic() {
        let lanes = Lanes::new(2, "test-lane").unwrap();
        assert_eq!(lanes.threads(), 2);
        let (tx, rx) = mpsc::channel();
        let sp = lanes.spawner();
        sp.spawn(|| panic!("a failing job"));
        for i in 0..4 {
            let (tx, inner) = (tx.clone(), sp.clone());
            sp.spawn(move || {
                assert_eq!(rayon::current_num_threads(), 1);
                inner.spawn(move || tx.send(i).unwrap());
            });
        }
        drop(tx);
        let mut got: Vec<i32> = rx.iter().take(4).collect();
        got.sort_unstable();
        assert_eq!(got, vec![0, 1, 2, 3]);
    }
}
