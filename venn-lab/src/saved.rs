//! Results folders read back (`venn-lab summarize`): the `summary.json` every run writes
//! holds its whole [`LabResult`], so a comparison or a summary over seeds can be redrawn
//! from a finished (or partly finished) experiment without running it again: after a
//! change to the tables or plots, or when seeds were run by separate invocations into one
//! folder.
//!
//! Layouts, as `venn-lab compare`/`sim` write them: with several seeds
//! `DIR/seed-<k>/<policy>/summary.json`, with one `DIR/<policy>/summary.json`.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::results::LabResult;

/// A results folder that cannot be read back.
#[derive(Debug, Error)]
pub enum SavedError {
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A `summary.json` that is not a run's result (serde names line and column).
    #[error("{}: not a venn-lab run summary: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Where and why it does not parse.
        source: serde_json::Error,
    },
    /// Nothing to summarise.
    #[error("{}: no run summaries (expected seed-<k>/<policy>/summary.json or <policy>/summary.json)", dir.display())]
    Empty {
        /// The folder.
        dir: PathBuf,
    },
    /// A summary whose policy is not the folder's name (moved or mixed-up folders).
    #[error("{}: the run is policy {found:?}, but its folder says {expected:?}", path.display())]
    WrongPolicy {
        /// The file.
        path: PathBuf,
        /// The folder's name.
        expected: String,
        /// The policy inside.
        found: String,
    },
}

/// One run's result from its `summary.json`.
pub fn read_result(path: &Path) -> Result<LabResult, SavedError> {
    let bytes = std::fs::read(path).map_err(|source| SavedError::Io {
        path: path.into(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| SavedError::Json {
        path: path.into(),
        source,
    })
}

/// The runs of a results folder, grouped by seed.
#[derive(Debug)]
pub struct Saved {
    /// Whether the folder has the multi-seed layout (`seed-<k>/<policy>`).
    pub multi_seed: bool,
    /// The policies, baseline first, in the order every seed lists them.
    pub policies: Vec<String>,
    /// Every seed folder that holds every policy, in order of seed number. The
    /// single-seed layout is one entry for `DIR` itself.
    pub seeds: Vec<SeedRuns>,
    /// Seed folders left out, and why (a policy's run missing or cancelled): a partial
    /// seed would bias the means.
    pub skipped: Vec<(PathBuf, String)>,
}

/// One seed's runs.
#[derive(Debug)]
pub struct SeedRuns {
    /// The seed (replicate) number `k` of `seed-<k>` (0 in the single-seed layout).
    pub number: u64,
    /// Its folder.
    pub dir: PathBuf,
    /// Its runs, in [`Saved::policies`]' order.
    pub runs: Vec<LabResult>,
}

/// The seed folders `DIR/seed-<k>` in order of `k` (none: the single-seed layout).
fn seed_dirs(dir: &Path) -> Result<Vec<(u64, PathBuf)>, SavedError> {
    let io = |source| SavedError::Io {
        path: dir.into(),
        source,
    };
    let mut seeds: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        let k = name
            .to_str()
            .and_then(|n| n.strip_prefix("seed-"))
            .and_then(|k| k.parse().ok());
        if let Some(k) = k
            && entry.path().is_dir()
        {
            seeds.push((k, entry.path()));
        }
    }
    seeds.sort();
    Ok(seeds)
}

/// The policies with a `summary.json` in any of `dirs`, `random` first (the usual
/// baseline), the rest by name.
fn policies_in(dirs: &[(u64, PathBuf)]) -> Result<Vec<String>, SavedError> {
    let mut found = std::collections::BTreeSet::new();
    for (_, dir) in dirs {
        let io = |source| SavedError::Io {
            path: dir.clone(),
            source,
        };
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            if entry.path().join("summary.json").is_file()
                && let Some(name) = entry.file_name().to_str()
            {
                found.insert(name.to_string());
            }
        }
    }
    let mut found: Vec<String> = found.into_iter().collect();
    found.sort_by_key(|p| p != "random");
    Ok(found)
}

/// Reads the runs under `dir` for `policies` (baseline first; empty: every policy found in
/// any seed, `random` first, the rest by name).
pub fn read_saved(dir: &Path, policies: &[String]) -> Result<Saved, SavedError> {
    let seed_dirs = seed_dirs(dir)?;
    let multi = !seed_dirs.is_empty();
    let seed_dirs = if multi {
        seed_dirs
    } else {
        vec![(0, dir.to_path_buf())]
    };
    let policies = if policies.is_empty() {
        policies_in(&seed_dirs)?
    } else {
        policies.to_vec()
    };
    if policies.is_empty() {
        return Err(SavedError::Empty { dir: dir.into() });
    }
    let mut saved = Saved {
        multi_seed: multi,
        policies: policies.clone(),
        seeds: Vec::new(),
        skipped: Vec::new(),
    };
    'seeds: for (k, seed) in seed_dirs {
        let mut runs = Vec::with_capacity(policies.len());
        for p in &policies {
            let path = seed.join(p).join("summary.json");
            if !path.is_file() {
                saved.skipped.push((seed, format!("no {p}/summary.json")));
                continue 'seeds;
            }
            let r = read_result(&path)?;
            if &r.policy != p {
                return Err(SavedError::WrongPolicy {
                    path,
                    expected: p.clone(),
                    found: r.policy,
                });
            }
            if r.cancelled() {
                saved.skipped.push((seed, format!("{p} was cancelled")));
                continue 'seeds;
            }
            runs.push(r);
        }
        saved.seeds.push(SeedRuns {
            number: k,
            dir: seed,
            runs,
        });
    }
    if saved.seeds.is_empty() && saved.skipped.is_empty() {
        return Err(SavedError::Empty { dir: dir.into() });
    }
    Ok(saved)
}
