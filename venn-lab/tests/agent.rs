//! The emulated device population against real and stub servers: time-compressed
//! availability, offline devices staying silent, two FL rounds served end to end against
//! an in-process manager and a small job written here, random drop-offs, and 10,000
//! devices in one process.
//!
//! A two-parameter test task keeps training instant, so these run in well under a minute
//! in release (`cargo test --release -p venn-lab --test integration -- agent::`).

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use datasets::{Femnist, IMAGE_PIXELS, SampleView, Writer};
use device_agent::agent::{
    Agent, AgentConfig, AgentStats, Shard, TaskCache, TaskTiming, emulated_duration,
};
use device_agent::availability::{Availability, DeviceState, Session, SessionOptions, Timeline};
use device_agent::population;
use fl_task::task::{FlTask, LocalUpdate, Registry};
use fl_task::{EvalStats, FlError, NamedTensor};
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::Instant;
use venn_api::job::{
    PLAN_PATH, SAMPLES_HEADER, TASK_TOKEN_HEADER, TaskPlan, UPDATE_PATH, WEIGHTS_PATH,
};
use venn_api::manager::{CheckIn, CheckInReply, RegisterJob, SubmitRound};
use venn_core::{DeviceProfile, RoundOutcome};
use venn_manager::service::CloseWith;
use venn_manager::{Clock, Manager, Settings};
use venn_traces::{CheckInRow, SyntheticOptions};

// ---------------------------------------------------------------------------------------
// Fixtures

/// Name of the test task in the registry.
const TASK: &str = "test-linear";

/// A two-parameter "model": `w0` moves halfway to the mean label, `w1` counts trainings.
/// Real enough to show that weights travel and change, and instant to train.
struct Linear;

fn encode2(w: [f32; 2]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn decode2(b: &[u8]) -> Result<[f32; 2], FlError> {
    if b.len() != 8 {
        return Err(FlError::Weights(format!(
            "expected 8 bytes, got {}",
            b.len()
        )));
    }
    let f = |i: usize| f32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    Ok([f(0), f(4)])
}

impl FlTask for Linear {
    fn name(&self) -> &str {
        TASK
    }

    fn init(&self, _seed: u64) -> Result<Vec<u8>, FlError> {
        Ok(encode2([0.0, 0.0]))
    }

    fn train(
        &self,
        global: &[u8],
        data: SampleView<'_>,
        _seed: u64,
    ) -> Result<LocalUpdate, FlError> {
        let [w0, w1] = decode2(global)?;
        let n = data.labels.len().max(1) as f32;
        let mean = data.labels.iter().map(|&l| f32::from(l)).sum::<f32>() / n;
        Ok(LocalUpdate {
            weights: encode2([w0 + 0.5 * (mean - w0), w1 + 1.0]),
            samples: data.labels.len() as u64,
            loss: f64::from((mean - w0).abs()),
        })
    }

    fn evaluate(&self, _weights: &[u8], data: SampleView<'_>) -> Result<EvalStats, FlError> {
        Ok(EvalStats {
            samples: data.labels.len(),
            accuracy: 0.0,
            loss: 0.0,
        })
    }

    fn decode(&self, weights: &[u8]) -> Result<Vec<NamedTensor>, FlError> {
        Ok(vec![NamedTensor {
            path: "w".into(),
            shape: vec![2],
            values: decode2(weights)?.to_vec(),
        }])
    }

    fn encode(&self, tensors: Vec<NamedTensor>) -> Result<Vec<u8>, FlError> {
        let v = &tensors
            .first()
            .ok_or_else(|| FlError::Weights("no tensor".into()))?
            .values;
        decode2(&encode2([v[0], v[1]]))?;
        Ok(encode2([v[0], v[1]]))
    }
}

fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(TASK, |_| Ok(Arc::new(Linear) as Arc<dyn FlTask>));
    r
}

/// Five tiny writers whose labels differ, standing in for FEMNIST.
fn tiny_data() -> Arc<Femnist> {
    let train = (0..5u8)
        .map(|k| Writer {
            id: format!("w{k}"),
            images: vec![255; IMAGE_PIXELS * (k as usize + 1)],
            labels: vec![k * 10; k as usize + 1],
        })
        .collect();
    Arc::new(Femnist {
        source: None,
        train,
        test: Vec::new(),
    })
}

fn temp_db(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("device-agent-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", p.display()));
    }
    p
}

/// Serves `app` on a loopback port until the returned sender fires or is dropped.
async fn serve_router(app: Router) -> (String, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    (url, tx)
}

/// A real manager on a loopback port, wall clock, with a fast retry pace.
async fn start_manager(
    name: &str,
    retry_after_s: f64,
) -> (Arc<Manager>, String, oneshot::Sender<()>) {
    let settings = Settings {
        retry_after_s,
        ..Settings::default()
    };
    let m = Arc::new(Manager::open(settings, &temp_db(name), Clock::System).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = oneshot::channel::<()>();
    let served = m.clone();
    tokio::spawn(async move {
        venn_manager::server::serve(listener, served, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    (m, url, tx)
}

/// Polls `cond` every 20 ms until it holds or `limit` passes; returns whether it held.
async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

/// Runs `agent` in the background; the returned sender stops it, the handle yields stats.
fn spawn_agent(agent: Agent) -> (oneshot::Sender<()>, tokio::task::JoinHandle<AgentStats>) {
    let (tx, rx) = oneshot::channel::<()>();
    let h = tokio::spawn(agent.run(async {
        let _ = rx.await;
    }));
    (tx, h)
}

// ---------------------------------------------------------------------------------------
// Availability and timing

#[test]
fn compression_maps_trace_time_onto_wall_time() {
    // One hour of trace per wall second, starting at trace hour 1.
    let origin = Instant::now();
    let tl = Timeline::new(origin, 3600.0, 3600.0).unwrap();
    assert_eq!(tl.wall_at(7200.0), Some(origin + Duration::from_secs(1)));
    assert_eq!(
        tl.wall_at(3600.0 + 1800.0),
        Some(origin + Duration::from_millis(500))
    );
    // Before the start maps to the start; infinity to never.
    assert_eq!(tl.wall_at(0.0), Some(origin));
    assert_eq!(tl.wall_at(f64::INFINITY), None);
    let t = tl.trace_at(origin + Duration::from_millis(2500));
    assert!((t - (3600.0 + 9000.0)).abs() < 1e-6, "{t}");
    assert_eq!(tl.wall_duration(1800.0), Duration::from_millis(500));
    assert!(Timeline::new(origin, 0.0, 0.0).is_err());

    // 1440×: a 24 h day lasts 60 s, so a 10 min session at 06:00 starts 15 s after
    // midnight and lasts 600 / 1440 s of wall time.
    let day = Timeline::new(origin, 0.0, 1440.0).unwrap();
    assert_eq!(day.wall_duration(86_400.0), Duration::from_secs(60));
    let rows = [CheckInRow::new(4, 6.0 * 3600.0, 6.0 * 3600.0 + 600.0)];
    let a = Availability::from_rows(&rows, 1, SessionOptions { grace_s: 0.0 }).unwrap();
    let s = a.sessions(0)[0];
    let (on, off) = (day.wall_at(s.start).unwrap(), day.wall_at(s.end).unwrap());
    assert_eq!(on - origin, Duration::from_secs(15));
    assert!(((off - on).as_secs_f64() - 600.0 / 1440.0).abs() < 1e-6);
    assert_eq!(
        a.state(0, day.trace_at(on)),
        DeviceState::Online { until: s.end }
    );
    assert_eq!(
        a.state(0, day.trace_at(on - Duration::from_millis(1))),
        DeviceState::Offline {
            next: Some(s.start)
        }
    );
    assert_eq!(
        a.state(0, day.trace_at(off)),
        DeviceState::Offline { next: None }
    );
}

#[test]
fn synthetic_availability_is_diurnal_and_per_device() {
    let opts = SyntheticOptions {
        days: 2,
        seed: 3,
        ..SyntheticOptions::default()
    };
    let a = Availability::synthetic(500, opts, SessionOptions::default()).unwrap();
    assert_eq!(a.devices(), Some(500));
    let mut total = 0;
    // Check-ins by hour of day, to see the night-time peak (02:00) over the trough (14:00).
    let mut by_hour = [0u32; 24];
    for d in 0..500 {
        let s = a.sessions(d);
        total += s.len();
        assert!(
            s.windows(2).all(|w| w[0].end < w[1].start),
            "sorted, disjoint"
        );
        for x in s {
            assert!(x.start >= 0.0 && x.start < 2.0 * 86_400.0 && x.end > x.start);
            by_hour[((x.start % 86_400.0) / 3600.0) as usize] += 1;
        }
    }
    // About 2.9 check-ins per device-day.
    assert!((2000..4000).contains(&total), "{total} sessions");
    assert!(by_hour[2] > 2 * by_hour[14], "{by_hour:?}");
}

#[test]
fn emulated_duration_scales_compute_and_transfer() {
    // 2× slower than the reference, 8 Mbit/s: 1 s of compute is 2 s, 1 MB is 1 s.
    let p = DeviceProfile::new(1.0, 1.0, 10.0).with_speed(156.0, 8000.0);
    let measured = TaskTiming::Measured {
        compute: Duration::from_secs(1),
        transfer_bytes: 1_000_000,
    };
    let d = emulated_duration(measured, &p, 1.0);
    assert!((d.as_secs_f64() - 3.0).abs() < 1e-9, "{d:?}");
    let d = emulated_duration(measured, &p, 10.0);
    assert!((d.as_secs_f64() - 0.3).abs() < 1e-9, "{d:?}");
}

/// A task that states its work is timed by venn-core's rule, the virtual clock's: the
/// device's samples × epochs × the model's cost per sample, plus its bytes both ways.
#[test]
fn emulated_duration_of_stated_work_is_the_virtual_clocks() {
    let task = fl_task::task::BurnTask {
        name: "m".into(),
        kind: "mobilenet_v2:0.25".parse().unwrap(),
        train: fl_task::TrainConfig {
            local_epochs: 2,
            ..Default::default()
        },
        eval_batch: 100,
        bn_calibration: 0,
    };
    let work = task.work().expect("a Burn task states its work");
    let p = DeviceProfile::new(1.0, 1.0, 10.0).with_speed(156.0, 8000.0);
    let d = emulated_duration(TaskTiming::Work { work, samples: 150 }, &p, 1.0);
    // Equal up to `Duration`'s nanoseconds.
    assert!((d.as_secs_f64() - p.task_seconds(work.cost(150))).abs() < 1e-8);
    // 300 samples cost twice the computation; the transfer is the same.
    let d2 = emulated_duration(TaskTiming::Work { work, samples: 300 }, &p, 1.0);
    let comm = 2.0 * work.model_bytes * 8.0 / (8000.0 * 1000.0);
    assert!(((d2.as_secs_f64() - comm) - 2.0 * (d.as_secs_f64() - comm)).abs() < 1e-8);
}

#[test]
fn tasks_are_built_once_per_name_and_params() {
    let builds = Arc::new(AtomicUsize::new(0));
    let mut r = Registry::new();
    let b = builds.clone();
    r.register(TASK, move |_| {
        b.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(Linear) as Arc<dyn FlTask>)
    });
    let cache = TaskCache::new(r);
    let p1 = serde_json::json!({"lr": 0.1, "batch": 4});
    let p1b = serde_json::json!({"batch": 4, "lr": 0.1});
    cache.get(TASK, &p1).unwrap();
    cache.get(TASK, &p1b).unwrap();
    cache.get(TASK, &serde_json::json!({"lr": 0.2})).unwrap();
    assert!(cache.get("nope", &p1).is_err());
    assert_eq!(builds.load(Ordering::SeqCst), 2);
    assert_eq!(cache.len(), 2);
}

// ---------------------------------------------------------------------------------------
// Offline devices, against a stub manager that records who checks in when

#[derive(Clone, Default)]
struct ProfileRecorder {
    seen: Arc<Mutex<HashSet<(u64, String)>>>,
}

async fn record_profile(
    State(r): State<ProfileRecorder>,
    Json(c): Json<CheckIn>,
) -> Json<CheckInReply> {
    let profile = serde_json::to_string(&c.profile).unwrap();
    r.seen.lock().unwrap().insert((c.device_id, profile));
    Json(CheckInReply::Retry {
        retry_after_s: 0.05,
    })
}

/// Runs `cfg` with `shard` for `ms` against a stub that records who checked in with
/// which profile.
async fn checked_in(mut cfg: AgentConfig, shard: Shard, ms: u64) -> HashSet<(u64, String)> {
    let rec = ProfileRecorder::default();
    let app = Router::new()
        .route(venn_api::paths::CHECK_IN, post(record_profile))
        .with_state(rec.clone());
    let (url, _stop) = serve_router(app).await;
    cfg.manager = url;
    cfg.shard = shard;
    let agent = Agent::new(cfg, registry()).unwrap();
    agent
        .run(tokio::time::sleep(Duration::from_millis(ms)))
        .await;
    rec.seen.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_together_check_in_exactly_the_whole_population() {
    // 40 devices from the trace tables; every third one never online.
    let n = 40;
    let sessions = (0..n)
        .map(|i| {
            if i % 3 == 1 {
                vec![]
            } else {
                vec![Session {
                    start: 0.0,
                    end: 1e9,
                }]
            }
        })
        .collect();
    let mut cfg = AgentConfig::new(
        String::new(),
        population::from_traces(&venn_traces::locate_traces(None).unwrap().path, n).unwrap(),
        tiny_data(),
    );
    cfg.availability = Arc::new(Availability::from_sessions(sessions).unwrap());
    cfg.first_device_id = 500;
    cfg.start_jitter = Duration::from_millis(100);
    let whole = checked_in(cfg.clone(), Shard::WHOLE, 800).await;
    let expected = (0..n).filter(|i| i % 3 != 1).count();
    assert_eq!(whole.len(), expected, "one profile per online device");
    let mut union = HashSet::new();
    for k in 0..3 {
        let part = checked_in(cfg.clone(), Shard::new(k, 3).unwrap(), 800).await;
        assert!(
            part.iter().all(|(id, _)| (id - 500) % 3 == k as u64),
            "shard {k}/3 ran only its own devices"
        );
        assert!(union.is_disjoint(&part));
        union.extend(part);
    }
    assert_eq!(union, whole, "the same devices with the same profiles");
}

#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<(u64, Instant)>>>,
}

async fn stub_check_in(State(r): State<Recorder>, Json(c): Json<CheckIn>) -> Json<CheckInReply> {
    r.seen.lock().unwrap().push((c.device_id, Instant::now()));
    Json(CheckInReply::Retry {
        retry_after_s: 0.05,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_devices_never_check_in() {
    let rec = Recorder::default();
    let app = Router::new()
        .route(venn_api::paths::CHECK_IN, post(stub_check_in))
        .with_state(rec.clone());
    let (url, _stop_stub) = serve_router(app).await;

    // 3600×: trace hour h is wall second h. Device 0 has no session at all, device 1 is
    // online during trace hour 1 only, device 2 the whole time.
    let hour = |a: f64, b: f64| Session {
        start: a * 3600.0,
        end: b * 3600.0,
    };
    let avail =
        Availability::from_sessions(vec![vec![], vec![hour(1.0, 2.0)], vec![hour(0.0, 1000.0)]])
            .unwrap();
    let mut cfg = AgentConfig::new(url, population::synthetic(3), tiny_data());
    cfg.availability = Arc::new(avail);
    cfg.compress = 3600.0;
    cfg.start_jitter = Duration::ZERO;
    let agent = Agent::new(cfg, registry()).unwrap();
    let t0 = Instant::now();
    let stats = agent
        .run(tokio::time::sleep(Duration::from_millis(2600)))
        .await;

    let seen = rec.seen.lock().unwrap().clone();
    let at = |d: u64| -> Vec<f64> {
        seen.iter()
            .filter(|(id, _)| *id == d)
            .map(|(_, t)| (*t - t0).as_secs_f64())
            .collect()
    };
    assert!(at(0).is_empty(), "device 0 is never online: {:?}", at(0));
    let d1 = at(1);
    assert!(d1.len() >= 5, "device 1 checks in while online: {d1:?}");
    assert!(
        d1.iter().all(|&t| (0.99..2.5).contains(&t)),
        "device 1 only within wall [1, 2) s: {d1:?}"
    );
    assert!(
        at(2).len() >= 10,
        "device 2 is always online: {}",
        at(2).len()
    );
    assert_eq!(stats.devices_checked_in, 2);
    // Device 2 may be mid-check-in at the stop: the stub logged it, the agent never
    // got the reply. The reverse cannot happen.
    let extra = seen.len().checked_sub(stats.check_ins as usize);
    assert!(
        matches!(extra, Some(0 | 1)),
        "stub saw {}, agent counted {}",
        seen.len(),
        stats.check_ins
    );
}

// ---------------------------------------------------------------------------------------
// A small FL job speaking the job protocol, against the real manager

/// An update the job accepted.
#[derive(Clone)]
struct Upload {
    round: u32,
    token: String,
    samples: u64,
    weights: Vec<u8>,
}

struct Job {
    manager: Arc<Manager>,
    /// The task devices build (by name and parameters) and the job checks updates with.
    task: Arc<dyn FlTask>,
    params: serde_json::Value,
    job_id: u64,
    token: String,
    /// Current round and its global weights.
    current: Mutex<(u32, Vec<u8>)>,
    /// Accepted updates.
    updates: Mutex<Vec<Upload>>,
    /// Requests refused for a bad token.
    unauthorized: AtomicUsize,
}

impl Job {
    /// The round a token belongs to, if the manager vouches for it for this job.
    fn verify(&self, headers: &HeaderMap) -> Result<(String, u32), StatusCode> {
        let token = headers
            .get(TASK_TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        match self.manager.verify_task(&token) {
            Some(o) if o.job_id == self.job_id => {
                if o.round != self.current.lock().unwrap().0 {
                    return Err(StatusCode::CONFLICT);
                }
                Ok((token, o.round))
            }
            _ => {
                self.unauthorized.fetch_add(1, Ordering::SeqCst);
                Err(StatusCode::UNAUTHORIZED)
            }
        }
    }

    fn updates_in(&self, round: u32) -> usize {
        self.updates
            .lock()
            .unwrap()
            .iter()
            .filter(|u| u.round == round)
            .count()
    }
}

async fn job_plan(State(j): State<Arc<Job>>, headers: HeaderMap) -> Response {
    let round = match j.verify(&headers) {
        Ok((_, r)) => r,
        Err(e) => return e.into_response(),
    };
    let weights_bytes = j.current.lock().unwrap().1.len() as u64;
    Json(TaskPlan {
        task: j.task.name().into(),
        params: j.params.clone(),
        job_id: j.job_id,
        round,
        weights_bytes,
        seed: 7,
    })
    .into_response()
}

async fn job_weights(State(j): State<Arc<Job>>, headers: HeaderMap) -> Response {
    if let Err(e) = j.verify(&headers) {
        return e.into_response();
    }
    j.current.lock().unwrap().1.clone().into_response()
}

async fn job_update(
    State(j): State<Arc<Job>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (token, round) = match j.verify(&headers) {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let samples: Option<u64> = headers
        .get(SAMPLES_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse().ok());
    let (Some(samples), Ok(_)) = (samples, j.task.check_update(&body)) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    j.updates.lock().unwrap().push(Upload {
        round,
        token: token.clone(),
        samples,
        weights: body.to_vec(),
    });
    // As the real job does: the job, not the device, reports the task finished.
    j.manager
        .report_task(&token, venn_core::job::TaskState::Finished)
        .unwrap();
    StatusCode::NO_CONTENT.into_response()
}

/// Registers a job running the test task with the manager and serves its protocol.
async fn start_job(manager: Arc<Manager>) -> (Arc<Job>, oneshot::Sender<()>) {
    start_job_with(manager, Arc::new(Linear), serde_json::json!({"lr": 0.5})).await
}

/// Registers a job running `task` (built by devices from `params`) and serves its
/// protocol; returns it and its stopper.
async fn start_job_with(
    manager: Arc<Manager>,
    task: Arc<dyn FlTask>,
    params: serde_json::Value,
) -> (Arc<Job>, oneshot::Sender<()>) {
    // The plan URL must be known at registration, so bind first.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let reg = manager
        .register_job(RegisterJob {
            name: "agent-test".into(),
            requirement: Default::default(),
            rounds: 2,
            model_size_bytes: task.init(0).unwrap().len() as u64,
            plan_url: url,
            task_cost: None,
            statement: None,
        })
        .unwrap();
    let job = Arc::new(Job {
        manager,
        job_id: reg.job_id,
        token: reg.token,
        current: Mutex::new((0, task.init(0).unwrap())),
        task,
        params,
        updates: Mutex::new(Vec::new()),
        unauthorized: AtomicUsize::new(0),
    });
    let app = Router::new()
        .route(PLAN_PATH, get(job_plan))
        .route(WEIGHTS_PATH, get(job_weights))
        .route(UPDATE_PATH, post(job_update))
        .with_state(job.clone());
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    (job, tx)
}

/// Submits a round of `demand` devices and makes it the job's current round.
fn submit(job: &Job, demand: u32, weights: Vec<u8>) -> u32 {
    // Held across the submit so that a device fetching /plan waits until the round is
    // current instead of being refused (verify_task comes before this lock in /plan).
    let mut current = job.current.lock().unwrap();
    let s = job
        .manager
        .submit_round(
            job.job_id,
            Some(&job.token),
            SubmitRound {
                demand,
                deadline_s: 60.0,
                min_response_fraction: 1.0,
                close_at: None,
            },
        )
        .unwrap();
    *current = (s.round, weights);
    s.round
}

/// FedAvg of the round's two-parameter updates.
fn average(job: &Job, round: u32) -> Vec<u8> {
    let ups: Vec<(Vec<u8>, u64)> = job
        .updates
        .lock()
        .unwrap()
        .iter()
        .filter(|u| u.round == round)
        .map(|u| (u.weights.clone(), u.samples))
        .collect();
    let mut state = Default::default();
    job.task.aggregate(&[], &ups, &mut state).unwrap()
}

fn with_timeout<F: Future>(secs: u64, f: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout(Duration::from_secs(secs), f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_devices_serve_two_rounds() {
    let (manager, url, _stop_manager) = start_manager("two-rounds", 0.1).await;
    let (job, _stop_job) = start_job(manager.clone()).await;

    let mut cfg = AgentConfig::new(url, population::synthetic(20), tiny_data());
    cfg.compress = 100.0;
    cfg.start_jitter = Duration::from_millis(200);
    cfg.seed = 1;
    let agent = Agent::new(cfg, registry()).unwrap();
    let live = agent.stats();
    let (stop, handle) = spawn_agent(agent);

    let r0 = submit(&job, 10, Linear.init(0).unwrap());
    assert!(
        eventually(Duration::from_secs(20), || job.updates_in(r0) == 10).await,
        "round {r0}: {} updates, agent {:?}",
        job.updates_in(r0),
        live.snapshot()
    );
    let _ = manager.close_round(
        job.job_id,
        Some(&job.token),
        r0,
        CloseWith::Outcome(RoundOutcome::Success),
        None,
    );
    let w1 = average(&job, r0);
    let r1 = submit(&job, 10, w1.clone());
    assert_ne!(r0, r1);
    assert!(
        eventually(Duration::from_secs(20), || job.updates_in(r1) == 10).await,
        "round {r1}: {} updates, agent {:?}",
        job.updates_in(r1),
        live.snapshot()
    );
    let _ = manager.close_round(
        job.job_id,
        Some(&job.token),
        r1,
        CloseWith::Outcome(RoundOutcome::Success),
        None,
    );
    // The job counts an update when its body arrives; the agent counts it when the
    // response gets back. Stopping in between would cancel the device mid-upload.
    assert!(
        eventually(Duration::from_secs(10), || live.snapshot().updates_uploaded
            == 20)
        .await,
        "{:?}",
        live.snapshot()
    );

    stop.send(()).unwrap();
    let stats = with_timeout(10, handle)
        .await
        .expect("agent stops")
        .unwrap();
    assert_eq!(stats.updates_uploaded, 20, "{stats:?}");
    assert_eq!(stats.assignments, 20, "{stats:?}");
    assert_eq!(
        (stats.failed, stats.rejected, stats.dropped),
        (0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(stats.trainings, 20);
    // Both rounds can be over before the last devices' start jitter has passed.
    assert!((10..=20).contains(&stats.devices_checked_in), "{stats:?}");
    assert_eq!(job.unauthorized.load(Ordering::SeqCst), 0);

    let ups = job.updates.lock().unwrap().clone();
    let tokens: HashSet<&String> = ups.iter().map(|u| &u.token).collect();
    assert_eq!(tokens.len(), 20, "one token per task");
    // Round 1 trained from the averaged round-0 weights: every update counts 2 trainings.
    for u in &ups {
        let [_, w1c] = decode2(&u.weights).unwrap();
        assert_eq!(w1c, if u.round == r0 { 1.0 } else { 2.0 });
        assert!((1..=5).contains(&u.samples));
    }
    let status = manager.round_status(job.job_id, r1).unwrap();
    assert_eq!(status.finished, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_devices_vanish_silently() {
    let (manager, url, _stop_manager) = start_manager("drops", 0.1).await;
    let (job, _stop_job) = start_job(manager.clone()).await;

    let mut cfg = AgentConfig::new(url, population::synthetic(20), tiny_data());
    cfg.compress = 100.0;
    cfg.start_jitter = Duration::from_millis(200);
    cfg.drop_fraction = 0.5;
    cfg.seed = 5;
    let agent = Agent::new(cfg, registry()).unwrap();
    let live = agent.stats();
    let (stop, handle) = spawn_agent(agent);

    let r0 = submit(&job, 20, Linear.init(0).unwrap());
    assert!(
        eventually(Duration::from_secs(20), || {
            let s = live.snapshot();
            s.assignments == 20 && s.updates_uploaded + s.dropped == 20
        })
        .await,
        "{:?}",
        live.snapshot()
    );
    stop.send(()).unwrap();
    let stats = with_timeout(10, handle)
        .await
        .expect("agent stops")
        .unwrap();
    assert!(
        (1..20).contains(&stats.dropped),
        "some, not all, of 20 devices drop at 50 %: {stats:?}"
    );
    assert_eq!(stats.dropped_session_end, 0);
    assert_eq!(stats.failed, 0);
    assert_eq!(job.updates_in(r0) as u64, stats.updates_uploaded);
    // The manager heard nothing from the dropped devices: their tasks are still open.
    let status = manager.round_status(job.job_id, r0).unwrap();
    assert_eq!(status.assigned, 20);
    assert_eq!(u64::from(status.finished), stats.updates_uploaded);
    assert_eq!(status.failed, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn femnist_devices_train_a_builtin_task() {
    // The real stack: a built-in Burn task, trained on real FEMNIST writers.
    let data = device_agent::agent::load_femnist(None).unwrap();
    let (manager, url, _stop_manager) = start_manager("femnist", 0.1).await;
    // A narrow ResNet and a few SGD steps keep one training well under a second.
    let params = serde_json::json!({"width": 4, "train": {"max_steps": 3, "batch_size": 16}});
    let builtins = Registry::with_builtins();
    let task = builtins.build("resnet18-femnist", &params).unwrap();
    let (job, _stop_job) = start_job_with(manager.clone(), task, params).await;

    let mut cfg = AgentConfig::new(url, population::synthetic(4), data);
    cfg.compress = 1000.0;
    cfg.start_jitter = Duration::from_millis(100);
    cfg.writers_per_device = 2;
    let agent = Agent::new(cfg, builtins).unwrap();
    let live = agent.stats();
    let (stop, handle) = spawn_agent(agent);
    let global = job.current.lock().unwrap().1.clone();
    let r0 = submit(&job, 3, global.clone());
    let t0 = Instant::now();
    assert!(
        eventually(Duration::from_secs(120), || {
            // Both sides: the agent counts an upload only once the job's response is back.
            job.updates_in(r0) == 3 && live.snapshot().updates_uploaded == 3
        })
        .await,
        "{:?}",
        live.snapshot()
    );
    let took = t0.elapsed();
    stop.send(()).unwrap();
    let stats = with_timeout(30, handle)
        .await
        .expect("agent stops")
        .unwrap();
    println!("femnist round of 3: {took:?}, {stats:?}");
    assert_eq!((stats.updates_uploaded, stats.failed), (3, 0), "{stats:?}");
    assert!(stats.training_seconds > 0.0 && stats.samples_trained > 0);
    for u in job.updates.lock().unwrap().iter() {
        assert_eq!(u.weights.len(), global.len());
        assert_ne!(u.weights, global, "training changed the weights");
    }
}

// ---------------------------------------------------------------------------------------
// Scale: 10,000 devices in one process

/// (VmRSS, VmHWM) of this process in MiB, where /proc is available.
fn memory_mib() -> Option<(f64, f64)> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = s.lines().find(|l| l.starts_with(name))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_devices_check_in() {
    const N: usize = 10_000;
    let (_manager, url, _stop_manager) = start_manager("ten-thousand", 5.0).await;
    let before = memory_mib();
    let mut cfg = AgentConfig::new(url, population::synthetic(N), tiny_data());
    cfg.start_jitter = Duration::from_secs(1);
    let agent = Agent::new(cfg, registry()).unwrap();
    let live = agent.stats();
    let t0 = Instant::now();
    let (stop, handle) = spawn_agent(agent);
    let all = eventually(Duration::from_secs(30), || {
        live.snapshot().devices_checked_in == N as u64
    })
    .await;
    let elapsed = t0.elapsed();
    let after = memory_mib();
    stop.send(()).unwrap();
    let stats = with_timeout(20, handle)
        .await
        .expect("agent stops")
        .unwrap();
    let mut report = BTreeMap::new();
    report.insert("devices", serde_json::json!(N));
    report.insert("all_checked_in_s", serde_json::json!(elapsed.as_secs_f64()));
    report.insert("rss_mib_before_after", serde_json::json!([before, after]));
    report.insert("stats", serde_json::json!(stats));
    println!("10k smoke: {}", serde_json::to_string(&report).unwrap());
    assert!(all, "{stats:?}");
    assert_eq!(stats.check_in_errors, 0, "{stats:?}");
    assert!(elapsed < Duration::from_secs(25), "{elapsed:?}");
}
