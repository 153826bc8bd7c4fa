//! `venn-lab k8s`: an experiment as Kubernetes objects, built from the typed API structs
//! of `k8s-openapi` (valid by construction) and written as one `v1` `List` in JSON, which
//! `kubectl apply -f` takes as it is.
//!
//! What runs where:
//! - the manager: a StatefulSet of one with a volume for its SQLite file (so a restarted
//!   pod resumes every job and round) and a Service `venn-manager`;
//! - the devices: a StatefulSet of `shards` pods, pod ordinal K running
//!   `device-agent --shard K/N` over the whole population (the same devices as one
//!   process would emulate);
//! - each FL job: a Job whose pod waits for the job's arrival time and runs `fl-job run`
//!   on its config (from the ConfigMap `venn-jobs`), with a Service of its own that its
//!   devices reach it by (`--advertise`, and the manager's `--plan-host`).
//!
//! Results: with the experiment file's text ([`K8sOptions::config_text`]) a Job
//! `venn-gather` runs `venn-lab gather` inside the cluster — each job serves its rounds
//! until collected (`fl-job run --linger-s`), each device pod its counters
//! (`device-agent --stats-listen`, reached through the headless Service `venn-devices`)
//! — and writes the results folder to its `/results`, then stays up an hour for
//! `kubectl cp`. Every round's accuracy also reaches the manager (its status page and
//! `/v1/status`, reachable with `kubectl port-forward svc/venn-manager 7070`).
//!
//! For [`Engine::Podman`] the same pods come as bare Pods, since `podman kube play` (4.x)
//! runs Pods, Deployments, ConfigMaps and volume claims but no StatefulSet, Job or
//! Service: `venn-manager` with its claim, `venn-devices-K` for each shard K, one Pod per
//! job and `venn-gather`, written as a multi-document YAML ([`podman_yaml`]). On a podman
//! network pods find each other by their names, which are the Service names Kubernetes
//! uses, so every address but the device pods' (`venn-devices-K` instead of
//! `venn-devices-K.venn-devices`) is the same. `venn-lab/tests/podman.rs` runs one.
//!
//! `sweep.rs`: a sweep of `venn-lab sim` runs (configs × policies × seeds) as an indexed
//! Job and a gather Job ([`render_sweep`]).

mod sweep;

pub use sweep::{SWEEP_CLAIM, SWEEP_CONFIG_MAP, SweepOptions, render_sweep};

use crate::config::{AvailabilitySource, LabConfig};
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
    HTTPGetAction, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    Service, ServicePort, ServiceSpec, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Where and how big.
#[derive(Clone, Debug)]
pub struct K8sOptions {
    /// The image with the four binaries (see the repository's `Containerfile`).
    pub image: String,
    /// Device-agent pods (shards of the population).
    pub shards: usize,
    /// CPU request of each device shard (training runs there), e.g. `2`.
    pub shard_cpu: String,
    /// Memory request of each device shard, e.g. `2Gi`.
    pub shard_memory: String,
    /// CPU request of each FL job.
    pub job_cpu: String,
    /// Memory request of each FL job.
    pub job_memory: String,
    /// Size of the manager's volume.
    pub manager_storage: String,
    /// The experiment file's text. With it the ConfigMap carries it as `experiment.toml`
    /// and a Job `venn-gather` collects the results (`venn-lab gather`).
    pub config_text: Option<String>,
    /// What runs the objects.
    pub engine: Engine,
}

/// What runs the rendered objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// A Kubernetes cluster: StatefulSets, Jobs and Services (`kubectl apply -f`).
    #[default]
    Kubernetes,
    /// `podman kube play --network NET`: bare Pods and the manager's volume claim.
    Podman,
}

impl Default for K8sOptions {
    fn default() -> Self {
        K8sOptions {
            image: "venn-testbed:latest".into(),
            shards: 4,
            shard_cpu: "2".into(),
            shard_memory: "2Gi".into(),
            job_cpu: "1".into(),
            job_memory: "1Gi".into(),
            manager_storage: "1Gi".into(),
            config_text: None,
            engine: Engine::Kubernetes,
        }
    }
}

/// The manager's port.
pub const MANAGER_PORT: i32 = 7070;
/// Each job's device-facing port.
pub const JOB_PORT: i32 = 7100;
/// Each device pod's counters port (`device-agent --stats-listen`).
pub const STATS_PORT: i32 = 7200;
/// How long a job serves its results once ended, waiting for `venn-gather` (seconds).
pub const JOB_LINGER_S: u64 = 86_400;

/// A DNS-1123 label from `name`: lowercase letters, digits and `-`, at most 63.
pub fn dns_label(name: &str) -> String {
    let mut s: String = name
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    s.truncate(63);
    let s = s.trim_matches('-').to_string();
    if s.is_empty() { "x".into() } else { s }
}

fn labels(experiment: &str, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".into(), "venn".into()),
        ("app.kubernetes.io/component".into(), component.into()),
        ("venn.dev/experiment".into(), dns_label(experiment)),
    ])
}

fn meta(name: &str, labels: &BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(labels.clone()),
        ..ObjectMeta::default()
    }
}

fn requests(cpu: &str, memory: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".into(), Quantity(cpu.into())),
            ("memory".into(), Quantity(memory.into())),
        ])),
        ..ResourceRequirements::default()
    }
}

fn service(name: &str, labels: &BTreeMap<String, String>, port: i32) -> Service {
    Service {
        metadata: meta(name, labels),
        spec: Some(ServiceSpec {
            selector: Some(labels.clone()),
            ports: Some(vec![ServicePort {
                port,
                target_port: Some(IntOrString::Int(port)),
                name: Some("http".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// `/config` (the ConfigMap, read-only) and `/results` (scratch) of a job or gatherer pod.
fn config_and_results_mounts() -> Vec<VolumeMount> {
    vec![
        mount("config", "/config", true),
        mount("results", "/results", false),
    ]
}

/// The volume `name` mounted at `path`.
fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// The volumes behind [`config_and_results_mounts`].
fn config_and_results_volumes() -> Vec<Volume> {
    vec![
        Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: "venn-jobs".into(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: "results".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
    ]
}

/// The experiment's objects, in apply order: the jobs' ConfigMap, the manager, the device
/// shards, the jobs (each with its Service) and, with the config's text, the gatherer.
pub fn render(cfg: &LabConfig, o: &K8sOptions) -> anyhow::Result<Vec<Value>> {
    anyhow::ensure!(o.shards >= 1, "at least one device shard");
    let manager_url = format!("http://venn-manager:{MANAGER_PORT}");
    let jobs: Vec<(String, &crate::config::LabJob)> = cfg
        .jobs
        .iter()
        .map(|j| (format!("job-{}", dns_label(&j.job.name)), j))
        .collect();
    let mut items = vec![jobs_config_map(cfg, o, &jobs)?];
    items.extend(manager_objects(cfg, o, &jobs)?);
    items.extend(device_objects(cfg, o, &manager_url)?);
    for (svc, j) in &jobs {
        let mut l = labels(&cfg.name, "job");
        l.insert("venn.dev/job".into(), svc.clone());
        let spec = job_pod(o, &manager_url, svc, j);
        match o.engine {
            Engine::Kubernetes => {
                items.push(serde_json::to_value(job(svc, &l, spec))?);
                items.push(serde_json::to_value(service(svc, &l, JOB_PORT))?);
            }
            Engine::Podman => items.push(pod(svc, &l, spec)?),
        }
    }
    if o.config_text.is_some() {
        let l = labels(&cfg.name, "gather");
        let spec = gather_pod(cfg, o, &manager_url, &jobs);
        items.push(match o.engine {
            Engine::Kubernetes => serde_json::to_value(job("venn-gather", &l, spec))?,
            Engine::Podman => pod("venn-gather", &l, spec)?,
        });
    }
    Ok(items)
}

/// The ConfigMap of job configs (one TOML per job) and the experiment's own TOML.
fn jobs_config_map(
    cfg: &LabConfig,
    o: &K8sOptions,
    jobs: &[(String, &crate::config::LabJob)],
) -> anyhow::Result<Value> {
    let mut data = BTreeMap::new();
    for (svc, j) in jobs {
        data.insert(format!("{svc}.toml"), toml::to_string(&j.job)?);
    }
    if let Some(text) = &o.config_text {
        data.insert("experiment.toml".into(), text.clone());
    }
    let cm_labels = labels(&cfg.name, "jobs");
    Ok(serde_json::to_value(ConfigMap {
        metadata: meta("venn-jobs", &cm_labels),
        data: Some(data),
        ..ConfigMap::default()
    })?)
}

/// The manager with its storage: a StatefulSet with a claim template and a Service, or
/// under podman a named volume's claim and a Pod.
fn manager_objects(
    cfg: &LabConfig,
    o: &K8sOptions,
    jobs: &[(String, &crate::config::LabJob)],
) -> anyhow::Result<Vec<Value>> {
    let m_labels = labels(&cfg.name, "manager");
    let manager = manager_pod(cfg, o, jobs);
    let claim = volume_claim("data", &m_labels, "ReadWriteOnce", &o.manager_storage);
    Ok(match o.engine {
        Engine::Kubernetes => vec![
            serde_json::to_value(StatefulSet {
                metadata: meta("venn-manager", &m_labels),
                spec: Some(StatefulSetSpec {
                    replicas: Some(1),
                    service_name: Some("venn-manager".into()),
                    selector: selector(&m_labels),
                    template: template("venn-manager", &m_labels, manager),
                    volume_claim_templates: Some(vec![claim]),
                    ..StatefulSetSpec::default()
                }),
                ..StatefulSet::default()
            })?,
            serde_json::to_value(service("venn-manager", &m_labels, MANAGER_PORT))?,
        ],
        Engine::Podman => {
            // A claim of its own (podman makes it a named volume), mounted as the
            // StatefulSet's claim template would be.
            let mut claim = claim;
            claim.metadata.name = Some(PODMAN_MANAGER_CLAIM.into());
            let mut spec = manager;
            spec.volumes = Some(vec![Volume {
                name: "data".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: PODMAN_MANAGER_CLAIM.into(),
                    ..PersistentVolumeClaimVolumeSource::default()
                }),
                ..Volume::default()
            }]);
            vec![
                serde_json::to_value(claim)?,
                pod("venn-manager", &m_labels, spec)?,
            ]
        }
    })
}

/// The device shards, shard K of N in pod K: a parallel StatefulSet with a headless
/// Service, or under podman one Pod per shard.
fn device_objects(
    cfg: &LabConfig,
    o: &K8sOptions,
    manager_url: &str,
) -> anyhow::Result<Vec<Value>> {
    let dev_labels = labels(&cfg.name, "devices");
    Ok(match o.engine {
        Engine::Kubernetes => {
            // Pod ordinal K is shard K of N.
            let set = StatefulSet {
                metadata: meta("venn-devices", &dev_labels),
                spec: Some(StatefulSetSpec {
                    replicas: Some(o.shards as i32),
                    service_name: Some("venn-devices".into()),
                    pod_management_policy: Some("Parallel".into()),
                    selector: selector(&dev_labels),
                    template: template(
                        "venn-devices",
                        &dev_labels,
                        devices_pod(cfg, o, manager_url, "${HOSTNAME##*-}"),
                    ),
                    ..StatefulSetSpec::default()
                }),
                ..StatefulSet::default()
            };
            // Headless: it gives pod K the name venn-devices-K.venn-devices, which the
            // gatherer reads its counters at.
            let mut devices_svc = service("venn-devices", &dev_labels, STATS_PORT);
            if let Some(spec) = devices_svc.spec.as_mut() {
                spec.cluster_ip = Some("None".into());
            }
            vec![
                serde_json::to_value(set)?,
                serde_json::to_value(devices_svc)?,
            ]
        }
        Engine::Podman => (0..o.shards)
            .map(|k| {
                let spec = devices_pod(cfg, o, manager_url, &k.to_string());
                pod(&format!("venn-devices-{k}"), &dev_labels, spec)
            })
            .collect::<anyhow::Result<_>>()?,
    })
}

/// The name of the manager's volume claim under podman (a named volume).
pub const PODMAN_MANAGER_CLAIM: &str = "venn-manager-data";

/// A claim of `storage` (e.g. `1Gi`) with one access mode.
fn volume_claim(
    name: &str,
    labels: &BTreeMap<String, String>,
    access: &str,
    storage: &str,
) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta(name, labels),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![access.into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".into(),
                    Quantity(storage.into()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    }
}

fn selector(labels: &BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels.clone()),
        ..LabelSelector::default()
    }
}

fn template(name: &str, labels: &BTreeMap<String, String>, spec: PodSpec) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(meta(name, labels)),
        spec: Some(spec),
    }
}

/// A bare Pod (podman), without its containers' ports: podman 4 publishes each on the
/// host, where the shards' (and jobs') equal ports collide. On its network every pod
/// reaches every port of another anyway.
fn pod(name: &str, labels: &BTreeMap<String, String>, mut spec: PodSpec) -> anyhow::Result<Value> {
    for c in &mut spec.containers {
        c.ports = None;
    }
    Ok(serde_json::to_value(Pod {
        metadata: meta(name, labels),
        spec: Some(spec),
        ..Pod::default()
    })?)
}

/// A Job that runs its pod once.
fn job(name: &str, labels: &BTreeMap<String, String>, spec: PodSpec) -> Job {
    Job {
        metadata: meta(name, labels),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: template(name, labels, spec),
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

/// The manager's pod: `/data` holds its SQLite file (the volume `data`).
fn manager_pod(
    cfg: &LabConfig,
    o: &K8sOptions,
    jobs: &[(String, &crate::config::LabJob)],
) -> PodSpec {
    let mut args = vec![
        "--listen".to_string(),
        format!("0.0.0.0:{MANAGER_PORT}"),
        "--db".into(),
        "/data/manager.db".into(),
        "--policy".into(),
        cfg.policy.name().to_string(),
        "--seed".into(),
        cfg.seed.to_string(),
    ];
    for (svc, _) in jobs {
        args.extend(["--plan-host".to_string(), svc.clone()]);
    }
    // Podman turns probes into health checks run inside the image (with curl, which it
    // lacks); Kubernetes probes from the node.
    let readiness_probe = (o.engine == Engine::Kubernetes).then(|| Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".into()),
            port: IntOrString::Int(MANAGER_PORT),
            ..HTTPGetAction::default()
        }),
        ..Probe::default()
    });
    PodSpec {
        containers: vec![Container {
            name: "manager".into(),
            image: Some(o.image.clone()),
            command: Some(vec!["venn-manager".into()]),
            args: Some(args),
            ports: Some(vec![ContainerPort {
                container_port: MANAGER_PORT,
                name: Some("http".into()),
                ..ContainerPort::default()
            }]),
            volume_mounts: Some(vec![VolumeMount {
                name: "data".into(),
                mount_path: "/data".into(),
                ..VolumeMount::default()
            }]),
            readiness_probe,
            resources: Some(requests("1", "512Mi")),
            ..Container::default()
        }],
        ..PodSpec::default()
    }
}

/// A device shard's pod; `shard` is its index K of N, or a shell expression for it.
fn devices_pod(cfg: &LabConfig, o: &K8sOptions, manager_url: &str, shard: &str) -> PodSpec {
    let d = &cfg.devices;
    let availability = match &d.availability {
        AvailabilitySource::Always => String::new(),
        AvailabilitySource::Synthetic => " --synthetic".into(),
        AvailabilitySource::Trace(p) => format!(" --trace {}", p.display()),
    };
    let agent = format!(
        "exec device-agent --manager {manager_url} --devices {} --shard {shard}/{}{availability} \
         --compress {} --start-at {} --workers {} --writers-per-device {} --drop-fraction {} --seed {} \
         --stats-listen 0.0.0.0:{STATS_PORT} --quiet",
        d.count,
        o.shards,
        d.compress,
        d.start_s,
        d.workers,
        d.writers_per_device,
        d.drop_fraction,
        cfg.seed
    );
    PodSpec {
        containers: vec![Container {
            name: "devices".into(),
            image: Some(o.image.clone()),
            command: Some(vec!["sh".into(), "-c".into(), agent]),
            ports: Some(vec![ContainerPort {
                container_port: STATS_PORT,
                name: Some("stats".into()),
                ..ContainerPort::default()
            }]),
            resources: Some(requests(&o.shard_cpu, &o.shard_memory)),
            ..Container::default()
        }],
        ..PodSpec::default()
    }
}

/// An FL job's pod: waits for its arrival, then serves its devices at `http://SVC:7100`.
fn job_pod(o: &K8sOptions, manager_url: &str, svc: &str, j: &crate::config::LabJob) -> PodSpec {
    let run = format!(
        "sleep {arrival} && exec fl-job run /config/{svc}.toml --manager {manager_url} \
         --listen 0.0.0.0:{JOB_PORT} --advertise http://{svc}:{JOB_PORT} --csv /results/{svc}.csv \
         --linger-s {JOB_LINGER_S}",
        arrival = j.arrival_s.max(0.0).round() as u64,
    );
    PodSpec {
        restart_policy: Some("Never".into()),
        containers: vec![Container {
            name: "job".into(),
            image: Some(o.image.clone()),
            command: Some(vec!["sh".into(), "-c".into(), run]),
            ports: Some(vec![ContainerPort {
                container_port: JOB_PORT,
                name: Some("http".into()),
                ..ContainerPort::default()
            }]),
            volume_mounts: Some(config_and_results_mounts()),
            resources: Some(requests(&o.job_cpu, &o.job_memory)),
            ..Container::default()
        }],
        volumes: Some(config_and_results_volumes()),
        ..PodSpec::default()
    }
}

/// The pod that collects the results in the cluster: `venn-lab gather` over every job's
/// Service and every device pod, into `/results`, kept an hour for `kubectl cp` (or
/// `podman cp`).
fn gather_pod(
    cfg: &LabConfig,
    o: &K8sOptions,
    manager_url: &str,
    jobs: &[(String, &crate::config::LabJob)],
) -> PodSpec {
    let mut cmd = format!("venn-lab gather /config/experiment.toml --manager {manager_url}");
    for (svc, _) in jobs {
        cmd.push_str(&format!(" --job http://{svc}:{JOB_PORT}"));
    }
    for k in 0..o.shards {
        let host = match o.engine {
            Engine::Kubernetes => format!("venn-devices-{k}.venn-devices"),
            Engine::Podman => format!("venn-devices-{k}"),
        };
        cmd.push_str(&format!(" --devices http://{host}:{STATS_PORT}"));
    }
    let last_arrival = cfg.jobs.iter().map(|j| j.arrival_s).fold(0.0, f64::max);
    cmd.push_str(&format!(
        " --out /results --timeout-s {:.0} && echo '{GATHERED}' && sleep 3600",
        last_arrival + cfg.max_minutes * 60.0
    ));
    PodSpec {
        restart_policy: Some("Never".into()),
        containers: vec![Container {
            name: "gather".into(),
            image: Some(o.image.clone()),
            command: Some(vec!["sh".into(), "-c".into(), cmd]),
            volume_mounts: Some(config_and_results_mounts()),
            resources: Some(requests("100m", "128Mi")),
            ..Container::default()
        }],
        volumes: Some(config_and_results_volumes()),
        ..PodSpec::default()
    }
}

/// What the gatherer prints once the results folder is complete.
pub const GATHERED: &str = "results in /results (kubectl cp)";

/// The objects as a multi-document YAML stream for `podman kube play` (each document is
/// JSON, which YAML reads as it is).
pub fn podman_yaml(items: &[Value]) -> anyhow::Result<String> {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&serde_json::to_string_pretty(item)?);
        out.push('\n');
    }
    Ok(out)
}

/// The objects as one `kubectl apply -f` document.
pub fn list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}
