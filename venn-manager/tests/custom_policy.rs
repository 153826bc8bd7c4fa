//! A policy registered in the test, run by the live manager: `Manager::open_with_registry`
//! builds it from the settings' policy table, a device checks in and is placed by it,
//! and a restart on the same database restores its state through the same registry.

use crate::common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::*;
use serde::Deserialize;
use venn_core::policy::{DeviceCtx, SchedView};
use venn_core::{JobId, JobState, Policy, PolicyConfig, PolicyRegistry, SeededRng};
use venn_manager::{Clock, Manager, Settings, router};

/// Arguments of `newest-first`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct NewestArgs {
    /// Serve the oldest job first instead.
    oldest: bool,
}

/// The most recently registered job first.
#[derive(Debug)]
struct NewestFirst(NewestArgs);

impl Policy for NewestFirst {
    fn name(&self) -> &'static str {
        "newest-first"
    }
    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        let t = job.id.0 as f64;
        if self.0.oldest { t } else { -t }
    }
    fn select(&mut self, v: &SchedView<'_>, d: &DeviceCtx<'_>, _: &mut SeededRng) -> Option<JobId> {
        v.best_head(d)
    }
}

fn registry() -> PolicyRegistry {
    let mut r = PolicyRegistry::builtin();
    r.register("newest-first", |a: NewestArgs| Ok(Box::new(NewestFirst(a))))
        .unwrap();
    r
}

/// Settings whose policy is `json` (the table form or a bare name).
fn settings(json: &str) -> Settings {
    Settings {
        policy: serde_json::from_str::<PolicyConfig>(json).unwrap(),
        ..Settings::default()
    }
}

async fn open_round(app: &axum::Router, name: &str) -> u64 {
    let (job, token) = register(app, name).await;
    let (s, v) = call(
        app,
        "POST",
        &format!("/v1/jobs/{job}/rounds"),
        Some(&token),
        Some(r#"{"demand":2,"deadline_s":60,"min_response_fraction":0.5}"#),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    job
}

#[tokio::test]
async fn a_custom_policy_places_check_ins_in_the_manager() {
    let db = temp_db("custom-policy");
    let clock = Clock::manual(1000.0);
    let reg = registry();
    let m = Arc::new(
        Manager::open_with_registry(
            settings(r#"{"name": "newest-first"}"#),
            &reg,
            &db,
            clock.clone(),
        )
        .unwrap(),
    );
    let app = router(m.clone());
    let _old = open_round(&app, "old").await;
    let new = open_round(&app, "new").await;
    let (s, v) = check_in(&app, 7, 1.0).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["assignment"]["job_id"].as_u64(), Some(new), "{v}");
    let (_, status) = call(&app, "GET", "/v1/status", None, None).await;
    assert_eq!(status["policy"], "newest-first", "{status}");
    drop(app);
    drop(m);

    // Restarted with its args changed: the restored rounds are served by the same code.
    let m = Arc::new(
        Manager::open_with_registry(
            settings(r#"{"name": "newest-first", "oldest": true}"#),
            &reg,
            &db,
            clock,
        )
        .unwrap(),
    );
    let app = router(m);
    let (s, v) = check_in(&app, 8, 1.0).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_ne!(v["assignment"]["job_id"].as_u64(), Some(new), "{v}");
}

#[test]
fn an_unknown_policy_or_argument_is_refused_at_open() {
    let reg = registry();
    let db = temp_db("custom-policy-unknown");
    let e =
        Manager::open_with_registry(settings(r#""newest-frist""#), &reg, &db, Clock::manual(0.0))
            .err()
            .unwrap()
            .to_string();
    assert!(
        e.contains("newest-frist") && e.contains("newest-first") && e.contains("venn"),
        "{e}"
    );
    let e = Manager::open_with_registry(
        settings(r#"{"name": "newest-first", "olderst": true}"#),
        &reg,
        &db,
        Clock::manual(0.0),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("olderst"), "{e}");
    // The built-in registry does not know it.
    let e = Manager::open(settings(r#""newest-first""#), &db, Clock::manual(0.0))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("unknown policy"), "{e}");
}
