//! What a device offers ([`DeviceProfile`]) and what a job asks for ([`Requirement`]).
//!
//! Jobs with equal requirements form one job group; the set of groups that admit a
//! device is its cell of the Venn diagram of eligible sets.

use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher};

/// Reference compute speed (ms per sample) of the FedScale trace; a device at this speed
/// takes exactly a job's nominal compute time.
pub const REFERENCE_MS_PER_SAMPLE: f64 = 78.0;
/// Reference bandwidth (kbit/s) of the FedScale trace; a device at this bandwidth takes
/// exactly a job's nominal communication time.
pub const REFERENCE_KBPS: f64 = 13736.0;

/// The attributes of a device that jobs may require, as reported at check-in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceProfile {
    /// CPU benchmark score (AI-Benchmark `CPU-F`); larger is better.
    pub cpu_score: f64,
    /// Memory benchmark score (AI-Benchmark `FP16 Memory`); larger is better.
    pub mem_score: f64,
    /// Operating-system version (e.g. Android major version).
    pub os_version: f64,
    /// Compute speed in milliseconds per training sample; smaller is faster.
    pub ms_per_sample: f64,
    /// Network bandwidth in kbit/s; larger is faster.
    pub bandwidth_kbps: f64,
    /// Free-form tags (e.g. `"wifi"`, `"charging"`, a locale); kept sorted by the driver
    /// or not — matching does not depend on order.
    #[serde(default)]
    pub tags: Vec<String>,
}

impl DeviceProfile {
    /// A profile with the given benchmark scores and reference speeds, and no tags.
    pub fn new(cpu_score: f64, mem_score: f64, os_version: f64) -> Self {
        DeviceProfile {
            cpu_score,
            mem_score,
            os_version,
            ms_per_sample: REFERENCE_MS_PER_SAMPLE,
            bandwidth_kbps: REFERENCE_KBPS,
            tags: Vec::new(),
        }
    }

    /// Sets the compute and network speeds.
    pub fn with_speed(mut self, ms_per_sample: f64, bandwidth_kbps: f64) -> Self {
        self.ms_per_sample = ms_per_sample;
        self.bandwidth_kbps = bandwidth_kbps;
        self
    }

    /// Adds a tag.
    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Expected duration of a task of the given nominal cost on this device:
    /// `compute × ms_per_sample / 78 + comm × 13736 / kbit/s` (the FedScale/Venn model).
    pub fn task_seconds(&self, cost: TaskCost) -> f64 {
        cost.compute_s * (self.ms_per_sample / REFERENCE_MS_PER_SAMPLE)
            + cost.comm_s * (REFERENCE_KBPS / self.bandwidth_kbps.max(1e-9))
    }

    pub(crate) fn hash_key<H: Hasher>(&self, h: &mut H) {
        for v in [
            self.cpu_score,
            self.mem_score,
            self.os_version,
            self.ms_per_sample,
            self.bandwidth_kbps,
        ] {
            canonical_bits(v).hash(h);
        }
        self.tags.hash(h);
    }

    pub(crate) fn same_key(&self, other: &DeviceProfile) -> bool {
        canonical_bits(self.cpu_score) == canonical_bits(other.cpu_score)
            && canonical_bits(self.mem_score) == canonical_bits(other.mem_score)
            && canonical_bits(self.os_version) == canonical_bits(other.os_version)
            && canonical_bits(self.ms_per_sample) == canonical_bits(other.ms_per_sample)
            && canonical_bits(self.bandwidth_kbps) == canonical_bits(other.bandwidth_kbps)
            && self.tags == other.tags
    }
}

/// The nominal cost of one task at the reference device, used to rank devices by how fast
/// they would serve a job (tier matching) and by the simulator to time tasks.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskCost {
    /// Seconds of local computation on the reference device.
    pub compute_s: f64,
    /// Seconds of model transfer on the reference link.
    pub comm_s: f64,
}

impl Default for TaskCost {
    /// The Venn job traces' workload: 30 s of compute and 10 s of transfer.
    fn default() -> Self {
        TaskCost {
            compute_s: 30.0,
            comm_s: 10.0,
        }
    }
}

/// The work one task of a job does, from which its time on any device follows: FedScale's
/// model (`fedscale/cloud/internal/client_metadata.py`), computation = 3 × samples trained ×
/// the device's traced ms per sample, communication = the model's bits down and up over the
/// device's bandwidth — with the model's own cost per sample, so that a job of a larger
/// model, or a device holding more samples, takes longer.
///
/// The capacity trace's `computation_ms_per_sample` is an inference latency; the Venn
/// authors' testbed reads it as the latency of its reference profile, MobileNet-V2 on
/// FEMNIST, and FedScale counts a training sample as 3 inferences (backward ≈ 2 × forward).
/// A job states its model's cost relative to that reference in
/// [`TaskWork::ref_ms_per_sample`]: the training time per sample on the reference device
/// (78 ms/sample), `3 × 78 × forward cost of the model / forward cost of the reference`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskWork {
    /// Passes over the device's local samples (local epochs).
    pub epochs: f64,
    /// Milliseconds of training per sample on the reference device (78 ms/sample).
    pub ref_ms_per_sample: f64,
    /// Bytes of the model, downloaded once and uploaded once per task.
    pub model_bytes: f64,
    /// At most this many samples are trained (a cap on local steps × batch), if set.
    #[serde(default)]
    pub max_samples: Option<f64>,
}

impl TaskWork {
    /// The nominal (reference-device) cost of a task on `local_samples` samples, which
    /// [`DeviceProfile::task_seconds`] scales to a device: `local_samples × epochs` (at most
    /// `max_samples`) `× ref_ms_per_sample / 1000` s of computation and `2 × model_bytes × 8 / 1000 / 13736`
    /// s of transfer.
    pub fn cost(&self, local_samples: u64) -> TaskCost {
        let trained = local_samples as f64 * self.epochs;
        let trained = self.max_samples.map_or(trained, |m| trained.min(m));
        TaskCost {
            compute_s: trained * self.ref_ms_per_sample / 1000.0,
            comm_s: 2.0 * self.model_bytes * 8.0 / 1000.0 / REFERENCE_KBPS,
        }
    }

    /// The first field that makes this work unusable, if any.
    pub fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        for (name, v) in [
            ("epochs", self.epochs),
            ("ref_ms_per_sample", self.ref_ms_per_sample),
            ("model_bytes", self.model_bytes),
            ("max_samples", self.max_samples.unwrap_or(0.0)),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err((name, "must be a finite number at least 0"));
            }
        }
        Ok(())
    }
}

/// Minimum thresholds a device must meet, plus tags it must carry.
///
/// Two jobs whose requirements are equal (bit-for-bit thresholds and the same tag set)
/// belong to the same job group.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Requirement {
    /// Minimum CPU score.
    #[serde(default)]
    pub min_cpu_score: f64,
    /// Minimum memory score.
    #[serde(default)]
    pub min_mem_score: f64,
    /// Minimum OS version.
    #[serde(default)]
    pub min_os_version: f64,
    /// Slowest acceptable compute speed in ms per sample (`None`: any).
    #[serde(default)]
    pub max_ms_per_sample: Option<f64>,
    /// Minimum bandwidth in kbit/s.
    #[serde(default)]
    pub min_bandwidth_kbps: f64,
    /// Tags the device must carry (all of them).
    #[serde(default)]
    pub tags: Vec<String>,
}

impl Requirement {
    /// The requirement every device meets.
    pub fn any() -> Self {
        Requirement::default()
    }

    /// A requirement on the three benchmark scores.
    pub fn scores(min_cpu_score: f64, min_mem_score: f64, min_os_version: f64) -> Self {
        Requirement {
            min_cpu_score,
            min_mem_score,
            min_os_version,
            ..Requirement::default()
        }
    }

    /// Adds a required tag.
    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self.normalize();
        self
    }

    /// Whether the device is eligible.
    pub fn admits(&self, d: &DeviceProfile) -> bool {
        self.admits_numbers(d) && self.tags.iter().all(|t| d.tags.iter().any(|x| x == t))
    }

    /// [`Requirement::admits`] without the tags: the numeric bounds only.
    pub(crate) fn admits_numbers(&self, d: &DeviceProfile) -> bool {
        d.cpu_score >= self.min_cpu_score
            && d.mem_score >= self.min_mem_score
            && d.os_version >= self.min_os_version
            && d.bandwidth_kbps >= self.min_bandwidth_kbps
            && self.max_ms_per_sample.is_none_or(|m| d.ms_per_sample <= m)
    }

    /// Sorts and deduplicates the tags so that equal sets compare equal.
    pub fn normalize(&mut self) {
        self.tags.sort();
        self.tags.dedup();
    }

    /// The first field that makes this requirement unusable, if any.
    pub fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        let finite = [
            ("min_cpu_score", self.min_cpu_score),
            ("min_mem_score", self.min_mem_score),
            ("min_os_version", self.min_os_version),
            ("min_bandwidth_kbps", self.min_bandwidth_kbps),
        ];
        for (name, v) in finite {
            if !v.is_finite() {
                return Err((name, "must be a finite number"));
            }
        }
        if let Some(m) = self.max_ms_per_sample
            && !(m.is_finite() && m > 0.0)
        {
            return Err(("max_ms_per_sample", "must be a positive finite number"));
        }
        Ok(())
    }
}

fn canonical_bits(v: f64) -> u64 {
    // -0.0 and 0.0 must be one group; NaN is rejected by validation before it gets here.
    if v == 0.0 { 0 } else { v.to_bits() }
}

impl PartialEq for Requirement {
    fn eq(&self, o: &Self) -> bool {
        canonical_bits(self.min_cpu_score) == canonical_bits(o.min_cpu_score)
            && canonical_bits(self.min_mem_score) == canonical_bits(o.min_mem_score)
            && canonical_bits(self.min_os_version) == canonical_bits(o.min_os_version)
            && self.max_ms_per_sample.map(canonical_bits) == o.max_ms_per_sample.map(canonical_bits)
            && canonical_bits(self.min_bandwidth_kbps) == canonical_bits(o.min_bandwidth_kbps)
            && self.tags == o.tags
    }
}

impl Eq for Requirement {}

impl Hash for Requirement {
    fn hash<H: Hasher>(&self, h: &mut H) {
        canonical_bits(self.min_cpu_score).hash(h);
        canonical_bits(self.min_mem_score).hash(h);
        canonical_bits(self.min_os_version).hash(h);
        self.max_ms_per_sample.map(canonical_bits).hash(h);
        canonical_bits(self.min_bandwidth_kbps).hash(h);
        self.tags.hash(h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_checks_every_threshold_and_tag() {
        let d = DeviceProfile::new(7.0, 1000.0, 10.0)
            .with_speed(50.0, 20000.0)
            .with_tag("wifi");
        assert!(Requirement::scores(7.0, 1000.0, 6.0).admits(&d));
        assert!(!Requirement::scores(8.0, 0.0, 0.0).admits(&d));
        assert!(!Requirement::scores(0.0, 1001.0, 0.0).admits(&d));
        assert!(!Requirement::scores(0.0, 0.0, 11.0).admits(&d));
        assert!(Requirement::any().with_tag("wifi").admits(&d));
        assert!(!Requirement::any().with_tag("charging").admits(&d));
        let mut r = Requirement::any();
        r.max_ms_per_sample = Some(40.0);
        assert!(!r.admits(&d));
        r.max_ms_per_sample = Some(60.0);
        assert!(r.admits(&d));
        r.min_bandwidth_kbps = 30000.0;
        assert!(!r.admits(&d));
    }

    #[test]
    fn equal_requirements_compare_equal_regardless_of_tag_order() {
        let a = Requirement::any().with_tag("b").with_tag("a");
        let b = Requirement::any().with_tag("a").with_tag("b");
        assert_eq!(a, b);
        assert_eq!(Requirement::scores(-0.0, 0.0, 0.0), Requirement::any());
        assert_ne!(Requirement::scores(1.0, 0.0, 0.0), Requirement::any());
    }

    #[test]
    fn task_work_times_samples_model_and_bytes() {
        let work = TaskWork {
            epochs: 2.0,
            ref_ms_per_sample: 3.0 * REFERENCE_MS_PER_SAMPLE * 0.1,
            model_bytes: 1_000_000.0,
            max_samples: None,
        };
        // A device half as fast as the reference with a quarter of its bandwidth.
        let d = DeviceProfile::new(0.0, 0.0, 0.0).with_speed(156.0, REFERENCE_KBPS / 4.0);
        let t = d.task_seconds(work.cost(150));
        // FedScale: 3 × samples × ms/sample (× the model's relative cost) + kbit / kbps.
        let compute = 3.0 * 150.0 * 2.0 * 156.0 * 0.1 / 1000.0;
        let comm = 2.0 * 8_000.0 / (REFERENCE_KBPS / 4.0);
        assert!(
            (t - (compute + comm)).abs() < 1e-9,
            "{t} vs {}",
            compute + comm
        );
        // Twice the samples, twice the computation; the transfer stays.
        let t2 = d.task_seconds(work.cost(300));
        assert!((t2 - (2.0 * compute + comm)).abs() < 1e-9);
        // A cap on the samples trained (local steps) caps the computation.
        let capped = TaskWork {
            max_samples: Some(150.0),
            ..work
        };
        let t3 = d.task_seconds(capped.cost(300));
        assert!((t3 - (compute / 2.0 + comm)).abs() < 1e-9);
        assert!(work.validate().is_ok());
        let bad = TaskWork {
            epochs: f64::NAN,
            ..work
        };
        assert_eq!(bad.validate().unwrap_err().0, "epochs");
    }

    #[test]
    fn task_time_follows_the_fedscale_model() {
        let d = DeviceProfile::new(0.0, 0.0, 0.0).with_speed(156.0, 6868.0);
        let t = d.task_seconds(TaskCost::default());
        assert!((t - (30.0 * 2.0 + 10.0 * 2.0)).abs() < 1e-9);
    }
}
