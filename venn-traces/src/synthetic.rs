//! Synthetic device-availability trace, standing in for FedScale's
//! `client_behave_trace`, which we could not obtain.
//!
//! # Model
//!
//! Each device checks in as an inhomogeneous Poisson process with rate
//! `r_dev * λ(t)`, sessions do not overlap, and rows come out in the Venn CSV
//! form, grouped by device like the authors' flattening of FedScale's
//! per-client dict.
//!
//! - **Diurnal shape**: a raised cosine over 24 h,
//!   `λ(t) = λ̄ (1 + a cos(2π (t/86400 − peak_hour/24)))` with
//!   `a = (R − 1)/(R + 1)` for a peak/trough ratio `R`. FedScale's availability
//!   comes from the FLASH input-method dataset, where a device counts as
//!   available while charging, idle and on WiFi; published plots of that data
//!   and of production FL fleets (Gboard) show a pronounced night-time peak
//!   and a daytime trough a few times lower. We have no trace to fit, so the
//!   default is `R = 3` with the peak at 02:00 (taking `t = 0` as local
//!   midnight); both are options.
//! - **Per-device activity**: `r_dev` is log-normal with mean 1 and
//!   σ = 0.5, since users differ in how often they leave the phone charging.
//! - **Session length**: log-normal with median 240 s and σ = 1.0 (mean
//!   ≈ 400 s, 90th percentile ≈ 860 s), clipped to [1 s, 4 h], rounded to whole
//!   seconds. The authors' own analysis script histograms `end − start` over
//!   0–1000 s and their loader notes that online periods are short, which
//!   this matches. A session is cut short if the same device checks in again.
//! - **Volume**: defaults are 107,749 devices (FedScale's client count),
//!   7 days, and 2.936 check-ins per device-day, i.e. about 2.21 million rows
//!   per week, the estimated row count of the authors' 63,403,987-byte CSV
//!   ([`estimate_rows_from_bytes`]); 5/7 of them (≈ 1.58 M) fall in the
//!   5-day block that the simulator keeps.
//!
//! Generation is deterministic by seed: device `d` draws from ChaCha8 seeded
//! with the seed on stream `d`, so a trace for N devices is a prefix of the
//! trace for more devices. It streams: memory does not grow with the trace.

use std::f64::consts::TAU;
use std::io::{self, Write};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp1, LogNormal};

use super::availability::CheckInRow;
use super::error::InputError;

/// Number of clients in FedScale's `client_behave_trace`.
pub const FEDSCALE_CLIENTS: u32 = 107_749;
/// Size of the authors' availability CSV `fedscale_clients_7000000_3_info.csv`.
pub const AUTHORS_TRACE_BYTES: u64 = 63_403_987;
/// One week in seconds, the span of FedScale's availability trace.
pub const WEEK_S: u64 = 604_800;
/// Estimated rows of the authors' CSV, `estimate_rows_from_bytes(AUTHORS_TRACE_BYTES, WEEK_S)`.
pub const AUTHORS_TRACE_ROWS_ESTIMATE: u64 = 2_214_665;

const DAY_S: f64 = 86_400.0;

/// Sum of the digit counts of `0..n`.
fn digit_sum_below(n: u64) -> u64 {
    let mut total = 0;
    let mut lo = 0;
    let mut width = 1;
    while lo < n {
        let hi = n.min(10u64.pow(width as u32));
        total += (hi - lo) * width;
        lo = hi;
        width += 1;
    }
    total
}

/// Estimates how many rows a Venn availability CSV of `bytes` bytes holds.
///
/// Row form: `<index>,<ID>,<start>,<end>\n` where Venn's conversion writes
/// `ID` equal to the row index, and start and end are integer seconds spread
/// over `[0, horizon_s)`; header `,ID,start,end\n` is 14 bytes. Solves for the
/// smallest row count whose file is at least `bytes` long.
pub fn estimate_rows_from_bytes(bytes: u64, horizon_s: u64) -> u64 {
    let time_digits = digit_sum_below(horizon_s) as f64 / horizon_s as f64;
    let size =
        |n: u64| 14.0 + 2.0 * digit_sum_below(n) as f64 + n as f64 * (2.0 * time_digits + 4.0);
    let (mut lo, mut hi) = (0u64, bytes);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if size(mid) < bytes as f64 {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Knobs of the synthetic generator; see the module docs for the defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyntheticOptions {
    /// Number of devices (default 107,749).
    pub devices: u32,
    /// Days covered (default 7).
    pub days: u32,
    /// Seed (default 0).
    pub seed: u64,
    /// Mean check-ins per device per day (default 2.936).
    pub checkins_per_device_day: f64,
    /// Peak-to-trough ratio of the diurnal check-in rate (default 3).
    pub peak_trough_ratio: f64,
    /// Hour of day of the rate peak, `t = 0` being midnight (default 2.0).
    pub peak_hour: f64,
    /// Median session length, seconds (default 240).
    pub median_session_s: f64,
    /// σ of the log-normal session length (default 1.0).
    pub session_sigma: f64,
    /// Longest session, seconds (default 14,400).
    pub max_session_s: f64,
    /// σ of the log-normal per-device activity multiplier (default 0.5; 0 = none).
    pub activity_sigma: f64,
}

impl Default for SyntheticOptions {
    fn default() -> Self {
        SyntheticOptions {
            devices: FEDSCALE_CLIENTS,
            days: 7,
            seed: 0,
            checkins_per_device_day: AUTHORS_TRACE_ROWS_ESTIMATE as f64
                / (f64::from(FEDSCALE_CLIENTS) * 7.0),
            peak_trough_ratio: 3.0,
            peak_hour: 2.0,
            median_session_s: 240.0,
            session_sigma: 1.0,
            max_session_s: 14_400.0,
            activity_sigma: 0.5,
        }
    }
}

impl SyntheticOptions {
    /// Checks that every knob is in range.
    pub fn validate(&self) -> Result<(), InputError> {
        let bad = |what: &str| Err(InputError::InvalidOption(what.to_string()));
        if !(self.checkins_per_device_day.is_finite() && self.checkins_per_device_day > 0.0) {
            return bad("check-ins per device-day must be positive");
        }
        if !(self.peak_trough_ratio.is_finite() && self.peak_trough_ratio >= 1.0) {
            return bad("peak/trough ratio must be at least 1");
        }
        if !(self.median_session_s.is_finite() && self.median_session_s > 0.0) {
            return bad("median session length must be positive");
        }
        if !(self.session_sigma >= 0.0 && self.activity_sigma >= 0.0) {
            return bad("log-normal sigmas must be non-negative");
        }
        if self.max_session_s.is_nan() || self.max_session_s < 1.0 {
            return bad("maximum session length must be at least 1 s");
        }
        if !self.peak_hour.is_finite() {
            return bad("peak hour must be finite");
        }
        Ok(())
    }

    /// Cosine amplitude `a = (R − 1)/(R + 1)`.
    pub fn amplitude(&self) -> f64 {
        (self.peak_trough_ratio - 1.0) / (self.peak_trough_ratio + 1.0)
    }

    /// Check-in rate at time `t` relative to the daily mean (mean 1 over a day).
    pub fn relative_rate(&self, t: f64) -> f64 {
        1.0 + self.amplitude() * (TAU * (t / DAY_S - self.peak_hour / 24.0)).cos()
    }

    /// Expected number of rows.
    pub fn expected_rows(&self) -> f64 {
        f64::from(self.devices) * f64::from(self.days) * self.checkins_per_device_day
    }

    /// Starts generating rows.
    pub fn rows(&self) -> Result<SyntheticRows, InputError> {
        self.validate()?;
        let session = LogNormal::new(self.median_session_s.ln(), self.session_sigma)
            .map_err(|e| InputError::InvalidOption(e.to_string()))?;
        // μ = −σ²/2 makes the multiplier's mean exactly 1.
        let activity = LogNormal::new(-0.5 * self.activity_sigma.powi(2), self.activity_sigma)
            .map_err(|e| InputError::InvalidOption(e.to_string()))?;
        Ok(SyntheticRows {
            opts: *self,
            session,
            activity,
            horizon: f64::from(self.days) * DAY_S,
            device: 0,
            state: None,
        })
    }
}

/// Per-device generator state.
struct DeviceState {
    rng: ChaCha8Rng,
    /// Time of the last candidate arrival.
    t: f64,
    /// Thinning envelope: the device's peak rate, per second.
    rate_max: f64,
    /// Session waiting to learn whether the next check-in cuts it short.
    pending: Option<(f64, f64)>,
}

/// Streaming iterator over synthetic rows, grouped by device, each device's
/// rows in start order.
pub struct SyntheticRows {
    opts: SyntheticOptions,
    session: LogNormal<f64>,
    activity: LogNormal<f64>,
    horizon: f64,
    device: u32,
    state: Option<DeviceState>,
}

impl SyntheticRows {
    /// Devices fully generated so far.
    pub fn devices_done(&self) -> u32 {
        self.device
    }

    /// Writes every remaining row as Venn CSV (`,ID,start,end`, integer
    /// seconds, pandas-style index), calling `progress(devices_done)` every
    /// 1024 devices and at the end. Returns the number of rows written.
    pub fn write_venn_csv<W: Write>(
        mut self,
        w: W,
        mut progress: impl FnMut(u32),
    ) -> io::Result<u64> {
        let mut w = io::BufWriter::with_capacity(1 << 20, w);
        w.write_all(b",ID,start,end\n")?;
        let mut n = 0u64;
        let mut last = 0u32;
        while let Some(r) = self.next() {
            // Times are whole seconds by construction, so the casts are exact.
            writeln!(w, "{n},{},{},{}", r.device, r.start as u64, r.end() as u64)?;
            n += 1;
            if self.device >= last + 1024 {
                last = self.device;
                progress(last);
            }
        }
        progress(self.device);
        w.flush()?;
        Ok(n)
    }

    fn start_device(&self, device: u32) -> DeviceState {
        let mut rng = ChaCha8Rng::seed_from_u64(self.opts.seed);
        rng.set_stream(u64::from(device));
        let mult = self.activity.sample(&mut rng);
        let rate_max =
            mult * self.opts.checkins_per_device_day / DAY_S * (1.0 + self.opts.amplitude());
        DeviceState {
            rng,
            t: 0.0,
            rate_max,
            pending: None,
        }
    }
}

impl Iterator for SyntheticRows {
    type Item = CheckInRow;

    fn next(&mut self) -> Option<CheckInRow> {
        let envelope = 1.0 + self.opts.amplitude();
        loop {
            if self.device >= self.opts.devices {
                return None;
            }
            if self.state.is_none() {
                self.state = Some(self.start_device(self.device));
            }
            let st = self.state.as_mut().expect("state set above");
            // Thinning: candidates at the peak rate, kept with λ(t)/λmax.
            let arrival = loop {
                let gap: f64 = st.rng.sample(Exp1);
                st.t += gap / st.rate_max;
                if st.t >= self.horizon {
                    break None;
                }
                let u: f64 = st.rng.random();
                if u * envelope < self.opts.relative_rate(st.t) {
                    break Some(st.t.floor());
                }
            };
            let device = self.device;
            match arrival {
                Some(start) => {
                    let len = self
                        .session
                        .sample(&mut st.rng)
                        .round()
                        .clamp(1.0, self.opts.max_session_s.floor());
                    if let Some((s, e)) = st.pending.replace((start, start + len)) {
                        return Some(CheckInRow::new(device, s, e.min(start)));
                    }
                }
                None => {
                    let pending = st.pending.take();
                    self.state = None;
                    self.device += 1;
                    if let Some((s, e)) = pending {
                        return Some(CheckInRow::new(device, s, e));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> SyntheticOptions {
        SyntheticOptions {
            devices: 20_000,
            seed,
            ..Default::default()
        }
    }

    #[test]
    fn byte_estimate_matches_documented_figure() {
        assert_eq!(
            estimate_rows_from_bytes(AUTHORS_TRACE_BYTES, WEEK_S),
            AUTHORS_TRACE_ROWS_ESTIMATE
        );
        assert_eq!(digit_sum_below(11), 10 + 2);
        let d = SyntheticOptions::default();
        let rel = d.expected_rows() / AUTHORS_TRACE_ROWS_ESTIMATE as f64;
        assert!((rel - 1.0).abs() < 1e-9, "{rel}");
    }

    #[test]
    fn deterministic_and_prefix_stable() {
        let a: Vec<_> = small(7).rows().unwrap().take(5000).collect();
        let b: Vec<_> = small(7).rows().unwrap().take(5000).collect();
        assert_eq!(a, b);
        let c: Vec<_> = small(8).rows().unwrap().take(5000).collect();
        assert_ne!(a, c);
        let fewer: Vec<_> = SyntheticOptions {
            devices: 10,
            ..small(7)
        }
        .rows()
        .unwrap()
        .collect();
        assert_eq!(&a[..fewer.len()], &fewer[..]);
    }

    #[test]
    fn volume_sessions_and_hourly_profile() {
        let opts = small(1);
        let mut hourly = [0u64; 24];
        let mut durations = Vec::new();
        let mut last: Option<CheckInRow> = None;
        let mut n = 0u64;
        for r in opts.rows().unwrap() {
            n += 1;
            assert!(r.start >= 0.0 && r.start < 7.0 * DAY_S && r.end() >= r.start);
            if let Some(p) = last.filter(|p| p.device == r.device) {
                assert!(p.end() <= r.start, "overlap {p:?} {r:?}");
            }
            last = Some(r);
            hourly[((r.start % DAY_S) / 3600.0) as usize] += 1;
            durations.push(r.duration);
        }
        let want = opts.expected_rows();
        assert!((n as f64 / want - 1.0).abs() < 0.03, "{n} rows vs {want}");
        durations.sort_by(f32::total_cmp);
        let median = f64::from(durations[durations.len() / 2]);
        assert!((median / 240.0 - 1.0).abs() < 0.1, "median {median}");
        // Expected share of each hour bin, integrating λ on a fine grid.
        let expect: Vec<f64> = (0..24)
            .map(|h| {
                (0..360)
                    .map(|k| opts.relative_rate(h as f64 * 3600.0 + (k as f64 + 0.5) * 10.0))
                    .sum::<f64>()
                    / 360.0
                    / 24.0
            })
            .collect();
        for h in 0..24 {
            let got = hourly[h] as f64 / n as f64;
            assert!(
                (got / expect[h] - 1.0).abs() < 0.05,
                "hour {h}: {got} vs {}",
                expect[h]
            );
        }
        let ratio = *hourly.iter().max().unwrap() as f64 / *hourly.iter().min().unwrap() as f64;
        assert!(
            (ratio / opts.peak_trough_ratio - 1.0).abs() < 0.1,
            "ratio {ratio}"
        );
        let peak = (0..24).max_by_key(|&h| hourly[h]).unwrap();
        assert!((1..=2).contains(&peak), "peak hour {peak}");
    }

    #[test]
    fn csv_output_loads_back() {
        let opts = SyntheticOptions {
            devices: 50,
            days: 2,
            ..Default::default()
        };
        let mut buf = Vec::new();
        let mut calls = 0;
        let n = opts
            .rows()
            .unwrap()
            .write_venn_csv(&mut buf, |_| calls += 1)
            .unwrap();
        assert!(calls >= 1);
        let p = crate::testutil::fixture_bytes("synthetic.csv", &buf);
        let t = crate::AvailabilityTrace::load(&p).unwrap();
        assert_eq!(t.len() as u64, n);
        let mut rows: Vec<_> = opts.rows().unwrap().collect();
        rows.sort_by(|a, b| a.start.total_cmp(&b.start));
        assert_eq!(t.rows().len(), rows.len());
        assert!(rows.iter().all(|r| t.rows().contains(r)));
    }

    #[test]
    fn rejects_bad_options() {
        let o = SyntheticOptions {
            peak_trough_ratio: 0.5,
            ..Default::default()
        };
        assert!(o.rows().is_err());
        let o = SyntheticOptions {
            checkins_per_device_day: 0.0,
            ..Default::default()
        };
        assert!(o.rows().is_err());
    }
}
