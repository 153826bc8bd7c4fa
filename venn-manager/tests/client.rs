//! The typed clients of `venn-api` against the real manager over loopback HTTP: every
//! `/v1` endpoint is called through `ManagerClient` / `JobSession`, so a route, a path
//! builder and a wire type that drift apart fail here. Adding an endpoint (README:
//! "Add an endpoint") means adding its call to this walk.

use crate::common;

use common::{admission_settings, manager_with, temp_db};
use std::sync::Arc;
use venn_api::client::ManagerClient;
use venn_api::manager::{CheckInReply, RegisterJob, RoundState, SubmitRound, TaskReport};
use venn_api::paths;
use venn_core::admission::StatementOfWork;
use venn_core::{DeviceProfile, Requirement, RoundOutcome};
use venn_manager::{Clock, Manager, Settings};

/// Serves `m` on an ephemeral loopback port until the test ends.
async fn serve(m: Arc<Manager>) -> ManagerClient {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(venn_manager::server::serve(
        listener,
        m,
        std::future::pending(),
    ));
    ManagerClient::new(&url)
}

fn job(name: &str) -> RegisterJob {
    RegisterJob {
        name: name.into(),
        requirement: Requirement::any(),
        rounds: 2,
        model_size_bytes: 1000,
        plan_url: "http://127.0.0.1:9".into(),
        task_cost: None,
        statement: None,
    }
}

fn phone() -> DeviceProfile {
    DeviceProfile::new(1.0, 1.0, 10.0).with_speed(78.0, 13736.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_through_the_typed_client() {
    let db = temp_db("client-walk");
    let m = Arc::new(Manager::open(Settings::default(), &db, Clock::System).unwrap());
    let c = serve(m).await;
    c.healthz().await.unwrap();

    let s = c.register_job(&job("walk")).await.unwrap();
    assert!(s.plan.is_none());
    let st = c.job(s.job_id).await.unwrap();
    assert_eq!(
        (st.name.as_str(), st.rounds, st.rounds_done),
        ("walk", Some(2), 0)
    );
    assert!(st.open_round.is_none() && st.plan.is_none() && st.held.is_none());

    let sub = s
        .submit_round(&SubmitRound {
            demand: 1,
            deadline_s: 60.0,
            min_response_fraction: 1.0,
            close_at: None,
        })
        .await
        .unwrap();
    assert_eq!((sub.round, sub.attempt), (0, 0));
    assert_eq!(c.round(s.job_id, 0).await.unwrap().state, RoundState::Open);
    assert_eq!(c.job(s.job_id).await.unwrap().open_round.unwrap().demand, 1);

    let a = match c.check_in(7, &phone()).await.unwrap() {
        CheckInReply::Assigned { assignment } => assignment,
        other => panic!("no assignment: {other:?}"),
    };
    assert_eq!((a.job_id, a.round), (s.job_id, 0));
    assert_eq!(a.plan_url, "http://127.0.0.1:9");
    let owner = c.task_owner(&a.task_token).await.unwrap().unwrap();
    assert_eq!(
        (owner.job_id, owner.round, owner.device_id),
        (s.job_id, 0, 7)
    );
    assert_eq!(
        c.round(s.job_id, 0).await.unwrap().state,
        RoundState::Fulfilled
    );
    c.report_task(&a.task_token, TaskReport::Ack).await.unwrap();
    c.report_task(&a.task_token, TaskReport::Finished)
        .await
        .unwrap();
    // A finished task's token is closed: the owner lookup says so, a second report 404s.
    assert!(c.task_owner(&a.task_token).await.unwrap().is_none());
    let e = c
        .report_task(&a.task_token, TaskReport::Failed)
        .await
        .unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(404), Some("not_found")));

    // Nothing else is open: the next device is told when to come back.
    assert!(matches!(
        c.check_in(8, &phone()).await.unwrap(),
        CheckInReply::Retry { .. }
    ));
    let closed = s.close_round(0, RoundOutcome::Success).await.unwrap();
    assert_eq!((closed.state, closed.finished), (RoundState::Closed, 1));
    assert_eq!(c.job(s.job_id).await.unwrap().rounds_done, 1);

    let status = c.status().await.unwrap();
    assert!(status["jobs"].is_array(), "{status}");
    s.finish().await.unwrap();
    let e = c.job(s.job_id).await.unwrap_err();
    assert_eq!(e.status(), Some(404));

    // Cancelling, and the errors a job's own endpoints give without its token.
    let s2 = c.register_job(&job("cancelled")).await.unwrap();
    let e = c
        .http()
        .post(format!("{}{}", c.base(), paths::rounds(s2.job_id)))
        .json(&SubmitRound {
            demand: 1,
            deadline_s: 1.0,
            min_response_fraction: 1.0,
            close_at: None,
        })
        .send()
        .await
        .unwrap();
    assert_eq!(e.status().as_u16(), 401);
    s2.cancel().await.unwrap();
    assert_eq!(c.job(s2.job_id).await.unwrap_err().status(), Some(404));

    // A bad field comes back typed, naming the field.
    let mut bad = job("bad");
    bad.rounds = 0;
    let e = c.register_job(&bad).await.unwrap_err();
    match &e {
        venn_api::client::ClientError::Api { status, error, .. } => {
            assert_eq!(*status, 422);
            assert_eq!(error.field.as_deref(), Some("rounds"));
        }
        other => panic!("expected a JSON error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_job_keeps_its_quote_through_the_client() {
    let (m, _clock, _db) = manager_with("client-decline", admission_settings());
    let c = serve(m.clone()).await;
    for d in 0..100 {
        c.check_in(d, &phone()).await.unwrap();
    }
    m.tick_admission().unwrap();
    let mut r = job("cheap");
    r.statement = Some(
        serde_json::from_str::<StatementOfWork>(
            r#"{"value":[[0,0.5]],"rounds":[[1,1]],"demand":100,"round_s":60}"#,
        )
        .unwrap(),
    );
    let e = c.register_job(&r).await.unwrap_err();
    assert!(e.is_declined(), "{e}");
    let q = e.quote().expect("a quote once capacity is forecast");
    assert!(q.expected_price > q.expected_value, "{q:?}");
}
