//! Availability trace formats as plug-ins: a [`TraceFormat`] recognises a file and reads
//! its rows; [`TraceFormats`] holds the built-in ones (Venn CSV, FedScale JSON) and any a
//! user registers, tried newest first. Drivers load `--trace` files through it, so a new
//! format is one type and one `register` call (README: "Add a trace format").
//!
//! A format that reads comma-separated text gets `FILE:LINE` errors for free from
//! [`crate::lines`] (`for_each_row`, `for_each_record`, [`At`](crate::lines::At)).

use std::path::Path;
use std::sync::Arc;

use crate::availability::{AvailabilityTrace, CheckInRow};
use crate::error::InputError;

/// One availability trace format.
pub trait TraceFormat: Send + Sync {
    /// Its name, for messages (`venn-csv`, `fedscale-json`, …).
    fn name(&self) -> &str;
    /// Whether it reads `path` (decided from the name; a `.gz` suffix is the reader's
    /// business: [`crate::lines::open`] un-gzips transparently).
    fn matches(&self, path: &Path) -> bool;
    /// Reads every check-in of the file: device id, start and end, in seconds.
    fn load(&self, path: &Path) -> Result<Vec<CheckInRow>, InputError>;
}

/// The lower-cased file name without a trailing `.gz`.
pub fn base_name(path: &Path) -> String {
    let name = path.to_string_lossy().to_ascii_lowercase();
    name.strip_suffix(".gz").unwrap_or(&name).to_string()
}

/// The Venn authors' flattened CSV (`[index,]ID,start,end`): the fallback for any name.
#[derive(Clone, Copy, Debug, Default)]
pub struct VennCsv;

impl TraceFormat for VennCsv {
    fn name(&self) -> &str {
        "venn-csv"
    }
    fn matches(&self, _path: &Path) -> bool {
        true
    }
    fn load(&self, path: &Path) -> Result<Vec<CheckInRow>, InputError> {
        Ok(AvailabilityTrace::load_venn_csv(path)?.into_rows())
    }
}

/// FedScale's per-client `client_behave_trace` as JSON (`*.json`, `*.json.gz`).
#[derive(Clone, Copy, Debug, Default)]
pub struct FedScaleJson;

impl TraceFormat for FedScaleJson {
    fn name(&self) -> &str {
        "fedscale-json"
    }
    fn matches(&self, path: &Path) -> bool {
        base_name(path).ends_with(".json")
    }
    fn load(&self, path: &Path) -> Result<Vec<CheckInRow>, InputError> {
        Ok(AvailabilityTrace::load_fedscale_json(path)?.into_rows())
    }
}

/// The formats a driver can read, tried newest-registered first.
#[derive(Clone)]
pub struct TraceFormats {
    formats: Vec<Arc<dyn TraceFormat>>,
}

impl Default for TraceFormats {
    fn default() -> Self {
        Self::builtin()
    }
}

impl std::fmt::Debug for TraceFormats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl TraceFormats {
    /// Venn CSV (any name) and FedScale JSON (`.json`).
    pub fn builtin() -> Self {
        TraceFormats {
            formats: vec![Arc::new(VennCsv), Arc::new(FedScaleJson)],
        }
    }

    /// Adds a format; it is tried before every format registered earlier.
    pub fn register(&mut self, format: impl TraceFormat + 'static) -> &mut Self {
        self.formats.push(Arc::new(format));
        self
    }

    /// Names of the formats, in the order they are tried.
    pub fn names(&self) -> Vec<&str> {
        self.formats.iter().rev().map(|f| f.name()).collect()
    }

    /// The format that reads `path`.
    pub fn format_for(&self, path: &Path) -> Option<&dyn TraceFormat> {
        self.formats
            .iter()
            .rev()
            .find(|f| f.matches(path))
            .map(|f| f.as_ref())
    }

    /// Loads `path` with the first format that matches it; an empty trace is an error.
    pub fn load(&self, path: &Path) -> Result<AvailabilityTrace, InputError> {
        let format = self.format_for(path).ok_or_else(|| InputError::Invalid {
            file: path.to_path_buf(),
            what: format!(
                "no trace format reads this file (known: {})",
                self.names().join(", ")
            ),
        })?;
        let rows = format.load(path)?;
        if rows.is_empty() {
            return Err(InputError::Invalid {
                file: path.to_path_buf(),
                what: format!("no check-ins ({} format)", format.name()),
            });
        }
        Ok(AvailabilityTrace::from_rows(rows))
    }
}

// Kept here rather than in `availability.rs`, so that the trace type needs nothing from
// the formats that read it (one-way imports).
impl AvailabilityTrace {
    /// Loads either built-in form, by extension: `.json` (or `.json.gz`) is FedScale's
    /// per-client form, anything else the Venn CSV. Other formats: [`TraceFormats`].
    pub fn load(path: &Path) -> Result<Self, InputError> {
        TraceFormats::builtin().load(path)
    }
}
