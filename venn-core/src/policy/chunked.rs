//! `chunked`: jobs are admitted in chunks whose summed per-round demand fits what their
//! eligible devices supply within one round deadline, and the chunks run in turn — the
//! schedule of Ghaffari's random-delays result for memory-efficient jobs (split into
//! chunks of load at most one epoch's capacity; O(global congestion + dilation)).
//!
//! A job joins a chunk at its first round request: the newest chunk if the job still fits
//! (demand ≤ supply rate of the chunk's groups × the shortest round deadline among its
//! jobs), else a new chunk. The oldest chunk with a registered job is the running one;
//! later chunks' requests wait in their queues. With `chunk_backfill`, devices the running
//! chunk cannot use go to later chunks instead of idling. Inside a chunk, jobs are served
//! in arrival order. A chunk ends when its last job is removed ([`Policy::on_job_removed`]);
//! rounds restored after a manager restart ([`Policy::on_restore`]) are chunked at the
//! next plan, in arrival order.

use std::collections::VecDeque;

use super::{ChunkedParams, DeviceCtx, Policy, RequestPlan, SchedView, supply_rate};
use crate::groupset::GroupSet;
use crate::hash::FastMap;
use crate::ids::JobId;
use crate::job::JobState;
use crate::rng::SeededRng;

#[derive(Debug)]
struct Chunk {
    id: u64,
    jobs: Vec<JobId>,
    /// Jobs of the chunk not yet removed.
    live: usize,
    demand: f64,
    groups: GroupSet,
    epoch_s: f64,
}

/// Chunks of jobs run in turn.
#[derive(Debug)]
pub struct Chunked {
    params: ChunkedParams,
    chunks: VecDeque<Chunk>,
    /// Chunk of every job admitted to a chunk that has not ended yet.
    chunk_of: FastMap<JobId, u64>,
    next_id: u64,
    /// Jobs whose open round was restored and is not chunked yet.
    restored: Vec<JobId>,
}

impl Chunked {
    /// The policy with the given knobs.
    pub fn new(params: ChunkedParams) -> Self {
        Chunked {
            params,
            chunks: VecDeque::new(),
            chunk_of: FastMap::default(),
            next_id: 0,
            restored: Vec::new(),
        }
    }

    /// Chunk id of the running chunk, if any.
    fn running(&self) -> Option<u64> {
        self.chunks.front().map(|c| c.id)
    }

    /// Number of chunks not yet finished (the running one included).
    pub fn pending_chunks(&self) -> usize {
        self.chunks.len()
    }

    fn admit(&mut self, job: &JobState, view: &SchedView<'_>) {
        let Some(r) = &job.current else { return };
        let demand = r.request.demand as f64;
        let epoch_s = r.request.deadline.since(view.now).max(0.0);
        if let Some(last) = self.chunks.back_mut() {
            let mut groups = last.groups;
            groups.insert(job.group);
            let epoch = last.epoch_s.min(epoch_s);
            let rate = supply_rate(view.supply, &groups, view.now);
            // With no supply seen yet there is nothing to measure a chunk against: join.
            if rate <= 0.0 || last.demand + demand <= rate * epoch {
                last.jobs.push(job.id);
                last.live += 1;
                last.demand += demand;
                last.groups = groups;
                last.epoch_s = epoch;
                self.chunk_of.insert(job.id, last.id);
                return;
            }
        }
        let mut groups = GroupSet::default();
        groups.insert(job.group);
        let id = self.next_id;
        self.next_id += 1;
        self.chunks.push_back(Chunk {
            id,
            jobs: vec![job.id],
            live: 1,
            demand,
            groups,
            epoch_s,
        });
        self.chunk_of.insert(job.id, id);
    }

    /// The accepting job of chunk `chunk` (any chunk if `None`) with the smallest key.
    fn head_of(&self, v: &SchedView<'_>, d: &DeviceCtx<'_>, chunk: Option<u64>) -> Option<JobId> {
        let mut best: Option<(f64, JobId)> = None;
        for g in d.eligible.iter() {
            let Some(group) = v.groups.get(g) else {
                continue;
            };
            let hit = group.queue.iter().copied().find(|j| {
                chunk.is_none_or(|c| self.chunk_of.get(j) == Some(&c)) && v.accepts(*j, d)
            });
            if let Some(j) = hit {
                let k = (v.key(j), j);
                if best.is_none_or(|b| k < b) {
                    best = Some(k);
                }
            }
        }
        best.map(|b| b.1)
    }
}

impl Policy for Chunked {
    fn name(&self) -> &'static str {
        "chunked"
    }

    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        // Chunks are formed in arrival order, so arrival order also orders chunks.
        job.registered_at.secs()
    }

    fn on_request(
        &mut self,
        job: &JobState,
        view: &SchedView<'_>,
        _: f64,
        _: &mut SeededRng,
    ) -> RequestPlan {
        if !self.chunk_of.contains_key(&job.id) {
            self.admit(job, view);
        }
        RequestPlan::default()
    }

    fn on_restore(&mut self, job: &JobState, _: &SchedView<'_>, _: f64) {
        self.restored.push(job.id);
    }

    fn on_job_removed(&mut self, job: &JobState) {
        if let Some(&id) = self.chunk_of.get(&job.id)
            && let Some(c) = self.chunks.iter_mut().find(|c| c.id == id)
        {
            c.live -= 1;
        }
    }

    fn plan(&mut self, view: &SchedView<'_>) {
        // Rounds restored after a manager restart never passed `on_request`: chunk the
        // queued ones now, in arrival order, so they are not starved (the others are
        // chunked at their next request).
        if !self.restored.is_empty() {
            let restored = std::mem::take(&mut self.restored);
            let mut unchunked: Vec<&JobState> = restored
                .iter()
                .filter(|j| !self.chunk_of.contains_key(j))
                .filter(|j| view.groups.iter().any(|(_, g)| g.queue.contains(j)))
                .filter_map(|j| view.jobs.get(j))
                .collect();
            unchunked.sort_by(|a, b| a.registered_at.secs().total_cmp(&b.registered_at.secs()));
            for job in unchunked {
                self.admit(job, view);
            }
        }
        // A chunk ends once all its jobs are removed; the next one then runs.
        while self.chunks.front().is_some_and(|c| c.live == 0) {
            let done = self.chunks.pop_front().expect("front exists");
            for j in done.jobs {
                self.chunk_of.remove(&j);
            }
        }
    }

    fn select(&mut self, v: &SchedView<'_>, d: &DeviceCtx<'_>, _: &mut SeededRng) -> Option<JobId> {
        let running = self.running()?;
        self.head_of(v, d, Some(running)).or_else(|| {
            if self.params.chunk_backfill {
                self.head_of(v, d, None)
            } else {
                None
            }
        })
    }
}
