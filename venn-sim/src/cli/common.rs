//! Options shared by the simulation subcommands, input loading, progress
//! bars and a small parallel runner.

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use venn_core::PolicyArgs;
use venn_sim::engine::setup::{load_trace, load_workload};
use venn_sim::engine::{SimConfig, SimInput, SimResult, run_with_progress};
use venn_traces::{AvailabilityTrace, DeviceCatalog, SyntheticOptions, locate_traces};

/// Where the inputs come from and how large the run is.
#[derive(Debug, Clone, clap::Args)]
pub struct InputArgs {
    /// Availability trace (Venn CSV or FedScale JSON). Default: the synthetic
    /// trace calibrated to the authors' volume, generated in memory.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Seed of the synthetic trace (ignored with --trace).
    #[arg(long, default_value_t = 0)]
    pub trace_seed: u64,
    /// Directory with the trace tables. Default: $VENN_DATA/traces, else a copy in
    /// ~/.local/share/venn, else ../shared/data/traces, else the tables built in.
    #[arg(long, env = "VENN_TRACES_DIR")]
    pub traces_dir: Option<PathBuf>,
    /// Keep this share of the check-ins and scale per-round demand by it: a
    /// cheaper run with about the same contention (1 = full volume).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Times the 5-day block is replayed (default: the workload's NUM_WEEK).
    #[arg(long)]
    pub replicas: Option<u32>,
}

/// Knobs of the simulation itself.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// TOML file with a `SimConfig`; command-line flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Parameters of the policies (each applies to the policies that have it).
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Seconds a device stays online after its traced end.
    #[arg(long)]
    pub grace: Option<f64>,
    /// Let a device take another task after returning one while still online.
    #[arg(long)]
    pub multi_assign: bool,
    /// Maximum dispatch noise, seconds (the authors': 2).
    #[arg(long)]
    pub jitter: Option<f64>,
    /// Times a task pays the transfer term (the authors' client: 2).
    #[arg(long)]
    pub comm_trips: Option<f64>,
    /// How a device judges an offered job (it takes the first that fits before it goes
    /// offline): `nominal` (the authors' client: compute + transfer time on the
    /// reference device), `device-speed` (its own time) or `any`.
    #[arg(long, value_enum)]
    pub fit: Option<venn_core::FitRule>,
    /// Stop at this simulated second (default: end of the replay).
    #[arg(long)]
    pub horizon: Option<f64>,
    /// Parallel runs (default: available cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl SimArgs {
    /// The base config: the TOML file if given, then the flags.
    pub fn config(&self, input: &InputArgs, seed: u64) -> anyhow::Result<SimConfig> {
        let mut c = match &self.config {
            Some(p) => SimConfig::from_toml_file(p)?,
            None => SimConfig::default(),
        };
        c.seed = seed;
        self.policy.apply(&mut c.policy);
        if let Some(v) = self.grace {
            c.grace_s = v;
        }
        if self.multi_assign {
            c.one_assignment_per_checkin = false;
        }
        if let Some(v) = self.jitter {
            c.dispatch_jitter_s = v;
        }
        if let Some(v) = self.comm_trips {
            c.comm_trips = v;
        }
        if let Some(v) = self.fit {
            c.fit = v;
        }
        if let Some(v) = self.horizon {
            c.horizon_s = Some(v);
        }
        if input.replicas.is_some() {
            c.replicas = input.replicas;
        }
        c.validate()?;
        Ok(c)
    }

    /// `base` under the policy called `name` (`base`'s parameters if it names the same
    /// policy, else the policy's defaults), with the policy flags applied.
    pub fn with_policy(&self, base: &SimConfig, name: &str) -> SimConfig {
        SimConfig {
            policy: self.policy.resolve(&base.policy, name),
            ..base.clone()
        }
    }

    /// Threads to use.
    pub fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }
}

/// Loaded once per process and shared by every run.
pub struct Inputs {
    /// The availability trace.
    pub trace: AvailabilityTrace,
    /// The device tables.
    pub catalog: DeviceCatalog,
    /// The traces directory.
    pub traces_dir: PathBuf,
    /// Scale factor.
    pub scale: f64,
}

impl Inputs {
    /// Loads the trace (or generates the synthetic one) and the device tables.
    pub fn load(args: &InputArgs) -> anyhow::Result<Self> {
        let traces_dir = locate_traces(args.traces_dir.as_deref())
            .context("finding the trace tables")?
            .announce()
            .path
            .clone();
        let catalog = DeviceCatalog::load(&traces_dir)?;
        let t0 = std::time::Instant::now();
        let synthetic = SyntheticOptions {
            seed: args.trace_seed,
            ..SyntheticOptions::default()
        };
        let trace = load_trace(args.trace.as_deref(), &synthetic)?;
        tracing::info!(
            rows = trace.len(),
            secs = format!("{:.2}", t0.elapsed().as_secs_f64()),
            source = args
                .trace
                .as_ref()
                .map_or("synthetic".to_string(), |p| p.display().to_string()),
            "availability trace ready"
        );
        if !(args.scale > 0.0 && args.scale <= 1.0) {
            bail!("--scale must be in (0, 1]");
        }
        Ok(Inputs {
            trace,
            catalog,
            traces_dir,
            scale: args.scale,
        })
    }

    /// The prepared input of one workload.
    pub fn workload(&self, name: &str, job_seed: Option<u64>) -> anyhow::Result<SimInput> {
        let (jobs, replicas) = load_workload(name, &self.traces_dir, job_seed)?;
        Ok(SimInput::new(
            self.trace.clone(),
            &self.catalog,
            &jobs,
            replicas,
            self.scale,
        )?)
    }
}

/// Which average JCT speed-ups compare.
#[derive(Debug, Clone, Copy, Default, clap::ValueEnum)]
pub enum Average {
    /// Over all jobs, unfinished ones counted up to the horizon.
    #[default]
    Censored,
    /// Over finished jobs only, as the authors' `show_state` does (it skips
    /// jobs whose JCT is not positive, i.e. unfinished ones).
    Finished,
}

impl Average {
    /// The chosen average of a run.
    pub fn of(self, r: &SimResult) -> f64 {
        match self {
            Average::Censored => r.summary.avg_jct_s,
            Average::Finished => r.summary.avg_jct_finished_s,
        }
    }
}

/// One run to do: a label, which input, which config.
pub struct Task<'a> {
    /// Shown on the progress bar.
    pub label: String,
    /// The input.
    pub input: &'a SimInput,
    /// The config.
    pub config: SimConfig,
}

/// Runs tasks on `threads` threads with one progress bar each; results come
/// back in task order.
pub fn run_all(tasks: Vec<Task<'_>>, threads: usize) -> anyhow::Result<Vec<SimResult>> {
    let n = tasks.len();
    let multi = MultiProgress::new();
    let style = ProgressStyle::with_template(
        "{prefix:>24} [{bar:30}] {percent:>3}% {elapsed_precise} eta {eta}",
    )
    .expect("valid template")
    .progress_chars("=> ");
    let overall = multi.add(ProgressBar::new(n as u64));
    overall.set_style(
        ProgressStyle::with_template("{prefix:>24} {pos}/{len} runs, {elapsed_precise}")
            .expect("valid template"),
    );
    overall.set_prefix("total");
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Option<anyhow::Result<SimResult>>>> =
        Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.min(n).max(1) {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut g = next.lock().expect("no panics while locked");
                        let i = *g;
                        *g += 1;
                        i
                    };
                    if i >= n {
                        break;
                    }
                    let t = &tasks[i];
                    let bar = multi.insert_before(&overall, ProgressBar::new(1));
                    bar.set_style(style.clone());
                    bar.set_prefix(t.label.clone());
                    let r = run_with_progress(t.input, &t.config, |done, total| {
                        bar.set_length(total.max(1));
                        bar.set_position(done);
                    })
                    .with_context(|| format!("run {}", t.label));
                    bar.finish_and_clear();
                    overall.inc(1);
                    if let Ok(r) = &r {
                        tracing::debug!(
                            run = %t.label,
                            avg_jct = r.summary.avg_jct_s,
                            wall = r.perf.wall_s,
                            "done"
                        );
                    }
                    results.lock().expect("no panics while locked")[i] = Some(r);
                }
            });
        }
    });
    overall.finish_and_clear();
    results
        .into_inner()
        .expect("no panics while locked")
        .into_iter()
        .map(|r| r.expect("every task ran"))
        .collect()
}

/// Formats seconds with thousands separators.
pub fn secs(v: f64) -> String {
    let n = v.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// One line of admission figures, when the run had admission on.
pub fn admission_line(r: &SimResult) -> Option<String> {
    let a = r.summary.admission.as_ref()?;
    Some(format!(
        "admission ({:?}): {} submitted, {} admitted, {} declined, {} evicted ({:.1} %), {} completed; \
         welfare {:.1}, revenue {:.1}; planned utilisation {:.2}, device utilisation {:.2}",
        a.mode,
        a.submitted,
        a.admitted,
        a.declined,
        a.evicted,
        100.0 * a.eviction_rate,
        a.completed,
        a.welfare,
        a.revenue,
        a.planned_utilisation,
        a.device_utilisation
    ))
}
