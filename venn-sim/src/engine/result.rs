//! What a run produces: one record per job, a summary, and performance
//! counters, with writers for the per-job CSV and the JSON summary.
//!
//! The per-job CSV and `summary.json` depend only on the inputs and the
//! config, so the same seed gives byte-identical files; wall-clock figures go
//! to [`Perf`] (`perf.json`) instead.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::SimError;

/// The outcome of one job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Job index in the trace.
    pub idx: u32,
    /// Catalog configuration id.
    pub config_id: u32,
    /// Arrival, seconds.
    pub arrival_s: f64,
    /// Completion, seconds; `None` if it did not finish by the horizon.
    pub finish_s: Option<f64>,
    /// `finish − arrival`, or `horizon − arrival` for an unfinished job.
    pub jct_s: f64,
    /// Sum over its closed rounds (aborted ones included) of the scheduling delay.
    pub sched_delay_s: f64,
    /// Sum over its closed rounds of the response-collection time.
    pub response_collection_s: f64,
    /// Successful rounds.
    pub rounds: u32,
    /// Rounds the job needs.
    pub rounds_target: u32,
    /// Aborted round attempts.
    pub aborted_rounds: u32,
    /// Spec id.
    pub spec_id: u8,
    /// Spec name.
    pub spec_name: String,
    /// Devices per round.
    pub demand: u32,
    /// `demand × rounds_target`: the job's total demand.
    pub total_demand: u64,
    /// Fair-share JCT the core fixed at the job's first request, if it did.
    pub fair_share_jct_s: Option<f64>,
    /// With admission: `admitted`, `declined` or `evicted`.
    pub admission: Option<String>,
    /// With admission: when the job was allowed to start.
    pub launch_s: Option<f64>,
    /// With admission: value realised at completion (0 if it did not complete).
    pub value: Option<f64>,
    /// With admission: payment charged.
    pub payment: Option<f64>,
}

impl JobRecord {
    /// Whether it finished by the horizon.
    pub fn finished(&self) -> bool {
        self.finish_s.is_some()
    }
}

/// Aggregates of one run. Deterministic for a given input and config.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Policy.
    pub policy: String,
    /// Seed.
    pub seed: u64,
    /// Jobs in the trace.
    pub jobs: usize,
    /// Jobs finished by the horizon.
    pub finished: usize,
    /// Jobs not finished by the horizon (their JCT is censored at the horizon).
    pub unfinished: usize,
    /// Mean JCT over all arrived jobs, unfinished ones counted up to the
    /// horizon (a lower bound for them). Speed-ups use this.
    pub avg_jct_s: f64,
    /// Mean JCT over finished jobs only.
    pub avg_jct_finished_s: f64,
    /// Mean per-job total scheduling delay.
    pub avg_sched_delay_s: f64,
    /// Mean per-job total response-collection time.
    pub avg_response_collection_s: f64,
    /// Device check-ins offered to the core.
    pub check_ins: u64,
    /// Tasks assigned.
    pub assignments: u64,
    /// Tasks whose result arrived while their round was open.
    pub results: u64,
    /// Tasks lost because the device went offline first.
    pub tasks_failed: u64,
    /// Results that arrived after their round had closed.
    pub stragglers: u64,
    /// Successful rounds.
    pub rounds_succeeded: u64,
    /// Aborted round attempts.
    pub rounds_aborted: u64,
    /// Events processed (check-ins included).
    pub events: u64,
    /// Planning passes the core ran (one per check-in after a queue change).
    pub plans: u64,
    /// Last simulated time reached, seconds.
    pub end_time_s: f64,
    /// Horizon, seconds.
    pub horizon_s: f64,
    /// Admission figures, when admission was on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<super::admission::AdmissionSummary>,
}

/// Wall-clock figures of one run (not deterministic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Perf {
    /// Seconds of the event loop.
    pub wall_s: f64,
    /// Events per second.
    pub events_per_s: f64,
    /// Check-ins per second.
    pub check_ins_per_s: f64,
}

/// Everything a run returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    /// Per job, in arrival order.
    pub jobs: Vec<JobRecord>,
    /// Aggregates.
    pub summary: Summary,
    /// Timing.
    pub perf: Perf,
}

/// Header of the per-job CSV.
pub const JOBS_CSV_HEADER: &str = "job_idx,config_id,spec_id,spec_name,demand,total_demand,rounds_target,rounds,aborted_rounds,arrival_s,finish_s,jct_s,sched_delay_s,response_collection_s,fair_share_jct_s,finished,admission,launch_s,value,payment";

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| format!("{x:.3}"))
}

impl SimResult {
    /// Writes the per-job CSV.
    pub fn write_jobs_csv<W: Write>(&self, mut w: W) -> std::io::Result<()> {
        writeln!(w, "{JOBS_CSV_HEADER}")?;
        for j in &self.jobs {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{:.3},{},{:.3},{:.3},{:.3},{},{},{},{},{},{}",
                j.idx,
                j.config_id,
                j.spec_id,
                j.spec_name,
                j.demand,
                j.total_demand,
                j.rounds_target,
                j.rounds,
                j.aborted_rounds,
                j.arrival_s,
                opt(j.finish_s),
                j.jct_s,
                j.sched_delay_s,
                j.response_collection_s,
                opt(j.fair_share_jct_s),
                j.finished(),
                j.admission.as_deref().unwrap_or(""),
                opt(j.launch_s),
                opt(j.value),
                opt(j.payment),
            )?;
        }
        w.flush()
    }

    /// Writes `jobs.csv`, `summary.json` and `perf.json` into `dir`
    /// (created if missing), each file name prefixed with `prefix`.
    pub fn write_dir(&self, dir: &Path, prefix: &str) -> Result<(), SimError> {
        let io = |p: &Path| {
            let path = p.display().to_string();
            move |source| SimError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let p = dir.join(format!("{prefix}jobs.csv"));
        let f = std::fs::File::create(&p).map_err(io(&p))?;
        self.write_jobs_csv(std::io::BufWriter::new(f))
            .map_err(io(&p))?;
        for (name, value) in [
            ("summary.json", serde_json::to_string_pretty(&self.summary)),
            ("perf.json", serde_json::to_string_pretty(&self.perf)),
        ] {
            let p = dir.join(format!("{prefix}{name}"));
            let text = value.map_err(|e| SimError::Io {
                path: p.display().to_string(),
                source: std::io::Error::other(e),
            })?;
            std::fs::write(&p, text + "\n").map_err(io(&p))?;
        }
        Ok(())
    }
}
