//! `venn-lab attack`: hostile clients against a real `venn-manager` process on loopback,
//! each attack bounded in requests and time, while an honest device checks in from
//! another address. Per attack it reports the requests and their answers, the honest
//! device's latency during the attack, and how much the manager's memory and database
//! grew; at the end it kills the manager (SIGKILL), restarts it on the same database and
//! checks that what it acknowledged before is still there.
//!
//! The attacker sends from 127.0.0.2 and the honest device from 127.0.0.1 (both are
//! loopback on Linux), so per-source limits apply to the attacker only, as they would
//! to a remote client. The manager runs with its default settings. The manager's test
//! `venn-manager/tests/attack.rs` runs this at a small scale and asserts the bounds.

use anyhow::{Context, anyhow, bail};
use rand::Rng;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The attacker's source address.
pub const ATTACKER: &str = "127.0.0.2";
/// The honest device's source address.
pub const HONEST: &str = "127.0.0.1";

/// What to run.
#[derive(Clone, Debug)]
pub struct AttackOptions {
    /// The `venn-manager` binary.
    pub manager_bin: PathBuf,
    /// Folder for the manager's database (created).
    pub dir: PathBuf,
    /// Multiplies every attack's request count (1.0: the counts of the report).
    pub scale: f64,
    /// Concurrent attacking connections.
    pub workers: usize,
}

/// One attack's outcome.
#[derive(Clone, Debug, Default)]
pub struct AttackReport {
    /// Its name.
    pub name: &'static str,
    /// Requests (or connections) the attacker sent.
    pub requests: u64,
    /// Answered 2xx.
    pub ok: u64,
    /// Answered 4xx.
    pub client_errors: u64,
    /// Answered 5xx.
    pub server_errors: u64,
    /// Connections refused or reset, requests that got no answer.
    pub dropped: u64,
    /// The honest device's check-ins during the attack.
    pub honest: u64,
    /// Its failed check-ins (no 200).
    pub honest_failed: u64,
    /// Its median latency, ms.
    pub honest_p50_ms: f64,
    /// Its 99th-percentile latency, ms.
    pub honest_p99_ms: f64,
    /// Manager RSS growth, MiB.
    pub rss_growth_mib: f64,
    /// Database (with WAL) growth, MB.
    pub db_growth_mb: f64,
    /// Wall seconds.
    pub seconds: f64,
}

/// Everything the run found.
#[derive(Clone, Debug, Default)]
pub struct AttackSummary {
    /// Per attack.
    pub attacks: Vec<AttackReport>,
    /// After SIGKILL and restart: what was checked, in words, and whether it held.
    pub restart: Vec<(String, bool)>,
}

impl AttackSummary {
    /// A table for people.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<18} {:>8} {:>7} {:>7} {:>4} {:>7} {:>9} {:>9} {:>9} {:>8} {:>6}\n",
            "attack",
            "requests",
            "2xx",
            "4xx",
            "5xx",
            "dropped",
            "honest p50",
            "p99 ms",
            "RSS MiB",
            "DB MB",
            "s"
        );
        for a in &self.attacks {
            s += &format!(
                "{:<18} {:>8} {:>7} {:>7} {:>4} {:>7} {:>9.2} {:>9.2} {:>+9.1} {:>+8.1} {:>6.1}\n",
                a.name,
                a.requests,
                a.ok,
                a.client_errors,
                a.server_errors,
                a.dropped,
                a.honest_p50_ms,
                a.honest_p99_ms,
                a.rss_growth_mib,
                a.db_growth_mb,
                a.seconds
            );
        }
        for (what, held) in &self.restart {
            s += &format!(
                "after SIGKILL and restart: {what}: {}\n",
                if *held { "yes" } else { "NO" }
            );
        }
        s
    }
}

/// A running manager process.
struct ManagerProcess {
    child: Child,
    base: String,
    db: PathBuf,
}

impl ManagerProcess {
    async fn start(bin: &Path, db: &Path, port: u16) -> anyhow::Result<ManagerProcess> {
        let child = Command::new(bin)
            .args([
                "--listen",
                &format!("{HONEST}:{port}"),
                "--db",
                &db.display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let m = ManagerProcess {
            child,
            base: format!("http://{HONEST}:{port}"),
            db: db.to_path_buf(),
        };
        let http = client(HONEST)?;
        for _ in 0..400 {
            if http.get(format!("{}/healthz", m.base)).send().await.is_ok() {
                return Ok(m);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        bail!("the manager did not come up at {}", m.base)
    }

    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()));
        status
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            })
            .map_or(0.0, |kb| kb / 1024.0)
    }

    fn db_mb(&self) -> f64 {
        ["", "-wal", "-shm"]
            .iter()
            .filter_map(|s| std::fs::metadata(format!("{}{s}", self.db.display())).ok())
            .map(|m| m.len() as f64 / 1e6)
            .sum()
    }

    fn addr(&self) -> SocketAddr {
        self.base
            .trim_start_matches("http://")
            .parse()
            .expect("an address we wrote")
    }
}

impl Drop for ManagerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(from: &str) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .local_address(Some(from.parse()?))
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(256)
        .build()?)
}

/// Tallies of the attacker's requests.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    c4: AtomicU64,
    c5: AtomicU64,
    dropped: AtomicU64,
}

impl Tally {
    fn add(&self, r: Result<reqwest::Response, reqwest::Error>) {
        match r {
            Ok(r) if r.status().is_success() => self.ok.fetch_add(1, Relaxed),
            Ok(r) if r.status().is_client_error() => self.c4.fetch_add(1, Relaxed),
            Ok(_) => self.c5.fetch_add(1, Relaxed),
            Err(_) => self.dropped.fetch_add(1, Relaxed),
        };
    }
}

/// The honest device: one check-in every 10 ms from [`HONEST`], latencies recorded,
/// until `stop`.
async fn honest_probe(base: String, stop: Arc<AtomicBool>) -> (Vec<f64>, u64) {
    let Ok(http) = client(HONEST) else {
        return (Vec::new(), 1);
    };
    let mut lat = Vec::new();
    let mut failed = 0;
    let body = json!({"device_id": 1_000_000_000u64, "profile": profile(1.0, 2.0, Vec::new())});
    while !stop.load(Relaxed) {
        let t0 = Instant::now();
        let r = http
            .post(format!("{base}/v1/check-in"))
            .json(&body)
            .send()
            .await;
        match r {
            Ok(r) if r.status().is_success() => {
                let _ = r.bytes().await;
                lat.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            _ => failed += 1,
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (lat, failed)
}

fn profile(cpu: f64, ms: f64, tags: Vec<String>) -> Value {
    json!({"cpu_score": cpu, "mem_score": 4.0, "os_version": 10.0,
           "ms_per_sample": ms, "bandwidth_kbps": 9000.0, "tags": tags})
}

/// The plan URL of every job registered here: nothing here fetches a plan, so the discard port.
fn plan_url() -> String {
    format!("http://{HONEST}:9/plan")
}

fn random_tag(rng: &mut impl Rng) -> String {
    (0..64)
        .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
        .collect()
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Sends `n` requests built by `make(i)` from `workers` concurrent attackers.
async fn flood<F>(http: &reqwest::Client, n: u64, workers: usize, tally: &Arc<Tally>, make: F)
where
    F: Fn(&reqwest::Client, u64) -> reqwest::RequestBuilder + Send + Sync + 'static + Clone,
{
    let next = Arc::new(AtomicU64::new(0));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..workers.max(1) {
        let (http, tally, next, make) = (http.clone(), tally.clone(), next.clone(), make.clone());
        set.spawn(async move {
            loop {
                let i = next.fetch_add(1, Relaxed);
                if i >= n {
                    break;
                }
                let r = make(&http, i).send().await;
                let r = match r {
                    Ok(r) => {
                        let status = r.status();
                        let _ = r.bytes().await;
                        Ok(status)
                    }
                    Err(e) => Err(e),
                };
                match r {
                    Ok(s) if s.is_success() => tally.ok.fetch_add(1, Relaxed),
                    Ok(s) if s.is_client_error() => tally.c4.fetch_add(1, Relaxed),
                    Ok(_) => tally.c5.fetch_add(1, Relaxed),
                    Err(_) => tally.dropped.fetch_add(1, Relaxed),
                };
            }
        });
    }
    while set.join_next().await.is_some() {}
}

/// Connections from [`ATTACKER`] that send `prefix` and then nothing, held for `hold`.
async fn hold_connections(
    addr: SocketAddr,
    n: u64,
    prefix: &'static [u8],
    hold: Duration,
    tally: &Tally,
) {
    let mut held = Vec::new();
    for _ in 0..n {
        let s = match tokio::net::TcpSocket::new_v4().and_then(|s| {
            s.bind(format!("{ATTACKER}:0").parse().expect("literal"))?;
            Ok(s)
        }) {
            Ok(s) => s,
            Err(_) => {
                tally.dropped.fetch_add(1, Relaxed);
                continue;
            }
        };
        match s.connect(addr).await {
            Ok(c) => {
                if !prefix.is_empty() {
                    let _ = c.try_write(prefix);
                }
                held.push(c);
            }
            Err(_) => {
                tally.dropped.fetch_add(1, Relaxed);
            }
        }
    }
    tokio::time::sleep(hold).await;
    // Still open after the hold: the server kept them (a share it allows); closed: it
    // refused or timed them out.
    for c in &held {
        let mut buf = [0u8; 64];
        match c.try_read(&mut buf) {
            Ok(0) => tally.dropped.fetch_add(1, Relaxed),
            Ok(_) => tally.c4.fetch_add(1, Relaxed),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => tally.ok.fetch_add(1, Relaxed),
            Err(_) => tally.dropped.fetch_add(1, Relaxed),
        };
    }
}

/// Runs every attack in turn, then the SIGKILL restart check.
pub async fn run_attacks(opts: &AttackOptions) -> anyhow::Result<AttackSummary> {
    std::fs::create_dir_all(&opts.dir)?;
    let db = opts.dir.join("attacked.db");
    for s in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{s}", db.display()));
    }
    let port = std::net::TcpListener::bind(format!("{HONEST}:0"))?
        .local_addr()?
        .port();
    let mut m = ManagerProcess::start(&opts.manager_bin, &db, port).await?;
    let honest_http = client(HONEST)?;
    let attacker = client(ATTACKER)?;
    let honest = register_honest_job(&honest_http, &m.base).await?;

    let target = AttackTarget {
        http: attacker,
        base: m.base.clone(),
        addr: m.addr(),
        workers: opts.workers,
        scale: opts.scale,
    };
    let mut summary = AttackSummary::default();
    for planned in planned_attacks(&target) {
        let report = measure_attack(&m, &honest_http, planned).await?;
        summary.attacks.push(report);
    }

    // SIGKILL, restart on the same database: the acknowledged job, round and task.
    let _ = m.child.kill();
    let _ = m.child.wait();
    drop(m);
    m = ManagerProcess::start(&opts.manager_bin, &db, port).await?;
    summary.restart = restart_checks(&honest_http, &m.base, &honest).await?;
    Ok(summary)
}

/// The honest job with an acknowledged task: what the restart must keep.
struct HonestJob {
    job: u64,
    token: String,
    task: String,
}

/// Registers the honest job, opens a round, and has device 7 take and acknowledge its task.
async fn register_honest_job(http: &reqwest::Client, base: &str) -> anyhow::Result<HonestJob> {
    let reg: Value = http
        .post(format!("{base}/v1/jobs"))
        .json(
            &json!({"name": "honest", "rounds": 3, "model_size_bytes": 1000,
                      "plan_url": plan_url()}),
        )
        .send()
        .await?
        .json()
        .await?;
    let job = reg["job_id"]
        .as_u64()
        .ok_or_else(|| anyhow!("no job id: {reg}"))?;
    let token = reg["token"].as_str().unwrap_or_default().to_string();
    http.post(format!("{base}/v1/jobs/{job}/rounds"))
        .bearer_auth(&token)
        .json(&json!({"demand": 1, "deadline_s": 3600, "min_response_fraction": 1}))
        .send()
        .await?
        .error_for_status()?;
    let a: Value = http
        .post(format!("{base}/v1/check-in"))
        .json(&json!({"device_id": 7, "profile": profile(1.0, 2.0, Vec::new())}))
        .send()
        .await?
        .json()
        .await?;
    let task = a["assignment"]["task_token"]
        .as_str()
        .ok_or_else(|| anyhow!("the honest device got no task: {a}"))?
        .to_string();
    http.post(format!("{base}/v1/tasks/{task}/ack"))
        .send()
        .await?
        .error_for_status()?;
    Ok(HonestJob { job, token, task })
}

/// After the restart at `base`: whether the honest job's round, task and token survived.
async fn restart_checks(
    http: &reqwest::Client,
    base: &str,
    honest: &HonestJob,
) -> anyhow::Result<Vec<(String, bool)>> {
    let HonestJob { job, token, task } = honest;
    let mut checks = Vec::new();
    let st: Value = http
        .get(format!("{base}/v1/jobs/{job}"))
        .send()
        .await?
        .json()
        .await?;
    checks.push((
        format!("job {job} and its open round, one device assigned"),
        st["open_round"]["assigned"].as_u64() == Some(1),
    ));
    let owner: Value = http
        .get(format!("{base}/v1/tasks/{task}"))
        .send()
        .await?
        .json()
        .await
        .unwrap_or(Value::Null);
    checks.push((
        "the acknowledged task's token".into(),
        owner["device_id"].as_u64() == Some(7),
    ));
    let r = http
        .post(format!("{base}/v1/jobs/{job}/rounds/0/close"))
        .bearer_auth(token)
        .json(&json!({"outcome": "success"}))
        .send()
        .await?;
    checks.push((
        "the job's token closes its round".into(),
        r.status().is_success(),
    ));
    Ok(checks)
}

/// What the attacks aim at and how hard.
#[derive(Clone)]
struct AttackTarget {
    /// The attacker's client, sending from [`ATTACKER`].
    http: reqwest::Client,
    base: String,
    addr: SocketAddr,
    workers: usize,
    scale: f64,
}

impl AttackTarget {
    /// `full` requests at this run's scale, at least one.
    fn n(&self, full: f64) -> u64 {
        (full * self.scale).ceil().max(1.0) as u64
    }
}

/// One attack to run: its name, the requests it sends, and how.
struct PlannedAttack {
    name: &'static str,
    requests: u64,
    run: Attack,
}

/// Every attack, in the order they run.
fn planned_attacks(target: &AttackTarget) -> Vec<PlannedAttack> {
    vec![
        random_profiles(target),
        long_tags(target),
        oversized_fields(target),
        registrations(target),
        slow_headers(target),
        idle_connections(target),
    ]
}

/// Check-ins from devices with invented profiles, each a new group of eligibility.
fn random_profiles(target: &AttackTarget) -> PlannedAttack {
    let (http, base, k, workers) = (
        target.http.clone(),
        target.base.clone(),
        target.n(150_000.0),
        target.workers,
    );
    PlannedAttack {
        name: "random-profiles",
        requests: k,
        run: attack(move |t| {
            let (http, base) = (http.clone(), base.clone());
            boxed(async move {
                flood(&http, k, workers, &t, move |h, i| {
                    let mut rng = rand::rng();
                    h.post(format!("{base}/v1/check-in")).json(&json!({
                        "device_id": i,
                        "profile": profile(rng.random_range(0.0..8.0), rng.random_range(1.0..500.0), Vec::new()),
                    }))
                })
                .await
            })
        }),
    }
}

/// Jobs and devices with many long tags.
fn long_tags(target: &AttackTarget) -> PlannedAttack {
    let (http, base, k, workers) = (
        target.http.clone(),
        target.base.clone(),
        target.n(20_000.0),
        target.workers,
    );
    PlannedAttack {
        name: "long-tags",
        requests: k,
        run: attack(move |t| {
            let (http, base) = (http.clone(), base.clone());
            boxed(async move {
                register_tagged_jobs(&http, &base, &t).await;
                flood(&http, k, workers, &t, move |h, i| {
                    let mut rng = rand::rng();
                    let tags: Vec<String> = (0..32).map(|_| random_tag(&mut rng)).collect();
                    h.post(format!("{base}/v1/check-in")).json(&json!({
                        "device_id": i, "profile": profile(2.0, 3.0, tags)}))
                })
                .await
            })
        }),
    }
}

/// Groups that require many long tags, so that the tagged devices have somewhere to go.
async fn register_tagged_jobs(http: &reqwest::Client, base: &str, t: &Tally) {
    for g in 0..16 {
        // The generator is not `Send`: drop it before the await.
        let tags: Vec<String> = {
            let mut rng = rand::rng();
            (0..32).map(|_| random_tag(&mut rng)).collect()
        };
        let r = http
            .post(format!("{base}/v1/jobs"))
            .json(&json!({
            "name": format!("tags-{g}"), "rounds": 1, "model_size_bytes": 10,
            "plan_url": plan_url(),
            "requirement": {"tags": tags}}))
            .send()
            .await;
        t.add(r);
    }
}

/// Check-ins with fields past every limit.
fn oversized_fields(target: &AttackTarget) -> PlannedAttack {
    let (http, base, k, workers) = (
        target.http.clone(),
        target.base.clone(),
        target.n(2_000.0),
        target.workers,
    );
    PlannedAttack {
        name: "oversized-fields",
        requests: k,
        run: attack(move |t| {
            let (http, base) = (http.clone(), base.clone());
            boxed(async move {
                flood(&http, k, workers, &t, move |h, i| {
                    let url = format!("{base}/v1/check-in");
                    match i % 4 {
                        // Too many tags, too long a tag, a 100 KB body, a lease
                        // that would never end.
                        0 => h.post(url).json(&json!({"device_id": i, "profile": profile(1.0, 2.0, (0..200).map(|k| k.to_string()).collect())})),
                        1 => h.post(url).json(&json!({"device_id": i, "profile": profile(1.0, 2.0, vec!["x".repeat(1000)])})),
                        2 => h.post(url).header("content-type", "application/json").body(vec![b' '; 100_000]),
                        _ => h.post(format!("{base}/v1/check-in")).json(&json!({"device_id": i, "profile": profile(1.0, 2.0, Vec::new()), "online_for_s": 1.7e308})),
                    }
                })
                .await
            })
        }),
    }
}

/// Job registrations that squat on the manager, each a distinct group.
fn registrations(target: &AttackTarget) -> PlannedAttack {
    let (http, base, k) = (
        target.http.clone(),
        target.base.clone(),
        target.n(300.0).max(130),
    );
    PlannedAttack {
        name: "registrations",
        requests: k,
        run: attack(move |t| {
            let (http, base) = (http.clone(), base.clone());
            boxed(async move {
                flood(&http, k, 4, &t, move |h, i| {
                    h.post(format!("{base}/v1/jobs")).json(&json!({
                        "name": format!("squat-{i}"), "rounds": 1, "model_size_bytes": 10,
                        "plan_url": plan_url(),
                        "requirement": {"min_cpu_score": 1.0 + i as f64 * 1e-3}}))
                })
                .await
            })
        }),
    }
}

/// Connections that send part of a request's headers and then nothing.
fn slow_headers(target: &AttackTarget) -> PlannedAttack {
    let (addr, k) = (target.addr, target.n(400.0));
    PlannedAttack {
        name: "slow-headers",
        requests: k,
        run: attack(move |t| {
            boxed(async move {
                hold_connections(
                    addr,
                    k,
                    b"POST /v1/check-in HTTP/1.1\r\nhost: x\r\n",
                    Duration::from_secs(3),
                    &t,
                )
                .await
            })
        }),
    }
}

/// Connections that send nothing at all.
fn idle_connections(target: &AttackTarget) -> PlannedAttack {
    let (addr, k) = (target.addr, target.n(1_500.0));
    PlannedAttack {
        name: "idle-connections",
        requests: k,
        run: attack(move |t| {
            boxed(async move { hold_connections(addr, k, b"", Duration::from_secs(2), &t).await })
        }),
    }
}

/// Runs one attack against `m` while the honest device checks in, and reports it.
async fn measure_attack(
    m: &ManagerProcess,
    honest_http: &reqwest::Client,
    planned: PlannedAttack,
) -> anyhow::Result<AttackReport> {
    let PlannedAttack {
        name,
        requests,
        run,
    } = planned;
    let (rss0, db0) = (m.rss_mib(), m.db_mb());
    let stop = Arc::new(AtomicBool::new(false));
    let probe = tokio::spawn(honest_probe(m.base.clone(), stop.clone()));
    let tally = Arc::new(Tally::default());
    let t0 = Instant::now();
    run(tally.clone()).await;
    // Let the manager's one-second flush write what it buffered.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    stop.store(true, Relaxed);
    let (mut lat, honest_failed) = probe.await?;
    let mut report = AttackReport {
        name,
        requests,
        ok: tally.ok.load(Relaxed),
        client_errors: tally.c4.load(Relaxed),
        server_errors: tally.c5.load(Relaxed),
        dropped: tally.dropped.load(Relaxed),
        honest: lat.len() as u64 + honest_failed,
        honest_failed,
        honest_p50_ms: percentile(&mut lat, 0.5),
        honest_p99_ms: percentile(&mut lat, 0.99),
        rss_growth_mib: m.rss_mib() - rss0,
        db_growth_mb: m.db_mb() - db0,
        seconds: t0.elapsed().as_secs_f64(),
    };
    if name == "registrations" && !honest_can_register(honest_http, &m.base).await {
        report.honest_failed += 1;
    }
    Ok(report)
}

/// Whether the honest operator can still register a job from its own address.
async fn honest_can_register(http: &reqwest::Client, base: &str) -> bool {
    let r = http
        .post(format!("{base}/v1/jobs"))
        .json(
            &json!({"name": "honest-late", "rounds": 1, "model_size_bytes": 10,
                      "plan_url": plan_url()}),
        )
        .send()
        .await;
    r.is_ok_and(|r| r.status().is_success())
}

/// An attack: given the tally, the future that runs it.
type Attack = Box<dyn Fn(Arc<Tally>) -> BoxFuture>;

/// What an attack returns: a boxed future (no futures dependency for one type).
type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

fn boxed(f: impl std::future::Future<Output = ()> + Send + 'static) -> BoxFuture {
    Box::pin(f)
}

/// Boxes an attack; the signature gives the closure its argument type.
fn attack(f: impl Fn(Arc<Tally>) -> BoxFuture + 'static) -> Attack {
    Box::new(f)
}
