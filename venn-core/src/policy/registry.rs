//! [`PolicyRegistry`]: the policies a driver can run, by name, in the spirit of
//! Kubernetes' scheduling framework (plugins registered by name, each with its own typed
//! arguments).
//!
//! [`PolicyRegistry::builtin`] holds every [`PolicyKind`]; [`PolicyRegistry::register`]
//! adds a custom policy with a factory taking its own argument type, deserialised from the
//! same config table that names it ([`PolicyConfig`]). The registry is the one list of
//! known names: an unknown name is an error listing them.
//!
//! ```
//! use serde::Deserialize;
//! use venn_core::policy::{DeviceCtx, Policy, PolicyConfig, PolicyRegistry, SchedView};
//! use venn_core::{JobId, JobState, ManagerConfig, ResourceManager, SeededRng};
//!
//! /// Arrival order, or its reverse.
//! #[derive(Debug, Default, Deserialize)]
//! #[serde(default, deny_unknown_fields)]
//! struct Args { newest_first: bool }
//!
//! #[derive(Debug)]
//! struct Arrival(Args);
//!
//! impl Policy for Arrival {
//!     fn name(&self) -> &'static str { "arrival" }
//!     fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
//!         let t = job.registered_at.secs();
//!         if self.0.newest_first { -t } else { t }
//!     }
//!     fn select(&mut self, v: &SchedView<'_>, d: &DeviceCtx<'_>, _: &mut SeededRng) -> Option<JobId> {
//!         v.best_head(d)
//!     }
//! }
//!
//! let mut registry = PolicyRegistry::builtin();
//! registry.register("arrival", |a: Args| Ok(Box::new(Arrival(a)))).unwrap();
//! let cfg: PolicyConfig = serde_json::from_str(r#"{"name": "arrival", "newest_first": true}"#).unwrap();
//! let rm = ResourceManager::with_registry(ManagerConfig::default(), &cfg, &registry).unwrap();
//! assert_eq!(rm.policy_name(), "arrival");
//! ```

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::config::{PolicyConfig, PolicyKind};
use super::{Chunked, Fifo, FifoRequest, Policy, Random, RandomDelay, RandomOrder, Srsf, Venn};
use crate::error::CoreError;

/// Builds a custom policy from its arguments (a JSON object).
type Factory = dyn Fn(Value) -> Result<Box<dyn Policy>, CoreError> + Send + Sync;

enum Entry {
    Builtin(PolicyKind),
    Custom(String, Box<Factory>),
}

impl Entry {
    fn name(&self) -> &str {
        match self {
            Entry::Builtin(k) => k.name(),
            Entry::Custom(n, _) => n,
        }
    }
}

/// The policies a driver can run, by name. See the module docs.
pub struct PolicyRegistry {
    entries: Vec<Entry>,
}

impl Default for PolicyRegistry {
    /// The built-in policies.
    fn default() -> Self {
        PolicyRegistry::builtin()
    }
}

impl fmt::Debug for PolicyRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl PolicyRegistry {
    /// A registry without any policy.
    pub fn empty() -> Self {
        PolicyRegistry {
            entries: Vec::new(),
        }
    }

    /// Every built-in policy ([`PolicyKind::ALL`]).
    pub fn builtin() -> Self {
        PolicyRegistry {
            entries: PolicyKind::ALL.into_iter().map(Entry::Builtin).collect(),
        }
    }

    /// Registers the policy `name`, built by `factory` from its arguments: the keys of its
    /// config table other than `name`, deserialised into `A` (give `A` `#[serde(default)]`
    /// to make them optional and `#[serde(deny_unknown_fields)]` to reject typos).
    ///
    /// Fails if a policy of that name is registered already (built-in names included).
    pub fn register<A, F>(&mut self, name: &str, factory: F) -> Result<&mut Self, CoreError>
    where
        A: DeserializeOwned + 'static,
        F: Fn(A) -> Result<Box<dyn Policy>, CoreError> + Send + Sync + 'static,
    {
        if self.contains(name) {
            return Err(CoreError::DuplicatePolicy(name.to_string()));
        }
        let policy = name.to_string();
        let build = move |args: Value| {
            let args: A = serde_json::from_value(args).map_err(|e| CoreError::PolicyArgs {
                policy: policy.clone(),
                reason: e.to_string(),
            })?;
            factory(args)
        };
        self.entries
            .push(Entry::Custom(name.to_string(), Box::new(build)));
        Ok(self)
    }

    /// The registered names, built-in ones first, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(Entry::name).collect()
    }

    /// Whether a policy is registered as `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.entries.iter().any(|e| e.name() == name)
    }

    fn unknown(&self, name: &str) -> CoreError {
        CoreError::UnknownPolicy(name.to_string(), self.names().join(", "))
    }

    /// Builds the configured policy.
    pub fn build(&self, cfg: &PolicyConfig) -> Result<Box<dyn Policy>, CoreError> {
        let name = cfg.name();
        let entry = self
            .entries
            .iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| self.unknown(name))?;
        match entry {
            Entry::Builtin(_) => match cfg {
                // A built-in name spelled as a custom config: check its keys as usual.
                PolicyConfig::Custom(c) => {
                    let typed =
                        PolicyConfig::from_parts(&c.name, c.args.clone()).map_err(|reason| {
                            CoreError::PolicyArgs {
                                policy: c.name.clone(),
                                reason,
                            }
                        })?;
                    builtin(&typed)
                }
                typed => builtin(typed),
            },
            Entry::Custom(_, factory) => factory(Value::Object(cfg.args())),
        }
    }

    /// Checks that `cfg` names a registered policy and that its arguments build it.
    pub fn validate(&self, cfg: &PolicyConfig) -> Result<(), CoreError> {
        self.build(cfg).map(drop)
    }
}

/// Builds a built-in policy from its typed parameters.
fn builtin(cfg: &PolicyConfig) -> Result<Box<dyn Policy>, CoreError> {
    cfg.validate()?;
    Ok(match *cfg {
        PolicyConfig::Random => Box::new(Random),
        PolicyConfig::RandomOrder => Box::new(RandomOrder::default()),
        PolicyConfig::Fifo => Box::new(Fifo),
        PolicyConfig::FifoRequest => Box::new(FifoRequest),
        PolicyConfig::Srsf => Box::new(Srsf::default()),
        PolicyConfig::Venn(p) => Box::new(Venn::new(p)),
        PolicyConfig::Irs(p) => Box::new(Venn::new(p.as_venn())),
        PolicyConfig::RandomDelay(p) => Box::new(RandomDelay::new(p)),
        PolicyConfig::Chunked(p) => Box::new(Chunked::new(p)),
        PolicyConfig::Custom(_) => unreachable!("built-in entries get typed configs"),
    })
}
