//! # venn-traces — the device population and the workload, from files or generators
//!
//! Everything a driver reads or synthesises about devices and jobs before it starts:
//! availability traces on disk and their in-memory forms, device capacity and
//! eligibility tables, job traces and the job generator, and the synthetic diurnal
//! availability generator that stands in for data we do not have. The simulator
//! (`venn-sim`) replays them on a virtual clock; the device agent (`device-agent`)
//! emulates the same population on the wall clock.
//!
//! ## Layout
//! - [`availability`]: Venn CSV and FedScale JSON availability, the 5-day replay.
//! - [`devices`]: capacity, eligibility and spec tables; a device's hardware and specs.
//! - [`jobs`]: the job catalog, workload configs, job traces and the job generator.
//! - [`synthetic`]: the calibrated synthetic availability generator.
//! - [`formats`]: availability formats as plug-ins ([`TraceFormat`], [`TraceFormats`]).
//! - [`lines`]: the line/record readers every loader shares (`FILE:LINE` errors), for
//!   custom formats too.
//!
//! # Formats
//!
//! | what | file | form |
//! |---|---|---|
//! | availability | Venn `fedscale_clients_*_info.csv` (missing) or our synthetic trace | `,ID,start,end` (pandas index first) or `ID,start,end`; seconds, ints or floats; header optional; `.gz` accepted |
//! | availability | FedScale `client_behave_trace` as JSON | `{client_id: {duration, inactive: [..], finish_time, active: [..], model}}`; pair `k` of `active`/`inactive` is one check-in |
//! | capacity | `fedscale_client_device_capacity_first992.csv` | `client_id,computation_ms_per_sample,communication_kbps`, keys 1..=992 |
//! | eligibility | `aibenchmark_eligibility_4.csv` | `index,eligible_specs`, ids space-separated, empty = none |
//! | specs | `venn_eligibility_specs.csv` | `spec_id,spec_name,min_fp16_memory_score,min_cpu_f_score,min_android_os` |
//! | jobs | `venn_jobs_<workload>_workload.csv` | columns named in its header, see [`jobs`] |
//! | job catalog | `venn_job_catalog.csv` | the 33 job configurations |
//! | workloads | `venn_workload_configs.csv` | seed, days, weeks and catalog weights per workload |
//!
//! Every loader reports a bad line as `FILE:LINE: what is wrong`, lines
//! counted from 1 with the header as line 1 ([`InputError`]).
//!
//! # How the authors' simulator replays availability
//!
//! Rows are sorted by start; rows with `start <= 432000` (5 days) form the
//! block; the block is replayed `NUM_WEEK` times, replica `j` shifted by
//! `j * 432000` s; a device stays online until `end + 80` s. The `i`-th row of
//! the block gets capacity key `(i mod 992) + 1` and eligibility row
//! `i mod 959` in every replica, and client id `i * NUM_WEEK + j`
//! ([`AvailabilityTrace::replay`], [`DeviceCatalog::profile`]).
//!
//! # Calibration of the synthetic availability trace
//!
//! The authors' availability CSV is 63,403,987 bytes. Its rows are
//! `<index>,<ID>,<start>,<end>` where Venn's conversion script sets `ID` equal
//! to the row index and the times are integer seconds over about one week.
//! With starts and ends spread over `[0, 604800)` a time has 5.82 digits on
//! average; counting two copies of the index, three commas, a newline and the
//! 14-byte header, the file holds about **2.21 million rows** (28.6 bytes a
//! row), of which about 1.58 million fall in the 5-day block if starts are
//! spread evenly. [`synthetic::estimate_rows_from_bytes`] reproduces the
//! arithmetic. The synthetic generator's defaults (107,749 devices, FedScale's
//! client count, at 2.94 check-ins per device-day for 7 days) give that many
//! rows per week. Its diurnal shape and session lengths are documented in
//! [`synthetic`]. `venn-sim gen-trace --out FILE` writes the default trace
//! (about 2.21 M rows, 60 MB, in about a second in release).
//!
//! # Randomness
//!
//! Generators use ChaCha8 seeded from a `u64`, so output is reproducible
//! across platforms, but it does not reproduce numpy's streams; the shipped
//! `venn_jobs_*` CSVs are the numpy-exact job traces.

pub mod availability;
pub mod devices;
mod error;
pub mod formats;
pub mod jobs;
pub mod lines;
pub mod synthetic;

pub use availability::{AvailabilityTrace, CheckInRow, Replay, ReplayOptions, ReplayedCheckIn};
pub use devices::{
    CapacityTable, DeviceCapacity, DeviceCatalog, EligibilityTable, Hardware, Spec, SpecMask,
    SpecTable, TraceDevice,
};
pub use error::InputError;
pub use formats::{TraceFormat, TraceFormats};
pub use jobs::{
    CatalogEntry, JobCatalog, JobGenOptions, JobRow, JobTrace, WorkloadConfig, WorkloadConfigs,
    generate_jobs, resolve_workload,
};
pub use synthetic::{SyntheticOptions, SyntheticRows};

use std::path::Path;

pub use datasets::{LeafError as DataError, Located};

/// Find the trace tables: `flag`, then `$VENN_DATA` (the data directory holding
/// `traces/`), a copy in the user's data directory, `../shared/data/traces`, and last the
/// tables built into the program — the one lookup order of [`datasets::locate_data`].
pub fn locate_traces(flag: Option<&Path>) -> Result<Located, DataError> {
    datasets::locate_data(datasets::DataKind::Traces, flag)
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Small fixture files written to a per-process temp directory.

    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Writes `body` to a fresh file named `name` and returns its path.
    pub fn fixture(name: &str, body: &str) -> PathBuf {
        fixture_bytes(name, body.as_bytes())
    }

    /// Like [`fixture`] for raw bytes. Each call gets its own directory so
    /// tests running in parallel never share a file.
    pub fn fixture_bytes(name: &str, body: &[u8]) -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir()
            .join(format!("venn-traces-tests-{}", std::process::id()))
            .join(n.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }
}
