//! `device-agent`: emulates a population of edge devices in one process against a Venn
//! manager. Devices come online as an availability trace says (time-compressed), check
//! in, train their assigned FL tasks for real on their own FEMNIST writers, and upload
//! or drop off. Ctrl-C stops every device and prints the counters as JSON.

use anyhow::{Context, Result};
use clap::{ArgGroup, Parser};
use device_agent::agent::{Agent, AgentConfig, Shard, load_femnist};
use device_agent::availability::{Availability, SessionOptions};
use device_agent::population;
use fl_task::task::Registry;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use venn_traces::SyntheticOptions;

/// Emulate N edge devices that check in with a Venn manager and train assigned FL tasks.
///
/// Availability comes from a Venn-format CSV (`--trace`), venn-sim's synthetic diurnal
/// generator (`--synthetic`), or neither (every device always online). Trace time is
/// compressed by `--compress`: with 1440 a 24 h day lasts 60 s of wall time.
#[derive(Debug, Parser)]
#[command(version, group(ArgGroup::new("availability").args(["trace", "synthetic"])))]
struct Args {
    /// Manager base URL.
    #[arg(long, default_value = "http://127.0.0.1:7070", env = "VENN_MANAGER")]
    manager: String,
    /// Number of emulated devices.
    #[arg(long, default_value_t = 100)]
    devices: usize,
    /// Manager id of the first device (use disjoint ranges for several agents).
    #[arg(long, default_value_t = 0)]
    first_id: u64,
    /// Emulate only the K-th of N disjoint slices of the --devices population (devices
    /// whose index is K modulo N), each with the id, profile, availability and seed it
    /// has in the whole population: N agents with 0/N … N−1/N, on any hosts, run the
    /// same population as one agent.
    #[arg(long, default_value = "0/1", value_name = "K/N")]
    shard: Shard,
    /// Availability trace: Venn CSV (`[index,]ID,start,end`, seconds) or FedScale JSON.
    #[arg(long, value_name = "CSV")]
    trace: Option<PathBuf>,
    /// Use venn-sim's synthetic diurnal availability (seeded by --seed).
    #[arg(long)]
    synthetic: bool,
    /// Days of synthetic availability to generate.
    #[arg(long, default_value_t = 7, requires = "synthetic")]
    synthetic_days: u32,
    /// Seconds a device stays online past each traced session end (venn-sim uses 80).
    #[arg(long, default_value_t = 80.0)]
    grace: f64,
    /// Trace seconds per wall second (1440: one day per minute).
    #[arg(long, default_value_t = 1.0)]
    compress: f64,
    /// Trace time at which the run starts, seconds (e.g. 79200 = 22:00 of day 0).
    #[arg(long, default_value_t = 0.0)]
    start_at: f64,
    /// FEMNIST directory. Default: $VENN_DATA, else a downloaded set, else
    /// ../shared/data/femnist, else the 80-writer subset built in.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Directory of the device capacity/eligibility tables used for profiles. Default:
    /// $VENN_DATA/traces, else ../shared/data/traces, else the tables built in.
    #[arg(long, value_name = "DIR")]
    traces: Option<PathBuf>,
    /// Trainings at once (0: one per core).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// FEMNIST writers owned by each device (assigned round-robin).
    #[arg(long, default_value_t = 1)]
    writers_per_device: usize,
    /// HTTP requests in flight at once over all devices.
    #[arg(long, default_value_t = 256)]
    max_inflight_http: usize,
    /// Probability that an assigned device vanishes mid-task.
    #[arg(long, default_value_t = 0.0)]
    drop_fraction: f64,
    /// Seed of all random choices.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop after this many wall seconds (default: run until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// Serve the live counters as JSON at GET /v1/stats on this address (for a collector
    /// such as `venn-lab gather` when the agent runs on another host).
    #[arg(long, value_name = "ADDR")]
    stats_listen: Option<std::net::SocketAddr>,
    /// Hide the live status line.
    #[arg(long)]
    quiet: bool,
}

/// Serves `live`'s counters at [`AGENT_STATS_PATH`] on `addr`.
async fn serve_stats(
    addr: std::net::SocketAddr,
    live: Arc<device_agent::agent::LiveStats>,
) -> Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--stats-listen {addr}"))?;
    let app = axum::Router::new().route(
        venn_api::job::AGENT_STATS_PATH,
        axum::routing::get(move || {
            let live = live.clone();
            async move { axum::Json(live.snapshot()) }
        }),
    );
    tracing::info!(%addr, "serving the counters at {}", venn_api::job::AGENT_STATS_PATH);
    Ok(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the counters' server stopped");
        }
    }))
}

fn availability(args: &Args) -> Result<Availability> {
    let session = SessionOptions {
        grace_s: args.grace,
    };
    Ok(if let Some(path) = &args.trace {
        Availability::from_trace_file(path, args.devices, session)
            .with_context(|| format!("availability trace {}", path.display()))?
    } else if args.synthetic {
        let opts = SyntheticOptions {
            days: args.synthetic_days,
            seed: args.seed,
            ..SyntheticOptions::default()
        };
        Availability::synthetic(args.devices, opts, session)?
    } else {
        Availability::AlwaysOnline
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();

    let traces =
        venn_traces::locate_traces(args.traces.as_deref()).context("finding the device tables")?;
    let dir = &traces.announce().path;
    let profiles = population::from_traces(dir, args.devices)
        .with_context(|| format!("device profiles from {}", dir.display()))?;
    let data = load_femnist(args.data.as_deref())?;
    let avail = availability(&args)?;

    let mut cfg = AgentConfig::new(args.manager.clone(), profiles, data);
    cfg.first_device_id = args.first_id;
    cfg.shard = args.shard;
    cfg.availability = Arc::new(avail);
    cfg.start_s = args.start_at;
    cfg.compress = args.compress;
    cfg.writers_per_device = args.writers_per_device;
    cfg.workers = args.workers;
    cfg.max_inflight_http = args.max_inflight_http;
    cfg.drop_fraction = args.drop_fraction;
    cfg.seed = args.seed;
    let agent = Agent::new(cfg, Registry::with_builtins())?;

    let live = agent.stats();
    let stats_server = match args.stats_listen {
        Some(addr) => Some(serve_stats(addr, live.clone()).await?),
        None => None,
    };
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                .expect("a valid template"),
        )
    };
    let ticker = {
        let bar = bar.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let s = live.snapshot();
                bar.set_message(format!(
                    "check-ins {} ({} devices, {} errors) | assigned {} uploaded {} dropped {} failed {} | training {:.0} s",
                    s.check_ins,
                    s.devices_checked_in,
                    s.check_in_errors,
                    s.assignments,
                    s.updates_uploaded,
                    s.dropped,
                    s.failed,
                    s.training_seconds
                ));
                bar.tick();
            }
        })
    };

    let duration = args.duration;
    let shutdown = async move {
        let limit = async {
            match duration {
                Some(s) => tokio::time::sleep(Duration::from_secs_f64(s.max(0.0))).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C: stopping"),
            _ = limit => tracing::info!("duration reached: stopping"),
        }
    };
    let stats = agent.run(shutdown).await;
    ticker.abort();
    if let Some(s) = stats_server {
        s.abort();
    }
    bar.finish_and_clear();
    println!("{}", serde_json::to_string_pretty(&stats)?);
    Ok(())
}
