//! Collecting an experiment that ran on several hosts (`venn-lab gather`): each FL job's
//! rounds from its `GET /v1/results`, each device-agent shard's counters from its
//! `GET /v1/stats`, the policy from the manager's `/v1/status`, written as the same
//! results folder `venn-lab run` writes (per-job CSVs, `summary.json`, `tta.csv`,
//! `accuracy.png`).
//!
//! The hosts' clocks need not agree: every job's times are its own clock's differences
//! (registration to each round, to the finish), anchored at the time the manager — one
//! clock for all — registered it. Times in the folder are seconds since the first job
//! registered.

use crate::config::LabConfig;
use crate::results::{JobOutcome, LabResult};
use device_agent::agent::AgentStats;
use fl_job::runner::{JobResults, JobState, RoundRow};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::Path;
use std::time::{Duration, Instant};
use venn_api::job::{AGENT_STATS_PATH, RESULTS_PATH};

/// Where the experiment's parts serve what is collected.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// The manager's base URL.
    pub manager: String,
    /// Each FL job's base URL (its `plan_url`).
    pub jobs: Vec<String>,
    /// Each device-agent shard's `--stats-listen` base URL.
    pub devices: Vec<String>,
}

/// How long to wait, and whether to show it.
#[derive(Debug, Clone, Copy)]
pub struct GatherOptions {
    /// Give up on jobs that have not ended after this long (their rounds so far are
    /// kept, and the summary says it stopped early).
    pub timeout: Duration,
    /// Seconds between polls of the jobs.
    pub poll: Duration,
    /// Show a progress bar.
    pub progress: bool,
}

impl Default for GatherOptions {
    fn default() -> Self {
        GatherOptions {
            timeout: Duration::from_secs(3600),
            poll: Duration::from_secs(2),
            progress: false,
        }
    }
}

/// Why gathering failed.
#[derive(Debug, thiserror::Error)]
pub enum GatherError {
    /// A host answered something that is not what it should serve.
    #[error("{url}: {why}")]
    Host {
        /// The URL asked.
        url: String,
        /// What was wrong.
        why: String,
    },
    /// The results folder could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file or folder.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

fn host(url: &str, why: impl std::fmt::Display) -> GatherError {
    GatherError::Host {
        url: url.into(),
        why: why.to_string(),
    }
}

/// GETs `url` as JSON; `Ok(None)` when the host cannot be reached (not up yet, or gone).
async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<Option<T>, GatherError> {
    let resp = match http.get(url).send().await {
        Ok(r) => r,
        Err(e) if e.is_connect() || e.is_timeout() => return Ok(None),
        Err(e) => return Err(host(url, e)),
    };
    if !resp.status().is_success() {
        return Err(host(url, format!("answered {}", resp.status())));
    }
    resp.json().await.map(Some).map_err(|e| host(url, e))
}

fn base(url: &str) -> &str {
    url.trim_end_matches('/')
}

/// Polls every job until all have ended (or `opts.timeout`), reads the shards' counters
/// and the manager's policy, and writes the results folder `out` for experiment `cfg`.
pub async fn gather(
    cfg: &LabConfig,
    hosts: &Hosts,
    out: &Path,
    opts: GatherOptions,
) -> Result<LabResult, GatherError> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| host(&hosts.manager, e))?;
    let started = Instant::now();
    let bar = opts.progress.then(|| {
        let b = ProgressBar::new(hosts.jobs.len() as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} jobs ended  {msg}",
            )
            .expect("valid template"),
        );
        b.enable_steady_tick(Duration::from_millis(200));
        b
    });
    let mut latest: Vec<Option<JobResults>> = vec![None; hosts.jobs.len()];
    let stopped_early = loop {
        for (i, job) in hosts.jobs.iter().enumerate() {
            if latest[i].as_ref().is_some_and(|r| r.state.ended()) {
                continue;
            }
            let url = format!("{}{RESULTS_PATH}", base(job));
            if let Some(r) = get_json::<JobResults>(&http, &url).await? {
                latest[i] = Some(r);
            }
        }
        let ended = latest
            .iter()
            .filter(|r| r.as_ref().is_some_and(|r| r.state.ended()))
            .count();
        if let Some(b) = &bar {
            b.set_position(ended as u64);
            let rounds: usize = latest.iter().flatten().map(|r| r.rounds.len()).sum();
            b.set_message(format!("{rounds} rounds aggregated"));
        }
        if ended == hosts.jobs.len() {
            break None;
        }
        if started.elapsed() >= opts.timeout {
            break Some("time limit".to_string());
        }
        tokio::time::sleep(opts.poll).await;
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }

    let mut devices = AgentStats::default();
    for d in &hosts.devices {
        let url = format!("{}{AGENT_STATS_PATH}", base(d));
        match get_json::<AgentStats>(&http, &url).await? {
            Some(s) => devices.add(&s),
            None => tracing::warn!(%url, "device shard unreachable: its counters are missing"),
        }
    }
    let status_url = format!("{}{}", base(&hosts.manager), venn_api::paths::STATUS);
    let policy = get_json::<serde_json::Value>(&http, &status_url)
        .await?
        .and_then(|s| s.get("policy")?.as_str().map(str::to_string))
        .unwrap_or_else(|| {
            tracing::warn!(url = %status_url, "manager unreachable: the policy is the config's");
            cfg.policy.name().to_string()
        });

    let missing: Vec<&str> = hosts
        .jobs
        .iter()
        .zip(&latest)
        .filter(|(_, r)| r.is_none())
        .map(|(u, _)| u.as_str())
        .collect();
    let results: Vec<JobResults> = latest.into_iter().flatten().collect();
    let (outcomes, span) = outcomes(&results);
    let mut outcomes = outcomes;
    for url in missing {
        outcomes.push(JobOutcome {
            name: url.to_string(),
            arrival_s: 0.0,
            finished: false,
            jct_s: None,
            rounds: 0,
            final_accuracy: None,
            history: Vec::new(),
            error: Some("never reachable".into()),
        });
    }
    write_csvs(out, &outcomes)?;
    let result = LabResult::new(cfg, &policy, outcomes, devices, span, stopped_early);
    result.write(out).map_err(|e| GatherError::Write {
        path: out.display().to_string(),
        source: e,
    })?;
    Ok(result)
}

/// Each job's outcome on the shared timeline (seconds since the first registration on
/// the manager's clock), and the span from then to the last job's last event.
pub fn outcomes(results: &[JobResults]) -> (Vec<JobOutcome>, f64) {
    let t0 = results
        .iter()
        .filter_map(|r| r.registered_at)
        .fold(f64::INFINITY, f64::min);
    let mut span: f64 = 0.0;
    let outcomes = results
        .iter()
        .map(|r| {
            // A job registered with a manager too old to say when: its own clock's zero.
            let arrival_s = match r.registered_at {
                Some(at) if t0.is_finite() => at - t0,
                _ => 0.0,
            };
            let own0 = r.registered_s.unwrap_or(0.0);
            let history: Vec<RoundRow> = r
                .rounds
                .iter()
                .map(|row| RoundRow {
                    time_s: arrival_s + (row.time_s - own0),
                    ..row.clone()
                })
                .collect();
            let jct_s = r.jct_s();
            let end = jct_s
                .map(|j| arrival_s + j)
                .or_else(|| history.last().map(|h| h.time_s))
                .unwrap_or(arrival_s);
            span = span.max(end);
            JobOutcome {
                name: r.name.clone(),
                arrival_s,
                finished: r.state == JobState::Finished,
                jct_s,
                rounds: history.len(),
                final_accuracy: history.last().map(|h| h.accuracy),
                history,
                error: r.error.clone().or_else(|| match r.state {
                    JobState::Starting => Some("never registered".into()),
                    JobState::Running => Some("unfinished: time limit".into()),
                    _ => None,
                }),
            }
        })
        .collect();
    (outcomes, span)
}

/// `jobs/<name>.csv` per job, the rows `fl-job` appends, on the shared timeline.
fn write_csvs(out: &Path, outcomes: &[JobOutcome]) -> Result<(), GatherError> {
    let dir = out.join("jobs");
    let err = |p: &Path, e: std::io::Error| GatherError::Write {
        path: p.display().to_string(),
        source: e,
    };
    std::fs::create_dir_all(&dir).map_err(|e| err(&dir, e))?;
    for o in outcomes {
        let p = crate::results::job_csv(out, &o.name);
        let mut w = csv::Writer::from_path(&p).map_err(|e| err(&p, e.into()))?;
        for row in &o.history {
            w.serialize(row).map_err(|e| err(&p, e.into()))?;
        }
        w.flush().map_err(|e| err(&p, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use venn_core::stats::TtaRule;

    fn row(time_s: f64, round: u32, accuracy: f64) -> RoundRow {
        RoundRow {
            accuracy,
            loss: 1.0,
            participants: 4,
            stragglers: 0,
            scheduling_delay_s: 0.5,
            response_collection_s: 1.0,
            ..RoundRow::unevaluated(time_s, round, 1)
        }
    }

    fn results(
        name: &str,
        at: f64,
        own0: f64,
        rows: Vec<RoundRow>,
        fin: Option<f64>,
    ) -> JobResults {
        JobResults {
            name: name.into(),
            state: if fin.is_some() {
                JobState::Finished
            } else {
                JobState::Running
            },
            job_id: Some(1),
            registered_at: Some(at),
            registered_s: Some(own0),
            finished_s: fin,
            error: None,
            rounds: rows,
        }
    }

    #[test]
    fn jobs_on_hosts_with_different_clocks_land_on_the_managers_timeline() {
        // Job a's process started 100 s before it registered; job b's clock is another
        // host's, whose zero means nothing here. The manager saw b register 7 s after a.
        let a = results(
            "a",
            1_000.0,
            100.0,
            vec![row(110.0, 0, 0.2), row(130.0, 1, 0.5)],
            Some(131.0),
        );
        let b = results("b", 1_007.0, 3.0, vec![row(8.0, 0, 0.4)], None);
        let (o, span) = outcomes(&[a, b]);
        assert_eq!(o[0].arrival_s, 0.0);
        assert_eq!(o[1].arrival_s, 7.0);
        let times: Vec<f64> = o[0].history.iter().map(|h| h.time_s).collect();
        assert_eq!(times, vec![10.0, 30.0]);
        assert_eq!(o[1].history[0].time_s, 12.0);
        assert_eq!(o[0].jct_s, Some(31.0));
        assert!(o[0].finished && !o[1].finished);
        assert_eq!(o[1].error.as_deref(), Some("unfinished: time limit"));
        // Time-to-accuracy counts from each job's own arrival.
        assert_eq!(o[1].time_to_accuracy(0.3, TtaRule::new(1)), Some(5.0));
        assert_eq!(span, 31.0);
    }
}
