//! Device-availability traces: loading, the compact in-memory form, and the
//! lazy "replay the first 5 days `NUM_WEEK` times" expansion.
//!
//! Each row is one device check-in: the device comes online at `start` and
//! stays until `end` (plus a grace period when replayed). Two on-disk forms are
//! accepted:
//! - the Venn flattened CSV, `<pandas index>,ID,start,end` (header `,ID,start,end`)
//!   or `ID,start,end`, with or without a header; seconds as ints or floats;
//! - FedScale's per-client JSON, `{client_id: {duration, inactive: [..],
//!   finish_time, active: [..], model}}`, where `active[k]..inactive[k]` is the
//!   k-th online interval (exactly the pairs Venn flattens into its CSV).
//!
//! Rows are kept sorted by start (stable, so ties keep file order) in 16 bytes
//! each; the replay expansion is an iterator so tens of millions of replicated
//! check-ins are never materialised.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use serde::Deserialize;

use super::error::InputError;
use super::lines::{Header, empty, expect_fields, for_each_row, open, owned};

/// Default extra seconds a replayed device stays online after its `end`
/// (the authors' simulator adds 80 s).
pub const DEFAULT_GRACE_S: f64 = 80.0;
/// Default length of the replicated block: 5 days, in seconds.
pub const DEFAULT_WINDOW_S: f64 = 432_000.0;

/// One check-in as stored: 16 bytes.
///
/// The duration is kept as `f32`, which is exact for integer durations below
/// 2^24 s (194 days) and within 1/16 s for float durations up to a week.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckInRow {
    /// Start of the online interval, seconds from the trace origin.
    pub start: f64,
    /// Length of the online interval in seconds (`end - start`, never negative).
    pub duration: f32,
    /// The `ID` column (Venn CSV) or the client key (FedScale JSON).
    pub device: u32,
}

impl CheckInRow {
    /// Builds a row from start and end seconds.
    pub fn new(device: u32, start: f64, end: f64) -> Self {
        CheckInRow {
            start,
            duration: (end - start).max(0.0) as f32,
            device,
        }
    }

    /// End of the online interval in seconds.
    pub fn end(&self) -> f64 {
        self.start + f64::from(self.duration)
    }
}

/// Knobs of the replay expansion, defaults as in the authors' simulator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplayOptions {
    /// Seconds added to each `end` (default 80).
    pub grace_s: f64,
    /// Rows with `start <= window_s` are kept, and replica `j` is shifted by
    /// `j * window_s` (default 432 000 s = 5 days).
    pub window_s: f64,
    /// How many times the block is replayed (`NUM_WEEK`, default 1).
    pub replicas: u32,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            grace_s: DEFAULT_GRACE_S,
            window_s: DEFAULT_WINDOW_S,
            replicas: 1,
        }
    }
}

/// One replayed check-in, as the engine consumes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplayedCheckIn {
    /// Position of the source row in the start-sorted 5-day block. Venn assigns
    /// capacity and eligibility by this index, identical in every replica; pass
    /// it to [`crate::DeviceCatalog::profile`].
    pub base_index: u32,
    /// Which replica (0-based) this is.
    pub replica: u32,
    /// Unique client id, `base_index * replicas + replica` as in Venn.
    pub client_id: u64,
    /// Device id from the trace (informational; Venn ignores it).
    pub device: u32,
    /// Check-in time, seconds.
    pub start_s: f64,
    /// End of the traced online interval, seconds (no grace).
    pub end_s: f64,
    /// Time the device goes offline: `end_s + grace_s`.
    pub online_until_s: f64,
}

/// A loaded availability trace, sorted by start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AvailabilityTrace {
    rows: Vec<CheckInRow>,
}

impl AvailabilityTrace {
    /// Wraps rows, sorting them stably by start.
    pub fn from_rows(mut rows: Vec<CheckInRow>) -> Self {
        rows.sort_by(|a, b| a.start.total_cmp(&b.start));
        AvailabilityTrace { rows }
    }

    /// The rows, sorted by start.
    pub fn into_rows(self) -> Vec<CheckInRow> {
        self.rows
    }

    /// Loads the Venn flattened CSV (`[index,]ID,start,end`, header optional).
    pub fn load_venn_csv(path: &Path) -> Result<Self, InputError> {
        // Column layout: (field count, position of ID, start, end).
        let mut layout: Option<(usize, usize, usize, usize)> = None;
        let mut rows = Vec::new();
        for_each_row(path, |at, row| {
            if layout.is_none() {
                // Any non-numeric field means the row is a header.
                let has_header = row
                    .iter()
                    .map(str::trim)
                    .any(|f| !f.is_empty() && f.parse::<f64>().is_err());
                if has_header {
                    let lower: Vec<String> = row.iter().map(str::to_ascii_lowercase).collect();
                    let h = Header::new(lower.iter().map(String::as_str));
                    let id = h.require(at, "id")?;
                    let s = h.require(at, "start")?;
                    let e = h.require(at, "end")?;
                    layout = Some((h.len(), id, s, e));
                    return Ok(());
                }
                layout = Some(match row.len() {
                    3 => (3, 0, 1, 2),
                    4 => (4, 1, 2, 3),
                    n => {
                        return Err(at.err(format!(
                            "expected 3 (ID,start,end) or 4 (index,ID,start,end) fields, found {n}"
                        )));
                    }
                });
            }
            let (n, id, s, e) = layout.expect("layout set above");
            expect_fields(at, row, n)?;
            let device = at.u32("ID", &row[id])?;
            let start = at.f64("start", &row[s])?;
            let end = at.f64("end", &row[e])?;
            if start < 0.0 {
                return Err(at.err(format!("start {start} is negative")));
            }
            if end < start {
                return Err(at.err(format!("end {end} is before start {start}")));
            }
            rows.push(CheckInRow::new(device, start, end));
            Ok(())
        })?;
        if rows.is_empty() {
            return Err(empty(path));
        }
        tracing::debug!(file = %path.display(), rows = rows.len(), "loaded Venn availability CSV");
        Ok(Self::from_rows(rows))
    }

    /// Loads FedScale's per-client JSON form. Syntax and type errors carry the
    /// JSON line; a semantic error (mismatched lists, interval ending before it
    /// starts) names the client key instead, since the parser does not keep
    /// per-value positions.
    pub fn load_fedscale_json(path: &Path) -> Result<Self, InputError> {
        let reader = open(path)?;
        let clients: BTreeMap<String, FedScaleClient> =
            serde_json::from_reader(reader).map_err(|e| InputError::Malformed {
                file: owned(path),
                line: e.line(),
                what: e.to_string(),
            })?;
        let invalid = |what: String| InputError::Invalid {
            file: owned(path),
            what,
        };
        // Numeric key order, so ties in start are broken the same way each time.
        let mut keyed = Vec::with_capacity(clients.len());
        for (key, client) in clients {
            let id: u32 = key
                .trim()
                .parse()
                .map_err(|_| invalid(format!("client key `{key}` is not a u32")))?;
            keyed.push((id, client));
        }
        keyed.sort_by_key(|(id, _)| *id);
        let mut rows = Vec::new();
        for (id, c) in keyed {
            if c.active.len() != c.inactive.len() {
                return Err(invalid(format!(
                    "client {id}: `active` has {} entries but `inactive` has {}",
                    c.active.len(),
                    c.inactive.len()
                )));
            }
            for (k, (&s, &e)) in c.active.iter().zip(&c.inactive).enumerate() {
                if !(s.is_finite() && e.is_finite()) || s < 0.0 || e < s {
                    return Err(invalid(format!(
                        "client {id}: interval {k} is [{s}, {e}], which is not a valid interval"
                    )));
                }
                rows.push(CheckInRow::new(id, s, e));
            }
        }
        if rows.is_empty() {
            return Err(empty(path));
        }
        Ok(Self::from_rows(rows))
    }

    /// All rows, sorted by start.
    pub fn rows(&self) -> &[CheckInRow] {
        &self.rows
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows the simulator keeps: those with `start <= window_s`.
    pub fn block(&self, window_s: f64) -> &[CheckInRow] {
        let n = self.rows.partition_point(|r| r.start <= window_s);
        &self.rows[..n]
    }

    /// Lazily expands the block `replicas` times, shifted by `window_s` each
    /// time. Yields replica-major, so the output is sorted by start.
    pub fn replay(&self, opts: ReplayOptions) -> Replay<'_> {
        Replay {
            block: self.block(opts.window_s),
            opts,
            replica: 0,
            pos: 0,
        }
    }

    /// Writes the Venn CSV form (`,ID,start,end` with a pandas-style index).
    /// Times that are whole seconds are written as integers.
    pub fn write_venn_csv<W: Write>(&self, mut w: W) -> io::Result<()> {
        writeln!(w, ",ID,start,end")?;
        for (i, r) in self.rows.iter().enumerate() {
            writeln!(w, "{i},{},{},{}", r.device, r.start, r.end())?;
        }
        w.flush()
    }

    /// Writes FedScale's per-client JSON form, grouping rows by device.
    /// `finish_time` is the wrap period; `duration` is written as the total
    /// online seconds of the client (FedScale leaves the field undocumented and
    /// our loader ignores it), `model` as an empty string.
    pub fn write_fedscale_json<W: Write>(&self, w: W, finish_time: f64) -> io::Result<()> {
        let mut by_dev: BTreeMap<u32, FedScaleClient> = BTreeMap::new();
        for r in &self.rows {
            let c = by_dev.entry(r.device).or_default();
            c.active.push(r.start);
            c.inactive.push(r.end());
        }
        let num = |v: f64| -> serde_json::Value {
            if v.fract() == 0.0 && v.abs() < 9.0e15 {
                serde_json::Value::from(v as i64)
            } else {
                serde_json::Value::from(v)
            }
        };
        let mut out = serde_json::Map::new();
        for (id, c) in by_dev {
            let online: f64 = c.active.iter().zip(&c.inactive).map(|(s, e)| e - s).sum();
            let obj = serde_json::json!({
                "duration": num(online),
                "inactive": c.inactive.iter().map(|&v| num(v)).collect::<Vec<_>>(),
                "finish_time": num(finish_time),
                "active": c.active.iter().map(|&v| num(v)).collect::<Vec<_>>(),
                "model": "",
            });
            out.insert(id.to_string(), obj);
        }
        serde_json::to_writer(w, &serde_json::Value::Object(out)).map_err(io::Error::other)
    }
}

/// One client of FedScale's per-client availability form.
#[derive(Debug, Default, Deserialize)]
struct FedScaleClient {
    #[serde(default)]
    active: Vec<f64>,
    #[serde(default)]
    inactive: Vec<f64>,
}

/// Iterator returned by [`AvailabilityTrace::replay`].
#[derive(Clone, Debug)]
pub struct Replay<'a> {
    block: &'a [CheckInRow],
    opts: ReplayOptions,
    replica: u32,
    pos: usize,
}

impl Iterator for Replay<'_> {
    type Item = ReplayedCheckIn;

    fn next(&mut self) -> Option<ReplayedCheckIn> {
        if self.block.is_empty() || self.replica >= self.opts.replicas {
            return None;
        }
        if self.pos == self.block.len() {
            self.pos = 0;
            self.replica += 1;
            if self.replica >= self.opts.replicas {
                return None;
            }
        }
        let i = self.pos;
        let r = self.block[i];
        self.pos += 1;
        let shift = f64::from(self.replica) * self.opts.window_s;
        let end_s = r.end() + shift;
        Some(ReplayedCheckIn {
            base_index: i as u32,
            replica: self.replica,
            client_id: i as u64 * u64::from(self.opts.replicas) + u64::from(self.replica),
            device: r.device,
            start_s: r.start + shift,
            end_s,
            online_until_s: end_s + self.opts.grace_s,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = if self.block.is_empty() || self.replica >= self.opts.replicas {
            0
        } else {
            let full_left = (self.opts.replicas - self.replica - 1) as usize;
            full_left * self.block.len() + (self.block.len() - self.pos)
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Replay<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{fixture, fixture_bytes};

    #[test]
    fn loads_pandas_header_and_sorts() {
        let p = fixture(
            "avail.csv",
            ",ID,start,end\n0,0,50,60\n1,1,10.5,20\n2,2,10.5,11\n",
        );
        let t = AvailabilityTrace::load(&p).unwrap();
        let starts: Vec<_> = t.rows().iter().map(|r| (r.device, r.start)).collect();
        assert_eq!(starts, vec![(1, 10.5), (2, 10.5), (0, 50.0)]);
        assert_eq!(t.rows()[0].end(), 20.0);
    }

    #[test]
    fn loads_three_column_and_headerless() {
        let a = fixture("a3.csv", "ID,start,end\n7,1,2\n");
        assert_eq!(AvailabilityTrace::load(&a).unwrap().rows()[0].device, 7);
        let b = fixture("a4.csv", "0,9,1,2\n1,8,3,4.0\n");
        let t = AvailabilityTrace::load(&b).unwrap();
        assert_eq!(t.rows()[1].device, 8);
        assert_eq!(t.rows()[1].end(), 4.0);
        let c = fixture("a3n.csv", "9,1,2\n");
        assert_eq!(AvailabilityTrace::load(&c).unwrap().rows()[0].device, 9);
    }

    #[test]
    fn gzipped_csv_is_read() {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b",ID,start,end\n0,0,5,6\n").unwrap();
        let p = fixture_bytes("avail.csv.gz", &enc.finish().unwrap());
        assert_eq!(AvailabilityTrace::load(&p).unwrap().len(), 1);
    }

    fn bad(name: &str, body: &str) -> String {
        let p = fixture(name, body);
        let e = AvailabilityTrace::load(&p).unwrap_err().to_string();
        assert!(e.contains(name), "{e}");
        e
    }

    #[test]
    fn rejects_bad_rows_with_file_and_line() {
        let e = bad("nonnum.csv", ",ID,start,end\n0,0,1,2\n1,1,abc,2\n");
        assert!(e.contains(":3:") && e.contains("start"), "{e}");
        let e = bad("backwards.csv", ",ID,start,end\n0,0,5,2\n");
        assert!(e.contains(":2:") && e.contains("before start"), "{e}");
        let e = bad("short.csv", ",ID,start,end\n0,0,1,2\n\n1,1,2\n");
        assert!(e.contains(":4:") && e.contains("found 3"), "{e}");
        let e = bad("nohdr.csv", ",ID,begin,end\n0,0,1,2\n");
        assert!(e.contains(":1:") && e.contains("start"), "{e}");
        let e = bad("emptyrows.csv", ",ID,start,end\n");
        assert!(e.contains("no data rows"), "{e}");
    }

    #[test]
    fn block_and_replay_shift_rows() {
        let rows = vec![
            CheckInRow::new(0, 0.0, 10.0),
            CheckInRow::new(1, 432_000.0, 432_100.0),
            CheckInRow::new(2, 432_001.0, 432_002.0), // outside the 5-day block
            CheckInRow::new(3, 100.0, 400.0),
        ];
        let t = AvailabilityTrace::from_rows(rows);
        assert_eq!(t.block(DEFAULT_WINDOW_S).len(), 3);
        let opts = ReplayOptions {
            replicas: 4,
            ..Default::default()
        };
        let it = t.replay(opts);
        assert_eq!(it.len(), 12);
        let all: Vec<ReplayedCheckIn> = it.collect();
        assert_eq!(all.len(), 12);
        for w in all.windows(2) {
            assert!(w[0].start_s <= w[1].start_s);
        }
        for c in &all {
            let base = t.rows()[c.base_index as usize];
            let shift = f64::from(c.replica) * 432_000.0;
            assert_eq!(c.start_s, base.start + shift);
            assert_eq!(c.online_until_s, base.end() + 80.0 + shift);
            assert_eq!(
                c.client_id,
                u64::from(c.base_index) * 4 + u64::from(c.replica)
            );
        }
        let ids: std::collections::HashSet<u64> = all.iter().map(|c| c.client_id).collect();
        assert_eq!(ids.len(), 12);
        assert_eq!(all[11].start_s, 432_000.0 * 4.0);
        assert_eq!(
            t.replay(ReplayOptions {
                replicas: 0,
                ..opts
            })
            .count(),
            0
        );
    }

    #[test]
    fn fedscale_json_round_trip() {
        let json = r#"{"3": {"duration": 10, "inactive": [20, 300.5], "finish_time": 604800,
                        "active": [10, 200], "model": "x"},
                      "1": {"duration": 5, "inactive": [15], "finish_time": 604800,
                        "active": [5], "model": "y"}}"#;
        let p = fixture("fs.json", json);
        let t = AvailabilityTrace::load(&p).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.rows()[0], CheckInRow::new(1, 5.0, 15.0));
        assert_eq!(t.rows()[2].end(), 300.5);
        let mut buf = Vec::new();
        t.write_fedscale_json(&mut buf, 604_800.0).unwrap();
        let p2 = fixture_bytes("fs2.json", &buf);
        assert_eq!(AvailabilityTrace::load(&p2).unwrap(), t);
        // And through the Venn CSV form.
        let mut csv = Vec::new();
        t.write_venn_csv(&mut csv).unwrap();
        let p3 = fixture_bytes("fs3.csv", &csv);
        assert_eq!(AvailabilityTrace::load(&p3).unwrap(), t);
    }

    #[test]
    fn fedscale_json_errors() {
        let p = fixture(
            "fsbad.json",
            "{\"1\": {\"active\": [1,\n \"x\"], \"inactive\": [2, 3]}}",
        );
        let e = AvailabilityTrace::load(&p).unwrap_err().to_string();
        assert!(e.contains("fsbad.json:2:"), "{e}");
        let p = fixture(
            "fsbad2.json",
            r#"{"4": {"active": [1, 5], "inactive": [2]}}"#,
        );
        let e = AvailabilityTrace::load(&p).unwrap_err().to_string();
        assert!(e.contains("fsbad2.json") && e.contains("client 4"), "{e}");
        let p = fixture("fsbad3.json", r#"{"4": {"active": [9], "inactive": [2]}}"#);
        let e = AvailabilityTrace::load(&p).unwrap_err().to_string();
        assert!(e.contains("client 4"), "{e}");
    }
}
