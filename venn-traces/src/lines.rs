//! CSV reading with file/line-aware errors, shared by every loader and open to custom
//! [`TraceFormat`](crate::TraceFormat)s: the `csv` crate splits the rows (quoted fields,
//! `\r\n`, gzip through [`open`]), and [`At`] turns a bad value into an error naming the
//! file, the line and the column.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use csv::StringRecord;

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

/// Calls `f(at, row)` for every row of the CSV file `path`, the first (a header, if it
/// has one) included; blank lines are skipped, and rows may differ in length (the caller
/// checks, with [`expect_fields`]).
pub fn for_each_row(
    path: &Path,
    mut f: impl FnMut(At<'_>, &StringRecord) -> Result<(), InputError>,
) -> Result<(), InputError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(Tail::new(open(path)?));
    let mut row = StringRecord::new();
    loop {
        match reader.read_record(&mut row) {
            Ok(false) => return Ok(()),
            Ok(true) => {}
            Err(e) => return Err(csv_error(path, e)),
        }
        if row.len() == 1 && row[0].trim().is_empty() {
            continue;
        }
        // A row's own position is where the reader stood before it, ahead of the blank
        // lines it skipped; the position after it is exact. Back from there: the row's
        // newline, unless it is the stream's unterminated last line, and any inside quotes.
        let after = reader.position();
        let tail = reader.get_ref();
        let unterminated = tail.eof && after.byte() == tail.bytes && tail.last != Some(b'\n');
        let inside: usize = row.iter().map(|f| f.matches('\n').count()).sum();
        let line = (after.line() as usize).saturating_sub(inside + usize::from(!unterminated));
        f(
            At {
                file: path,
                line: line.max(1),
            },
            &row,
        )?;
    }
}

/// A reader that remembers how much it gave, its last byte and whether it ended: what
/// tells a stream's last line without a newline apart.
struct Tail<R> {
    inner: R,
    bytes: u64,
    last: Option<u8>,
    eof: bool,
}

impl<R> Tail<R> {
    fn new(inner: R) -> Self {
        Tail {
            inner,
            bytes: 0,
            last: None,
            eof: false,
        }
    }
}

impl<R: Read> Read for Tail<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 {
            self.eof = !buf.is_empty();
        } else {
            self.bytes += n as u64;
            self.last = Some(buf[n - 1]);
        }
        Ok(n)
    }
}

fn csv_error(path: &Path, e: csv::Error) -> InputError {
    let line = e.position().map_or(0, |p| p.line() as usize);
    match e.into_kind() {
        csv::ErrorKind::Io(source) => InputError::Io {
            file: path.to_path_buf(),
            source,
        },
        kind => InputError::Malformed {
            file: path.to_path_buf(),
            line,
            what: match kind {
                csv::ErrorKind::Utf8 { err, .. } => format!("not UTF-8: {err}"),
                other => format!("{other:?}"),
            },
        },
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
    for_each_row(path, |at, row| {
        let Some((n, idx)) = &cols else {
            let h = Header::new(row.iter());
            let mut idx = [0; N];
            for (i, name) in idx.iter_mut().zip(names) {
                *i = h.require(at, name)?;
            }
            cols = Some((h.len(), idx));
            return Ok(());
        };
        expect_fields(at, row, *n)?;
        f(at, idx.map(|i| &row[i]))
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

/// Column positions resolved from a header row by name.
pub(crate) struct Header {
    names: Vec<String>,
}

impl Header {
    /// The header's column names, trimmed.
    pub fn new<'a>(fields: impl Iterator<Item = &'a str>) -> Self {
        Header {
            names: fields.map(|s| s.trim().to_string()).collect(),
        }
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Position of column `name`, or an error naming the file and the header's line.
    pub fn require(&self, at: At<'_>, name: &str) -> Result<usize, InputError> {
        self.names.iter().position(|n| n == name).ok_or_else(|| {
            at.err(format!(
                "header lacks column `{name}` (found: {})",
                self.names.join(",")
            ))
        })
    }
}

/// Checks that a data row has exactly `expected` fields.
pub fn expect_fields(at: At<'_>, row: &StringRecord, expected: usize) -> Result<(), InputError> {
    if row.len() != expected {
        return Err(at.err(format!(
            "expected {expected} comma-separated fields, found {}",
            row.len()
        )));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::fixture;

    #[test]
    fn rows_carry_their_own_first_line_past_blank_and_quoted_lines() {
        // Line 2 blank, a quoted field over lines 3-4, line 5 blank (CRLF), line 6 last
        // without a newline.
        let p = fixture("lines.csv", "a,b\n\n1,\"x\ny\"\n\r\n2,3");
        let mut seen = Vec::new();
        for_each_row(&p, |at, row| {
            seen.push((at.line, row.len()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(1, 2), (3, 2), (6, 2)]);
        let p = fixture("lines2.csv", "a,b\n1,2\n");
        let mut lines = Vec::new();
        for_each_row(&p, |at, _| {
            lines.push(at.line);
            Ok(())
        })
        .unwrap();
        assert_eq!(lines, vec![1, 2]);
    }
}
