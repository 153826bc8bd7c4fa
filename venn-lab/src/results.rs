//! An experiment's results: per-job outcomes, time-to-accuracy, average JCT, and the
//! files written for them (summary JSON, TTA CSV, accuracy-vs-time PNG).

use crate::config::LabConfig;
use datasets::{Femnist, Located};
use device_agent::agent::AgentStats;
use fl_job::runner::{JobReport, RoundRow};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;
use venn_core::stats::TtaRule;
use venn_plot::accuracy::{Series, accuracy_png_with};
use venn_plot::bars::{Bar, stacked_bars_png};

/// The parts of a JCT in [`LabResult::schedule_bars`], in order.
pub(crate) const SPLIT_NAMES: [&str; 3] = [
    "scheduling delay",
    "response collection",
    "aborted attempts",
];

/// How one job went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobOutcome {
    /// Job name.
    pub name: String,
    /// When the job arrived (registered), seconds since the start on the run's clock.
    pub arrival_s: f64,
    /// Completed (all rounds or target accuracy).
    pub finished: bool,
    /// Job completion time, seconds (registration to finish).
    pub jct_s: Option<f64>,
    /// Rounds aggregated.
    pub rounds: usize,
    /// Accuracy after the last round.
    pub final_accuracy: Option<f64>,
    /// Its rounds.
    pub history: Vec<RoundRow>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

impl JobOutcome {
    /// Seconds of scheduling delay and of response collection summed over its rounds'
    /// successful attempts, and the rest of its JCT (attempts aborted and retried), if
    /// it has a JCT.
    pub fn jct_split(&self) -> (f64, f64, Option<f64>) {
        let sd: f64 = self.history.iter().map(|r| r.scheduling_delay_s).sum();
        let rc: f64 = self.history.iter().map(|r| r.response_collection_s).sum();
        (sd, rc, self.jct_s.map(|t| (t - sd - rc).max(0.0)))
    }

    pub(crate) fn from_report(r: JobReport) -> Self {
        JobOutcome {
            name: r.name.clone(),
            arrival_s: r.registered_s,
            finished: r.finished_s.is_some(),
            jct_s: r.jct_s(),
            rounds: r.rounds.len(),
            final_accuracy: r.rounds.last().map(|x| x.accuracy),
            history: r.rounds,
            error: None,
        }
    }

    /// A job the run stopped (`why`) before it finished: its rounds so far, read back from
    /// the CSV it appends a row to per round (none if it had not started).
    pub(crate) fn unfinished(name: &str, arrival_s: f64, csv: &Path, why: &str) -> Self {
        let history: Vec<RoundRow> = csv::Reader::from_path(csv)
            .map(|mut r| r.deserialize().filter_map(Result::ok).collect())
            .unwrap_or_default();
        JobOutcome {
            name: name.into(),
            arrival_s,
            finished: false,
            jct_s: None,
            rounds: history.len(),
            final_accuracy: history.last().map(|x| x.accuracy),
            history,
            error: Some(format!("unfinished: {why}")),
        }
    }

    pub(crate) fn failed(name: &str, arrival_s: f64, error: String) -> Self {
        JobOutcome {
            name: name.into(),
            arrival_s,
            finished: false,
            jct_s: None,
            rounds: 0,
            final_accuracy: None,
            history: Vec::new(),
            error: Some(error),
        }
    }

    /// Time-to-accuracy: seconds (on the run's [`Clock`]) from the job's arrival to the
    /// round at which it reached `acc` by `rule` (the first of `rule.consecutive`
    /// evaluations in a row at or above it).
    pub fn time_to_accuracy(&self, acc: f64, rule: TtaRule) -> Option<f64> {
        rule.reached(self.history.iter().map(|r| (r.time_s, r.accuracy)), acc)
            .map(|t| t - self.arrival_s)
    }
}

/// Which clock an experiment's times are on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// A live run (`venn-lab run`): seconds of wall time.
    #[default]
    Wall,
    /// A simulated run (`venn-lab sim`): seconds of the virtual clock.
    Virtual,
}

impl Clock {
    /// Seconds per unit of every table of a run on this clock, and the unit's name: one
    /// unit for every table of an output (a run's own, the comparisons, the summaries
    /// over seeds), hours for the virtual clock's long runs.
    pub(crate) fn unit(self) -> (f64, &'static str) {
        match self {
            Clock::Wall => (1.0, "s"),
            Clock::Virtual => (3600.0, "h"),
        }
    }

    /// Seconds per plotted x unit, and the axis name.
    pub(crate) fn axis(self) -> (f64, &'static str) {
        match self {
            Clock::Wall => (60.0, "wall time (minutes)"),
            Clock::Virtual => (3600.0, "virtual time (hours)"),
        }
    }
}

/// `secs` in a table's unit of `per` seconds: seconds with one decimal, hours with two.
fn in_unit(secs: f64, per: f64) -> String {
    if per == 1.0 {
        format!("{secs:.1}")
    } else {
        format!("{:.2}", secs / per)
    }
}

/// Which data an experiment ran on, recorded in `summary.json` so a result says whether
/// it came from the built-in 80-writer subset, the shared set or a full download.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DataUsed {
    /// Where FEMNIST was found (`None`: the caller built it in memory).
    pub femnist: Option<Located>,
    /// Writers loaded (train and test parts together).
    pub writers: usize,
    /// Train samples loaded.
    pub train_samples: usize,
    /// Test samples loaded.
    pub test_samples: usize,
    /// Where the device tables (capacity, eligibility, specs) were found.
    pub traces: Option<Located>,
}

impl DataUsed {
    /// The record for `data`, with the device tables from `traces`.
    pub fn new(data: &Femnist, traces: Option<&Located>) -> Self {
        let stats = data.stats();
        DataUsed {
            femnist: data.source.clone(),
            writers: stats.writers,
            train_samples: stats.train_samples,
            test_samples: stats.test_samples,
            traces: traces.cloned(),
        }
    }
}

/// The whole experiment under one policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabResult {
    /// Experiment name.
    pub name: String,
    /// Policy.
    pub policy: String,
    /// The clock of every time below except `wall_s`.
    pub clock: Clock,
    /// Wall seconds the run took.
    pub wall_s: f64,
    /// Set when the run stopped before every job finished.
    pub stopped_early: Option<String>,
    /// Average JCT over finished jobs, seconds.
    pub avg_jct_s: Option<f64>,
    /// Jobs that finished.
    pub jobs_finished: usize,
    /// Per threshold: average time-to-accuracy over the jobs that reached it, and how many did.
    pub avg_tta_s: Vec<(f64, Option<f64>, usize)>,
    /// The rule by which a job reaches a threshold.
    pub tta_rule: TtaRule,
    /// Per-job outcomes.
    pub jobs: Vec<JobOutcome>,
    /// The data the run used.
    pub data: DataUsed,
    /// Device-side counters.
    pub devices: AgentStats,
    /// The virtual-clock run's counters (`venn-lab sim` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulation: Option<VirtualStats>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

impl LabResult {
    pub(crate) fn new(
        cfg: &LabConfig,
        policy: &str,
        mut jobs: Vec<JobOutcome>,
        devices: AgentStats,
        wall_s: f64,
        stopped_early: Option<String>,
    ) -> Self {
        jobs.sort_by(|a, b| a.name.cmp(&b.name));
        let jcts: Vec<f64> = jobs.iter().filter_map(|j| j.jct_s).collect();
        let rule = cfg.tta_rule();
        let avg_tta_s = cfg
            .tta_thresholds
            .iter()
            .map(|&a| {
                let t: Vec<f64> = jobs
                    .iter()
                    .filter_map(|j| j.time_to_accuracy(a, rule))
                    .collect();
                (a, mean(&t), t.len())
            })
            .collect();
        LabResult {
            name: cfg.name.clone(),
            policy: policy.into(),
            wall_s,
            stopped_early,
            avg_jct_s: mean(&jcts),
            jobs_finished: jcts.len(),
            avg_tta_s,
            tta_rule: rule,
            jobs,
            data: DataUsed::default(),
            devices,
            clock: Clock::Wall,
            simulation: None,
        }
    }

    /// Whether the run was stopped by Ctrl-C (`stopped_early` = "cancelled"): its jobs are
    /// cut short, so a summary over seeds leaves its seed out.
    pub fn cancelled(&self) -> bool {
        self.stopped_early.as_deref() == Some("cancelled")
    }

    /// A console table: per job JCT and TTA, then averages.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "policy {}  ({:.0} s wall{}{})",
            self.policy,
            self.wall_s,
            if self.clock == Clock::Virtual {
                "; times below are virtual hours"
            } else {
                ""
            },
            self.stopped_early
                .as_deref()
                .map(|r| format!(", stopped: {r}"))
                .unwrap_or_default()
        );
        // The name column fits the longest job name.
        let w = self
            .jobs
            .iter()
            .map(|j| j.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(20);
        if !self.evaluated() {
            // A schedule-only run: what it has, no empty accuracy columns.
            s.push_str(&self.schedule_table(w));
            return s;
        }
        let (per, unit) = self.clock.unit();
        let mut head = format!(
            "{:<w$} {:>8} {:>7} {:>9} {:>7}",
            "job",
            format!("JCT {unit}"),
            "rounds",
            "final acc",
            "last 3"
        );
        for (a, _, _) in &self.avg_tta_s {
            let _ = write!(head, " {:>10}", format!("TTA {:.0}%", a * 100.0));
        }
        let _ = writeln!(s, "{head}");
        let f = |v: Option<f64>| v.map_or("-".to_string(), |x| in_unit(x, per));
        for j in &self.jobs {
            let pct = |a: Option<f64>| a.map_or("-".into(), |a| format!("{:.1}%", a * 100.0));
            let mut line = format!(
                "{:<w$} {:>8} {:>7} {:>9} {:>7}",
                j.name,
                f(j.jct_s),
                j.rounds,
                pct(j.final_accuracy),
                pct(tail_accuracy(j)),
            );
            for (a, _, _) in &self.avg_tta_s {
                let _ = write!(line, " {:>10}", f(j.time_to_accuracy(*a, self.tta_rule)));
            }
            let _ = writeln!(s, "{line}");
        }
        let mut line = format!(
            "{:<w$} {:>8} {:>7} {:>9} {:>7}",
            "average",
            f(self.avg_jct_s),
            "",
            "",
            ""
        );
        for (_, t, n) in &self.avg_tta_s {
            let _ = write!(line, " {:>10}", format!("{} ({n})", f(*t)));
        }
        let _ = writeln!(s, "{line}");
        if !self.avg_tta_s.is_empty() {
            let _ = writeln!(
                s,
                "TTA X%: {} from arrival to the first of {} evaluation(s) in a row at or \
                 above X; the average is over the jobs that reached it (their count in \
                 brackets); - : not reached",
                if per == 1.0 { "seconds" } else { "hours" },
                self.tta_rule.consecutive
            );
        }
        s
    }

    /// The table of a run without evaluations (`venn-lab sim --schedule-only`): per job its
    /// JCT, rounds, aborted attempts, the summed scheduling delay and response collection
    /// of its rounds' successful attempts, and the rest of the JCT (attempts aborted and
    /// retried), in the clock's unit ([`Clock::unit`]).
    fn schedule_table(&self, w: usize) -> String {
        let (per, unit) = self.clock.unit();
        let mut s = format!(
            "{:<w$} {:>9} {:>7} {:>8} {:>12} {:>12} {:>11}\n",
            "job",
            format!("JCT {unit}"),
            "rounds",
            "aborted",
            format!("sched delay {unit}"),
            format!("collection {unit}"),
            format!("aborted {unit}"),
        );
        let f = |v: Option<f64>| v.map_or("-".to_string(), |x| in_unit(x, per));
        for j in &self.jobs {
            let aborted: u32 = j.history.iter().map(|r| r.attempts.saturating_sub(1)).sum();
            let (sd, rc, rest) = j.jct_split();
            let _ = writeln!(
                s,
                "{:<w$} {:>9} {:>7} {:>8} {:>12} {:>12} {:>11}",
                j.name,
                f(j.jct_s),
                j.rounds,
                aborted,
                f(Some(sd)),
                f(Some(rc)),
                f(rest),
            );
        }
        let _ = writeln!(s, "{:<w$} {:>9}", "average", f(self.avg_jct_s));
        s.push_str(
            "sched delay: from a round's request until it had its devices (all it asked for, or \
             the last one whose result it used); collection: from then to its close; both over \
             the successful attempts. aborted: the rest of the JCT, in attempts that were \
             aborted and retried\n",
        );
        s
    }

    /// Bars of what each job's JCT is made of ([`JobOutcome::jct_split`]) in the clock's
    /// unit, labelled with the job (and the policy, with `policy`).
    pub(crate) fn schedule_bars(&self, policy: bool) -> Vec<Bar> {
        let per = self.clock.unit().0;
        self.jobs
            .iter()
            .map(|j| {
                let (sd, rc, ab) = j.jct_split();
                Bar {
                    label: if policy {
                        format!("{} · {}", j.name, self.policy)
                    } else {
                        j.name.clone()
                    },
                    segments: vec![sd / per, rc / per, ab.unwrap_or(0.0) / per],
                }
            })
            .collect()
    }

    /// Whether any job of the run was evaluated.
    pub(crate) fn evaluated(&self) -> bool {
        self.jobs
            .iter()
            .any(|j| j.history.iter().any(|r| r.accuracy.is_finite()))
    }

    /// Writes `summary.json`, `tta.csv` and `accuracy.png` (`schedule.png` for a run
    /// without evaluations) into `out`.
    pub fn write(&self, out: &Path) -> std::io::Result<()> {
        std::fs::write(
            out.join("summary.json"),
            serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?,
        )?;
        let mut tta = String::from("job,jct_s,rounds,final_accuracy,tail_accuracy");
        for (a, _, _) in &self.avg_tta_s {
            let _ = write!(tta, ",tta_{:.0}_s", a * 100.0);
        }
        tta.push('\n');
        let f = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.3}"));
        for j in &self.jobs {
            let _ = write!(
                tta,
                "{},{},{},{},{}",
                j.name,
                f(j.jct_s),
                j.rounds,
                f(j.final_accuracy),
                f(tail_accuracy(j))
            );
            for (a, _, _) in &self.avg_tta_s {
                let _ = write!(tta, ",{}", f(j.time_to_accuracy(*a, self.tta_rule)));
            }
            tta.push('\n');
        }
        std::fs::write(out.join("tta.csv"), tta)?;
        if !self.evaluated() {
            let unit = self.clock.unit().1;
            return stacked_bars_png(
                &out.join("schedule.png"),
                &format!("{} — {}: what each JCT is made of", self.name, self.policy),
                &format!("time ({unit})"),
                &SPLIT_NAMES,
                &self.schedule_bars(false),
            )
            .map_err(std::io::Error::other);
        }
        let (unit, axis) = self.clock.axis();
        let series: Vec<Series> = self
            .jobs
            .iter()
            .map(|j| accuracy_series(&j.name, &j.history, unit))
            .collect();
        accuracy_png_with(
            &out.join("accuracy.png"),
            &format!("{} — {}", self.name, self.policy),
            axis,
            &series,
        )
        .map_err(std::io::Error::other)
    }
}

/// A job's accuracy curve (x in `unit` seconds, y in %) with its rows' 95 % Wilson band.
pub(crate) fn accuracy_series(name: &str, rows: &[RoundRow], unit: f64) -> Series {
    Series::new(
        name,
        rows.iter()
            .map(|r| (r.time_s / unit, r.accuracy * 100.0))
            .collect(),
    )
    .with_band(
        rows.iter()
            .map(|r| {
                (
                    r.time_s / unit,
                    r.accuracy_lo * 100.0,
                    r.accuracy_hi * 100.0,
                )
            })
            .collect(),
    )
}

/// Rounds averaged for the steadier end-of-run accuracy.
pub const TAIL_ROUNDS: usize = 3;

/// Mean accuracy over a job's last [`TAIL_ROUNDS`] rounds (fewer if it ran fewer).
pub fn tail_accuracy(j: &JobOutcome) -> Option<f64> {
    let tail: Vec<f64> = j
        .history
        .iter()
        .rev()
        .take(TAIL_ROUNDS)
        .map(|r| r.accuracy)
        .filter(|a| a.is_finite())
        .collect();
    (!tail.is_empty()).then(|| tail.iter().sum::<f64>() / tail.len() as f64)
}

/// Whether any job of `results` has an accuracy. A schedule-only run has none, and the
/// tables and plots over it leave accuracy out instead of showing columns of dashes.
pub fn any_accuracy<'a>(results: impl IntoIterator<Item = &'a LabResult>) -> bool {
    results
        .into_iter()
        .any(|r| r.jobs.iter().any(|j| j.final_accuracy.is_some()))
}

/// The accuracy thresholds `base` measured time-to-accuracy at, or none when `trained`
/// is false (nothing reached any: a schedule-only table leaves those columns out).
pub(crate) fn shown_thresholds(base: &LabResult, trained: bool) -> Vec<f64> {
    if !trained {
        return Vec::new();
    }
    base.avg_tta_s.iter().map(|(a, _, _)| *a).collect()
}

/// `base`'s and `other`'s mean of `f` over the jobs where both have a value, and how many.
pub(crate) fn paired(
    base: &LabResult,
    other: &LabResult,
    f: impl Fn(&JobOutcome) -> Option<f64>,
) -> Option<(f64, f64, usize)> {
    let (mut b, mut o, mut n) = (0.0, 0.0, 0usize);
    for jb in &base.jobs {
        let Some(jo) = other.jobs.iter().find(|j| j.name == jb.name) else {
            continue;
        };
        if let (Some(x), Some(y)) = (f(jb), f(jo)) {
            b += x;
            o += y;
            n += 1;
        }
    }
    (n > 0).then(|| (b / n as f64, o / n as f64, n))
}

/// A finished job `name` arriving at 0, evaluated at `times` (on 2,000 samples) with
/// `accs`, ending at the last time: the tests' building block for results.
/// What the virtual-clock run adds to a [`LabResult`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct VirtualStats {
    /// Training threads.
    pub threads: usize,
    /// Virtual hours from the start to the last event.
    pub virtual_h: f64,
    /// Wall seconds the engine took (scheduling only; training overlaps it).
    pub engine_wall_s: f64,
    /// Results that reached an open round.
    pub results: u64,
    /// Results that arrived after their round closed.
    pub stragglers: u64,
    /// Tasks lost because the device went offline first.
    pub tasks_failed: u64,
    /// Round attempts that succeeded.
    pub rounds_succeeded: u64,
    /// Aborted round attempts.
    pub rounds_aborted: u64,
    /// Samples trained, over all jobs (participants' local data).
    pub samples_trained: u64,
    /// Samples trained per wall second of the whole run.
    pub samples_per_s: f64,
    /// Thread-seconds in local training.
    pub train_thread_s: f64,
    /// Thread-seconds in evaluation.
    pub eval_thread_s: f64,
    /// Peak resident memory of the process, MiB (Linux; `None` elsewhere).
    pub peak_rss_mib: Option<f64>,
    /// Training per job, to hold against `fl-job bench` for the same model.
    pub jobs: Vec<JobTrainStats>,
}

/// One job's training in a virtual-clock run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct JobTrainStats {
    /// Job name.
    pub name: String,
    /// Task and its parameters (model and width).
    pub task: String,
    /// Local trainings.
    pub trainings: u64,
    /// Samples trained.
    pub samples: u64,
    /// Thread-seconds spent training them.
    pub train_thread_s: f64,
    /// `samples / train_thread_s`: one thread's training speed, as `fl-job bench` measures
    /// it with one rayon thread.
    pub samples_per_thread_s: f64,
}

/// Where job `name` appends its rounds in results folder `out`.
pub(crate) fn job_csv(out: &Path, name: &str) -> std::path::PathBuf {
    out.join("jobs").join(format!("{}.csv", safe_name(name)))
}

/// `name` with every character but ASCII letters, digits, `-` and `_` replaced by `_`.
pub(crate) fn safe_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) fn finished_job(name: &str, times: &[f64], accs: &[f64]) -> JobOutcome {
    let history: Vec<RoundRow> = times
        .iter()
        .zip(accs)
        .enumerate()
        .map(|(k, (&t, &a))| RoundRow {
            accuracy: a,
            eval_samples: 2000,
            ..RoundRow::unevaluated(t, k as u32, 1)
        })
        .collect();
    JobOutcome {
        name: name.into(),
        arrival_s: 0.0,
        finished: true,
        jct_s: times.last().copied(),
        rounds: history.len(),
        final_accuracy: accs.last().copied(),
        history,
        error: None,
    }
}
