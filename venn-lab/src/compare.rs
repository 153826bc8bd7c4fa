//! One experiment under several policies, side by side: per job and policy the final
//! accuracy, the time to each accuracy threshold and the JCT; speed-ups over the first
//! policy; and one accuracy plot per job with a curve per policy. A schedule-only run has
//! no accuracies: its table keeps rounds and JCTs, and it draws no accuracy plots.
//!
//! One round's accuracy is a noisy figure (a 95 % interval of about ±2 points on the default
//! 2,000 evaluation samples, and non-IID participants move the model by many points from
//! round to round), so beside the final accuracy the table shows the mean over the last
//! [`TAIL_ROUNDS`] rounds, and plots shade each point's Wilson interval. Across seeds, see
//! [`crate::seeds`].
//!
//! Speed-ups compare like with like: a policy's time-to-accuracy speed-up over the
//! baseline is the ratio of the two mean times over the jobs that reached the threshold
//! under both (JCT: over the jobs both finished), with the number of such jobs.

use std::fmt::Write as _;
use std::path::Path;

use venn_plot::accuracy::{Panel, accuracy_grid_png, accuracy_png_with};

use venn_plot::bars::stacked_bars_png;

use crate::results::{
    JobOutcome, LabResult, accuracy_series, any_accuracy, paired, shown_thresholds,
};
pub use crate::results::{TAIL_ROUNDS, tail_accuracy};

fn thresholds(results: &[LabResult]) -> Vec<f64> {
    results
        .first()
        .map(|r| r.avg_tta_s.iter().map(|(a, _, _)| *a).collect())
        .unwrap_or_default()
}

/// The comparison as text: the per-job table, then the speed-ups over the first policy.
/// Without accuracies (a schedule-only run) only rounds and JCTs.
pub fn comparison_table(results: &[LabResult]) -> String {
    let mut s = String::new();
    let Some(base) = results.first() else {
        return s;
    };
    let (u, uname) = base.clock.unit();
    let trained = any_accuracy(results);
    let ths = shown_thresholds(base, trained);
    let w = base
        .jobs
        .iter()
        .map(|j| j.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let pw = results
        .iter()
        .map(|r| r.policy.chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let mut head = if trained {
        format!(
            "{:<w$} {:<pw$} {:>9} {:>10}",
            "job",
            "policy",
            "final acc",
            format!("last {TAIL_ROUNDS}")
        )
    } else {
        format!("{:<w$} {:<pw$} {:>6}", "job", "policy", "rounds")
    };
    for a in &ths {
        let _ = write!(head, " {:>11}", format!("TTA {:.0}% {uname}", a * 100.0));
    }
    let _ = write!(head, " {:>9}", format!("JCT {uname}"));
    let _ = writeln!(s, "{head}");
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{:.2}", x / u));
    for jb in &base.jobs {
        for (k, r) in results.iter().enumerate() {
            let Some(j) = r.jobs.iter().find(|j| j.name == jb.name) else {
                continue;
            };
            let pct = |a: Option<f64>| a.map_or("-".into(), |a| format!("{:.1}%", a * 100.0));
            let name = if k == 0 { j.name.as_str() } else { "" };
            let mut line = if trained {
                format!(
                    "{:<w$} {:<pw$} {:>9} {:>10}",
                    name,
                    r.policy,
                    pct(j.final_accuracy),
                    pct(tail_accuracy(j))
                )
            } else {
                format!("{:<w$} {:<pw$} {:>6}", name, r.policy, j.rounds)
            };
            for a in &ths {
                let _ = write!(line, " {:>11}", f(j.time_to_accuracy(*a, r.tta_rule)));
            }
            let _ = write!(line, " {:>9}", f(j.jct_s));
            let _ = writeln!(s, "{line}");
        }
    }
    let _ = writeln!(
        s,
        "\nspeed-ups over {} (ratio of mean times over the jobs both reached; jobs in brackets)",
        base.policy
    );
    let mut head = format!("{:<pw$} {:>12}", "policy", "JCT");
    for a in &ths {
        let _ = write!(head, " {:>12}", format!("TTA {:.0}%", a * 100.0));
    }
    if trained {
        let _ = write!(
            head,
            " {:>26} {:>26}",
            "final acc vs base, pt",
            format!("last {TAIL_ROUNDS} vs base, pt")
        );
    }
    let _ = writeln!(s, "{head}");
    for r in results {
        let sp = |p: Option<(f64, f64, usize)>| {
            p.map_or("-".to_string(), |(b, o, n)| {
                if o > 0.0 {
                    format!("{:.2}x ({n})", b / o)
                } else {
                    format!("- ({n})")
                }
            })
        };
        let mut line = format!("{:<pw$} {:>12}", r.policy, sp(paired(base, r, |j| j.jct_s)));
        for a in &ths {
            let _ = write!(
                line,
                " {:>12}",
                sp(paired(base, r, |j| j.time_to_accuracy(*a, base.tta_rule)))
            );
        }
        let accs = [
            (|j: &JobOutcome| j.final_accuracy) as fn(&JobOutcome) -> Option<f64>,
            tail_accuracy,
        ];
        for acc in accs.into_iter().filter(|_| trained) {
            let _ = write!(line, " {:>26}", accuracy_change(base, r, acc));
        }
        let _ = writeln!(s, "{line}");
    }
    s
}

/// Mean and worst per-job change of `acc` from `base` to `other`, in points.
fn accuracy_change(
    base: &LabResult,
    other: &LabResult,
    acc: fn(&JobOutcome) -> Option<f64>,
) -> String {
    let diffs: Vec<f64> = base
        .jobs
        .iter()
        .filter_map(|jb| {
            let jo = other.jobs.iter().find(|j| j.name == jb.name)?;
            Some((acc(jo)? - acc(jb)?) * 100.0)
        })
        .collect();
    if diffs.is_empty() {
        return "-".into();
    }
    let worst = diffs.iter().copied().fold(f64::INFINITY, f64::min);
    let mean = diffs.iter().sum::<f64>() / diffs.len() as f64;
    format!("mean {mean:+.1}, worst {worst:+.1}")
}

/// Writes `compare.txt` (the table), `compare.csv` (one row per job and policy),
/// `compare/<job>.png` (a curve per policy) and `compare.png` (all jobs' panels in one
/// grid) into `out`, and where the runs recorded each job's model the per-model table
/// (appended to `compare.txt`), `by-model.csv` and `by-model.png` ([`crate::by_model`]);
/// without accuracies (schedule-only) neither accuracy plot is drawn, but
/// `compare/schedule.png`: each job's JCT split into scheduling delay, response
/// collection and aborted attempts, per policy;
/// returns the table.
pub fn write_comparison(out: &Path, results: &[LabResult]) -> std::io::Result<String> {
    let text = comparison_table(results);
    std::fs::create_dir_all(out.join("compare"))?;
    std::fs::write(out.join("compare.txt"), &text)?;
    let ths = thresholds(results);
    let mut csv = String::from("job,policy,finished,rounds,final_accuracy,tail_accuracy,jct_s");
    for a in &ths {
        let _ = write!(csv, ",tta_{:.0}_s", a * 100.0);
    }
    csv.push('\n');
    let f = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.3}"));
    let Some(base) = results.first() else {
        std::fs::write(out.join("compare.csv"), csv)?;
        return Ok(text);
    };
    let (secs, axis) = base.clock.axis();
    // Without accuracies there is nothing to draw per job (the JCTs are in the table, and
    // across seeds in `compare-seeds.png`).
    let trained = any_accuracy(results);
    let mut panels = Vec::new();
    for jb in &base.jobs {
        let mut series = Vec::new();
        for r in results {
            let Some(j) = r.jobs.iter().find(|j| j.name == jb.name) else {
                continue;
            };
            let _ = write!(
                csv,
                "{},{},{},{},{},{},{}",
                j.name,
                r.policy,
                j.finished,
                j.rounds,
                f(j.final_accuracy),
                f(tail_accuracy(j)),
                f(j.jct_s)
            );
            for a in &ths {
                let _ = write!(csv, ",{}", f(j.time_to_accuracy(*a, r.tta_rule)));
            }
            csv.push('\n');
            series.push(accuracy_series(&r.policy, &j.history, secs));
        }
        if !trained {
            continue;
        }
        accuracy_png_with(
            &out.join("compare")
                .join(format!("{}.png", crate::results::safe_name(&jb.name))),
            &format!("{} — {}", base.name, jb.name),
            axis,
            &series,
        )
        .map_err(std::io::Error::other)?;
        panels.push(Panel {
            title: jb.name.clone(),
            series,
        });
    }
    if trained {
        accuracy_grid_png(&out.join("compare.png"), axis, 4, &panels)
            .map_err(std::io::Error::other)?;
    } else {
        // What it has instead: each job's JCT, split, under every policy side by side.
        let per_policy: Vec<_> = results.iter().map(|r| r.schedule_bars(true)).collect();
        let bars: Vec<_> = base
            .jobs
            .iter()
            .flat_map(|jb| {
                results
                    .iter()
                    .zip(&per_policy)
                    .filter_map(move |(r, bars)| {
                        let i = r.jobs.iter().position(|j| j.name == jb.name)?;
                        bars.get(i).cloned()
                    })
            })
            .collect();
        stacked_bars_png(
            &out.join("compare").join("schedule.png"),
            &format!("{}: what each JCT is made of, by policy", base.name),
            &format!("time ({})", base.clock.unit().1),
            &crate::results::SPLIT_NAMES,
            &bars,
        )
        .map_err(std::io::Error::other)?;
    }
    std::fs::write(out.join("compare.csv"), csv)?;
    let mut text = text;
    if let Some(per_model) = crate::by_model::write_by_model(out, results)? {
        text.push('\n');
        text.push_str(&per_model);
        std::fs::write(out.join("compare.txt"), &text)?;
    }
    Ok(text)
}
