//! `/v1/status` (jobs with their latest metrics, queues, groups, supply per region,
//! admission control, recently ended jobs and closed rounds) and `/metrics` (Prometheus).

use super::AppState;
use crate::admission::AdmissionReport;
use crate::metrics::Gauge;
use crate::store::JobLifecycle;
use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use std::sync::atomic::Ordering::Relaxed;
use venn_api::HttpError;

/// `GET /v1/status`.
pub async fn status(State(m): State<AppState>) -> Json<Value> {
    let policy = m.settings().policy.name().to_string();
    let admission = m.admission_report();
    // The history first (its own lock), so both looks stay short.
    let (metrics, ended, recent) = m.with_history(|h| {
        let metrics: std::collections::HashMap<u64, Value> = h
            .jobs()
            .filter_map(|j| Some((j.id, json!(j.last_metrics?))))
            .collect();
        let ended: Vec<Value> = h
            .jobs()
            .filter(|j| j.state != JobLifecycle::Active)
            .map(|j| {
                json!({
                    "job_id": j.id, "name": j.name, "state": j.state.as_str(),
                    "ended_at": j.ended_at, "rounds_done": j.successes,
                    "metrics": j.last_metrics,
                })
            })
            .collect();
        let recent: Vec<Value> = h
            .recent_rounds()
            .rev()
            .map(|r| {
                json!({
                    "job_id": r.job_id, "round": r.round, "attempt": r.attempt,
                    "outcome": r.outcome, "submitted_at": r.submitted_at,
                    "fulfilled_at": r.fulfilled_at, "closed_at": r.closed_at,
                    "metrics": r.metrics,
                })
            })
            .collect();
        (metrics, ended, recent)
    });
    Json(m.with_core(|core, now| {
        let mut jobs: Vec<Value> = core
            .jobs()
            .map(|j| {
                json!({
                    "job_id": j.id.0, "name": j.spec.name, "group": j.group.0,
                    "rounds": j.spec.rounds, "rounds_done": j.rounds_done,
                    "open_demand": j.open_demand(),
                    "open_round": j.current.as_ref().map(|r| r.round.0),
                    "metrics": metrics.get(&j.id.0),
                })
            })
            .collect();
        jobs.sort_by_key(|j| j["job_id"].as_u64());
        let groups: Vec<Value> = core
            .groups()
            .iter()
            .map(|(g, grp)| {
                json!({
                    "group": g.0, "requirement": grp.requirement,
                    "members": grp.members.iter().map(|j| j.0).collect::<Vec<_>>(),
                    "queue": grp.queue.iter().map(|j| j.0).collect::<Vec<_>>(),
                    "supply_in_window": core.supply().group_supply(g),
                })
            })
            .collect();
        let regions: Vec<Value> = core
            .supply()
            .cells()
            .into_iter()
            .map(|(set, n)| json!({ "groups": set.iter().map(|g| g.0).collect::<Vec<_>>(), "check_ins": n }))
            .collect();
        json!({
            "policy": policy, "now": now.secs(), "jobs": jobs, "groups": groups,
            "regions": regions, "counters": core.counters(), "admission": admission,
            "ended_jobs": ended, "recent_rounds": recent,
        })
    }))
}

/// `GET /metrics`.
pub async fn metrics(State(m): State<AppState>) -> impl IntoResponse {
    let gauges = m.with_core(|core, _| {
        let queues: Vec<(String, f64)> = core
            .groups()
            .iter()
            .map(|(g, grp)| (format!("{{group=\"{}\"}}", g.0), grp.queue.len() as f64))
            .collect();
        let demand: f64 = core.jobs().map(|j| j.open_demand() as f64).sum();
        let jobs = core.jobs().count() as f64;
        vec![
            (
                "venn_queue_length",
                "Jobs waiting for devices, per job group.",
                queues,
            ),
            (
                "venn_open_demand",
                "Devices wanted by all open rounds.",
                vec![(String::new(), demand)],
            ),
            (
                "venn_jobs_active",
                "Registered jobs.",
                vec![(String::new(), jobs)],
            ),
        ]
    });
    let (mut counters, gauges) = match m.admission_report() {
        Some(a) => admission_metrics(&a, gauges),
        None => (Vec::new(), gauges),
    };
    let store = m.store_stats();
    counters.extend([
        (
            "venn_store_commits_total",
            "SQLite transactions the store's writer committed (each a group of writes).",
            vec![(String::new(), store.commits.load(Relaxed) as f64)],
        ),
        (
            "venn_store_writes_total",
            "Writes committed by the store's writer.",
            vec![(String::new(), store.writes.load(Relaxed) as f64)],
        ),
        (
            "venn_store_checkpoints_total",
            "Background WAL checkpoints run on a WAL that held frames.",
            vec![(String::new(), store.checkpoints.load(Relaxed) as f64)],
        ),
    ]);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        m.metrics.render_with(&counters, &gauges),
    )
}

/// Admission control's counters and gauges, appended to `gauges`.
fn admission_metrics<'a>(
    a: &AdmissionReport,
    mut gauges: Vec<Gauge<'a>>,
) -> (Vec<Gauge<'a>>, Vec<Gauge<'a>>) {
    let one = |v: f64| vec![(String::new(), v)];
    let s = &a.stats;
    let counters = vec![
        (
            "venn_admission_submitted_total",
            "Statements of work submitted to admission control.",
            one(s.submitted as f64),
        ),
        (
            "venn_admission_jobs_total",
            "Admission decisions and how admitted jobs ended.",
            [
                ("admitted", s.admitted),
                ("declined", s.declined),
                ("completed", s.completed),
                ("evicted", s.evicted),
                ("withdrawn", s.withdrawn),
            ]
            .into_iter()
            .map(|(o, n)| (format!("{{outcome=\"{o}\"}}"), n as f64))
            .collect(),
        ),
        (
            "venn_admission_welfare_total",
            "Value of the admitted jobs that completed.",
            one(s.welfare),
        ),
        (
            "venn_admission_revenue_total",
            "Payments of admitted jobs at the posted prices.",
            one(s.revenue),
        ),
    ];
    gauges.extend([
        (
            "venn_admission_utilisation",
            "Usage of running admitted jobs over realised capacity, closed slots.",
            one(a.utilisation),
        ),
        (
            "venn_admission_capacity_forecast",
            "Expected device check-ins per admission slot.",
            one(a.forecast_per_slot),
        ),
        (
            "venn_admission_active_jobs",
            "Admitted jobs held or running.",
            one(a.active as f64),
        ),
    ]);
    (counters, gauges)
}

/// A known path asked with a method it does not serve: JSON, as every other 4xx.
pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> HttpError {
    HttpError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        venn_api::codes::METHOD_NOT_ALLOWED,
        format!("{method} is not served at {}", uri.path()),
    )
}

/// The fallback for a path no route has.
pub async fn not_found() -> HttpError {
    HttpError::not_found("no such endpoint; see the API table in venn-manager's docs")
}
