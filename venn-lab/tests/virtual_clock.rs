//! `venn-lab sim` end to end on the shipped `scripts/experiments/virtual-quick.toml`:
//! three ResNet-18 jobs really train on FEMNIST writers while the simulator schedules 80
//! trace-driven devices on the virtual clock. Accuracy must rise, time-to-accuracy must be
//! computed, a rerun with another thread count (or with each round's clients trained as one
//! computation) must write byte-identical CSVs, and the
//! schedule must not depend on training (a schedule-only run gives the same rounds).
//!
//! Needs the shared FEMNIST copy and trace tables (skipped, with a printed reason,
//! without them). Run in `--release`: it trains.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use fl_task::task::Registry;
use venn_core::PolicyRegistry;
use venn_lab::sim::VirtualOptions;
use venn_lab::{LabConfig, LabResult, run_virtual};
use venn_traces::Located;

pub(crate) fn config_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/experiments/virtual-quick.toml")
}

/// FEMNIST and the device tables by the usual lookup (at worst, the built-in copies).
pub(crate) fn inputs() -> (Arc<datasets::Femnist>, Located) {
    let data = datasets::Femnist::open(None, datasets::WriterSet::Main).unwrap();
    (Arc::new(data), venn_traces::locate_traces(None).unwrap())
}

pub(crate) fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("venn-virtual-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

pub(crate) fn run(
    cfg: &LabConfig,
    data: &Arc<datasets::Femnist>,
    traces: &Located,
    out: &Path,
    train: bool,
) -> LabResult {
    run_with(cfg, data, traces, out, train, true).unwrap()
}

/// `venn-lab sim` on `cfg` with the built-in policies and tasks, quietly.
fn run_with(
    cfg: &LabConfig,
    data: &Arc<datasets::Femnist>,
    traces: &Located,
    out: &Path,
    train: bool,
    force: bool,
) -> Result<LabResult, venn_lab::LabError> {
    let cancel = AtomicBool::new(false);
    run_virtual(
        cfg,
        out,
        VirtualOptions {
            policies: &PolicyRegistry::builtin(),
            tasks: &Registry::with_builtins(),
            data: data.clone(),
            traces,
            cancel: &cancel,
            progress: false,
            train,
            force,
            show_feasibility: false,
        },
    )
}

fn csvs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("jobs"))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn virtual_quick_trains_for_real_and_is_deterministic_across_threads() {
    let (data, traces) = inputs();
    let mut cfg = LabConfig::load(&config_path()).unwrap();
    cfg.sim.threads = 1;
    let one = out_dir("t1");
    let r1 = run(&cfg, &data, &traces, &one, true);
    cfg.sim.threads = 2;
    let two = out_dir("t2");
    let r2 = run(&cfg, &data, &traces, &two, true);

    // Same seed, other thread count: the same bytes.
    let (c1, c2) = (csvs(&one), csvs(&two));
    assert_eq!(c1.len(), 3);
    assert_eq!(c1, c2, "CSVs differ between 1 and 2 training threads");
    // Each round's participants trained as one computation: the same bytes again.
    cfg.sim.stack_clients = true;
    let stacked = out_dir("stacked");
    run(&cfg, &data, &traces, &stacked, true);
    cfg.sim.stack_clients = false;
    assert_eq!(c1, csvs(&stacked), "CSVs differ with the clients stacked");

    for j in &r1.jobs {
        assert!(j.finished, "{} did not finish: {:?}", j.name, j.error);
        assert_eq!(j.rounds, j.history.len());
        let first = j.history.first().unwrap().accuracy;
        let best = j.history.iter().map(|r| r.accuracy).fold(0.0, f64::max);
        assert!(
            best > first + 0.05,
            "{}: accuracy did not rise: {:?}",
            j.name,
            j.history.iter().map(|r| r.accuracy).collect::<Vec<_>>()
        );
        // Rows are on the virtual clock: after the job's arrival, hours apart, while
        // the whole run takes seconds of wall time.
        assert!(j.history.iter().all(|r| r.time_s >= j.arrival_s));
        assert!(j.history.windows(2).all(|w| w[1].time_s > w[0].time_s));
        assert!(j.jct_s.unwrap() > r1.wall_s);
    }
    // Time-to-accuracy is computed for the thresholds every job reached.
    let (threshold, mean, reached) = r1.avg_tta_s[0];
    assert_eq!(threshold, 0.1);
    assert!(reached >= 2 && mean.unwrap() > 0.0, "{:?}", r1.avg_tta_s);
    let sim = r1.simulation.as_ref().unwrap();
    assert_eq!(sim.threads, 1);
    assert!(sim.samples_trained > 0 && sim.train_thread_s > 0.0);
    assert_eq!(r2.simulation.as_ref().unwrap().threads, 2);
    for f in ["summary.json", "tta.csv", "accuracy.png"] {
        assert!(one.join(f).is_file(), "{f} missing");
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(one.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["clock"], "virtual");

    // The schedule does not depend on training: a schedule-only run closes the same
    // rounds at the same virtual times with the same participants.
    let dry = out_dir("dry");
    let rd = run(&cfg, &data, &traces, &dry, false);
    for (a, b) in r1.jobs.iter().zip(&rd.jobs) {
        assert_eq!(a.jct_s, b.jct_s, "{}", a.name);
        let key = |j: &venn_lab::JobOutcome| {
            j.history
                .iter()
                .map(|r| (r.time_s.to_bits(), r.participants, r.attempts))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(a), key(b), "{}", a.name);
        assert!(b.final_accuracy.is_none());
    }

    // Two policies side by side: the table, the CSV and a plot per job.
    let cmp = out_dir("cmp");
    let text = venn_lab::compare::write_comparison(&cmp, &[r1.clone(), rd.clone()]).unwrap();
    assert!(text.contains("speed-ups over venn"), "{text}");
    let rows = std::fs::read_to_string(cmp.join("compare.csv")).unwrap();
    assert_eq!(rows.lines().count(), 1 + 2 * 3, "{rows}");
    for j in &r1.jobs {
        assert!(
            cmp.join("compare")
                .join(format!("{}.png", j.name))
                .is_file()
        );
    }
    assert!(cmp.join("compare.png").is_file());
    // Schedule-only runs compare rounds and JCTs and draw no (empty) accuracy plots.
    let cmp_dry = out_dir("cmp-dry");
    let mut other = rd.clone();
    other.policy = "other".into();
    let text = venn_lab::compare::write_comparison(&cmp_dry, &[rd.clone(), other]).unwrap();
    assert!(text.contains("rounds") && text.contains("JCT h"), "{text}");
    for absent in ["final acc", "TTA", "last 3"] {
        assert!(!text.contains(absent), "{absent}: {text}");
    }
    assert!(!cmp_dry.join("compare.png").exists());
    assert!(cmp_dry.join("compare.csv").is_file());
    for d in [one, two, dry, cmp, cmp_dry] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn what_the_virtual_clock_cannot_run_is_refused_by_name() {
    let (data, traces) = inputs();
    let refuse = |cfg: &LabConfig| refused(cfg, &data, &traces, false);
    let mut cfg = LabConfig::load(&config_path()).unwrap();
    cfg.devices.availability = venn_lab::AvailabilitySource::Always;
    let e = refuse(&cfg);
    assert!(e.contains("availability"), "{e}");
    let mut cfg = LabConfig::load(&config_path()).unwrap();
    cfg.admission = Some(Default::default());
    let e = refuse(&cfg);
    assert!(e.contains("[admission]"), "{e}");
    // Jobs that cannot work are refused before anything runs, each named with the reason.
    let mut cfg = LabConfig::load(&config_path()).unwrap();
    cfg.jobs[0].job.deadline_s = 0.001;
    cfg.jobs[1].job.target_participants = 1000;
    let e = refuse(&cfg);
    let (a, b) = (&cfg.jobs[0].job.name, &cfg.jobs[1].job.name);
    assert!(e.contains("2 job(s) cannot work"), "{e}");
    assert!(
        e.contains(&format!("job {a}: its fastest eligible device needs")),
        "{e}"
    );
    assert!(
        e.contains(&format!("job {b}: ")) && e.contains("eligible devices"),
        "{e}"
    );
    let mut cfg = LabConfig::load(&config_path()).unwrap();
    cfg.jobs[2].job.requirement.min_os_version = 1000.0;
    let e = refuse(&cfg);
    assert!(e.contains("no device meets its requirement"), "{e}");
}

/// The error with which `cfg` is refused (`train`: with its training; never `force`d).
fn refused(
    cfg: &LabConfig,
    data: &Arc<datasets::Femnist>,
    traces: &Located,
    train: bool,
) -> String {
    run_with(cfg, data, traces, &out_dir("refused"), train, false)
        .unwrap_err()
        .to_string()
}

/// A job whose server-side calibration set does not fit in the data's held-out samples
/// beyond its evaluation set is refused before anything trains, naming the job and key.
#[test]
fn a_calibration_set_the_data_cannot_hold_is_refused() {
    let (data, traces) = inputs();
    let mut cfg = LabConfig::load(&config_path()).unwrap();
    let job = &mut cfg.jobs[1].job;
    job.params["bn_calibration"] = serde_json::json!(10_000);
    let name = job.name.clone();
    let e = refused(&cfg, &data, &traces, true);
    assert!(
        e.contains(&format!("job {name}: params.bn_calibration = 10000")),
        "{e}"
    );
}

/// A round that can never succeed (a deadline shorter than any task) ends its job after
/// `max_attempts` aborts, as in a live run, with the reason, instead of retrying to the
/// horizon: with `deadline_s = 0.001` and a 100,000 h horizon that once grew memory by
/// hundreds of MB a second until the kernel killed the run.
#[test]
fn a_round_that_cannot_succeed_ends_its_job_after_max_attempts() {
    let (data, traces) = inputs();
    let mut cfg = LabConfig::load(&config_path()).unwrap();
    cfg.sim.horizon_h = 100_000.0;
    cfg.jobs[0].job.deadline_s = 0.001;
    cfg.jobs[0].job.max_attempts = 7;
    let t = std::time::Instant::now();
    let r = run(&cfg, &data, &traces, &out_dir("give-up"), false);
    assert!(t.elapsed().as_secs() < 60, "bounded: {:?}", t.elapsed());
    let job = &r.jobs[0];
    assert!(!job.finished && job.rounds == 0, "{job:?}");
    let why = job.error.as_deref().unwrap_or_default();
    assert!(
        why.contains("round 0 aborted 7 times (max_attempts)"),
        "{why}"
    );
    // The other jobs are not held up by it.
    assert!(r.jobs[1..].iter().all(|j| j.finished), "{:?}", r.jobs);
    assert!(r.simulation.as_ref().unwrap().rounds_aborted >= 7);
    // A schedule-only table shows what the run has: no empty accuracy columns.
    let table = r.table();
    assert!(
        table.contains("sched delay") && table.contains("aborted"),
        "{table}"
    );
    assert!(!table.contains("final acc"), "{table}");
}

/// Over-committed rounds close on enough results before their whole demand is assigned;
/// they still split into scheduling delay and response collection (at the last device a
/// round used), and the schedule table accounts for every job's whole JCT.
#[test]
fn every_round_reports_its_response_collection_and_the_table_adds_up() {
    let (data, traces) = inputs();
    let cfg = LabConfig::load(&config_path()).unwrap();
    let out = out_dir("split");
    let r = run(&cfg, &data, &traces, &out, false);
    // Nothing evaluated: the split is drawn instead of empty accuracy curves.
    assert!(out.join("schedule.png").is_file() && !out.join("accuracy.png").exists());
    let rows: Vec<_> = r.jobs.iter().flat_map(|j| &j.history).collect();
    assert!(!rows.is_empty());
    for row in &rows {
        assert!(
            row.response_collection_s > 0.0 && row.scheduling_delay_s >= 0.0,
            "{row:?}"
        );
    }
    for j in r.jobs.iter().filter(|j| j.finished) {
        let split: f64 = j
            .history
            .iter()
            .map(|r| r.scheduling_delay_s + r.response_collection_s)
            .sum();
        assert!(split <= j.jct_s.unwrap() + 1e-6, "{}: {split}", j.name);
    }
    let table = r.table();
    assert!(table.contains("aborted s") && table.contains("the last one whose result it used"));
}

/// What `venn-lab devices` prints: every job of the shipped quick config can work, with
/// its eligible devices a subset of the trace's and a positive hourly supply; a
/// requirement above every device's scores leaves none.
#[test]
fn devices_reports_each_jobs_supply() {
    let (data, traces) = inputs();
    let mut cfg = LabConfig::load(&config_path()).unwrap();
    let f = |cfg: &LabConfig| {
        let (_, input, sim_cfg) =
            venn_lab::sim::input::prepare(cfg, &Registry::with_builtins(), &data, &traces.path)
                .unwrap();
        venn_sim::engine::feasibility(&input, &sim_cfg)
    };
    for (j, x) in cfg.jobs.iter().zip(f(&cfg)) {
        assert!(x.problem().is_none(), "{}: {}", j.job.name, x.line());
        assert!(x.eligible_devices <= x.devices && x.eligible_devices > 0);
        assert!(x.eligible_per_hour.unwrap() > 0.0);
        assert!(x.peak_in_deadline.unwrap() >= x.needed as usize);
        assert_eq!(x.demand, j.job.demand());
    }
    cfg.jobs[0].job.requirement.min_mem_score = 1001.0;
    let none = &f(&cfg)[0];
    assert_eq!(none.eligible_devices, 0);
    assert!(none.problem().unwrap().contains("no device"));
}

/// `venn-lab devices`' Venn cells on the quick config: each job's hourly supply is the sum
/// of the cells its group is in; jobs with equal requirements share a group; a check-in no
/// job admits is a cell of no group.
#[test]
fn venn_cells_split_each_jobs_supply() {
    let (data, traces) = inputs();
    let mut cfg = LabConfig::load(&config_path()).unwrap();
    // A fourth job with the first one's requirement joins its group.
    let mut twin = cfg.jobs[0].clone();
    twin.job.name = "twin".into();
    cfg.jobs.push(twin);
    let (_, input, sim_cfg) =
        venn_lab::sim::input::prepare(&cfg, &Registry::with_builtins(), &data, &traces.path)
            .unwrap();
    let v = venn_sim::engine::venn_cells(&input, &sim_cfg);
    assert_eq!(v.groups.len(), 3, "{v:?}");
    assert_eq!(v.groups[0].jobs, vec![0, 3]);
    let jobs = venn_sim::engine::feasibility(&input, &sim_cfg);
    for (g, group) in v.groups.iter().enumerate() {
        let in_cells: f64 = v
            .cells
            .iter()
            .filter(|c| c.groups.contains(&g))
            .map(|c| c.per_hour)
            .sum();
        let supply = jobs[group.jobs[0]].eligible_per_hour.unwrap();
        assert!(
            (in_cells - supply).abs() < 1e-9,
            "group {g}: {in_cells} vs {supply}"
        );
    }
    assert!(v.cells.windows(2).all(|w| w[0].per_hour >= w[1].per_hour));
}
