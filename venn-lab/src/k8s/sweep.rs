//! `venn-lab k8s sweep`: configs × policies × seeds of `venn-lab sim` ([`crate::sweep`]) as
//! one Kubernetes indexed Job and a gather Job, or, for `podman kube play` (which has no
//! Jobs), the same indices as bare Pods.
//!
//! - ConfigMap `venn-sweep`: `plan.json` and the configs, mounted at `/sweep`.
//! - PersistentVolumeClaim `venn-sweep-results`, mounted at `/results` in every pod: each
//!   index writes its own folder there. Pods on several nodes need a `ReadWriteMany`
//!   storage class (NFS, CephFS, a cloud file store).
//! - Job `venn-sweep`: `completionMode: Indexed`, one completion per index, `parallelism`
//!   at a time, a failed index retried `backoffLimitPerIndex` times without redoing the
//!   others. Pod K runs `venn-lab sweep-index` with `JOB_COMPLETION_INDEX=K`; an index whose
//!   results are on the volume returns at once, so the sweep applied again after a stop
//!   resumes where it was.
//! - Job `venn-sweep-gather`: waits until every index's `summary.json` is there, then
//!   summarises each config into `/results/<name>` as a local `--seeds` run does, prints
//!   [`SWEEP_GATHERED`](crate::sweep::SWEEP_GATHERED) and stays up an hour for `kubectl cp`.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EnvVar, PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource, PodSpec, ResourceRequirements, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use super::{Engine, job, labels, meta, mount, pod, template, volume_claim};
use crate::sweep::{SWEEP_GATHERED, SweepPlan};

/// The volume claim every sweep pod writes its results to.
pub const SWEEP_CLAIM: &str = "venn-sweep-results";

/// The ConfigMap with the plan and the configs.
pub const SWEEP_CONFIG_MAP: &str = "venn-sweep";

/// How a sweep's pods run.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// The image with `venn-lab` (see the repository's `Containerfile`).
    pub image: String,
    /// Indices running at once (Kubernetes; podman starts them all).
    pub parallelism: usize,
    /// Retries of a failed index (`backoffLimitPerIndex`).
    pub retries_per_index: i32,
    /// CPU request of each index, e.g. `2` (its training threads).
    pub cpu: String,
    /// Memory request of each index.
    pub memory: String,
    /// Memory limit of each index.
    pub memory_limit: String,
    /// Size of the results volume.
    pub storage: String,
    /// What runs the objects.
    pub engine: Engine,
}

/// The sweep's objects, in apply order. `configs` are (file name, text) of the plan's
/// configs, in its order.
pub fn render_sweep(
    name: &str,
    plan: &SweepPlan,
    configs: &[(String, String)],
    o: &SweepOptions,
) -> anyhow::Result<Vec<Value>> {
    anyhow::ensure!(o.parallelism >= 1, "--parallelism must be at least 1");
    anyhow::ensure!(o.retries_per_index >= 0, "--retries must not be negative");
    let mut data = BTreeMap::from([("plan.json".to_string(), serde_json::to_string_pretty(plan)?)]);
    for (file, text) in configs {
        data.insert(file.clone(), text.clone());
    }
    let l = labels(name, "sweep");
    let mut items = vec![
        serde_json::to_value(ConfigMap {
            metadata: meta(SWEEP_CONFIG_MAP, &l),
            data: Some(data),
            ..ConfigMap::default()
        })?,
        serde_json::to_value(results_claim(o, &l))?,
    ];
    let n = plan.entries.len();
    match o.engine {
        Engine::Kubernetes => {
            let spec = JobSpec {
                completion_mode: Some("Indexed".into()),
                completions: Some(n as i32),
                parallelism: Some(o.parallelism.min(n) as i32),
                backoff_limit_per_index: Some(o.retries_per_index),
                template: template("venn-sweep", &l, index_pod(o, None)),
                ..JobSpec::default()
            };
            items.push(serde_json::to_value(Job {
                metadata: meta("venn-sweep", &l),
                spec: Some(spec),
                ..Job::default()
            })?);
            let g = gather_pod(o);
            items.push(serde_json::to_value(job("venn-sweep-gather", &l, g))?);
        }
        Engine::Podman => {
            for i in 0..n {
                items.push(pod(&format!("venn-sweep-{i}"), &l, index_pod(o, Some(i)))?);
            }
            items.push(pod("venn-sweep-gather", &l, gather_pod(o))?);
        }
    }
    Ok(items)
}

/// The shared results volume (`ReadWriteMany` on Kubernetes: indices on several nodes).
fn results_claim(o: &SweepOptions, l: &BTreeMap<String, String>) -> PersistentVolumeClaim {
    let access = match o.engine {
        Engine::Kubernetes => "ReadWriteMany",
        Engine::Podman => "ReadWriteOnce",
    };
    volume_claim(SWEEP_CLAIM, l, access, &o.storage)
}

/// An index's pod: `venn-lab sweep-index` with the plan at `/sweep` and the results at
/// `/results`. Kubernetes sets `JOB_COMPLETION_INDEX`; a podman Pod gets `index` as it.
fn index_pod(o: &SweepOptions, index: Option<usize>) -> PodSpec {
    let env = index.map(|i| {
        vec![EnvVar {
            name: "JOB_COMPLETION_INDEX".into(),
            value: Some(i.to_string()),
            ..EnvVar::default()
        }]
    });
    let resources = ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".into(), Quantity(o.cpu.clone())),
            ("memory".into(), Quantity(o.memory.clone())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".into(),
            Quantity(o.memory_limit.clone()),
        )])),
        ..ResourceRequirements::default()
    };
    sweep_pod(Container {
        name: "index".into(),
        image: Some(o.image.clone()),
        command: Some(vec!["venn-lab".into()]),
        args: Some(
            [
                "sweep-index",
                "--plan",
                "/sweep/plan.json",
                "--results",
                "/results",
            ]
            .map(String::from)
            .to_vec(),
        ),
        env,
        resources: Some(resources),
        ..Container::default()
    })
}

/// The gather's pod: waits for every index, summarises, then stays up for `kubectl cp`.
fn gather_pod(o: &SweepOptions) -> PodSpec {
    let cmd = format!(
        "venn-lab sweep-gather --plan /sweep/plan.json --results /results \
         && echo '{SWEEP_GATHERED}' && sleep 3600"
    );
    sweep_pod(Container {
        name: "gather".into(),
        image: Some(o.image.clone()),
        command: Some(vec!["sh".into(), "-c".into(), cmd]),
        resources: Some(super::requests("100m", "256Mi")),
        ..Container::default()
    })
}

/// `container` in a pod that runs once, with `/sweep` (the ConfigMap, read-only) and
/// `/results` (the shared claim) mounted.
fn sweep_pod(mut container: Container) -> PodSpec {
    container.volume_mounts = Some(vec![
        mount("sweep", "/sweep", true),
        mount("results", "/results", false),
    ]);
    PodSpec {
        restart_policy: Some("Never".into()),
        containers: vec![container],
        volumes: Some(vec![
            Volume {
                name: "sweep".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: SWEEP_CONFIG_MAP.into(),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            },
            Volume {
                name: "results".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: SWEEP_CLAIM.into(),
                    ..PersistentVolumeClaimVolumeSource::default()
                }),
                ..Volume::default()
            },
        ]),
        ..PodSpec::default()
    }
}
