//! The `venn-sim` binary end to end on a tiny trace and job file (using the
//! device tables found by the usual lookup: shared, or built in).

use std::path::{Path, PathBuf};
use std::process::Command;

use venn_traces::locate_traces;

fn setup(name: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let traces = locate_traces(None).unwrap().path;
    let dir = std::env::temp_dir().join(format!("venn-sim-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 3000 check-ins over 2 days, sessions 100-700 s.
    let mut trace = String::from(",ID,start,end\n");
    for i in 0..3000u32 {
        let t = f64::from(i) * 57.0;
        let end = t + 100.0 + f64::from((i * 131) % 600);
        trace.push_str(&format!("{i},{i},{t},{end}\n"));
    }
    let trace_path = dir.join("trace.csv");
    std::fs::write(&trace_path, trace).unwrap();
    let jobs = "job_idx,arrival_s,config_id,participants_per_round,total_rounds,round_deadline_s,workload_s,comm_s,min_response_fraction,eligibility_spec,spec_name\n\
        0,100,1,5,4,600,30,10,0.8,1,General\n\
        1,200,2,3,6,600,30,10,0.8,2,Compute-Rich\n\
        2,300,3,4,3,600,30,10,0.8,3,Memory-Rich\n";
    let jobs_path = dir.join("jobs.csv");
    std::fs::write(&jobs_path, jobs).unwrap();
    Some((traces, trace_path, jobs_path))
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_venn-sim"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn run_writes_csv_summary_and_table() {
    let Some((traces, trace, jobs)) = setup("run") else {
        return;
    };
    let out = trace.parent().unwrap().join("out");
    let o = bin()
        .args([
            "run",
            "--policy",
            "venn",
            "--replicas",
            "1",
            "--workload",
            s(&jobs),
        ])
        .args([
            "--trace",
            s(&trace),
            "--traces-dir",
            s(&traces),
            "--out",
            s(&out),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert!(stdout.contains("avg JCT"), "{stdout}");
    let csv = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    assert!(csv.starts_with("job_idx,"));
    assert_eq!(csv.lines().count(), 4);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["jobs"], 3);
    assert_eq!(summary["finished"], 3);
}

#[test]
fn table1_json_has_workload_policy_speedups() {
    let Some((traces, trace, jobs)) = setup("t1") else {
        return;
    };
    let o = bin()
        .args([
            "table1",
            "--json",
            "--seeds",
            "2",
            "--replicas",
            "1",
            "--workloads",
            s(&jobs),
        ])
        .args(["--trace", s(&trace), "--traces-dir", s(&traces)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &v[s(&jobs)];
    for p in ["fifo", "srsf", "venn"] {
        assert!(row[p].as_f64().unwrap() > 0.0, "{v}");
    }
}
