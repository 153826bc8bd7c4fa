//! `venn-manager`: the live resource manager's command line.

use anyhow::Context;
use clap::Parser;
use std::path::PathBuf;
use std::sync::Arc;
use venn_core::admission::AdmissionParams;
use venn_core::{FitRule, PolicyArgs, PolicyConfig, PolicyKind, SupplyConfig};
use venn_manager::settings::{Feasibility, Registration, ServerLimits};
use venn_manager::{Clock, Manager, Settings, server};

/// Serve the Venn resource manager: FL jobs register and submit round requests; devices
/// check in and are assigned to jobs by the chosen scheduling policy. State lives in a
/// SQLite file, so restarting on the same --db resumes every job and round.
///
/// With --admission, jobs go through posted-price admission control first (see the
/// admission options).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: String,
    /// SQLite database file (created if missing).
    #[arg(long, default_value = "venn-manager.db")]
    db: PathBuf,
    /// Scheduling policy.
    #[arg(long, default_value = "venn", value_parser = PolicyKind::names_parser())]
    policy: String,
    /// The policy's parameters (each flag applies to the policies that have the knob).
    #[command(flatten)]
    policy_args: PolicyArgs,
    /// Supply-estimator window in seconds.
    #[arg(long, default_value_t = 86400.0)]
    supply_window_s: f64,
    /// Refuse a submitted round (422) that the check-ins seen so far rule out: no eligible
    /// device, fewer eligible check-ins than the round's fewest devices, or a deadline
    /// below the fastest eligible device's task. Judged only after this many seconds of
    /// check-ins (and --feasibility-min-check-ins of them); 0 turns the check off.
    #[arg(long, default_value_t = 300.0, value_name = "SECS")]
    feasibility_after_s: f64,
    /// Check-ins the manager must have counted before it refuses a round.
    #[arg(long, default_value_t = 100)]
    feasibility_min_check_ins: u64,
    /// Seconds an idle device waits before checking in again.
    #[arg(long, default_value_t = 5.0)]
    retry_after_s: f64,
    /// Seed of the scheduler's random generator.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Connections served at once; one more is closed as soon as it is accepted (so idle
    /// or slow clients cannot exhaust file descriptors). Keep it below `ulimit -n`.
    #[arg(long, default_value_t = ServerLimits::default().max_connections, help_heading = "Limits")]
    max_connections: usize,
    /// Connections one client address may hold at once.
    #[arg(long, default_value_t = ServerLimits::default().max_connections_per_source, help_heading = "Limits")]
    max_connections_per_source: usize,
    /// Check-ins a second one client address may send (then 429 with Retry-After); 0:
    /// unlimited (the default: an emulated population checks in from one address).
    #[arg(long, default_value_t = 0.0, help_heading = "Limits")]
    check_in_rate_per_source: f64,
    /// Job registrations a minute one client address may send (then 429); 0: unlimited.
    #[arg(long, default_value_t = ServerLimits::default().registrations_per_source_min.unwrap_or(0.0), help_heading = "Limits")]
    registration_rate_per_source: f64,
    /// Seconds a client may take to send a request's headers, or sit idle on a kept-alive
    /// connection, before the connection is closed.
    #[arg(long, default_value_t = ServerLimits::default().header_read_timeout_s, help_heading = "Limits")]
    header_timeout_s: f64,
    /// Seconds a request body may take to arrive (then 408).
    #[arg(long, default_value_t = ServerLimits::default().body_timeout_s, help_heading = "Limits")]
    body_timeout_s: f64,
    /// Require this bearer token on job registration (`POST /v1/jobs`); at least 16
    /// bytes. Without it anyone who reaches the manager may register jobs.
    #[arg(
        long,
        env = "VENN_OPERATOR_TOKEN",
        hide_env_values = true,
        help_heading = "Limits"
    )]
    operator_token: Option<String>,
    /// A host (name or address) a job's plan_url may name besides loopback; repeat for
    /// more. Devices are only ever sent to these hosts.
    #[arg(long = "plan-host", value_name = "HOST", help_heading = "Limits")]
    plan_hosts: Vec<String>,
    /// End a job, and release its devices, after this many seconds without activity
    /// (no call, no open round, no launch to come); 0: never.
    #[arg(long, default_value_t = 3600.0, help_heading = "Limits")]
    idle_job_s: f64,
    /// Device classes distinct check-in profiles may make before new ones fold into a
    /// class of the same Venn cell (bounds the memory and rows anonymous clients can
    /// create); 0: unbounded.
    #[arg(long, default_value_t = venn_manager::settings::DEFAULT_MAX_PROFILE_CLASSES, help_heading = "Limits")]
    max_profile_classes: usize,
    /// Live jobs one registration credential may hold (the operator token, or without
    /// one the source address); past it, 403 quota_exceeded. 0: no quota.
    #[arg(long, default_value_t = 64, help_heading = "Limits")]
    jobs_per_credential: usize,
    /// Seconds a whole request may take (then 408).
    #[arg(long, default_value_t = ServerLimits::default().request_timeout_s, help_heading = "Limits")]
    request_timeout_s: f64,
    /// How a device that says when it goes offline (`online_for_s` in its check-in)
    /// judges an offered job: `nominal` (the job's compute + transfer time on the
    /// reference device, the authors' rule), `device-speed` (its own time) or `any`.
    /// The device takes the first offered job that fits, or nothing.
    #[arg(long, value_enum, default_value_t = FitRule::Nominal)]
    fit: FitRule,
    /// Turn on posted-price admission control (off by default: every job is registered as
    /// before). Each job must then register with a statement of work — value over
    /// completion time, rounds as a distribution, devices per round, seconds per round.
    /// The manager admits it with the launch plan that maximises expected value minus
    /// expected price and keeps devices away from it until the plan's launch, or declines
    /// it with HTTP 409 and the quote. When fewer devices check in during a slot than the
    /// running admitted jobs use, the most recently admitted are evicted (HTTP 410 after).
    #[arg(long, help_heading = "Admission control")]
    admission: bool,
    /// Length of a pricing slot in seconds. Prices are posted per slot; at each slot's end
    /// the slot is judged against the capacity (the trailing mean of check-ins per slot,
    /// the simulator's rule) and that decides evictions.
    #[arg(long, default_value_t = AdmissionParams::default().slot_s, requires = "admission", help_heading = "Admission control")]
    admission_slot_s: f64,
    /// How far ahead, in seconds, a job's launch may be planned.
    #[arg(long, default_value_t = AdmissionParams::default().horizon_s, requires = "admission", help_heading = "Admission control")]
    admission_horizon_s: f64,
    /// Slack epsilon in [0, 10): plans may use only C·(1 − ε/10) of the forecast capacity
    /// C, so that evictions stay rare. (Not --epsilon, venn's fairness knob.)
    #[arg(long, default_value_t = AdmissionParams::default().epsilon, requires = "admission", help_heading = "Admission control")]
    admission_epsilon: f64,
    /// Price of one device check-in in an empty slot (the floor).
    #[arg(long, default_value_t = AdmissionParams::default().price_min, requires = "admission", help_heading = "Admission control")]
    admission_price_min: f64,
    /// Price of one device check-in in a slot filled to the planned capacity (the
    /// ceiling; prices rise exponentially from the floor as a slot fills), also charged
    /// for usage beyond a job's stated rounds.
    #[arg(long, default_value_t = AdmissionParams::default().price_max, requires = "admission", help_heading = "Admission control")]
    admission_price_max: f64,
    /// The capacity is the mean of the check-ins per slot over this trailing window, in
    /// seconds (one day by default: the diurnal swing inside a day is no overload for
    /// jobs that run for hours at an average rate).
    #[arg(long, default_value_t = AdmissionParams::default().capacity_window_s, requires = "admission", help_heading = "Admission control")]
    admission_window_s: f64,
    /// Check-ins per slot to assume for the slots of the window not yet seen (the
    /// operator's prior). Without it the mean is over the slots seen, and before the
    /// first slot ends the forecast is the most check-ins seen in one slot so far.
    #[arg(long, requires = "admission", help_heading = "Admission control")]
    admission_prior: Option<f64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let a = Args::parse();
    let settings = Settings {
        policy: a.policy_args.resolve(&PolicyConfig::default(), &a.policy),
        supply: SupplyConfig {
            window_s: a.supply_window_s,
            ..SupplyConfig::default()
        },
        seed: a.seed,
        fit: a.fit,
        retry_after_s: a.retry_after_s,
        registration: Registration {
            operator_token: a.operator_token,
            plan_hosts: a.plan_hosts,
            idle_job_s: (a.idle_job_s > 0.0).then_some(a.idle_job_s),
            max_jobs_per_credential: (a.jobs_per_credential > 0).then_some(a.jobs_per_credential),
        },
        server: ServerLimits {
            max_connections: a.max_connections,
            max_connections_per_source: a.max_connections_per_source,
            check_ins_per_source_s: (a.check_in_rate_per_source > 0.0)
                .then_some(a.check_in_rate_per_source),
            registrations_per_source_min: (a.registration_rate_per_source > 0.0)
                .then_some(a.registration_rate_per_source),
            header_read_timeout_s: a.header_timeout_s,
            body_timeout_s: a.body_timeout_s,
            request_timeout_s: a.request_timeout_s,
        },
        admission: a.admission.then_some(AdmissionParams {
            slot_s: a.admission_slot_s,
            horizon_s: a.admission_horizon_s,
            epsilon: a.admission_epsilon,
            price_min: a.admission_price_min,
            price_max: a.admission_price_max,
            capacity_window_s: a.admission_window_s,
            prior_per_slot: a.admission_prior,
        }),
        max_profile_classes: (a.max_profile_classes > 0).then_some(a.max_profile_classes),
        feasibility: (a.feasibility_after_s > 0.0).then_some(Feasibility {
            min_observed_s: a.feasibility_after_s,
            min_check_ins: a.feasibility_min_check_ins,
        }),
        ..Settings::default()
    };
    let manager = Arc::new(
        Manager::open(settings, &a.db, Clock::System)
            .with_context(|| format!("opening {}", a.db.display()))?,
    );
    let listener = tokio::net::TcpListener::bind(&a.listen)
        .await
        .with_context(|| format!("binding {}", a.listen))?;
    tracing::info!(addr = %listener.local_addr()?, db = %a.db.display(), "venn-manager listening");
    server::serve(listener, manager, server::shutdown_signal()).await?;
    Ok(())
}
