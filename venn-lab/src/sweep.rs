//! A sweep — configs × policies × seeds of `venn-lab sim` — as numbered, independent
//! indices, so that many machines can run it (`venn-lab k8s sweep` renders it as one
//! Kubernetes indexed Job) and one gather step summarises it into the files a local
//! `venn-lab sim CONFIG --policies … --seeds N` writes.
//!
//! Index `i` is one (config, seed, policy) in the local run's order (config by config, seed
//! by seed, policy by policy) and writes `<results>/<config name>/seed-<k>/<policy>`, the
//! folder the local run gives it, with the same replicate seed ([`LabConfig::replicate`]).
//! An index whose `summary.json` is already there is done: a sweep stopped and applied
//! again runs only what is missing, and a retried index redoes only itself. The gather
//! waits for every index, then redraws each config's comparisons and summary over seeds
//! from the saved runs (what `venn-lab summarize` does).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::LabConfig;

/// The file a finished run leaves in its folder (its presence marks the index done).
const DONE_FILE: &str = "summary.json";

/// What the gather prints when every config's summary is written.
pub const SWEEP_GATHERED: &str = "sweep summarised in /results";

/// One experiment config of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepConfig {
    /// The config's `name`: its results folder under the sweep's results.
    pub name: String,
    /// The config's file name beside the plan (in the sweep's ConfigMap).
    pub file: String,
}

/// One index: a config, a replicate and a policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepEntry {
    /// Position in [`SweepPlan::configs`].
    pub config: usize,
    /// Replicate number (0: the config's own seeds).
    pub seed: u64,
    /// Policy name.
    pub policy: String,
}

/// The whole sweep, as the index runner and the gather read it (`plan.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPlan {
    /// The configs, in the order given.
    pub configs: Vec<SweepConfig>,
    /// Policies, the first the baseline of every comparison.
    pub policies: Vec<String>,
    /// Replicates per (config, policy): 0..seeds.
    pub seeds: u64,
    /// Schedule only (no training, no accuracy).
    pub schedule_only: bool,
    /// The indices, in order.
    pub entries: Vec<SweepEntry>,
}

/// Why a sweep cannot be planned, run or gathered.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The request itself cannot work.
    #[error("sweep: {0}")]
    Plan(String),
    /// The plan file or the results volume.
    #[error("sweep: {0}")]
    Io(String),
    /// The gather gave up waiting.
    #[error(
        "sweep: after {waited_s:.0} s, {missing} of {total} runs have no summary.json (first: {first})"
    )]
    Incomplete {
        /// Seconds waited.
        waited_s: f64,
        /// Runs not done.
        missing: usize,
        /// Runs in the plan.
        total: usize,
        /// The first one missing.
        first: String,
    },
}

impl SweepPlan {
    /// The plan of `configs` (name, file) under `policies` × `seeds`: refused when a name
    /// or file repeats (their folders or files would collide), or nothing would run.
    pub fn new(
        configs: Vec<SweepConfig>,
        policies: Vec<String>,
        seeds: u64,
        schedule_only: bool,
    ) -> Result<Self, SweepError> {
        if configs.is_empty() || policies.is_empty() || seeds == 0 {
            return Err(SweepError::Plan(
                "needs at least one config, one policy and one seed".into(),
            ));
        }
        for (i, c) in configs.iter().enumerate() {
            if configs[..i]
                .iter()
                .any(|d| d.name == c.name || d.file == c.file)
            {
                return Err(SweepError::Plan(format!(
                    "two configs share the name or file {:?} / {:?}: their results would collide",
                    c.name, c.file
                )));
            }
        }
        let mut entries = Vec::new();
        for config in 0..configs.len() {
            for seed in 0..seeds {
                for policy in &policies {
                    entries.push(SweepEntry {
                        config,
                        seed,
                        policy: policy.clone(),
                    });
                }
            }
        }
        Ok(SweepPlan {
            configs,
            policies,
            seeds,
            schedule_only,
            entries,
        })
    }

    /// Index `i`'s results folder under `results`.
    pub fn run_dir(&self, results: &Path, i: usize) -> PathBuf {
        let e = &self.entries[i];
        results
            .join(&self.configs[e.config].name)
            .join(format!("seed-{}", e.seed))
            .join(&e.policy)
    }

    /// Reads `plan.json`.
    pub fn read(path: &Path) -> Result<Self, SweepError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SweepError::Io(format!("{}: {e}", path.display())))?;
        serde_json::from_str(&text).map_err(|e| SweepError::Io(format!("{}: {e}", path.display())))
    }

    /// Reads `plan.json` from a mounted ConfigMap, waiting up to `patience` until it parses
    /// and every config file beside it has text. Kubernetes fills a ConfigMap volume before
    /// the container starts, but `podman kube play` fills the shared volume while the
    /// sweep's pods start, so an index may look at a file that is still empty (CI saw
    /// "EOF while parsing" once in four pods).
    pub fn read_mounted(path: &Path, patience: Duration) -> Result<Self, SweepError> {
        let t0 = Instant::now();
        loop {
            let ready = Self::read(path).and_then(|plan| {
                let dir = path.parent().unwrap_or(Path::new("."));
                match plan.configs.iter().find(|c| !non_empty(&dir.join(&c.file))) {
                    Some(c) => Err(SweepError::Io(format!(
                        "{}: missing or empty",
                        dir.join(&c.file).display()
                    ))),
                    None => Ok(plan),
                }
            });
            match ready {
                Ok(plan) => return Ok(plan),
                Err(e) if t0.elapsed() >= patience => return Err(e),
                Err(e) => {
                    tracing::debug!(error = %e, "the sweep's plan is not complete yet");
                    std::thread::sleep(Duration::from_millis(250));
                }
            }
        }
    }

    /// The indices whose run has not finished yet.
    pub fn missing(&self, results: &Path) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&i| !self.run_dir(results, i).join(DONE_FILE).is_file())
            .collect()
    }

    /// Index `i`'s config: the plan's file beside `plan_dir`, as replicate `seed` under
    /// its policy — what the local run hands the simulator for that (seed, policy).
    pub fn entry_config(
        &self,
        plan_dir: &Path,
        i: usize,
        load: impl Fn(&Path) -> anyhow::Result<LabConfig>,
    ) -> anyhow::Result<LabConfig> {
        let e = self.entries.get(i).ok_or_else(|| {
            SweepError::Plan(format!(
                "no index {i} (the plan has {})",
                self.entries.len()
            ))
        })?;
        let cfg = load(&plan_dir.join(&self.configs[e.config].file))?;
        Ok(LabConfig {
            policy: cfg.policy.with_name(&e.policy),
            ..cfg.replicate(e.seed)
        })
    }

    /// Waits until every index has finished (polling every `poll`) or `patience` passed.
    pub fn wait_done(
        &self,
        results: &Path,
        patience: Duration,
        poll: Duration,
    ) -> Result<(), SweepError> {
        let t0 = Instant::now();
        loop {
            let missing = self.missing(results);
            let Some(&first) = missing.first() else {
                return Ok(());
            };
            if t0.elapsed() >= patience {
                return Err(SweepError::Incomplete {
                    waited_s: t0.elapsed().as_secs_f64(),
                    missing: missing.len(),
                    total: self.entries.len(),
                    first: self.run_dir(results, first).display().to_string(),
                });
            }
            std::thread::sleep(poll);
        }
    }
}

/// Whether `path` is a file with at least one byte.
fn non_empty(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(seeds: u64) -> SweepPlan {
        let configs = vec![
            SweepConfig {
                name: "a".into(),
                file: "a.toml".into(),
            },
            SweepConfig {
                name: "b".into(),
                file: "b.toml".into(),
            },
        ];
        SweepPlan::new(configs, vec!["random".into(), "venn".into()], seeds, true).unwrap()
    }

    #[test]
    fn indices_follow_the_local_runs_order_and_folders() {
        let p = plan(2);
        assert_eq!(p.entries.len(), 2 * 2 * 2);
        let order: Vec<(usize, u64, &str)> = p
            .entries
            .iter()
            .map(|e| (e.config, e.seed, e.policy.as_str()))
            .collect();
        assert_eq!(
            order[..4],
            [
                (0, 0, "random"),
                (0, 0, "venn"),
                (0, 1, "random"),
                (0, 1, "venn")
            ]
        );
        assert_eq!(p.run_dir(Path::new("/r"), 5), Path::new("/r/b/seed-0/venn"));
    }

    #[test]
    fn finished_indices_are_not_missing_and_colliding_configs_are_refused() {
        let dir = std::env::temp_dir().join(format!("venn-sweep-{}", std::process::id()));
        let p = plan(1);
        let done = p.run_dir(&dir, 1);
        std::fs::create_dir_all(&done).unwrap();
        std::fs::write(done.join(DONE_FILE), "{}").unwrap();
        assert_eq!(p.missing(&dir), vec![0, 2, 3]);
        let e = p
            .wait_done(&dir, Duration::ZERO, Duration::ZERO)
            .unwrap_err();
        assert!(e.to_string().contains("3 of 4 runs"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();

        let same = vec![p.configs[0].clone(), p.configs[0].clone()];
        assert!(SweepPlan::new(same, vec!["venn".into()], 1, false).is_err());
        assert!(SweepPlan::new(p.configs.clone(), vec![], 1, false).is_err());
    }

    #[test]
    fn a_plan_mounted_while_the_pod_starts_is_waited_for() {
        let dir = std::env::temp_dir().join(format!("venn-sweep-mount-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = plan(1);
        let file = dir.join("plan.json");
        // As podman leaves it at first: the plan there but empty, no configs yet.
        std::fs::write(&file, "").unwrap();
        let e = SweepPlan::read_mounted(&file, Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("EOF"), "{e}");
        std::fs::write(&file, serde_json::to_string(&p).unwrap()).unwrap();
        std::fs::write(dir.join("a.toml"), "name = 'a'").unwrap();
        let e = SweepPlan::read_mounted(&file, Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("b.toml: missing or empty"), "{e}");

        let writer = {
            let dir = dir.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(400));
                std::fs::write(dir.join("b.toml"), "name = 'b'").unwrap();
            })
        };
        let read = SweepPlan::read_mounted(&file, Duration::from_secs(30)).unwrap();
        writer.join().unwrap();
        assert_eq!(read, p);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
