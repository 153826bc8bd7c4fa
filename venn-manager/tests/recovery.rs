//! Leases, the deadline sweeper, and restarts: a manager reopened on the same SQLite file
//! resumes its jobs, rounds and outstanding tasks — in-process, and for a real
//! `venn-manager` process killed with SIGKILL mid-round.

use crate::common;

use axum::http::StatusCode;
use common::*;
use std::sync::Arc;
use venn_manager::{Manager, Settings, router};

#[tokio::test]
async fn leases_release_devices_of_a_vanished_job_and_dead_rounds_abort() {
    let (m, clock, _db) = manager("leases");
    let app = router(m.clone());
    let (job, token) = register(&app, "a").await;
    call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":3,"deadline_s":20,"min_response_fraction":0.5}"#),
    )
    .await;
    let (_, v) = check_in(&app, 1, 1.0).await;
    let lease = v["assignment"]["lease_s"].as_f64().unwrap();
    // The job process is gone: nobody closes the round. Before the lease ends, nothing moves.
    clock.advance(lease - 1.0);
    assert_eq!(m.sweep().unwrap(), (0, 0));
    clock.advance(2.0);
    assert_eq!(m.sweep().unwrap().0, 1, "the task's lease ran out");
    let (_, v) = call(&app, "GET", &format!("/v1/jobs/{job}/rounds/0"), None, None).await;
    assert_eq!(v["failed"], 1);
    clock.advance(Settings::default().round_grace_s);
    assert_eq!(
        m.sweep().unwrap().1,
        1,
        "round aborted past deadline + grace"
    );
    let (_, v) = call(&app, "GET", &format!("/v1/jobs/{job}/rounds/0"), None, None).await;
    assert_eq!(
        (v["state"].as_str(), v["outcome"].as_str()),
        (Some("closed"), Some("abort"))
    );
    // The device is free for others: a new job gets it.
    let (job2, token2) = register(&app, "b").await;
    call(
        &app,
        "POST",
        &format!("/v1/jobs/{job2}/rounds"),
        Some(&token2),
        Some(r#"{"demand":1,"deadline_s":20,"min_response_fraction":1}"#),
    )
    .await;
    let (_, v) = check_in(&app, 1, 1.0).await;
    // Job a's retry (round 0 again) is not submitted, so only b wants devices.
    assert_eq!(v["assignment"]["job_id"].as_u64(), Some(job2));
}

#[tokio::test]
async fn a_reopened_manager_resumes_the_open_round() {
    let (m, clock, db) = manager("restart");
    let app = router(m.clone());
    let (job, token) = register(&app, "a").await;
    call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":2,"deadline_s":600,"min_response_fraction":1}"#),
    )
    .await;
    let task = assigned_token(&app, 1).await;
    drop(app);
    drop(m); // no flush, no graceful anything: what was answered must be on disk

    let m2 = Arc::new(Manager::open(Settings::default(), &db, clock.clone()).unwrap());
    let app = router(m2.clone());
    let (s, v) = call(&app, "GET", &format!("/v1/jobs/{job}/rounds/0"), None, None).await;
    assert_eq!(
        (s, v["assigned"].as_u64()),
        (StatusCode::OK, Some(1)),
        "{v}"
    );
    // The old task token still works, and device 1 is not assigned twice.
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
    let (_, v) = check_in(&app, 1, 1.0).await;
    assert!(v.get("retry_after_s").is_some(), "{v}");
    let t2 = assigned_token(&app, 2).await;
    assert_eq!(
        call(
            &app,
            "POST",
            &format!("/v1/tasks/{t2}/finished"),
            None,
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds/0/close"),
        Some(&token),
        Some(r#"{"outcome":"success"}"#),
    )
    .await;
    assert_eq!(
        (s, v["finished"].as_u64()),
        (StatusCode::OK, Some(2)),
        "{v}"
    );
    // The job's token and progress survive another restart; new ids do not collide; the
    // check-in history flushed by the (here manual) ticker is reloaded.
    assert!(m2.flush_checkins().unwrap() >= 1);
    drop(app);
    drop(m2);
    let m3 = Arc::new(Manager::open(Settings::default(), &db, clock).unwrap());
    let app = router(m3);
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":1,"deadline_s":600,"min_response_fraction":1}"#),
    )
    .await;
    assert_eq!(
        (s, v["round"].as_u64()),
        (StatusCode::CREATED, Some(1)),
        "{v}"
    );
    let (_, v) = call(&app, "POST", "/v1/jobs", None, Some(&job_body("b", 0.0))).await;
    assert_ne!(v["job_id"].as_u64(), Some(job));
    let (_, v) = call(&app, "GET", "/v1/status", None, None).await;
    assert!(
        v["regions"][0]["check_ins"].as_u64().unwrap() >= 1,
        "check-in history survived: {v}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_killed_manager_process_restarts_and_the_round_completes() {
    use std::process::{Command, Stdio};
    let db = temp_db("killed");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_venn-manager"))
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--db",
                db.to_str().unwrap(),
                "--policy",
                "venn",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let wait_up = || async {
        for _ in 0..200 {
            if http.get(format!("{base}/healthz")).send().await.is_ok() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("manager did not come up");
    };
    let mut child = spawn();
    wait_up().await;
    let reg: serde_json::Value = http
        .post(format!("{base}/v1/jobs"))
        .body(job_body("a", 0.0))
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (job, token) = (
        reg["job_id"].as_u64().unwrap(),
        reg["token"].as_str().unwrap().to_string(),
    );
    let r = http
        .post(format!("{base}/v1/jobs/{job}/rounds"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(r#"{"demand":2,"deadline_s":600,"min_response_fraction":1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let a: serde_json::Value = http
        .post(format!("{base}/v1/check-in"))
        .header("content-type", "application/json")
        .body(checkin_body(1, 1.0))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let task = a["assignment"]["task_token"].as_str().unwrap().to_string();
    child.kill().unwrap(); // SIGKILL mid-round
    child.wait().unwrap();

    let mut child = spawn();
    wait_up().await;
    let ok = http
        .post(format!("{base}/v1/tasks/{task}/finished"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 204);
    let b: serde_json::Value = http
        .post(format!("{base}/v1/check-in"))
        .header("content-type", "application/json")
        .body(checkin_body(2, 1.0))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let t2 = b["assignment"]["task_token"]
        .as_str()
        .expect("second device assigned after restart")
        .to_string();
    assert_eq!(
        http.post(format!("{base}/v1/tasks/{t2}/finished"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let closed: serde_json::Value = http
        .post(format!("{base}/v1/jobs/{job}/rounds/0/close"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(r#"{"outcome":"success"}"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (closed["state"].as_str(), closed["finished"].as_u64()),
        (Some("closed"), Some(2)),
        "{closed}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The bytes of the database and its write-ahead log.
fn db_bytes(db: &std::path::Path) -> Vec<u8> {
    let mut all = std::fs::read(db).unwrap();
    if let Ok(wal) = std::fs::read(format!("{}-wal", db.display())) {
        all.extend(wal);
    }
    all
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn tokens_are_kept_as_digests_in_a_file_only_its_owner_reads() {
    let (m, clock, db) = manager("digests");
    let app = router(m.clone());
    let (job, token) = register(&app, "a").await;
    let task = one_task(&app, job, &token, 1).await;
    let bytes = db_bytes(&db);
    assert!(!contains(&bytes, &token) && !contains(&bytes, &task));
    assert!(contains(
        &bytes,
        &venn_manager::tokens::digest(&token).unwrap()
    ));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
    }
    // A token that is not of the token's form is refused like a wrong one.
    let (s, _) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/finish"),
        Some("' OR 1=1 --"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    drop(app);
    drop(m);

    // A database from before digests: its raw tokens still work after the upgrade, and
    // are gone from the file.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let raw = "0123456789abcdef0123456789abcdef";
        conn.execute(
            "UPDATE jobs SET token = ?1 WHERE id = ?2",
            rusqlite::params![raw, job as i64],
        )
        .unwrap();
        conn.execute_batch("UPDATE meta SET value = '3' WHERE key = 'schema_version'; PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
    }
    let m = Arc::new(Manager::open(Settings::default(), &db, clock).unwrap());
    let app = router(m.clone());
    let (s, v) = call(
        &app,
        "POST",
        &format!("/v1/jobs/{job}/finish"),
        Some("0123456789abcdef0123456789abcdef"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
    drop(app);
    drop(m);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    drop(conn);
    assert!(!contains(
        &db_bytes(&db),
        "0123456789abcdef0123456789abcdef"
    ));
}

/// A database from before schema 8 (tasks keyed by their token's digest, tokens without
/// an id): opening it re-keys its tasks by id, an outstanding task's token keeps working
/// (after a further restart too), and new tokens carry ids after the old ones.
#[tokio::test]
async fn a_database_from_before_task_ids_keeps_its_outstanding_tokens() {
    let (m, clock, db) = manager("rekey");
    let app = router(m.clone());
    let (job, token) = register(&app, "a").await;
    let half_of_3 = r#"{"demand":3,"deadline_s":600,"min_response_fraction":0.5}"#;
    submit_round(&app, job, &token, half_of_3).await;
    let first = assigned_token(&app, 1).await;
    assert!(
        first.starts_with("1-"),
        "a task token carries its id: {first}"
    );
    drop(app);
    drop(m);

    // Schema 7's layout, the task under a token of the older form.
    let old = "0123456789abcdef0123456789abcdef";
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE tasks_v7(
               token TEXT PRIMARY KEY, job_id INTEGER NOT NULL, round INTEGER NOT NULL,
               attempt INTEGER NOT NULL, device_id INTEGER NOT NULL, assigned_at REAL NOT NULL,
               capacity_s REAL NOT NULL, lease_until REAL NOT NULL, state TEXT NOT NULL,
               reported_at REAL);",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO tasks_v7 SELECT ?1, job_id, round, attempt, device_id, assigned_at,
               capacity_s, lease_until, state, reported_at FROM tasks",
            rusqlite::params![venn_manager::tokens::digest(old).unwrap()],
        )
        .unwrap();
        conn.execute_batch(
            "DROP TABLE tasks; ALTER TABLE tasks_v7 RENAME TO tasks;
             CREATE INDEX tasks_by_round ON tasks(job_id, round, attempt);
             DELETE FROM meta WHERE key = 'legacy_task_ids_below';
             UPDATE meta SET value = '7' WHERE key = 'schema_version';
             PRAGMA wal_checkpoint(TRUNCATE);",
        )
        .unwrap();
    }
    let m = Arc::new(Manager::open(Settings::default(), &db, clock.clone()).unwrap());
    let app = router(m.clone());
    let report = |t: &str, what: &str| format!("/v1/tasks/{t}/{what}");
    let (s, v) = call(&app, "POST", &report(old, "ack"), None, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT, "the old token still works: {v}");
    let (s, _) = call(&app, "POST", &report(&first, "ack"), None, None).await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "a token that is not the task's own"
    );
    let second = assigned_token(&app, 2).await;
    assert!(
        second.starts_with("2-"),
        "ids go on after the old tasks: {second}"
    );
    // The right id with another secret is no token of the task.
    let forged = format!("2-{}", "0".repeat(32));
    let (s, _) = call(&app, "GET", &format!("/v1/tasks/{forged}"), None, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    drop(app);
    drop(m);

    // Restarted again (no migration now), both tokens still work.
    let m = Arc::new(Manager::open(Settings::default(), &db, clock).unwrap());
    let app = router(m.clone());
    let (_, v) = call(&app, "GET", &format!("/v1/tasks/{old}"), None, None).await;
    assert_eq!(v["device_id"].as_u64(), Some(1), "{v}");
    for t in [old, second.as_str()] {
        let (s, v) = call(&app, "POST", &report(t, "finished"), None, None).await;
        assert_eq!(s, StatusCode::NO_CONTENT, "{t}: {v}");
    }
    let (s, _) = call(&app, "POST", &report(old, "finished"), None, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "a finished task's token is spent");
    drop(app);
    drop(m);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: Vec<(i64, String)> = conn
        .prepare("SELECT id, state FROM tasks ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows, vec![(1, "finished".into()), (2, "finished".into())]);
    assert_eq!(schema_version(&db), "8");
}

/// A round the job closes on enough results before its whole demand was assigned splits at
/// the last device it used: its status says so, and so does a restarted manager.
#[tokio::test]
async fn a_round_closed_before_full_assignment_reports_its_response_collection() {
    let (m, clock, db) = manager("split");
    let app = router(m.clone());
    let (job, token) = register(&app, "a").await;
    let half_of_3 = r#"{"demand":3,"deadline_s":600,"min_response_fraction":0.5}"#;
    submit_round(&app, job, &token, half_of_3).await;
    let mut tasks = Vec::new();
    for device in [1, 2] {
        tasks.push(assigned_token(&app, device).await);
        clock.advance(10.0);
    }
    clock.advance(20.0);
    for t in &tasks {
        let path = format!("/v1/tasks/{t}/finished");
        assert_eq!(
            call(&app, "POST", &path, None, None).await.0,
            StatusCode::NO_CONTENT
        );
    }
    let close = format!("/v1/jobs/{job}/rounds/0/close");
    let (s, v) = call(&app, "POST", &close, Some(&token), Some(r#"{"results":2}"#)).await;
    assert_eq!(
        (s, v["outcome"].as_str()),
        (StatusCode::OK, Some("success")),
        "{v}"
    );
    let split = |v: &serde_json::Value| {
        (
            v["scheduling_delay_s"].as_f64().unwrap(),
            v["response_collection_s"].as_f64().unwrap(),
        )
    };
    let status = format!("/v1/jobs/{job}/rounds/0");
    let (_, v) = call(&app, "GET", &status, None, None).await;
    assert_eq!(v["assigned"].as_u64(), Some(2), "{v}");
    // Device 2, the last one used, was assigned 10 s after the request; closed at 40 s.
    assert_eq!(split(&v), (10.0, 30.0), "{v}");
    drop(app);
    drop(m);
    let m2 = Arc::new(Manager::open(Settings::default(), &db, clock).unwrap());
    let (_, v) = call(&router(m2), "GET", &status, None, None).await;
    assert_eq!(split(&v), (10.0, 30.0), "restored: {v}");
}

/// A job whose reply was lost (the manager restarted after committing) repeats its call:
/// a repeated submission gets the round it opened, a repeated judged close the closed
/// round's status — not a conflict that would end the job.
#[tokio::test]
async fn a_repeated_submit_or_close_is_answered_as_the_first() {
    let (m, _clock, _db) = manager("repeat");
    let app = router(m);
    let (job, token) = register(&app, "a").await;
    let submit = format!("/v1/jobs/{job}/rounds");
    let body = r#"{"demand":1,"deadline_s":600,"min_response_fraction":1}"#;
    let (s1, first) = call(&app, "POST", &submit, Some(&token), Some(body)).await;
    let (s2, again) = call(&app, "POST", &submit, Some(&token), Some(body)).await;
    assert_eq!(s1, StatusCode::CREATED, "{first}");
    assert_eq!((s2, &again), (StatusCode::CREATED, &first));
    // A different request while the round is open is still a conflict.
    let other = r#"{"demand":2,"deadline_s":600,"min_response_fraction":1}"#;
    let (s, v) = call(&app, "POST", &submit, Some(&token), Some(other)).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");

    let task = assigned_token(&app, 1).await;
    let done = format!("/v1/tasks/{task}/finished");
    assert_eq!(
        call(&app, "POST", &done, None, None).await.0,
        StatusCode::NO_CONTENT
    );
    let close = format!("/v1/jobs/{job}/rounds/0/close");
    let (s1, first) = call(&app, "POST", &close, Some(&token), Some(r#"{"results":1}"#)).await;
    let (s2, again) = call(&app, "POST", &close, Some(&token), Some(r#"{"results":1}"#)).await;
    assert_eq!(
        (s1, first["outcome"].as_str()),
        (StatusCode::OK, Some("success")),
        "{first}"
    );
    assert_eq!((s2, &again), (StatusCode::OK, &first));
}
