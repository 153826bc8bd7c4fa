//! The manager refuses a submitted round that the check-ins it has seen rule out (422
//! naming the field, with the reason), but only once it has evidence: an empty supply
//! estimate at start refuses nothing.

use crate::common;

use axum::http::StatusCode;
use common::*;
use serde_json::Value;

async fn submit(app: &axum::Router, job: u64, token: &str, body: &str) -> (StatusCode, Value) {
    let path = format!("/v1/jobs/{job}/rounds");
    call(app, "POST", &path, Some(token), Some(body)).await
}

async fn register_body(app: &axum::Router, body: &str) -> (u64, String) {
    let (s, v) = call(app, "POST", "/v1/jobs", None, Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    (
        v["job_id"].as_u64().unwrap(),
        v["token"].as_str().unwrap().into(),
    )
}

#[tokio::test]
async fn rounds_the_seen_supply_rules_out_are_refused_once_there_is_evidence() {
    let (m, clock, _db) = manager("feasibility");
    let app = venn_manager::router(m);
    let round = r#"{"demand":3,"deadline_s":600,"min_response_fraction":1}"#;
    // No check-in yet: no evidence, so even a job nobody qualifies for is accepted.
    let (early, early_token) = register_body(&app, &job_body("early", 5.0)).await;
    let (s, v) = submit(&app, early, &early_token, round).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");

    // 120 check-ins over 408 s, every device with memory score 1.
    for device in 0..120 {
        let (s, _) = check_in(&app, device, 1.0).await;
        assert_eq!(s, StatusCode::OK);
        clock.advance(3.4);
    }

    let (picky, token) = register_body(&app, &job_body("picky", 5.0)).await;
    let (s, v) = submit(&app, picky, &token, round).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "demand", "{v}");
    assert!(
        v.to_string()
            .contains("no device that checked in meets job picky's requirement (120 check-ins"),
        "{v}"
    );

    let (any, token) = register_body(&app, &job_body("any", 0.0)).await;
    let big = r#"{"demand":500,"deadline_s":600,"min_response_fraction":0.8}"#;
    let (s, v) = submit(&app, any, &token, big).await;
    assert_eq!(
        (s, &v["error"]["field"]),
        (StatusCode::UNPROCESSABLE_ENTITY, &"demand".into()),
        "{v}"
    );
    assert!(
        v.to_string().contains("at least 400 devices but only 120"),
        "{v}"
    );
    // The same job with a round the supply can serve goes ahead.
    let (s, v) = submit(&app, any, &token, round).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");

    // A task of 60 s on the reference device against a 30 s deadline.
    let slow = r#"{"name":"slow","rounds":2,"model_size_bytes":1000,"plan_url":"http://127.0.0.1:9/plan","task_cost":{"compute_s":60,"comm_s":0}}"#;
    let (slow, token) = register_body(&app, slow).await;
    let short = r#"{"demand":3,"deadline_s":30,"min_response_fraction":1}"#;
    let (s, v) = submit(&app, slow, &token, short).await;
    assert_eq!(
        (s, &v["error"]["field"]),
        (StatusCode::UNPROCESSABLE_ENTITY, &"deadline_s".into()),
        "{v}"
    );
    assert!(
        v.to_string()
            .contains("fastest eligible device's task (60.0 s"),
        "{v}"
    );
}
