//! One experiment under several policies and several seeds (`--seeds N`): what a policy
//! gains over the baseline as a mean with a 95 % interval over seeds, not one seed's
//! figure.
//!
//! Per seed, a policy's speed-up over the baseline (the first policy) is the ratio of the
//! two mean times over the jobs that both finished (JCT) or both reached a threshold
//! (TTA, by the run's [`venn_core::stats::TtaRule`]), as in [`crate::compare`]. Over the
//! seeds these ratios get a mean and a Student-t interval
//! ([`venn_core::stats::mean_interval`]); a speed-up whose interval holds 1.0 is reported
//! as within noise. The seeds change everything random (device availability, dispatch,
//! initial weights, local shuffles: [`crate::LabConfig::replicate`]) but not the
//! evaluation sets, so every accuracy is measured on the same samples.
//!
//! Writes `summary.json` ([`SeedSummary`]), `compare.txt` (the table), `compare-seeds.csv`
//! (one row per seed and policy) and `compare-seeds.png` (per job, each policy's accuracy
//! curve averaged over seeds with its 95 % band).

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use venn_core::stats::{Interval, TtaRule, mean_interval};
use venn_plot::accuracy::{IntervalColumn, Panel, Series, accuracy_grid_png, estimates_png};

use crate::results::{JobOutcome, LabResult};
use crate::results::{paired, tail_accuracy};

/// A figure over seeds: its per-seed values, mean and 95 % interval.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Estimate {
    /// The value per seed (`None`: undefined for that seed, e.g. no job reached).
    pub per_seed: Vec<Option<f64>>,
    /// Seeds with a value.
    pub n: usize,
    /// Mean over those seeds.
    pub mean: Option<f64>,
    /// Lower end of the 95 % Student-t interval (the mean itself with one seed).
    pub lo: Option<f64>,
    /// Upper end.
    pub hi: Option<f64>,
}

impl Estimate {
    fn new(per_seed: Vec<Option<f64>>) -> Self {
        let xs: Vec<f64> = per_seed.iter().flatten().copied().collect();
        let i: Option<Interval> = mean_interval(&xs);
        Estimate {
            n: xs.len(),
            mean: i.map(|i| i.estimate),
            lo: i.map(|i| i.lo),
            hi: i.map(|i| i.hi),
            per_seed,
        }
    }

    /// "1.62x [1.41, 1.83]" for a ratio; `-` when undefined.
    fn ratio_text(&self) -> String {
        match (self.mean, self.lo, self.hi) {
            (Some(m), Some(lo), Some(hi)) if self.n > 1 => {
                format!("{m:.2}x [{lo:.2}, {hi:.2}]")
            }
            (Some(m), _, _) => format!("{m:.2}x"),
            _ => "-".into(),
        }
    }

    /// "3.21 [3.02, 3.40]" of the value divided by `unit`.
    fn value_text(&self, unit: f64, digits: usize) -> String {
        match (self.mean, self.lo, self.hi) {
            (Some(m), Some(lo), Some(hi)) if self.n > 1 => format!(
                "{:.digits$} [{:.digits$}, {:.digits$}]",
                m / unit,
                lo / unit,
                hi / unit
            ),
            (Some(m), _, _) => format!("{:.digits$}", m / unit),
            _ => "-".into(),
        }
    }

    /// How a speed-up reads against no change: with fewer than two seeds there is no
    /// interval; otherwise faster/slower when the interval excludes 1.0.
    pub fn verdict(&self) -> &'static str {
        match (self.lo, self.hi) {
            _ if self.n == 0 => "no data",
            _ if self.n < 2 => "one seed: no interval",
            (Some(lo), _) if lo > 1.0 => "faster",
            (_, Some(hi)) if hi < 1.0 => "slower",
            _ => "within noise",
        }
    }
}

/// One policy over the seeds.
#[derive(Debug, Clone, Serialize)]
pub struct PolicySeeds {
    /// Policy name.
    pub policy: String,
    /// Average JCT over the jobs that finished, seconds on the run's clock.
    pub avg_jct_s: Estimate,
    /// Baseline's paired mean JCT over this policy's.
    pub jct_speedup: Estimate,
    /// Per threshold (same order as [`SeedSummary::thresholds`]): average TTA, seconds.
    pub avg_tta_s: Vec<Estimate>,
    /// Per threshold: the baseline's paired mean TTA over this policy's.
    pub tta_speedup: Vec<Estimate>,
    /// Per threshold: jobs that reached it.
    pub jobs_reached: Vec<Estimate>,
    /// Mean over jobs of each job's mean accuracy over its last evaluations.
    pub tail_accuracy: Estimate,
    /// Jobs that finished.
    pub jobs_finished: Estimate,
}

/// The multi-seed comparison (`summary.json` of a `--seeds` run).
#[derive(Debug, Clone, Serialize)]
pub struct SeedSummary {
    /// Experiment name.
    pub name: String,
    /// Seeds run (replicates `0..seeds`).
    pub seeds: usize,
    /// The baseline policy (speed-ups are over it).
    pub baseline: String,
    /// Accuracy thresholds of the TTA figures.
    pub thresholds: Vec<f64>,
    /// How a job reaches a threshold.
    pub tta_rule: TtaRule,
    /// Evaluation samples per accuracy (the first job's; every job of the runs is listed
    /// in the per-run `summary.json`s).
    pub eval_samples: Option<u32>,
    /// Per policy, in the order run.
    pub policies: Vec<PolicySeeds>,
    /// The wall seconds each seed took for all policies.
    pub wall_s: Vec<f64>,
}

/// Summarises `runs[seed][policy]` (every seed ran the same policies in the same order;
/// the first policy is the baseline).
pub fn summarize<R: AsRef<[LabResult]>>(runs: &[R]) -> SeedSummary {
    let first = runs.first().and_then(|r| r.as_ref().first());
    let thresholds: Vec<f64> = first
        .map(|r| r.avg_tta_s.iter().map(|(a, _, _)| *a).collect())
        .unwrap_or_default();
    let rule = first.map(|r| r.tta_rule).unwrap_or_default();
    let policies = first.map_or(0, |_| runs[0].as_ref().len());
    let mut out = Vec::with_capacity(policies);
    for p in 0..policies {
        let pairs: Vec<Option<(&LabResult, &LabResult)>> = runs
            .iter()
            .map(|seed| {
                let seed = seed.as_ref();
                Some((seed.first()?, seed.get(p)?))
            })
            .collect();
        let per = |f: &dyn Fn(&LabResult, &LabResult) -> Option<f64>| {
            Estimate::new(
                pairs
                    .iter()
                    .map(|x| x.as_ref().and_then(|(b, r)| f(b, r)))
                    .collect(),
            )
        };
        let ratio = |p: Option<(f64, f64, usize)>| match p {
            Some((b, o, _)) if o > 0.0 => Some(b / o),
            _ => None,
        };
        let tail = |r: &LabResult| {
            let v: Vec<f64> = r.jobs.iter().filter_map(tail_accuracy).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        out.push(PolicySeeds {
            policy: pairs
                .iter()
                .flatten()
                .map(|(_, r)| r.policy.clone())
                .next()
                .unwrap_or_default(),
            avg_jct_s: per(&|_, r| r.avg_jct_s),
            jct_speedup: per(&|b, r| ratio(paired(b, r, |j| j.jct_s))),
            avg_tta_s: (0..thresholds.len())
                .map(|i| per(&|_, r| r.avg_tta_s.get(i).and_then(|t| t.1)))
                .collect(),
            tta_speedup: thresholds
                .iter()
                .map(|&a| {
                    per(&|b, r| {
                        ratio(paired(b, r, |j: &JobOutcome| {
                            j.time_to_accuracy(a, b.tta_rule)
                        }))
                    })
                })
                .collect(),
            jobs_reached: (0..thresholds.len())
                .map(|i| per(&|_, r| r.avg_tta_s.get(i).map(|t| t.2 as f64)))
                .collect(),
            tail_accuracy: per(&|_, r| tail(r)),
            jobs_finished: per(&|_, r| Some(r.jobs_finished as f64)),
        });
    }
    SeedSummary {
        name: first.map(|r| r.name.clone()).unwrap_or_default(),
        seeds: runs.len(),
        baseline: first.map(|r| r.policy.clone()).unwrap_or_default(),
        thresholds,
        tta_rule: rule,
        eval_samples: first
            .and_then(|r| r.jobs.iter().flat_map(|j| &j.history).next())
            .map(|row| row.eval_samples)
            .filter(|n| *n > 0),
        policies: out,
        wall_s: runs
            .iter()
            .map(|seed| seed.as_ref().iter().map(|r| r.wall_s).sum())
            .collect(),
    }
}

impl SeedSummary {
    /// The table of `compare.txt`.
    pub fn table(&self, clock_unit: (f64, &str)) -> String {
        let (u, uname) = clock_unit;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {} seed{}, baseline {}; mean [95% interval] over seeds (Student t)",
            self.name,
            self.seeds,
            if self.seeds == 1 { "" } else { "s" },
            self.baseline
        );
        // A schedule-only summary has no accuracies: JCTs only, no columns of dashes.
        let trained = self.policies.iter().any(|p| p.tail_accuracy.n > 0);
        if trained {
            let _ = writeln!(
                s,
                "TTA: a job reaches a threshold at the first of {} evaluations in a row at or above it{}",
                self.tta_rule.consecutive,
                self.eval_samples
                    .map(|n| format!("; each accuracy measured on {n} held-out samples"))
                    .unwrap_or_default()
            );
        } else {
            let _ = writeln!(s, "schedule only: nothing was trained, so JCTs only");
        }
        let pw = self
            .policies
            .iter()
            .map(|p| p.policy.chars().count())
            .max()
            .unwrap_or(0)
            .max(8);
        let _ = writeln!(s);
        let tail = |t: String| {
            if trained {
                format!(" {t:>24}")
            } else {
                String::new()
            }
        };
        let _ = writeln!(
            s,
            "{:<pw$} {:>24} {:>22} {:>8}{}",
            "policy",
            format!("avg JCT {uname}"),
            "JCT speed-up",
            "finished",
            tail("last-3 accuracy %".into())
        );
        for p in &self.policies {
            let _ = writeln!(
                s,
                "{:<pw$} {:>24} {:>22} {:>8}{}",
                p.policy,
                p.avg_jct_s.value_text(u, 2),
                p.jct_speedup.ratio_text(),
                p.jobs_finished.value_text(1.0, 1),
                tail(p.tail_accuracy.value_text(0.01, 1)),
            );
        }
        for (i, a) in self.thresholds.iter().enumerate().filter(|_| trained) {
            let _ = writeln!(s, "\ntime to {:.0}% accuracy", a * 100.0);
            let _ = writeln!(
                s,
                "{:<pw$} {:>24} {:>22} {:>12}",
                "policy",
                format!("avg TTA {uname}"),
                "TTA speed-up",
                "jobs reached"
            );
            for p in &self.policies {
                let _ = writeln!(
                    s,
                    "{:<pw$} {:>24} {:>22} {:>12}",
                    p.policy,
                    p.avg_tta_s[i].value_text(u, 2),
                    p.tta_speedup[i].ratio_text(),
                    p.jobs_reached[i].value_text(1.0, 1),
                );
            }
        }
        let _ = writeln!(s, "\nverdicts (speed-up over {}):", self.baseline);
        for p in self.policies.iter().skip(1) {
            let mut line = format!("  {:<pw$} JCT: {}", p.policy, p.jct_speedup.verdict());
            for (i, a) in self.thresholds.iter().enumerate().filter(|_| trained) {
                let _ = write!(
                    line,
                    "; TTA {:.0}%: {}",
                    a * 100.0,
                    p.tta_speedup[i].verdict()
                );
            }
            let _ = writeln!(s, "{line}");
        }
        s
    }
}

/// Step-function value of a job's accuracy at `t`: the last evaluated accuracy at or
/// before `t` (a job holds its model after it ends), `None` before its first evaluation.
fn accuracy_at(j: &JobOutcome, t: f64) -> Option<f64> {
    j.history
        .iter()
        .take_while(|r| r.time_s <= t)
        .filter(|r| r.accuracy.is_finite())
        .last()
        .map(|r| r.accuracy)
}

/// Per job, each policy's accuracy averaged over seeds on a time grid, with the 95 %
/// band over seeds (where at least two seeds have a value). A point needs every seed
/// that ran the job to have evaluated it by then: a mean over only the seeds that had
/// started would drop when a late seed's first, untrained evaluation joined it.
fn mean_curves<R: AsRef<[LabResult]>>(runs: &[R], unit: f64) -> Vec<Panel> {
    const GRID: usize = 120;
    let Some(base) = runs.first().and_then(|r| r.as_ref().first()) else {
        return Vec::new();
    };
    let policies = runs[0].as_ref().len();
    base.jobs
        .iter()
        .map(|job| {
            let outcomes = |p: usize| {
                runs.iter().filter_map(move |seed| {
                    seed.as_ref()
                        .get(p)?
                        .jobs
                        .iter()
                        .find(|j| j.name == job.name)
                })
            };
            let t_max = (0..policies)
                .flat_map(outcomes)
                .flat_map(|j| j.history.iter().map(|r| r.time_s))
                .filter(|t| t.is_finite())
                .fold(0.0f64, f64::max);
            let series = (0..policies)
                .map(|p| {
                    let seeds_with_job = outcomes(p).count();
                    let mut points = Vec::new();
                    let mut band = Vec::new();
                    for k in 0..=GRID {
                        let t = t_max * k as f64 / GRID as f64;
                        let v: Vec<f64> = outcomes(p).filter_map(|j| accuracy_at(j, t)).collect();
                        let every_seed = v.len() == seeds_with_job;
                        let Some(i) = mean_interval(&v).filter(|_| every_seed) else {
                            band.push((t / unit, f64::NAN, f64::NAN));
                            continue;
                        };
                        points.push((t / unit, i.estimate * 100.0));
                        let (lo, hi) = if v.len() > 1 {
                            (i.lo.max(0.0) * 100.0, i.hi.min(1.0) * 100.0)
                        } else {
                            (f64::NAN, f64::NAN)
                        };
                        band.push((t / unit, lo, hi));
                    }
                    Series::new(runs[0].as_ref()[p].policy.clone(), points).with_band(band)
                })
                .collect();
            Panel {
                title: job.name.clone(),
                series,
            }
        })
        .collect()
}

/// Writes `summary.json`, `compare.txt`, `compare-seeds.csv` and `compare-seeds.png` for
/// `runs[seed][policy]` into `out`; returns the table.
pub fn write_seeds<R: AsRef<[LabResult]>>(out: &Path, runs: &[R]) -> std::io::Result<String> {
    let seeds: Vec<u64> = (0..runs.len() as u64).collect();
    write_seeds_numbered(out, runs, &seeds)
}

/// [`write_seeds`] where `runs[i]` is seed (replicate) `seeds[i]`, as `compare-seeds.csv`
/// numbers it: the seeds summarised need not be `0..n` when one was left out.
pub fn write_seeds_numbered<R: AsRef<[LabResult]>>(
    out: &Path,
    runs: &[R],
    seeds: &[u64],
) -> std::io::Result<String> {
    assert_eq!(runs.len(), seeds.len(), "one seed number per seed's runs");
    std::fs::create_dir_all(out)?;
    let summary = summarize(runs);
    let clock = runs
        .first()
        .and_then(|r| r.as_ref().first())
        .map(|r| r.clock)
        .unwrap_or_default();
    let (secs, axis) = clock.axis();
    let unit = clock.unit();
    let mut text = summary.table(unit);
    if let Some(per_model) = crate::by_model::over_seeds_table(runs) {
        text.push('\n');
        text.push_str(&per_model);
    }
    std::fs::write(out.join("compare.txt"), &text)?;
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_vec_pretty(&summary).map_err(std::io::Error::other)?,
    )?;
    let mut csv = String::from("seed,policy,avg_jct_s,jct_speedup,jobs_finished,tail_accuracy");
    for a in &summary.thresholds {
        let _ = write!(
            csv,
            ",avg_tta_{0:.0}_s,tta_{0:.0}_speedup,reached_{0:.0}",
            a * 100.0
        );
    }
    csv.push('\n');
    let f = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.4}"));
    for (k, seed) in seeds.iter().enumerate() {
        for p in &summary.policies {
            let _ = write!(
                csv,
                "{seed},{},{},{},{},{}",
                p.policy,
                f(p.avg_jct_s.per_seed[k]),
                f(p.jct_speedup.per_seed[k]),
                f(p.jobs_finished.per_seed[k]),
                f(p.tail_accuracy.per_seed[k]),
            );
            for i in 0..summary.thresholds.len() {
                let _ = write!(
                    csv,
                    ",{},{},{}",
                    f(p.avg_tta_s[i].per_seed[k]),
                    f(p.tta_speedup[i].per_seed[k]),
                    f(p.jobs_reached[i].per_seed[k]),
                );
            }
            csv.push('\n');
        }
    }
    std::fs::write(out.join("compare-seeds.csv"), csv)?;
    let panels = mean_curves(runs, secs);
    let trained = crate::results::any_accuracy(runs.iter().flat_map(|r| r.as_ref()));
    if trained && !panels.is_empty() {
        accuracy_grid_png(&out.join("compare-seeds.png"), axis, 4, &panels)
            .map_err(std::io::Error::other)?;
    }
    jct_png(&out.join("jct-seeds.png"), &summary, unit, seeds.len())?;
    Ok(text)
}

/// `jct-seeds.png`: each policy's average JCT, mean over seeds with its 95 % interval and
/// each seed's value — the schedule's headline, drawn also when nothing was trained.
fn jct_png(
    path: &Path,
    summary: &SeedSummary,
    (secs, unit): (f64, &str),
    seeds: usize,
) -> std::io::Result<()> {
    let columns: Vec<IntervalColumn> = summary
        .policies
        .iter()
        .filter_map(|p| {
            let e = &p.avg_jct_s;
            Some(IntervalColumn {
                label: p.policy.clone(),
                mean: e.mean? / secs,
                lo: e.lo? / secs,
                hi: e.hi? / secs,
                values: e.per_seed.iter().flatten().map(|v| v / secs).collect(),
            })
        })
        .collect();
    let title = format!("average JCT over {seeds} seed(s): mean, 95 % interval, each seed");
    estimates_png(path, &title, &format!("average JCT ({unit})"), &columns)
        .map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LabConfig;
    use device_agent::agent::AgentStats;

    const TOML: &str = r#"
name = "seeds"
tta_thresholds = [0.5]
tta_consecutive = 2
[devices]
count = 4
[[jobs]]
name = "a"
task = "resnet18-femnist"
rounds = 3
target_participants = 1
deadline_s = 60
"#;

    /// A result where job `a` arrives at 0, is evaluated at `times` with `accs`, and
    /// finishes at the last time.
    fn result(policy: &str, times: &[f64], accs: &[f64]) -> LabResult {
        let cfg = LabConfig::parse(TOML, Path::new("seeds.toml")).unwrap();
        let job = crate::results::finished_job("a", times, accs);
        LabResult::new(&cfg, policy, vec![job], AgentStats::default(), 1.0, None)
    }

    #[test]
    fn speedups_get_intervals_over_seeds() {
        // Venn is 2.0, 2.2 and 1.8 times as fast as random on three seeds.
        let runs = |ratios: [f64; 3]| -> Vec<Vec<LabResult>> {
            ratios
                .iter()
                .zip([20.0, 25.0, 15.0])
                .map(|(&ratio, base)| {
                    let fast = base / ratio;
                    vec![
                        result("random", &[base / 2.0, base * 0.75, base], &[0.4, 0.6, 0.7]),
                        result("venn", &[fast / 2.0, fast * 0.75, fast], &[0.4, 0.6, 0.7]),
                    ]
                })
                .collect()
        };
        let s = summarize(&runs([2.0, 2.2, 1.8]));
        assert_eq!(s.seeds, 3);
        assert_eq!(s.baseline, "random");
        assert_eq!(s.tta_rule, TtaRule::new(2));
        assert_eq!(s.eval_samples, Some(2000));
        let venn = &s.policies[1];
        let jct = &venn.jct_speedup;
        assert_eq!(jct.n, 3);
        assert!((jct.mean.unwrap() - 2.0).abs() < 1e-9);
        // s = 0.2, n = 3: half width 4.303 · 0.2 / √3.
        let half = 4.303 * 0.2 / 3f64.sqrt();
        assert!((jct.lo.unwrap() - (2.0 - half)).abs() < 1e-9, "{jct:?}");
        assert_eq!(jct.verdict(), "faster");
        // TTA 50%: reached at the second evaluation (0.6, then 0.7 holds it), scaled alike.
        assert!((venn.tta_speedup[0].mean.unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(s.policies[0].jct_speedup.verdict(), "within noise");
        let text = s.table((1.0, "s"));
        assert!(text.contains("2.00x ["), "{text}");
        assert!(text.contains("first of 2 evaluations in a row"), "{text}");
        // Twice as fast on average, but 2.5 and 1.5 on two of the seeds: three seeds
        // cannot tell that from no gain.
        let wide = summarize(&runs([2.0, 2.5, 1.5]));
        assert!((wide.policies[1].jct_speedup.mean.unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(wide.policies[1].jct_speedup.verdict(), "within noise");
        let runs = runs([2.0, 2.2, 1.8]);

        let dir = std::env::temp_dir().join(format!("venn-seeds-{}", std::process::id()));
        write_seeds(&dir, &runs).unwrap();
        for f in [
            "summary.json",
            "compare.txt",
            "compare-seeds.csv",
            "compare-seeds.png",
            "jct-seeds.png",
        ] {
            assert!(dir.join(f).is_file(), "{f}");
        }
        let csv = std::fs::read_to_string(dir.join("compare-seeds.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + 3 * 2);
        std::fs::remove_dir_all(&dir).unwrap();

        // Schedule-only seeds (no accuracies): the JCT plot, no empty accuracy panels.
        let mut untrained = runs.clone();
        for r in untrained.iter_mut().flatten() {
            for j in &mut r.jobs {
                j.final_accuracy = None;
                j.history.iter_mut().for_each(|row| row.accuracy = f64::NAN);
            }
        }
        write_seeds(&dir, &untrained).unwrap();
        assert!(dir.join("jct-seeds.png").is_file());
        assert!(!dir.join("compare-seeds.png").exists());
        let text = std::fs::read_to_string(dir.join("compare.txt")).unwrap();
        assert!(
            text.contains("JCT speed-up") && text.contains("schedule only"),
            "{text}"
        );
        for absent in ["TTA", "last-3", "accuracy %"] {
            assert!(!text.contains(absent), "{absent}: {text}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn mean_curves_start_when_every_seed_has_a_value() {
        // Seed 1 evaluates job `a` first at t = 10, seed 2 only at t = 50 (and low).
        let runs = vec![
            vec![result("random", &[10.0, 60.0, 100.0], &[0.6, 0.62, 0.64])],
            vec![result("random", &[50.0, 80.0, 100.0], &[0.1, 0.5, 0.6])],
        ];
        let panels = mean_curves(&runs, 1.0);
        let points = &panels[0].series[0].points;
        // Nothing before t = 50, then the mean of both seeds: no early point at 60 %
        // followed by a drop to 35 %.
        assert!(points.iter().all(|&(t, _)| t >= 50.0), "{points:?}");
        let at = |t: f64| points.iter().find(|p| p.0 >= t).unwrap().1;
        assert!((at(50.0) - 35.0).abs() < 1e-9, "{points:?}");
        assert!((at(100.0) - 62.0).abs() < 1e-9, "{points:?}");
    }

    #[test]
    fn a_lucky_round_does_not_reach_a_threshold() {
        let r = result("random", &[1.0, 2.0, 3.0], &[0.6, 0.3, 0.4]);
        assert_eq!(r.avg_tta_s[0], (0.5, None, 0));
        let curve = |t| accuracy_at(&r.jobs[0], t);
        assert_eq!(
            (curve(0.5), curve(2.5), curve(9.0)),
            (None, Some(0.3), Some(0.4))
        );
    }
}
