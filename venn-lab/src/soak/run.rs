//! The soak's run: start the processes and the load, fire the faults as they fall due,
//! supervise the jobs (next arrival when one finishes, a restart when one fails), wait for
//! killed registrations to end, stop everything, and check the database.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use venn_api::client::{JobSession, ManagerClient};

use super::disk::Quota;
use super::driver::{self, Recorder, WorkerTally};
use super::faults::{Fault, schedule};
use super::procs::Proc;
use super::report::{FaultRecord, JobLine, SoakReport};
use super::verify::{self, Check, Expected};
use super::{SoakError, SoakOptions};
use crate::config::AvailabilitySource;

/// Restarts of one job after failures before the soak gives up on it.
const MAX_JOB_RESTARTS: usize = 5;
/// Load jobs registered at the start.
const LOAD_JOBS: usize = 4;
/// How long a shard or job kill waits for an open round before it happens anyway, s.
const MID_ROUND_PATIENCE_S: f64 = 20.0;

/// One job arrival's process.
struct JobRun {
    index: usize,
    wave: u32,
    name: String,
    proc: Proc,
    csv: PathBuf,
    restarts: Vec<String>,
}

/// The disk-full phase while it lasts.
struct DiskPhase {
    fault: usize,
    free_at_s: f64,
    errors_before: u64,
    log_len: u64,
    pid: Option<u32>,
}

/// Everything the soak holds while it runs.
struct Soak<'a> {
    opts: &'a SoakOptions,
    base: String,
    client: ManagerClient,
    db: PathBuf,
    quota: Option<Quota>,
    manager: Proc,
    shards: Vec<Proc>,
    jobs: Vec<JobRun>,
    arrivals: Vec<(f64, usize, u32)>,
    done: Vec<JobLine>,
    expected: HashMap<String, u32>,
    faults: Vec<(f64, Fault)>,
    fired: Vec<FaultRecord>,
    recover_from: Vec<Option<f64>>,
    disk: Option<DiskPhase>,
    rec: Arc<Recorder>,
    checks: Vec<Check>,
    notes: Vec<String>,
    manager_crashes: u32,
}

/// Runs the soak `opts` describes and returns what it found.
pub async fn run_soak(opts: &SoakOptions) -> Result<SoakReport, SoakError> {
    let t0 = std::time::Instant::now();
    let mut soak = Soak::start(opts).await?;
    let load_jobs = driver::register_load_jobs(&soak.base, LOAD_JOBS)
        .await
        .map_err(|e| SoakError::Setup(format!("registering the load jobs: {e}")))?;
    let load = tokio::spawn(driver::run(
        soak.base.clone(),
        opts.connections,
        opts.load_devices,
        soak.rec.clone(),
    ));
    let refill = tokio::spawn(driver::keep_rounds_open(load_jobs, soak.rec.clone()));
    let bar = opts.progress.then(|| progress_bar(opts.seconds));
    soak.run_until_done(bar.as_ref()).await?;
    soak.wait_for_killed_jobs().await;
    let load_s = soak.rec.now_s();
    soak.rec.stop();
    let tallies = load.await.unwrap_or_default();
    let (load_jobs, load_rounds) = refill.await.map_err(setup)?;
    for j in &load_jobs {
        let _ = cancel(j).await;
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut report = soak.finish(tallies, load_s)?;
    report.load_rounds = load_rounds;
    report.wall_s = t0.elapsed().as_secs_f64();
    Ok(report)
}

async fn cancel(job: &JobSession) -> Result<(), venn_api::client::ClientError> {
    job.cancel().await
}

fn progress_bar(seconds: f64) -> ProgressBar {
    let b = ProgressBar::new(seconds.ceil() as u64);
    b.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} s  {msg}")
            .expect("valid template"),
    );
    b.enable_steady_tick(Duration::from_millis(200));
    b
}

fn setup(e: impl std::fmt::Display) -> SoakError {
    SoakError::Setup(e.to_string())
}

impl<'a> Soak<'a> {
    /// The quota disk, the manager, the shards, the load's recorder and the schedule.
    async fn start(opts: &'a SoakOptions) -> Result<Soak<'a>, SoakError> {
        std::fs::create_dir_all(opts.dir.join("jobs")).map_err(setup)?;
        let db_dir = opts.dir.join("db");
        let mut notes = Vec::new();
        let quota = if opts.quota_mib > 0 {
            match Quota::mount(&db_dir, opts.quota_mib) {
                Ok(q) => Some(q),
                Err(why) => {
                    notes.push(format!("SKIPPED the disk-full phase: {why}"));
                    None
                }
            }
        } else {
            None
        };
        std::fs::create_dir_all(&db_dir).map_err(setup)?;
        let db = db_dir.join("manager.db");
        for s in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{s}", db.display()));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(setup)?
            .port();
        let base = format!("http://127.0.0.1:{port}");
        let manager = Proc::start(
            "manager",
            &opts.bins.manager,
            manager_args(opts, port, &db),
            &opts.dir.join("manager.log"),
        )?;
        let client = ManagerClient::new(&base);
        wait_up(&client, &base).await?;
        let shards = start_shards(opts, &base)?;
        let cfg = &opts.experiment;
        let arrivals = (cfg.jobs.iter().enumerate())
            .map(|(i, j)| (j.arrival_s, i, 0))
            .collect();
        let faults = schedule(
            opts.seconds,
            opts.manager_kills,
            shards.len(),
            quota.is_some(),
            opts.seed,
        );
        let horizon = Duration::from_secs_f64(opts.seconds * 2.0 + 900.0);
        Ok(Soak {
            opts,
            base,
            client,
            db,
            quota,
            manager,
            shards,
            jobs: Vec::new(),
            arrivals,
            done: Vec::new(),
            expected: HashMap::new(),
            faults,
            fired: Vec::new(),
            recover_from: Vec::new(),
            disk: None,
            rec: Recorder::new(horizon),
            checks: Vec::new(),
            notes,
            manager_crashes: 0,
        })
    }

    /// Ticks until the load's time is up, every fault has fired and every job has ended
    /// (or the limit of twice the duration plus 10 minutes).
    async fn run_until_done(&mut self, bar: Option<&ProgressBar>) -> Result<(), SoakError> {
        let limit = self.opts.seconds * 2.0 + 600.0;
        loop {
            let now = self.rec.now_s();
            self.start_arrivals(now)?;
            self.fire_due(now).await?;
            self.end_disk_phase(now)?;
            self.supervise(now).await?;
            if now >= self.opts.seconds
                && self.faults.is_empty()
                && self.disk.is_none()
                && self.jobs.is_empty()
                && self.arrivals.is_empty()
            {
                return Ok(());
            }
            if now > limit {
                self.notes
                    .push(format!("stopped at the time limit ({limit:.0} s)"));
                return Ok(());
            }
            if let Some(b) = bar {
                b.set_position(now.min(self.opts.seconds) as u64);
                b.set_message(format!(
                    "{}/{} faults, {} jobs done, {} running",
                    self.fired.len(),
                    self.fired.len() + self.faults.len(),
                    self.done.len(),
                    self.jobs.len()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Starts the job arrivals that are due.
    fn start_arrivals(&mut self, now: f64) -> Result<(), SoakError> {
        let due: Vec<_> = self
            .arrivals
            .iter()
            .filter(|a| a.0 <= now)
            .copied()
            .collect();
        self.arrivals.retain(|a| a.0 > now);
        for (_, index, wave) in due {
            let lj = &self.opts.experiment.jobs[index];
            let name = format!("{}-w{wave}", lj.job.name);
            let mut job = lj.job.clone();
            job.name = name.clone();
            let toml_path = self.opts.dir.join("jobs").join(format!("{name}.toml"));
            let text = toml::to_string(&job).map_err(setup)?;
            std::fs::write(&toml_path, text).map_err(setup)?;
            let csv = self.opts.dir.join("jobs").join(format!("{name}.csv"));
            let _ = std::fs::remove_file(&csv);
            let mut args = vec![
                "run".to_string(),
                toml_path.display().to_string(),
                "--manager".into(),
                self.base.clone(),
                "--csv".into(),
                csv.display().to_string(),
                "--wait-s".into(),
                "120".into(),
            ];
            if let Some(d) = &self.opts.experiment.data {
                args.extend(["--data".into(), d.display().to_string()]);
            }
            let log = self.opts.dir.join("jobs").join(format!("{name}.log"));
            let proc = Proc::start(&format!("job {name}"), &self.opts.bins.job, args, &log)?;
            self.expected.insert(name.clone(), job.rounds);
            self.jobs.push(JobRun {
                index,
                wave,
                name,
                proc,
                csv,
                restarts: Vec::new(),
            });
        }
        Ok(())
    }

    /// Fires the next fault if it is due (a shard or job kill waits, a while, for a round
    /// to be open).
    async fn fire_due(&mut self, now: f64) -> Result<(), SoakError> {
        let Some(&(at, fault)) = self.faults.first() else {
            return Ok(());
        };
        if now < at || self.disk.is_some() {
            return Ok(());
        }
        let open = self.open_rounds().await;
        let waited = now - at;
        let record = match fault {
            Fault::KillManager => Some(self.kill_manager(now).await?),
            Fault::KillShard(k) if !open.is_empty() || waited > MID_ROUND_PATIENCE_S => {
                self.shards[k].restart()?;
                Some(self.record(now, fault, format!("open rounds: {}", rounds_text(&open))))
            }
            Fault::KillJob => self.kill_job(now, &open, waited)?,
            Fault::DiskFull => Some(self.fill_disk(now)?),
            Fault::KillShard(_) => None,
        };
        if let Some(r) = record {
            self.faults.remove(0);
            let from = r.load_affected.then_some(r.at_s);
            self.fired.push(r);
            self.recover_from.push(from);
        }
        Ok(())
    }

    fn record(&self, now: f64, fault: Fault, detail: String) -> FaultRecord {
        FaultRecord {
            at_s: now,
            what: fault.describe(),
            detail,
            recover_s: None,
            load_affected: false,
        }
    }

    async fn kill_manager(&mut self, now: f64) -> Result<FaultRecord, SoakError> {
        self.manager.restart()?;
        wait_up(&self.client, &self.base).await?;
        let up = self.rec.now_s() - now;
        Ok(FaultRecord {
            load_affected: true,
            ..self.record(
                now,
                Fault::KillManager,
                format!("/healthz answered again after {up:.2} s"),
            )
        })
    }

    /// Kills a job whose round is open (any running job after the patience), and starts
    /// it again: a new registration, from its first round.
    fn kill_job(
        &mut self,
        now: f64,
        open: &[(String, u64)],
        waited: f64,
    ) -> Result<Option<FaultRecord>, SoakError> {
        let pick = self
            .jobs
            .iter()
            .position(|j| open.iter().any(|(n, _)| *n == j.name))
            .or_else(|| (waited > MID_ROUND_PATIENCE_S && !self.jobs.is_empty()).then_some(0));
        let Some(i) = pick else {
            return Ok(None);
        };
        let j = &mut self.jobs[i];
        let round = open.iter().find(|(n, _)| *n == j.name).map(|(_, r)| *r);
        let _ = std::fs::remove_file(&j.csv);
        j.proc.restart()?;
        let when = round.map_or("between rounds".into(), |r| format!("in round {r}"));
        j.restarts.push(format!("SIGKILLed by the soak {when}"));
        let detail = format!(
            "job {} killed {when}; started again (a new registration)",
            j.name
        );
        Ok(Some(self.record(now, Fault::KillJob, detail)))
    }

    fn fill_disk(&mut self, now: f64) -> Result<FaultRecord, SoakError> {
        let quota = self
            .quota
            .as_ref()
            .expect("scheduled only with a quota disk");
        let bytes = tokio::task::block_in_place(|| quota.fill()).map_err(setup)?;
        *self
            .rec
            .first_server_error
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        self.disk = Some(DiskPhase {
            fault: self.fired.len(),
            free_at_s: now + self.opts.disk_full_s,
            errors_before: self
                .rec
                .server_errors
                .load(std::sync::atomic::Ordering::Relaxed),
            log_len: std::fs::metadata(self.manager.log()).map_or(0, |m| m.len()),
            pid: self.manager.pid(),
        });
        Ok(FaultRecord {
            load_affected: true,
            ..self.record(
                now,
                Fault::DiskFull,
                format!(
                    "{:.1} MB written to fill it; freed after {:.1} s",
                    bytes as f64 / 1e6,
                    self.opts.disk_full_s
                ),
            )
        })
    }

    /// Frees the disk when its time is up and checks how the manager took it.
    fn end_disk_phase(&mut self, now: f64) -> Result<(), SoakError> {
        let Some(phase) = self.disk.take_if(|d| now >= d.free_at_s) else {
            return Ok(());
        };
        if let Some(q) = &self.quota {
            q.free().map_err(setup)?;
        }
        let errors = self
            .rec
            .server_errors
            .load(std::sync::atomic::Ordering::Relaxed)
            - phase.errors_before;
        let answer = self
            .rec
            .first_server_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let alive = self.manager.pid() == phase.pid && self.manager.exited().is_none();
        self.checks.push(Check::new(
            "the manager stayed up while its disk was full",
            alive,
            format!("same process: {alive}"),
        ));
        let json = answer.as_deref().is_some_and(|a| a.starts_with("HTTP "));
        self.checks.push(Check::new(
            "writes on the full disk were refused with a 5xx and the JSON error body",
            errors > 0 && json,
            format!(
                "{errors} answers 5xx; the first: {}",
                answer.as_deref().unwrap_or("none")
            ),
        ));
        self.notes
            .push(disk_log_note(self.manager.log(), phase.log_len, &self.db));
        self.fired[phase.fault].detail += &format!("; {errors} answers 5xx meanwhile");
        self.recover_from[phase.fault] = Some(now);
        Ok(())
    }

    /// Jobs: a finished one arrives again while the load lasts, a failed one is started
    /// again; shards and the manager are started again if they exit on their own.
    async fn supervise(&mut self, now: f64) -> Result<(), SoakError> {
        let mut i = 0;
        while i < self.jobs.len() {
            let Some(status) = self.jobs[i].proc.exited() else {
                i += 1;
                continue;
            };
            let j = &mut self.jobs[i];
            if !status.success() && j.restarts.len() < MAX_JOB_RESTARTS {
                j.restarts
                    .push(format!("{status}: {}", j.proc.last_log_line()));
                let _ = std::fs::remove_file(&j.csv);
                j.proc.restart()?;
                i += 1;
                continue;
            }
            let j = self.jobs.remove(i);
            if status.success() && now < self.opts.seconds {
                self.arrivals.push((now + 0.5, j.index, j.wave + 1));
            }
            self.done.push(JobLine {
                name: j.name,
                finished: status.success(),
                rounds: csv_rows(&j.csv),
                restarts: j.restarts,
            });
        }
        for s in &mut self.shards {
            if let Some(status) = s.exited() {
                self.notes.push(format!(
                    "{} exited on its own ({status}): {}",
                    s.name,
                    s.last_log_line()
                ));
                s.restart()?;
            }
        }
        if let Some(status) = self.manager.exited() {
            self.manager_crashes += 1;
            self.notes.push(format!(
                "the manager exited on its own ({status}): {}",
                self.manager.last_log_line()
            ));
            self.manager.restart()?;
            wait_up(&self.client, &self.base).await?;
        }
        Ok(())
    }

    /// The experiment jobs with an open round at the manager: (name, round).
    async fn open_rounds(&self) -> Vec<(String, u64)> {
        let Ok(st) = self.client.status().await else {
            return Vec::new();
        };
        st["jobs"]
            .as_array()
            .map(|jobs| {
                jobs.iter()
                    .filter_map(|j| {
                        Some((j["name"].as_str()?.to_string(), j["open_round"].as_u64()?))
                    })
                    .filter(|(n, _)| self.expected.contains_key(n))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits (up to twice the longest deadline plus a minute) until the manager has ended
    /// every experiment job: killed registrations end when their round's deadline passed
    /// and they stayed silent (`--idle-job-s`).
    async fn wait_for_killed_jobs(&mut self) {
        let deadline = (self.opts.experiment.jobs.iter())
            .map(|j| j.job.deadline_s)
            .fold(0.0, f64::max);
        let until = self.rec.now_s() + 2.0 * deadline + 60.0;
        while self.rec.now_s() < until {
            let Ok(st) = self.client.status().await else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            let active = st["jobs"].as_array().map_or(0, |jobs| {
                jobs.iter()
                    .filter(|j| {
                        j["name"]
                            .as_str()
                            .is_some_and(|n| self.expected.contains_key(n))
                    })
                    .count()
            });
            if active == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Kills the manager a last time, checks its database, and writes up the figures.
    fn finish(mut self, tallies: Vec<WorkerTally>, load_s: f64) -> Result<SoakReport, SoakError> {
        self.manager.kill();
        for s in &mut self.shards {
            s.kill();
        }
        let mut lat: Vec<u32> = Vec::new();
        let (mut acked, mut finished) = (Vec::new(), Vec::new());
        let mut r = SoakReport {
            load_s,
            ..SoakReport::default()
        };
        for t in tallies {
            lat.extend(t.latency_us);
            acked.extend(t.acked);
            finished.extend(t.finished);
            (r.check_ins, r.failed, r.assigned) = (
                r.check_ins + t.ok,
                r.failed + t.failed,
                r.assigned + t.assigned,
            );
        }
        lat.sort_unstable();
        let pct = |p: f64| {
            lat.get(((lat.len() as f64 * p).ceil() as usize).saturating_sub(1))
                .map_or(0.0, |v| *v as f64 / 1000.0)
        };
        (r.p50_ms, r.p99_ms, r.max_ms) = (pct(0.5), pct(0.99), pct(1.0));
        r.check_ins_per_s = r.check_ins as f64 / load_s.max(1e-9);
        (r.acked, r.finished) = (acked.len() as u64, finished.len() as u64);
        r.server_errors = self
            .rec
            .server_errors
            .load(std::sync::atomic::Ordering::Relaxed);
        for (f, from) in self.fired.iter_mut().zip(&self.recover_from) {
            f.recover_s = from.and_then(|t| self.rec.recovery_after(t)).map(|x| x.0);
        }
        let want = Expected {
            acked: &acked,
            finished: &finished,
            jobs: &self.expected,
        };
        let mut checks = verify::verify(&self.db, &want)?;
        checks.append(&mut self.checks);
        checks.push(Check::new(
            "the manager never exited on its own",
            self.manager_crashes == 0,
            format!("{} exits", self.manager_crashes),
        ));
        for j in &self.jobs {
            self.notes
                .push(format!("{} still running at the end", j.name));
        }
        self.done.sort_by(|a, b| a.name.cmp(&b.name));
        (r.faults, r.jobs, r.checks, r.notes) = (self.fired, self.done, checks, self.notes);
        drop(self.quota);
        Ok(r)
    }
}

/// The manager's command line: its database, the experiment's policy and seed, devices
/// told to retry after 1 s, and killed jobs ended after 5 s of silence.
fn manager_args(opts: &SoakOptions, port: u16, db: &Path) -> Vec<String> {
    let cfg = &opts.experiment;
    [
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--db",
        &db.display().to_string(),
        "--policy",
        cfg.policy.name(),
        "--seed",
        &cfg.seed.to_string(),
        "--retry-after-s",
        "1",
        "--idle-job-s",
        "5",
    ]
    .map(String::from)
    .to_vec()
}

/// The experiment's devices as `device-agent` processes, one per shard (at least two, so
/// that one can be killed while the other serves).
fn start_shards(opts: &SoakOptions, base: &str) -> Result<Vec<Proc>, SoakError> {
    let d = &opts.experiment.devices;
    let n = d.shards.max(2);
    let workers = if d.workers == 0 {
        1
    } else {
        d.workers.div_ceil(n)
    };
    let mut shards = Vec::new();
    for k in 0..n {
        let mut args: Vec<String> = [
            "--manager",
            base,
            "--devices",
            &d.count.to_string(),
            "--shard",
            &format!("{k}/{n}"),
            "--workers",
            &workers.to_string(),
            "--seed",
            &opts.experiment.seed.to_string(),
            "--writers-per-device",
            &d.writers_per_device.to_string(),
            "--compress",
            &d.compress.to_string(),
            "--start-at",
            &d.start_s.to_string(),
            "--drop-fraction",
            &d.drop_fraction.to_string(),
            "--quiet",
        ]
        .map(String::from)
        .to_vec();
        match &d.availability {
            AvailabilitySource::Always => {}
            AvailabilitySource::Synthetic => args.push("--synthetic".into()),
            AvailabilitySource::Trace(p) => {
                args.extend(["--trace".into(), p.display().to_string()])
            }
        }
        if let Some(data) = &opts.experiment.data {
            args.extend(["--data".into(), data.display().to_string()]);
        }
        let log = opts.dir.join(format!("shard-{k}.log"));
        shards.push(Proc::start(
            &format!("shard-{k}"),
            &opts.bins.agent,
            args,
            &log,
        )?);
    }
    Ok(shards)
}

/// Polls `/healthz` until it answers (30 s at most).
async fn wait_up(client: &ManagerClient, base: &str) -> Result<(), SoakError> {
    for _ in 0..1200 {
        if client.healthz().await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(SoakError::ManagerDown {
        url: base.to_string(),
        seconds: 30.0,
    })
}

fn rounds_text(open: &[(String, u64)]) -> String {
    if open.is_empty() {
        return "none (waited)".into();
    }
    open.iter()
        .map(|(n, r)| format!("{n} round {r}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn csv_rows(p: &Path) -> usize {
    std::fs::read_to_string(p).map_or(0, |s| s.lines().count().saturating_sub(1))
}

/// What the manager logged while its disk was full, and whether it named the database.
fn disk_log_note(log: &Path, from: u64, db: &Path) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let tail = String::from_utf8_lossy(text.get(from as usize..).unwrap_or_default());
    let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
    let names_db = lines.iter().any(|l| l.contains(&*db.to_string_lossy()));
    format!(
        "while the disk was full the manager logged {} lines, {} naming the database file{}",
        lines.len(),
        if names_db { "some" } else { "none" },
        lines
            .first()
            .map_or(String::new(), |l| format!("; the first: {}", l.trim()))
    )
}
