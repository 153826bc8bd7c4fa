//! The status page's handlers through `oneshot`: empty states, what a job's rounds and
//! metrics put on it, escaping, no tokens, and the record surviving a restart.

use crate::common;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::*;
use http_body_util::BodyExt;
use std::sync::Arc;
use tower::ServiceExt;
use venn_manager::{Clock, Manager, Settings, router};

/// GET `uri`: (status, content type, body).
async fn get(app: &axum::Router, uri: &str) -> (StatusCode, String, String) {
    let req = Request::builder().uri(uri).body(Body::empty()).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let ct = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, ct, String::from_utf8(bytes.to_vec()).unwrap())
}

/// Closes (or closes again) round 0 of `job` with `outcome` and, when given, `metrics`
/// (JSON).
async fn close(
    app: &axum::Router,
    job: u64,
    token: &str,
    outcome: &str,
    metrics: Option<&str>,
) -> (StatusCode, serde_json::Value) {
    let body = match metrics {
        Some(m) => format!(r#"{{"outcome":"{outcome}","metrics":{m}}}"#),
        None => format!(r#"{{"outcome":"{outcome}"}}"#),
    };
    let path = format!("/v1/jobs/{job}/rounds/0/close");
    call(app, "POST", &path, Some(token), Some(&body)).await
}

#[tokio::test]
async fn an_idle_manager_shows_empty_states_and_serves_its_assets() {
    let (m, _, _) = manager("ui-empty");
    let app = router(m);
    let (s, ct, page) = get(&app, "/").await;
    assert_eq!(s, StatusCode::OK);
    assert!(ct.starts_with("text/html"), "{ct}");
    for want in [
        "<!DOCTYPE html>",
        "name=\"viewport\"",
        "<main id=\"live\"",
        "No jobs yet",
        "No accuracy reported yet",
        "No job groups",
        "No Venn cells",
        "No check-ins in the last 24 hours",
        "No round has closed yet",
        "<noscript>",
    ] {
        assert!(page.contains(want), "missing {want:?}");
    }
    let (s, _, live) = get(&app, "/ui/live").await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        live.contains("No jobs yet") && !live.contains("<html"),
        "a fragment"
    );
    let (s, ct, css) = get(&app, "/ui/style.css").await;
    assert_eq!(
        (s, ct.as_str()),
        (StatusCode::OK, "text/css; charset=utf-8")
    );
    assert!(css.contains("svg.chart"));
    let (s, ct, js) = get(&app, "/ui/live.js").await;
    assert_eq!(s, StatusCode::OK);
    assert!(ct.starts_with("text/javascript"), "{ct}");
    assert!(js.contains("/ui/live") || js.contains("data-src"));
}

#[tokio::test]
async fn rounds_and_metrics_show_escaped_and_no_token_is_rendered() {
    let (m, clock, _) = manager("ui-jobs");
    let app = router(m.clone());
    let evil = "<script>alert(1)</script>";
    let body = format!(
        r#"{{"name":"{evil}","rounds":3,"model_size_bytes":1000,"plan_url":"http://127.0.0.1:9/plan"}}"#
    );
    let (s, v) = call(&app, "POST", "/v1/jobs", None, Some(&body)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (a, a_token) = (
        v["job_id"].as_u64().unwrap(),
        v["token"].as_str().unwrap().to_string(),
    );
    let (b, b_token) = register(&app, "speech-resnet").await;
    let task = one_task(&app, a, &a_token, 7).await;
    clock.advance(5.0);
    let metrics = r#"{"accuracy":0.42,"loss":1.5,"participants":1}"#;
    let (s, v) = close(&app, a, &a_token, "success", Some(metrics)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // The second job waits for a device.
    let round = r#"{"demand":4,"deadline_s":600,"min_response_fraction":1}"#;
    let (s, _) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{b}/rounds"),
        Some(&b_token),
        Some(round),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    m.flush_checkins().unwrap();

    let (_, _, page) = get(&app, "/").await;
    assert!(!page.contains(evil), "the name must be escaped");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    for secret in [&a_token, &b_token, &task] {
        assert!(!page.contains(secret.as_str()), "a token on the page");
    }
    for want in [
        "speech-resnet",
        "waiting for devices",
        "42.0 %",
        "success",
        "<polyline",
        "check-ins per minute",
    ] {
        assert!(page.contains(want), "missing {want:?}");
    }
    // One accuracy line (only job a reported), and the supply line.
    assert_eq!(page.matches("<polyline").count(), 2, "{page}");

    let (_, status) = call(&app, "GET", "/v1/status", None, None).await;
    let job_a = status["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == a)
        .unwrap();
    assert_eq!(job_a["metrics"]["accuracy"], 0.42);
    assert_eq!(status["recent_rounds"][0]["metrics"]["participants"], 1);
    assert_eq!(status["recent_rounds"][0]["outcome"], "success");
}

#[tokio::test]
async fn a_repeated_close_records_metrics_and_bad_metrics_are_422() {
    let (m, clock, _) = manager("ui-close");
    let app = router(m);
    let (j, token) = register(&app, "a").await;
    one_task(&app, j, &token, 1).await;
    clock.advance(3.0);
    let (s, v) = close(&app, j, &token, "success", Some(r#"{"accuracy":1.5}"#)).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(v.to_string().contains("metrics.accuracy"), "{v}");
    let (s, v) = close(&app, j, &token, "success", Some(r#"{"loss":-1}"#)).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(v.to_string().contains("metrics.loss"), "{v}");

    let (s, v) = close(&app, j, &token, "success", None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["state"], "closed");
    // Evaluated afterwards: the same close again, with the metrics.
    let (s, v) = close(&app, j, &token, "success", Some(r#"{"accuracy":0.3}"#)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, status) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(status["jobs"][0]["metrics"]["accuracy"], 0.3, "{status}");
    assert_eq!(
        status["jobs"][0]["rounds_done"], 1,
        "a repeated close is not a second round"
    );
    // A close that contradicts the recorded outcome is refused.
    let (s, v) = close(&app, j, &token, "abort", None).await;
    assert!(s.is_client_error(), "{s} {v}");
    // Someone else's token records nothing.
    let (s, _) = close(&app, j, "x", "success", Some(r#"{"accuracy":0.9}"#)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_record_survives_a_restart() {
    let (m, clock, db) = manager("ui-restart");
    let app = router(m.clone());
    let (j, token) = register(&app, "femnist-mobilenet").await;
    one_task(&app, j, &token, 1).await;
    clock.advance(4.0);
    let (s, _) = close(&app, j, &token, "success", Some(r#"{"accuracy":0.61}"#)).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{j}/finish"),
        Some(&token),
        None,
    )
    .await;
    assert!(s.is_success(), "{s}");
    m.flush_checkins().unwrap();
    let (_, _, before) = get(&app, "/ui/live").await;
    drop(app);
    drop(m);

    let m = Arc::new(
        Manager::open(Settings::default(), &db, Clock::manual(clock.now().secs())).unwrap(),
    );
    let app = router(m);
    let (_, _, after) = get(&app, "/ui/live").await;
    for want in [
        "femnist-mobilenet",
        "finished",
        "61.0 %",
        "success",
        "check-ins per minute",
    ] {
        assert!(before.contains(want), "before: missing {want:?}");
        assert!(after.contains(want), "after: missing {want:?}");
    }
    assert_eq!(
        after.matches("<polyline").count(),
        2,
        "accuracy and supply lines restored"
    );
    let (_, status) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(status["ended_jobs"][0]["state"], "finished", "{status}");
    assert_eq!(status["ended_jobs"][0]["metrics"]["accuracy"], 0.61);
}
