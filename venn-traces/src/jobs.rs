//! Job traces: loading the shipped `venn_jobs_<workload>_workload.csv` files,
//! resolving `--workload`, and generating new traces from the job catalog.
//!
//! The generator follows the authors' recipe (first job at 3600 s, then
//! exponential gaps with mean 1800 s; catalog configuration drawn by the
//! workload's weights; 50 jobs by default) but draws from ChaCha8 seeded by a
//! `u64`, so it does **not** reproduce numpy's `RandomState` stream: use the
//! shipped CSVs when numpy-exact traces are wanted.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, weighted::WeightedIndex};

use super::devices::{MAX_SPEC_ID, SpecTable};
use super::error::InputError;
use super::lines::{empty, for_each_record};

/// Workload names with a shipped job CSV (`venn_jobs_<name>_workload.csv`).
pub const WORKLOAD_NAMES: [&str; 6] = ["even", "small", "large", "high", "low", "seed2"];
/// File name of the job catalog inside the traces directory.
pub const CATALOG_FILE: &str = "venn_job_catalog.csv";
/// File name of the workload configurations inside the traces directory.
pub const WORKLOAD_CONFIGS_FILE: &str = "venn_workload_configs.csv";

/// One job of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRow {
    /// 0-based job index.
    pub idx: u32,
    /// Arrival time, seconds.
    pub arrival_s: f64,
    /// 1-based catalog configuration id.
    pub config_id: u32,
    /// Devices wanted per round.
    pub demand: u32,
    /// Number of rounds.
    pub rounds: u32,
    /// Round deadline, seconds.
    pub deadline_s: f64,
    /// Per-device compute workload at the reference speed, seconds.
    pub workload_s: f64,
    /// Per-device communication time at the reference bandwidth, seconds.
    pub comm_s: f64,
    /// Fraction of the demand that must respond for a round to succeed.
    pub min_response_fraction: f64,
    /// 1-based eligibility spec id.
    pub spec_id: u8,
    /// Spec name, e.g. `General`.
    pub spec_name: String,
}

/// A list of jobs in arrival order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobTrace {
    /// The jobs.
    pub jobs: Vec<JobRow>,
}

const JOB_COLUMNS: [&str; 11] = [
    "job_idx",
    "arrival_s",
    "config_id",
    "participants_per_round",
    "total_rounds",
    "round_deadline_s",
    "workload_s",
    "comm_s",
    "min_response_fraction",
    "eligibility_spec",
    "spec_name",
];

impl JobTrace {
    /// Loads a job CSV; columns are found by header name, in any order.
    /// Spec ids must lie in `1..=8`.
    pub fn load(path: &Path) -> Result<Self, InputError> {
        Self::load_inner(path, MAX_SPEC_ID)
    }

    /// Like [`JobTrace::load`], but every spec id must exist in `specs`.
    pub fn load_with_specs(path: &Path, specs: &SpecTable) -> Result<Self, InputError> {
        Self::load_inner(path, specs.len().min(usize::from(MAX_SPEC_ID)) as u8)
    }

    fn load_inner(path: &Path, max_spec: u8) -> Result<Self, InputError> {
        let mut jobs = Vec::new();
        for_each_record(path, JOB_COLUMNS, |at, f| {
            let get = |k: usize| f[k];
            let positive = |k: usize, v: f64| {
                if v > 0.0 {
                    Ok(v)
                } else {
                    Err(at.err(format!("column `{}`: {v} must be positive", JOB_COLUMNS[k])))
                }
            };
            let spec = at.u64("eligibility_spec", get(9))?;
            if spec < 1 || spec > u64::from(max_spec) {
                return Err(at.err(format!(
                    "column `eligibility_spec`: spec id {spec} out of range 1..={max_spec}"
                )));
            }
            let frac = at.f64("min_response_fraction", get(8))?;
            if !(0.0..=1.0).contains(&frac) {
                return Err(at.err(format!(
                    "column `min_response_fraction`: {frac} is not in [0, 1]"
                )));
            }
            let arrival_s = at.f64("arrival_s", get(1))?;
            if arrival_s < 0.0 {
                return Err(at.err(format!("column `arrival_s`: {arrival_s} is negative")));
            }
            jobs.push(JobRow {
                idx: at.u32("job_idx", get(0))?,
                arrival_s,
                config_id: at.u32("config_id", get(2))?,
                demand: at.u32("participants_per_round", get(3))?,
                rounds: at.u32("total_rounds", get(4))?,
                deadline_s: positive(5, at.f64("round_deadline_s", get(5))?)?,
                workload_s: at.f64("workload_s", get(6))?,
                comm_s: at.f64("comm_s", get(7))?,
                min_response_fraction: frac,
                spec_id: spec as u8,
                spec_name: get(10).trim().to_string(),
            });
            Ok(())
        })?;
        if jobs.is_empty() {
            return Err(empty(path));
        }
        Ok(JobTrace { jobs })
    }

    /// Writes the trace in the shipped CSV form.
    pub fn write_csv<W: Write>(&self, mut w: W) -> io::Result<()> {
        writeln!(w, "{}", JOB_COLUMNS.join(","))?;
        for j in &self.jobs {
            writeln!(
                w,
                "{},{:.3},{},{},{},{},{},{},{},{},{}",
                j.idx,
                j.arrival_s,
                j.config_id,
                j.demand,
                j.rounds,
                j.deadline_s,
                j.workload_s,
                j.comm_s,
                j.min_response_fraction,
                j.spec_id,
                j.spec_name
            )?;
        }
        w.flush()
    }

    /// Number of jobs.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when there are no jobs.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

/// Resolves a `--workload` argument: one of [`WORKLOAD_NAMES`] maps to
/// `traces_dir/venn_jobs_<name>_workload.csv`; anything else is taken as a
/// path, which must exist.
pub fn resolve_workload(arg: &str, traces_dir: &Path) -> Result<PathBuf, InputError> {
    if WORKLOAD_NAMES.contains(&arg) {
        return Ok(traces_dir.join(format!("venn_jobs_{arg}_workload.csv")));
    }
    let p = PathBuf::from(arg);
    if p.is_file() {
        return Ok(p);
    }
    Err(InputError::UnknownWorkload {
        name: arg.to_string(),
        known: WORKLOAD_NAMES.join(", "),
    })
}

/// One configuration of the job catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogEntry {
    /// 1-based id (position in the authors' YAML list + 1).
    pub config_id: u32,
    /// Devices wanted per round.
    pub demand: u32,
    /// Number of rounds.
    pub rounds: u32,
    /// Round deadline, seconds.
    pub deadline_s: f64,
    /// Per-device workload, seconds.
    pub workload_s: f64,
    /// `sync` for every shipped entry.
    pub job_type: String,
    /// Buffer size for async jobs (0 for all shipped entries).
    pub concurrency: u32,
}

/// The job catalog, in id order.
#[derive(Clone, Debug, PartialEq)]
pub struct JobCatalog {
    /// Entries; `entries[k].config_id == k + 1`.
    pub entries: Vec<CatalogEntry>,
}

impl JobCatalog {
    /// Loads `venn_job_catalog.csv`; ids must run 1, 2, ...
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let names = [
            "config_id",
            "participants_per_round",
            "total_rounds",
            "round_deadline_s",
            "workload_s",
            "job_type",
            "concurrency",
        ];
        let mut entries: Vec<CatalogEntry> = Vec::new();
        for_each_record(path, names, |at, f| {
            let get = |k: usize| f[k];
            let id = at.u32("config_id", get(0))?;
            if id as usize != entries.len() + 1 {
                return Err(at.err(format!(
                    "config_id {id} out of sequence, expected {}",
                    entries.len() + 1
                )));
            }
            entries.push(CatalogEntry {
                config_id: id,
                demand: at.u32("participants_per_round", get(1))?,
                rounds: at.u32("total_rounds", get(2))?,
                deadline_s: at.f64("round_deadline_s", get(3))?,
                workload_s: at.f64("workload_s", get(4))?,
                job_type: get(5).trim().to_string(),
                concurrency: at.u32("concurrency", get(6))?,
            });
            Ok(())
        })?;
        if entries.is_empty() {
            return Err(empty(path));
        }
        Ok(JobCatalog { entries })
    }
}

/// One workload configuration (one of the authors' `config/*_workload.yml`).
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadConfig {
    /// Short name: the YAML file stem without `_workload`, e.g. `even`, `comp_heavy`.
    pub name: String,
    /// numpy seed the authors used (we seed ChaCha8 with it by default).
    pub seed: u64,
    /// Days in the replicated block (5).
    pub num_day: u32,
    /// Number of block replicas (`NUM_WEEK`), also setting the horizon.
    pub num_week: u32,
    /// Unnormalised catalog weights, one per catalog entry.
    pub job_weights: Vec<f64>,
    /// The unused `eligiblility_prob` key of the biased workloads, one weight per spec.
    pub spec_bias: Option<Vec<f64>>,
}

impl WorkloadConfig {
    /// The spec a biased workload emphasises (argmax of its spec weights),
    /// `None` for plain workloads.
    pub fn emphasised_spec(&self) -> Option<u8> {
        let b = self.spec_bias.as_ref()?;
        let (k, _) = b
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))?;
        Some(k as u8 + 1)
    }
}

/// All workload configurations.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadConfigs {
    /// In file order.
    pub configs: Vec<WorkloadConfig>,
}

impl WorkloadConfigs {
    /// Loads `venn_workload_configs.csv`.
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let mut configs = Vec::new();
        let names = [
            "config_file",
            "random_seed",
            "num_day",
            "num_week",
            "job_id_prob_over_33_configs",
            "eligibility_prob_key_present_but_unused",
        ];
        for_each_record(path, names, |at, f| {
            let file = f[0].trim();
            let stem = file.rsplit('/').next().unwrap_or(file);
            let stem = stem.strip_suffix(".yml").unwrap_or(stem);
            let name = stem.strip_suffix("_workload").unwrap_or(stem).to_string();
            let list = |col: &str, s: &str| -> Result<Vec<f64>, InputError> {
                s.split_whitespace().map(|t| at.f64(col, t)).collect()
            };
            let job_weights = list("job_id_prob_over_33_configs", f[4])?;
            if job_weights.iter().any(|&w| w < 0.0) || job_weights.iter().sum::<f64>() <= 0.0 {
                return Err(at.err("column `job_id_prob_over_33_configs`: weights must be non-negative and not all zero"));
            }
            let bias = list("eligibility_prob_key_present_but_unused", f[5])?;
            configs.push(WorkloadConfig {
                name,
                seed: at.u64("random_seed", f[1])?,
                num_day: at.u32("num_day", f[2])?,
                num_week: at.u32("num_week", f[3])?,
                job_weights,
                spec_bias: (!bias.is_empty()).then_some(bias),
            });
            Ok(())
        })?;
        if configs.is_empty() {
            return Err(empty(path));
        }
        Ok(WorkloadConfigs { configs })
    }

    /// The configuration called `name`.
    pub fn get(&self, name: &str) -> Option<&WorkloadConfig> {
        self.configs.iter().find(|c| c.name == name)
    }
}

/// Knobs of [`generate_jobs`]; defaults are the authors' constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobGenOptions {
    /// Number of jobs (default 50).
    pub num_jobs: usize,
    /// ChaCha8 seed; `None` uses the workload's own seed.
    pub seed: Option<u64>,
    /// Arrival of job 0, seconds (default 3600).
    pub first_arrival_s: f64,
    /// Mean exponential gap between arrivals, seconds (default 1800).
    pub mean_interarrival_s: f64,
    /// Per-device communication time, seconds (default 10).
    pub comm_s: f64,
    /// Minimum response fraction (default 0.8).
    pub min_response_fraction: f64,
}

impl Default for JobGenOptions {
    fn default() -> Self {
        JobGenOptions {
            num_jobs: 50,
            seed: None,
            first_arrival_s: 3600.0,
            mean_interarrival_s: 1800.0,
            comm_s: 10.0,
            min_response_fraction: 0.8,
        }
    }
}

/// Generates a job trace for `workload`.
///
/// Draw order mirrors the authors' (all gaps, then all configuration choices,
/// then spec shuffling), but the generator is ChaCha8, not numpy. Specs: plain
/// workloads give job `i` spec `(i mod n_specs) + 1`; a biased workload
/// (`general`, `comp_heavy`, `mem_heavy`, `res_intensive`) gives exactly half
/// the jobs (rounded up) its emphasised spec and splits the rest evenly over
/// the other specs, in seeded random order (paper §5.4). The config's own
/// 0.7 weight is never read by the authors' code, so we use it only to tell
/// which spec is emphasised.
pub fn generate_jobs(
    catalog: &JobCatalog,
    workload: &WorkloadConfig,
    specs: &SpecTable,
    opts: &JobGenOptions,
) -> Result<JobTrace, InputError> {
    if workload.job_weights.len() != catalog.entries.len() {
        return Err(InputError::InvalidOption(format!(
            "workload `{}` has {} catalog weights but the catalog has {} entries",
            workload.name,
            workload.job_weights.len(),
            catalog.entries.len()
        )));
    }
    if opts.mean_interarrival_s.is_nan() || opts.mean_interarrival_s <= 0.0 || specs.is_empty() {
        return Err(InputError::InvalidOption(
            "mean inter-arrival must be positive and at least one spec is needed".into(),
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed.unwrap_or(workload.seed));
    let n = opts.num_jobs;
    let gap = Exp::new(1.0 / opts.mean_interarrival_s)
        .map_err(|e| InputError::InvalidOption(e.to_string()))?;
    let mut arrivals = Vec::with_capacity(n);
    let mut t = opts.first_arrival_s;
    for i in 0..n {
        if i > 0 {
            t += gap.sample(&mut rng);
        }
        arrivals.push(t);
    }
    let pick = WeightedIndex::new(&workload.job_weights)
        .map_err(|e| InputError::InvalidOption(format!("workload `{}`: {e}", workload.name)))?;
    let configs: Vec<usize> = (0..n).map(|_| pick.sample(&mut rng)).collect();
    let n_specs = specs.len() as u8;
    let spec_ids: Vec<u8> = match workload.emphasised_spec() {
        Some(emph) if emph <= n_specs && n_specs > 1 => {
            let half = n.div_ceil(2);
            let others: Vec<u8> = (1..=n_specs).filter(|&s| s != emph).collect();
            let mut v: Vec<u8> = std::iter::repeat_n(emph, half)
                .chain((0..n - half).map(|k| others[k % others.len()]))
                .collect();
            v.shuffle(&mut rng);
            v
        }
        _ => (0..n)
            .map(|i| (i % usize::from(n_specs)) as u8 + 1)
            .collect(),
    };
    let jobs = (0..n)
        .map(|i| {
            let e = &catalog.entries[configs[i]];
            let spec = spec_ids[i];
            JobRow {
                idx: i as u32,
                arrival_s: arrivals[i],
                config_id: e.config_id,
                demand: e.demand,
                rounds: e.rounds,
                deadline_s: e.deadline_s,
                workload_s: e.workload_s,
                comm_s: opts.comm_s,
                min_response_fraction: opts.min_response_fraction,
                spec_id: spec,
                spec_name: specs.get(spec).map(|s| s.name.clone()).unwrap_or_default(),
            }
        })
        .collect();
    Ok(JobTrace { jobs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::Spec;
    use crate::testutil::fixture;

    const HEADER: &str = "job_idx,arrival_s,config_id,participants_per_round,total_rounds,round_deadline_s,workload_s,comm_s,min_response_fraction,eligibility_spec,spec_name\n";

    fn specs() -> SpecTable {
        let names = ["General", "Compute-Rich", "Memory-Rich", "High-Performance"];
        SpecTable::from_specs(
            (1..=4)
                .map(|id| Spec {
                    id,
                    name: names[usize::from(id) - 1].into(),
                    min_fp16_memory: 0.0,
                    min_cpu_f: 0.0,
                    min_android_os: 0.0,
                })
                .collect(),
        )
    }

    fn catalog(k: u32) -> JobCatalog {
        JobCatalog {
            entries: (1..=k)
                .map(|id| CatalogEntry {
                    config_id: id,
                    demand: 100 * id,
                    rounds: 1000,
                    deadline_s: 300.0,
                    workload_s: 30.0,
                    job_type: "sync".into(),
                    concurrency: 0,
                })
                .collect(),
        }
    }

    fn workload(name: &str, weights: Vec<f64>, bias: Option<Vec<f64>>) -> WorkloadConfig {
        WorkloadConfig {
            name: name.into(),
            seed: 10,
            num_day: 5,
            num_week: 30,
            job_weights: weights,
            spec_bias: bias,
        }
    }

    #[test]
    fn loads_and_round_trips() {
        let body = format!(
            "{HEADER}0,3600.000,6,100,3000,300,30,10,0.8,1,General\n1,6255.782,13,400,1000,1000,30,10,0.8,2,Compute-Rich\n"
        );
        let t = JobTrace::load(&fixture("jobs_ok.csv", &body)).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.jobs[1].demand, 400);
        assert_eq!(t.jobs[1].spec_name, "Compute-Rich");
        let mut out = Vec::new();
        t.write_csv(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), body);
    }

    #[test]
    fn rejects_bad_rows() {
        let cases = [
            (
                "jobs_nn.csv",
                "0,soon,6,100,3000,300,30,10,0.8,1,General",
                "arrival_s",
            ),
            (
                "jobs_spec.csv",
                "0,1,6,100,3000,300,30,10,0.8,9,X",
                "out of range",
            ),
            (
                "jobs_spec0.csv",
                "0,1,6,100,3000,300,30,10,0.8,0,X",
                "out of range",
            ),
            ("jobs_col.csv", "0,1,6,100,3000,300,30,10,0.8,1", "found 10"),
            (
                "jobs_frac.csv",
                "0,1,6,100,3000,300,30,10,1.5,1,G",
                "min_response_fraction",
            ),
        ];
        for (name, row, what) in cases {
            let body = format!("{HEADER}0,3600,6,100,3000,300,30,10,0.8,1,General\n{row}\n");
            let e = JobTrace::load(&fixture(name, &body))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("{name}:3:")) && e.contains(what), "{e}");
        }
        let body = format!("{HEADER}0,3600,6,100,3000,300,30,10,0.8,5,X\n");
        let e = JobTrace::load_with_specs(&fixture("jobs_spec5.csv", &body), &specs())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("jobs_spec5.csv:2:") && e.contains("1..=4"),
            "{e}"
        );
        let e = JobTrace::load(&fixture("jobs_hdr.csv", "job_idx,arrival_s\n0,1\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("jobs_hdr.csv:1:") && e.contains("config_id"),
            "{e}"
        );
    }

    #[test]
    fn resolves_names_and_paths() {
        let dir = Path::new("/traces");
        assert_eq!(
            resolve_workload("even", dir).unwrap(),
            dir.join("venn_jobs_even_workload.csv")
        );
        let p = fixture("custom_jobs.csv", HEADER);
        assert_eq!(resolve_workload(p.to_str().unwrap(), dir).unwrap(), p);
        let e = resolve_workload("nonesuch", dir).unwrap_err().to_string();
        assert!(e.contains("nonesuch") && e.contains("even"), "{e}");
    }

    #[test]
    fn generator_is_deterministic_with_mean_gap() {
        let cat = catalog(3);
        let wl = workload("even", vec![1.0, 1.0, 0.0], None);
        let opts = JobGenOptions {
            num_jobs: 4001,
            ..Default::default()
        };
        let a = generate_jobs(&cat, &wl, &specs(), &opts).unwrap();
        let b = generate_jobs(&cat, &wl, &specs(), &opts).unwrap();
        assert_eq!(a, b);
        let c = generate_jobs(
            &cat,
            &wl,
            &specs(),
            &JobGenOptions {
                seed: Some(11),
                ..opts
            },
        )
        .unwrap();
        assert_ne!(a, c);
        assert_eq!(a.jobs[0].arrival_s, 3600.0);
        let mean = (a.jobs[4000].arrival_s - 3600.0) / 4000.0;
        // Standard error of the mean gap is 1800/sqrt(4000), about 28 s.
        assert!((mean - 1800.0).abs() < 120.0, "mean gap {mean}");
        assert!(a.jobs.iter().all(|j| j.config_id != 3), "zero weight drawn");
        for (i, j) in a.jobs.iter().enumerate() {
            assert_eq!(usize::from(j.spec_id), i % 4 + 1);
        }
        assert!(a.jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
    }

    #[test]
    fn biased_workload_gives_half_to_emphasised_spec() {
        let wl = workload("comp_heavy", vec![1.0; 3], Some(vec![0.1, 0.7, 0.1, 0.1]));
        assert_eq!(wl.emphasised_spec(), Some(2));
        let t = generate_jobs(&catalog(3), &wl, &specs(), &JobGenOptions::default()).unwrap();
        let count = |s: u8| t.jobs.iter().filter(|j| j.spec_id == s).count();
        assert_eq!(count(2), 25);
        let rest = [count(1), count(3), count(4)];
        assert_eq!(rest.iter().sum::<usize>(), 25);
        assert!(rest.iter().all(|&c| (8..=9).contains(&c)), "{rest:?}");
        assert!(
            t.jobs
                .iter()
                .all(|j| j.spec_name == specs().get(j.spec_id).unwrap().name)
        );
    }
}
