//! The admission controller: plans each statement of work against posted prices, admits
//! or declines it, bills realised usage, and evicts last-in-first-out when the realised
//! usage of running jobs exceeds the realised capacity.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::prices::{CapacityForecast, PriceBook};
use super::risk::{CapacityError, overflow};
use super::statement::{StatementOfWork, ValueFn};
use crate::error::CoreError;
use crate::hash::FastMap;
use crate::ids::JobId;
use crate::time::Time;

/// Settings of the admission controller.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AdmissionParams {
    /// Length of a pricing slot, seconds.
    pub slot_s: f64,
    /// How far ahead a launch may be planned, seconds.
    pub horizon_s: f64,
    /// Slack ε: plans use C' = C·(1 − ε/10) of the forecast capacity.
    pub epsilon: f64,
    /// Price of a unit of usage in an empty slot.
    pub price_min: f64,
    /// Price of a unit of usage in a slot filled to C' (and of usage past a plan's
    /// stated support).
    pub price_max: f64,
    /// Realised capacity is the mean of the slots judged over this trailing window,
    /// seconds ([`SlotClock`](super::SlotClock); one day by default: a job's stated usage
    /// is a rate over hours to days, so the diurnal swing inside a day is no overload).
    pub capacity_window_s: f64,
    /// Check-ins per slot assumed for the slots of the window not yet judged (the
    /// operator's prior). Without one, the window's mean is over the judged slots only,
    /// and before any slot is judged the forecast is the most check-ins seen in a slot.
    pub prior_per_slot: Option<f64>,
}

impl Default for AdmissionParams {
    fn default() -> Self {
        AdmissionParams {
            slot_s: 600.0,
            horizon_s: 7.0 * 86_400.0,
            epsilon: 0.5,
            price_min: 0.01,
            price_max: 1.0,
            capacity_window_s: 86_400.0,
            prior_per_slot: None,
        }
    }
}

impl AdmissionParams {
    /// Checks every field; the error names the field.
    pub fn validate(&self) -> Result<(), CoreError> {
        let pos = |v: f64| v.is_finite() && v > 0.0;
        if !pos(self.slot_s) {
            return Err(CoreError::invalid("admission.slot_s", "must be positive"));
        }
        if !(pos(self.horizon_s) && self.horizon_s >= self.slot_s) {
            return Err(CoreError::invalid(
                "admission.horizon_s",
                "must be at least one slot",
            ));
        }
        if !(self.epsilon.is_finite() && (0.0..10.0).contains(&self.epsilon)) {
            return Err(CoreError::invalid(
                "admission.epsilon",
                "must be in [0, 10)",
            ));
        }
        if !(pos(self.price_min) && pos(self.price_max) && self.price_max >= self.price_min) {
            return Err(CoreError::invalid(
                "admission.price_min",
                "prices must be positive with price_min ≤ price_max",
            ));
        }
        if !(pos(self.capacity_window_s) && self.capacity_window_s >= self.slot_s) {
            return Err(CoreError::invalid(
                "admission.capacity_window_s",
                "must be at least one slot",
            ));
        }
        if let Some(p) = self.prior_per_slot
            && !(p.is_finite() && p >= 0.0)
        {
            return Err(CoreError::invalid(
                "admission.prior_per_slot",
                "must be a finite non-negative number of check-ins",
            ));
        }
        Ok(())
    }
}

/// A launch plan and what it is expected to be worth and cost.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdmissionPlan {
    /// When the job may start using devices.
    pub launch_at: Time,
    /// Expected value at completion under the statement, net of the eviction risk.
    pub expected_value: f64,
    /// Expected payment at the posted prices (evicted jobs are refunded, so also net of
    /// the eviction risk).
    pub expected_price: f64,
    /// Probability that LIFO eviction ends the job before it completes: earlier plans'
    /// usage in its slots (mean and variance, normal approximation) against the forecast
    /// capacity, widened by how far realised capacity has strayed from the forecast.
    #[serde(default)]
    pub eviction_risk: f64,
}

impl AdmissionPlan {
    /// Expected value minus expected payment.
    pub fn utility(&self) -> f64 {
        self.expected_value - self.expected_price
    }
}

/// The controller's answer to a statement of work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "admission", rename_all = "snake_case")]
pub enum Admission {
    /// Admitted with this plan.
    Admitted {
        /// The plan.
        plan: AdmissionPlan,
    },
    /// Declined: no plan is worth its price. `quote` is the best plan there was, if any
    /// slot had capacity at all.
    Declined {
        /// The best plan and its price.
        quote: Option<AdmissionPlan>,
        /// Why, in words.
        reason: String,
    },
}

/// An admitted job as the controller keeps it (persisted by drivers that restart).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdmittedJob {
    /// Admission order: later admissions are evicted first.
    pub seq: u64,
    /// When the statement arrived.
    pub submitted_at: Time,
    /// First slot of the plan.
    pub launch_slot: u64,
    /// Usage while running, device check-ins per slot.
    pub usage_per_slot: f64,
    /// P(still running k slots after launch), k = 0, 1, …
    pub survival: Vec<f64>,
    /// Prices posted at admission for slots `launch_slot + k`.
    pub prices: Vec<f64>,
    /// The stated value function.
    pub value: ValueFn,
    /// The plan it was admitted with.
    pub plan: AdmissionPlan,
}

/// How an admitted job ended, for welfare accounting.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settlement {
    /// The job.
    pub job: JobId,
    /// Value realised (0 unless it completed).
    pub value: f64,
    /// Payment charged (evicted jobs are refunded).
    pub payment: f64,
    /// Whether it was evicted.
    pub evicted: bool,
}

/// Running totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AdmissionStats {
    /// Statements received.
    pub submitted: u64,
    /// Statements admitted.
    pub admitted: u64,
    /// Statements declined.
    pub declined: u64,
    /// Admitted jobs that completed.
    pub completed: u64,
    /// Admitted jobs evicted.
    pub evicted: u64,
    /// Admitted jobs withdrawn by their owner.
    pub withdrawn: u64,
    /// Total value of completed jobs (welfare).
    pub welfare: f64,
    /// Total payments.
    pub revenue: f64,
    /// Usage of running jobs summed over closed slots (capped by capacity).
    pub used: f64,
    /// Realised capacity summed over closed slots.
    pub offered: f64,
}

impl AdmissionStats {
    /// Used over offered capacity.
    pub fn utilisation(&self) -> f64 {
        if self.offered > 0.0 {
            self.used / self.offered
        } else {
            0.0
        }
    }

    /// Evicted over admitted jobs.
    pub fn eviction_rate(&self) -> f64 {
        if self.admitted > 0 {
            self.evicted as f64 / self.admitted as f64
        } else {
            0.0
        }
    }
}

/// Longest plan, in slots, the controller keeps per job (about 2.5 years of 10-minute
/// slots): the bound on what one statement can make it allocate.
pub const MAX_PLAN_SLOTS: usize = 1 << 17;

/// Posted-price admission with LIFO eviction. Sans-IO: time and capacity come in as
/// arguments.
#[derive(Clone, Debug)]
pub struct AdmissionController {
    params: AdmissionParams,
    book: PriceBook,
    jobs: FastMap<JobId, AdmittedJob>,
    by_seq: BTreeMap<u64, JobId>,
    next_seq: u64,
    stats: AdmissionStats,
    capacity_error: CapacityError,
}

/// A statement's per-plan constants.
struct Shape {
    usage: f64,
    /// (probability, seconds of work) per outcome.
    outcomes: Vec<(f64, f64)>,
}

/// (probability, slots occupied) per outcome, and P(still running k slots after the
/// launch slot's start), k = 0, 1, …, for a launch `offset_s` seconds into its slot.
struct Occupancy {
    slots: Vec<(f64, usize)>,
    survival: Vec<f64>,
}

impl Shape {
    /// An outcome of `work` seconds launched `offset_s` into its slot occupies
    /// `ceil((offset + work) / slot_s)` slots, the slots billing counts.
    fn occupancy(&self, offset_s: f64, slot_s: f64) -> Occupancy {
        let slots: Vec<(f64, usize)> = self
            .outcomes
            .iter()
            .map(|(p, work)| (*p, occupied_slots(offset_s + work, slot_s)))
            .collect();
        let l_max = slots.iter().map(|o| o.1).max().unwrap_or(1);
        let survival = (0..l_max)
            .map(|k| slots.iter().filter(|o| o.1 > k).map(|o| o.0).sum())
            .collect();
        Occupancy { slots, survival }
    }
}

/// The maximum of every run of `len` consecutive values (0 for empty runs), one per
/// start position that leaves a full run: a sliding-window maximum.
fn range_max(v: &[f64], len: usize) -> Vec<f64> {
    if len == 0 {
        return vec![0.0; v.len() + 1];
    }
    let mut out = Vec::with_capacity((v.len() + 1).saturating_sub(len));
    let mut deque: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    for (i, x) in v.iter().enumerate() {
        while deque.back().is_some_and(|&j| v[j] <= *x) {
            deque.pop_back();
        }
        deque.push_back(i);
        if deque.front().is_some_and(|&j| j + len <= i) {
            deque.pop_front();
        }
        if i + 1 >= len {
            out.push(deque.front().map_or(0.0, |&j| v[j]));
        }
    }
    out
}

/// Mean and variance of a plan's usage in a slot it runs with probability `surv`.
fn usage_moments(usage: f64, surv: f64) -> (f64, f64) {
    // Stated probabilities may sum to 1 ± 1e-6: keep the variance non-negative so that
    // release undoes commit exactly.
    let surv = surv.clamp(0.0, 1.0);
    (usage * surv, usage * usage * surv * (1.0 - surv))
}

/// Slots touched by a run of `span_s` seconds from the start of a slot (at least one).
fn occupied_slots(span_s: f64, slot_s: f64) -> usize {
    ((span_s / slot_s - 1e-9).ceil().max(1.0)) as usize
}

/// The best plan found, with what admitting it commits.
struct Best {
    plan: AdmissionPlan,
    slot: u64,
    survival: Vec<f64>,
}

impl AdmissionController {
    /// A controller with `params` and a capacity forecast.
    pub fn new(params: AdmissionParams, forecast: CapacityForecast) -> Result<Self, CoreError> {
        params.validate()?;
        let slack = 1.0 - params.epsilon / 10.0;
        Ok(AdmissionController {
            params,
            book: PriceBook::new(params.price_min, params.price_max, slack, forecast),
            jobs: FastMap::default(),
            by_seq: BTreeMap::new(),
            next_seq: 0,
            stats: AdmissionStats::default(),
            capacity_error: CapacityError::default(),
        })
    }

    /// The settings.
    pub fn params(&self) -> AdmissionParams {
        self.params
    }

    /// Replaces the capacity forecast (e.g. from the supply estimator).
    pub fn set_forecast(&mut self, f: CapacityForecast) {
        self.book.set_forecast(f);
    }

    /// The price book (posted prices and commitments).
    pub fn prices(&self) -> &PriceBook {
        &self.book
    }

    /// The slot containing `t`.
    pub fn slot_of(&self, t: Time) -> u64 {
        (t.secs() / self.params.slot_s).floor().max(0.0) as u64
    }

    /// Running totals.
    pub fn stats(&self) -> AdmissionStats {
        self.stats
    }

    /// Relative standard deviation of realised capacity around the forecast, learnt from
    /// the slots closed so far (0 before any).
    pub fn capacity_error(&self) -> f64 {
        self.capacity_error.relative_sd()
    }

    /// An admitted job that has not ended.
    pub fn admitted(&self, job: JobId) -> Option<&AdmittedJob> {
        self.jobs.get(&job)
    }

    /// Validates `sow` and checks that its longest outcome fits [`MAX_PLAN_SLOTS`].
    fn check(&self, sow: &StatementOfWork) -> Result<(), CoreError> {
        sow.validate()?;
        let longest = sow.rounds.0.iter().map(|(r, _)| *r).max().unwrap_or(1);
        let slots = (longest as f64 * sow.round_s / self.params.slot_s).ceil();
        if slots > MAX_PLAN_SLOTS as f64 {
            return Err(CoreError::invalid(
                "statement.rounds",
                format!("the longest outcome spans {slots} slots, more than {MAX_PLAN_SLOTS}"),
            ));
        }
        Ok(())
    }

    fn shape(&self, sow: &StatementOfWork) -> Shape {
        Shape {
            usage: sow.demand as f64 * self.params.slot_s / sow.round_s,
            outcomes: sow
                .rounds
                .0
                .iter()
                .filter(|(_, p)| *p > 0.0)
                .map(|(r, p)| (*p, *r as f64 * sow.round_s))
                .collect(),
        }
    }

    /// The plan that maximises expected value minus expected price for `sow` arriving at
    /// `now`, without committing it. `None` when no launch slot in reach has capacity,
    /// or planned capacity at least the job's own usage per slot.
    pub fn quote(
        &self,
        sow: &StatementOfWork,
        now: Time,
    ) -> Result<Option<AdmissionPlan>, CoreError> {
        self.check(sow)?;
        Ok(self.best(sow, &self.shape(sow), now).map(|b| b.plan))
    }

    fn best(&self, sow: &StatementOfWork, shape: &Shape, now: Time) -> Option<Best> {
        let slot_s = self.params.slot_s;
        let cur = self.slot_of(now);
        let wait = sow
            .max_wait_s
            .unwrap_or(self.params.horizon_s)
            .min(self.params.horizon_s);
        let last = self.slot_of(now + wait);
        // A launch now starts partway into the current slot; later ones on a boundary.
        let first = shape.occupancy((now.secs() - cur as f64 * slot_s).max(0.0), slot_s);
        let later = shape.occupancy(0.0, slot_s);
        let span = first.survival.len().max(later.survival.len());
        // Every candidate reads the same window of posted prices and overflow risks:
        // compute each once, as prefix sums of the job's price (infinite slots counted
        // apart, so one unbuyable slot does not poison the sums) and, per outcome length,
        // the worst overflow risk over every run of slots.
        let capacity_sd = self.capacity_error.relative_sd();
        let n = (last - cur) as usize + span;
        let (mut cum, mut unbuyable, mut risk) = (vec![0.0], vec![0u32], Vec::with_capacity(n));
        for t in cur..cur + n as u64 {
            let price = shape.usage * self.book.price(t);
            let finite = price.is_finite();
            cum.push(cum[cum.len() - 1] + if finite { price } else { 0.0 });
            unbuyable.push(unbuyable[unbuyable.len() - 1] + u32::from(!finite));
            let (mean, var) = self.book.committed_with_variance(t);
            let cap = self.book.forecast().at(t);
            risk.push(overflow(shape.usage, mean, var, cap, capacity_sd * cap));
        }
        let price_of = |i: usize, l: usize| {
            if unbuyable[i + l] > unbuyable[i] {
                f64::INFINITY
            } else {
                cum[i + l] - cum[i]
            }
        };
        // A run of L slots is checked at the ends of its first L − 1 slots, and the
        // check at the end of slot t counts the jobs still running into t + 1: the risks
        // that matter are those of the L − 1 slots after the launch slot. Overflows in
        // consecutive slots are driven by the same earlier jobs running on, so they are
        // treated as fully correlated: the run survives with 1 − (their worst risk).
        // (Treating them as independent was measured to be far too pessimistic: see
        // SIMULATOR.md, "Eviction risk in plans".)
        let ahead = &risk[1..];
        let candidates = (last - cur) as usize + 1;
        let mut worst_runs: Vec<(usize, Vec<f64>)> = Vec::new();
        let worst_of: Vec<usize> = later
            .slots
            .iter()
            .map(|&(_, l)| {
                let len = l - 1;
                worst_runs
                    .iter()
                    .position(|(k, _)| *k == len)
                    .unwrap_or_else(|| {
                        // Just long enough for one run per later candidate.
                        let end = (candidates + len).saturating_sub(1).min(ahead.len());
                        worst_runs.push((len, range_max(&ahead[..end], len)));
                        worst_runs.len() - 1
                    })
            })
            .collect();
        let mut best: Option<Best> = None;
        for s in cur..=last {
            // A job that alone would use more than the planned capacity of a slot it
            // must occupy cannot run there, whatever the price.
            if self.book.planned_capacity(s) < shape.usage {
                continue;
            }
            let i = (s - cur) as usize;
            let occ = if s == cur { &first } else { &later };
            let start = Time((s as f64 * slot_s).max(now.secs()));
            let (mut expected_value, mut expected_price, mut completes) = (0.0, 0.0, 0.0);
            for (o, ((p, work), &(_, l))) in shape.outcomes.iter().zip(&occ.slots).enumerate() {
                let worst = if s == cur {
                    ahead[i..i + l - 1].iter().copied().fold(0.0, f64::max)
                } else {
                    worst_runs[worst_of[o]].1[i]
                };
                let ok = p * (1.0 - worst);
                completes += ok;
                expected_value += ok * sow.value.at(start.secs() + work - now.secs());
                expected_price += ok * price_of(i, l);
            }
            if !expected_price.is_finite() {
                continue;
            }
            let plan = AdmissionPlan {
                launch_at: start,
                expected_value,
                expected_price,
                eviction_risk: (1.0 - completes).clamp(0.0, 1.0),
            };
            if best
                .as_ref()
                .is_none_or(|b| plan.utility() > b.plan.utility())
            {
                best = Some(Best {
                    plan,
                    slot: s,
                    survival: occ.survival.clone(),
                });
            }
        }
        best
    }

    /// Plans `sow` for `job` at `now`: admits it with the best plan if that plan's
    /// expected utility is positive (committing its expected usage, which raises later
    /// prices), else declines with the quote.
    pub fn submit(
        &mut self,
        job: JobId,
        sow: &StatementOfWork,
        now: Time,
    ) -> Result<Admission, CoreError> {
        self.check(sow)?;
        if self.jobs.contains_key(&job) {
            return Err(CoreError::DuplicateJob(job));
        }
        self.book.advance(self.slot_of(now));
        self.stats.submitted += 1;
        let shape = self.shape(sow);
        let Some(Best {
            plan,
            slot,
            survival,
        }) = self.best(sow, &shape, now)
        else {
            self.stats.declined += 1;
            return Ok(Admission::Declined {
                quote: None,
                reason: "no capacity is forecast within the job's wait".into(),
            });
        };
        if plan.utility() <= 0.0 {
            self.stats.declined += 1;
            return Ok(Admission::Declined {
                quote: Some(plan),
                reason: format!(
                    "the best plan costs {:.4} for an expected value of {:.4} (eviction risk {:.1} %)",
                    plan.expected_price,
                    plan.expected_value,
                    100.0 * plan.eviction_risk
                ),
            });
        }
        let prices = (0..survival.len())
            .map(|k| self.book.price(slot + k as u64))
            .collect();
        let admitted = AdmittedJob {
            seq: self.next_seq,
            submitted_at: now,
            launch_slot: slot,
            usage_per_slot: shape.usage,
            survival,
            prices,
            value: sow.value.clone(),
            plan,
        };
        self.next_seq += 1;
        self.stats.admitted += 1;
        self.insert(job, admitted);
        Ok(Admission::Admitted { plan })
    }

    /// Re-installs a persisted admitted job (after a driver restart); its remaining
    /// expected usage is committed again from `now` on.
    pub fn restore(&mut self, job: JobId, a: AdmittedJob, now: Time) -> Result<(), CoreError> {
        if self.jobs.contains_key(&job) {
            return Err(CoreError::DuplicateJob(job));
        }
        self.book.advance(self.slot_of(now));
        self.next_seq = self.next_seq.max(a.seq + 1);
        self.insert(job, a);
        Ok(())
    }

    fn insert(&mut self, job: JobId, a: AdmittedJob) {
        for (k, surv) in a.survival.iter().enumerate() {
            let (mean, var) = usage_moments(a.usage_per_slot, *surv);
            self.book.commit(a.launch_slot + k as u64, mean, var);
        }
        self.by_seq.insert(a.seq, job);
        self.jobs.insert(job, a);
    }

    fn remove(&mut self, job: JobId, now: Time) -> Option<(AdmittedJob, f64)> {
        let a = self.jobs.remove(&job)?;
        self.by_seq.remove(&a.seq);
        let slot_s = self.params.slot_s;
        let launch = a.launch_slot as f64 * slot_s;
        // Slots the job ran in: those its run [launch_at, now) touched.
        let used = if now <= a.plan.launch_at {
            0
        } else {
            occupied_slots(now.secs() - launch, slot_s)
        };
        // Give back what the plan still expected to use in the slots it will not touch.
        for (k, surv) in a.survival.iter().enumerate().skip(used) {
            let (mean, var) = usage_moments(a.usage_per_slot, *surv);
            self.book.commit(a.launch_slot + k as u64, -mean, -var);
        }
        let payment = (0..used)
            .map(|k| a.usage_per_slot * a.prices.get(k).copied().unwrap_or(self.book.price_max()))
            .sum();
        Some((a, payment))
    }

    /// The job completed at `now`: it earns its value and pays for the slots it used at
    /// the prices posted when it was admitted (past its stated support, at the ceiling).
    pub fn finished(&mut self, job: JobId, now: Time) -> Option<Settlement> {
        let (a, payment) = self.remove(job, now)?;
        let value = a.value.at(now.since(a.submitted_at));
        self.stats.completed += 1;
        self.stats.welfare += value;
        self.stats.revenue += payment;
        Some(Settlement {
            job,
            value,
            payment,
            evicted: false,
        })
    }

    /// The job's owner cancelled it: no value, pays for what it used.
    pub fn withdraw(&mut self, job: JobId, now: Time) -> Option<Settlement> {
        let (_, payment) = self.remove(job, now)?;
        self.stats.withdrawn += 1;
        self.stats.revenue += payment;
        Some(Settlement {
            job,
            value: 0.0,
            payment,
            evicted: false,
        })
    }

    /// Usage of admitted jobs that launched before `now`.
    pub fn running_usage(&self, now: Time) -> f64 {
        self.jobs
            .values()
            .filter(|a| a.plan.launch_at < now)
            .map(|a| a.usage_per_slot)
            .sum()
    }

    /// Once per slot, with the capacity that slot actually offered: while the running
    /// jobs' usage exceeds it, evict the most recently admitted running job. A job is
    /// therefore only ever evicted because of jobs admitted before it, so its eviction
    /// risk is fixed when it is admitted. Evicted jobs are refunded.
    pub fn on_slot(&mut self, now: Time, capacity: f64) -> Vec<Settlement> {
        let closed = self.slot_of(now).saturating_sub(1);
        self.capacity_error
            .observe(self.book.forecast().at(closed), capacity);
        let mut usage = self.running_usage(now);
        let mut evicted = Vec::new();
        let running_desc: Vec<JobId> = self
            .by_seq
            .values()
            .rev()
            .copied()
            .filter(|j| self.jobs[j].plan.launch_at < now)
            .collect();
        for job in running_desc {
            if usage <= capacity + 1e-9 {
                break;
            }
            let (a, _) = self.remove(job, now).expect("listed jobs exist");
            usage -= a.usage_per_slot;
            self.stats.evicted += 1;
            evicted.push(Settlement {
                job,
                value: 0.0,
                payment: 0.0,
                evicted: true,
            });
        }
        self.stats.used += usage.max(0.0).min(capacity.max(0.0));
        self.stats.offered += capacity.max(0.0);
        self.book.advance(self.slot_of(now));
        evicted
    }
}

#[cfg(test)]
mod tests {
    use super::range_max;

    #[test]
    fn range_max_is_the_maximum_of_every_full_run() {
        let v = [0.1, 0.5, 0.2, 0.0, 0.4, 0.3];
        assert_eq!(range_max(&v, 0), vec![0.0; 7]);
        assert_eq!(range_max(&v, 1), v.to_vec());
        assert_eq!(range_max(&v, 2), vec![0.5, 0.5, 0.2, 0.4, 0.4]);
        assert_eq!(range_max(&v, 3), vec![0.5, 0.5, 0.4, 0.4]);
        assert_eq!(range_max(&v, 6), vec![0.5]);
        assert!(range_max(&v, 7).is_empty());
    }
}
