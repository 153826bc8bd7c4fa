//! Per-device hardware: FedScale capacity rows, AI-Benchmark eligibility sets,
//! and the job-requirement specs, with Venn's assignment to check-ins.
//!
//! The authors' simulator gives the `i`-th check-in of the start-sorted 5-day
//! block capacity key `(i mod n_cap) + 1` and eligibility row `i mod n_eli`;
//! every replica of that check-in reuses the same `i`. With the shipped
//! 992-row capacity subset and 959-row eligibility list that is
//! `(i mod 992) + 1` and `i mod 959`.

use std::fmt;
use std::path::Path;

use super::error::InputError;
use super::lines::{empty, for_each_record};

/// File name of the capacity table inside the traces directory.
pub const CAPACITY_FILE: &str = "fedscale_client_device_capacity_first992.csv";
/// File name of the eligibility list inside the traces directory.
pub const ELIGIBILITY_FILE: &str = "aibenchmark_eligibility_4.csv";
/// File name of the spec thresholds inside the traces directory.
pub const SPECS_FILE: &str = "venn_eligibility_specs.csv";
/// Venn's hard-coded mean computation latency (ms/sample) used to normalise.
pub const VENN_AVG_COMP_MS: f64 = 78.0;
/// Venn's hard-coded mean bandwidth (kbit/s) used to normalise.
pub const VENN_AVG_COMM_KBPS: f64 = 13_736.0;
/// Spec ids must fit a `u8` bitmask.
pub const MAX_SPEC_ID: u8 = 8;

/// A set of spec ids `1..=8`; bit `id - 1` is set when the device meets spec `id`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpecMask(pub u8);

impl SpecMask {
    /// The empty set.
    pub const EMPTY: SpecMask = SpecMask(0);

    /// Whether spec `id` is in the set (false for ids outside `1..=8`).
    pub fn contains(self, id: u8) -> bool {
        (1..=MAX_SPEC_ID).contains(&id) && self.0 & (1 << (id - 1)) != 0
    }

    /// The set with spec `id` added. Panics on an id outside `1..=8`.
    pub fn with(self, id: u8) -> SpecMask {
        assert!((1..=MAX_SPEC_ID).contains(&id), "spec id {id} out of range");
        SpecMask(self.0 | (1 << (id - 1)))
    }

    /// Number of specs in the set.
    pub fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// True for the empty set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Spec ids in ascending order.
    pub fn ids(self) -> impl Iterator<Item = u8> {
        (1..=MAX_SPEC_ID).filter(move |&id| self.contains(id))
    }
}

impl fmt::Display for SpecMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<String> = self.ids().map(|i| i.to_string()).collect();
        write!(f, "{{{}}}", ids.join(","))
    }
}

/// One FedScale capacity row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceCapacity {
    /// The FedScale key (1-based).
    pub client_id: u32,
    /// AI-Benchmark inference latency, ms per sample (larger is slower).
    pub ms_per_sample: f64,
    /// MobiPerf WiFi bandwidth, kbit/s (larger is faster).
    pub bandwidth_kbps: f64,
}

/// The capacity table, in key order.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityTable {
    rows: Vec<DeviceCapacity>,
}

impl CapacityTable {
    /// Loads `client_id,computation_ms_per_sample,communication_kbps`; keys must
    /// run 1, 2, 3, ... because Venn looks rows up by key `(i mod n) + 1`.
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let mut rows = Vec::new();
        let names = [
            "client_id",
            "computation_ms_per_sample",
            "communication_kbps",
        ];
        for_each_record(path, names, |at, [id, comp, comm]| {
            let client_id = at.u32("client_id", id)?;
            let expected = rows.len() as u32 + 1;
            if client_id != expected {
                return Err(at.err(format!(
                    "client_id {client_id} out of sequence, expected {expected}"
                )));
            }
            let ms = at.f64("computation_ms_per_sample", comp)?;
            let kbps = at.f64("communication_kbps", comm)?;
            if ms <= 0.0 || kbps <= 0.0 {
                return Err(at.err(format!(
                    "capacity must be positive, got {ms} ms/sample and {kbps} kbit/s"
                )));
            }
            rows.push(DeviceCapacity {
                client_id,
                ms_per_sample: ms,
                bandwidth_kbps: kbps,
            });
            Ok(())
        })?;
        if rows.is_empty() {
            return Err(empty(path));
        }
        Ok(CapacityTable { rows })
    }

    /// Builds a table from rows (for tests and synthetic setups).
    pub fn from_rows(rows: Vec<DeviceCapacity>) -> Self {
        CapacityTable { rows }
    }

    /// All rows in key order.
    pub fn rows(&self) -> &[DeviceCapacity] {
        &self.rows
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when empty (never for a loaded table).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Capacity of the `i`-th check-in: key `(i mod n) + 1`.
    pub fn for_checkin(&self, i: usize) -> DeviceCapacity {
        self.rows[i % self.rows.len()]
    }
}

/// The eligibility list: one spec set per row.
#[derive(Clone, Debug, PartialEq)]
pub struct EligibilityTable {
    masks: Vec<SpecMask>,
}

impl EligibilityTable {
    /// Loads `index,eligible_specs` (space-separated ids, empty for none).
    /// Indices must run 0, 1, 2, ...; ids must lie in `1..=max_spec_id`.
    pub fn load(path: &Path, max_spec_id: u8) -> Result<Self, InputError> {
        let max = max_spec_id.min(MAX_SPEC_ID);
        let mut masks = Vec::new();
        for_each_record(
            path,
            ["index", "eligible_specs"],
            |at, [index, eligible]| {
                let idx = at.u64("index", index)?;
                if idx != masks.len() as u64 {
                    return Err(at.err(format!(
                        "index {idx} out of sequence, expected {}",
                        masks.len()
                    )));
                }
                let mut mask = SpecMask::EMPTY;
                for tok in eligible.split_whitespace() {
                    let id = at.u64("eligible_specs", tok)?;
                    if id < 1 || id > u64::from(max) {
                        return Err(at.err(format!(
                            "column `eligible_specs`: spec id {id} out of range 1..={max}"
                        )));
                    }
                    mask = mask.with(id as u8);
                }
                masks.push(mask);
                Ok(())
            },
        )?;
        if masks.is_empty() {
            return Err(empty(path));
        }
        Ok(EligibilityTable { masks })
    }

    /// Builds a table from masks (for tests and synthetic setups).
    pub fn from_masks(masks: Vec<SpecMask>) -> Self {
        EligibilityTable { masks }
    }

    /// All rows.
    pub fn masks(&self) -> &[SpecMask] {
        &self.masks
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.masks.len()
    }

    /// True when empty (never for a loaded table).
    pub fn is_empty(&self) -> bool {
        self.masks.is_empty()
    }

    /// Eligible specs of the `i`-th check-in: row `i mod n`.
    pub fn for_checkin(&self, i: usize) -> SpecMask {
        self.masks[i % self.masks.len()]
    }
}

/// One job-requirement spec: a device meets it when every value is at or
/// above the threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// 1-based id, also the bit position + 1 in [`SpecMask`].
    pub id: u8,
    /// Human name, e.g. `Compute-Rich`.
    pub name: String,
    /// Minimum AI-Benchmark `FP16 Memory` score.
    pub min_fp16_memory: f64,
    /// Minimum AI-Benchmark `CPU-F Score`.
    pub min_cpu_f: f64,
    /// Minimum Android major version.
    pub min_android_os: f64,
}

/// Hardware values a spec is tested against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hardware {
    /// AI-Benchmark `FP16 Memory` score.
    pub fp16_memory: f64,
    /// AI-Benchmark `CPU-F Score`.
    pub cpu_f: f64,
    /// Android major version.
    pub android_os: f64,
}

/// The spec table, in id order.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecTable {
    specs: Vec<Spec>,
}

impl SpecTable {
    /// Loads `spec_id,spec_name,min_fp16_memory_score,min_cpu_f_score,min_android_os`.
    /// Ids must run 1, 2, ... up to at most 8.
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let mut specs: Vec<Spec> = Vec::new();
        let names = [
            "spec_id",
            "spec_name",
            "min_fp16_memory_score",
            "min_cpu_f_score",
            "min_android_os",
        ];
        for_each_record(path, names, |at, [id_s, name, mem, cpu, os]| {
            let id = at.u64("spec_id", id_s)?;
            let expected = specs.len() as u64 + 1;
            if id != expected || id > u64::from(MAX_SPEC_ID) {
                return Err(at.err(format!(
                    "spec_id {id} out of sequence or range, expected {expected} (at most {MAX_SPEC_ID})"
                )));
            }
            specs.push(Spec {
                id: id as u8,
                name: name.trim().to_string(),
                min_fp16_memory: at.f64("min_fp16_memory_score", mem)?,
                min_cpu_f: at.f64("min_cpu_f_score", cpu)?,
                min_android_os: at.f64("min_android_os", os)?,
            });
            Ok(())
        })?;
        if specs.is_empty() {
            return Err(empty(path));
        }
        Ok(SpecTable { specs })
    }

    /// Builds a table from specs whose ids must be `1..=n`.
    pub fn from_specs(specs: Vec<Spec>) -> Self {
        debug_assert!(
            specs
                .iter()
                .enumerate()
                .all(|(i, s)| s.id as usize == i + 1)
        );
        SpecTable { specs }
    }

    /// All specs in id order.
    pub fn specs(&self) -> &[Spec] {
        &self.specs
    }

    /// Number of specs.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// True when empty (never for a loaded table).
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The spec with id `id`.
    pub fn get(&self, id: u8) -> Option<&Spec> {
        self.specs.get(usize::from(id).checked_sub(1)?)
    }

    /// The set of specs that `hw` meets.
    pub fn eligible(&self, hw: &Hardware) -> SpecMask {
        self.specs
            .iter()
            .filter(|s| {
                hw.fp16_memory >= s.min_fp16_memory
                    && hw.cpu_f >= s.min_cpu_f
                    && hw.android_os >= s.min_android_os
            })
            .fold(SpecMask::EMPTY, |m, s| m.with(s.id))
    }

    /// Hardware values that meet exactly the specs in `mask`, or `None` when
    /// no such combination exists (with threshold specs, only up-closed sets
    /// are reachable). Candidates per dimension are 0 and each threshold; the
    /// smallest matching combination is returned, so the engine gets a
    /// deterministic device profile for every eligibility row.
    pub fn hardware_for(&self, mask: SpecMask) -> Option<Hardware> {
        let cands = |f: fn(&Spec) -> f64| {
            let mut v: Vec<f64> = std::iter::once(0.0)
                .chain(self.specs.iter().map(f))
                .collect();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v
        };
        let mems = cands(|s| s.min_fp16_memory);
        let cpus = cands(|s| s.min_cpu_f);
        let oses = cands(|s| s.min_android_os);
        // OS outermost and descending so non-empty sets get a modern OS rather
        // than failing on it; memory and CPU ascending for the smallest match.
        for &os in oses.iter().rev() {
            for &mem in &mems {
                for &cpu in &cpus {
                    let hw = Hardware {
                        fp16_memory: mem,
                        cpu_f: cpu,
                        android_os: os,
                    };
                    if self.eligible(&hw) == mask {
                        return Some(hw);
                    }
                }
            }
        }
        None
    }
}

/// What the engine needs to know about the device behind one check-in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceDevice {
    /// Compute latency, ms per sample.
    pub ms_per_sample: f64,
    /// Bandwidth, kbit/s.
    pub bandwidth_kbps: f64,
    /// Specs the device meets.
    pub eligible: SpecMask,
}

impl TraceDevice {
    /// Venn's relative compute slowness, `ms_per_sample / 78`.
    pub fn comp_factor(&self) -> f64 {
        self.ms_per_sample / VENN_AVG_COMP_MS
    }

    /// Venn's relative bandwidth, `kbps / 13736`.
    pub fn comm_factor(&self) -> f64 {
        self.bandwidth_kbps / VENN_AVG_COMM_KBPS
    }
}

/// The three device tables together.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceCatalog {
    /// Capacity rows.
    pub capacity: CapacityTable,
    /// Eligibility rows.
    pub eligibility: EligibilityTable,
    /// Spec thresholds.
    pub specs: SpecTable,
}

impl DeviceCatalog {
    /// Loads the three shipped files from a traces directory.
    pub fn load(traces_dir: &Path) -> Result<Self, InputError> {
        let specs = SpecTable::load(&traces_dir.join(SPECS_FILE))?;
        let eligibility =
            EligibilityTable::load(&traces_dir.join(ELIGIBILITY_FILE), specs.len() as u8)?;
        let capacity = CapacityTable::load(&traces_dir.join(CAPACITY_FILE))?;
        Ok(DeviceCatalog {
            capacity,
            eligibility,
            specs,
        })
    }

    /// Profile of the check-in with block index `base_index`
    /// ([`crate::ReplayedCheckIn::base_index`]).
    pub fn profile(&self, base_index: usize) -> TraceDevice {
        let cap = self.capacity.for_checkin(base_index);
        TraceDevice {
            ms_per_sample: cap.ms_per_sample,
            bandwidth_kbps: cap.bandwidth_kbps,
            eligible: self.eligibility.for_checkin(base_index),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::fixture;

    const SPECS: &str = "spec_id,spec_name,min_fp16_memory_score,min_cpu_f_score,min_android_os\n\
        1,General,10,1,6\n2,Compute-Rich,10,7,6\n3,Memory-Rich,1000,1,6\n4,High-Performance,1000,7,6\n";

    fn specs() -> SpecTable {
        SpecTable::load(&fixture("specs_ok.csv", SPECS)).unwrap()
    }

    #[test]
    fn capacity_loads_and_wraps() {
        let p = fixture(
            "cap_ok.csv",
            "client_id,computation_ms_per_sample,communication_kbps\n1,153.0,2209.6\n2,39,18437.3\n",
        );
        let t = CapacityTable::load(&p).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.for_checkin(3).client_id, 2);
        assert_eq!(t.for_checkin(4).ms_per_sample, 153.0);
    }

    fn err_of<T: std::fmt::Debug>(r: Result<T, InputError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn capacity_rejects_bad_rows() {
        let h = "client_id,computation_ms_per_sample,communication_kbps\n";
        let e = err_of(CapacityTable::load(&fixture(
            "cap_nn.csv",
            &format!("{h}1,x,3\n"),
        )));
        assert!(
            e.contains("cap_nn.csv:2:") && e.contains("computation"),
            "{e}"
        );
        let e = err_of(CapacityTable::load(&fixture(
            "cap_seq.csv",
            &format!("{h}1,1,3\n3,1,3\n"),
        )));
        assert!(
            e.contains("cap_seq.csv:3:") && e.contains("expected 2"),
            "{e}"
        );
        let e = err_of(CapacityTable::load(&fixture(
            "cap_col.csv",
            &format!("{h}1,1\n"),
        )));
        assert!(e.contains("cap_col.csv:2:") && e.contains("found 2"), "{e}");
        let e = err_of(CapacityTable::load(&fixture(
            "cap_hdr.csv",
            "client_id,x\n1,2\n",
        )));
        assert!(e.contains("cap_hdr.csv:1:"), "{e}");
    }

    #[test]
    fn eligibility_loads_and_rejects() {
        let p = fixture("eli_ok.csv", "index,eligible_specs\n0,1\n1,\n2,1 2 3 4\n");
        let t = EligibilityTable::load(&p, 4).unwrap();
        assert_eq!(t.masks(), &[SpecMask(1), SpecMask(0), SpecMask(15)]);
        assert_eq!(t.for_checkin(5), SpecMask(15));
        assert_eq!(SpecMask(15).to_string(), "{1,2,3,4}");
        let e = err_of(EligibilityTable::load(
            &fixture("eli_range.csv", "index,eligible_specs\n0,1\n1,1 5\n"),
            4,
        ));
        assert!(
            e.contains("eli_range.csv:3:") && e.contains("out of range"),
            "{e}"
        );
        let e = err_of(EligibilityTable::load(
            &fixture("eli_miss.csv", "index,eligible_specs\n0\n"),
            4,
        ));
        assert!(e.contains("eli_miss.csv:2:"), "{e}");
        let e = err_of(EligibilityTable::load(
            &fixture("eli_nn.csv", "index,eligible_specs\n0,a\n"),
            4,
        ));
        assert!(e.contains("eli_nn.csv:2:"), "{e}");
    }

    #[test]
    fn specs_load_and_reject() {
        let t = specs();
        assert_eq!(t.len(), 4);
        assert_eq!(t.get(2).unwrap().name, "Compute-Rich");
        assert_eq!(t.get(4).unwrap().min_fp16_memory, 1000.0);
        let e = err_of(SpecTable::load(&fixture(
            "specs_bad.csv",
            "spec_id,spec_name,min_fp16_memory_score,min_cpu_f_score,min_android_os\n1,G,10,x,6\n",
        )));
        assert!(
            e.contains("specs_bad.csv:2:") && e.contains("min_cpu_f_score"),
            "{e}"
        );
        let e = err_of(SpecTable::load(&fixture(
            "specs_id.csv",
            "spec_id,spec_name,min_fp16_memory_score,min_cpu_f_score,min_android_os\n9,G,10,1,6\n",
        )));
        assert!(
            e.contains("specs_id.csv:2:") && e.contains("spec_id 9"),
            "{e}"
        );
    }

    #[test]
    fn hardware_for_meets_exactly_the_mask() {
        let t = specs();
        for bits in 0u8..16 {
            let m = SpecMask(bits);
            match t.hardware_for(m) {
                Some(hw) => assert_eq!(t.eligible(&hw), m),
                None => {
                    // Unreachable sets must not be among the ones the trace uses.
                    assert!(![0u8, 1, 3, 5, 15].contains(&bits), "{m}");
                }
            }
        }
        let hw = t.hardware_for(SpecMask(0b0101)).unwrap();
        assert!(hw.fp16_memory >= 1000.0 && hw.cpu_f < 7.0);
    }
}
