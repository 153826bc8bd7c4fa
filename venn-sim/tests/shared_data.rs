//! Loaders against the trace tables (the shared copy, or the one built in: the same
//! bytes), checked against the counts their README documents.

use std::collections::BTreeMap;
use std::path::PathBuf;

use venn_traces::jobs::{CATALOG_FILE, WORKLOAD_CONFIGS_FILE, WORKLOAD_NAMES};
use venn_traces::{
    DeviceCatalog, JobCatalog, JobGenOptions, JobTrace, SpecMask, WorkloadConfigs, generate_jobs,
    locate_traces, resolve_workload,
};

fn traces() -> Option<PathBuf> {
    // The tables are always found: at worst the copy built into the program.
    Some(locate_traces(None).unwrap().path)
}

#[test]
fn device_tables_have_documented_counts() {
    let Some(dir) = traces() else { return };
    let cat = DeviceCatalog::load(&dir).unwrap();
    assert_eq!(cat.capacity.len(), 992);
    assert_eq!(cat.eligibility.len(), 959);
    assert_eq!(cat.specs.len(), 4);
    let mut by_set: BTreeMap<String, usize> = BTreeMap::new();
    for m in cat.eligibility.masks() {
        *by_set.entry(m.to_string()).or_default() += 1;
    }
    let want: BTreeMap<String, usize> = [
        ("{1,2,3,4}", 417),
        ("{1}", 305),
        ("{1,3}", 124),
        ("{1,2}", 78),
        ("{}", 35),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(by_set, want);
    let by_spec: Vec<usize> = (1..=4)
        .map(|s| {
            cat.eligibility
                .masks()
                .iter()
                .filter(|m| m.contains(s))
                .count()
        })
        .collect();
    assert_eq!(by_spec, vec![924, 495, 541, 417]);
    let mean_ms = cat
        .capacity
        .rows()
        .iter()
        .map(|r| r.ms_per_sample)
        .sum::<f64>()
        / 992.0;
    assert!((mean_ms - 78.5).abs() < 0.1, "{mean_ms}");
    // Check-in 992 wraps to key 1; check-in 959 wraps to eligibility row 0.
    assert_eq!(cat.capacity.for_checkin(992).client_id, 1);
    assert_eq!(cat.profile(959).eligible, cat.profile(0).eligible);
    assert_eq!(cat.profile(2).eligible, SpecMask(0b1111));
    // Every set the trace uses has a hardware profile meeting exactly it.
    for m in cat.eligibility.masks() {
        let hw = cat.specs.hardware_for(*m).unwrap();
        assert_eq!(cat.specs.eligible(&hw), *m);
    }
}

#[test]
fn shipped_job_traces_load() {
    let Some(dir) = traces() else { return };
    let cat = DeviceCatalog::load(&dir).unwrap();
    for name in WORKLOAD_NAMES {
        let t =
            JobTrace::load_with_specs(&resolve_workload(name, &dir).unwrap(), &cat.specs).unwrap();
        assert_eq!(t.len(), 50, "{name}");
        assert_eq!(t.jobs[0].arrival_s, 3600.0, "{name}");
        for (i, j) in t.jobs.iter().enumerate() {
            assert_eq!(j.idx as usize, i);
            assert_eq!(usize::from(j.spec_id), i % 4 + 1);
            assert_eq!(cat.specs.get(j.spec_id).unwrap().name, j.spec_name);
        }
    }
    let even = JobTrace::load(&resolve_workload("even", &dir).unwrap()).unwrap();
    assert_eq!((even.jobs[0].config_id, even.jobs[0].demand), (6, 100));
}

#[test]
fn generator_uses_shipped_catalog_and_configs() {
    let Some(dir) = traces() else { return };
    let cat = DeviceCatalog::load(&dir).unwrap();
    let catalog = JobCatalog::load(&dir.join(CATALOG_FILE)).unwrap();
    assert_eq!(catalog.entries.len(), 33);
    let wls = WorkloadConfigs::load(&dir.join(WORKLOAD_CONFIGS_FILE)).unwrap();
    assert_eq!(wls.configs.len(), 9);
    let even = wls.get("even").unwrap();
    assert_eq!((even.seed, even.num_week), (10, 30));
    assert_eq!(wls.get("mem_heavy").unwrap().emphasised_spec(), Some(3));
    assert_eq!(wls.get("res_intensive").unwrap().emphasised_spec(), Some(4));
    let small = wls.get("small").unwrap();
    let t = generate_jobs(&catalog, small, &cat.specs, &JobGenOptions::default()).unwrap();
    assert_eq!(t.len(), 50);
    for j in &t.jobs {
        assert!(small.job_weights[j.config_id as usize - 1] > 0.0);
    }
    let g = wls.get("general").unwrap();
    let t = generate_jobs(&catalog, g, &cat.specs, &JobGenOptions::default()).unwrap();
    assert_eq!(t.jobs.iter().filter(|j| j.spec_id == 1).count(), 25);
}
