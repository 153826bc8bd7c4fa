//! The data this repository carries, built into every binary that links this crate:
//! 80 FEMNIST writers, with the test parts of all 396 of the shared set's main writers as
//! the evaluation pool (`data/femnist`, 3.9 MB), and the trace tables (`data/traces`,
//! 108 KB). See the READMEs there for how they were chosen and how to cite them.
//!
//! Loaders read directories, so the bytes are used in place when the crate's source tree
//! is still there (a clone), and otherwise written once to the user's cache directory,
//! under a name that changes with the contents, so an older copy is never reused.

use std::path::{Path, PathBuf};

use crate::data_kind::{DataKind, xdg_dir};
use crate::error::LeafError;

/// The femnist files, as (path under `femnist/`, bytes).
const FEMNIST: &[(&str, &[u8])] = &[
    ("README.md", include_bytes!("../data/femnist/README.md")),
    ("SHA256SUMS", include_bytes!("../data/femnist/SHA256SUMS")),
    (
        "test/shard_00.json.gz",
        include_bytes!("../data/femnist/test/shard_00.json.gz"),
    ),
    (
        "test/shard_01.json.gz",
        include_bytes!("../data/femnist/test/shard_01.json.gz"),
    ),
    (
        "test/shard_02.json.gz",
        include_bytes!("../data/femnist/test/shard_02.json.gz"),
    ),
    (
        "test/shard_03.json.gz",
        include_bytes!("../data/femnist/test/shard_03.json.gz"),
    ),
    (
        "test/shard_04.json.gz",
        include_bytes!("../data/femnist/test/shard_04.json.gz"),
    ),
    (
        "test/shard_05.json.gz",
        include_bytes!("../data/femnist/test/shard_05.json.gz"),
    ),
    (
        "test/shard_06.json.gz",
        include_bytes!("../data/femnist/test/shard_06.json.gz"),
    ),
    (
        "test/shard_07.json.gz",
        include_bytes!("../data/femnist/test/shard_07.json.gz"),
    ),
    (
        "test/shard_08.json.gz",
        include_bytes!("../data/femnist/test/shard_08.json.gz"),
    ),
    (
        "test/shard_09.json.gz",
        include_bytes!("../data/femnist/test/shard_09.json.gz"),
    ),
    (
        "test/shard_10.json.gz",
        include_bytes!("../data/femnist/test/shard_10.json.gz"),
    ),
    (
        "test/shard_11.json.gz",
        include_bytes!("../data/femnist/test/shard_11.json.gz"),
    ),
    (
        "test/shard_12.json.gz",
        include_bytes!("../data/femnist/test/shard_12.json.gz"),
    ),
    (
        "test/shard_13.json.gz",
        include_bytes!("../data/femnist/test/shard_13.json.gz"),
    ),
    (
        "test/shard_14.json.gz",
        include_bytes!("../data/femnist/test/shard_14.json.gz"),
    ),
    (
        "test/shard_15.json.gz",
        include_bytes!("../data/femnist/test/shard_15.json.gz"),
    ),
    (
        "test/shard_16.json.gz",
        include_bytes!("../data/femnist/test/shard_16.json.gz"),
    ),
    (
        "test/shard_17.json.gz",
        include_bytes!("../data/femnist/test/shard_17.json.gz"),
    ),
    (
        "test/shard_18.json.gz",
        include_bytes!("../data/femnist/test/shard_18.json.gz"),
    ),
    (
        "test/shard_19.json.gz",
        include_bytes!("../data/femnist/test/shard_19.json.gz"),
    ),
    (
        "train/shard_00.json.gz",
        include_bytes!("../data/femnist/train/shard_00.json.gz"),
    ),
    (
        "train/shard_05.json.gz",
        include_bytes!("../data/femnist/train/shard_05.json.gz"),
    ),
    (
        "train/shard_10.json.gz",
        include_bytes!("../data/femnist/train/shard_10.json.gz"),
    ),
    (
        "train/shard_15.json.gz",
        include_bytes!("../data/femnist/train/shard_15.json.gz"),
    ),
    ("writers.tsv", include_bytes!("../data/femnist/writers.tsv")),
];

/// The traces files, as (path under `traces/`, bytes).
const TRACES: &[(&str, &[u8])] = &[
    ("README.md", include_bytes!("../data/traces/README.md")),
    (
        "aibenchmark_eligibility_4.csv",
        include_bytes!("../data/traces/aibenchmark_eligibility_4.csv"),
    ),
    (
        "fedscale_client_device_capacity_first992.csv",
        include_bytes!("../data/traces/fedscale_client_device_capacity_first992.csv"),
    ),
    (
        "venn_eligibility_specs.csv",
        include_bytes!("../data/traces/venn_eligibility_specs.csv"),
    ),
    (
        "venn_job_catalog.csv",
        include_bytes!("../data/traces/venn_job_catalog.csv"),
    ),
    (
        "venn_jobs_even_workload.csv",
        include_bytes!("../data/traces/venn_jobs_even_workload.csv"),
    ),
    (
        "venn_jobs_high_workload.csv",
        include_bytes!("../data/traces/venn_jobs_high_workload.csv"),
    ),
    (
        "venn_jobs_large_workload.csv",
        include_bytes!("../data/traces/venn_jobs_large_workload.csv"),
    ),
    (
        "venn_jobs_low_workload.csv",
        include_bytes!("../data/traces/venn_jobs_low_workload.csv"),
    ),
    (
        "venn_jobs_seed2_workload.csv",
        include_bytes!("../data/traces/venn_jobs_seed2_workload.csv"),
    ),
    (
        "venn_jobs_small_workload.csv",
        include_bytes!("../data/traces/venn_jobs_small_workload.csv"),
    ),
    (
        "venn_testbed_client_dataset_size.csv",
        include_bytes!("../data/traces/venn_testbed_client_dataset_size.csv"),
    ),
    (
        "venn_testbed_client_spec_speed.csv",
        include_bytes!("../data/traces/venn_testbed_client_spec_speed.csv"),
    ),
    (
        "venn_workload_configs.csv",
        include_bytes!("../data/traces/venn_workload_configs.csv"),
    ),
];

/// The files of `kind`.
fn files(kind: DataKind) -> &'static [(&'static str, &'static [u8])] {
    match kind {
        DataKind::Femnist => FEMNIST,
        DataKind::Traces => TRACES,
    }
}

/// FNV-1a over the file names and contents: names the cache directory after the data.
fn fingerprint(kind: DataKind) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, bytes) in files(kind) {
        for b in name.bytes().chain(bytes.iter().copied()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The user's cache directory: `$XDG_CACHE_HOME`, else `$HOME/.cache`, else the temp dir.
fn cache_root() -> PathBuf {
    xdg_dir("XDG_CACHE_HOME", ".cache").unwrap_or_else(std::env::temp_dir)
}

/// A directory holding the embedded files of `kind`: the source tree's copy when it is
/// present and unchanged, else an extracted copy under the cache directory.
pub(crate) fn materialize(kind: DataKind) -> Result<PathBuf, LeafError> {
    let in_tree = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(kind.dir_name());
    if matches_files(&in_tree, kind) {
        return Ok(in_tree);
    }
    let dir = cache_root().join("venn").join(format!(
        "embedded-{}-{:016x}",
        env!("CARGO_PKG_VERSION"),
        fingerprint(kind)
    ));
    extract(kind, &dir)
}

/// Whether `dir` holds every embedded file of `kind` with the same length (a cheap check:
/// a clone's files are the ones compiled in unless someone edited them in place).
fn matches_files(dir: &Path, kind: DataKind) -> bool {
    files(kind).iter().all(|(name, bytes)| {
        std::fs::metadata(dir.join(name)).is_ok_and(|m| m.len() == bytes.len() as u64)
    })
}

/// Write the files of `kind` to `parent/<kind>` unless a complete copy is there. The
/// copy is written to a temporary sibling and renamed into place, so a concurrent or
/// interrupted extraction never leaves a partial directory that a loader would use.
pub(crate) fn extract(kind: DataKind, parent: &Path) -> Result<PathBuf, LeafError> {
    let target = parent.join(kind.dir_name());
    if matches_files(&target, kind) {
        return Ok(target);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LeafError::Io { path, source }
    };
    let tmp = parent.join(format!(".{}-{}.tmp", kind.dir_name(), std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for (name, bytes) in files(kind) {
        let p = tmp.join(name);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        std::fs::write(&p, bytes).map_err(io(&p))?;
    }
    if std::fs::rename(&tmp, &target).is_err() {
        // Another process finished first (or a stale copy is in the way): keep theirs if
        // complete, else replace it.
        if !matches_files(&target, kind) {
            let _ = std::fs::remove_dir_all(&target);
            std::fs::rename(&tmp, &target).map_err(io(&target))?;
        }
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Femnist, WriterSet};

    #[test]
    fn extracted_femnist_loads_and_a_second_extraction_reuses_it() {
        let dir = std::env::temp_dir().join(format!("venn-embedded-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let femnist = extract(DataKind::Femnist, &dir).unwrap();
        let stats = Femnist::load(&femnist, WriterSet::Main).unwrap().stats();
        assert_eq!(
            (
                stats.writers,
                stats.train_samples,
                stats.test_samples,
                stats.classes
            ),
            (396, 11_138, 6_512, 62)
        );
        let marker = femnist.join("train/shard_00.json.gz");
        let before = std::fs::metadata(&marker).unwrap().modified().unwrap();
        assert_eq!(extract(DataKind::Femnist, &dir).unwrap(), femnist);
        assert_eq!(
            std::fs::metadata(&marker).unwrap().modified().unwrap(),
            before
        );
        // A truncated file is noticed and the copy rewritten.
        std::fs::write(&marker, b"cut").unwrap();
        extract(DataKind::Femnist, &dir).unwrap();
        assert!(Femnist::load(&femnist, WriterSet::Main).is_ok());
        let traces = extract(DataKind::Traces, &dir).unwrap();
        assert!(traces.join("venn_job_catalog.csv").is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
