//! When each emulated device is online, and how trace time maps onto wall time.
//!
//! An [`Availability`] holds every device's online sessions in *trace seconds* (the
//! time axis of a Venn-format availability CSV, or of venn-sim's synthetic diurnal
//! generator). A [`Timeline`] then maps trace time onto the wall clock: the experiment
//! starts at trace time `start_s`, and every trace second lasts `1 / compress` wall
//! seconds, so `compress = 1440` plays a 24 h day in 60 s. Devices are online exactly
//! during their sessions; the device loop asks [`Availability::state`] at the current
//! trace time and sleeps until the next change.
//!
//! Trace rows are grouped by their device `ID`: device `i` of the emulated population gets
//! the sessions of the `i`-th distinct ID in ascending order (wrapping around when the
//! trace has fewer IDs than the population), which makes the synthetic trace for `N`
//! devices map one to one. Venn's own flattened CSV gives every row its own ID, so there
//! each emulated device gets one session, as in the authors' simulator. Like that
//! simulator, a session may be extended by a grace period past its traced end.
//!
//! Sessions are stored flat (offsets + one array) so that 10,000 devices with a week of
//! sessions each cost a few megabytes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use thiserror::Error;
use tokio::time::Instant;
use venn_traces::{AvailabilityTrace, CheckInRow, InputError, SyntheticOptions};

/// Why availability could not be built.
#[derive(Debug, Error)]
pub enum AvailabilityError {
    /// The trace could not be read or generated.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A knob out of range.
    #[error("invalid availability option: {0}")]
    Invalid(String),
}

/// One online interval, trace seconds, `start <= end`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Session {
    /// When the device comes online.
    pub start: f64,
    /// When it goes offline.
    pub end: f64,
}

/// A device's state at some trace time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DeviceState {
    /// Online until this trace time (infinite in always-online mode).
    Online {
        /// End of the current session, trace seconds.
        until: f64,
    },
    /// Offline; comes online at this trace time, or never again (`None`).
    Offline {
        /// Start of the next session, trace seconds.
        next: Option<f64>,
    },
}

/// Online sessions of every device of a population.
#[derive(Clone, Debug)]
pub enum Availability {
    /// Every device is online all the time (tests, load runs).
    AlwaysOnline,
    /// Per-device sessions, trace seconds, sorted and non-overlapping per device.
    Sessions {
        /// `offsets[i]..offsets[i + 1]` indexes device `i`'s sessions.
        offsets: Vec<u32>,
        /// All sessions, device by device.
        sessions: Vec<Session>,
    },
}

/// How trace rows become sessions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SessionOptions {
    /// Seconds added to each traced end (venn-sim's replay adds 80 s).
    pub grace_s: f64,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            grace_s: venn_traces::availability::DEFAULT_GRACE_S,
        }
    }
}

impl Availability {
    /// Sessions from explicit per-device lists (tests and custom schedules). Each list is
    /// sorted, and overlapping or touching sessions are merged.
    pub fn from_sessions(per_device: Vec<Vec<Session>>) -> Result<Self, AvailabilityError> {
        let mut offsets = Vec::with_capacity(per_device.len() + 1);
        let mut sessions = Vec::new();
        offsets.push(0);
        for mut list in per_device {
            for s in &list {
                if !(s.start.is_finite() && s.end.is_finite() && s.start <= s.end) {
                    return Err(AvailabilityError::Invalid(format!(
                        "session [{}, {}] is not an interval",
                        s.start, s.end
                    )));
                }
            }
            list.sort_by(|a, b| a.start.total_cmp(&b.start));
            let first = sessions.len();
            for s in list {
                // Merging keeps the lookup's invariant: one session contains any instant.
                let overlaps = sessions.len() > first
                    && sessions.last().is_some_and(|l: &Session| s.start <= l.end);
                match sessions.last_mut() {
                    Some(last) if overlaps => last.end = last.end.max(s.end),
                    _ => sessions.push(s),
                }
            }
            let n = u32::try_from(sessions.len())
                .map_err(|_| AvailabilityError::Invalid("more than 2^32 sessions".into()))?;
            offsets.push(n);
        }
        Ok(Availability::Sessions { offsets, sessions })
    }

    /// Sessions of `devices` devices from trace rows (see the module docs for how IDs map
    /// to devices).
    pub fn from_rows(
        rows: &[CheckInRow],
        devices: usize,
        opts: SessionOptions,
    ) -> Result<Self, AvailabilityError> {
        if !(opts.grace_s.is_finite() && opts.grace_s >= 0.0) {
            return Err(AvailabilityError::Invalid(
                "grace must be a non-negative number of seconds".into(),
            ));
        }
        let mut by_id: BTreeMap<u32, Vec<Session>> = BTreeMap::new();
        for r in rows {
            by_id.entry(r.device).or_default().push(Session {
                start: r.start,
                end: r.end() + opts.grace_s,
            });
        }
        if by_id.is_empty() && devices > 0 {
            return Err(AvailabilityError::Invalid("the trace has no rows".into()));
        }
        let lists: Vec<Vec<Session>> = by_id.into_values().collect();
        if lists.len() < devices {
            tracing::warn!(
                trace_devices = lists.len(),
                devices,
                "the trace has fewer devices than the population; reusing its devices in turn"
            );
        }
        let per_device = (0..devices)
            .map(|i| lists[i % lists.len()].clone())
            .collect();
        Self::from_sessions(per_device)
    }

    /// Sessions from a Venn-format availability CSV (or FedScale JSON) file.
    pub fn from_trace_file(
        path: &Path,
        devices: usize,
        opts: SessionOptions,
    ) -> Result<Self, AvailabilityError> {
        let trace = AvailabilityTrace::load(path)?;
        Self::from_rows(trace.rows(), devices, opts)
    }

    /// Sessions from venn-sim's synthetic diurnal generator, one generated device per
    /// emulated device (`opts.devices` is overridden with `devices`).
    pub fn synthetic(
        devices: usize,
        opts: SyntheticOptions,
        session: SessionOptions,
    ) -> Result<Self, AvailabilityError> {
        let n = u32::try_from(devices)
            .map_err(|_| AvailabilityError::Invalid("too many devices".into()))?;
        let gen_opts = SyntheticOptions { devices: n, ..opts };
        let rows: Vec<CheckInRow> = gen_opts.rows()?.collect();
        // A device with no check-in at all keeps an empty list (it never comes online),
        // so rows are grouped by generated ID rather than by distinct IDs.
        let mut per_device = vec![Vec::new(); devices];
        for r in rows {
            per_device[r.device as usize].push(Session {
                start: r.start,
                end: r.end() + session.grace_s,
            });
        }
        Self::from_sessions(per_device)
    }

    /// Device `device`'s sessions (empty in always-online mode).
    pub fn sessions(&self, device: usize) -> &[Session] {
        match self {
            Availability::AlwaysOnline => &[],
            Availability::Sessions { offsets, sessions } => match offsets.get(device + 1) {
                Some(&hi) => &sessions[offsets[device] as usize..hi as usize],
                None => &[],
            },
        }
    }

    /// Number of devices with sessions (`None` in always-online mode, which covers any).
    pub fn devices(&self) -> Option<usize> {
        match self {
            Availability::AlwaysOnline => None,
            Availability::Sessions { offsets, .. } => Some(offsets.len() - 1),
        }
    }

    /// Whether device `device` is online at trace time `t`, and until or from when.
    /// Sessions are half-open, `[start, end)`. A device beyond the table is never online.
    pub fn state(&self, device: usize, t: f64) -> DeviceState {
        if let Availability::AlwaysOnline = self {
            return DeviceState::Online {
                until: f64::INFINITY,
            };
        }
        let s = self.sessions(device);
        // First session that ends after t: it either contains t or is the next one.
        let i = s.partition_point(|x| x.end <= t);
        match s.get(i) {
            Some(x) if x.start <= t => DeviceState::Online { until: x.end },
            Some(x) => DeviceState::Offline {
                next: Some(x.start),
            },
            None => DeviceState::Offline { next: None },
        }
    }
}

/// The mapping between trace time and wall time for one experiment.
#[derive(Clone, Copy, Debug)]
pub struct Timeline {
    /// Wall instant of trace time `start_s`.
    pub origin: Instant,
    /// Trace time at which the experiment starts, seconds.
    pub start_s: f64,
    /// Trace seconds per wall second (`> 0`).
    pub compress: f64,
}

impl Timeline {
    /// A timeline starting now at trace time `start_s`.
    pub fn starting_now(start_s: f64, compress: f64) -> Result<Self, AvailabilityError> {
        Self::new(Instant::now(), start_s, compress)
    }

    /// A timeline whose trace time `start_s` falls on the wall instant `origin`.
    pub fn new(origin: Instant, start_s: f64, compress: f64) -> Result<Self, AvailabilityError> {
        if !(compress.is_finite() && compress > 0.0) {
            return Err(AvailabilityError::Invalid(format!(
                "compression factor must be positive, got {compress}"
            )));
        }
        if !start_s.is_finite() {
            return Err(AvailabilityError::Invalid(
                "start time must be finite".into(),
            ));
        }
        Ok(Timeline {
            origin,
            start_s,
            compress,
        })
    }

    /// Trace time at wall instant `at`.
    pub fn trace_at(&self, at: Instant) -> f64 {
        let elapsed = at.saturating_duration_since(self.origin).as_secs_f64();
        self.start_s + elapsed * self.compress
    }

    /// Trace time now.
    pub fn trace_now(&self) -> f64 {
        self.trace_at(Instant::now())
    }

    /// Wall instant of trace time `t`; `None` for an infinite `t` (never). Times before
    /// the start map to the origin.
    pub fn wall_at(&self, t: f64) -> Option<Instant> {
        if !t.is_finite() {
            return None;
        }
        let secs = ((t - self.start_s) / self.compress).max(0.0);
        // Far-future instants would overflow `Instant`; a century is "never" here.
        if secs > 3.0e9 {
            return None;
        }
        Some(self.origin + Duration::from_secs_f64(secs))
    }

    /// Wall duration of `trace_s` trace seconds.
    pub fn wall_duration(&self, trace_s: f64) -> Duration {
        Duration::from_secs_f64((trace_s / self.compress).clamp(0.0, 3.0e9))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(start: f64, end: f64) -> Session {
        Session { start, end }
    }

    #[test]
    fn lookup_is_half_open_and_merges() {
        let a =
            Availability::from_sessions(vec![vec![s(50.0, 60.0), s(10.0, 20.0), s(15.0, 30.0)]])
                .unwrap();
        assert_eq!(a.sessions(0), &[s(10.0, 30.0), s(50.0, 60.0)]);
        assert_eq!(a.state(0, 5.0), DeviceState::Offline { next: Some(10.0) });
        assert_eq!(a.state(0, 10.0), DeviceState::Online { until: 30.0 });
        assert_eq!(a.state(0, 30.0), DeviceState::Offline { next: Some(50.0) });
        assert_eq!(a.state(0, 60.0), DeviceState::Offline { next: None });
        assert_eq!(a.state(7, 0.0), DeviceState::Offline { next: None });
    }

    #[test]
    fn rows_group_by_id_and_wrap() {
        let rows = [
            CheckInRow::new(9, 0.0, 10.0),
            CheckInRow::new(3, 5.0, 6.0),
            CheckInRow::new(9, 20.0, 30.0),
        ];
        let a = Availability::from_rows(&rows, 3, SessionOptions { grace_s: 1.0 }).unwrap();
        assert_eq!(a.sessions(0), &[s(5.0, 7.0)]);
        assert_eq!(a.sessions(1), &[s(0.0, 11.0), s(20.0, 31.0)]);
        assert_eq!(a.sessions(2), a.sessions(0));
    }
}
