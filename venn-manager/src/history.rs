//! What the status page shows of the past, kept in memory and bounded: the latest jobs
//! in any state with their accuracy against time, the latest closed rounds, and the
//! check-ins per minute over the last day.
//!
//! The core forgets a job when it ends, and reading SQLite for every page view would
//! take the manager's lock; so the manager feeds this record as it goes (under its own
//! mutex, taken after the core's), and rebuilds it from SQLite on restart
//! ([`History::restore`]). Every collection has a cap, so a long run or a hostile client
//! cannot grow it without bound.

use crate::store::{HistoryJob, HistoryRound, HistorySnapshot, JobLifecycle};
use std::collections::{BTreeMap, VecDeque};
use venn_api::manager::RoundMetrics;
use venn_core::{JobSpec, RoundOutcome};

/// Jobs remembered (the oldest ended ones are forgotten first).
pub const MAX_JOBS: usize = 64;
/// Accuracy points per job: past this, every other point is dropped, so the curve keeps
/// its whole span at half the resolution.
pub const MAX_POINTS: usize = 512;
/// Closed rounds listed as recent.
pub const RECENT_ROUNDS: usize = 40;
/// Rounds read back from SQLite on restart.
pub const RESTORE_ROUNDS: usize = 20_000;
/// Minutes of supply kept (one day).
pub const SUPPLY_MINUTES: usize = 24 * 60;

/// One point of a job's accuracy curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccuracyPoint {
    /// When the round closed (epoch seconds).
    pub at: f64,
    /// Round number.
    pub round: u32,
    /// Test accuracy in [0, 1].
    pub accuracy: f64,
    /// Samples it was measured on, when the job said.
    pub eval_samples: Option<u32>,
}

impl AccuracyPoint {
    /// The accuracy's 95 % Wilson interval, when the sample count is known.
    pub fn interval(&self) -> Option<venn_core::stats::Interval> {
        venn_core::stats::wilson(self.accuracy, u64::from(self.eval_samples?))
    }
}

/// A job as the page remembers it.
#[derive(Clone, Debug)]
pub struct JobRecord {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Rounds it registered for.
    pub rounds: Option<u32>,
    /// Registration time (epoch seconds).
    pub registered_at: f64,
    /// Where it stands.
    pub state: JobLifecycle,
    /// When it ended.
    pub ended_at: Option<f64>,
    /// Rounds closed successfully.
    pub successes: u32,
    /// Rounds aborted.
    pub aborts: u32,
    /// Sum of the scheduling delays of its closed rounds (seconds).
    pub scheduling_delay_s: f64,
    /// Sum of the response collection times of its closed rounds (seconds).
    pub collection_s: f64,
    /// The latest metrics it reported.
    pub last_metrics: Option<RoundMetrics>,
    /// Its accuracy curve.
    pub points: Vec<AccuracyPoint>,
}

impl JobRecord {
    fn new(id: u64, spec: &JobSpec, registered_at: f64) -> JobRecord {
        JobRecord {
            id,
            name: spec.name.clone(),
            rounds: spec.rounds,
            registered_at,
            state: JobLifecycle::Active,
            ended_at: None,
            successes: 0,
            aborts: 0,
            scheduling_delay_s: 0.0,
            collection_s: 0.0,
            last_metrics: None,
            points: Vec::new(),
        }
    }

    /// Closed rounds (successes and aborts).
    pub fn closed(&self) -> u32 {
        self.successes + self.aborts
    }

    /// Mean scheduling delay over closed rounds (`None` before the first).
    pub fn mean_scheduling_delay(&self) -> Option<f64> {
        (self.closed() > 0).then(|| self.scheduling_delay_s / self.closed() as f64)
    }

    /// Mean response collection time over closed rounds.
    pub fn mean_collection(&self) -> Option<f64> {
        (self.closed() > 0).then(|| self.collection_s / self.closed() as f64)
    }

    fn add_point(&mut self, p: AccuracyPoint) {
        // A repeated report for the same round replaces its point.
        if let Some(last) = self.points.last_mut().filter(|l| l.round == p.round) {
            *last = p;
            return;
        }
        if self.points.len() >= MAX_POINTS {
            let mut i = 0;
            self.points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
        }
        self.points.push(p);
    }
}

/// The record.
#[derive(Clone, Debug, Default)]
pub struct History {
    jobs: BTreeMap<u64, JobRecord>,
    rounds: VecDeque<HistoryRound>,
    /// (minute since the epoch, check-ins), by minute.
    supply: VecDeque<(i64, u64)>,
}

impl History {
    /// Rebuilds the record from what SQLite kept.
    pub fn restore(snap: HistorySnapshot) -> History {
        let mut h = History::default();
        for HistoryJob {
            id,
            spec,
            registered_at,
            state,
            ended_at,
        } in snap.jobs
        {
            let mut j = JobRecord::new(id, &spec, registered_at);
            j.state = state;
            j.ended_at = ended_at;
            h.jobs.insert(id, j);
        }
        for r in snap.rounds {
            h.round_closed(r);
        }
        h.supply = snap.supply.into_iter().collect();
        h
    }

    /// A job registered.
    pub fn job_registered(&mut self, id: u64, spec: &JobSpec, at: f64) {
        self.jobs.insert(id, JobRecord::new(id, spec, at));
        while self.jobs.len() > MAX_JOBS {
            // Forget the oldest ended job, or the oldest of all if none has ended.
            let victim = self
                .jobs
                .values()
                .find(|j| j.state != JobLifecycle::Active)
                .or_else(|| self.jobs.values().next())
                .map(|j| j.id);
            match victim {
                Some(v) => self.jobs.remove(&v),
                None => break,
            };
        }
    }

    /// A job ended (finished, removed or evicted).
    pub fn job_ended(&mut self, id: u64, state: JobLifecycle, at: f64) {
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = state;
            j.ended_at = Some(at);
        }
    }

    /// A round attempt closed (its metrics, if the job sent them with the close).
    pub fn round_closed(&mut self, r: HistoryRound) {
        if let Some(j) = self.jobs.get_mut(&r.job_id) {
            match r.outcome {
                RoundOutcome::Success => j.successes += 1,
                RoundOutcome::Abort => j.aborts += 1,
            }
            let fulfilled = r.scheduled_at.unwrap_or(r.closed_at);
            j.scheduling_delay_s += (fulfilled - r.submitted_at).max(0.0);
            j.collection_s += (r.closed_at - fulfilled).max(0.0);
            apply_metrics(j, r.round, r.closed_at, r.metrics);
        }
        self.rounds.push_back(r);
        while self.rounds.len() > RECENT_ROUNDS {
            self.rounds.pop_front();
        }
    }

    /// A job reported metrics for a round attempt it closed at `closed_at`, after
    /// closing it.
    pub fn round_metrics(
        &mut self,
        job: u64,
        round: u32,
        attempt: u32,
        closed_at: f64,
        m: RoundMetrics,
    ) {
        if let Some(r) = self
            .rounds
            .iter_mut()
            .rev()
            .find(|r| (r.job_id, r.round, r.attempt) == (job, round, attempt))
        {
            r.metrics = m;
        }
        if let Some(j) = self.jobs.get_mut(&job) {
            apply_metrics(j, round, closed_at, m);
        }
    }

    /// Adds `n` check-ins at `minute` (since the epoch) and forgets minutes older than a
    /// day before it.
    pub fn add_supply(&mut self, minute: i64, n: u64) {
        match self.supply.back_mut() {
            Some((m, c)) if *m == minute => *c += n,
            _ => self.supply.push_back((minute, n)),
        }
        while self
            .supply
            .front()
            .is_some_and(|(m, _)| *m <= minute - SUPPLY_MINUTES as i64)
        {
            self.supply.pop_front();
        }
    }

    /// The remembered jobs, by id.
    pub fn jobs(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.values()
    }

    /// One remembered job.
    pub fn job(&self, id: u64) -> Option<&JobRecord> {
        self.jobs.get(&id)
    }

    /// The latest closed rounds, oldest first.
    pub fn recent_rounds(&self) -> impl DoubleEndedIterator<Item = &HistoryRound> {
        self.rounds.iter()
    }

    /// Check-ins per minute, oldest first.
    pub fn supply(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        self.supply.iter().copied()
    }
}

fn apply_metrics(j: &mut JobRecord, round: u32, closed_at: f64, m: RoundMetrics) {
    if m == RoundMetrics::default() {
        return;
    }
    j.last_metrics = Some(m);
    if let Some(a) = m.accuracy {
        j.add_point(AccuracyPoint {
            at: closed_at,
            round,
            accuracy: a,
            eval_samples: m.eval_samples,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use venn_core::Requirement;

    fn closed(job: u64, round: u32, at: f64, acc: Option<f64>) -> HistoryRound {
        HistoryRound {
            job_id: job,
            round,
            attempt: 0,
            demand: 3,
            submitted_at: at - 10.0,
            fulfilled_at: Some(at - 4.0),
            scheduled_at: Some(at - 4.0),
            closed_at: at,
            outcome: RoundOutcome::Success,
            metrics: RoundMetrics {
                accuracy: acc,
                ..RoundMetrics::default()
            },
        }
    }

    #[test]
    fn points_are_decimated_not_truncated_and_rounds_capped() {
        let mut h = History::default();
        h.job_registered(0, &JobSpec::new("a", Requirement::any()), 0.0);
        let n = (MAX_POINTS * 3) as u32;
        for r in 0..n {
            h.round_closed(closed(0, r, f64::from(r + 1), Some(0.5)));
        }
        let j = h.job(0).unwrap();
        assert!(j.points.len() <= MAX_POINTS, "{}", j.points.len());
        assert_eq!(j.points[0].round, 0, "the curve keeps its start");
        assert_eq!(j.points.last().unwrap().round, n - 1, "and its end");
        assert_eq!(j.successes, n);
        assert_eq!(j.mean_scheduling_delay(), Some(6.0));
        assert_eq!(j.mean_collection(), Some(4.0));
        assert_eq!(h.recent_rounds().count(), RECENT_ROUNDS);
    }

    #[test]
    fn late_metrics_attach_to_their_round() {
        let mut h = History::default();
        h.job_registered(3, &JobSpec::new("a", Requirement::any()), 0.0);
        h.round_closed(closed(3, 0, 20.0, None));
        assert!(h.job(3).unwrap().points.is_empty());
        let m = RoundMetrics {
            accuracy: Some(0.25),
            loss: Some(2.0),
            participants: Some(3),
            eval_samples: Some(2000),
        };
        h.round_metrics(3, 0, 0, 20.0, m);
        let j = h.job(3).unwrap();
        let i = j.points[0].interval().unwrap();
        assert!(i.lo < 0.25 && 0.25 < i.hi && i.hi - i.lo < 0.04, "{i:?}");
        assert_eq!(
            j.points,
            vec![AccuracyPoint {
                at: 20.0,
                round: 0,
                accuracy: 0.25,
                eval_samples: Some(2000),
            }]
        );
        assert_eq!(h.recent_rounds().last().unwrap().metrics, m);
        // Reported twice: still one point.
        h.round_metrics(3, 0, 0, 20.0, m);
        assert_eq!(h.job(3).unwrap().points.len(), 1);
    }

    #[test]
    fn jobs_and_supply_are_bounded() {
        let mut h = History::default();
        for id in 0..(MAX_JOBS as u64 + 10) {
            h.job_registered(id, &JobSpec::new("j", Requirement::any()), 0.0);
            if id % 2 == 0 {
                h.job_ended(id, JobLifecycle::Finished, 1.0);
            }
        }
        assert_eq!(h.jobs().count(), MAX_JOBS);
        assert!(h.job(MAX_JOBS as u64 + 9).is_some(), "the newest stays");
        assert!(h.job(1).is_some(), "active jobs outlive ended ones");
        for m in 0..(3 * SUPPLY_MINUTES as i64) {
            h.add_supply(m, 2);
        }
        h.add_supply(3 * SUPPLY_MINUTES as i64 - 1, 5);
        let s: Vec<_> = h.supply().collect();
        assert_eq!(s.len(), SUPPLY_MINUTES);
        assert_eq!(s.last(), Some(&(3 * SUPPLY_MINUTES as i64 - 1, 7)));
    }
}
