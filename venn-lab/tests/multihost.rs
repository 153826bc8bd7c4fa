//! One experiment over several network hosts on this machine: Linux network namespaces
//! joined by veth pairs to a bridge, each running the real binaries — the manager on one
//! host, two FL jobs on a second, a device-agent shard on each of a third and a fourth —
//! and `venn-lab gather` on a fifth, collecting the jobs' rounds and the shards' counters
//! over HTTP. Every address is a 10.231.0.0/24 one; a host's loopback reaches nobody
//! else, so anything that assumed loopback would fail here.
//!
//! The namespaces are created and removed by the test. Where they cannot be (not root,
//! no `ip`, no CAP_NET_ADMIN) the test prints why and passes without running.
//!
//! The binaries are the ones `cargo test --workspace` builds beside `venn-lab`; testing
//! this crate alone needs `cargo build --release --bins` first.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The hosts: (suffix of the namespace name, address).
const HOSTS: [(&str, &str); 5] = [
    ("mgr", "10.231.0.1"),
    ("jobs", "10.231.0.2"),
    ("dev0", "10.231.0.3"),
    ("dev1", "10.231.0.4"),
    ("lab", "10.231.0.5"),
];

/// The namespaces and processes of one run, removed on drop (also when the test fails).
struct Net {
    prefix: String,
    made: Vec<String>,
    children: Vec<(String, Child)>,
    logs: PathBuf,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Net {
    /// A bridge in its own namespace, and one namespace per host with a veth `eth0` on it.
    fn create(logs: PathBuf) -> Result<Net, String> {
        let prefix = format!("vl{}", std::process::id());
        let mut net = Net {
            prefix: prefix.clone(),
            made: Vec::new(),
            children: Vec::new(),
            logs,
        };
        let switch = format!("{prefix}sw");
        ip(&["netns", "add", &switch])?;
        net.made.push(switch.clone());
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &switch, "link", "set", "br0", "up"])?;
        for (name, addr) in HOSTS {
            let ns = net.ns(name);
            ip(&["netns", "add", &ns])?;
            net.made.push(ns.clone());
            ip(&[
                "-n", &switch, "link", "add", name, "type", "veth", "peer", "name", "eth0",
                "netns", &ns,
            ])?;
            ip(&["-n", &switch, "link", "set", name, "master", "br0", "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    fn ns(&self, host: &str) -> String {
        format!("{}{host}", self.prefix)
    }

    /// Starts `bin args` on `host`, its output to `<logs>/<label>.log`.
    fn spawn(&mut self, host: &str, label: &str, bin: &Path, args: &[String]) -> usize {
        let log = std::fs::File::create(self.logs.join(format!("{label}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(host)])
            .arg(bin)
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {label}: {e}"));
        self.children.push((label.to_string(), child));
        self.children.len() - 1
    }

    /// Waits up to `limit` for process `i` to exit by itself.
    fn wait(&mut self, i: usize, limit: Duration) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + limit;
        loop {
            if let Some(s) = self.children[i].1.try_wait().unwrap() {
                return Some(s);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log(&self, label: &str) -> String {
        std::fs::read_to_string(self.logs.join(format!("{label}.log"))).unwrap_or_default()
    }

    /// Every process's log tail, for a failure message.
    fn tails(&self) -> String {
        let mut s = String::new();
        for (label, _) in &self.children {
            let log = self.log(label);
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            s.push_str(&format!("\n--- {label} ---\n"));
            for l in tail.into_iter().rev() {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in self.made.iter().rev() {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

const EXPERIMENT: &str = r#"
name = "hosts"
policy = "venn"
seed = 3
tta_thresholds = [0.05]
[devices]
count = 12
availability = "always"
[[jobs]]
name = "alpha"
task = "resnet18-femnist"
params = { width = 2, train = { max_steps = 2, batch_size = 10 } }
rounds = 3
target_participants = 3
deadline_s = 40
eval_samples = 100
[[jobs]]
name = "beta"
task = "resnet18-femnist"
params = { width = 2, train = { max_steps = 2, batch_size = 10 } }
rounds = 3
target_participants = 3
deadline_s = 40
eval_samples = 100
seed = 11
"#;

fn s(v: &str) -> String {
    v.to_string()
}

#[test]
fn an_experiment_over_five_network_hosts_completes_and_is_gathered_over_http() {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_venn-lab"))
        .parent()
        .unwrap()
        .to_path_buf();
    let bin = |name: &str| {
        let p = bin_dir.join(name);
        assert!(
            p.exists(),
            "{} is missing: build the binaries first (cargo build --release --bins; \
             cargo test --workspace builds them)",
            p.display()
        );
        p
    };
    let (manager_bin, job_bin, agent_bin, lab_bin) = (
        bin("venn-manager"),
        bin("fl-job"),
        bin("device-agent"),
        bin("venn-lab"),
    );
    let dir = std::env::temp_dir().join(format!("venn-multihost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut net = match Net::create(dir.clone()) {
        Ok(n) => n,
        Err(why) => {
            eprintln!(
                "SKIPPED the multi-host test: network namespaces cannot be created here ({why}); \
                 it needs root with CAP_NET_ADMIN and iproute2"
            );
            return;
        }
    };

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let femnist = root.join("datasets/data/femnist");
    let traces = root.join("datasets/data/traces");
    let config = dir.join("hosts.toml");
    std::fs::write(&config, EXPERIMENT).unwrap();
    let cfg = venn_lab::LabConfig::load(&config).unwrap();

    let manager_url = "http://10.231.0.1:7780";
    net.spawn(
        "mgr",
        "manager",
        &manager_bin,
        &[
            s("--listen"),
            s("10.231.0.1:7780"),
            s("--db"),
            dir.join("manager.db").display().to_string(),
            s("--plan-host"),
            s("10.231.0.2"),
            s("--retry-after-s"),
            s("1"),
            s("--seed"),
            s("3"),
        ],
    );
    // The jobs start before the manager answers: they wait for it.
    let mut job_urls = Vec::new();
    let mut jobs = Vec::new();
    for (i, lj) in cfg.jobs.iter().enumerate() {
        let name = &lj.job.name;
        let job_toml = dir.join(format!("{name}.toml"));
        std::fs::write(&job_toml, toml::to_string(&lj.job).unwrap()).unwrap();
        let url = format!("http://10.231.0.2:{}", 7100 + i);
        jobs.push(net.spawn(
            "jobs",
            &format!("job-{name}"),
            &job_bin,
            &[
                s("run"),
                job_toml.display().to_string(),
                s("--manager"),
                s(manager_url),
                s("--listen"),
                format!("0.0.0.0:{}", 7100 + i),
                s("--advertise"),
                url.clone(),
                s("--csv"),
                dir.join(format!("{name}-local.csv")).display().to_string(),
                s("--data"),
                femnist.display().to_string(),
                s("--linger-s"),
                s("120"),
            ],
        ));
        job_urls.push(url);
    }
    let mut device_urls = Vec::new();
    for k in 0..2 {
        let addr = format!("10.231.0.{}:7200", 3 + k);
        net.spawn(
            &format!("dev{k}"),
            &format!("devices-{k}"),
            &agent_bin,
            &[
                s("--manager"),
                s(manager_url),
                s("--devices"),
                s("12"),
                format!("--shard={k}/2"),
                s("--workers"),
                s("1"),
                s("--seed"),
                s("3"),
                s("--data"),
                femnist.display().to_string(),
                s("--traces"),
                traces.display().to_string(),
                s("--stats-listen"),
                addr.clone(),
                s("--quiet"),
            ],
        );
        device_urls.push(format!("http://{addr}"));
    }
    let out = dir.join("results");
    let mut gather_args = vec![
        s("gather"),
        config.display().to_string(),
        s("--manager"),
        s(manager_url),
        s("--out"),
        out.display().to_string(),
        s("--timeout-s"),
        s("300"),
    ];
    for u in &job_urls {
        gather_args.extend([s("--job"), u.clone()]);
    }
    for u in &device_urls {
        gather_args.extend([s("--devices"), u.clone()]);
    }
    let gather = net.spawn("lab", "gather", &lab_bin, &gather_args);
    let status = net.wait(gather, Duration::from_secs(360));
    assert!(
        status.is_some_and(|s| s.success()),
        "venn-lab gather: {status:?}{}",
        net.tails()
    );

    // Collected, the jobs stop serving and exit by themselves.
    for &j in &jobs {
        let s = net.wait(j, Duration::from_secs(20));
        assert!(
            s.is_some_and(|s| s.success()),
            "a job did not exit once collected: {s:?}{}",
            net.tails()
        );
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["jobs_finished"], 2, "{summary:#}{}", net.tails());
    assert_eq!(summary["policy"], "venn");
    // Both shards' counters came back: 6 devices each, 12 in all.
    assert_eq!(summary["devices"]["devices_checked_in"], 12, "{summary:#}");
    assert!(summary["devices"]["updates_uploaded"].as_u64().unwrap() >= 2 * 3 * 2);
    for name in ["alpha", "beta"] {
        let rows: Vec<fl_job::runner::RoundRow> =
            csv::Reader::from_path(out.join("jobs").join(format!("{name}.csv")))
                .unwrap()
                .deserialize()
                .map(Result::unwrap)
                .collect();
        assert_eq!(rows.len(), 3, "{name}: one row per round");
        assert!(
            rows.windows(2).all(|w| w[0].time_s <= w[1].time_s) && rows[0].time_s >= 0.0,
            "{name}: times on one timeline: {rows:?}"
        );
        // The gathered rows are the job's own, shifted onto the manager's timeline.
        let local: Vec<fl_job::runner::RoundRow> =
            csv::Reader::from_path(dir.join(format!("{name}-local.csv")))
                .unwrap()
                .deserialize()
                .map(Result::unwrap)
                .collect();
        for (g, l) in rows.iter().zip(&local) {
            assert_eq!(
                (g.round, g.accuracy, g.participants),
                (l.round, l.accuracy, l.participants)
            );
        }
    }
    for f in ["tta.csv", "accuracy.png"] {
        assert!(out.join(f).exists(), "{f} written");
    }
    let table = net.log("gather");
    eprintln!("{table}");
    assert!(
        table.contains("alpha") && table.contains("average"),
        "{table}"
    );
    drop(net);
    let _ = std::fs::remove_dir_all(&dir);
}
