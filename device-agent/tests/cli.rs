//! The `device-agent` binary's command line: bad arguments are refused with a message
//! naming them before anything starts, and `--help` documents the multi-host flags. (It
//! also makes `cargo test --workspace` build the binary, which venn-lab's multi-host test
//! runs.)

use std::process::Command;

fn agent(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_device-agent"))
        .args(args)
        .output()
        .expect("device-agent runs")
}

#[test]
fn a_shard_outside_its_count_is_refused_naming_the_flag() {
    for bad in ["2/2", "x/2", "1"] {
        let out = agent(&["--shard", bad, "--duration", "0"]);
        assert!(!out.status.success(), "--shard {bad} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--shard"), "--shard {bad}: {err}");
    }
}

#[test]
fn help_documents_shards_and_the_counters_endpoint() {
    let out = agent(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["--shard <K/N>", "--stats-listen <ADDR>", "--manager"] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}
