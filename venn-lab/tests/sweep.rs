//! The in-pod steps of `venn-lab k8s sweep`, run here as processes: each index writes the
//! folder a local `--seeds` run gives it, an index whose results are there is not run again
//! (a sweep applied again resumes), and the gather refuses to summarise before every index
//! is done, naming the first one missing. `tests/podman.rs` runs the whole sweep in pods.

use std::path::Path;
use std::process::{Command, Output};

use venn_lab::sweep::{SweepConfig, SweepPlan};

fn venn_lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_venn-lab"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn indices_resume_and_the_gather_waits_for_every_one() {
    let dir = std::env::temp_dir().join(format!("venn-sweep-steps-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("plan")).unwrap();
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/experiments/virtual-quick.toml");
    std::fs::copy(&config, dir.join("plan/quick.toml")).unwrap();
    let configs = vec![SweepConfig {
        name: "virtual-quick".into(),
        file: "quick.toml".into(),
    }];
    let plan = SweepPlan::new(configs, vec!["random".into(), "venn".into()], 2, true).unwrap();
    let plan_file = dir.join("plan/plan.json");
    std::fs::write(&plan_file, serde_json::to_string(&plan).unwrap()).unwrap();
    let (p, results) = (plan_file.display().to_string(), dir.join("results"));
    let r = results.display().to_string();
    let index = |i: usize| {
        venn_lab(&[
            "sweep-index",
            "--plan",
            &p,
            "--results",
            &r,
            "--index",
            &i.to_string(),
        ])
    };

    for i in 0..3 {
        let out = index(i);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let first = results.join("virtual-quick/seed-0/random/summary.json");
    let written = std::fs::metadata(&first).unwrap().modified().unwrap();
    let again = index(0);
    assert!(String::from_utf8_lossy(&again.stdout).contains("done already"));
    assert_eq!(
        std::fs::metadata(&first).unwrap().modified().unwrap(),
        written,
        "not rewritten"
    );

    // Index 3 (seed 1, venn) is missing: the gather names it rather than summarising.
    let gather = [
        "sweep-gather",
        "--plan",
        &p,
        "--results",
        &r,
        "--wait-s",
        "0",
    ];
    let early = venn_lab(&gather);
    assert!(!early.status.success());
    let why = String::from_utf8_lossy(&early.stderr);
    assert!(
        why.contains("1 of 4 runs") && why.contains("seed-1/venn"),
        "{why}"
    );

    assert!(index(3).status.success());
    let done = venn_lab(&gather);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    for f in [
        "compare.txt",
        "compare-seeds.csv",
        "summary.json",
        "seed-1/compare.txt",
    ] {
        assert!(
            results.join("virtual-quick").join(f).is_file(),
            "{f} written"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
