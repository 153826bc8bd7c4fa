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
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 4_096,
            header_read_timeout_s: 10.0,
            body_timeout_s: 10.0,
            request_timeout_s: 30.0,
        }
    }
}

impl ServerLimits {
    /// Checks every field; the message names it.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_connections == 0 {
            return Err("server.max_connections must be at least 1".into());
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
        }
    }
}
