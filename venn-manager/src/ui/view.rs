//! What one view of the status page shows, gathered from the manager in two short
//! looks (the core under its lock, then the history under its own) and rendered after
//! both locks are released.

use crate::admission::AdmissionReport;
use crate::history::{AccuracyPoint, JobRecord};
use crate::service::Manager;
use crate::store::{HistoryRound, JobLifecycle};
use std::collections::BTreeMap;
use venn_api::manager::RoundMetrics;
use venn_core::Requirement;
use venn_core::admission::AdmissionPlan;

/// Groups listed (the busiest first).
pub const MAX_GROUPS_SHOWN: usize = 24;
/// Venn cells listed (the largest first).
pub const MAX_CELLS_SHOWN: usize = 24;

/// A job row.
#[derive(Clone, Debug)]
pub struct JobView {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Where it stands.
    pub state: JobPhase,
    /// Its job group while live.
    pub group: Option<u32>,
    /// Successful rounds.
    pub rounds_done: u32,
    /// Rounds it registered for.
    pub rounds: Option<u32>,
    /// The open round: (round, assigned, demand, finished, seconds waiting).
    pub open: Option<(u32, u32, u32, u32, f64)>,
    /// Mean scheduling delay of closed rounds.
    pub scheduling_delay_s: Option<f64>,
    /// Mean response collection time of closed rounds.
    pub collection_s: Option<f64>,
    /// Rounds aborted.
    pub aborts: u32,
    /// Latest metrics.
    pub metrics: Option<RoundMetrics>,
    /// Its accuracy curve.
    pub points: Vec<AccuracyPoint>,
    /// The admission plan, when admitted.
    pub plan: Option<AdmissionPlan>,
    /// Registration time.
    pub registered_at: f64,
}

/// Where a job stands, as the page shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobPhase {
    /// Admitted, no device before its planned launch.
    Held,
    /// Its open round still wants devices.
    Waiting,
    /// Every device of its round is assigned; results are coming in.
    Training,
    /// Live, no round open.
    BetweenRounds,
    /// Ran its rounds.
    Finished,
    /// Cancelled by its job (or ended by the idle-job reaper).
    Cancelled,
    /// Evicted by admission control.
    Evicted,
    /// Live in the record, not in the core (a restart's first view).
    Registered,
}

impl JobPhase {
    /// The words on the page.
    pub fn label(self) -> &'static str {
        match self {
            JobPhase::Held => "held until launch",
            JobPhase::Waiting => "waiting for devices",
            JobPhase::Training => "training",
            JobPhase::BetweenRounds => "between rounds",
            JobPhase::Finished => "finished",
            JobPhase::Cancelled => "cancelled",
            JobPhase::Evicted => "evicted",
            JobPhase::Registered => "registered",
        }
    }

    /// Whether the job has ended.
    pub fn ended(self) -> bool {
        matches!(
            self,
            JobPhase::Finished | JobPhase::Cancelled | JobPhase::Evicted
        )
    }
}

/// A job group row.
#[derive(Clone, Debug)]
pub struct GroupView {
    /// Id.
    pub id: u32,
    /// Its requirement, in words.
    pub requirement: String,
    /// Member jobs.
    pub members: Vec<u64>,
    /// Jobs waiting for devices, in queue order.
    pub queue: Vec<u64>,
    /// Eligible check-ins per hour over the supply window.
    pub supply_per_h: f64,
    /// Devices its open rounds still want: beside the supply, how scarce it is.
    pub open_demand: u32,
}

/// A Venn cell (devices eligible for exactly this set of groups).
#[derive(Clone, Debug)]
pub struct CellView {
    /// Its groups.
    pub groups: Vec<u32>,
    /// Check-ins per hour over the supply window.
    pub per_h: f64,
    /// The group the policy's plan gives it to.
    pub owner: Option<u32>,
}

/// Everything one view shows.
#[derive(Clone, Debug)]
pub struct PageData {
    /// The policy's name.
    pub policy: String,
    /// Now (epoch seconds).
    pub now: f64,
    /// Jobs, live and remembered, by id.
    pub jobs: Vec<JobView>,
    /// The busiest groups.
    pub groups: Vec<GroupView>,
    /// Groups not listed.
    pub groups_hidden: usize,
    /// The largest cells.
    pub cells: Vec<CellView>,
    /// Cells not listed.
    pub cells_hidden: usize,
    /// Check-ins per minute (minute since the epoch, count).
    pub supply: Vec<(i64, u64)>,
    /// Recent rounds, newest first, with their job's name.
    pub rounds: Vec<(HistoryRound, String)>,
    /// Core counters, by name.
    pub counters: Vec<(String, u64)>,
    /// Admission control, when on.
    pub admission: Option<AdmissionReport>,
}

/// What the core says about a live job.
struct Live {
    name: String,
    group: u32,
    rounds_done: u32,
    rounds: Option<u32>,
    open: Option<(u32, u32, u32, u32, f64, bool)>,
    held: bool,
    registered_at: f64,
}

impl PageData {
    /// Gathers a view from `m`.
    pub fn collect(m: &Manager) -> PageData {
        let admission = m.admission_report();
        let plans: BTreeMap<u64, AdmissionPlan> = m.admission_plans().into_iter().collect();
        let (now, live, groups, cells, counters) = m.with_core(|core, now| {
            // Rates over the history the counts cover (less than the window early on).
            let window_h = core.supply().effective_window(now) / 3600.0;
            let live: BTreeMap<u64, Live> = core
                .jobs()
                .map(|j| {
                    let open = j.current.as_ref().map(|r| {
                        (
                            r.round.0,
                            r.assigned,
                            r.request.demand,
                            r.finished,
                            now.since(r.submitted_at),
                            r.fulfilled_at.is_some(),
                        )
                    });
                    let live = Live {
                        name: j.spec.name.clone(),
                        group: u32::from(j.group.0),
                        rounds_done: j.rounds_done,
                        rounds: j.spec.rounds,
                        open,
                        held: j.hold_until > now,
                        registered_at: j.registered_at.secs(),
                    };
                    (j.id.0, live)
                })
                .collect();
            let groups: Vec<GroupView> = core
                .groups()
                .iter()
                .map(|(g, grp)| GroupView {
                    id: u32::from(g.0),
                    requirement: requirement_text(&grp.requirement),
                    members: grp.members.iter().map(|j| j.0).collect(),
                    queue: grp.queue.iter().map(|j| j.0).collect(),
                    supply_per_h: core.supply().group_supply(g) as f64 / window_h,
                    open_demand: grp
                        .members
                        .iter()
                        .filter_map(|j| core.job(*j))
                        .map(|j| j.open_demand())
                        .sum(),
                })
                .collect();
            let owners = core.region_owners();
            let cells: Vec<CellView> = core
                .supply()
                .cells()
                .into_iter()
                .map(|(set, n)| CellView {
                    groups: set.iter().map(|g| u32::from(g.0)).collect(),
                    per_h: n as f64 / window_h,
                    owner: owners
                        .iter()
                        .find(|(s, _)| *s == set)
                        .map(|(_, g)| u32::from(g.0)),
                })
                .collect();
            let counters = serde_json::to_value(core.counters())
                .ok()
                .and_then(|v| v.as_object().cloned())
                .map(|o| {
                    o.into_iter()
                        .filter_map(|(k, v)| Some((k, v.as_u64()?)))
                        .collect()
                })
                .unwrap_or_default();
            (now.secs(), live, groups, cells, counters)
        });
        let (records, recent, supply) = m.with_history(|h| {
            (
                h.jobs().cloned().collect::<Vec<JobRecord>>(),
                h.recent_rounds().rev().cloned().collect::<Vec<_>>(),
                h.supply().collect::<Vec<_>>(),
            )
        });
        let mut jobs: BTreeMap<u64, JobView> =
            records.into_iter().map(|r| (r.id, job_view(r))).collect();
        // Records first, then the live state over them (a live job the record forgot
        // still shows).
        for (id, l) in &live {
            let base = jobs.remove(id);
            jobs.insert(*id, merge(*id, base, l, plans.get(id).copied()));
        }
        let names: BTreeMap<u64, String> = jobs.values().map(|j| (j.id, j.name.clone())).collect();
        let rounds = recent
            .into_iter()
            .map(|r| {
                let name = names.get(&r.job_id).cloned().unwrap_or_default();
                (r, name)
            })
            .collect();
        let (groups, groups_hidden) = busiest(groups, MAX_GROUPS_SHOWN, |g| {
            (g.queue.len() as f64, g.supply_per_h)
        });
        let (cells, cells_hidden) = busiest(cells, MAX_CELLS_SHOWN, |c| (c.per_h, 0.0));
        PageData {
            policy: m.settings().policy.name().to_string(),
            now,
            jobs: jobs.into_values().collect(),
            groups,
            groups_hidden,
            cells,
            cells_hidden,
            supply,
            rounds,
            counters,
            admission,
        }
    }
}

/// A remembered job's row, before [`merge`] adds the live state of a live one.
fn job_view(r: JobRecord) -> JobView {
    JobView {
        id: r.id,
        state: match r.state {
            JobLifecycle::Active => JobPhase::Registered,
            JobLifecycle::Finished => JobPhase::Finished,
            JobLifecycle::Removed => JobPhase::Cancelled,
            JobLifecycle::Evicted => JobPhase::Evicted,
        },
        name: r.name.clone(),
        group: None,
        rounds_done: r.successes,
        rounds: r.rounds,
        open: None,
        scheduling_delay_s: r.mean_scheduling_delay(),
        collection_s: r.mean_collection(),
        aborts: r.aborts,
        metrics: r.last_metrics,
        points: r.points,
        plan: None,
        registered_at: r.registered_at,
    }
}

/// A live job's row: its record (if remembered) with the core's state over it.
fn merge(id: u64, base: Option<JobView>, l: &Live, plan: Option<AdmissionPlan>) -> JobView {
    let mut v = base.unwrap_or(JobView {
        id,
        name: l.name.clone(),
        state: JobPhase::Registered,
        group: None,
        rounds_done: 0,
        rounds: l.rounds,
        open: None,
        scheduling_delay_s: None,
        collection_s: None,
        aborts: 0,
        metrics: None,
        points: Vec::new(),
        plan: None,
        registered_at: l.registered_at,
    });
    v.group = Some(l.group);
    v.rounds_done = l.rounds_done;
    v.plan = plan;
    v.open = l.open.map(|(r, a, d, f, w, _)| (r, a, d, f, w));
    v.state = match l.open {
        _ if l.held => JobPhase::Held,
        Some((.., true)) => JobPhase::Training,
        Some(_) => JobPhase::Waiting,
        None => JobPhase::BetweenRounds,
    };
    v
}

/// A requirement in words: its bounds that are not the defaults, or "any device".
pub fn requirement_text(r: &Requirement) -> String {
    let mut parts = Vec::new();
    for (name, v) in [
        ("cpu", r.min_cpu_score),
        ("mem", r.min_mem_score),
        ("os", r.min_os_version),
        ("kbps", r.min_bandwidth_kbps),
    ] {
        if v > 0.0 {
            parts.push(format!("{name} ≥ {v}"));
        }
    }
    if let Some(ms) = r.max_ms_per_sample {
        parts.push(format!("ms/sample ≤ {ms}"));
    }
    if !r.tags.is_empty() {
        parts.push(format!("tags {}", r.tags.join(", ")));
    }
    if parts.is_empty() {
        "any device".into()
    } else {
        parts.join(", ")
    }
}

/// The first `n` items by descending key, and how many were left out.
fn busiest<T>(mut v: Vec<T>, n: usize, key: impl Fn(&T) -> (f64, f64)) -> (Vec<T>, usize) {
    v.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        kb.0.total_cmp(&ka.0).then(kb.1.total_cmp(&ka.1))
    });
    let hidden = v.len().saturating_sub(n);
    v.truncate(n);
    (v, hidden)
}
