//! What a soak found: the load's figures, each fault with its time to recover, each job
//! with its restarts, the database checks, and notes on what was observed but is not a
//! pass/fail check; printed as a table for people and serialisable as JSON.

use serde::Serialize;

use super::verify::Check;

/// One fault as it happened.
#[derive(Clone, Debug, Serialize)]
pub struct FaultRecord {
    /// Seconds after the load started.
    pub at_s: f64,
    /// What was done.
    pub what: String,
    /// What was seen (the job and round, the bytes written, the restart's time).
    pub detail: String,
    /// Seconds from the fault (for a full disk: from freeing it) to the start of the first
    /// check-in that succeeded after it; `None`: none did.
    pub recover_s: Option<f64>,
    /// Whether the fault stops the manager answering (else no recovery is measured).
    pub load_affected: bool,
}

/// One job (one arrival) and how it went.
#[derive(Clone, Debug, Serialize)]
pub struct JobLine {
    /// Its name (`<config name>-w<arrival>`).
    pub name: String,
    /// Whether its last process exited successfully.
    pub finished: bool,
    /// Rows in its CSV (rounds its last process completed).
    pub rounds: usize,
    /// Why its process was started again, one entry per restart.
    pub restarts: Vec<String>,
}

/// Everything a soak measured and checked.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SoakReport {
    /// Wall seconds of the whole soak.
    pub wall_s: f64,
    /// Seconds of load.
    pub load_s: f64,
    /// Check-ins answered 2xx.
    pub check_ins: u64,
    /// Check-ins that failed (no answer or an error status).
    pub failed: u64,
    /// Successful check-ins per second of load.
    pub check_ins_per_s: f64,
    /// Median latency of a successful check-in, ms.
    pub p50_ms: f64,
    /// Its 99th percentile, ms.
    pub p99_ms: f64,
    /// Its worst, ms.
    pub max_ms: f64,
    /// Assignments the load received.
    pub assigned: u64,
    /// Of those, acknowledged by the manager.
    pub acked: u64,
    /// Results the manager acknowledged.
    pub finished: u64,
    /// Load jobs' rounds closed (each when its demand was assigned).
    pub load_rounds: u64,
    /// 5xx answers the load saw.
    pub server_errors: u64,
    /// The faults in time order.
    pub faults: Vec<FaultRecord>,
    /// The jobs.
    pub jobs: Vec<JobLine>,
    /// The checks, and whether each held.
    pub checks: Vec<Check>,
    /// Observations that are not checks.
    pub notes: Vec<String>,
}

impl SoakReport {
    /// Whether every check held.
    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.held)
    }

    /// The report for people.
    pub fn table(&self) -> String {
        let mut s = format!(
            "load: {} check-ins in {:.1} s = {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms; \
             {} failed ({} answered 5xx)\n\
             assignments: {} received, {} acknowledged, {} results acknowledged; {} load rounds closed\n",
            self.check_ins,
            self.load_s,
            self.check_ins_per_s,
            self.p50_ms,
            self.p99_ms,
            self.max_ms,
            self.failed,
            self.server_errors,
            self.assigned,
            self.acked,
            self.finished,
            self.load_rounds,
        );
        s += &format!(
            "{:>7}  {:<38} {:>11}  detail\n",
            "at s", "fault", "recover s"
        );
        for f in &self.faults {
            let rec = match (f.load_affected, f.recover_s) {
                (false, _) => "-".to_string(),
                (true, None) => "never".to_string(),
                (true, Some(r)) => format!("{r:.2}"),
            };
            s += &format!(
                "{:>7.1}  {:<38} {:>11}  {}\n",
                f.at_s, f.what, rec, f.detail
            );
        }
        for j in &self.jobs {
            s += &format!(
                "job {:<14} {} {} rounds{}\n",
                j.name,
                if j.finished {
                    "finished"
                } else {
                    "NOT FINISHED"
                },
                j.rounds,
                if j.restarts.is_empty() {
                    String::new()
                } else {
                    format!("; restarted: {}", j.restarts.join("; "))
                }
            );
        }
        for c in &self.checks {
            s += &format!(
                "{} {}: {}\n",
                if c.held { "ok  " } else { "FAIL" },
                c.what,
                c.found
            );
        }
        for n in &self.notes {
            s += &format!("note: {n}\n");
        }
        s += &format!(
            "soak {} in {:.1} s\n",
            if self.passed() { "passed" } else { "FAILED" },
            self.wall_s
        );
        s
    }
}
