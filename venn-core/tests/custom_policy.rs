//! A policy defined outside the core, registered by name with its own typed arguments
//! through the public [`PolicyRegistry`], configured from TOML and run by the
//! [`ResourceManager`]; and the errors a registry gives for names and keys it does not know.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Deserialize;
use venn_core::policy::{DeviceCtx, SchedView};
use venn_core::*;

/// Arguments of `largest-demand-first`.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct LargestArgs {
    /// Serve the smallest demand first instead.
    reverse: bool,
    /// Devices below this memory score are never assigned.
    min_mem: f64,
}

impl Default for LargestArgs {
    fn default() -> Self {
        LargestArgs {
            reverse: false,
            min_mem: 0.0,
        }
    }
}

/// Largest open demand first (or smallest, reversed); counts the jobs it saw removed.
#[derive(Debug)]
struct LargestDemandFirst {
    args: LargestArgs,
    removed: Arc<AtomicUsize>,
}

impl Policy for LargestDemandFirst {
    fn name(&self) -> &'static str {
        "largest-demand-first"
    }

    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        let d = job.open_demand() as f64;
        if self.args.reverse { d } else { -d }
    }

    fn on_job_removed(&mut self, _job: &JobState) {
        self.removed.fetch_add(1, Ordering::SeqCst);
    }

    fn select(
        &mut self,
        view: &SchedView<'_>,
        dev: &DeviceCtx<'_>,
        _: &mut SeededRng,
    ) -> Option<JobId> {
        if dev.profile.mem_score < self.args.min_mem {
            return None;
        }
        view.best_head(dev)
    }
}

fn registry(removed: Arc<AtomicUsize>) -> PolicyRegistry {
    let mut r = PolicyRegistry::builtin();
    r.register("largest-demand-first", move |args: LargestArgs| {
        Ok(Box::new(LargestDemandFirst {
            args,
            removed: removed.clone(),
        }))
    })
    .unwrap();
    r
}

#[derive(Deserialize)]
struct Driver {
    policy: PolicyConfig,
}

fn policy(toml_text: &str) -> PolicyConfig {
    toml::from_str::<Driver>(toml_text).unwrap().policy
}

fn request(demand: u32) -> RoundRequest {
    RoundRequest {
        demand,
        deadline: Time(1000.0),
        min_response_fraction: 1.0,
        close_at: None,
    }
}

/// Two jobs (demand 1 and 3) and one device: which one gets it?
fn first_served(rm: &mut ResourceManager) -> (JobId, JobId, Decision) {
    let small = rm
        .register_job(JobSpec::new("small", Requirement::any()), Time(0.0))
        .unwrap();
    let large = rm
        .register_job(JobSpec::new("large", Requirement::any()), Time(0.0))
        .unwrap();
    rm.submit_request(small, request(1), Time(0.0)).unwrap();
    rm.submit_request(large, request(3), Time(0.0)).unwrap();
    let d = rm.check_in(DeviceId(1), &DeviceProfile::new(1.0, 1.0, 1.0), Time(1.0));
    (small, large, d)
}

#[test]
fn a_registered_policy_runs_in_the_resource_manager_with_its_args() {
    let removed = Arc::new(AtomicUsize::new(0));
    let reg = registry(removed.clone());

    let cfg = policy("[policy]\nname = \"largest-demand-first\"\n");
    let mut rm = ResourceManager::with_registry(ManagerConfig::default(), &cfg, &reg).unwrap();
    assert_eq!(rm.policy_name(), "largest-demand-first");
    let (_, large, d) = first_served(&mut rm);
    assert!(
        matches!(d, Decision::Assigned { job, .. } if job == large),
        "{d:?}"
    );
    rm.remove_job(large, Time(2.0)).unwrap();
    assert_eq!(
        removed.load(Ordering::SeqCst),
        1,
        "on_job_removed was called"
    );

    // Its own typed args, from the same table.
    let cfg = policy("[policy]\nname = \"largest-demand-first\"\nreverse = true\n");
    let mut rm = ResourceManager::with_registry(ManagerConfig::default(), &cfg, &reg).unwrap();
    let (small, _, d) = first_served(&mut rm);
    assert!(
        matches!(d, Decision::Assigned { job, .. } if job == small),
        "{d:?}"
    );

    let cfg = policy("policy = { name = \"largest-demand-first\", min_mem = 2.0 }");
    let mut rm = ResourceManager::with_registry(ManagerConfig::default(), &cfg, &reg).unwrap();
    assert_eq!(first_served(&mut rm).2, Decision::NoTask);

    // The string form names it with default args.
    let cfg = policy("policy = \"largest-demand-first\"");
    assert!(ResourceManager::with_registry(ManagerConfig::default(), &cfg, &reg).is_ok());
}

#[test]
fn the_builtin_policies_come_from_the_same_registry() {
    let reg = registry(Arc::default());
    let names = reg.names();
    for k in PolicyKind::ALL {
        assert!(names.contains(&k.name()), "{k}");
        let rm = ResourceManager::with_registry(ManagerConfig::default(), &k.into(), &reg)
            .unwrap_or_else(|e| panic!("{k}: {e}"));
        // `irs` is venn with tier matching off and reports itself so.
        assert_eq!(rm.policy_name(), k.name());
    }
    assert_eq!(names.last(), Some(&"largest-demand-first"));
    let cfg = policy("[policy]\nname = \"venn\"\nepsilon = 1.5\n[policy.tiers]\nv = 3\n");
    assert!(ResourceManager::with_registry(ManagerConfig::default(), &cfg, &reg).is_ok());
}

#[test]
fn an_unknown_name_is_an_error_listing_the_registrys_names() {
    let reg = registry(Arc::default());
    let cfg = policy("[policy]\nname = \"largest-demand-frist\"\n");
    let e = ResourceManager::with_registry(ManagerConfig::default(), &cfg, &reg)
        .unwrap_err()
        .to_string();
    assert!(e.contains("largest-demand-frist"), "{e}");
    for name in reg.names() {
        assert!(e.contains(name), "{e} lacks {name}");
    }
    // Without the registration, the built-in registry does not know it either.
    let cfg = policy("policy = \"largest-demand-first\"");
    let e = ResourceManager::with_policy(ManagerConfig::default(), &cfg).unwrap_err();
    assert!(matches!(e, CoreError::UnknownPolicy(..)), "{e}");
    assert!(e.to_string().contains("random-order"), "{e}");
}

#[test]
fn an_unknown_key_is_an_error_naming_it() {
    let reg = registry(Arc::default());
    // A custom policy's args are checked by its own type when it is built.
    let cfg = policy("[policy]\nname = \"largest-demand-first\"\nreversed = true\n");
    let e = ResourceManager::with_registry(ManagerConfig::default(), &cfg, &reg)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("reversed") && e.contains("largest-demand-first"),
        "{e}"
    );
    // A built-in policy's keys are checked when the config is parsed.
    let e = toml::from_str::<Driver>("[policy]\nname = \"random-delay\"\ndelay = 2.0\n")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("delay") && e.contains("delay_scale"), "{e}");
}

#[test]
fn a_name_can_be_registered_once() {
    let mut reg = registry(Arc::default());
    let e = reg
        .register("venn", |_: policy::NoParams| Ok(Box::new(policy::Fifo)))
        .err()
        .unwrap();
    assert_eq!(e, CoreError::DuplicatePolicy("venn".into()));
    assert!(
        reg.register("largest-demand-first", |_: policy::NoParams| Ok(Box::new(
            policy::Fifo
        )))
        .is_err()
    );
}
