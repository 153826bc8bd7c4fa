//! `venn-lab k8s --podman` on a real container engine: the repository's `Containerfile`
//! builds an image from the binaries this test build made (no registry: its base is a
//! root filesystem of this machine's shell, coreutils and shared libraries), `podman kube
//! play` runs a tiny experiment's rendered Pods — the manager with its volume claim, two
//! device shards, two FL jobs and the gatherer — on a podman network of its own, and the
//! gatherer's `/results` (`venn-lab gather`) is copied out and checked.
//!
//! Then `venn-lab k8s sweep --podman`: `virtual-quick.toml` under 2 policies × 2 seeds as
//! four index Pods and a gather Pod sharing one volume, trained; its summarised folder must
//! equal, file for file, what a local `venn-lab sim … --seeds 2` writes (only the wall-clock
//! fields of `summary.json` may differ).
//!
//! Without podman (or without the cargo feature `k8s`) the test prints why on stderr, past
//! the test harness's capture, and passes without running. `.ci/run` installs podman and
//! writes the containers.conf this kind of machine needs (runc, explicit ulimits).
//!
//! The binaries are the ones `cargo test --workspace` builds beside `venn-lab`; testing
//! this crate alone needs `cargo build --release --bins` first.

use std::io::Write;

/// A line on the real stderr: libtest captures `eprintln!` of passing tests, and a skip
/// must be seen.
fn skip(why: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED the podman kube play test: {why}"
    );
}

#[cfg(not(feature = "k8s"))]
#[test]
fn the_rendered_experiment_runs_under_podman_kube_play() {
    skip(
        "venn-lab was built without the `k8s` feature \
         (cargo test --release -p venn-lab --features k8s --test podman)",
    );
}

#[cfg(feature = "k8s")]
#[test]
fn the_rendered_experiment_runs_under_podman_kube_play() {
    engine::run(skip);
}

#[cfg(feature = "k8s")]
mod engine {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};
    use std::time::{Duration, Instant};

    const EXPERIMENT: &str = r#"
name = "podman"
policy = "venn"
seed = 5
max_minutes = 4
tta_thresholds = [0.05]
[devices]
count = 8
shards = 2
availability = "always"
workers = 1
[[jobs]]
name = "alpha"
task = "resnet18-femnist"
params = { width = 2, train = { max_steps = 2, batch_size = 10 } }
rounds = 2
target_participants = 2
deadline_s = 40
eval_samples = 200
[[jobs]]
name = "beta"
task = "resnet18-femnist"
params = { width = 2, train = { max_steps = 2, batch_size = 10 } }
arrival_s = 1
rounds = 2
target_participants = 2
deadline_s = 40
eval_samples = 200
seed = 9
"#;

    /// The binaries the image carries.
    const BINARIES: [&str; 4] = ["venn-manager", "device-agent", "fl-job", "venn-lab"];
    /// What the base image needs besides the binaries' libraries: the pods' `sh -c` and
    /// `sleep`, and the Containerfile's `RUN` (`mkdir`, `chown`).
    const TOOLS: [&str; 4] = ["sh", "sleep", "mkdir", "chown"];

    fn podman(args: &[&str]) -> Output {
        Command::new("podman")
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("podman {}: {e}", args.join(" ")))
    }

    /// `podman args`, which must succeed; its stdout.
    fn podman_ok(args: &[&str]) -> String {
        let out = podman(args);
        assert!(
            out.status.success(),
            "podman {} failed: {}\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Everything the run made on the engine, removed on drop (also when the test fails).
    struct Engine {
        tag: String,
        yaml: Option<PathBuf>,
        sweep_yaml: Option<PathBuf>,
        network: bool,
        images: Vec<String>,
    }

    impl Drop for Engine {
        fn drop(&mut self) {
            for y in self.yaml.iter().chain(&self.sweep_yaml) {
                let _ = podman(&["kube", "down", &y.display().to_string()]);
            }
            remove_volumes();
            if self.network {
                let _ = podman(&["network", "rm", "-f", &self.tag]);
            }
            for i in self.images.iter().rev() {
                let _ = podman(&["rmi", "-f", i]);
            }
        }
    }

    /// The volumes `podman kube play` makes and `kube down` keeps: the manager's claim,
    /// the sweep's results claim and the ConfigMaps'.
    fn remove_volumes() {
        use venn_lab::k8s::{PODMAN_MANAGER_CLAIM, SWEEP_CLAIM, SWEEP_CONFIG_MAP};
        for v in [
            PODMAN_MANAGER_CLAIM,
            "venn-jobs",
            SWEEP_CLAIM,
            SWEEP_CONFIG_MAP,
        ] {
            let _ = podman(&["volume", "rm", "-f", v]);
        }
    }

    /// The files `bin` loads (`ldd`), absolute paths.
    fn libraries(bin: &Path) -> Result<Vec<PathBuf>, String> {
        let out = Command::new("ldd")
            .arg(bin)
            .output()
            .map_err(|e| format!("ldd {}: {e}", bin.display()))?;
        if !out.status.success() {
            return Err(format!("ldd {}: {}", bin.display(), out.status));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter(|w| w.starts_with('/'))
            .map(PathBuf::from)
            .collect())
    }

    fn which(tool: &str) -> Option<PathBuf> {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    }

    /// Copies `from` to `root` + its absolute path, following links.
    fn place(root: &Path, from: &Path, at: &Path) {
        let to = root.join(at.strip_prefix("/").unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to)
            .unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), to.display()));
    }

    /// A context folder for a base image of this machine's files: the tools in /bin, every
    /// library the tools and the binaries load, at their paths.
    fn base_context(dir: &Path, bins: &[PathBuf]) -> Result<PathBuf, String> {
        let ctx = dir.join("base");
        let root = ctx.join("root");
        let mut libs = Vec::new();
        for t in TOOLS {
            let p = which(t).ok_or_else(|| format!("no `{t}` on PATH for the base image"))?;
            place(&root, &p, &Path::new("/bin").join(t));
            libs.extend(libraries(&p)?);
        }
        for b in bins {
            libs.extend(libraries(b)?);
        }
        libs.sort();
        libs.dedup();
        for l in &libs {
            place(&root, l, l);
        }
        for d in ["etc", "tmp"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/:/bin/sh\n").unwrap();
        std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
        std::fs::write(
            ctx.join("Containerfile"),
            "FROM scratch\nCOPY root/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin\n",
        )
        .unwrap();
        Ok(ctx)
    }

    /// Every pod's log tail, for a failure message.
    fn logs(containers: &[String]) -> String {
        let mut s = String::new();
        for c in containers {
            let out = podman(&["logs", "--tail", "25", c]);
            s.push_str(&format!(
                "\n--- {c} ---\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        s
    }

    pub fn run(skip: fn(&str)) {
        if Command::new("podman").arg("--version").output().is_err() {
            skip("no `podman` on PATH (Debian: apt-get install podman; .ci/run installs it)");
            return;
        }
        let info = podman(&["info", "--format", "{{.Host.OCIRuntime.Name}}"]);
        if !info.status.success() {
            skip(&format!(
                "`podman info` failed: {}",
                String::from_utf8_lossy(&info.stderr).trim()
            ));
            return;
        }
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_venn-lab"))
            .parent()
            .unwrap()
            .to_path_buf();
        let bins: Vec<PathBuf> = BINARIES
            .iter()
            .map(|name| {
                let p = bin_dir.join(name);
                assert!(
                    p.exists(),
                    "{} is missing: build the binaries first (cargo build --release --bins; \
                     cargo test --workspace builds them)",
                    p.display()
                );
                p
            })
            .collect();
        let started = Instant::now();
        let tag = format!("venn-test-{}", std::process::id());
        let dir = std::env::temp_dir().join(&tag);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let base = match base_context(&dir, &bins) {
            Ok(b) => b,
            Err(why) => {
                skip(&format!("cannot assemble a base image here: {why}"));
                return;
            }
        };
        let mut engine = Engine {
            tag: tag.clone(),
            yaml: None,
            sweep_yaml: None,
            network: false,
            images: Vec::new(),
        };
        // Volumes left by an earlier run would hand the manager its old database and the
        // pods the old ConfigMap.
        remove_volumes();

        // The images, with no network: nothing comes from a registry.
        let base_image = format!("localhost/{tag}-base:latest");
        podman_ok(&[
            "build",
            "--network",
            "none",
            "-t",
            &base_image,
            &base.display().to_string(),
        ]);
        engine.images.push(base_image.clone());
        let ctx = dir.join("image");
        std::fs::create_dir_all(ctx.join("bin")).unwrap();
        for (name, b) in BINARIES.iter().zip(&bins) {
            std::fs::copy(b, ctx.join("bin").join(name)).unwrap();
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        std::fs::copy(root.join("Containerfile"), ctx.join("Containerfile")).unwrap();
        let image = format!("localhost/{tag}:latest");
        podman_ok(&[
            "build",
            "--network",
            "none",
            "--build-arg",
            "BINARIES=prebuilt",
            "--build-arg",
            &format!("BASE={base_image}"),
            "-t",
            &image,
            &ctx.display().to_string(),
        ]);
        engine.images.push(image.clone());
        let built = started.elapsed();

        // The experiment, rendered by the binary under test.
        let config = dir.join("podman.toml");
        std::fs::write(&config, EXPERIMENT).unwrap();
        let yaml = dir.join("podman.yaml");
        let render = Command::new(&bins[3])
            .args(["k8s", &config.display().to_string(), "--podman", "--image"])
            .arg(&image)
            .args(["--out", &yaml.display().to_string()])
            .args(["--shard-cpu", "500m", "--job-cpu", "500m"])
            .output()
            .unwrap();
        assert!(
            render.status.success(),
            "venn-lab k8s --podman: {}",
            String::from_utf8_lossy(&render.stderr)
        );
        let text = std::fs::read_to_string(&yaml).unwrap();
        let kinds: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("\"kind\": "))
            .collect();
        assert_eq!(
            kinds.iter().filter(|k| k.contains("\"Pod\"")).count(),
            1 + 2 + 2 + 1,
            "the manager, two shards, two jobs and the gatherer: {kinds:?}"
        );

        podman_ok(&["network", "create", &tag]);
        engine.network = true;
        engine.yaml = Some(yaml.clone());
        podman_ok(&[
            "kube",
            "play",
            "--network",
            &tag,
            &yaml.display().to_string(),
        ]);
        let containers: Vec<String> = [
            "venn-manager-manager",
            "venn-devices-0-devices",
            "venn-devices-1-devices",
            "job-alpha-job",
            "job-beta-job",
            "venn-gather-gather",
        ]
        .map(String::from)
        .to_vec();

        // The gatherer says when the results folder is complete.
        let t0 = Instant::now();
        loop {
            let out = podman(&["logs", "venn-gather-gather"]);
            let log = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            if log.contains(venn_lab::k8s::GATHERED) {
                eprintln!("{log}");
                break;
            }
            let state = podman_ok(&[
                "inspect",
                "--format",
                "{{.State.Status}}",
                "venn-gather-gather",
            ]);
            assert!(
                state.trim() == "running",
                "the gatherer stopped ({}) before the results were complete:{}",
                state.trim(),
                logs(&containers)
            );
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "no results after 300 s:{}",
                logs(&containers)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        let ran = t0.elapsed();
        let out = dir.join("results");
        podman_ok(&[
            "cp",
            "venn-gather-gather:/results",
            &out.display().to_string(),
        ]);

        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(
            summary["jobs_finished"],
            2,
            "{summary:#}{}",
            logs(&containers)
        );
        assert_eq!(summary["policy"], "venn");
        // Both shards' counters came back: 4 devices each.
        assert_eq!(summary["devices"]["devices_checked_in"], 8, "{summary:#}");
        for name in ["alpha", "beta"] {
            let rows: Vec<fl_job::runner::RoundRow> =
                csv::Reader::from_path(out.join("jobs").join(format!("{name}.csv")))
                    .unwrap()
                    .deserialize()
                    .map(Result::unwrap)
                    .collect();
            assert_eq!(rows.len(), 2, "{name}: one row per round");
            assert!(rows.iter().all(|r| r.participants >= 1), "{rows:?}");
        }
        for f in ["tta.csv", "accuracy.png"] {
            assert!(out.join(f).exists(), "{f} written");
        }
        // Collected, the jobs exit by themselves.
        for job in ["job-alpha-job", "job-beta-job"] {
            let t0 = Instant::now();
            loop {
                let state = podman_ok(&["inspect", "--format", "{{.State.Status}}", job]);
                if state.trim() == "exited" {
                    let code = podman_ok(&["inspect", "--format", "{{.State.ExitCode}}", job]);
                    assert_eq!(code.trim(), "0", "{job}:{}", logs(&containers));
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "{job} still {} once collected:{}",
                    state.trim(),
                    logs(&containers)
                );
                std::thread::sleep(Duration::from_millis(300));
            }
        }
        eprintln!(
            "podman: images built in {:.1} s, experiment ran and was gathered in {:.1} s",
            built.as_secs_f64(),
            ran.as_secs_f64()
        );
        sweep::check(&mut engine, &bins[3], &image, &dir);
        drop(engine);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The sweep half of the test (see the file's docs).
    mod sweep {
        use super::{Engine, logs, podman, podman_ok};
        use std::path::Path;
        use std::process::Command;
        use std::time::{Duration, Instant};

        const POLICIES: &str = "random,venn";

        pub(super) fn check(engine: &mut Engine, venn_lab: &Path, image: &str, dir: &Path) {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let config = root.join("scripts/experiments/virtual-quick.toml");
            let yaml = dir.join("sweep.yaml");
            let render = Command::new(venn_lab)
                .args(["k8s", "sweep", &config.display().to_string()])
                .args([
                    "--policies",
                    POLICIES,
                    "--seeds",
                    "2",
                    "--podman",
                    "--image",
                    image,
                ])
                .args(["--cpu", "500m", "--out", &yaml.display().to_string()])
                .output()
                .unwrap();
            assert!(
                render.status.success(),
                "venn-lab k8s sweep --podman: {}",
                String::from_utf8_lossy(&render.stderr)
            );
            engine.sweep_yaml = Some(yaml.clone());
            let started = Instant::now();
            podman_ok(&[
                "kube",
                "play",
                "--network",
                &engine.tag,
                &yaml.display().to_string(),
            ]);
            let gather = "venn-sweep-gather-gather";
            let containers: Vec<String> = (0..4)
                .map(|i| format!("venn-sweep-{i}-index"))
                .chain([gather.to_string()])
                .collect();
            wait_for_gather(gather, &containers);
            let ran = started.elapsed();
            let swept = dir.join("sweep-results");
            podman_ok(&[
                "cp",
                &format!("{gather}:/results"),
                &swept.display().to_string(),
            ]);

            // The same sweep, locally in one process, on the data the image carries (the
            // repository's copy; this machine may also have the larger shared set, which
            // the local lookup would prefer).
            let local = dir.join("local");
            let t0 = Instant::now();
            let out = Command::new(venn_lab)
                .env("VENN_DATA", root.join("datasets/data"))
                .args(["sim", &config.display().to_string(), "--policies", POLICIES])
                .args(["--seeds", "2", "--out", &local.display().to_string()])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "local venn-lab sim: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let local_s = t0.elapsed();
            let compared = same_folders(&swept.join("virtual-quick"), &local);
            eprintln!(
                "podman sweep: 4 indices ran and were summarised in {:.1} s (locally, one \
                 after another: {:.1} s); {compared} files equal",
                ran.as_secs_f64(),
                local_s.as_secs_f64()
            );
        }

        /// Waits until the gather Pod says the sweep is summarised.
        fn wait_for_gather(gather: &str, containers: &[String]) {
            let t0 = Instant::now();
            loop {
                let out = podman(&["logs", gather]);
                let log = String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr);
                if log.contains(venn_lab::sweep::SWEEP_GATHERED) {
                    return;
                }
                let state = podman_ok(&["inspect", "--format", "{{.State.Status}}", gather]);
                assert!(
                    state.trim() == "running",
                    "the sweep's gatherer stopped ({}):{}",
                    state.trim(),
                    logs(containers)
                );
                assert!(
                    t0.elapsed() < Duration::from_secs(600),
                    "the sweep was not summarised in 600 s:{}",
                    logs(containers)
                );
                std::thread::sleep(Duration::from_millis(500));
            }
        }

        /// Every file of `local` has its twin in `swept` with the same bytes (PNGs aside:
        /// their fonts may differ between the image and this machine; `summary.json`s
        /// compared without their wall-clock fields); returns how many were compared.
        fn same_folders(swept: &Path, local: &Path) -> usize {
            let mut n = 0;
            for entry in walk(local) {
                let rel = entry.strip_prefix(local).unwrap();
                let twin = swept.join(rel);
                assert!(twin.is_file(), "the sweep lacks {}", rel.display());
                match entry.extension().and_then(|e| e.to_str()) {
                    Some("png") => continue,
                    Some("json") => assert_eq!(
                        without_wall(&std::fs::read(&twin).unwrap()),
                        without_wall(&std::fs::read(&entry).unwrap()),
                        "{} differs beyond wall-clock fields",
                        rel.display()
                    ),
                    _ => assert!(
                        std::fs::read(&twin).unwrap() == std::fs::read(&entry).unwrap(),
                        "{} differs",
                        rel.display()
                    ),
                }
                n += 1;
            }
            assert!(n >= 10, "only {n} files compared");
            n
        }

        /// The files under `dir`, recursively.
        fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
            let mut out = Vec::new();
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    out.extend(walk(&p));
                } else {
                    out.push(p);
                }
            }
            out
        }

        /// The JSON without the keys that describe the machine rather than the experiment:
        /// wall-clock and thread seconds (`training_seconds` too), throughput, memory, the
        /// thread count — which differ between any two runs — and where the data was found
        /// (`path`, `origin`: the same bytes, the image's extracted copy against the
        /// repository's).
        fn without_wall(bytes: &[u8]) -> serde_json::Value {
            fn strip(v: &mut serde_json::Value) {
                match v {
                    serde_json::Value::Object(m) => {
                        m.retain(|k, _| {
                            !(k.contains("wall")
                                || k.contains("rss")
                                || k.ends_with("_per_s")
                                || k.ends_with("thread_s")
                                || k == "training_seconds"
                                || k == "threads"
                                || k == "path"
                                || k == "origin")
                        });
                        m.values_mut().for_each(strip);
                    }
                    serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
                    _ => {}
                }
            }
            let mut v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            strip(&mut v);
            v
        }
    }
}
