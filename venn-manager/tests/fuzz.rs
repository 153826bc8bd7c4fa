//! Property test of the API surface: arbitrary methods, paths and bodies (including
//! near-valid JSON, and statements of work with admission control on) never make the
//! service panic or answer 5xx, and every error body is JSON with an error code.

use crate::common;

use common::*;
use proptest::prelude::*;
use venn_manager::router;

/// `cases` cases from a fixed seed, so a CI run is reproducible; set
/// `PROPTEST_RNG_SEED` to explore other inputs.
fn config(cases: u32) -> ProptestConfig {
    let mut c = ProptestConfig {
        cases,
        ..ProptestConfig::default()
    };
    if matches!(c.rng_seed, proptest::test_runner::RngSeed::Random) {
        c.rng_seed = proptest::test_runner::RngSeed::Fixed(0x7e57_5eed);
    }
    c
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/v1/jobs".to_string()),
        (0u64..3).prop_map(|j| format!("/v1/jobs/{j}")),
        (0u64..3).prop_map(|j| format!("/v1/jobs/{j}/rounds")),
        (0u64..3, 0u32..3).prop_map(|(j, r)| format!("/v1/jobs/{j}/rounds/{r}")),
        (0u64..3, 0u32..3).prop_map(|(j, r)| format!("/v1/jobs/{j}/rounds/{r}/close")),
        (0u64..3).prop_map(|j| format!("/v1/jobs/{j}/finish")),
        Just("/v1/check-in".to_string()),
        "[a-z0-9]{0,8}".prop_map(|t| format!("/v1/tasks/{t}/finished")),
        "/[a-z/%0-9]{0,20}",
    ]
}

fn body() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some(job_body("f", 0.0))),
        Just(Some(checkin_body(1, 1.0))),
        (any::<i64>(), any::<f64>(), any::<f64>())
            .prop_map(|(d, s, f)| Some(format!(r#"{{"demand":{d},"deadline_s":{s},"min_response_fraction":{f}}}"#))),
        Just(Some(r#"{"outcome":"abort"}"#.to_string())),
        ".{0,40}".prop_map(Some),
        (any::<u64>(), any::<f64>(), "[a-z]{0,5}").prop_map(|(d, x, t)| Some(format!(
            r#"{{"device_id":{d},"profile":{{"cpu_score":{x},"mem_score":1,"os_version":1,"ms_per_sample":{x},"bandwidth_kbps":1,"tags":["{t}"]}}}}"#
        ))),
    ]
}

proptest! {
    #![proptest_config(config(300))]
    #[test]
    fn no_request_panics_or_errors_with_5xx(reqs in prop::collection::vec((prop::sample::select(vec!["GET", "POST", "DELETE", "PUT"]), path(), body(), any::<bool>()), 1..25)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (m, clock, _db) = manager(&format!("fuzz-{}", rand_suffix()));
            let app = router(m.clone());
            let (_, reg) = call(&app, "POST", "/v1/jobs", None, Some(&job_body("seed", 0.0))).await;
            let token = reg["token"].as_str().unwrap().to_string();
            for (method, uri, body, authed) in reqs {
                let (s, v) = call(&app, method, &uri, authed.then_some(token.as_str()), body.as_deref()).await;
                prop_assert!(!s.is_server_error(), "{} {} -> {} {}", method, uri, s, v);
                if s.is_client_error() && s != axum::http::StatusCode::METHOD_NOT_ALLOWED {
                    prop_assert!(v["error"]["code"].is_string(), "{} {} -> {} {}", method, uri, s, v);
                }
                clock.advance(1.0);
                prop_assert!(m.sweep().is_ok());
            }
            Ok(())
        })?;
    }
}

fn statement() -> impl Strategy<Value = String> {
    prop_oneof![valid_statement(), any_statement()]
}

/// Statements the controller plans for (and admits or declines).
fn valid_statement() -> impl Strategy<Value = String> {
    (1.0f64..1000.0, 1u32..10, 1u32..50, 30.0f64..120.0).prop_map(|(v, r, d, s)| {
        format!(r#"{{"value":[[0,{v}],[900,0]],"rounds":[[{r},1]],"demand":{d},"round_s":{s}}}"#)
    })
}

/// Statements of every shape, mostly invalid.
fn any_statement() -> impl Strategy<Value = String> {
    (
        any::<f64>(),
        prop::collection::vec((0u32..100, 0.0f64..1.0), 0..4),
        any::<i64>(),
        any::<f64>(),
        prop::option::of(any::<f64>()),
    )
        .prop_map(|(v, rounds, demand, round_s, wait)| {
            let rounds: Vec<String> = rounds.iter().map(|(r, p)| format!("[{r},{p}]")).collect();
            let wait = wait.map_or(String::new(), |w| format!(r#","max_wait_s":{w}"#));
            format!(
                r#"{{"value":[[0,{v}],[600,0]],"rounds":[{}],"demand":{demand},"round_s":{round_s}{wait}}}"#,
                rounds.join(",")
            )
        })
}

proptest! {
    #![proptest_config(config(100))]
    /// The same with admission control on: statements of every shape, check-ins, and the
    /// ticker closing slots (which may evict) as the clock runs.
    #[test]
    fn with_admission_no_request_panics_or_errors_with_5xx(reqs in prop::collection::vec((prop::sample::select(vec!["GET", "POST", "DELETE"]), path(), prop_oneof![body(), statement().prop_map(|s| Some(job_with_statement("s", &s)))], 0.0f64..90.0), 1..25)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (m, clock, _db) = manager_with(&format!("fuzz-adm-{}", rand_suffix()), admission_settings());
            let app = router(m.clone());
            for d in 0..20 {
                check_in(&app, d, 1.0).await;
            }
            for (method, uri, body, dt) in reqs {
                let (s, v) = call(&app, method, &uri, None, body.as_deref()).await;
                prop_assert!(!s.is_server_error(), "{} {} -> {} {}", method, uri, s, v);
                if s.is_client_error() && s != axum::http::StatusCode::METHOD_NOT_ALLOWED {
                    prop_assert!(v["error"]["code"].is_string(), "{} {} -> {} {}", method, uri, s, v);
                }
                clock.advance(dt);
                prop_assert!(m.tick_admission().is_ok());
            }
            Ok(())
        })?;
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}
