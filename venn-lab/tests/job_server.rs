//! The job's device-facing server (`fl_job::runner::router`) against a real manager:
//! the manager hands out a round's tasks as soon as the round is submitted, before the
//! job has heard the reply and opened its slot, so the server must not refuse them.

use fl_job::runner::{JobShared, OpenSlot, router};
use fl_task::task::Registry;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use venn_api::client::{JobSession, ManagerClient};
use venn_api::manager::{Assignment, CheckIn, CheckInReply, RegisterJob, SubmitRound};
use venn_core::profile::DeviceProfile;
use venn_manager::clock::Clock;
use venn_manager::service::Manager;
use venn_manager::settings::Settings;

struct Rig {
    manager: Arc<Manager>,
    api: JobSession,
    shared: Arc<JobShared>,
    job_url: String,
}

async fn serve(app: axum::Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// A manager and a registered job whose server runs with no slot open.
async fn rig(name: &str) -> Rig {
    let dir = std::env::temp_dir().join(format!("fl-job-server-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let manager = Arc::new(Manager::open(Settings::default(), &db, Clock::System).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let manager_url = format!("http://{}", listener.local_addr().unwrap());
    let served = manager.clone();
    tokio::spawn(venn_manager::server::serve(
        listener,
        served,
        std::future::pending(),
    ));

    let params = serde_json::json!({"width": 4});
    let task = Registry::with_builtins()
        .build("resnet18-femnist", &params)
        .unwrap();
    let shared = Arc::new(JobShared::new(
        name,
        task,
        "resnet18-femnist",
        params,
        vec![0u8; 16],
    ));
    let job_url = serve(router(shared.clone(), 1 << 20)).await;
    let api = ManagerClient::new(&manager_url)
        .register_job(&RegisterJob {
            name: name.into(),
            requirement: Default::default(),
            rounds: 2,
            model_size_bytes: 16,
            plan_url: job_url.clone(),
            task_cost: None,
            statement: None,
        })
        .await
        .unwrap();
    let _ = shared.api.set(api.clone());
    Rig {
        manager,
        api,
        shared,
        job_url,
    }
}

fn assigned(manager: &Manager, device_id: u64) -> Assignment {
    let profile = DeviceProfile {
        cpu_score: 1.0,
        mem_score: 1.0,
        os_version: 10.0,
        ms_per_sample: 78.0,
        bandwidth_kbps: 13736.0,
        tags: vec![],
    };
    match manager
        .check_in(CheckIn {
            device_id,
            profile,
            online_for_s: None,
        })
        .unwrap()
    {
        CheckInReply::Assigned { assignment } => assignment,
        other => panic!("device {device_id} got no task: {other:?}"),
    }
}

/// Opens the slot as the round loop does: under the slot lock, ending the submission.
fn open_slot(shared: &JobShared, round: u32) {
    let mut slot = shared.slot.lock().unwrap();
    shared.submitting.store(false, Ordering::SeqCst);
    *slot = Some(OpenSlot {
        round,
        seed: 1,
        accepted: Vec::new(),
        verified: Default::default(),
        uploaded: Default::default(),
    });
    drop(slot);
    shared.opened.notify_waiters();
}

async fn get_plan(job_url: &str, token: &str) -> (u16, serde_json::Value) {
    let r = reqwest::Client::new()
        .get(format!("{job_url}{}", venn_api::job::PLAN_PATH))
        .header(venn_api::job::TASK_TOKEN_HEADER, token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn submit(api: &JobSession) -> u32 {
    api.submit_round(&SubmitRound {
        demand: 2,
        deadline_s: 60.0,
        min_response_fraction: 1.0,
        close_at: None,
    })
    .await
    .unwrap()
    .round
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_assigned_before_the_slot_opens_waits_for_it() {
    let rig = rig("early").await;
    rig.shared.submitting.store(true, Ordering::SeqCst);
    let round = submit(&rig.api).await;
    let a = assigned(&rig.manager, 1);
    assert_eq!(a.round, round);

    let url = rig.job_url.clone();
    let token = a.task_token.clone();
    let fetch = tokio::spawn(async move { get_plan(&url, &token).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !fetch.is_finished(),
        "the plan was answered before the slot opened"
    );
    open_slot(&rig.shared, round);
    let (status, plan) = tokio::time::timeout(Duration::from_secs(10), fetch)
        .await
        .expect("the waiting device is answered once the slot opens")
        .unwrap();
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["round"], round);
    assert_eq!(plan["task"], "resnet18-femnist");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_of_an_earlier_round_is_refused_at_once() {
    let rig = rig("later").await;
    let round = submit(&rig.api).await;
    let a = assigned(&rig.manager, 2);
    // The job has moved on (as after a close it has not yet told the manager about).
    open_slot(&rig.shared, round + 1);
    let t0 = Instant::now();
    let (status, body) = get_plan(&rig.job_url, &a.task_token).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "round_closed", "{body}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());

    // Between rounds (the slot taken, nothing being submitted) a live token of the
    // closing round is refused at once too: a straggler's upload must not wait here.
    *rig.shared.slot.lock().unwrap() = None;
    let t0 = Instant::now();
    let (status, body) = get_plan(&rig.job_url, &a.task_token).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &"round_closed".into())
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());

    let (status, body) = get_plan(&rig.job_url, "not-a-token").await;
    assert_eq!(status, 401, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_waiting_through_a_close_is_refused() {
    let rig = rig("closing").await;
    rig.shared.submitting.store(true, Ordering::SeqCst);
    let round = submit(&rig.api).await;
    let a = assigned(&rig.manager, 3);
    let (url, token) = (rig.job_url.clone(), a.task_token.clone());
    let fetch = tokio::spawn(async move { get_plan(&url, &token).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!fetch.is_finished());
    // A slot closes meanwhile (an aborted round is retried under the same number): a
    // token looked up before the close must not enter what opens after it.
    rig.shared.closed.fetch_add(1, Ordering::SeqCst);
    open_slot(&rig.shared, round);
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), fetch)
        .await
        .expect("answered")
        .unwrap();
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &"round_closed".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_count_that_would_outweigh_the_round_is_refused() {
    // X-Samples is the update's FedAvg weight: u64::MAX would outweigh every honest
    // device (and once wrapped the round's sum); the server refuses it before decoding.
    let rig = rig("samples").await;
    let round = submit(&rig.api).await;
    open_slot(&rig.shared, round);
    let a = assigned(&rig.manager, 3);
    let (status, plan) = get_plan(&rig.job_url, &a.task_token).await;
    assert_eq!(status, 200, "{plan}");
    let upload = |samples: String| {
        reqwest::Client::new()
            .post(format!("{}{}", rig.job_url, venn_api::job::UPDATE_PATH))
            .header(venn_api::job::TASK_TOKEN_HEADER, &a.task_token)
            .header(venn_api::job::SAMPLES_HEADER, samples)
            .body(vec![0u8; 16])
            .send()
    };
    let max = fl_job::runner::MAX_UPDATE_SAMPLES;
    for bad in [u64::MAX.to_string(), (max + 1).to_string(), "0".into()] {
        let r = upload(bad.clone()).await.unwrap();
        assert_eq!(r.status().as_u16(), 422, "X-Samples {bad}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["field"], "x-samples", "{body}");
    }
    // At the cap the count is accepted and the body is checked next (these 16 bytes are
    // not the task's weights).
    let r = upload(max.to_string()).await.unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_update", "{body}");
}

/// `GET /v1/results` serves the job's rounds without a token; only a read of an ended
/// job's results counts as collected (what a lingering `fl-job run` waits for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_are_served_and_a_read_after_the_end_counts_as_collected() {
    use fl_job::runner::{JobResults, JobState, RoundRow};
    let r = rig("results").await;
    let url = format!("{}{}", r.job_url, venn_api::job::RESULTS_PATH);
    let get = || async {
        reqwest::get(&url)
            .await
            .unwrap()
            .json::<JobResults>()
            .await
            .unwrap()
    };
    assert_eq!(get().await.state, JobState::Starting);
    r.shared.update_results(|res| {
        res.state = JobState::Running;
        res.rounds.push(RoundRow {
            accuracy: 0.25,
            loss: 2.0,
            participants: 2,
            stragglers: 0,
            scheduling_delay_s: 0.1,
            response_collection_s: 0.2,
            ..RoundRow::unevaluated(3.0, 0, 1)
        });
    });
    let running = get().await;
    assert_eq!(
        (running.name.as_str(), running.rounds.len()),
        ("results", 1)
    );
    let not_yet =
        tokio::time::timeout(Duration::from_millis(200), r.shared.collected.notified()).await;
    assert!(
        not_yet.is_err(),
        "a running job's results are not its final ones"
    );
    r.shared
        .update_results(|res| res.state = JobState::Finished);
    assert_eq!(get().await.state, JobState::Finished);
    tokio::time::timeout(Duration::from_secs(1), r.shared.collected.notified())
        .await
        .expect("collected");
}
