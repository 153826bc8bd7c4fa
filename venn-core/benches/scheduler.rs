//! Scheduler overhead: one planning pass with 1,000 active jobs in 100 groups, and one
//! check-in decision with 1,000 active jobs, per policy.
//!
//! Run: `cargo bench -p venn-core --bench scheduler`
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use venn_core::*;

const JOBS: usize = 1000;
const GROUPS: usize = 100;
const PROFILES: usize = 1000;

fn requirement(g: usize) -> Requirement {
    // 100 distinct requirements over overlapping score thresholds and a tag.
    let mut r = Requirement::scores((g % 10) as f64, ((g / 10) % 5) as f64 * 100.0, 0.0);
    if g >= 50 {
        r = r.with_tag("wifi");
    }
    r
}

fn profile(i: usize) -> DeviceProfile {
    let mut p = DeviceProfile::new((i % 11) as f64, ((i / 11) % 6) as f64 * 100.0, 10.0)
        .with_speed(
            20.0 + (i % 17) as f64 * 10.0,
            2000.0 + (i % 13) as f64 * 1500.0,
        );
    if !i.is_multiple_of(3) {
        p.tags.push("wifi".into());
    }
    p
}

fn loaded(policy: &str) -> ResourceManager {
    let mut rm =
        ResourceManager::with_policy(ManagerConfig::default(), &PolicyConfig::named(policy))
            .unwrap();
    for i in 0..20_000 {
        rm.check_in(
            DeviceId(i as u64),
            &profile(i % PROFILES),
            Time(i as f64 * 0.1),
        );
    }
    let now = Time(2000.0);
    for j in 0..JOBS {
        let id = rm
            .register_job(
                JobSpec::new(format!("j{j}"), requirement(j % GROUPS)).with_rounds(50),
                now,
            )
            .unwrap();
        let req = RoundRequest {
            demand: 1_000_000_000,
            deadline: Time(1e12),
            min_response_fraction: 0.8,
            close_at: None,
        };
        rm.submit_request(id, req, now).unwrap();
    }
    rm.replan(now);
    rm
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("plan_1000_jobs_100_groups");
    for policy in ["venn", "srsf"] {
        let mut rm = loaded(policy);
        g.bench_function(policy, |b| b.iter(|| rm.replan(black_box(Time(2001.0)))));
    }
    g.finish();
    let mut g = c.benchmark_group("check_in_1000_jobs");
    for policy in ["venn", "random", "fifo", "srsf"] {
        let mut rm = loaded(policy);
        let profiles: Vec<DeviceProfile> = (0..PROFILES).map(profile).collect();
        let mut i = 0usize;
        g.bench_function(policy, |b| {
            b.iter_batched(
                || {
                    i += 1;
                    i
                },
                |i| {
                    black_box(rm.check_in(
                        DeviceId(i as u64),
                        &profiles[i % PROFILES],
                        Time(2001.0),
                    ))
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
