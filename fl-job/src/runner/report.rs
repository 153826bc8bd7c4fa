//! A job's results: one row per aggregated round, appended to a CSV as it happens, and
//! the snapshot the job serves at `GET /v1/results` ([`JobResults`]) for a collector on
//! another host.

use crate::error::JobError;
use fl_task::EvalStats;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One aggregated round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoundRow {
    /// Seconds since the experiment started: wall-clock seconds in a live run
    /// (`venn-lab run`, `fl-job`), virtual seconds on the simulated clock (`venn-lab sim`).
    /// Read back from older CSVs under its former name `wall_s`.
    #[serde(alias = "wall_s")]
    pub time_s: f64,
    /// Round number.
    pub round: u32,
    /// Attempts it took (aborts + 1).
    pub attempts: u32,
    /// Test accuracy after aggregation (NaN until evaluated).
    #[serde(deserialize_with = "nan_if_null")]
    pub accuracy: f64,
    /// Test loss after aggregation.
    #[serde(deserialize_with = "nan_if_null")]
    pub loss: f64,
    /// Samples the accuracy was measured on (the job's fixed evaluation set); 0 when
    /// unknown (rows from before it was recorded).
    #[serde(default)]
    pub eval_samples: u32,
    /// Lower end of the accuracy's 95 % Wilson interval over those samples.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub accuracy_lo: f64,
    /// Upper end of the accuracy's 95 % Wilson interval.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub accuracy_hi: f64,
    /// Updates aggregated.
    pub participants: u32,
    /// Devices assigned whose update was not used.
    pub stragglers: u32,
    /// Request to last assignment, seconds (manager's view).
    #[serde(deserialize_with = "nan_if_null")]
    pub scheduling_delay_s: f64,
    /// Last assignment to close, seconds.
    #[serde(deserialize_with = "nan_if_null")]
    pub response_collection_s: f64,
}

fn nan() -> f64 {
    f64::NAN
}

/// JSON has no NaN: serde_json writes a NaN (a row not evaluated, an interval without a
/// sample count) as `null`, which must read back as NaN, not fail the whole document.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl RoundRow {
    /// A row scheduled but not yet evaluated (accuracy, loss and interval NaN).
    pub fn unevaluated(time_s: f64, round: u32, attempts: u32) -> Self {
        RoundRow {
            time_s,
            round,
            attempts,
            accuracy: f64::NAN,
            loss: f64::NAN,
            eval_samples: 0,
            accuracy_lo: f64::NAN,
            accuracy_hi: f64::NAN,
            participants: 0,
            stragglers: 0,
            scheduling_delay_s: f64::NAN,
            response_collection_s: f64::NAN,
        }
    }

    /// Fills in an evaluation: accuracy, loss, the sample count and the accuracy's 95 %
    /// Wilson interval.
    pub fn set_eval(&mut self, stats: &EvalStats) {
        self.accuracy = stats.accuracy;
        self.loss = stats.loss;
        self.eval_samples = u32::try_from(stats.samples).unwrap_or(u32::MAX);
        let (lo, hi) = venn_core::stats::wilson(stats.accuracy, stats.samples as u64)
            .map_or((f64::NAN, f64::NAN), |i| (i.lo, i.hi));
        self.accuracy_lo = lo;
        self.accuracy_hi = hi;
    }
}

/// A job's run.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// Job name.
    pub name: String,
    /// Id at the manager.
    pub job_id: u64,
    /// When it registered (seconds since the experiment start).
    pub registered_s: f64,
    /// When it finished.
    pub finished_s: Option<f64>,
    /// Its rounds.
    pub rounds: Vec<RoundRow>,
    #[serde(skip)]
    csv: Option<PathBuf>,
}

impl JobReport {
    pub(crate) fn new(
        name: &str,
        job_id: u64,
        registered_s: f64,
        csv: Option<PathBuf>,
    ) -> Result<Self, JobError> {
        if let Some(p) = &csv
            && let Some(dir) = p.parent()
        {
            std::fs::create_dir_all(dir)
                .map_err(|e| JobError::Io(format!("{}: {e}", dir.display())))?;
        }
        Ok(JobReport {
            name: name.into(),
            job_id,
            registered_s,
            finished_s: None,
            rounds: Vec::new(),
            csv,
        })
    }

    pub(crate) fn push(&mut self, row: RoundRow) -> Result<(), JobError> {
        if let Some(p) = &self.csv {
            let new = !p.exists();
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| JobError::Io(format!("{}: {e}", p.display())))?;
            let mut w = csv::WriterBuilder::new().has_headers(new).from_writer(f);
            w.serialize(&row)
                .map_err(|e| JobError::Io(format!("{}: {e}", p.display())))?;
            w.flush()
                .map_err(|e| JobError::Io(format!("{}: {e}", p.display())))?;
        }
        self.rounds.push(row);
        Ok(())
    }

    /// Job completion time (registration to finish), if finished.
    pub fn jct_s(&self) -> Option<f64> {
        self.finished_s.map(|f| f - self.registered_s)
    }

    /// First time (since the experiment start) the job reached `accuracy`.
    pub fn time_to_accuracy(&self, accuracy: f64) -> Option<f64> {
        self.rounds
            .iter()
            .find(|r| r.accuracy >= accuracy)
            .map(|r| r.time_s)
    }
}

/// Where a job stands, as its results say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Not yet registered with the manager.
    Starting,
    /// Registered; rounds under way.
    Running,
    /// Every round aggregated (or the target accuracy reached) and the manager told.
    Finished,
    /// Ended on an error ([`JobResults::error`]).
    Failed,
}

impl JobState {
    /// Finished or failed: nothing more will change.
    pub fn ended(self) -> bool {
        matches!(self, JobState::Finished | JobState::Failed)
    }
}

/// `GET /v1/results` on a job: its rounds so far, on two clocks. `registered_s`,
/// `finished_s` and each row's `time_s` are seconds on the job's own clock (since its
/// process's experiment start); `registered_at` is the manager's clock at registration,
/// which places jobs on different hosts on one timeline without synchronised clocks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobResults {
    /// Job name.
    pub name: String,
    /// Where it stands.
    pub state: JobState,
    /// Id at the manager, once registered.
    pub job_id: Option<u64>,
    /// The manager's clock at registration, UNIX seconds.
    pub registered_at: Option<f64>,
    /// When it registered, on the job's clock.
    pub registered_s: Option<f64>,
    /// When it finished, on the job's clock.
    pub finished_s: Option<f64>,
    /// Why it failed.
    pub error: Option<String>,
    /// Its rounds.
    pub rounds: Vec<RoundRow>,
}

impl JobResults {
    /// A job named `name` that has not registered yet.
    pub fn starting(name: &str) -> Self {
        JobResults {
            name: name.into(),
            state: JobState::Starting,
            job_id: None,
            registered_at: None,
            registered_s: None,
            finished_s: None,
            error: None,
            rounds: Vec::new(),
        }
    }

    /// Job completion time (registration to finish), if finished.
    pub fn jct_s(&self) -> Option<f64> {
        Some(self.finished_s? - self.registered_s?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unevaluated_row_survives_json_and_csv() {
        let row = RoundRow::unevaluated(3.0, 1, 2);
        let json = serde_json::to_string(&row).unwrap();
        let back: RoundRow = serde_json::from_str(&json).unwrap();
        assert!(back.accuracy.is_nan() && back.accuracy_lo.is_nan() && back.loss.is_nan());
        assert_eq!((back.time_s, back.round, back.attempts), (3.0, 1, 2));
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(&row).unwrap();
        let bytes = w.into_inner().unwrap();
        let back: RoundRow = csv::Reader::from_reader(bytes.as_slice())
            .deserialize()
            .next()
            .unwrap()
            .unwrap();
        assert!(back.accuracy_hi.is_nan());
        // A row from before the interval columns existed reads with NaN bounds.
        let old = "time_s,round,attempts,accuracy,loss,participants,stragglers,scheduling_delay_s,response_collection_s\n1,0,1,0.5,1.2,3,0,0.1,0.2\n";
        let back: RoundRow = csv::Reader::from_reader(old.as_bytes())
            .deserialize()
            .next()
            .unwrap()
            .unwrap();
        assert_eq!((back.accuracy, back.eval_samples), (0.5, 0));
        assert!(back.accuracy_lo.is_nan());
    }
}
