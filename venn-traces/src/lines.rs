//! Minimal line-oriented CSV reading with file/line-aware errors, shared by every loader
//! and open to custom [`TraceFormat`](crate::TraceFormat)s.
//!
//! The trace files are plain comma-separated text without quoting, so a
//! hand-rolled splitter is both sufficient and fast enough for millions of
//! availability rows; it also gives exact line numbers for error messages.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::error::InputError;

/// Opens `path` for buffered reading, transparently un-gzipping `*.gz` files.
pub fn open(path: &Path) -> Result<Box<dyn BufRead>, InputError> {
    let file = File::open(path).map_err(|source| InputError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    let inner: Box<dyn Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 16, inner)))
}

/// Calls `f(line_number, text)` for every non-blank line of `path`
/// (1-based numbers, `\r` stripped).
pub fn for_each_line(
    path: &Path,
    mut f: impl FnMut(usize, &str) -> Result<(), InputError>,
) -> Result<(), InputError> {
    let mut reader = open(path)?;
    let mut buf = String::new();
    let mut line_no = 0usize;
    loop {
        buf.clear();
        let n = reader
            .read_line(&mut buf)
            .map_err(|source| InputError::Io {
                file: path.to_path_buf(),
                source,
            })?;
        if n == 0 {
            return Ok(());
        }
        line_no += 1;
        let text = buf.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        f(line_no, text)?;
    }
}

/// Calls `f(at, fields)` for every data row of a CSV whose header names every column of
/// `names` (in any order, among others); `fields[k]` is the row's value of `names[k]`.
/// Each row must have as many fields as the header.
pub fn for_each_record<const N: usize>(
    path: &Path,
    names: [&str; N],
    mut f: impl FnMut(At<'_>, [&str; N]) -> Result<(), InputError>,
) -> Result<(), InputError> {
    let mut cols: Option<(usize, [usize; N])> = None;
    for_each_line(path, |line, text| {
        let at = At { file: path, line };
        let Some((n, idx)) = &cols else {
            let h = Header::parse(text);
            let mut idx = [0; N];
            for (i, name) in idx.iter_mut().zip(names) {
                *i = h.require(path, name)?;
            }
            cols = Some((h.len(), idx));
            return Ok(());
        };
        let all = split_exact(at, text, *n)?;
        f(at, idx.map(|i| all[i]))
    })
}

/// Where we are in a file, for building errors and parsing fields.
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    /// The file.
    pub file: &'a Path,
    /// 1-based line number, the header being line 1.
    pub line: usize,
}

impl At<'_> {
    /// An error about this line.
    pub fn err(&self, what: impl Into<String>) -> InputError {
        InputError::Malformed {
            file: self.file.to_path_buf(),
            line: self.line,
            what: what.into(),
        }
    }

    /// Parses a finite float in column `col`.
    pub fn f64(&self, col: &str, s: &str) -> Result<f64, InputError> {
        match s.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.err(format!("column `{col}`: `{s}` is not a finite number"))),
        }
    }

    /// Parses an unsigned integer in column `col`; an integral float such as
    /// `12.0` is accepted because pandas sometimes writes ints that way.
    pub fn u64(&self, col: &str, s: &str) -> Result<u64, InputError> {
        let t = s.trim();
        if let Ok(v) = t.parse::<u64>() {
            return Ok(v);
        }
        match t.parse::<f64>() {
            Ok(v) if v.fract() == 0.0 && (0.0..1.8e19).contains(&v) => Ok(v as u64),
            _ => Err(self.err(format!(
                "column `{col}`: `{s}` is not a non-negative integer"
            ))),
        }
    }

    /// Like [`At::u64`] but range-checked into `u32`.
    pub fn u32(&self, col: &str, s: &str) -> Result<u32, InputError> {
        let v = self.u64(col, s)?;
        u32::try_from(v).map_err(|_| self.err(format!("column `{col}`: {v} is too large")))
    }
}

/// Column positions resolved from a header line by name.
pub(crate) struct Header {
    names: Vec<String>,
}

impl Header {
    /// Splits a header line into trimmed column names.
    pub fn parse(text: &str) -> Self {
        Header {
            names: text.split(',').map(|s| s.trim().to_string()).collect(),
        }
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Position of column `name`, or an error naming the file and line 1.
    pub fn require(&self, file: &Path, name: &str) -> Result<usize, InputError> {
        self.names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| InputError::Malformed {
                file: file.to_path_buf(),
                line: 1,
                what: format!(
                    "header lacks column `{name}` (found: {})",
                    self.names.join(",")
                ),
            })
    }
}

/// Splits a data line and checks it has exactly `expected` fields.
pub(crate) fn split_exact<'t>(
    at: At<'_>,
    text: &'t str,
    expected: usize,
) -> Result<Vec<&'t str>, InputError> {
    let fields: Vec<&str> = text.split(',').collect();
    if fields.len() != expected {
        return Err(at.err(format!(
            "expected {expected} comma-separated fields, found {}",
            fields.len()
        )));
    }
    Ok(fields)
}

/// Error for a file that had no data rows.
pub(crate) fn empty(file: &Path) -> InputError {
    InputError::Invalid {
        file: file.to_path_buf(),
        what: "no data rows".into(),
    }
}

/// Path helper so callers can write `owned(path)` in error constructors.
pub(crate) fn owned(p: &Path) -> PathBuf {
    p.to_path_buf()
}
