//! Manager settings (CLI flags map onto these).

use serde::{Deserialize, Serialize};
use venn_core::admission::AdmissionParams;
use venn_core::{FitRule, PolicyConfig, SupplyConfig};

/// How the manager schedules and paces.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    /// The policy and its parameters; a custom policy needs a registry that knows it
    /// ([`crate::Manager::open_with_registry`]).
    pub policy: PolicyConfig,
    /// Supply-estimator window.
    pub supply: SupplyConfig,
    /// Seed of the core's random generator.
    pub seed: u64,
    /// How a device that says when it leaves (`online_for_s` at check-in) judges whether
    /// an offered job fits ([`venn_core::fit`]).
    #[serde(default)]
    pub fit: FitRule,
    /// Seconds an idle device is told to wait before checking in again.
    pub retry_after_s: f64,
    /// Seconds past the round deadline a task's lease still runs.
    pub lease_grace_s: f64,
    /// Seconds past its deadline after which the manager aborts a round its job left open.
    pub round_grace_s: f64,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Posted-price admission control (see [`crate::admission`]): `None` (the default)
    /// registers every job as before; `Some` makes a statement of work mandatory at
    /// registration and admits, holds, declines or evicts jobs by it.
    #[serde(default)]
    pub admission: Option<AdmissionParams>,
    /// Connection limits and timeouts of the HTTP server ([`crate::server`]).
    #[serde(default)]
    pub server: ServerLimits,
    /// Who may register jobs, where their plans may live, and when an idle job ends.
    #[serde(default)]
    pub registration: Registration,
    /// Device classes that distinct check-in profiles may make before new profiles fold
    /// into a class of the same Venn cell (see venn-core's
    /// `SupplyEstimator::set_class_cap`): profiles come from anonymous clients, and each
    /// class costs memory and a stored row per supply bucket. `None`: unbounded.
    #[serde(default = "default_max_profile_classes")]
    pub max_profile_classes: Option<usize>,
    /// When submitted rounds are judged against the supply seen so far and refused if it
    /// rules them out ([`Feasibility`]); `None`: never.
    #[serde(default = "default_feasibility")]
    pub feasibility: Option<Feasibility>,
}

fn default_feasibility() -> Option<Feasibility> {
    Some(Feasibility::default())
}

/// When the manager judges submitted rounds against the supply it has seen
/// (`service/feasibility.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Feasibility {
    /// Seconds of check-ins the supply estimate must cover before it can refuse a round.
    pub min_observed_s: f64,
    /// Check-ins it must have counted in its window before it can refuse a round.
    pub min_check_ins: u64,
}

impl Default for Feasibility {
    fn default() -> Self {
        Feasibility {
            min_observed_s: 300.0,
            min_check_ins: 100,
        }
    }
}

/// Default of [`Settings::max_profile_classes`]: far above the few hundred distinct
/// profiles of the FedScale device traces, small enough that a flood of invented
/// profiles costs a few MiB.
pub const DEFAULT_MAX_PROFILE_CLASSES: usize = 4_096;

fn default_max_profile_classes() -> Option<usize> {
    Some(DEFAULT_MAX_PROFILE_CLASSES)
}

/// Who may register jobs, where devices may be sent, and how long a silent job lives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Registration {
    /// When set, `POST /v1/jobs` needs `Authorization: Bearer <this>` (401 otherwise).
    /// Not serialised: settings are logged and stored, secrets are not.
    #[serde(skip)]
    pub operator_token: Option<String>,
    /// Hosts a job's `plan_url` may name besides loopback (`127.0.0.0/8`, `::1`,
    /// `localhost`), compared case-insensitively: devices are only ever sent there.
    pub plan_hosts: Vec<String>,
    /// Seconds without round activity (registration, a round submitted or closed, an
    /// open round's deadline, an admitted job's launch) after which a job is ended and
    /// its devices released — the runner is presumed gone. `None`: never.
    pub idle_job_s: Option<f64>,
    /// Live jobs one credential may hold: the operator token it registered with, or,
    /// without one, its source address. `None`: no quota.
    pub max_jobs_per_credential: Option<usize>,
}

impl Default for Registration {
    fn default() -> Self {
        Registration {
            operator_token: None,
            plan_hosts: Vec::new(),
            idle_job_s: Some(3_600.0),
            max_jobs_per_credential: Some(64),
        }
    }
}

impl Registration {
    /// Checks every field; the message names it.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(t) = &self.operator_token
            && t.len() < 16
        {
            return Err("registration.operator_token must be at least 16 bytes".into());
        }
        if let Some(s) = self.idle_job_s
            && !(s.is_finite() && s > 0.0)
        {
            return Err("registration.idle_job_s must be a positive number of seconds".into());
        }
        Ok(())
    }

    /// May devices be sent to `url`'s host? Loopback always, other hosts when listed.
    pub fn plan_host_allowed(&self, url: &str) -> bool {
        let Some(host) = url_host(url) else {
            return false;
        };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = bare.eq_ignore_ascii_case("localhost")
            || bare
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        loopback || self.plan_hosts.iter().any(|h| h.eq_ignore_ascii_case(bare))
    }
}

/// The host of an `http://` or `https://` URL (without port or credentials).
fn url_host(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    // Userinfo would let `http://127.0.0.1@elsewhere/` pass as loopback: refuse it.
    if authority.contains('@') {
        return None;
    }
    let host = if authority.starts_with('[') {
        &authority[..=authority.find(']')?]
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    (!host.is_empty()).then_some(host)
}

/// What one client may hold of the HTTP server: connections and time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerLimits {
    /// Connections served at once; one more is closed as soon as it is accepted, so idle
    /// or slow clients cannot exhaust the process's file descriptors.
    pub max_connections: usize,
    /// Seconds a connection may take to send a request's headers, and may sit idle
    /// between requests, before it is closed.
    pub header_read_timeout_s: f64,
    /// Seconds a request's body may take to arrive (then 408).
    pub body_timeout_s: f64,
    /// Seconds a request may take from headers to response (then 408).
    pub request_timeout_s: f64,
    /// Connections one client address may hold at once (a share of `max_connections`).
    pub max_connections_per_source: usize,
    /// Check-ins a second one client address may send (a second's worth at once); past
    /// it, 429 `rate_limited` with `Retry-After`. `None`: unlimited — the default, since
    /// an emulated population on one host checks in from one address.
    pub check_ins_per_source_s: Option<f64>,
    /// Job registrations a minute one client address may send (a minute's worth at
    /// once); `None`: unlimited.
    pub registrations_per_source_min: Option<f64>,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 4_096,
            header_read_timeout_s: 10.0,
            body_timeout_s: 10.0,
            request_timeout_s: 30.0,
            max_connections_per_source: 1_024,
            check_ins_per_source_s: None,
            registrations_per_source_min: Some(120.0),
        }
    }
}

impl ServerLimits {
    /// Checks every field; the message names it.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_connections == 0 {
            return Err("server.max_connections must be at least 1".into());
        }
        if self.max_connections_per_source == 0 {
            return Err("server.max_connections_per_source must be at least 1".into());
        }
        for (name, v) in [
            ("server.check_ins_per_source_s", self.check_ins_per_source_s),
            (
                "server.registrations_per_source_min",
                self.registrations_per_source_min,
            ),
        ] {
            if v.is_some_and(|r| !(r.is_finite() && r > 0.0 && r <= 1e9)) {
                return Err(format!("{name} must be a positive rate (or absent)"));
            }
        }
        for (name, v) in [
            ("server.header_read_timeout_s", self.header_read_timeout_s),
            ("server.body_timeout_s", self.body_timeout_s),
            ("server.request_timeout_s", self.request_timeout_s),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
                return Err(format!("{name} must be in (0, 86400] seconds"));
            }
        }
        Ok(())
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            policy: PolicyConfig::default(),
            supply: SupplyConfig::default(),
            seed: 0,
            fit: FitRule::default(),
            retry_after_s: 5.0,
            lease_grace_s: 30.0,
            round_grace_s: 60.0,
            max_body_bytes: 64 * 1024,
            admission: None,
            server: ServerLimits::default(),
            registration: Registration::default(),
            max_profile_classes: default_max_profile_classes(),
            feasibility: default_feasibility(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_urls_go_to_loopback_or_listed_hosts_only() {
        let r = Registration {
            plan_hosts: vec!["jobs.lab".into()],
            ..Registration::default()
        };
        for ok in [
            "http://127.0.0.1:9000/plan",
            "http://localhost/plan",
            "https://[::1]:8443/plan",
            "http://127.8.9.1",
            "http://JOBS.lab:9000/plan",
        ] {
            assert!(r.plan_host_allowed(ok), "{ok}");
        }
        for bad in [
            "http://10.0.0.5:9000/plan",
            "http://evil.example/plan",
            "http://127.0.0.1@evil.example/plan",
            "http://127.0.0.1.evil.example/",
            "ftp://127.0.0.1/",
            "http:///plan",
        ] {
            assert!(!r.plan_host_allowed(bad), "{bad}");
        }
    }
}
