//! Tier-based device-to-job matching (the paper's Algorithm 2).
//!
//! Devices are split into V tiers by their expected task time for the job; the tier
//! thresholds are quantiles of the capacities of devices that served the job's earlier
//! rounds, so they adapt to the population the job actually sees. Restricting a round to
//! one tier cuts its response-collection time by g_u (p95 response time of the tier over
//! the untiered p95) but multiplies its scheduling delay by about V. With
//! c = response collection time / scheduling delay from the job's history, the round is
//! restricted only when `V + g_u·c < c + 1`. The tier u is drawn at random so that jobs
//! spread over tiers; devices of the other tiers serve the next job of the group.

use crate::job::{JobState, TierBand};
use crate::rng::SeededRng;
use serde::{Deserialize, Serialize};

/// Settings of tier matching.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TierParams {
    /// Number of tiers V; 1 disables tier matching.
    pub v: u32,
    /// Task samples a tier needs before its p95 is trusted.
    pub min_samples_per_tier: usize,
}

impl Default for TierParams {
    fn default() -> Self {
        TierParams {
            v: 2,
            min_samples_per_tier: 5,
        }
    }
}

impl TierParams {
    /// Tier matching off (V = 1).
    pub fn disabled() -> Self {
        TierParams {
            v: 1,
            ..TierParams::default()
        }
    }
}

/// The p95 of `v` (nearest rank), reordering `v`; O(n) by selection, not sorting, since
/// this runs once per round request over up to `TASK_HISTORY` samples.
fn p95(v: &mut [f64]) -> f64 {
    let i = ((v.len() as f64 * 0.95).ceil() as usize).clamp(1, v.len()) - 1;
    *v.select_nth_unstable_by(i, f64::total_cmp).1
}

/// Decides whether the job's next round is restricted to a tier, and to which.
pub fn choose_tier(job: &JobState, p: TierParams, rng: &mut SeededRng) -> Option<TierBand> {
    let v = p.v as usize;
    if v <= 1 {
        return None;
    }
    let c = job.history.collection_to_delay_ratio()?;
    let samples = &job.history.tasks;
    if samples.len() < v * p.min_samples_per_tier {
        return None;
    }
    let mut caps: Vec<f64> = samples.iter().map(|s| s.capacity_s).collect();
    let n = caps.len();
    // Thresholds at the k/V quantiles; tier 0 is the fastest (smallest task time).
    let mut bounds = vec![f64::NEG_INFINITY];
    for k in 1..v {
        bounds.push(*caps.select_nth_unstable_by(k * n / v, f64::total_cmp).1);
    }
    bounds.push(f64::INFINITY);
    let u = rng.below(v as u64) as usize;
    if c.is_finite() && c + 1.0 <= p.v as f64 {
        // No g ≥ 0 satisfies V + g·c < c + 1: the common case when scheduling delay
        // dominates. Decided after the draw so the random stream does not depend on it.
        return None;
    }
    let band = TierBand {
        tier: u as u32,
        lo_s: bounds[u],
        hi_s: bounds[u + 1],
    };
    let mut tier: Vec<f64> = samples
        .iter()
        .filter(|s| band.contains(s.capacity_s))
        .map(|s| s.response_s)
        .collect();
    if tier.len() < p.min_samples_per_tier {
        return None;
    }
    let mut all: Vec<f64> = samples.iter().map(|s| s.response_s).collect();
    let untiered = p95(&mut all);
    if untiered <= 0.0 {
        return None;
    }
    let g = p95(&mut tier) / untiered;
    let restrict = if c.is_infinite() {
        g < 1.0
    } else {
        p.v as f64 + g * c < c + 1.0
    };
    restrict.then_some(band)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groupset::GroupIdx;
    use crate::ids::{JobId, RoundId};
    use crate::job::{JobHistory, JobSpec, RoundOutcome, RoundRecord, TaskSample};
    use crate::profile::Requirement;
    use crate::time::Time;

    fn job_with(sd: f64, rc: f64) -> JobState {
        let mut h = JobHistory::default();
        h.rounds.push(RoundRecord {
            round: RoundId(0),
            demand: 10,
            submitted_at: Time(0.0),
            fulfilled_at: Some(Time(sd)),
            scheduled_at: Some(Time(sd)),
            closed_at: Time(sd + rc),
            assigned: 10,
            finished: 10,
            failed: 0,
            outcome: RoundOutcome::Success,
        });
        // Fast devices (capacity 10) answer in 10 s, slow ones (capacity 100) in 100 s.
        for i in 0..40u32 {
            let cap = if i.is_multiple_of(2) { 10.0 } else { 100.0 };
            h.push_task(TaskSample {
                capacity_s: cap,
                response_s: cap,
            });
        }
        JobState {
            id: JobId(1),
            spec: JobSpec::new("j", Requirement::any()),
            group: GroupIdx(0),
            registered_at: Time(0.0),
            next_round: 1,
            rounds_done: 1,
            current: None,
            history: h,
            fair_share_jct: None,
            last_demand: 10,
            hold_until: Time(0.0),
        }
    }

    #[test]
    fn restricts_only_to_a_fast_tier_when_collection_dominates() {
        // c = 1000/10 = 100; fast tier g = 0.1 → 2 + 10 < 101: restrict. Slow tier g = 1
        // → 2 + 100 < 101 fails.
        let job = job_with(10.0, 1000.0);
        let mut rng = SeededRng::new(1);
        let mut fast = 0;
        for _ in 0..200 {
            if let Some(b) = choose_tier(&job, TierParams::default(), &mut rng) {
                assert_eq!(b.tier, 0);
                assert!(b.contains(10.0) && !b.contains(100.0));
                fast += 1;
            }
        }
        assert!(fast > 50 && fast < 150, "{fast}");
    }

    #[test]
    fn never_restricts_when_scheduling_delay_dominates_or_v_is_one() {
        let job = job_with(1000.0, 10.0);
        let mut rng = SeededRng::new(2);
        assert!((0..100).all(|_| choose_tier(&job, TierParams::default(), &mut rng).is_none()));
        let job = job_with(10.0, 1000.0);
        assert!((0..100).all(|_| choose_tier(&job, TierParams::disabled(), &mut rng).is_none()));
    }
}
