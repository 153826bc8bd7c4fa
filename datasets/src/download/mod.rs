//! Fetching the full FEMNIST (LEAF: about 3,600 writers, 814,277 samples) from the
//! Flower Datasets copy on Hugging Face, [`SOURCE_REPO`], and converting it to the
//! project's layout (`DIR/femnist/{train,test}/shard_NNN.json.gz`, see
//! `shared/data/femnist/README.md`).
//!
//! [`download`] lists the parquet files of the `train` split with the Hugging Face API
//! (`GET {base}/api/datasets/flwrlabs/femnist/tree/main/data`), fetches each into
//! `DIR/downloads/` with [`http::fetch`] (resumable, checked against the SHA-256 that
//! the listing gives as `lfs.oid`), converts them with [`convert::convert`], and deletes
//! the parquet unless asked to keep it. Rerunning after an interruption resumes the
//! download and redoes the conversion; a finished, verified download is not fetched again.
//!
//! Source: `flwrlabs/femnist`, BSD-2-Clause (LEAF); the images come from NIST Special
//! Database 19.

pub mod convert;
mod error;
pub mod http;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use convert::{ConvertOptions, ConvertReport, Polarity, PolarityCheck};
pub use error::DownloadError;

use error::io_err;

/// The Hugging Face base URL used unless another is given.
pub const DEFAULT_SOURCE_URL: &str = "https://huggingface.co";

/// The Hugging Face dataset converted.
pub const SOURCE_REPO: &str = "flwrlabs/femnist";

/// What to download and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadOptions {
    /// Data directory: the dataset lands in `dir/femnist`, downloads in `dir/downloads`.
    pub dir: PathBuf,
    /// Base URL of the Hugging Face server ([`DEFAULT_SOURCE_URL`]; tests use a local one).
    pub source_url: String,
    /// Keep the parquet under `dir/downloads/` after a successful conversion.
    pub keep_source: bool,
    /// No progress bars.
    pub quiet: bool,
}

impl DownloadOptions {
    /// Defaults for `dir`: Hugging Face, source deleted after conversion, progress shown.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            source_url: DEFAULT_SOURCE_URL.to_owned(),
            keep_source: false,
            quiet: false,
        }
    }
}

/// One parquet file of the source, as listed by the Hugging Face API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteFile {
    /// Path in the dataset repository, e.g. `data/train-00000-of-00001.parquet`.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the content (lowercase hex; the listing's `lfs.oid`).
    pub sha256: String,
    /// Where to GET it.
    pub url: String,
}

impl RemoteFile {
    /// The file name (the last part of [`RemoteFile::path`]).
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// What [`download`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DownloadReport {
    /// The FEMNIST directory written (`dir/femnist`).
    pub femnist_dir: PathBuf,
    /// The source files.
    pub files: Vec<RemoteFile>,
    /// Bytes received over the network in this run.
    pub fetched_bytes: u64,
    /// Total size of the source files.
    pub source_bytes: u64,
    /// Whether the parquet was kept under `dir/downloads/`.
    pub kept_source: bool,
    /// The conversion's outcome.
    pub conversion: ConvertReport,
    /// Wall time of the whole run.
    pub elapsed: Duration,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: String,
    path: String,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    lfs: Option<Lfs>,
}

#[derive(Deserialize)]
struct Lfs {
    oid: String,
    size: u64,
}

/// The parquet files of the `train` split (`data/train-*.parquet`), sorted by path,
/// from the Hugging Face API at `source_url`.
pub fn list_files(source_url: &str) -> Result<Vec<RemoteFile>, DownloadError> {
    let base = source_url.trim_end_matches('/');
    let url = format!("{base}/api/datasets/{SOURCE_REPO}/tree/main/data");
    let listing = |message: String| DownloadError::Listing {
        url: url.clone(),
        message,
    };
    let mut response = http::agent()
        .get(&url)
        .call()
        .map_err(|e| DownloadError::Http {
            url: url.clone(),
            message: e.to_string(),
        })?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(DownloadError::Status { url, status });
    }
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| DownloadError::Http {
            url: url.clone(),
            message: e.to_string(),
        })?;
    let entries: Vec<Entry> =
        serde_json::from_str(&body).map_err(|e| listing(format!("not the expected JSON: {e}")))?;
    let mut files = Vec::new();
    for e in entries {
        let name = e.path.rsplit('/').next().unwrap_or(&e.path);
        if e.kind != "file" || !name.starts_with("train-") || !name.ends_with(".parquet") {
            continue;
        }
        let Some(lfs) = e.lfs else {
            return Err(listing(format!(
                "{} has no lfs.oid, so there is no SHA-256 to check it against",
                e.path
            )));
        };
        if lfs.oid.len() != 64 || !lfs.oid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(listing(format!(
                "{}: lfs.oid {:?} is not a SHA-256",
                e.path, lfs.oid
            )));
        }
        if let Some(size) = e.size
            && size != lfs.size
        {
            return Err(listing(format!(
                "{}: size {size} but lfs.size {}",
                e.path, lfs.size
            )));
        }
        files.push(RemoteFile {
            url: format!("{base}/datasets/{SOURCE_REPO}/resolve/main/{}", e.path),
            path: e.path,
            size: lfs.size,
            sha256: lfs.oid.to_ascii_lowercase(),
        });
    }
    if files.is_empty() {
        return Err(listing("no data/train-*.parquet file listed".into()));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Download and convert: the whole `femnist download` command.
pub fn download(opts: &DownloadOptions) -> Result<DownloadReport, DownloadError> {
    let start = Instant::now();
    let downloads = opts.dir.join("downloads");
    std::fs::create_dir_all(&downloads).map_err(io_err(&downloads))?;
    let files = list_files(&opts.source_url)?;
    let mut local = Vec::new();
    let mut fetched_bytes = 0;
    for f in &files {
        let got = http::fetch(&f.url, &downloads, f.name(), f.size, &f.sha256, !opts.quiet)?;
        fetched_bytes += got.transferred;
        local.push(got.path);
    }
    let base = opts.source_url.trim_end_matches('/');
    let femnist_dir = opts.dir.join("femnist");
    let conversion = convert::convert(
        &local,
        &femnist_dir,
        &ConvertOptions {
            source_url: format!("{base}/datasets/{SOURCE_REPO}"),
            source_repo: SOURCE_REPO.to_owned(),
            quiet: opts.quiet,
        },
    )?;
    if !opts.keep_source {
        for p in &local {
            std::fs::remove_file(p).map_err(io_err(p))?;
        }
        remove_if_empty(&downloads);
    }
    Ok(DownloadReport {
        femnist_dir,
        source_bytes: files.iter().map(|f| f.size).sum(),
        files,
        fetched_bytes,
        kept_source: opts.keep_source,
        conversion,
        elapsed: start.elapsed(),
    })
}

/// Remove `dir` if nothing is in it; anything else is left alone.
fn remove_if_empty(dir: &Path) {
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none()) {
        let _ = std::fs::remove_dir(dir);
    }
}
