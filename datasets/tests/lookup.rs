//! The data lookup order, through the `femnist` binary: flag, `$VENN_DATA` (and its older
//! name), the user's data directory, and the message naming which data a run used.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The subset the repository carries (80 train writers, 396 test writers), a stand-in data set.
fn carried() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/femnist")
}

/// `femnist stats` with none of the lookup variables inherited.
fn stats(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_femnist"));
    cmd.arg("stats").args(args);
    for k in ["VENN_DATA", "VENN_DATA_DIR", "XDG_DATA_HOME"] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn writers(out: &Output) -> u64 {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["writers"].as_u64().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_downloaded_set_in_the_user_data_dir_is_found_and_named() {
    let home = std::env::temp_dir().join(format!("venn-lookup-{}", std::process::id()));
    let target = home.join("venn/femnist");
    for sub in ["train", "test"] {
        std::fs::create_dir_all(target.join(sub)).unwrap();
        let name = format!("{sub}/shard_05.json.gz");
        std::fs::copy(carried().join(&name), target.join(&name)).unwrap();
    }
    let out = stats(&[], &[("XDG_DATA_HOME", &home)]);
    assert_eq!(writers(&out), 20);
    let err = stderr(&out);
    assert!(
        err.contains("data: FEMNIST:") && err.contains("(downloaded)"),
        "{err}"
    );
    // $VENN_DATA comes before the downloaded set, and a flag before both.
    let out = stats(&[], &[("XDG_DATA_HOME", &home), ("VENN_DATA", &carried())]);
    assert_eq!(writers(&out), 396);
    assert!(stderr(&out).contains("(from $VENN_DATA)"));
    let flag = target.to_str().unwrap();
    let out = stats(&[flag], &[("VENN_DATA", &carried())]);
    assert_eq!(writers(&out), 20);
    assert!(stderr(&out).contains("(given by flag)"));
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn the_older_variable_name_names_the_data_directory() {
    let data_dir = carried().parent().unwrap().to_path_buf();
    let out = stats(&[], &[("VENN_DATA_DIR", &data_dir)]);
    assert_eq!(writers(&out), 396);
}

#[test]
fn a_variable_naming_no_data_is_an_error_not_a_fallback() {
    let out = stats(&[], &[("VENN_DATA", Path::new("/nonexistent/venn-data"))]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("/nonexistent/venn-data (holds no FEMNIST)"),
        "{err}"
    );
}
