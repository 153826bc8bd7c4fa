//! Instance builders shared by the integration tests.
#![allow(dead_code)]

use venn_core::optimal::{Instance, InstanceDevice, InstanceJob};
use venn_core::{DeviceProfile, Requirement, SeededRng};

/// A device with the given memory score (the tests' eligibility attribute).
pub fn mem_device(t: f64, mem: f64) -> InstanceDevice {
    InstanceDevice {
        time: t,
        profile: DeviceProfile::new(1.0, mem, 1.0),
    }
}

/// Needs memory ≥ `mem`.
pub fn needs_mem(mem: f64) -> Requirement {
    Requirement::scores(0.0, mem, 0.0)
}

/// One check-in per second; device i is "big" (mem 2) for an evenly spread fraction `x`.
pub fn nested_stream(n: usize, x: f64) -> Vec<InstanceDevice> {
    (0..n)
        .map(|i| {
            let big = ((i + 1) as f64 * x).floor() > (i as f64 * x).floor();
            mem_device(1.0 + i as f64, if big { 2.0 } else { 1.0 })
        })
        .collect()
}

/// A random small instance: devices carry a random subset of `kinds` tags, each job
/// requires one or two tags, arrivals are spread over the first part of the horizon.
pub fn random_instance(rng: &mut SeededRng) -> Instance {
    let kinds = 3;
    let n_jobs = 2 + rng.below(3) as usize;
    let n_dev = 24 + rng.below(16) as usize;
    let tag_p: Vec<f64> = (0..kinds).map(|_| 0.3 + 0.6 * rng.f64()).collect();
    let devices = (0..n_dev)
        .map(|i| {
            let mut p = DeviceProfile::new(1.0, 1.0, 1.0);
            for (k, pk) in tag_p.iter().enumerate() {
                if rng.f64() < *pk {
                    p.tags.push(format!("t{k}"));
                }
            }
            InstanceDevice {
                time: 1.0 + i as f64,
                profile: p,
            }
        })
        .collect();
    let jobs = (0..n_jobs)
        .map(|_| {
            let mut r = Requirement::any();
            if rng.f64() < 0.8 {
                r = r.with_tag(format!("t{}", rng.below(kinds)));
            }
            if rng.f64() < 0.2 {
                r = r.with_tag(format!("t{}", rng.below(kinds)));
            }
            InstanceJob {
                arrival: if rng.f64() < 0.5 {
                    0.0
                } else {
                    rng.below(8) as f64
                },
                demand: 1 + rng.below(5) as u32,
                requirement: r,
            }
        })
        .collect();
    Instance { jobs, devices }
}
