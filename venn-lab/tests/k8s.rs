//! `venn-lab k8s` on the paper-scale experiment: the rendered objects' kinds, names,
//! labels, shard count, the manager's volume, the jobs' configs and addresses, and the
//! Job that gathers the results from them; and the same experiment as Pods for `podman
//! kube play`. Needs the cargo feature `k8s` (`cargo test --release -p venn-lab --features
//! k8s --test k8s`, which CI runs); `tests/podman.rs` runs the Pods for real.
#![cfg(feature = "k8s")]

use serde_json::Value;
use std::path::Path;
use venn_lab::LabConfig;
use venn_lab::k8s::{
    Engine, GATHERED, K8sOptions, PODMAN_MANAGER_CLAIM, dns_label, list, podman_yaml, render,
};

fn paper() -> (LabConfig, Vec<Value>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/experiments/paper.toml");
    let cfg = LabConfig::load(&path).unwrap();
    let opts = K8sOptions {
        shards: 6,
        config_text: Some(std::fs::read_to_string(&path).unwrap()),
        ..K8sOptions::default()
    };
    let items = render(&cfg, &opts).unwrap();
    (cfg, items)
}

fn of<'a>(items: &'a [Value], kind: &str) -> Vec<&'a Value> {
    items.iter().filter(|i| i["kind"] == kind).collect()
}

fn named<'a>(items: &'a [Value], kind: &str, name: &str) -> &'a Value {
    of(items, kind)
        .into_iter()
        .find(|i| i["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn paper_renders_a_manager_sharded_devices_and_a_job_per_config_entry() {
    let (cfg, items) = paper();
    let n = cfg.jobs.len();
    assert_eq!(n, 20);
    assert_eq!(of(&items, "ConfigMap").len(), 1);
    assert_eq!(of(&items, "StatefulSet").len(), 2);
    assert_eq!(
        of(&items, "Job").len(),
        n + 1,
        "a Job per FL job and the gatherer"
    );
    assert_eq!(of(&items, "Service").len(), n + 2);
    for i in &items {
        let name = i["metadata"]["name"].as_str().unwrap();
        assert_eq!(dns_label(name), name, "a DNS-1123 name");
        assert_eq!(i["metadata"]["labels"]["app.kubernetes.io/name"], "venn");
        assert_eq!(i["metadata"]["labels"]["venn.dev/experiment"], "paper");
        assert!(i["apiVersion"].is_string(), "{i}");
    }

    // The manager: one replica, its SQLite file on a claimed volume, every job's host
    // allowed as a plan host, a Service on its port.
    let m = named(&items, "StatefulSet", "venn-manager");
    assert_eq!(m["apiVersion"], "apps/v1");
    assert_eq!(m["spec"]["replicas"], 1);
    let c = &m["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.windows(2).any(|w| w == ["--db", "/data/manager.db"]));
    assert!(args.windows(2).any(|w| w == ["--policy", "venn"]));
    assert_eq!(args.iter().filter(|a| **a == "--plan-host").count(), n);
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/data");
    let claim = &m["spec"]["volumeClaimTemplates"][0];
    assert_eq!(claim["metadata"]["name"], c["volumeMounts"][0]["name"]);
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "1Gi");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/healthz");
    let svc = named(&items, "Service", "venn-manager");
    assert_eq!(svc["spec"]["ports"][0]["port"], 7070);
    assert_eq!(
        svc["spec"]["selector"],
        m["spec"]["selector"]["matchLabels"]
    );

    // The devices: six pods, pod K runs shard K/6 of the whole population.
    let d = named(&items, "StatefulSet", "venn-devices");
    assert_eq!(d["spec"]["replicas"], 6);
    assert_eq!(d["spec"]["podManagementPolicy"], "Parallel");
    let dc = &d["spec"]["template"]["spec"]["containers"][0];
    let cmd = dc["command"][2].as_str().unwrap();
    for want in [
        "--shard ${HOSTNAME##*-}/6",
        "--devices 1000",
        "--synthetic",
        "--compress 60",
        "--manager http://venn-manager:7070",
        "--seed 1",
        "--stats-listen 0.0.0.0:7200",
    ] {
        assert!(cmd.contains(want), "{want} in {cmd}");
    }
    assert_eq!(dc["resources"]["requests"]["cpu"], "2");
    assert_eq!(dc["resources"]["requests"]["memory"], "2Gi");
    // Headless, so that pod K is venn-devices-K.venn-devices for the gatherer.
    let ds = named(&items, "Service", "venn-devices");
    assert_eq!(ds["spec"]["clusterIP"], "None");
    assert_eq!(ds["spec"]["ports"][0]["port"], 7200);
    assert_eq!(d["spec"]["serviceName"], "venn-devices");

    // The jobs: a config each (which fl-job parses back), started at its arrival, found by
    // devices at its own Service.
    let cm = &of(&items, "ConfigMap")[0]["data"];
    for lj in &cfg.jobs {
        let svc = format!("job-{}", dns_label(&lj.job.name));
        let back: fl_job::runner::JobConfig =
            toml::from_str(cm[format!("{svc}.toml")].as_str().unwrap()).unwrap();
        assert_eq!(back.name, lj.job.name);
        assert_eq!(back.rounds, lj.job.rounds);
        let job = named(&items, "Job", &svc);
        assert_eq!(job["apiVersion"], "batch/v1");
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        let run = pod["containers"][0]["command"][2].as_str().unwrap();
        assert!(
            run.starts_with(&format!("sleep {} && ", lj.arrival_s.round() as u64)),
            "{run}"
        );
        assert!(
            run.contains(&format!("--advertise http://{svc}:7100")),
            "{run}"
        );
        assert!(run.contains(&format!("/config/{svc}.toml")));
        assert!(
            run.contains("--linger-s "),
            "it waits to be gathered: {run}"
        );
        assert!(args.contains(&svc.as_str()), "the manager allows {svc}");
        let s = named(&items, "Service", &svc);
        assert_eq!(s["spec"]["selector"]["venn.dev/job"], svc.as_str());
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"]["venn.dev/job"],
            svc.as_str()
        );
    }
    // The gatherer reads the experiment file from the ConfigMap (it parses back) and
    // every job and device pod.
    let back = cm["experiment.toml"].as_str().unwrap();
    assert_eq!(
        LabConfig::parse(back, Path::new("experiment.toml"))
            .unwrap()
            .name,
        "paper"
    );
    let g = named(&items, "Job", "venn-gather");
    let gpod = &g["spec"]["template"]["spec"];
    let gcmd = gpod["containers"][0]["command"][2].as_str().unwrap();
    assert!(
        gcmd.starts_with(
            "venn-lab gather /config/experiment.toml --manager http://venn-manager:7070"
        )
    );
    assert_eq!(gcmd.matches(" --job http://job-").count(), n, "{gcmd}");
    for k in 0..6 {
        assert!(gcmd.contains(&format!(
            "--devices http://venn-devices-{k}.venn-devices:7200"
        )));
    }
    assert!(!gcmd.contains("venn-devices-6"));
    assert!(gcmd.contains("--out /results"));
    assert_eq!(gpod["volumes"][0]["configMap"]["name"], "venn-jobs");
    let doc = list(items);
    assert_eq!(doc["kind"], "List");
    assert_eq!(doc["items"].as_array().unwrap().len(), 2 * n + 6);
}

#[test]
fn names_become_dns_labels() {
    assert_eq!(dns_label("Job_07 ResNet!"), "job-07-resnet");
    assert_eq!(dns_label(&"a".repeat(80)).len(), 63);
    assert_eq!(dns_label("__"), "x");
}

#[test]
fn for_podman_the_same_pods_come_bare_and_find_each_other_by_name() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/experiments/paper.toml");
    let cfg = LabConfig::load(&path).unwrap();
    let opts = K8sOptions {
        shards: 3,
        config_text: Some(std::fs::read_to_string(&path).unwrap()),
        engine: Engine::Podman,
        ..K8sOptions::default()
    };
    let items = render(&cfg, &opts).unwrap();
    let n = cfg.jobs.len();
    // podman kube play runs none of these kinds.
    for kind in ["StatefulSet", "Job", "Service"] {
        assert!(of(&items, kind).is_empty(), "no {kind} for podman");
    }
    assert_eq!(of(&items, "ConfigMap").len(), 1);
    assert_eq!(of(&items, "Pod").len(), 1 + 3 + n + 1);
    let claim = named(&items, "PersistentVolumeClaim", PODMAN_MANAGER_CLAIM);
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "1Gi");
    let m = named(&items, "Pod", "venn-manager");
    assert_eq!(
        m["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
        PODMAN_MANAGER_CLAIM
    );
    assert_eq!(
        m["spec"]["volumes"][0]["name"],
        m["spec"]["containers"][0]["volumeMounts"][0]["name"]
    );
    assert!(m["spec"]["containers"][0]["readinessProbe"].is_null());
    // Podman would publish container ports on the host, where the pods' equal ports clash.
    for p in of(&items, "Pod") {
        assert!(p["spec"]["containers"][0]["ports"].is_null(), "{p}");
    }
    // Pod K is shard K, named in its command (no StatefulSet ordinal to read).
    for k in 0..3 {
        let d = named(&items, "Pod", &format!("venn-devices-{k}"));
        let cmd = d["spec"]["containers"][0]["command"][2].as_str().unwrap();
        assert!(cmd.contains(&format!("--shard {k}/3 ")), "{cmd}");
    }
    // The jobs are Pods under their Service names, so their addresses are unchanged.
    for lj in &cfg.jobs {
        let svc = format!("job-{}", dns_label(&lj.job.name));
        let p = named(&items, "Pod", &svc);
        assert_eq!(p["spec"]["restartPolicy"], "Never");
        let run = p["spec"]["containers"][0]["command"][2].as_str().unwrap();
        assert!(run.contains(&format!("--advertise http://{svc}:7100")));
    }
    let g = named(&items, "Pod", "venn-gather");
    let gcmd = g["spec"]["containers"][0]["command"][2].as_str().unwrap();
    assert!(
        gcmd.contains("--devices http://venn-devices-2:7200 "),
        "{gcmd}"
    );
    assert!(!gcmd.contains(".venn-devices"), "{gcmd}");
    assert!(gcmd.contains(GATHERED));
    // One YAML document per object, each of them JSON.
    let yaml = podman_yaml(&items).unwrap();
    let docs: Vec<&str> = yaml.split("\n---\n").collect();
    assert_eq!(docs.len(), items.len());
    for (d, i) in docs.iter().zip(&items) {
        assert_eq!(&serde_json::from_str::<Value>(d).unwrap(), i);
    }
}

/// `venn-lab k8s sweep`: fig9 under 4 policies × 3 seeds is one indexed Job of 12
/// completions (each index retried alone, its pod told nothing but its index), the
/// shared results claim, the plan in a ConfigMap and the gather Job; for podman, 12 index
/// Pods that carry their index and the gather Pod.
#[test]
fn a_sweep_is_one_indexed_job_and_a_gather_job() {
    use venn_lab::k8s::{SWEEP_CLAIM, SweepOptions, render_sweep};
    use venn_lab::sweep::{SweepConfig, SweepPlan};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/experiments/fig9.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let configs = vec![SweepConfig {
        name: "fig9".into(),
        file: "fig9.toml".into(),
    }];
    let policies = ["random", "fifo", "srsf", "venn"]
        .map(String::from)
        .to_vec();
    let plan = SweepPlan::new(configs, policies, 3, false).unwrap();
    let mut opts = SweepOptions {
        image: "venn-testbed:latest".into(),
        parallelism: 4,
        retries_per_index: 2,
        cpu: "2".into(),
        memory: "512Mi".into(),
        memory_limit: "1Gi".into(),
        storage: "1Gi".into(),
        engine: Engine::Kubernetes,
    };
    let files = [("fig9.toml".to_string(), text)];
    let items = render_sweep("fig9", &plan, &files, &opts).unwrap();
    let job = named(&items, "Job", "venn-sweep");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"], 12);
    assert_eq!(spec["parallelism"], 4);
    assert_eq!(spec["backoffLimitPerIndex"], 2);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never", "required per-index backoff");
    let c = &pod["containers"][0];
    assert_eq!(c["args"][0], "sweep-index");
    assert!(
        c["env"].is_null(),
        "Kubernetes sets JOB_COMPLETION_INDEX itself"
    );
    assert_eq!(c["resources"]["limits"]["memory"], "1Gi");
    let claim = named(&items, "PersistentVolumeClaim", SWEEP_CLAIM);
    assert_eq!(claim["spec"]["accessModes"][0], "ReadWriteMany");
    let cm = named(&items, "ConfigMap", "venn-sweep");
    let shipped: SweepPlan =
        serde_json::from_str(cm["data"]["plan.json"].as_str().unwrap()).unwrap();
    assert_eq!(shipped, plan);
    assert!(
        cm["data"]["fig9.toml"]
            .as_str()
            .unwrap()
            .contains("[[jobs]]")
    );
    assert!(named(&items, "Job", "venn-sweep-gather")["spec"]["template"]["spec"]["containers"][0]["command"][2]
        .as_str()
        .unwrap()
        .contains("sweep-gather"));

    opts.engine = Engine::Podman;
    let items = render_sweep("fig9", &plan, &files, &opts).unwrap();
    assert_eq!(of(&items, "Pod").len(), 12 + 1);
    let seventh = named(&items, "Pod", "venn-sweep-7");
    let env = &seventh["spec"]["containers"][0]["env"][0];
    assert_eq!(
        (env["name"].as_str(), env["value"].as_str()),
        (Some("JOB_COMPLETION_INDEX"), Some("7"))
    );
    assert!(podman_yaml(&items).is_ok());
}
