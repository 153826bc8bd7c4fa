//! `femnist stats` on the shared FEMNIST copy (skipped, with a printed reason, without it).

use std::path::PathBuf;

fn shared() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/femnist");
    if p.join("train").is_dir() {
        Some(p)
    } else {
        eprintln!("SKIPPED: shared FEMNIST data not found at {}", p.display());
        None
    }
}

#[test]
fn femnist_stats_reports_396_writers() {
    let Some(root) = shared() else { return };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_femnist"))
        .arg("stats")
        .arg(&root)
        .env_remove("VENN_DATA")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["writers"], 396);
    assert_eq!(v["train_samples"], 56839);
    assert_eq!(v["test_samples"], 6512);
    assert_eq!(v["classes"], 62);
}

#[test]
fn venn_data_may_name_the_shared_data_dir() {
    let Some(root) = shared() else { return };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_femnist"))
        .arg("stats")
        .env("VENN_DATA", root.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["writers"], 396);
}
