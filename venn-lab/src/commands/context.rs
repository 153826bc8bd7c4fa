//! What every command needs from the program and the config: the tasks and policies it
//! knows ([`Lab`]), the config, the FEMNIST data. A leaf: the commands import it, it
//! imports none of them.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use fl_task::task::Registry;
use venn_core::PolicyRegistry;

use crate::LabConfig;

/// What a program brings to the command line: the FL tasks and scheduling policies its
/// configs may name.
pub struct Lab {
    /// Tasks by name (`Registry::with_builtins()` plus your own).
    pub tasks: Registry,
    /// Policies by name (`PolicyRegistry::builtin()` plus your own).
    pub policies: PolicyRegistry,
}

impl Default for Lab {
    /// The built-in tasks and policies: what the `venn-lab` binary runs.
    fn default() -> Self {
        Lab {
            tasks: Registry::with_builtins(),
            policies: PolicyRegistry::builtin(),
        }
    }
}

/// The config at `path`, whose policy `lab` must know.
pub(super) fn load_config(path: &Path, lab: &Lab) -> anyhow::Result<LabConfig> {
    Ok(LabConfig::load_with(path, &lab.policies)?)
}

/// The FEMNIST set the config names (its `data` key, `$VENN_DATA`, or the usual lookup).
pub(super) fn load_data(cfg: &LabConfig) -> anyhow::Result<Arc<datasets::Femnist>> {
    let data = datasets::Femnist::open(cfg.data.as_deref(), datasets::WriterSet::Main)
        .context("loading FEMNIST (the config's `data` key, or $VENN_DATA)")?;
    Ok(Arc::new(data))
}
