//! The `random-delay` and `chunked` policies: delays scale with congestion and keep
//! devices away until they expire; chunks fit the eligible supply and run in turn.

use venn_core::policy::{ChunkedParams, RandomDelayParams};
use venn_core::*;

fn manager(policy: PolicyConfig, seed: u64) -> ResourceManager {
    ResourceManager::with_policy(
        ManagerConfig {
            supply: SupplyConfig {
                window_s: 100.0,
                buckets: 10,
                ..SupplyConfig::default()
            },
            seed,
            ..ManagerConfig::default()
        },
        &policy,
    )
    .unwrap()
}

/// Registers `n` jobs any device may serve, at time 0.
fn register_any(rm: &mut ResourceManager, n: usize) -> Vec<JobId> {
    (0..n)
        .map(|i| {
            rm.register_job(JobSpec::new(format!("j{i}"), Requirement::any()), Time(0.0))
                .unwrap()
        })
        .collect()
}

fn phone() -> DeviceProfile {
    DeviceProfile::new(1.0, 1.0, 1.0)
}

/// One check-in per second for 100 s with no job open: the supply rate becomes 1/s.
fn warm_up(rm: &mut ResourceManager) {
    for i in 0..100 {
        assert_eq!(
            rm.check_in(DeviceId(10_000 + i), &phone(), Time(i as f64)),
            Decision::NoTask
        );
    }
}

fn request(demand: u32, now: f64, deadline_in: f64) -> RoundRequest {
    RoundRequest {
        demand,
        deadline: Time(now + deadline_in),
        min_response_fraction: 1.0,
        close_at: None,
    }
}

#[test]
fn random_delays_are_uniform_over_the_congestion_window() {
    // Rate 1/s; four jobs of demand 50 queued before the last: the last job's Δ is
    // (4·50 + 50) / 1 = 250 s, so its delay is uniform in [0, 250].
    let mut delays = Vec::new();
    for seed in 0..400 {
        let mut rm = manager(PolicyConfig::named("random-delay"), seed);
        // The warm-up must see the group, or its check-ins count for no job.
        let jobs = register_any(&mut rm, 5);
        warm_up(&mut rm);
        let now = 100.0;
        for j in &jobs {
            rm.submit_request(*j, request(50, now, 10_000.0), Time(now))
                .unwrap();
        }
        let last = rm.job(jobs[4]).unwrap().current.as_ref().unwrap();
        delays.push(last.not_before.secs() - now);
    }
    let max = delays.iter().cloned().fold(0.0, f64::max);
    let min = delays.iter().cloned().fold(f64::INFINITY, f64::min);
    let mean = delays.iter().sum::<f64>() / delays.len() as f64;
    assert!(
        min >= 0.0 && max <= 250.0 + 1e-9,
        "delays in [{min}, {max}]"
    );
    assert!(
        max > 225.0 && min < 25.0,
        "delays cover the window: [{min}, {max}]"
    );
    assert!(
        (mean - 125.0).abs() < 12.0,
        "mean delay {mean}, expected ≈125"
    );
}

#[test]
fn a_delayed_request_gets_no_device_before_its_start() {
    let mut rm = manager(PolicyConfig::named("random-delay"), 3);
    let a = rm
        .register_job(JobSpec::new("a", Requirement::any()), Time(0.0))
        .unwrap();
    warm_up(&mut rm);
    rm.submit_request(a, request(200, 100.0, 10_000.0), Time(100.0))
        .unwrap();
    let start = rm.job(a).unwrap().current.as_ref().unwrap().not_before;
    assert!(
        start.secs() > 100.0,
        "Δ = 200 s makes a zero delay unlikely"
    );
    let before = rm.check_in(DeviceId(1), &phone(), Time(start.secs() - 0.5));
    assert_eq!(before, Decision::NoTask);
    let after = rm.check_in(DeviceId(2), &phone(), start);
    assert!(matches!(after, Decision::Assigned { job, .. } if job == a));
}

#[test]
fn per_job_delays_shift_only_the_first_round() {
    let mut rm = manager(PolicyConfig::named("random-delay"), 5);
    let a = rm
        .register_job(JobSpec::new("a", Requirement::any()), Time(0.0))
        .unwrap();
    warm_up(&mut rm);
    let r0 = rm
        .submit_request(a, request(100, 100.0, 10_000.0), Time(100.0))
        .unwrap();
    let start = rm.job(a).unwrap().current.as_ref().unwrap().not_before;
    rm.close_round(a, r0, RoundOutcome::Success, start + 1.0)
        .unwrap();
    let t = start.secs() + 2.0;
    rm.submit_request(a, request(100, t, 10_000.0), Time(t))
        .unwrap();
    assert_eq!(
        rm.job(a).unwrap().current.as_ref().unwrap().not_before,
        Time(t)
    );

    let mut per_round = manager(
        PolicyConfig::RandomDelay(RandomDelayParams {
            delay_per_round: true,
            ..RandomDelayParams::default()
        }),
        5,
    );
    let b = per_round
        .register_job(JobSpec::new("b", Requirement::any()), Time(0.0))
        .unwrap();
    warm_up(&mut per_round);
    let mut later = 0;
    let mut t = 100.0;
    for _ in 0..10 {
        let r = per_round
            .submit_request(b, request(100, t, 10_000.0), Time(t))
            .unwrap();
        let nb = per_round
            .job(b)
            .unwrap()
            .current
            .as_ref()
            .unwrap()
            .not_before;
        later += usize::from(nb.secs() > t);
        per_round
            .close_round(b, r, RoundOutcome::Success, Time(t + 1.0))
            .unwrap();
        t += 2.0;
    }
    assert!(
        later >= 9,
        "every round draws a fresh delay ({later}/10 delayed)"
    );
}

#[test]
fn a_job_that_does_not_fit_waits_for_the_running_chunk() {
    // Rate 1/s and 100 s deadlines: a chunk holds 100 devices of per-round demand.
    for backfill in [false, true] {
        let params = ChunkedParams {
            chunk_backfill: backfill,
        };
        let mut rm = manager(PolicyConfig::Chunked(params), 1);
        let ids = register_any(&mut rm, 3);
        warm_up(&mut rm);
        let now = 100.0;
        // 40 + 50 fit in one chunk; the third job's 30 does not.
        for (j, d) in ids.iter().zip([40, 50, 30]) {
            rm.submit_request(*j, request(d, now, 100.0), Time(now))
                .unwrap();
        }
        let mut got = [0u32; 3];
        for i in 0..120 {
            if let Decision::Assigned { job, .. } =
                rm.check_in(DeviceId(i), &phone(), Time(now + 0.5))
            {
                got[ids.iter().position(|x| *x == job).unwrap()] += 1;
            }
        }
        assert_eq!(got[0], 40);
        assert_eq!(got[1], 50);
        assert_eq!(got[2], if backfill { 30 } else { 0 }, "backfill {backfill}");
        if !backfill {
            // Once the first chunk's jobs are done, the second chunk runs.
            rm.job_finished(ids[0], Time(now + 1.0)).unwrap();
            rm.job_finished(ids[1], Time(now + 1.0)).unwrap();
            let d = rm.check_in(DeviceId(999), &phone(), Time(now + 2.0));
            assert!(matches!(d, Decision::Assigned { job, .. } if job == ids[2]));
        }
    }
}
