//! Tasks by name. `fl-job --task NAME` and `device-agent` both build their task from a
//! [`Registry`], so a job and its devices always run the same implementation.

use super::{BurnTask, FlTask};
use crate::config::TrainConfig;
use crate::error::FlError;
use crate::model::ModelKind;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Builds a task from its JSON parameters.
pub type TaskFactory =
    Arc<dyn Fn(&serde_json::Value) -> Result<Arc<dyn FlTask>, FlError> + Send + Sync>;

/// Named task factories.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, TaskFactory>,
}

/// Parameters of the built-in tasks (all optional).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BuiltinParams {
    /// ResNet base width or MobileNet width multiplier.
    width: Option<f64>,
    #[serde(default)]
    train: Option<TrainConfig>,
    eval_batch: Option<usize>,
    bn_calibration: Option<usize>,
}

/// The most calibration samples a built-in task may ask for: a few hundred measure the
/// statistics; more would only hold memory and time in every round.
const MAX_BN_CALIBRATION: usize = 10_000;

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// The built-in tasks: `resnet18-femnist` (`width` = base channels, default 16) and
    /// `mobilenet_v2-femnist` (`width` multiplier, default 0.5).
    pub fn with_builtins() -> Self {
        let mut r = Registry::new();
        r.register("resnet18-femnist", |p| {
            let b = parse(p)?;
            let kind = ModelKind::ResNet18 {
                base_width: b.width.unwrap_or(16.0) as usize,
            };
            builtin("resnet18-femnist", kind, b)
        });
        r.register("mobilenet_v2-femnist", |p| {
            let b = parse(p)?;
            let kind = ModelKind::MobileNetV2 {
                width: b.width.unwrap_or(0.5),
            };
            builtin("mobilenet_v2-femnist", kind, b)
        });
        r
    }

    /// Adds (or replaces) a task.
    pub fn register(
        &mut self,
        name: &str,
        factory: impl Fn(&serde_json::Value) -> Result<Arc<dyn FlTask>, FlError> + Send + Sync + 'static,
    ) {
        self.factories.insert(name.to_string(), Arc::new(factory));
    }

    /// Builds the task `name` with `params`.
    pub fn build(
        &self,
        name: &str,
        params: &serde_json::Value,
    ) -> Result<Arc<dyn FlTask>, FlError> {
        let f = self.factories.get(name).ok_or_else(|| {
            FlError::BadModel(format!(
                "unknown task {name:?}; known: {}",
                self.names().join(", ")
            ))
        })?;
        f(params)
    }

    /// Registered names.
    pub fn names(&self) -> Vec<String> {
        self.factories.keys().cloned().collect()
    }
}

fn parse(p: &serde_json::Value) -> Result<BuiltinParams, FlError> {
    if p.is_null() {
        return Ok(BuiltinParams::default());
    }
    serde_json::from_value(p.clone()).map_err(|e| FlError::Config(format!("task params: {e}")))
}

fn builtin(name: &str, kind: ModelKind, b: BuiltinParams) -> Result<Arc<dyn FlTask>, FlError> {
    kind.validate()?;
    let train = b.train.unwrap_or_default();
    train.validate()?;
    let bn_calibration = b.bn_calibration.unwrap_or(0);
    if bn_calibration > MAX_BN_CALIBRATION {
        return Err(FlError::Config(format!(
            "task params: bn_calibration must be at most {MAX_BN_CALIBRATION}, got {bn_calibration}"
        )));
    }
    Ok(Arc::new(BurnTask {
        name: name.into(),
        kind,
        train,
        eval_batch: b.eval_batch.unwrap_or(0),
        bn_calibration,
    }))
}
