//! `venn-lab summarize`: a `--seeds` results folder read back from its runs'
//! `summary.json`s gives the same summary over seeds, byte for byte, as the run wrote; a
//! seed missing a policy is left out with its reason; a corrupt file is named with its
//! line, by the library and by the command.

use std::path::Path;
use std::process::Command;

use venn_lab::saved::{SavedError, read_saved};
use venn_lab::{LabConfig, LabResult};

use crate::virtual_clock::{config_path, inputs, out_dir, run};

/// Two seeds × (random, venn), schedule only, in the `--seeds` layout, with the summary
/// over seeds the run would write.
fn two_seeds(dir: &Path) -> Vec<Vec<LabResult>> {
    let (data, traces) = inputs();
    let cfg = LabConfig::load(&config_path()).unwrap();
    let runs: Vec<Vec<LabResult>> = (0..2)
        .map(|k| {
            ["random", "venn"]
                .iter()
                .map(|p| {
                    let c = LabConfig {
                        policy: cfg.policy.with_name(p),
                        ..cfg.replicate(k)
                    };
                    let out = dir.join(format!("seed-{k}")).join(p);
                    run(&c, &data, &traces, &out, false)
                })
                .collect()
        })
        .collect();
    venn_lab::seeds::write_seeds(dir, &runs).unwrap();
    runs
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_seeds_folder_read_back_gives_the_same_summary() {
    let dir = out_dir("saved");
    let runs = two_seeds(&dir);
    let written: Vec<Vec<u8>> = ["summary.json", "compare-seeds.csv", "compare.txt"]
        .iter()
        .map(|f| read(&dir.join(f)))
        .collect();

    // Default policies: random (the baseline) first, as the run had them.
    let saved = read_saved(&dir, &[]).unwrap();
    assert!(saved.multi_seed);
    assert_eq!(saved.policies, ["random", "venn"]);
    assert!(saved.skipped.is_empty(), "{:?}", saved.skipped);
    assert_eq!(saved.seeds.len(), 2);
    for (k, (seed, orig)) in saved.seeds.iter().zip(&runs).enumerate() {
        assert_eq!(seed.number, k as u64);
        assert!(
            seed.dir.ends_with(format!("seed-{k}")),
            "{}",
            seed.dir.display()
        );
        for (b, o) in seed.runs.iter().zip(orig) {
            assert_eq!(b.policy, o.policy);
            assert_eq!(b.avg_jct_s, o.avg_jct_s);
            assert_eq!(b.jobs.len(), o.jobs.len());
        }
    }
    let again = out_dir("saved-again");
    let back: Vec<&[LabResult]> = saved.seeds.iter().map(|s| s.runs.as_slice()).collect();
    venn_lab::seeds::write_seeds(&again, &back).unwrap();
    for (f, w) in ["summary.json", "compare-seeds.csv", "compare.txt"]
        .iter()
        .zip(&written)
    {
        assert!(read(&again.join(f)) == *w, "{f} differs when read back");
    }

    // A seed without one policy's run is left out, and says why; the seed kept keeps its
    // number.
    std::fs::remove_file(dir.join("seed-0/venn/summary.json")).unwrap();
    let saved = read_saved(&dir, &[]).unwrap();
    assert_eq!(saved.seeds.len(), 1);
    assert_eq!(saved.seeds[0].number, 1);
    assert_eq!(saved.skipped.len(), 1);
    assert!(
        saved.skipped[0].0.ends_with("seed-0"),
        "{:?}",
        saved.skipped
    );
    assert!(
        saved.skipped[0].1.contains("venn/summary.json"),
        "{:?}",
        saved.skipped
    );
    let one: Vec<&[LabResult]> = saved.seeds.iter().map(|s| s.runs.as_slice()).collect();
    let alone = out_dir("saved-alone");
    venn_lab::seeds::write_seeds_numbered(&alone, &one, &[saved.seeds[0].number]).unwrap();
    let rows = String::from_utf8(read(&alone.join("compare-seeds.csv"))).unwrap();
    assert!(rows.lines().skip(1).all(|l| l.starts_with("1,")), "{rows}");

    // A run filed under another policy's folder is refused.
    std::fs::copy(
        dir.join("seed-0/random/summary.json"),
        dir.join("seed-0/venn/summary.json"),
    )
    .unwrap();
    let err = read_saved(&dir, &[]).unwrap_err();
    assert!(matches!(err, SavedError::WrongPolicy { .. }), "{err}");

    // A corrupt summary is named with its line, by the library and by the command.
    let bad = dir.join("seed-0/venn/summary.json");
    std::fs::write(&bad, "{\n  \"name\": \"quick\",\n  \"policy\": 7\n}\n").unwrap();
    let err = read_saved(&dir, &[]).unwrap_err().to_string();
    assert!(
        err.contains("seed-0/venn/summary.json") && err.contains("line 3"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_venn-lab"))
        .arg("summarize")
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("seed-0/venn/summary.json") && stderr.contains("line 3"),
        "{stderr}"
    );
    for d in [dir, again, alone] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn summarize_redraws_a_seeds_folder_from_the_command_line() {
    let dir = out_dir("summarize-cli");
    two_seeds(&dir);
    let before = read(&dir.join("summary.json"));
    for f in [
        "summary.json",
        "compare.txt",
        "compare-seeds.csv",
        "jct-seeds.png",
    ] {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    // The runs are schedule-only: no accuracy picture to draw, each seed's comparison
    // draws its JCTs' split instead.
    assert!(!dir.join("compare-seeds.png").exists());
    let out = Command::new(env!("CARGO_BIN_EXE_venn-lab"))
        .args(["summarize", "--policies", "random,venn"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("seed-0/compare/schedule.png").is_file());
    assert!(!dir.join("seed-0/compare.png").exists());
    assert!(stdout.contains("summary over 2 seed(s)"), "{stdout}");
    assert!(read(&dir.join("summary.json")) == before);
    for f in ["compare.txt", "compare-seeds.csv", "jct-seeds.png"] {
        assert!(dir.join(f).is_file(), "{f} not redrawn");
    }
    assert!(!dir.join("compare-seeds.png").exists());
    for k in 0..2 {
        assert!(dir.join(format!("seed-{k}/compare.txt")).is_file());
    }
    let _ = std::fs::remove_dir_all(dir);
}
