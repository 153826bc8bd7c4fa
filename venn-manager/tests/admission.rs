//! Admission control through the API: statements of work at registration, plans that
//! hold a job until its launch, declines with the quote (409), bad statements naming the
//! field, LIFO eviction by the ticker's slot closing (410 afterwards), admitted plans
//! and the capacity history surviving a restart, old databases, and — with admission off — the old behaviour.
//!
//! The arithmetic follows `common::admission_settings()`: 60 s slots, no slack, prices
//! from 0.01 (empty slot) to 1 (slot full); the manual clock starts at 1000 s, inside slot
//! 16 = [960, 1020).

use crate::common;

use axum::Router;
use axum::http::StatusCode;
use common::*;
use serde_json::Value;
use std::sync::Arc;
use venn_manager::{Manager, Settings, router};

/// Worth 1000 if done at once, nothing after 600 s; 5 rounds of 100 devices per 60 s:
/// uses a whole slot (100 check-ins) while it runs. Launched at 1000 s, 40 s into slot 16,
/// its 300 s touch six slots (16–21), all priced.
const URGENT: &str = r#"{"value":[[0,1000],[600,0]],"rounds":[[5,1]],"demand":100,"round_s":60}"#;
/// Worth 100 for an hour; 2 rounds of 50 devices: rather waits for cheap slots.
const PATIENT: &str =
    r#"{"value":[[3600,100],[7200,0]],"rounds":[[2,1]],"demand":50,"round_s":60}"#;

/// `n` devices check in at the current time, then the ticker runs: the forecast becomes
/// `n` check-ins per slot.
async fn devices_seen(app: &Router, m: &Manager, first_id: u64, n: u64) {
    for d in first_id..first_id + n {
        let (s, v) = check_in(app, d, 1.0).await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    m.tick_admission().unwrap();
}

async fn admit(app: &Router, name: &str, statement: &str) -> (u64, String, Value) {
    let (s, v) = call(
        app,
        "POST",
        "/v1/jobs",
        None,
        Some(&job_with_statement(name, statement)),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    (
        v["job_id"].as_u64().unwrap(),
        v["token"].as_str().unwrap().to_string(),
        v["plan"].clone(),
    )
}

async fn submit(app: &Router, job: u64, token: &str, demand: u32) -> (StatusCode, Value) {
    call(
        app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(token),
        Some(&format!(
            r#"{{"demand":{demand},"deadline_s":600,"min_response_fraction":1}}"#
        )),
    )
    .await
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[tokio::test]
async fn an_admitted_job_gets_its_plan_and_no_device_before_its_launch() {
    let (m, clock, _db) = manager_with("adm-hold", admission_settings());
    let app = router(m.clone());
    devices_seen(&app, &m, 0, 100).await;
    let (_, _, urgent) = admit(&app, "urgent", URGENT).await;
    assert_eq!(urgent["launch_at"], 1000.0, "{urgent}");
    assert!(close(urgent["expected_price"].as_f64().unwrap(), 6.0));
    // Slots 16–21 are now full (price 1): the patient job buys slots 22–23 at the floor.
    let (job, token, plan) = admit(&app, "patient", PATIENT).await;
    assert_eq!(plan["launch_at"], 1320.0, "{plan}");
    assert!(close(plan["expected_value"].as_f64().unwrap(), 100.0));
    assert!(close(plan["expected_price"].as_f64().unwrap(), 1.0));
    let (s, v) = call(&app, "GET", &format!("/v1/jobs/{job}"), None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (v["plan"]["launch_at"].as_f64(), v["held"].as_bool()),
        (Some(1320.0), Some(true)),
        "{v}"
    );

    // Held: its open round gets no device before 1320 s, though devices are idle.
    let (s, v) = submit(&app, job, &token, 2).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert!(
        check_in(&app, 500, 1.0)
            .await
            .1
            .get("retry_after_s")
            .is_some()
    );
    clock.advance(319.0);
    assert!(
        check_in(&app, 501, 1.0)
            .await
            .1
            .get("retry_after_s")
            .is_some()
    );
    let (_, v) = call(&app, "GET", &format!("/v1/jobs/{job}/rounds/0"), None, None).await;
    assert_eq!(v["assigned"], 0, "{v}");
    clock.advance(1.0);
    let v = check_in(&app, 502, 1.0).await.1;
    assert_eq!(v["assignment"]["job_id"].as_u64(), Some(job), "{v}");

    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    let a = &v["admission"];
    assert_eq!(
        (
            a["submitted"].as_u64(),
            a["admitted"].as_u64(),
            a["declined"].as_u64()
        ),
        (Some(2), Some(2), Some(0)),
        "{a}"
    );
    // No slot judged yet (the ticker has not run since 1000 s): the forecast is the most
    // check-ins seen in one slot, the 100 and device 500 in slot 16.
    assert_eq!(
        (a["active"].as_u64(), a["forecast_per_slot"].as_f64()),
        (Some(2), Some(101.0)),
        "{a}"
    );
    assert_eq!(a["params"]["slot_s"], 60.0);
}

#[tokio::test]
async fn a_declined_job_gets_409_with_the_quote_and_is_not_registered() {
    let (m, _clock, _db) = manager_with("adm-decline", admission_settings());
    let app = router(m.clone());
    // Worth 0.5, but a full slot of 100 check-ins costs at least 100 × 0.01.
    let cheap = r#"{"value":[[0,0.5]],"rounds":[[1,1]],"demand":100,"round_s":60}"#;
    // Before any device has checked in no capacity is forecast: declined without a quote.
    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        None,
        Some(&job_with_statement("early", cheap)),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("declined")),
        "{v}"
    );
    assert!(v["error"]["quote"].is_null(), "{v}");
    assert!(
        v["error"]["reason"]
            .as_str()
            .unwrap()
            .contains("no capacity"),
        "{v}"
    );

    devices_seen(&app, &m, 0, 100).await;
    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        None,
        Some(&job_with_statement("cheap", cheap)),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("declined")),
        "{v}"
    );
    let e = &v["error"];
    assert!(e["message"].as_str().unwrap().contains("declined"), "{v}");
    assert!(e["reason"].as_str().unwrap().contains("costs"), "{v}");
    let q = &e["quote"];
    // Its one 60 s round fits one slot from the next boundary, two from now.
    assert_eq!(q["launch_at"], 1020.0, "{v}");
    assert!(close(q["expected_value"].as_f64().unwrap(), 0.5), "{v}");
    assert!(close(q["expected_price"].as_f64().unwrap(), 1.0), "{v}");

    // Nothing was registered, and the id was not used up.
    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(v["jobs"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(
        (
            v["admission"]["submitted"].as_u64(),
            v["admission"]["declined"].as_u64()
        ),
        (Some(2), Some(2))
    );
    assert_eq!(
        call(&app, "GET", "/v1/jobs/0", None, None).await.0,
        StatusCode::NOT_FOUND
    );
    let (job, _, _) = admit(&app, "worth-it", URGENT).await;
    assert_eq!(job, 0);
}

#[tokio::test]
async fn a_missing_or_bad_statement_is_rejected_naming_the_field() {
    let (m, _clock, _db) = manager_with("adm-bad", admission_settings());
    let app = router(m.clone());
    devices_seen(&app, &m, 0, 100).await;
    let (s, v) = call(&app, "POST", "/v1/jobs", None, Some(&job_body("none", 0.0))).await;
    assert_eq!(
        (s, v["error"]["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("statement")),
        "{v}"
    );
    for (statement, field) in [
        (
            r#"{"value":[[0,1]],"rounds":[[1,0.5]],"demand":1,"round_s":60}"#,
            "statement.rounds",
        ),
        (
            r#"{"value":[[0,1]],"rounds":[[0,1]],"demand":1,"round_s":60}"#,
            "statement.rounds",
        ),
        (
            r#"{"value":[[0,1],[10,2]],"rounds":[[1,1]],"demand":1,"round_s":60}"#,
            "statement.value",
        ),
        (
            r#"{"value":[],"rounds":[[1,1]],"demand":1,"round_s":60}"#,
            "statement.value",
        ),
        (
            r#"{"value":[[0,1]],"rounds":[[1,1]],"demand":0,"round_s":60}"#,
            "statement.demand",
        ),
        (
            r#"{"value":[[0,1]],"rounds":[[1,1]],"demand":1,"round_s":-60}"#,
            "statement.round_s",
        ),
        (
            r#"{"value":[[0,1]],"rounds":[[1,1]],"demand":1,"round_s":60,"max_wait_s":-1}"#,
            "statement.max_wait_s",
        ),
    ] {
        let (s, v) = call(
            &app,
            "POST",
            "/v1/jobs",
            None,
            Some(&job_with_statement("bad", statement)),
        )
        .await;
        assert_eq!(
            (s, v["error"]["field"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some(field)),
            "{statement}: {v}"
        );
    }
    // Within the manager's bounds: the longest outcome must end within the 3600 s horizon,
    // and a statement has at most 64 value points.
    let points: Vec<String> = (0..65).map(|i| format!("[{i},1]")).collect();
    let many = format!(
        r#"{{"value":[{}],"rounds":[[1,1]],"demand":1,"round_s":60}}"#,
        points.join(",")
    );
    for (statement, field) in [
        (
            r#"{"value":[[0,1]],"rounds":[[61,1]],"demand":1,"round_s":60}"#,
            "statement.rounds",
        ),
        (
            r#"{"value":[[0,1]],"rounds":[[4000000000,1]],"demand":1,"round_s":1e9}"#,
            "statement.rounds",
        ),
        (many.as_str(), "statement.value"),
    ] {
        let (s, v) = call(
            &app,
            "POST",
            "/v1/jobs",
            None,
            Some(&job_with_statement("big", statement)),
        )
        .await;
        assert_eq!(
            (s, v["error"]["field"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some(field)),
            "{v}"
        );
    }
    // Not even the right shape: a 400 whose message names the path.
    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        None,
        Some(&job_with_statement(
            "bad",
            r#"{"value":[[0,1]],"rounds":"x","demand":1,"round_s":60}"#,
        )),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_body")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("statement.rounds"),
        "{v}"
    );
    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(v["jobs"].as_array().unwrap().len(), 0);
    assert_eq!(
        v["admission"]["submitted"], 0,
        "invalid statements never reach the controller"
    );
}

#[tokio::test]
async fn a_short_slot_evicts_the_latest_admission_and_its_calls_get_410() {
    let (m, clock, db) = manager_with("adm-evict", admission_settings());
    let app = router(m.clone());
    devices_seen(&app, &m, 0, 100).await;
    // Two jobs of 30 check-ins per slot for 10 slots, both launching at once.
    let steady = r#"{"value":[[0,1000],[2000,0]],"rounds":[[10,1]],"demand":30,"round_s":60}"#;
    let (first, first_token, p1) = admit(&app, "first", steady).await;
    let (second, token, p2) = admit(&app, "second", steady).await;
    assert_eq!(
        (p1["launch_at"].as_f64(), p2["launch_at"].as_f64()),
        (Some(1000.0), Some(1000.0))
    );
    submit(&app, second, &token, 5).await;
    let task = check_in(&app, 200, 1.0).await.1["assignment"]["task_token"]
        .as_str()
        .expect("the second job runs")
        .to_string();

    // Capacity is venn-core's slot-clock rule, the simulator's: the mean check-ins of the
    // slots judged (no prior here). Slot 16 was watched for 20 s only: not judged.
    clock.advance(30.0);
    assert_eq!(m.tick_admission().unwrap(), Vec::<u64>::new());
    // 45 devices in slot 17: judged at 1080 s against 45, the later admission leaves
    // (the 30 still in use fit).
    devices_seen(&app, &m, 1_000, 45).await;
    clock.advance(50.0);
    assert_eq!(m.tick_admission().unwrap(), vec![second]);
    // 9 in slot 18, none in 19: at 1200 s both close, against (45 + 9) / 2 = 27 < 30:
    // the first job goes too.
    devices_seen(&app, &m, 2_000, 9).await;
    clock.advance(120.0);
    assert_eq!(m.tick_admission().unwrap(), vec![first]);

    for (method, uri, body) in [
        ("GET", format!("/v1/jobs/{second}"), None),
        ("GET", format!("/v1/jobs/{second}/rounds/0"), None),
        (
            "POST",
            format!("/v1/jobs/{second}/rounds"),
            Some(r#"{"demand":1,"deadline_s":60,"min_response_fraction":1}"#),
        ),
        ("POST", format!("/v1/jobs/{second}/finish"), None),
        ("DELETE", format!("/v1/jobs/{second}"), None),
    ] {
        let (s, v) = call(&app, method, &uri, Some(&token), body).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (StatusCode::GONE, Some("evicted")),
            "{method} {uri}: {v}"
        );
        assert!(
            v["error"]["message"].as_str().unwrap().contains("evicted"),
            "{v}"
        );
        assert_eq!(v["error"]["evicted_at"], 1080.0, "{v}");
    }
    // Its device's task is released with the job.
    let (s, _) = call(
        &app,
        "POST",
        &format!("/v1/tasks/{task}/finished"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = submit(&app, first, &first_token, 1).await;
    assert_eq!(s, StatusCode::GONE);

    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    let a = &v["admission"];
    assert_eq!(
        (
            a["admitted"].as_u64(),
            a["evicted"].as_u64(),
            a["active"].as_u64()
        ),
        (Some(2), Some(2), Some(0)),
        "{a}"
    );
    assert!(close(a["eviction_rate"].as_f64().unwrap(), 1.0));
    // Used: 30 of the 45 of slot 17 after the eviction, nothing of slot 18's 27 or slot
    // 19's (45 + 9 + 0) / 3 = 18.
    assert!(
        close(
            a["utilisation"].as_f64().unwrap(),
            30.0 / (45.0 + 27.0 + 18.0)
        ),
        "{a}"
    );
    assert_eq!(v["jobs"].as_array().unwrap().len(), 0, "{v}");
    let (_, v) = call(&app, "GET", "/metrics", None, None).await;
    let text = v.as_str().unwrap();
    assert!(
        text.contains("venn_admission_jobs_total{outcome=\"evicted\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE venn_admission_utilisation gauge"),
        "{text}"
    );

    // Eviction is durable.
    drop(app);
    drop(m);
    let m = Arc::new(Manager::open(admission_settings(), &db, clock).unwrap());
    let (s, v) = call(&router(m), "GET", &format!("/v1/jobs/{second}"), None, None).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::GONE, Some("evicted")),
        "{v}"
    );
}

#[tokio::test]
async fn a_restarted_manager_keeps_the_admitted_plan_hold_and_commitments() {
    let (m, clock, db) = manager_with("adm-restart", admission_settings());
    let app = router(m.clone());
    devices_seen(&app, &m, 0, 100).await;
    admit(&app, "urgent", URGENT).await;
    let (job, token, plan) = admit(&app, "patient", PATIENT).await;
    assert_eq!(plan["launch_at"], 1320.0);
    submit(&app, job, &token, 1).await;
    m.flush_checkins().unwrap();
    drop(app);
    drop(m);

    let m = Arc::new(Manager::open(admission_settings(), &db, clock.clone()).unwrap());
    let app = router(m.clone());
    let (s, v) = call(&app, "GET", &format!("/v1/jobs/{job}"), None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["plan"], plan, "the plan survived");
    assert_eq!(v["held"], true);
    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(
        (
            v["admission"]["active"].as_u64(),
            v["admission"]["forecast_per_slot"].as_f64()
        ),
        (Some(2), Some(100.0)),
        "{v}"
    );
    // The urgent job's slots 16–21 are still committed: a job like it, worth twice as
    // much, would be evicted by it in any of them and finishes too late after them, so
    // it is declined (on an empty book it would start at once for 6 × 100 × 0.01).
    let again = URGENT.replace("1000", "2000");
    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        None,
        Some(&job_with_statement("urgent-again", &again)),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["quote"]["eviction_risk"], 1.0, "{v}");
    // Still held until 1320 s, then served.
    assert!(
        check_in(&app, 700, 1.0)
            .await
            .1
            .get("retry_after_s")
            .is_some()
    );
    clock.advance(320.0);
    let v = check_in(&app, 701, 1.0).await.1;
    assert_eq!(v["assignment"]["job_id"].as_u64(), Some(job), "{v}");
    // The controller knows the job: finishing it settles it as completed.
    let (s, _) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/finish"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(v["admission"]["completed"], 1, "{v}");
    assert!(v["admission"]["welfare"].as_f64().unwrap() > 99.0, "{v}");
}

#[tokio::test]
async fn finishing_settles_cancelling_withdraws_and_metrics_show_both() {
    let (m, clock, _db) = manager_with("adm-settle", admission_settings());
    let app = router(m.clone());
    devices_seen(&app, &m, 0, 100).await;
    let small = r#"{"value":[[0,10],[6000,0]],"rounds":[[2,1]],"demand":10,"round_s":60}"#;
    let (a, ta, _) = admit(&app, "a", small).await;
    let (b, tb, _) = admit(&app, "b", small).await;
    clock.advance(90.0);
    let (s, _) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{a}/finish"),
        Some(&ta),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = call(&app, "DELETE", &format!("/v1/jobs/{b}"), Some(&tb), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    let st = &v["admission"];
    assert_eq!(
        (
            st["completed"].as_u64(),
            st["withdrawn"].as_u64(),
            st["active"].as_u64()
        ),
        (Some(1), Some(1), Some(0)),
        "{st}"
    );
    // Value 10 × (1 − 90/6000); both paid two slots of 10 check-ins at the posted prices.
    assert!(
        close(
            st["welfare"].as_f64().unwrap(),
            10.0 * (1.0 - 90.0 / 6000.0)
        ),
        "{st}"
    );
    assert!(st["revenue"].as_f64().unwrap() > 0.0, "{st}");
    let (_, v) = call(&app, "GET", "/metrics", None, None).await;
    let text = v.as_str().unwrap();
    for line in [
        "# TYPE venn_admission_submitted_total counter",
        "venn_admission_submitted_total 2",
        "venn_admission_jobs_total{outcome=\"admitted\"} 2",
        "venn_admission_jobs_total{outcome=\"completed\"} 1",
        "venn_admission_jobs_total{outcome=\"withdrawn\"} 1",
        "venn_admission_capacity_forecast 100",
        "venn_admission_active_jobs 0",
        "venn_admission_welfare_total 9.85",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[tokio::test]
async fn with_admission_off_a_statement_is_accepted_and_ignored() {
    let (m, _clock, _db) = manager("adm-off");
    let app = router(m.clone());
    let (s, v) = call(
        &app,
        "POST",
        "/v1/jobs",
        None,
        Some(&job_with_statement("x", PATIENT)),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert!(
        v.get("plan").is_none(),
        "no plan without admission control: {v}"
    );
    let (job, token) = (
        v["job_id"].as_u64().unwrap(),
        v["token"].as_str().unwrap().to_string(),
    );
    submit(&app, job, &token, 1).await;
    assert_eq!(
        check_in(&app, 1, 1.0).await.1["assignment"]["job_id"].as_u64(),
        Some(job),
        "not held"
    );
    assert!(m.tick_admission().unwrap().is_empty());
    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    assert!(v["admission"].is_null(), "{v}");
    let (_, v) = call(&app, "GET", "/metrics", None, None).await;
    assert!(!v.as_str().unwrap().contains("venn_admission"));
    let (_, v) = call(&app, "GET", &format!("/v1/jobs/{job}"), None, None).await;
    assert!(v.get("plan").is_none(), "{v}");
}

#[tokio::test]
async fn a_database_from_before_admission_opens_with_admission_on() {
    let db = temp_db("adm-old-db");
    let clock = venn_manager::Clock::manual(1000.0);
    let m = Arc::new(Manager::open(Settings::default(), &db, clock.clone()).unwrap());
    let app = router(m.clone());
    let (old, token) = register(&app, "old").await;
    submit(&app, old, &token, 1).await;
    drop(app);
    drop(m);
    {
        // What a manager without admission control left behind: no `admissions` table.
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "DROP TABLE admissions; DROP TABLE admission_slots;
             UPDATE meta SET value = '1' WHERE key = 'schema_version';",
        )
        .unwrap();
    }
    let m = Arc::new(Manager::open(admission_settings(), &db, clock).unwrap());
    let app = router(m.clone());
    // The old job runs as before, outside admission control.
    let (s, v) = call(&app, "GET", &format!("/v1/jobs/{old}"), None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v.get("plan").is_none(), "{v}");
    assert_eq!(
        check_in(&app, 1, 1.0).await.1["assignment"]["job_id"].as_u64(),
        Some(old)
    );
    devices_seen(&app, &m, 2, 99).await;
    let (job, _, plan) = admit(&app, "new", URGENT).await;
    assert_ne!(job, old);
    assert!(plan["launch_at"].is_number());
    assert_eq!(schema_version(&db), "8");
}

#[cfg(unix)]
#[test]
fn the_binary_checks_its_admission_flags() {
    use std::process::Command;
    let db = temp_db("adm-flags");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_venn-manager"))
            .args(["--listen", "127.0.0.1:0", "--db", db.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, err) = run(&["--admission-slot-s", "60"]);
    assert!(!ok && err.contains("--admission"), "{err}");
    let (ok, err) = run(&["--admission", "--admission-epsilon", "12"]);
    assert!(!ok && err.contains("admission.epsilon"), "{err}");
    let help = Command::new(env!("CARGO_BIN_EXE_venn-manager"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "posted-price admission control",
        "--admission-slot-s",
        "--admission-epsilon",
        "--admission-price-min",
        "--admission-price-max",
    ] {
        assert!(help.contains(flag), "{flag} undocumented:\n{help}");
    }
}

#[tokio::test]
async fn a_restart_late_in_a_slot_evicts_nobody() {
    let (m, clock, db) = manager_with("adm-late-restart", admission_settings());
    let app = router(m.clone());
    devices_seen(&app, &m, 0, 100).await;
    let steady = r#"{"value":[[0,1000],[2000,0]],"rounds":[[10,1]],"demand":20,"round_s":60}"#;
    let (job, _, _) = admit(&app, "steady", steady).await;
    m.flush_checkins().unwrap();
    drop(app);
    drop(m);
    // Back 3 s before slot 21 ends, with no device checking in yet.
    clock.advance(257.0);
    let m = Arc::new(Manager::open(admission_settings(), &db, clock.clone()).unwrap());
    clock.advance(4.0);
    assert_eq!(m.tick_admission().unwrap(), Vec::<u64>::new());
    let (s, v) = call(&router(m), "GET", &format!("/v1/jobs/{job}"), None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

#[tokio::test]
async fn the_capacity_history_and_the_open_slot_survive_a_restart() {
    let (m, clock, db) = manager_with("adm-history", admission_settings());
    let app = router(m.clone());
    // 40 check-ins in slot 17 = [1020, 1080), judged at 1080 s.
    clock.advance(20.0);
    devices_seen(&app, &m, 0, 40).await;
    clock.advance(60.0);
    assert!(m.tick_admission().unwrap().is_empty());
    // 10 in slot 18, counted and flushed until 1110 s, then the process stops.
    devices_seen(&app, &m, 100, 10).await;
    clock.advance(30.0);
    m.flush_checkins().unwrap();
    drop(app);
    drop(m);

    let m = Arc::new(Manager::open(admission_settings(), &db, clock.clone()).unwrap());
    let app = router(m.clone());
    let forecast = |v: &Value| v["admission"]["forecast_per_slot"].as_f64();
    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(forecast(&v), Some(40.0), "the judged slot came back: {v}");
    // Slot 18 was watched 30 s before the restart and 30 s after: judged whole, with the
    // 10 check-ins the first process counted — (40 + 10) / 2.
    clock.advance(30.0);
    assert!(m.tick_admission().unwrap().is_empty());
    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(forecast(&v), Some(25.0), "{v}");
}
