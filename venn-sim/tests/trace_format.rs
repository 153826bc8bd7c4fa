//! The "add a trace format" recipe, end to end: a format defined here (device, start hour,
//! hours online), registered beside the built-ins, read with `FILE:LINE` errors from the
//! shared line readers, and replayed by the simulator.

use std::path::{Path, PathBuf};
use venn_sim::engine::{SimConfig, SimInput, run};
use venn_traces::lines::for_each_record;
use venn_traces::{
    CapacityTable, CheckInRow, DeviceCapacity, DeviceCatalog, EligibilityTable, InputError, JobRow,
    Spec, SpecMask, SpecTable, TraceFormat, TraceFormats,
};

/// `*.hours.csv`: `device,start_h,hours` with a header, times in hours.
struct HoursCsv;

impl TraceFormat for HoursCsv {
    fn name(&self) -> &str {
        "hours-csv"
    }
    fn matches(&self, path: &Path) -> bool {
        venn_traces::formats::base_name(path).ends_with(".hours.csv")
    }
    fn load(&self, path: &Path) -> Result<Vec<CheckInRow>, InputError> {
        let mut rows = Vec::new();
        for_each_record(path, ["device", "start_h", "hours"], |at, [d, s, h]| {
            let hours = at.f64("hours", h)?;
            if hours <= 0.0 {
                return Err(at.err("column `hours` must be positive"));
            }
            let start = at.f64("start_h", s)? * 3600.0;
            rows.push(CheckInRow::new(
                at.u32("device", d)?,
                start,
                start + hours * 3600.0,
            ));
            Ok(())
        })?;
        Ok(rows)
    }
}

fn write(name: &str, body: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("venn-trace-format-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn formats() -> TraceFormats {
    let mut f = TraceFormats::builtin();
    f.register(HoursCsv);
    f
}

#[test]
fn a_registered_format_reads_its_files_and_leaves_the_others_alone() {
    let f = formats();
    assert_eq!(f.names(), ["hours-csv", "fedscale-json", "venn-csv"]);
    let p = write("two.hours.csv", "device,start_h,hours\n0,0,1\n1,0.5,2\n");
    let trace = f.load(&p).unwrap();
    let rows: Vec<_> = trace
        .rows()
        .iter()
        .map(|r| (r.device, r.start, r.end()))
        .collect();
    assert_eq!(rows, [(0, 0.0, 3600.0), (1, 1800.0, 9000.0)]);
    // A plain CSV still goes to the Venn reader.
    let v = write("venn.csv", "ID,start,end\n3,10,20\n");
    assert_eq!(f.format_for(&v).unwrap().name(), "venn-csv");
    assert_eq!(f.load(&v).unwrap().rows()[0].device, 3);
}

#[test]
fn a_bad_line_of_a_custom_format_names_file_and_line() {
    let p = write("bad.hours.csv", "device,start_h,hours\n0,0,1\n1,0,-2\n");
    let e = formats().load(&p).unwrap_err().to_string();
    assert!(e.contains("bad.hours.csv:3:"), "{e}");
    assert!(e.contains("hours"), "{e}");
    let p = write("empty.hours.csv", "device,start_h,hours\n");
    let e = formats().load(&p).unwrap_err().to_string();
    assert!(e.contains("no check-ins (hours-csv format)"), "{e}");
}

#[test]
fn the_simulator_replays_a_trace_in_a_custom_format() {
    // Four devices online for an hour each, one job of 2 rounds × 2 devices.
    let p = write(
        "sim.hours.csv",
        "device,start_h,hours\n0,0,1\n1,0,1\n2,0.02,1\n3,0.02,1\n",
    );
    let trace = formats().load(&p).unwrap();
    let catalog = DeviceCatalog {
        capacity: CapacityTable::from_rows(
            (0..4)
                .map(|i| DeviceCapacity {
                    client_id: i + 1,
                    ms_per_sample: 78.0,
                    bandwidth_kbps: 13_736.0,
                })
                .collect(),
        ),
        eligibility: EligibilityTable::from_masks(vec![SpecMask(0b1); 4]),
        specs: SpecTable::from_specs(vec![Spec {
            id: 1,
            name: "General".into(),
            min_fp16_memory: 0.0,
            min_cpu_f: 0.0,
            min_android_os: 0.0,
        }]),
    };
    let job = JobRow {
        idx: 0,
        arrival_s: 0.0,
        config_id: 1,
        demand: 2,
        rounds: 1,
        deadline_s: 600.0,
        workload_s: 30.0,
        comm_s: 10.0,
        min_response_fraction: 1.0,
        spec_id: 1,
        spec_name: "General".into(),
    };
    let input = SimInput::new(trace, &catalog, &[job], Some(1), 1.0).unwrap();
    let cfg = SimConfig {
        grace_s: 0.0,
        window_s: 7200.0,
        dispatch_jitter_s: 0.0,
        ..SimConfig::default()
    };
    let r = run(&input, &cfg).unwrap();
    // The two devices online at t = 0 take the job's round (40 s of work each); the job
    // is done at 40 s, before the other two check in at 72 s, and the run ends with it.
    assert_eq!(
        (r.summary.finished, r.summary.check_ins),
        (1, 2),
        "{:?}",
        r.summary
    );
    assert_eq!(r.jobs[0].finish_s, Some(40.0), "{:?}", r.jobs[0]);
}
