//! Load generator: emulated check-ins over loopback against a manager, measuring
//! sustained throughput and latency percentiles.
//!
//! `connections` concurrent workers each loop: check in a device of the population (round
//! robin), and when it is assigned, report the task finished at once so the manager's
//! state stays bounded. Latency is measured per check-in request.

use serde::Serialize;
use std::time::{Duration, Instant};
use venn_api::client::{ClientError, ManagerClient};
use venn_api::manager::{CheckInReply, RegisterJob, SubmitRound, TaskReport};
use venn_core::DeviceProfile;

/// What to send.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Manager base URL.
    pub base: String,
    /// Device profiles to cycle through (device i uses profile i mod len).
    pub profiles: Vec<DeviceProfile>,
    /// Distinct device ids.
    pub devices: usize,
    /// Concurrent requests in flight.
    pub connections: usize,
    /// How long to run.
    pub duration: Duration,
}

/// What was measured.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// Check-ins answered with 2xx.
    pub check_ins: u64,
    /// Of those, assignments (each followed by a task report).
    pub assigned: u64,
    /// Failed requests.
    pub errors: u64,
    /// Wall seconds.
    pub seconds: f64,
    /// Check-ins per second.
    pub check_ins_per_s: f64,
    /// Median check-in latency, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Worst, ms.
    pub max_ms: f64,
}

/// Runs the load and returns the measurements.
pub async fn run(cfg: LoadConfig) -> LoadReport {
    let client = ManagerClient::new(&cfg.base);
    let start = Instant::now();
    let deadline = start + cfg.duration;
    let mut handles = Vec::new();
    for w in 0..cfg.connections.max(1) {
        let client = client.clone();
        let profiles = cfg.profiles.clone();
        let (devices, stride) = (cfg.devices.max(1), cfg.connections.max(1));
        handles.push(tokio::spawn(async move {
            let mut lat_us: Vec<u32> = Vec::with_capacity(1 << 16);
            let (mut assigned, mut errors) = (0u64, 0u64);
            let mut k = w;
            while Instant::now() < deadline {
                let device = k % devices;
                k += stride;
                let t0 = Instant::now();
                let r = client
                    .check_in(device as u64, &profiles[device % profiles.len()])
                    .await;
                lat_us.push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
                match r {
                    Ok(CheckInReply::Assigned { assignment }) => {
                        assigned += 1;
                        if client
                            .report_task(&assignment.task_token, TaskReport::Finished)
                            .await
                            .is_err()
                        {
                            errors += 1;
                        }
                    }
                    Ok(CheckInReply::Retry { .. }) => {}
                    Err(_) => errors += 1,
                }
            }
            (lat_us, assigned, errors)
        }));
    }
    let mut all = Vec::new();
    let (mut assigned, mut errors) = (0, 0);
    for h in handles {
        if let Ok((l, a, e)) = h.await {
            all.extend(l);
            assigned += a;
            errors += e;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| {
        if all.is_empty() {
            return 0.0;
        }
        all[((all.len() as f64 * p).ceil() as usize).clamp(1, all.len()) - 1] as f64 / 1000.0
    };
    let ok = all.len() as u64 - errors.min(all.len() as u64);
    LoadReport {
        check_ins: ok,
        assigned,
        errors,
        seconds,
        check_ins_per_s: ok as f64 / seconds,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        max_ms: all.last().map_or(0.0, |v| *v as f64 / 1000.0),
    }
}

/// Registers ten jobs (three device requirements) with a round of practically endless
/// demand each, so that every check-in becomes an assignment the manager persists
/// (`venn-lab load --busy`).
pub async fn register_busy_jobs(base: &str) -> Result<(), ClientError> {
    let client = ManagerClient::new(base);
    for i in 0..10 {
        let mut requirement = venn_core::Requirement::scores((i % 3) as f64, 0.0, 0.0);
        requirement.normalize();
        let reg = RegisterJob {
            name: format!("load-{i}"),
            requirement,
            rounds: 1,
            model_size_bytes: 1_000_000,
            plan_url: "http://127.0.0.1:9".into(),
            task_cost: None,
            statement: None,
        };
        let job = client.register_job(&reg).await?;
        job.submit_round(&SubmitRound {
            demand: venn_api::manager::limits::MAX_DEMAND,
            deadline_s: 3600.0,
            min_response_fraction: 0.8,
            close_at: None,
        })
        .await?;
    }
    Ok(())
}
