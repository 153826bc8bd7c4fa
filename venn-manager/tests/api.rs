//! Every endpoint and every 4xx, through `tower::ServiceExt::oneshot` on `router()`.

use crate::common;

use axum::http::StatusCode;
use common::*;
use serde_json::Value;
use venn_manager::router;

#[tokio::test]
async fn a_round_from_registration_to_finish() {
    let (m, _clock, _db) = manager("happy");
    let app = router(m.clone());
    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        None,
        Some(&job_body("keyboard", 0.0)),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let job = v["job_id"].as_u64().unwrap();
    let token = v["token"].as_str().unwrap().to_string();
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":2,"deadline_s":60,"min_response_fraction":0.5}"#),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["round"], 0);
    let (s, v) = check_in(&app, 7, 1.0).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let a = &v["assignment"];
    assert_eq!(a["job_id"].as_u64(), Some(job));
    assert_eq!(a["plan_url"], "http://127.0.0.1:9/plan");
    assert!(a["lease_s"].as_f64().unwrap() > 60.0);
    let task = a["task_token"].as_str().unwrap().to_string();
    let (s, v) = call(&app, "GET", &format!("/v1/tasks/{task}"), None, None).await;
    assert_eq!((s, v["device_id"].as_u64()), (StatusCode::OK, Some(7)));
    assert_eq!(
        call(&app, "POST", &format!("/v1/tasks/{task}/ack"), None, None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        call(
            &app,
            "POST",
            &format!("/v1/tasks/{task}/finished"),
            None,
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    // A closed task cannot report again.
    assert_eq!(
        call(
            &app,
            "POST",
            &format!("/v1/tasks/{task}/finished"),
            None,
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    let (s, v) = call(&app, "GET", &format!("/v1/jobs/{job}/rounds/0"), None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (
            v["state"].as_str(),
            v["assigned"].as_u64(),
            v["finished"].as_u64()
        ),
        (Some("open"), Some(1), Some(1))
    );
    let (s, v) = call(&app, "GET", &format!("/v1/jobs/{job}"), None, None).await;
    assert_eq!(
        (s, v["open_round"]["assigned"].as_u64()),
        (StatusCode::OK, Some(1))
    );
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds/0/close"),
        Some(&token),
        Some(r#"{"results":1}"#),
    )
    .await;
    // The job holds 1 usable result of the 2 requested at 50 %: the manager judges the
    // round a success by venn-core's close rule.
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        (v["state"].as_str(), v["outcome"].as_str()),
        (Some("closed"), Some("success"))
    );
    let (s, v) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["jobs"][0]["rounds_done"], 1);
    assert_eq!(v["regions"][0]["check_ins"], 1);
    let (s, v) = call(&app, "GET", "/metrics", None, None).await;
    let text = v.as_str().unwrap();
    assert_eq!(s, StatusCode::OK);
    assert!(text.contains("venn_checkins_total 1"), "{text}");
    assert!(text.contains("venn_assignments_total 1"));
    assert!(text.contains("venn_rounds_closed_total{outcome=\"success\"} 1"));
    assert!(text.contains("venn_decision_latency_seconds_count 1"));
    assert_eq!(
        call(
            &app,
            "POST",
            &format!("/v1/jobs/{job}/finish"),
            Some(&token),
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        call(&app, "GET", &format!("/v1/jobs/{job}"), None, None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call(&app, "GET", "/healthz", None, None).await.0,
        StatusCode::OK
    );
}

fn err_code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("<no JSON error>")
}

#[tokio::test]
async fn every_client_error_is_json_and_names_the_problem() {
    let (m, _clock, _db) = manager("errors");
    let app = router(m.clone());
    let (_, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        None,
        Some(&job_body("emoji", 2.0)),
    )
    .await;
    let job = v["job_id"].as_u64().unwrap();
    let token = v["token"].as_str().unwrap().to_string();
    let round =
        |d: &str| format!(r#"{{"demand":{d},"deadline_s":30,"min_response_fraction":0.8}}"#);

    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs/999/rounds",
        Some(&token),
        Some(&round("1")),
    )
    .await;
    assert_eq!((s, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some("nope"),
        Some(&round("1")),
    )
    .await;
    assert_eq!(
        (s, err_code(&v)),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        None,
        Some(&round("1")),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(&round("0")),
    )
    .await;
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("demand"))
    );
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(&round("-3")),
    )
    .await;
    assert_eq!(
        (s, err_code(&v)),
        (StatusCode::BAD_REQUEST, "invalid_body"),
        "{v}"
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("demand"),
        "{v}"
    );
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":1,"deadline_s":-1,"min_response_fraction":0.8}"#),
    )
    .await;
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("deadline_s"))
    );
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":1,"deadline_s":9,"min_response_fraction":1.5}"#),
    )
    .await;
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("min_response_fraction")
        )
    );
    // An over-commit count beyond the demand could never close the round.
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":2,"deadline_s":9,"min_response_fraction":0.5,"close_at":3}"#),
    )
    .await;
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("close_at"))
    );
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":1,"#),
    )
    .await;
    assert_eq!(
        (s, err_code(&v)),
        (StatusCode::BAD_REQUEST, "malformed_json")
    );
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"deadline_s":9,"min_response_fraction":0.5}"#),
    )
    .await;
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("demand")),
        "{v}"
    );
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":1,"deadline_s":9,"min_response_fraction":0.5,"colour":1}"#),
    )
    .await;
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("colour")),
        "{v}"
    );
    let huge = format!(
        r#"{{"name":"{}","rounds":1,"model_size_bytes":1,"plan_url":"http://x"}}"#,
        "x".repeat(100_000)
    );
    let (s, v) = call(&app, "POST", "/v1/jobs", None, Some(&huge)).await;
    assert_eq!(
        (s, err_code(&v)),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        None,
        Some(r#"{"name":"","rounds":1,"model_size_bytes":1,"plan_url":"http://x"}"#),
    )
    .await;
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("name"))
    );
    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        None,
        Some(r#"{"name":"a","rounds":0,"model_size_bytes":1,"plan_url":"http://x"}"#),
    )
    .await;
    assert_eq!(v["error"]["field"].as_str(), Some("rounds"), "{s} {v}");
    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        None,
        Some(r#"{"name":"a","rounds":1,"model_size_bytes":1,"plan_url":"ftp://x"}"#),
    )
    .await;
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("plan_url"))
    );
    let (s, v) = call(&app, "POST", "/v1/jobs", None, Some(r#"{"name":"a","requirement":{"min_cpu_score":1e999},"rounds":1,"model_size_bytes":1,"plan_url":"http://x"}"#)).await;
    assert!(s.is_client_error(), "{s} {v}");
    // One round at a time (the same request again is a retry, answered with the open
    // round; another is a conflict).
    assert_eq!(
        call(
            &app,
            "POST",
            &format!("/v1/jobs/{job}/rounds"),
            Some(&token),
            Some(&round("2"))
        )
        .await
        .0,
        StatusCode::CREATED
    );
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(&round("3")),
    )
    .await;
    assert_eq!((s, err_code(&v)), (StatusCode::CONFLICT, "conflict"));
    // Ineligible device: told to come back.
    let (s, v) = check_in(&app, 1, 1.0).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["retry_after_s"].as_f64().unwrap() > 0.0, "{v}");
    let (s, v) = call(&app, "POST", "/v1/check-in", None, Some(r#"{"device_id":1,"profile":{"cpu_score":1,"mem_score":1,"os_version":1,"ms_per_sample":0,"bandwidth_kbps":1}}"#)).await;
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("profile"))
    );
    let (s, v) = call(
        &app,
        "POST",
        "/v1/check-in",
        None,
        Some(r#"{"device_id":"x"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, v) = call(&app, "POST", "/v1/tasks/deadbeef/finished", None, None).await;
    assert_eq!((s, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    let (s, v) = call(&app, "POST", "/v1/tasks/deadbeef/exploded", None, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    let (s, v) = call(&app, "GET", "/v1/jobs/abc", None, None).await;
    assert_eq!((s, err_code(&v)), (StatusCode::BAD_REQUEST, "invalid_path"));
    let (s, v) = call(&app, "GET", &format!("/v1/jobs/{job}/rounds/7"), None, None).await;
    assert_eq!((s, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds/7/close"),
        Some(&token),
        Some(r#"{"outcome":"success"}"#),
    )
    .await;
    assert_eq!((s, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds/0/close"),
        Some(&token),
        Some(r#"{"outcome":"maybe"}"#),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    // A close names an outcome or the results to judge, not both, not neither.
    for body in [r#"{}"#, r#"{"outcome":"abort","results":1}"#] {
        let (s, v) = call(
            &app,
            "POST",
            &format!("/v1/jobs/{job}/rounds/0/close"),
            Some(&token),
            Some(body),
        )
        .await;
        assert_eq!(
            (s, v["error"]["field"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("outcome")),
            "{body}: {v}"
        );
    }
    let (s, v) = call(&app, "GET", "/v2/nothing", None, None).await;
    assert_eq!((s, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    // A known path with the wrong method: a 405 with a JSON body too.
    let (s, v) = call(&app, "PUT", "/v1/jobs", None, None).await;
    assert_eq!(
        (s, err_code(&v)),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
    let (s, _) = call(
        &app,
        "DELETE",
        &format!("/v1/jobs/{job}"),
        Some("wrong"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(
        call(
            &app,
            "DELETE",
            &format!("/v1/jobs/{job}"),
            Some(&token),
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    // Accepted state survived all of the above: nothing but the cancelled job changed.
    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(v["jobs"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn a_device_that_says_when_it_leaves_takes_only_a_job_that_fits() {
    let (m, _clock, _db) = manager("online-for");
    let app = router(m.clone());
    let (job, token) = register(&app, "fits").await;
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":1,"deadline_s":600,"min_response_fraction":1}"#),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let body = |device: u64, online_for: &str| {
        checkin_body(device, 1.0).replacen('{', &format!(r#"{{"online_for_s":{online_for},"#), 1)
    };
    // The job's task takes 30 + 10 s nominal: 20 s online is too short. The device is told
    // to come back and the round's demand stays open.
    let (s, v) = call(&app, "POST", "/v1/check-in", None, Some(&body(1, "20"))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["retry_after_s"].as_f64().is_some(), "{v}");
    let declined = m.with_core(|core, _| core.counters().offers_declined);
    assert_eq!(declined, 1);
    let (s, v) = call(&app, "POST", "/v1/check-in", None, Some(&body(2, "45"))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["assignment"]["job_id"].as_u64(), Some(job), "{v}");
    for bad in ["-1", "1e12"] {
        let (s, v) = call(&app, "POST", "/v1/check-in", None, Some(&body(3, bad))).await;
        assert_eq!(
            (s, v["error"]["field"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("online_for_s")),
            "{bad}: {v}"
        );
    }
}

#[tokio::test]
async fn what_a_client_controls_is_bounded_and_named_when_past_the_bound() {
    use venn_api::manager::limits;
    let (m, _clock, _db) = manager("bounds");
    let app = router(m.clone());
    let field = |v: &Value| v["error"]["field"].as_str().map(str::to_string);
    let tags = |n: usize, len: usize| {
        let t: Vec<String> = (0..n).map(|i| format!("{i:0>len$}")).collect();
        serde_json::to_string(&t).unwrap()
    };
    let check_in = |tags: String| {
        format!(
            r#"{{"device_id":1,"profile":{{"cpu_score":1,"mem_score":1,"os_version":10,"ms_per_sample":78,"bandwidth_kbps":13736,"tags":{tags}}}}}"#
        )
    };
    for (body, ok) in [
        (
            check_in(tags(limits::MAX_TAGS, limits::MAX_TAG_BYTES)),
            true,
        ),
        (check_in(tags(limits::MAX_TAGS + 1, 4)), false),
        (check_in(tags(1, limits::MAX_TAG_BYTES + 1)), false),
    ] {
        let (s, v) = call(&app, "POST", "/v1/check-in", None, Some(&body)).await;
        if ok {
            assert_eq!(s, StatusCode::OK, "{v}");
        } else {
            assert_eq!(
                (s, field(&v).as_deref()),
                (StatusCode::UNPROCESSABLE_ENTITY, Some("profile.tags")),
                "{v}"
            );
        }
    }
    let job = |name: &str, tags: String| {
        format!(
            r#"{{"name":"{name}","requirement":{{"tags":{tags}}},"rounds":2,"model_size_bytes":1000,"plan_url":"http://127.0.0.1:9/plan"}}"#
        )
    };
    let long_name = "n".repeat(limits::MAX_NAME_BYTES + 1);
    for (body, bad) in [
        (job("kb", tags(limits::MAX_TAGS + 1, 4)), "requirement.tags"),
        (job(&long_name, tags(0, 1)), "name"),
    ] {
        let (s, v) = call(&app, "POST", "/v1/jobs", None, Some(&body)).await;
        assert_eq!(
            (s, field(&v).as_deref()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some(bad)),
            "{v}"
        );
    }
    let (job, token) = register(&app, "kb").await;
    let round = |demand: u64, deadline: &str| {
        format!(r#"{{"demand":{demand},"deadline_s":{deadline},"min_response_fraction":1}}"#)
    };
    for (body, bad) in [
        (round(1, "86401"), "deadline_s"),
        (round(1, "1.7e308"), "deadline_s"),
        (round(u64::from(u32::MAX), "60"), "demand"),
    ] {
        let (s, v) = call(
            &app,
            "POST",
            &format!("/v1/jobs/{job}/rounds"),
            Some(&token),
            Some(&body),
        )
        .await;
        assert_eq!(
            (s, field(&v).as_deref()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some(bad)),
            "{v}"
        );
    }
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(&round(u64::from(limits::MAX_DEMAND), "86400")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
}

#[tokio::test]
async fn registration_needs_the_operator_token_and_a_plan_on_an_allowed_host() {
    use venn_manager::Settings;
    use venn_manager::settings::Registration;
    let settings = Settings {
        registration: Registration {
            operator_token: Some("operator-secret-0123".into()),
            plan_hosts: vec!["jobs.lab".into()],
            ..Registration::default()
        },
        ..Settings::default()
    };
    let (m, _clock, _db) = manager_with("operator", settings);
    let app = router(m.clone());
    let body = job_body("kb", 0.0);
    for bearer in [None, Some("wrong-secret-000000000")] {
        let (s, v) = call(&app, "POST", "/v1/jobs", bearer, Some(&body)).await;
        assert_eq!(
            (s, err_code(&v)),
            (StatusCode::UNAUTHORIZED, "unauthorized"),
            "{v}"
        );
    }
    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        Some("operator-secret-0123"),
        Some(&body),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    // Devices are only sent to loopback or listed hosts.
    for (url, ok) in [
        ("http://jobs.lab:9000/plan", true),
        ("http://evil.example/plan", false),
        ("http://127.0.0.1@evil.example/plan", false),
    ] {
        let body = job_body("kb", 0.0).replace("http://127.0.0.1:9/plan", url);
        let (s, v) = call(
            &app,
            "POST",
            "/v1/jobs",
            Some("operator-secret-0123"),
            Some(&body),
        )
        .await;
        if ok {
            assert_eq!(s, StatusCode::CREATED, "{url}: {v}");
        } else {
            assert_eq!(
                (s, v["error"]["field"].as_str()),
                (StatusCode::UNPROCESSABLE_ENTITY, Some("plan_url")),
                "{url}: {v}"
            );
        }
    }
}

#[tokio::test]
async fn a_silent_job_is_ended_and_its_devices_released() {
    let (m, clock, _db) = manager("reaper");
    let app = router(m.clone());
    let (silent, token) = register(&app, "silent").await;
    let (busy, busy_token) = register(&app, "busy").await;
    let task = one_task(&app, silent, &token, 1).await;
    let round = r#"{"demand":1,"deadline_s":600,"min_response_fraction":1}"#;
    // An hour passes with no word from `silent`; `busy` submits a round now and then.
    for _ in 0..4 {
        clock.advance(1_000.0);
        m.sweep().unwrap();
        let (s, v) = call(&app, "GET", &format!("/v1/jobs/{busy}"), None, None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let (s, _) = call(
            &app,
            "POST",
            &format!("/v1/jobs/{busy}/rounds"),
            Some(&busy_token),
            Some(round),
        )
        .await;
        assert!(s == StatusCode::CREATED || s == StatusCode::CONFLICT, "{s}");
    }
    // 4,000 s since its last call and 3,400 s since its round's deadline: ended.
    let (s, v) = call(&app, "GET", &format!("/v1/jobs/{silent}"), None, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    let (s, _) = call(
        &app,
        "POST",
        &format!("/v1/tasks/{task}/finished"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "its task was released");
    let (s, _) = call(&app, "GET", &format!("/v1/jobs/{busy}"), None, None).await;
    assert_eq!(s, StatusCode::OK);
}
