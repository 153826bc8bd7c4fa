//! Helpers for the manager's tests: a manager on a temporary database, and `oneshot` calls.
#![allow(dead_code)]

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower::ServiceExt;
use venn_manager::{Clock, Manager, Settings};

/// The prefix of each test process's folder of databases under the system temp dir.
const TEMP_PREFIX: &str = "venn-manager-tests-";

/// Removes the database folders of earlier test processes that are gone (a test binary
/// has no teardown to remove its own; without this each run left ~300 databases
/// behind). Once per process.
fn remove_stale_temp_dirs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix(TEMP_PREFIX) else {
                continue;
            };
            let gone = pid.parse::<u32>().is_ok_and(|p| {
                p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists()
            });
            if gone && Path::new("/proc/self").exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
}

/// A fresh database path under the system temp dir.
pub fn temp_db(name: &str) -> PathBuf {
    remove_stale_temp_dirs();
    let dir = std::env::temp_dir().join(format!("{TEMP_PREFIX}{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
    }
    p
}

/// A manager with a manual clock at t = 1000 s.
pub fn manager(name: &str) -> (Arc<Manager>, Clock, PathBuf) {
    let db = temp_db(name);
    let clock = Clock::manual(1000.0);
    let m = Arc::new(Manager::open(Settings::default(), &db, clock.clone()).unwrap());
    (m, clock, db)
}

/// Sends one request through the router.
pub async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (StatusCode, Value) {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    let req = match body {
        Some(s) => b
            .header("content-type", "application/json")
            .body(Body::from(s.to_string()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    };
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, v)
}

/// A registration body.
pub fn job_body(name: &str, min_mem: f64) -> String {
    format!(
        r#"{{"name":"{name}","requirement":{{"min_mem_score":{min_mem}}},"rounds":2,"model_size_bytes":1000,"plan_url":"http://127.0.0.1:9/plan"}}"#
    )
}

/// A check-in body.
pub fn checkin_body(device: u64, mem: f64) -> String {
    format!(
        r#"{{"device_id":{device},"profile":{{"cpu_score":1,"mem_score":{mem},"os_version":10,"ms_per_sample":78,"bandwidth_kbps":13736}}}}"#
    )
}

/// Registers a job eligible on every device; returns (job id, token).
pub async fn register(app: &Router, name: &str) -> (u64, String) {
    let (s, v) = call(app, "POST", "/v1/jobs", None, Some(&job_body(name, 0.0))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    (
        v["job_id"].as_u64().unwrap(),
        v["token"].as_str().unwrap().to_string(),
    )
}

/// A manager with `settings` and a manual clock at t = 1000 s.
pub fn manager_with(name: &str, settings: Settings) -> (Arc<Manager>, Clock, PathBuf) {
    let db = temp_db(name);
    let clock = Clock::manual(1000.0);
    let m = Arc::new(Manager::open(settings, &db, clock.clone()).unwrap());
    (m, clock, db)
}

/// Settings with admission control on, sized for hand arithmetic: 60 s slots, no slack
/// (ε = 0), prices from 0.01 to 1, and a 600 s supply window in 60 s buckets with rates
/// over at least 60 s (so N check-ins seen at once forecast N check-ins per slot).
pub fn admission_settings() -> Settings {
    Settings {
        supply: venn_core::SupplyConfig {
            window_s: 600.0,
            buckets: 10,
            min_span_s: 60.0,
        },
        admission: Some(venn_core::admission::AdmissionParams {
            slot_s: 60.0,
            horizon_s: 3600.0,
            epsilon: 0.0,
            price_min: 0.01,
            price_max: 1.0,
            ..venn_core::admission::AdmissionParams::default()
        }),
        ..Settings::default()
    }
}

/// A registration body with a statement of work (`statement` is its JSON).
pub fn job_with_statement(name: &str, statement: &str) -> String {
    format!(
        r#"{{"name":"{name}","rounds":2,"model_size_bytes":1000,"plan_url":"http://127.0.0.1:9/plan","statement":{statement}}}"#
    )
}

/// Submits a round (`body`: its JSON) for `job`, which must be accepted: returns the reply.
pub async fn submit_round(app: &Router, job: u64, token: &str, body: &str) -> Value {
    let path = format!("/v1/jobs/{job}/rounds");
    let (s, v) = call(app, "POST", &path, Some(token), Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v
}

/// Checks `device` in with memory score `mem`: the reply's status and body.
pub async fn check_in(app: &Router, device: u64, mem: f64) -> (StatusCode, Value) {
    let body = checkin_body(device, mem);
    call(app, "POST", "/v1/check-in", None, Some(&body)).await
}

/// Checks `device` (memory score 1) in, which must be assigned: returns its task token.
pub async fn assigned_token(app: &Router, device: u64) -> String {
    let (_, v) = check_in(app, device, 1.0).await;
    v["assignment"]["task_token"]
        .as_str()
        .unwrap_or_else(|| panic!("device {device} was not assigned: {v}"))
        .to_string()
}

/// The schema version a manager's database file records.
pub fn schema_version(db: &std::path::Path) -> String {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

/// Submits a one-device round for `job` and checks `device` in: returns its task token.
pub async fn one_task(app: &Router, job: u64, token: &str, device: u64) -> String {
    let round = r#"{"demand":1,"deadline_s":600,"min_response_fraction":1}"#;
    let path = format!("/v1/jobs/{job}/rounds");
    let (s, v) = call(app, "POST", &path, Some(token), Some(round)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (_, v) = check_in(app, device, 1.0).await;
    assert_eq!(v["assignment"]["job_id"].as_u64(), Some(job), "{v}");
    v["assignment"]["task_token"].as_str().unwrap().to_string()
}
