//! A full disk: a round's close whose write fails gets 507 `storage_full`, and the manager
//! rebuilds its state from the database before taking another write, so what it answers
//! afterwards is what a manager reopened on the same file answers, and the database
//! counts the job's rounds right as the job goes on.

use crate::common::*;
use axum::Router;
use axum::http::StatusCode;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use venn_manager::{Clock, Manager, Settings, router};

async fn submit(app: &Router, job: u64, token: &str) -> u32 {
    let (s, v) = call(
        app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(token),
        Some(r#"{"demand":2,"deadline_s":60,"min_response_fraction":0.5}"#),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["round"].as_u64().unwrap() as u32
}

async fn close(app: &Router, job: u64, token: &str, round: u32) -> (StatusCode, Value) {
    call(
        app,
        "POST",
        &format!("/v1/jobs/{job}/rounds/{round}/close"),
        Some(token),
        Some(r#"{"outcome":"success"}"#),
    )
    .await
}

/// What the manager says about the job and its round (the parts a restart keeps).
async fn answers(app: &Router, job: u64, round: u32) -> (Value, Value) {
    let (s, mut j) = call(app, "GET", &format!("/v1/jobs/{job}"), None, None).await;
    assert_eq!(s, StatusCode::OK, "{j}");
    j["open_round"]["waiting_s"] = Value::Null;
    let (s, r) = call(
        app,
        "GET",
        &format!("/v1/jobs/{job}/rounds/{round}"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    (j, r)
}

/// (rounds_done in the job's row, its rounds closed with success).
fn stored_rounds(db: &Path, job: u64) -> (u32, u32) {
    let c = rusqlite::Connection::open(db).unwrap();
    let done = c
        .query_row("SELECT rounds_done FROM jobs WHERE id = ?1", [job], |r| {
            r.get(0)
        })
        .unwrap();
    let ok = c
        .query_row(
            "SELECT COUNT(*) FROM rounds WHERE job_id = ?1 AND outcome = 'success'",
            [job],
            |r| r.get(0),
        )
        .unwrap();
    (done, ok)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_refused_on_a_full_disk_leaves_the_manager_as_its_database() {
    let (m, clock, db) = manager("full-disk");
    let app = router(m.clone());
    let body = r#"{"name":"full","requirement":{"min_mem_score":0},"rounds":5,"model_size_bytes":1000,"plan_url":"http://127.0.0.1:9/plan"}"#;
    let (s, v) = call(&app, "POST", "/v1/jobs", None, Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let job = v["job_id"].as_u64().unwrap();
    let token = v["token"].as_str().unwrap().to_string();
    let r0 = submit(&app, job, &token).await;
    assert_eq!(close(&app, job, &token, r0).await.0, StatusCode::OK);
    let r1 = submit(&app, job, &token).await;
    let (s, v) = check_in(&app, 7, 1.0).await;
    assert_eq!(s, StatusCode::OK, "{v}");

    // The disk fills: the close is refused, with the JSON error shape.
    m.simulate_full_disk(true);
    let (s, v) = close(&app, job, &token, r1).await;
    assert_eq!(s, StatusCode::INSUFFICIENT_STORAGE, "{v}");
    assert_eq!(v["error"]["code"], "storage_full", "{v}");
    assert!(v["error"]["message"].is_string(), "{v}");
    // Still full: the next write (an assignment) is refused too, after the rebuild.
    let (s, v) = check_in(&app, 8, 1.0).await;
    assert_eq!(s, StatusCode::INSUFFICIENT_STORAGE, "{v}");
    assert_eq!(v["error"]["code"], "storage_full", "{v}");

    // Space again: the manager answers as a manager reopened on the same file does.
    m.simulate_full_disk(false);
    let live = answers(&app, job, r1).await;
    assert_eq!(
        live.0["rounds_done"], 1,
        "the refused close is forgotten: {}",
        live.0
    );
    assert_eq!(live.1["state"], "open", "{}", live.1);
    {
        let fresh = Arc::new(Manager::open(Settings::default(), &db, clock.clone()).unwrap());
        let reopened = answers(&router(fresh), job, r1).await;
        assert_eq!(live, reopened);
    }
    assert_eq!(stored_rounds(&db, job), (1, 1));

    // The job goes on: the close succeeds now, and so does the next round.
    let (s, v) = close(&app, job, &token, r1).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let r2 = submit(&app, job, &token).await;
    assert_eq!(r2, r1 + 1);
    let (s, v) = close(&app, job, &token, r2).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, j) = call(&app, "GET", &format!("/v1/jobs/{job}"), None, None).await;
    assert_eq!(j["rounds_done"], 3, "{j}");
    drop(app);
    drop(m);
    assert_eq!(stored_rounds(&db, job), (3, 3));
    let fresh = Arc::new(
        Manager::open(Settings::default(), &db, Clock::manual(clock.now().secs())).unwrap(),
    );
    let (_, j) = call(
        &router(fresh),
        "GET",
        &format!("/v1/jobs/{job}"),
        None,
        None,
    )
    .await;
    assert_eq!(j["rounds_done"], 3, "{j}");
}
