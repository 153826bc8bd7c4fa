//! Turning loaded inputs into what the engine runs on: one `venn-core`
//! device profile per (capacity row, eligibility set) pair, and the jobs with
//! their core requirements.
//!
//! Eligibility in the core equals the trace's eligibility sets: a job's
//! requirement is its spec's thresholds, and a device's scores are the
//! smallest hardware meeting exactly its eligible specs
//! ([`SpecTable::hardware_for`]). Profiles are built once, so a check-in is an
//! index computation and never allocates.

use std::path::Path;

use venn_core::{DataPartition, DeviceProfile as CoreProfile, Requirement, TaskWork};

use super::error::SimError;
use venn_traces::jobs::{CATALOG_FILE, WORKLOAD_CONFIGS_FILE, WORKLOAD_NAMES};
use venn_traces::{
    AvailabilityTrace, CheckInRow, DeviceCatalog, JobCatalog, JobGenOptions, JobRow, JobTrace,
    SpecMask, SpecTable, SyntheticOptions, WorkloadConfigs, generate_jobs, resolve_workload,
};

/// The biased workloads of the paper's Table 4; they have no shipped job CSV
/// and are generated from the catalog ([`generate_jobs`]).
pub const BIASED_WORKLOADS: [&str; 4] = ["general", "comp_heavy", "mem_heavy", "res_intensive"];

/// Loads an availability trace, or generates the default synthetic one
/// (calibrated to the authors' trace volume) when `path` is `None`.
pub fn load_trace(
    path: Option<&Path>,
    synthetic: &SyntheticOptions,
) -> Result<AvailabilityTrace, SimError> {
    Ok(match path {
        Some(p) => AvailabilityTrace::load(p)?,
        None => AvailabilityTrace::from_rows(synthetic.rows()?.collect()),
    })
}

/// Loads a workload: a shipped name (`even`, `small`, ...), a biased name
/// (generated with `job_seed`, default the workload's seed), or a job CSV
/// path. Returns the jobs and the workload's replica count when known.
pub fn load_workload(
    arg: &str,
    traces_dir: &Path,
    job_seed: Option<u64>,
) -> Result<(Vec<JobRow>, Option<u32>), SimError> {
    let specs = SpecTable::load(&traces_dir.join(venn_traces::devices::SPECS_FILE))?;
    let configs = WorkloadConfigs::load(&traces_dir.join(WORKLOAD_CONFIGS_FILE)).ok();
    let replicas = configs
        .as_ref()
        .and_then(|c| c.get(arg))
        .map(|c| c.num_week);
    if BIASED_WORKLOADS.contains(&arg) && !WORKLOAD_NAMES.contains(&arg) {
        let configs = WorkloadConfigs::load(&traces_dir.join(WORKLOAD_CONFIGS_FILE))?;
        let wl = configs
            .get(arg)
            .ok_or_else(|| SimError::Config(format!("workload `{arg}` not in the configs")))?;
        let catalog = JobCatalog::load(&traces_dir.join(CATALOG_FILE))?;
        let opts = JobGenOptions {
            seed: job_seed,
            ..JobGenOptions::default()
        };
        let t = generate_jobs(&catalog, wl, &specs, &opts)?;
        return Ok((t.jobs, replicas));
    }
    let path = resolve_workload(arg, traces_dir)?;
    let t = JobTrace::load_with_specs(&path, &specs)?;
    Ok((t.jobs, replicas))
}

/// Device profiles by slot, and the map from a check-in's block index to its slot.
#[derive(Clone, Debug)]
pub struct DeviceTable {
    profiles: Vec<CoreProfile>,
    masks: Vec<SpecMask>,
    /// Eligibility row → index into `masks`.
    eli_slot: Vec<u16>,
    n_cap: usize,
}

impl DeviceTable {
    /// Builds the table from the three device files.
    pub fn new(catalog: &DeviceCatalog) -> Result<Self, SimError> {
        let mut masks: Vec<SpecMask> = Vec::new();
        let mut eli_slot = Vec::with_capacity(catalog.eligibility.len());
        for &m in catalog.eligibility.masks() {
            let k = match masks.iter().position(|x| *x == m) {
                Some(k) => k,
                None => {
                    masks.push(m);
                    masks.len() - 1
                }
            };
            eli_slot.push(k as u16);
        }
        let mut hw = Vec::with_capacity(masks.len());
        for &m in &masks {
            let h = catalog.specs.hardware_for(m).ok_or_else(|| {
                SimError::Config(format!(
                    "no hardware meets exactly the eligibility set {m}; the spec thresholds cannot express it"
                ))
            })?;
            hw.push(h);
        }
        let caps = catalog.capacity.rows();
        let mut profiles = Vec::with_capacity(caps.len() * masks.len());
        for c in caps {
            for h in &hw {
                profiles.push(
                    CoreProfile::new(h.cpu_f, h.fp16_memory, h.android_os)
                        .with_speed(c.ms_per_sample, c.bandwidth_kbps),
                );
            }
        }
        if profiles.is_empty() {
            return Err(SimError::Config("empty device catalog".into()));
        }
        Ok(DeviceTable {
            profiles,
            masks,
            eli_slot,
            n_cap: caps.len(),
        })
    }

    /// Slot of the check-in with block index `base_index`: capacity row
    /// `base_index mod n_cap`, eligibility row `base_index mod n_eli`, as in
    /// the authors' simulator.
    #[inline]
    pub fn slot(&self, base_index: u32) -> u32 {
        let i = base_index as usize;
        let cap = i % self.n_cap;
        let m = self.eli_slot[i % self.eli_slot.len()] as usize;
        (cap * self.masks.len() + m) as u32
    }

    /// The core profile in `slot`.
    #[inline]
    pub fn profile(&self, slot: u32) -> &CoreProfile {
        &self.profiles[slot as usize]
    }

    /// The eligibility set of `slot`.
    pub fn mask(&self, slot: u32) -> SpecMask {
        self.masks[slot as usize % self.masks.len()]
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.profiles.len()
    }

    /// Never true for a built table.
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }
}

/// A job as the engine runs it.
#[derive(Clone, Debug)]
pub struct SimJob {
    /// The trace row.
    pub row: JobRow,
    /// The core requirement built from the row's spec.
    pub requirement: Requirement,
    /// Results that close a round early; `None` (traces): `ceil(demand ×
    /// min_response_fraction)`. A driver whose jobs over-commit (`venn-lab sim`: demand =
    /// target × over-commit, closing at a fraction of the target) sets it.
    pub close_at: Option<u32>,
    /// The work of one task, when tasks are timed from it (with the input's
    /// [`DataPartition`]); `None`: the row's `workload_s` and `comm_s` (see
    /// [`work`](super::work)).
    pub work: Option<TaskWork>,
}

/// Everything a run reads, prepared once and shared by many runs.
#[derive(Clone, Debug)]
pub struct SimInput {
    /// The availability trace (sorted by start).
    pub trace: AvailabilityTrace,
    /// Device profiles.
    pub devices: DeviceTable,
    /// Jobs in arrival order.
    pub jobs: Vec<SimJob>,
    /// The workload's own replica count (`NUM_WEEK`), if known.
    pub workload_replicas: Option<u32>,
    /// Which samples each device holds, for jobs timed from their [`SimJob::work`].
    pub partition: Option<DataPartition>,
}

impl SimInput {
    /// Prepares a run from loaded parts. `scale` in `(0, 1]` keeps that share
    /// of the trace's rows (evenly strided) and multiplies every job's
    /// per-round demand by it (at least 1), so contention stays about the
    /// same while the run gets `1/scale` times cheaper.
    pub fn new(
        trace: AvailabilityTrace,
        catalog: &DeviceCatalog,
        jobs: &[JobRow],
        workload_replicas: Option<u32>,
        scale: f64,
    ) -> Result<Self, SimError> {
        if !(scale > 0.0 && scale <= 1.0) {
            return Err(SimError::Config(format!("scale {scale} is not in (0, 1]")));
        }
        let trace = if scale < 1.0 {
            let rows: Vec<CheckInRow> = trace
                .rows()
                .iter()
                .enumerate()
                .filter(|(i, _)| ((*i as f64 + 1.0) * scale).floor() > (*i as f64 * scale).floor())
                .map(|(_, r)| *r)
                .collect();
            AvailabilityTrace::from_rows(rows)
        } else {
            trace
        };
        let devices = DeviceTable::new(catalog)?;
        let jobs = jobs
            .iter()
            .map(|r| {
                let mut row = r.clone();
                if scale < 1.0 {
                    row.demand = ((f64::from(row.demand) * scale).round() as u32).max(1);
                }
                Ok(SimJob {
                    requirement: requirement_for(&catalog.specs, &row)?,
                    row,
                    close_at: None,
                    work: None,
                })
            })
            .collect::<Result<Vec<_>, SimError>>()?;
        let mut jobs = jobs;
        jobs.sort_by(|a, b| a.row.arrival_s.total_cmp(&b.row.arrival_s));
        Ok(SimInput {
            trace,
            devices,
            jobs,
            workload_replicas,
            partition: None,
        })
    }
}

/// The core requirement of a job: its spec's thresholds.
pub fn requirement_for(specs: &SpecTable, row: &JobRow) -> Result<Requirement, SimError> {
    let s = specs.get(row.spec_id).ok_or_else(|| {
        SimError::Config(format!(
            "job {} names unknown spec {}",
            row.idx, row.spec_id
        ))
    })?;
    if row.demand == 0
        || row.rounds == 0
        || row.min_response_fraction.is_nan()
        || row.min_response_fraction <= 0.0
    {
        return Err(SimError::Config(format!(
            "job {}: demand, rounds and min_response_fraction must be positive",
            row.idx
        )));
    }
    Ok(Requirement::scores(
        s.min_cpu_f,
        s.min_fp16_memory,
        s.min_android_os,
    ))
}
