//! End to end on loopback: a real manager, 20 emulated devices and two FL jobs — a
//! built-in ResNet-18 and the custom `softmax-fedavgm` task from
//! `fl-job/examples/custom_task.rs` — on generated FEMNIST-shaped data. Both jobs must
//! finish and write accuracy rows. A second run drops 30 % of devices mid-task and still
//! completes its rounds through over-commit and deadlines.

#[path = "../../fl-job/examples/custom_task.rs"]
mod custom_task;

use datasets::{Femnist, IMAGE_PIXELS, Writer};
use fl_task::task::Registry;
use std::path::Path;
use std::sync::Arc;
use venn_lab::{LabConfig, LabResult, run_experiment};

/// Writers whose images light up a label-specific band, so a model can learn them.
fn fixture(writers: usize, per_writer: usize) -> Femnist {
    let make = |w: usize, offset: usize| {
        let mut images = Vec::new();
        let mut labels = Vec::new();
        for i in 0..per_writer {
            let label = ((w + i + offset) % 5) as u8;
            let mut img = vec![255u8; IMAGE_PIXELS];
            for px in img.iter_mut().skip(label as usize * 150).take(150) {
                *px = ((w * 7 + i) % 60) as u8;
            }
            images.extend(img);
            labels.push(label);
        }
        Writer {
            id: format!("f{w:04}_00"),
            images,
            labels,
        }
    };
    Femnist {
        source: None,
        train: (0..writers).map(|w| make(w, 0)).collect(),
        test: (0..writers).map(|w| make(w, 3)).collect(),
    }
}

fn registry() -> Registry {
    let mut r = Registry::with_builtins();
    custom_task::register(&mut r);
    r
}

fn out_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("venn-e2e-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Parses `toml` as experiment `name`, runs it under venn with 20 fixture writers and
/// returns the result and its output folder.
async fn run_lab(name: &str, toml: &str) -> (LabResult, std::path::PathBuf) {
    run_lab_until(name, toml, |_| std::future::pending()).await
}

/// [`run_lab`], cancelled (as by Ctrl-C) when the future `cancel(out)` resolves.
async fn run_lab_until<F: std::future::Future<Output = ()>>(
    name: &str,
    toml: &str,
    cancel: impl FnOnce(&Path) -> F,
) -> (LabResult, std::path::PathBuf) {
    let cfg = LabConfig::parse(toml, Path::new(&format!("{name}.toml"))).unwrap();
    let out = out_dir(name);
    let r = run_experiment(
        &cfg,
        &venn_core::PolicyRegistry::builtin(),
        &out,
        Arc::new(fixture(20, 12)),
        registry(),
        cancel(&out),
        venn_lab::RunUi::QUIET,
    )
    .await
    .unwrap();
    (r, out)
}

fn rows(p: &Path) -> usize {
    std::fs::read_to_string(p).map_or(0, |s| s.lines().count().saturating_sub(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_jobs_twenty_devices_two_rounds() {
    let (r, out) = run_lab(
        "two",
        r#"
name = "e2e"
policy = "venn"
max_minutes = 4
tta_thresholds = [0.3]
[devices]
count = 20
compress = 1000
shards = 2
[[jobs]]
name = "custom"
task = "softmax-fedavgm"
params = { lr = 0.1, epochs = 1 }
rounds = 2
target_participants = 4
deadline_s = 30
eval_samples = 100
[[jobs]]
name = "resnet"
task = "resnet18-femnist"
# The server's BatchNorm re-estimation after each aggregation, on the live path too.
params = { width = 2, bn_calibration = 50, train = { max_steps = 1, batch_size = 10 } }
arrival_s = 1
rounds = 2
target_participants = 4
deadline_s = 30
eval_samples = 100
"#,
    )
    .await;
    assert!(r.stopped_early.is_none(), "{}", r.table());
    assert_eq!(r.jobs_finished, 2, "{}", r.table());
    for j in ["custom", "resnet"] {
        assert_eq!(
            rows(&out.join("jobs").join(format!("{j}.csv"))),
            2,
            "{j} wrote two accuracy rows"
        );
    }
    let custom = r.jobs.iter().find(|j| j.name == "custom").unwrap();
    assert!(
        custom.final_accuracy.unwrap() > 0.3,
        "the custom task learns the fixture: {}",
        r.table()
    );
    for f in ["summary.json", "tta.csv", "accuracy.png"] {
        assert!(out.join(f).exists(), "{f} written");
    }
    assert!(r.devices.updates_uploaded >= 4 * 2 * 2 * 8 / 10);
    // Two shards carried the 20 devices; their counters add up to the population's.
    assert_eq!(r.devices.devices_checked_in, 20, "{:?}", r.devices);
    // Each job reported every round's metrics to the manager: the record behind its
    // status page, restored from the experiment's database, has the jobs' accuracy rows.
    let m = venn_manager::Manager::open(
        venn_manager::Settings::default(),
        &out.join("manager.db"),
        venn_manager::Clock::System,
    )
    .unwrap();
    m.with_history(|h| {
        for j in ["custom", "resnet"] {
            let rec = h.jobs().find(|rec| rec.name == j).expect("job remembered");
            assert_eq!(
                rec.state,
                venn_manager::store::JobLifecycle::Finished,
                "{j}"
            );
            assert_eq!(rec.points.len(), 2, "{j}: one accuracy point per round");
            let last = r.jobs.iter().find(|o| o.name == j).unwrap();
            let want = last.final_accuracy.unwrap();
            assert!(
                (rec.points[1].accuracy - want).abs() < 1e-6,
                "{j}: {rec:?} vs {want}"
            );
            assert_eq!(
                rec.last_metrics.and_then(|m| m.participants).map(|p| p > 0),
                Some(true)
            );
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rounds_close_when_thirty_percent_of_devices_vanish_mid_task() {
    let (r, _) = run_lab(
        "drops",
        r#"
name = "drops"
max_minutes = 4
[devices]
count = 20
compress = 1000
drop_fraction = 0.3
[[jobs]]
name = "custom"
task = "softmax-fedavgm"
rounds = 3
target_participants = 6
overcommit = 1.6
min_response_fraction = 0.8
deadline_s = 8
eval_samples = 100
"#,
    )
    .await;
    assert_eq!(r.jobs_finished, 1, "{}", r.table());
    assert_eq!(r.jobs[0].rounds, 3);
    assert!(
        r.devices.dropped > 0,
        "some devices vanished: {:?}",
        r.devices
    );
}

/// With admission control on, a job whose statement is worth less than its price is
/// declined with the quote and never runs, while a worthwhile one is admitted and trains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_declines_a_job_not_worth_its_price_and_runs_the_other() {
    let (r, _) = run_lab(
        "admission",
        r#"
name = "admission"
max_minutes = 4
[admission]
slot_s = 600
[devices]
count = 20
compress = 1000
[[jobs]]
name = "worth-it"
task = "softmax-fedavgm"
arrival_s = 2
rounds = 2
target_participants = 4
deadline_s = 30
eval_samples = 100
statement = { value = [[0, 100.0], [7200, 0.0]], rounds = [[2, 1.0]], demand = 4, round_s = 1200 }
[[jobs]]
name = "cheap"
task = "softmax-fedavgm"
arrival_s = 2
rounds = 2
target_participants = 4
deadline_s = 30
eval_samples = 100
statement = { value = [[3600, 0.000001]], rounds = [[2, 1.0]], demand = 4, round_s = 3600 }
"#,
    )
    .await;
    let job = |n: &str| r.jobs.iter().find(|j| j.name == n).unwrap();
    assert!(
        job("worth-it").finished,
        "{}\n{:?}",
        r.table(),
        job("worth-it").error
    );
    let cheap = job("cheap");
    assert!(!cheap.finished);
    assert_eq!(cheap.rounds, 0);
    let why = cheap.error.as_deref().unwrap_or_default();
    assert!(
        why.contains("409") && why.contains("declined") && why.contains("quote"),
        "{why}"
    );
}

#[test]
fn config_errors_name_the_file_and_key() {
    let error = |toml: &str| {
        LabConfig::parse(toml, Path::new("exp.toml"))
            .unwrap_err()
            .to_string()
    };
    let job = "[[jobs]]\nname = \"a\"\ntask = \"t\"\nrounds = 1\ntarget_participants = 1\n";
    let e = error(&format!(
        "name = \"x\"\n[devices]\ncount = 4\n{job}deadline_s = -5\n"
    ));
    assert!(
        e.contains("exp.toml") && e.contains("jobs[0].deadline_s"),
        "{e}"
    );
    for shards in [0, 5] {
        let e = error(&format!(
            "name = \"x\"\n[devices]\ncount = 4\nshards = {shards}\n{job}deadline_s = 5\n"
        ));
        assert!(e.contains("devices.shards"), "{e}");
    }
    let e = error("name = \"x\"\n[devices]\ncount = 4\ncolour = 1\n");
    assert!(e.contains("exp.toml") && e.contains("colour"), "{e}");
    // The virtual clock's settings are checked too: (sim table, job tail, what the error names).
    for (sim, tail, key) in [
        ("[sim]\nhorizon_h = 0\n", "", "sim.horizon_h"),
        ("[sim]\nthreds = 2\n", "", "threds"),
        ("", "workload_s = -1\n", "jobs[0].workload_s"),
    ] {
        let e = error(&format!(
            "name = \"x\"\n{sim}[devices]\ncount = 4\n{job}deadline_s = 5\n{tail}"
        ));
        assert!(e.contains(key), "{key}: {e}");
    }
    // Misspelt job keys are errors naming the key, not silently ignored (jobs were once
    // read through `serde(flatten)`, which let them through).
    for typo in [
        "deadlin = 5",
        "over_commit = 1.2",
        "min_response_fracton = 0.8",
    ] {
        let e = error(&format!(
            "name = \"x\"\n[devices]\ncount = 4\n{job}deadline_s = 5\n{typo}\n"
        ));
        let key = typo.split(' ').next().unwrap();
        assert!(e.contains("exp.toml") && e.contains(key), "{key}: {e}");
    }
    let e = error(&format!(
        "name = \"x\"\n[devices]\ncount = 4\n{job}deadline_s = 5\narrival_s = \"soon\"\n"
    ));
    assert!(e.contains("arrival_s"), "{e}");
    // A job without a statement is a config error while admission is on.
    let e = error(&format!(
        "name = \"x\"\n[admission]\n[devices]\ncount = 4\n{job}deadline_s = 5\n"
    ));
    assert!(e.contains("jobs[0].statement"), "{e}");
}

/// Relative paths in a config file are relative to its folder, not to the working
/// directory, so a config and its files move together.
#[test]
fn relative_paths_resolve_against_the_config_folder() {
    let dir = out_dir("paths");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("exp.toml");
    std::fs::write(
        &file,
        "name = \"x\"\ndata = \"femnist\"\n[devices]\ncount = 4\navailability = { trace = \"t.csv\" }\n\
         [[jobs]]\nname = \"a\"\ntask = \"t\"\nrounds = 1\ntarget_participants = 1\ndeadline_s = 5\n",
    )
    .unwrap();
    let cfg = LabConfig::load(&file).unwrap();
    assert_eq!(cfg.data, Some(dir.join("femnist")));
    assert_eq!(
        cfg.devices.availability,
        venn_lab::AvailabilitySource::Trace(dir.join("t.csv"))
    );
}

#[test]
fn the_policy_is_a_name_or_a_table_of_its_parameters() {
    let job = "[[jobs]]\nname = \"a\"\ntask = \"t\"\nrounds = 1\ntarget_participants = 1\ndeadline_s = 5\n";
    let parse = |policy: &str| {
        LabConfig::parse(
            &format!("name = \"x\"\n{policy}\n[devices]\ncount = 4\n{job}"),
            Path::new("exp.toml"),
        )
    };
    let cfg = parse("").unwrap();
    assert_eq!(cfg.policy, venn_core::PolicyConfig::named("venn"));
    let cfg = parse("policy = \"chunked\"").unwrap();
    assert_eq!(cfg.policy.name(), "chunked");
    let cfg = parse("policy = { name = \"random-delay\", delay_scale = 4.0 }").unwrap();
    let venn_core::PolicyConfig::RandomDelay(p) = &cfg.policy else {
        panic!("{:?}", cfg.policy)
    };
    assert_eq!(p.delay_scale, 4.0);
    // `venn-lab compare` keeps the parameters for the policy they belong to.
    assert_eq!(cfg.policy.with_name("random-delay"), cfg.policy);
    assert_eq!(
        cfg.policy.with_name("venn"),
        venn_core::PolicyConfig::named("venn")
    );
    let e = parse("policy = { name = \"venn\", epsilom = 1 }")
        .unwrap_err()
        .to_string();
    assert!(e.contains("exp.toml") && e.contains("epsilom"), "{e}");
    let e = parse("policy = \"vennn\"").unwrap_err().to_string();
    assert!(
        e.contains("policy") && e.contains("vennn") && e.contains("random-order"),
        "{e}"
    );
}

#[test]
fn shipped_experiment_configs_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/experiments");
    for name in [
        "quick.toml",
        "paper.toml",
        "custom.toml",
        "fig9.toml",
        "virtual-quick.toml",
    ] {
        let cfg = LabConfig::load(&dir.join(name)).unwrap_or_else(|e| panic!("{e}"));
        assert!(!cfg.jobs.is_empty(), "{name}");
    }
    assert_eq!(
        LabConfig::load(&dir.join("paper.toml")).unwrap().jobs.len(),
        20
    );
    // The paper's testbed workload for the virtual-clock figure (issue 39): 20 jobs, half
    // ResNet-18 and half MobileNet-V2, over ≥ 2,000 devices and all four eligibility specs,
    // timed from their work (no fixed workload_s), measured on ≥ 2,000 samples with the
    // 3-in-a-row TTA rule.
    let fig9 = LabConfig::load(&dir.join("fig9.toml")).unwrap();
    assert!(fig9.jobs.len() == 20 && fig9.devices.count >= 2000);
    let tasks: Vec<&str> = fig9.jobs.iter().map(|j| j.job.task.as_str()).collect();
    for model in ["resnet18-femnist", "mobilenet_v2-femnist"] {
        assert_eq!(tasks.iter().filter(|t| **t == model).count(), 10, "{model}");
    }
    assert!(fig9.jobs.iter().all(|j| j.workload_s.is_none()));
    assert!(fig9.jobs.iter().all(|j| j.job.eval_samples >= 2000));
    assert!(fig9.tta_rule().consecutive >= 3);
    let specs: std::collections::BTreeSet<String> = fig9
        .jobs
        .iter()
        .map(|j| format!("{:?}", j.job.requirement))
        .collect();
    assert_eq!(specs.len(), 4, "{specs:?}");
    let job: fl_job::runner::JobConfig =
        toml::from_str(&std::fs::read_to_string(dir.join("job.toml")).unwrap()).unwrap();
    job.validate().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stopped_early_reports_how_far_each_job_got() {
    let toml = r#"
name = "stopped"
max_minutes = 4
[devices]
count = 20
compress = 1000
[[jobs]]
name = "long"
task = "softmax-fedavgm"
rounds = 1000
target_participants = 4
deadline_s = 30
eval_samples = 100
[[jobs]]
name = "later"
task = "softmax-fedavgm"
arrival_s = 600
rounds = 2
target_participants = 4
deadline_s = 30
eval_samples = 100
"#;
    // Cancel once the long job has written two rounds.
    let (r, out) = run_lab_until("stopped", toml, |out| {
        let watched = out.join("jobs").join("long.csv");
        async move {
            while rows(&watched) < 2 {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    })
    .await;
    let csv = out.join("jobs").join("long.csv");
    assert_eq!(r.stopped_early.as_deref(), Some("cancelled"));
    assert_eq!(r.jobs_finished, 0);
    let job = |n: &str| r.jobs.iter().find(|j| j.name == n).unwrap();
    let long = job("long");
    assert!(!long.finished);
    assert_eq!(long.error.as_deref(), Some("unfinished: cancelled"));
    assert!(
        long.rounds >= 2 && long.rounds == rows(&csv),
        "{}",
        r.table()
    );
    assert_eq!(long.history.len(), long.rounds);
    assert!(long.final_accuracy.is_some());
    let later = job("later");
    assert_eq!((later.rounds, later.finished), (0, false), "never arrived");
    assert!(r.table().contains("long"), "{}", r.table());
}

/// The example task, except that its first aggregation yields a model full of NaN — as a
/// buggy aggregator or an overflowing server optimizer would.
struct FirstAggregationBroken {
    inner: Arc<dyn fl_task::task::FlTask>,
    broken: std::sync::atomic::AtomicBool,
}

impl fl_task::task::FlTask for FirstAggregationBroken {
    fn name(&self) -> &str {
        "first-aggregation-broken"
    }
    fn init(&self, seed: u64) -> Result<Vec<u8>, fl_task::FlError> {
        self.inner.init(seed)
    }
    fn train(
        &self,
        global: &[u8],
        data: datasets::SampleView<'_>,
        seed: u64,
    ) -> Result<fl_task::task::LocalUpdate, fl_task::FlError> {
        self.inner.train(global, data, seed)
    }
    fn train_round(
        &self,
        global: &[u8],
        data: datasets::SampleView<'_>,
        seed: u64,
        round: u32,
    ) -> Result<fl_task::task::LocalUpdate, fl_task::FlError> {
        self.inner.train_round(global, data, seed, round)
    }
    fn evaluate(
        &self,
        weights: &[u8],
        data: datasets::SampleView<'_>,
    ) -> Result<fl_task::EvalStats, fl_task::FlError> {
        self.inner.evaluate(weights, data)
    }
    fn decode(&self, weights: &[u8]) -> Result<Vec<fl_task::NamedTensor>, fl_task::FlError> {
        self.inner.decode(weights)
    }
    fn encode(&self, tensors: Vec<fl_task::NamedTensor>) -> Result<Vec<u8>, fl_task::FlError> {
        self.inner.encode(tensors)
    }
    fn aggregate(
        &self,
        global: &[u8],
        updates: &[(Vec<u8>, u64)],
        state: &mut fl_task::task::ServerState,
    ) -> Result<Vec<u8>, fl_task::FlError> {
        let good = self.inner.aggregate(global, updates, state)?;
        if self.broken.swap(false, std::sync::atomic::Ordering::SeqCst) {
            let mut t = self.inner.decode(&good)?;
            t.iter_mut().for_each(|t| t.values.fill(f32::NAN));
            return self.inner.encode(t);
        }
        Ok(good)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_aggregation_aborts_and_retries_the_round_instead_of_ending_the_job() {
    let mut tasks = registry();
    tasks.register("first-aggregation-broken", |p| {
        let inner = registry().build("softmax-fedavgm", p)?;
        Ok(Arc::new(FirstAggregationBroken {
            inner,
            broken: true.into(),
        }) as Arc<dyn fl_task::task::FlTask>)
    });
    let toml = r#"
name = "e2e-broken-aggregate"
policy = "venn"
max_minutes = 4
[devices]
count = 12
compress = 1000
[[jobs]]
name = "broken"
task = "first-aggregation-broken"
params = { lr = 0.1, epochs = 1 }
rounds = 2
target_participants = 4
deadline_s = 30
eval_samples = 100
"#;
    let cfg = LabConfig::parse(toml, Path::new("broken.toml")).unwrap();
    let out = out_dir("broken-aggregate");
    let r = run_experiment(
        &cfg,
        &venn_core::PolicyRegistry::builtin(),
        &out,
        Arc::new(fixture(12, 12)),
        tasks,
        std::future::pending(),
        venn_lab::RunUi::QUIET,
    )
    .await
    .unwrap();
    assert_eq!(r.jobs_finished, 1, "{}", r.table());
    let job = &r.jobs[0];
    assert!(job.error.is_none(), "{:?}", job.error);
    let attempts: Vec<u32> = job.history.iter().map(|row| row.attempts).collect();
    assert_eq!(attempts, [2, 1], "round 0 was aborted once and retried");
    assert!(job.history.iter().all(|row| row.accuracy.is_finite()));
}

/// A live run whose jobs cannot work is refused before the manager starts, naming each
/// job and why (issue 40: it once retried until `max_minutes`); `force` runs it anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_run_that_cannot_work_is_refused_before_it_starts() {
    let toml = r#"
name = "infeasible"
policy = "venn"
max_minutes = 1
[devices]
count = 8
compress = 1000
[[jobs]]
name = "too-many"
task = "resnet18-femnist"
params = { width = 2, train = { max_steps = 1, batch_size = 10 } }
rounds = 1
target_participants = 20
deadline_s = 30
[[jobs]]
name = "nobody"
task = "resnet18-femnist"
params = { width = 2, train = { max_steps = 1, batch_size = 10 } }
rounds = 1
target_participants = 2
deadline_s = 30
requirement = { min_os_version = 1000 }
"#;
    let cfg = LabConfig::parse(toml, Path::new("infeasible.toml")).unwrap();
    let out = out_dir("infeasible");
    let t = std::time::Instant::now();
    let e = run_experiment(
        &cfg,
        &venn_core::PolicyRegistry::builtin(),
        &out,
        Arc::new(fixture(20, 12)),
        registry(),
        std::future::pending(),
        venn_lab::RunUi::QUIET,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        t.elapsed().as_secs() < 10,
        "refused up front: {:?}",
        t.elapsed()
    );
    assert!(e.contains("2 job(s) cannot work"), "{e}");
    assert!(
        e.contains("job too-many: ") && e.contains("fewer than the 16 results"),
        "{e}"
    );
    assert!(
        e.contains("job nobody: no device meets its requirement"),
        "{e}"
    );
    assert!(!out.join("manager.db").exists(), "nothing started");
}
