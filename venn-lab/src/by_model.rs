//! A comparison per model: the paper's Fig. 9 question for each model an experiment trains
//! (ResNet-18 and MobileNet-V2 in `fig9.toml`) — does any policy change the model's final
//! accuracy, and how soon do its jobs get there?
//!
//! Jobs are grouped by their task (`resnet18-femnist`, `mobilenet_v2-femnist`, or a custom
//! task's name), read from the run's training statistics (virtual-clock runs record each
//! job's task). Per model and policy: the model's jobs that finished, their mean JCT, their
//! mean final and last-3 accuracy with a 95 % Student-t interval over the jobs, and their
//! mean time to each accuracy threshold. Written as a table (appended to `compare.txt`),
//! `by-model.csv` and `by-model.png`: per model, each policy's accuracy averaged over the
//! model's jobs against the time since each job arrived (0 until a job's first evaluation:
//! the wait for devices shows), with its band over the jobs.

use std::fmt::Write as _;
use std::path::Path;

use venn_core::stats::mean_interval;
use venn_plot::accuracy::{Panel, Series, accuracy_grid_png};

use crate::results::{
    Clock, JobOutcome, LabResult, any_accuracy, paired, shown_thresholds, tail_accuracy,
};

/// The task (model) job `job` of `r` trained: the first word of its task label, if the run
/// recorded it.
pub fn model_of(r: &LabResult, job: &str) -> Option<String> {
    let sim = r.simulation.as_ref()?;
    let stats = sim.jobs.iter().find(|j| j.name == job)?;
    stats.task.split_whitespace().next().map(str::to_owned)
}

/// The models of `base`'s jobs in order of first appearance, each with its jobs' names;
/// empty when the run did not record its tasks.
fn groups(base: &LabResult) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for j in &base.jobs {
        let Some(model) = model_of(base, &j.name) else {
            return Vec::new();
        };
        match out.iter_mut().find(|(m, _)| *m == model) {
            Some((_, jobs)) => jobs.push(j.name.clone()),
            None => out.push((model, vec![j.name.clone()])),
        }
    }
    out
}

/// The outcomes in `r` of the jobs named in `names`.
fn outcomes<'a>(r: &'a LabResult, names: &'a [String]) -> impl Iterator<Item = &'a JobOutcome> {
    r.jobs.iter().filter(|j| names.contains(&j.name))
}

/// "61.2 [58.0, 64.4]" for fractions as percentages over `xs`; `-` when empty.
fn pct(xs: &[f64]) -> String {
    match mean_interval(xs) {
        Some(i) if xs.len() > 1 => format!(
            "{:.1} [{:.1}, {:.1}]",
            i.estimate * 100.0,
            i.lo * 100.0,
            i.hi * 100.0
        ),
        Some(i) => format!("{:.1}", i.estimate * 100.0),
        None => "-".into(),
    }
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// One policy's figures for one model.
struct Row {
    policy: String,
    jobs: usize,
    finished: usize,
    jct_s: Option<f64>,
    final_acc: Vec<f64>,
    tail_acc: Vec<f64>,
    /// Per threshold: mean time to it over the jobs that reached it, and how many did.
    tta: Vec<(Option<f64>, usize)>,
}

fn row(r: &LabResult, names: &[String], thresholds: &[f64]) -> Row {
    let js: Vec<&JobOutcome> = outcomes(r, names).collect();
    let jcts: Vec<f64> = js
        .iter()
        .filter(|j| j.finished)
        .filter_map(|j| j.jct_s)
        .collect();
    Row {
        policy: r.policy.clone(),
        jobs: js.len(),
        finished: jcts.len(),
        jct_s: mean(&jcts),
        final_acc: js.iter().filter_map(|j| j.final_accuracy).collect(),
        tail_acc: js.iter().filter_map(|j| tail_accuracy(j)).collect(),
        tta: thresholds
            .iter()
            .map(|&a| {
                let t: Vec<f64> = js
                    .iter()
                    .filter_map(|j| j.time_to_accuracy(a, r.tta_rule))
                    .collect();
                (mean(&t), t.len())
            })
            .collect(),
    }
}

/// The per-model table and CSV, or `None` when the runs did not record their tasks.
fn table_and_csv(results: &[LabResult]) -> Option<(String, String)> {
    let base = results.first()?;
    let groups = groups(base);
    if groups.is_empty() {
        return None;
    }
    // A schedule-only comparison has no accuracies: JCTs only.
    let trained = any_accuracy(results);
    let thresholds = shown_thresholds(base, trained);
    let (secs, u) = base.clock.unit();
    let mut text = if trained {
        format!(
            "per model: mean over its jobs, accuracy % with a 95 % interval over the jobs, \
             TTA in {u} since arrival (jobs that reached it)\n"
        )
    } else {
        format!("per model: mean JCT over its jobs, {u}\n")
    };
    let _ = write!(
        text,
        "{:<22} {:<8} {:>8} {:>9}",
        "model", "policy", "finished", "avg JCT"
    );
    if trained {
        let _ = write!(text, " {:>20} {:>20}", "final accuracy", "last-3 accuracy");
    }
    let mut csv = String::from("model,policy,jobs,finished,avg_jct_s,final_accuracy,tail_accuracy");
    for a in &thresholds {
        let _ = write!(text, " {:>13}", format!("TTA {:.0}%", a * 100.0));
        let _ = write!(csv, ",avg_tta_{0:.0}_s,reached_{0:.0}", a * 100.0);
    }
    text.push('\n');
    csv.push('\n');
    let f = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.3}"));
    for (model, names) in &groups {
        for r in results {
            let row = row(r, names, &thresholds);
            let jct = row.jct_s.map_or("-".into(), |s| format!("{:.2}", s / secs));
            let _ = write!(
                text,
                "{:<22} {:<8} {:>8} {:>9}",
                model,
                row.policy,
                format!("{}/{}", row.finished, row.jobs),
                jct,
            );
            if trained {
                let (fin, tail) = (pct(&row.final_acc), pct(&row.tail_acc));
                let _ = write!(text, " {fin:>20} {tail:>20}");
            }
            let _ = write!(
                csv,
                "{model},{},{},{},{},{},{}",
                row.policy,
                row.jobs,
                row.finished,
                f(row.jct_s),
                f(mean(&row.final_acc)),
                f(mean(&row.tail_acc))
            );
            for (t, n) in &row.tta {
                let shown = t.map_or("-".into(), |t| format!("{:.2} ({n})", t / secs));
                let _ = write!(text, " {shown:>13}");
                let _ = write!(csv, ",{},{n}", f(*t));
            }
            text.push('\n');
            csv.push('\n');
        }
    }
    Some((text, csv))
}

/// Step-function accuracy of `j` at `tau` seconds after its arrival: the last evaluation
/// at or before then; 0 before its first (the job has no trained model yet, and how long it
/// waits for one is what a policy changes).
fn accuracy_since_arrival(j: &JobOutcome, tau: f64) -> f64 {
    j.history
        .iter()
        .take_while(|r| r.time_s - j.arrival_s <= tau)
        .filter(|r| r.accuracy.is_finite())
        .last()
        .map_or(0.0, |r| r.accuracy)
}

/// Per model, each policy's accuracy averaged over the model's jobs against the time since
/// each job arrived (a job counts as 0 until its first evaluation).
fn panels(results: &[LabResult], unit: f64) -> Vec<Panel> {
    const GRID: usize = 120;
    let Some(base) = results.first() else {
        return Vec::new();
    };
    groups(base)
        .into_iter()
        .map(|(model, names)| {
            let tau_max = results
                .iter()
                .flat_map(|r| outcomes(r, &names))
                .flat_map(|j| j.history.iter().map(move |h| h.time_s - j.arrival_s))
                .filter(|t| t.is_finite())
                .fold(0.0f64, f64::max);
            let series = results
                .iter()
                .map(|r| {
                    let js: Vec<&JobOutcome> = outcomes(r, &names).collect();
                    let (mut points, mut band) = (Vec::new(), Vec::new());
                    for k in 0..=GRID {
                        let tau = tau_max * k as f64 / GRID as f64;
                        let v: Vec<f64> =
                            js.iter().map(|j| accuracy_since_arrival(j, tau)).collect();
                        match mean_interval(&v) {
                            Some(i) => {
                                points.push((tau / unit, i.estimate * 100.0));
                                band.push((
                                    tau / unit,
                                    i.lo.max(0.0) * 100.0,
                                    i.hi.min(1.0) * 100.0,
                                ));
                            }
                            None => band.push((tau / unit, f64::NAN, f64::NAN)),
                        }
                    }
                    Series::new(r.policy.clone(), points).with_band(band)
                })
                .collect();
            Panel {
                title: format!("{model} ({} jobs)", names.len()),
                series,
            }
        })
        .collect()
}

/// Writes `by-model.csv` and `by-model.png` into `out` and returns the per-model table, or
/// `None` (writing nothing) when the runs did not record which model each job trained.
pub fn write_by_model(out: &Path, results: &[LabResult]) -> std::io::Result<Option<String>> {
    let Some((text, csv)) = table_and_csv(results) else {
        return Ok(None);
    };
    std::fs::write(out.join("by-model.csv"), csv)?;
    let clock = results.first().map_or(Clock::Virtual, |r| r.clock);
    let (secs, axis) = clock.axis();
    let axis = axis.replace(" (", " since the job arrived (");
    let panels = panels(results, secs);
    // Accuracy against time: nothing to draw without accuracies.
    if any_accuracy(results) {
        accuracy_grid_png(&out.join("by-model.png"), &axis, 2, &panels)
            .map_err(std::io::Error::other)?;
    }
    Ok(Some(text))
}

/// "1.62x [1.41, 1.83]" (or "61.2 % [58.0, 64.4]" with `pct`) over seeds; `-` when no seed
/// has a value.
fn over_seeds(xs: &[f64], pct: bool) -> String {
    let (k, suffix) = if pct { (100.0, " %") } else { (1.0, "x") };
    match mean_interval(xs) {
        Some(i) if xs.len() > 1 => format!(
            "{:.2}{suffix} [{:.2}, {:.2}]",
            i.estimate * k,
            i.lo * k,
            i.hi * k
        ),
        Some(i) => format!("{:.2}{suffix}", i.estimate * k),
        None => "-".into(),
    }
}

/// Per model over seeds (`runs[seed][policy]`, the first policy the baseline): each
/// policy's speed-up over the baseline on the model's jobs (JCT and each TTA threshold, the
/// ratio of the mean times over the jobs both reached, as the whole-run figures) and the
/// model's last-3 accuracy, as a mean with a 95 % Student-t interval over seeds. `None` when
/// the runs did not record their tasks.
pub fn over_seeds_table<R: AsRef<[LabResult]>>(runs: &[R]) -> Option<String> {
    let base = runs.first()?.as_ref().first()?;
    let groups = groups(base);
    if groups.is_empty() {
        return None;
    }
    let trained = any_accuracy(runs.iter().flat_map(|r| r.as_ref()));
    let thresholds = shown_thresholds(base, trained);
    let mut text = format!(
        "per model over {} seeds: speed-up over {} on the model's jobs{}, mean [95 % \
         interval over seeds]\n",
        runs.len(),
        base.policy,
        if trained {
            " and their last-3 accuracy"
        } else {
            ""
        }
    );
    let _ = write!(
        text,
        "{:<22} {:<8} {:>22}",
        "model", "policy", "JCT speed-up"
    );
    for a in &thresholds {
        let _ = write!(text, " {:>22}", format!("TTA {:.0}% speed-up", a * 100.0));
    }
    if trained {
        let _ = write!(text, " {:>24}", "last-3 accuracy");
    }
    text.push('\n');
    for (model, names) in &groups {
        let mine = |j: &JobOutcome| names.contains(&j.name);
        for p in 0..runs[0].as_ref().len() {
            let policy = &runs[0].as_ref()[p].policy;
            let ratio = |f: &dyn Fn(&JobOutcome) -> Option<f64>| -> Vec<f64> {
                runs.iter()
                    .filter_map(|seed| {
                        let (b, o) = (seed.as_ref().first()?, seed.as_ref().get(p)?);
                        let (mb, mo, _) = paired(b, o, |j| f(j).filter(|_| mine(j)))?;
                        (mo > 0.0).then(|| mb / mo)
                    })
                    .collect()
            };
            let jct = ratio(&|j| j.jct_s.filter(|_| j.finished));
            let _ = write!(
                text,
                "{model:<22} {policy:<8} {:>22}",
                over_seeds(&jct, false)
            );
            for &a in &thresholds {
                let tta = ratio(&|j| j.time_to_accuracy(a, base.tta_rule));
                let _ = write!(text, " {:>22}", over_seeds(&tta, false));
            }
            let tail: Vec<f64> = runs
                .iter()
                .filter_map(|seed| {
                    let xs: Vec<f64> = seed
                        .as_ref()
                        .get(p)?
                        .jobs
                        .iter()
                        .filter(|j| mine(j))
                        .filter_map(tail_accuracy)
                        .collect();
                    mean(&xs)
                })
                .collect();
            if trained {
                let _ = write!(text, " {:>24}", over_seeds(&tail, true));
            }
            text.push('\n');
        }
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LabConfig;
    use crate::results::finished_job;
    use crate::sim::{JobTrainStats, VirtualStats};
    use device_agent::agent::AgentStats;

    const TOML: &str = r#"
name = "models"
tta_thresholds = [0.5]
tta_consecutive = 1
[devices]
count = 4
[[jobs]]
name = "r"
task = "resnet18-femnist"
rounds = 2
target_participants = 1
deadline_s = 60
[[jobs]]
name = "m"
task = "mobilenet_v2-femnist"
rounds = 2
target_participants = 1
deadline_s = 60
"#;

    fn result(policy: &str, scale: f64, with_tasks: bool) -> LabResult {
        let cfg = LabConfig::parse(TOML, Path::new("models.toml")).unwrap();
        let jobs = vec![
            finished_job("r", &[100.0 * scale, 200.0 * scale], &[0.4, 0.6]),
            finished_job("m", &[300.0 * scale, 600.0 * scale], &[0.3, 0.5]),
        ];
        let sim = with_tasks.then(|| VirtualStats {
            jobs: [
                ("r", "resnet18-femnist {\"width\":4}"),
                ("m", "mobilenet_v2-femnist {}"),
            ]
            .into_iter()
            .map(|(name, task)| JobTrainStats {
                name: name.into(),
                task: task.into(),
                ..Default::default()
            })
            .collect(),
            ..Default::default()
        });
        let mut r = LabResult::new(&cfg, policy, jobs, AgentStats::default(), 1.0, None);
        r.simulation = sim;
        r
    }

    #[test]
    fn jobs_are_compared_per_model() {
        let runs = [result("random", 2.0, true), result("venn", 1.0, true)];
        let (text, csv) = table_and_csv(&runs).expect("the runs record their tasks");
        assert!(text.contains("resnet18-femnist"), "{text}");
        assert!(text.contains("mobilenet_v2-femnist"), "{text}");
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 2 * 2, "{csv}");
        // MobileNet under venn: JCT 600 s, final 50 %, TTA 50 % at 600 s (one job).
        assert!(
            lines.contains(&"mobilenet_v2-femnist,venn,1,1,600.000,0.500,0.400,600.000,1"),
            "{csv}"
        );
        assert!(
            lines.contains(&"resnet18-femnist,random,1,1,400.000,0.600,0.500,400.000,1"),
            "{csv}"
        );
        // A job counts as 0 until its first evaluation, then holds its last accuracy.
        let j = runs[1].jobs.iter().find(|j| j.name == "r").unwrap();
        assert_eq!(accuracy_since_arrival(j, 50.0), 0.0);
        assert_eq!(accuracy_since_arrival(j, 150.0), 0.4);
        assert_eq!(accuracy_since_arrival(j, 1e9), 0.6);

        let dir = std::env::temp_dir().join(format!("venn-by-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let table = write_by_model(&dir, &runs).unwrap().unwrap();
        assert_eq!(table, text);
        assert!(dir.join("by-model.png").exists() && dir.join("by-model.csv").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn speedups_per_model_get_intervals_over_seeds() {
        // Venn twice as fast on both models in one seed, 4x in the other.
        let runs = [
            [result("random", 2.0, true), result("venn", 1.0, true)],
            [result("random", 4.0, true), result("venn", 1.0, true)],
        ];
        let text = over_seeds_table(&runs).expect("the runs record their tasks");
        let venn: Vec<&str> = text.lines().filter(|l| l.contains(" venn ")).collect();
        assert_eq!(venn.len(), 2, "{text}");
        // Mean 3.00x; s = √2, n = 2: half width 12.706 · √2 / √2.
        for line in venn {
            assert!(line.contains("3.00x [-9.71, 15.71]"), "{line}");
        }
        assert!(text.contains("50.00 %"), "{text}");
        let none = [[result("random", 2.0, false), result("venn", 1.0, false)]];
        assert!(over_seeds_table(&none).is_none());
    }

    #[test]
    fn runs_without_tasks_get_no_per_model_table() {
        let runs = [result("random", 2.0, false), result("venn", 1.0, false)];
        assert!(table_and_csv(&runs).is_none());
        let dir = std::env::temp_dir().join(format!("venn-by-model-none-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(write_by_model(&dir, &runs).unwrap().is_none());
        assert!(!dir.join("by-model.csv").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
