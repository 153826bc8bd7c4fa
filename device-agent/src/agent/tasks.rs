//! Built tasks shared by every device: a job's devices all receive the same plan, so the
//! task is built once per (name, parameters) instead of once per assignment.

use fl_task::FlError;
use fl_task::task::{FlTask, Registry};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A [`Registry`] with a cache of the tasks built from it.
pub struct TaskCache {
    registry: Registry,
    built: Mutex<HashMap<(String, String), Arc<dyn FlTask>>>,
}

impl TaskCache {
    /// An empty cache over `registry`.
    pub fn new(registry: Registry) -> Self {
        TaskCache {
            registry,
            built: Mutex::new(HashMap::new()),
        }
    }

    /// The task `name` built with `params`, building it on first use. Failures are not
    /// cached, so a job that fixes its parameters is picked up.
    pub fn get(&self, name: &str, params: &serde_json::Value) -> Result<Arc<dyn FlTask>, FlError> {
        // serde_json's maps are ordered, so equal parameters serialise equally.
        let key = (name.to_string(), params.to_string());
        if let Some(t) = self.lock().get(&key) {
            return Ok(t.clone());
        }
        // Built outside the lock: a factory may be slow, and a duplicate build by a
        // concurrent device is harmless (the first one inserted wins).
        let task = self.registry.build(name, params)?;
        Ok(self.lock().entry(key).or_insert(task).clone())
    }

    /// Number of distinct tasks built.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing was built yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<dyn FlTask>>> {
        // A panic while holding the lock leaves the map valid, so poisoning is ignored.
        self.built.lock().unwrap_or_else(|e| e.into_inner())
    }
}
