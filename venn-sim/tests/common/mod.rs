//! Fixtures shared by the engine tests: a miniature device catalog with the shipped
//! eligibility mix, a steady check-in stream and job rows.
#![allow(dead_code)]

use venn_traces::{
    AvailabilityTrace, CapacityTable, CheckInRow, DeviceCapacity, DeviceCatalog, EligibilityTable,
    JobRow, Spec, SpecMask, SpecTable,
};

pub fn catalog() -> DeviceCatalog {
    let spec = |id: u8, name: &str, mem: f64, cpu: f64| Spec {
        id,
        name: name.into(),
        min_fp16_memory: mem,
        min_cpu_f: cpu,
        min_android_os: 6.0,
    };
    // The shipped eligibility mix in miniature: {1,2,3,4} 8, {1} 6, {1,3} 3, {1,2} 2, {} 1.
    let mut masks = Vec::new();
    for (m, k) in [(0b1111u8, 8), (0b0001, 6), (0b0101, 3), (0b0011, 2), (0, 1)] {
        masks.extend(std::iter::repeat_n(SpecMask(m), k));
    }
    // Interleave so consecutive check-ins differ.
    let masks: Vec<SpecMask> = (0..masks.len())
        .map(|i| masks[(i * 7) % masks.len()])
        .collect();
    DeviceCatalog {
        capacity: CapacityTable::from_rows(
            (0..17)
                .map(|i| DeviceCapacity {
                    client_id: i + 1,
                    ms_per_sample: 40.0 + 10.0 * f64::from(i % 9),
                    bandwidth_kbps: 5_000.0 + 2_000.0 * f64::from(i % 7),
                })
                .collect(),
        ),
        eligibility: EligibilityTable::from_masks(masks),
        specs: SpecTable::from_specs(vec![
            spec(1, "General", 10.0, 1.0),
            spec(2, "Compute-Rich", 10.0, 7.0),
            spec(3, "Memory-Rich", 1000.0, 1.0),
            spec(4, "High-Performance", 1000.0, 7.0),
        ]),
    }
}

/// One check-in every `gap` seconds for `span` seconds, sessions of 200–600 s.
pub fn trace(gap: f64, span: f64) -> AvailabilityTrace {
    let n = (span / gap) as u32;
    AvailabilityTrace::from_rows(
        (0..n)
            .map(|i| {
                let t = f64::from(i) * gap;
                CheckInRow::new(i, t, t + 200.0 + f64::from((i * 37) % 400))
            })
            .collect(),
    )
}

pub fn job(idx: u32, arrival: f64, spec: u8, demand: u32, rounds: u32) -> JobRow {
    JobRow {
        idx,
        arrival_s: arrival,
        config_id: 1,
        demand,
        rounds,
        deadline_s: 600.0,
        workload_s: 30.0,
        comm_s: 10.0,
        min_response_fraction: 0.8,
        spec_id: spec,
        spec_name: String::new(),
    }
}
