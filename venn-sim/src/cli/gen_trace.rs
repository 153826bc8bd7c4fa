//! `venn-sim gen-trace`: write a synthetic availability trace to a file.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use venn_traces::SyntheticOptions;

/// Options of `gen-trace`; defaults reproduce the calibrated trace (about
/// 2.21 million rows per week, the estimated size of the authors' trace).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of devices (default: FedScale's 107,749 clients).
    #[arg(long, default_value_t = SyntheticOptions::default().devices)]
    pub devices: u32,
    /// Days to cover; the simulator keeps the first 5.
    #[arg(long, default_value_t = 7)]
    pub days: u32,
    /// Seed; the same seed gives the same file.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output file; a name ending in `.gz` is gzip-compressed.
    #[arg(long)]
    pub out: PathBuf,
    /// Mean check-ins per device per day.
    #[arg(long, default_value_t = SyntheticOptions::default().checkins_per_device_day)]
    pub checkins_per_device_day: f64,
    /// Ratio of the peak to the trough of the diurnal check-in rate.
    #[arg(long, default_value_t = 3.0)]
    pub peak_trough_ratio: f64,
    /// Hour of day of the peak rate (t = 0 is midnight).
    #[arg(long, default_value_t = 2.0)]
    pub peak_hour: f64,
    /// Median session length in seconds (log-normal).
    #[arg(long, default_value_t = 240.0)]
    pub median_session_s: f64,
    /// Sigma of the log-normal session length.
    #[arg(long, default_value_t = 1.0)]
    pub session_sigma: f64,
    /// Longest session in seconds.
    #[arg(long, default_value_t = 14_400.0)]
    pub max_session_s: f64,
    /// Sigma of the per-device log-normal activity multiplier (0 = identical devices).
    #[arg(long, default_value_t = 0.5)]
    pub activity_sigma: f64,
}

/// Generates the trace and reports rows and throughput.
pub fn run(a: Args) -> anyhow::Result<()> {
    let opts = SyntheticOptions {
        devices: a.devices,
        days: a.days,
        seed: a.seed,
        checkins_per_device_day: a.checkins_per_device_day,
        peak_trough_ratio: a.peak_trough_ratio,
        peak_hour: a.peak_hour,
        median_session_s: a.median_session_s,
        session_sigma: a.session_sigma,
        max_session_s: a.max_session_s,
        activity_sigma: a.activity_sigma,
    };
    let rows = opts.rows()?;
    tracing::info!(
        devices = opts.devices,
        days = opts.days,
        expected_rows = opts.expected_rows().round(),
        out = %a.out.display(),
        "generating synthetic availability trace"
    );
    let file =
        File::create(&a.out).with_context(|| format!("cannot create {}", a.out.display()))?;
    let sink: Box<dyn Write> = if a.out.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::write::GzEncoder::new(
            file,
            flate2::Compression::fast(),
        ))
    } else {
        Box::new(file)
    };
    let bar = ProgressBar::new(u64::from(opts.devices));
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} devices ({eta})",
        )
        .expect("static template is valid"),
    );
    let t0 = Instant::now();
    let n = rows
        .write_venn_csv(sink, |done| bar.set_position(u64::from(done)))
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    bar.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    tracing::info!(
        rows = n,
        seconds = format!("{secs:.2}"),
        rows_per_s = (n as f64 / secs).round(),
        "wrote {}",
        a.out.display()
    );
    Ok(())
}
