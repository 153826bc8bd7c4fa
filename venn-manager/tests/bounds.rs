//! What anonymous check-ins can make the manager hold: a flood of invented profiles
//! folds into the class cap, in memory and in SQLite, and a restart restores the same
//! supply; long tag lists (interned by the core) classify exactly.

use crate::common;

use common::*;
use std::time::Instant;
use venn_api::manager::{CheckIn, RegisterJob};
use venn_core::{DeviceProfile, GroupIdx, Requirement};
use venn_manager::{Clock, Manager, Settings};

fn invented(i: u64) -> DeviceProfile {
    DeviceProfile::new(1.0 + (i % 3) as f64, 4.0, 10.0).with_speed(50.0 + i as f64 * 1e-3, 9_000.0)
}

fn check_in(m: &Manager, device: u64, profile: DeviceProfile) {
    m.check_in(CheckIn {
        device_id: device,
        profile,
        online_for_s: None,
    })
    .unwrap();
}

fn job(m: &Manager, name: &str, requirement: Requirement) {
    m.register_job(RegisterJob {
        name: name.into(),
        requirement,
        rounds: 2,
        model_size_bytes: 1_000,
        plan_url: "http://127.0.0.1:9/plan".into(),
        task_cost: None,
        statement: None,
    })
    .unwrap();
}

fn stored_rows(db: &std::path::Path) -> i64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM checkins", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_flood_of_invented_profiles_is_folded_in_memory_and_on_disk() {
    let settings = Settings {
        max_profile_classes: Some(64),
        ..Settings::default()
    };
    let (m, clock, db) = manager_with("bounds-flood", settings.clone());
    job(&m, "any", Requirement::any());
    job(
        &m,
        "fast-cpu",
        Requirement {
            min_cpu_score: 2.0,
            ..Requirement::any()
        },
    );
    for i in 0..20_000u64 {
        check_in(&m, i, invented(i));
        if i % 5_000 == 0 {
            clock.advance(1.0);
            m.flush_checkins().unwrap();
        }
    }
    m.flush_checkins().unwrap();
    let (classes, supply) = m.with_core(|core, _| {
        (
            core.supply().classes().len(),
            [0u16, 1].map(|g| core.supply().group_supply(GroupIdx(g))),
        )
    });
    assert!(classes <= 2 * 64 + 1, "{classes} classes");
    let fast = (0..20_000u64).filter(|i| i % 3 != 0).count() as u64;
    assert_eq!(supply, [20_000, fast], "every check-in still counts");
    let rows = stored_rows(&db);
    assert!(
        rows <= 2 * (2 * 64 + 1),
        "{rows} stored rows (two buckets at most)"
    );
    drop(m);

    let m = Manager::open(settings, &db, Clock::manual(clock.now().secs())).unwrap();
    let (classes, restored) = m.with_core(|core, _| {
        (
            core.supply().classes().len(),
            [0u16, 1].map(|g| core.supply().group_supply(GroupIdx(g))),
        )
    });
    assert!(classes <= 2 * 64 + 1, "{classes} classes after the restart");
    assert_eq!(restored, supply, "the restart restores the same supply");
}

#[test]
fn long_tag_lists_classify_exactly() {
    let (m, _, _) = manager("bounds-tags");
    // 32 groups, each requiring 32 tags of 64 bytes that share a 60-byte prefix (the
    // costliest strings to compare pairwise).
    let tag = |g: usize, k: usize| format!("{}{g:02}{k:02}", "t".repeat(60));
    for g in 0..32 {
        job(
            &m,
            &format!("tags-{g}"),
            Requirement {
                tags: (0..32).map(|k| tag(g, k)).collect(),
                ..Requirement::any()
            },
        );
    }
    let t0 = Instant::now();
    let n = 3_000u64;
    for i in 0..n {
        let mut p = invented(i);
        p.tags = (0..32).map(|k| tag((i % 32) as usize, k)).collect();
        check_in(&m, i, p);
    }
    // Timing is for benchmarks; printed here for a look with --nocapture.
    println!(
        "{:.1} µs per check-in of a new 32-tag profile against 32 groups of 32 tags",
        t0.elapsed().as_secs_f64() / n as f64 * 1e6
    );
    let eligible = m.with_core(|core, _| {
        (0..32u16)
            .map(|g| core.supply().group_supply(GroupIdx(g)))
            .collect::<Vec<_>>()
    });
    assert!(
        eligible.iter().all(|&s| s == n / 32 || s == n / 32 + 1),
        "{eligible:?}"
    );
}
