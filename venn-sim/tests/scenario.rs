//! A hand-computed scenario: 3 jobs, 13 check-ins, FIFO by job arrival, no
//! dispatch noise and no grace period. Every round's close time and every JCT
//! below was worked out on paper from the semantics in `venn_sim::engine`.
//!
//! Devices are "fast" (78 ms/sample, 13736 kbit/s: a 30 s + 10 s task takes
//! 40 s) or "slow" (156 ms/sample: 70 s). Specs: 1 = General, 2 = Compute-Rich
//! (which implies General). Jobs:
//!
//! | job | arrives | spec | demand | rounds | deadline | fraction | needs |
//! |---|---|---|---|---|---|---|---|
//! | J0 | 0 | 1 | 2 | 2 | 100 | 1.0 | 2 results |
//! | J1 | 5 | 2 | 1 | 1 | 50 | 1.0 | 1 result |
//! | J2 | 10 | 1 | 4 | 1 | 100 | 0.5 | 2 results |
//!
//! Timeline (check-in `i` at time t, online until u):
//! - i0 t=1 {1} fast → J0; result at 41.
//! - i1 t=12 {1,2} fast → J0 (FIFO: J0 arrived first); J0 fully assigned at
//!   12; the device leaves at 30 before its result (52): lost.
//! - i2 t=20 {1,2} fast → J1, fully assigned at 20; result due 60.
//! - i3 t=25 {1} slow → J2; result at 95.
//! - t=55 J1's deadline: 1 dispatched, 0 returned → abort, retried at 55.
//! - i4 t=56 {1,2} fast → J1 (arrived before J2); result at 96 → J1 done at 96.
//! - t=60 i2's result belongs to J1's aborted attempt: a straggler.
//! - i5 t=61 {1} slow → J2 (2 of 4 dispatched); result due 131.
//! - t=100 J0's deadline: 2 dispatched, 1 returned of 2 needed → abort, retry.
//! - t=110 J2's deadline: 2 ≥ 0.5×4 dispatched and 1 ≥ 0.5×min(2,4) returned
//!   → success under the authors' deadline rule; J2 done at 110, never fully
//!   assigned: its scheduling delay ends at 25, when the device whose result it
//!   used (i3) was assigned, and 25–110 is response collection.
//! - i6 t=120 {} → eligible for nothing.
//! - i7 t=130, i8 t=140 → J0 (fully assigned at 140); results 170, 180 →
//!   J0 round 0 succeeds at 180; round 1 opens (deadline 280).
//! - i9 t=190 → J0, result 230; i10 t=195 (online until 215) → J0, lost.
//! - t=280 J0 round 1: 1 of 2 → abort, retry (deadline 380).
//! - i11 t=300 → J0, result 340; i12 t=309 slow → J0, result 379 → J0 done.

use venn_core::{FitRule, PolicyRegistry, RoundOutcome};
use venn_sim::engine::{
    AfterClose, Dispatch, RoundClose, SimConfig, SimError, SimHooks, SimInput, TaskResult, run,
    run_with_hooks,
};
use venn_traces::{
    AvailabilityTrace, CapacityTable, CheckInRow, DeviceCapacity, DeviceCatalog, EligibilityTable,
    JobRow, Spec, SpecMask, SpecTable,
};

const FAST: f64 = 78.0;
const SLOW: f64 = 156.0;

fn specs() -> SpecTable {
    SpecTable::from_specs(vec![
        Spec {
            id: 1,
            name: "General".into(),
            min_fp16_memory: 10.0,
            min_cpu_f: 1.0,
            min_android_os: 6.0,
        },
        Spec {
            id: 2,
            name: "Compute-Rich".into(),
            min_fp16_memory: 10.0,
            min_cpu_f: 7.0,
            min_android_os: 6.0,
        },
    ])
}

fn job(
    idx: u32,
    arrival: f64,
    spec: u8,
    demand: u32,
    rounds: u32,
    deadline: f64,
    frac: f64,
) -> JobRow {
    JobRow {
        idx,
        arrival_s: arrival,
        config_id: 1,
        demand,
        rounds,
        deadline_s: deadline,
        workload_s: 30.0,
        comm_s: 10.0,
        min_response_fraction: frac,
        spec_id: spec,
        spec_name: if spec == 1 { "General" } else { "Compute-Rich" }.into(),
    }
}

fn scenario() -> SimInput {
    let g = SpecMask(0b01);
    let gc = SpecMask(0b11);
    let none = SpecMask(0);
    // (start, online until, eligibility, ms/sample)
    let checkins = [
        (1.0, 100.0, g, FAST),
        (12.0, 30.0, gc, FAST),
        (20.0, 200.0, gc, FAST),
        (25.0, 200.0, g, SLOW),
        (56.0, 300.0, gc, FAST),
        (61.0, 300.0, g, SLOW),
        (120.0, 300.0, none, FAST),
        (130.0, 300.0, g, FAST),
        (140.0, 300.0, gc, FAST),
        (190.0, 400.0, g, FAST),
        (195.0, 215.0, g, FAST),
        (300.0, 500.0, g, FAST),
        (309.0, 500.0, gc, SLOW),
    ];
    let rows = checkins
        .iter()
        .enumerate()
        .map(|(i, c)| CheckInRow::new(i as u32, c.0, c.1))
        .collect();
    let catalog = DeviceCatalog {
        capacity: CapacityTable::from_rows(
            checkins
                .iter()
                .enumerate()
                .map(|(i, c)| DeviceCapacity {
                    client_id: i as u32 + 1,
                    ms_per_sample: c.3,
                    bandwidth_kbps: 13_736.0,
                })
                .collect(),
        ),
        eligibility: EligibilityTable::from_masks(checkins.iter().map(|c| c.2).collect()),
        specs: specs(),
    };
    let jobs = [
        job(0, 0.0, 1, 2, 2, 100.0, 1.0),
        job(1, 5.0, 2, 1, 1, 50.0, 1.0),
        job(2, 10.0, 1, 4, 1, 100.0, 0.5),
    ];
    SimInput::new(
        AvailabilityTrace::from_rows(rows),
        &catalog,
        &jobs,
        Some(1),
        1.0,
    )
    .unwrap()
}

/// The scenario checks the path where a device leaves mid-task and loses its result
/// (i1, i10), so devices take every offered job (`fit = any`); under the default
/// nominal-time rule they refuse instead (`nominal_fit_rule_scenario`).
fn config() -> SimConfig {
    SimConfig {
        policy: "fifo".into(),
        grace_s: 0.0,
        window_s: 1000.0,
        dispatch_jitter_s: 0.0,
        fit: FitRule::Any,
        ..SimConfig::default()
    }
}

/// The same input under the authors' rule: a device takes a job only if its nominal 40 s
/// task fits before it leaves. Worked out on paper:
/// - i0 t=1 → J0 (result 41); i1 t=12, online until 30: 18 s left, so it refuses J0 and
///   takes nothing; i2 t=20 → J0 (result 60), J0 fully assigned.
/// - i3 t=25 {1} slow → J2 (result 95). J1's deadline at 55: nothing dispatched → abort,
///   retry; i4 t=56 → J1, result 96 → J1 done (JCT 91).
/// - J0 round 0 succeeds at 60 (results 41, 60); round 1 opens (deadline 160).
///   i5 t=61 slow → J0 (result 131); i7 t=130 → J0 (result 170, too late) → abort at 160.
/// - J2's deadline at 110: 1 of 4 dispatched < 0.5 × 4 → abort (deadline 210); i8 t=140 →
///   J2 (result 180); at 210 still 1 dispatched → abort.
/// - J0 retry (deadline 260): i9 t=190 → J0; i10 t=195, online until 215, refuses → abort
///   at 260. Retry (deadline 360): i11 t=300 → J0 (340); i12 t=309 slow → J0 (379, late)
///   → abort at 360. No check-ins follow, so J0 and J2 abort every 100 s to the horizon.
#[test]
fn nominal_fit_rule_scenario() {
    #[derive(Default)]
    struct Devices(Vec<u64>);
    impl SimHooks for Devices {
        fn on_dispatch(&mut self, d: &Dispatch) {
            self.0.push(d.device);
        }
    }
    let cfg = SimConfig {
        fit: FitRule::Nominal,
        ..config()
    };
    let mut seen = Devices::default();
    let r = run_with_hooks(
        &scenario(),
        &cfg,
        &PolicyRegistry::builtin(),
        &mut seen,
        |_, _| {},
    )
    .unwrap();
    // Devices 1 and 10 refuse (too little time left), 6 is eligible for nothing.
    assert_eq!(seen.0, vec![0, 2, 3, 4, 5, 7, 8, 9, 11, 12]);
    let j: Vec<_> = r
        .jobs
        .iter()
        .map(|j| (j.idx, j.finish_s, j.rounds, j.aborted_rounds))
        .collect();
    assert_eq!(
        j,
        vec![(0, None, 1, 9), (1, Some(96.0), 1, 1), (2, None, 0, 9)]
    );
    // Nobody took a task it would leave before finishing (the slow devices' late results
    // still arrive: they are stragglers, not failures).
    assert_eq!(r.summary.tasks_failed, 0);
    assert_eq!((r.summary.results, r.summary.stragglers), (8, 2));
}

#[test]
fn hand_computed_scenario() {
    let r = run(&scenario(), &config()).unwrap();
    let j: Vec<_> = r
        .jobs
        .iter()
        .map(|j| (j.idx, j.finish_s, j.jct_s, j.rounds, j.aborted_rounds))
        .collect();
    assert_eq!(
        j,
        vec![
            (0, Some(379.0), 379.0, 2, 2),
            (1, Some(96.0), 91.0, 1, 1),
            (2, Some(110.0), 100.0, 1, 0),
        ]
    );
    // Per-job sums over round attempts (fulfil − open, close − fulfil; J2, never
    // fully assigned, splits at its used device's assignment, 25).
    let sd: Vec<f64> = r.jobs.iter().map(|j| j.sched_delay_s).collect();
    let rc: Vec<f64> = r.jobs.iter().map(|j| j.response_collection_s).collect();
    assert_eq!(sd, vec![12.0 + 40.0 + 15.0 + 29.0, 15.0 + 1.0, 15.0]);
    assert_eq!(rc, vec![88.0 + 40.0 + 85.0 + 70.0, 35.0 + 40.0, 85.0]);
    let s = &r.summary;
    assert_eq!((s.finished, s.unfinished), (3, 0));
    assert_eq!(s.avg_jct_s, (379.0 + 91.0 + 100.0) / 3.0);
    assert_eq!(s.check_ins, 13);
    assert_eq!(s.assignments, 12);
    assert_eq!(s.results, 8);
    assert_eq!(s.tasks_failed, 2);
    assert_eq!(s.rounds_succeeded, 4);
    assert_eq!(s.rounds_aborted, 3);
    assert_eq!(s.end_time_s, 379.0);
}

#[test]
fn jct_is_the_sum_of_round_times() {
    // Rounds follow each other back to back, so the core's per-round records
    // add up to the JCT.
    let r = run(&scenario(), &config()).unwrap();
    // J0 closes at 100 (abort), 180, 280 (abort), 379; J1 at 55 (abort), 96; J2 at 110.
    let sum = |i: usize| r.jobs[i].sched_delay_s + r.jobs[i].response_collection_s;
    assert_eq!(sum(0), 379.0);
    assert_eq!(sum(1), 91.0);
    assert_eq!(sum(2), 100.0);
}

#[test]
fn horizon_censors_unfinished_jobs() {
    let cfg = SimConfig {
        horizon_s: Some(200.0),
        ..config()
    };
    let r = run(&scenario(), &cfg).unwrap();
    assert_eq!(r.jobs[0].finish_s, None);
    assert_eq!(r.jobs[0].jct_s, 200.0);
    assert_eq!(r.jobs[0].rounds, 1);
    assert_eq!((r.summary.finished, r.summary.unfinished), (2, 1));
    assert_eq!(r.summary.avg_jct_s, (200.0 + 91.0 + 100.0) / 3.0);
    assert_eq!(r.summary.avg_jct_finished_s, (91.0 + 100.0) / 2.0);
}

#[test]
fn grace_keeps_devices_online_longer() {
    // With 30 s of grace i1 (online until 30+30=60) returns its result at 52,
    // so J0's first attempt succeeds at 52 instead of aborting at 100.
    let cfg = SimConfig {
        grace_s: 30.0,
        ..config()
    };
    let r = run(&scenario(), &cfg).unwrap();
    assert!(r.jobs[0].aborted_rounds < 2);
    assert!(r.jobs[0].jct_s < 379.0);
}

#[test]
fn multi_assign_offers_a_device_again_after_its_result() {
    // i0 returns its result at 41 while online until 100; with more than one
    // assignment per check-in it is offered again at 41 and J2 takes it (J0's
    // round already has it): result at 81. i2's straggler result at 60 frees
    // it too, so J2 gets it at 60 and i5 at 61 fills J2's fourth slot. i0's
    // result at 81 and i3's at 95 make J2's two: it succeeds at 95 instead of
    // at its deadline (110).
    let cfg = SimConfig {
        one_assignment_per_checkin: false,
        ..config()
    };
    let r = run(&scenario(), &cfg).unwrap();
    assert!(r.summary.check_ins > 13, "{:?}", r.summary);
    assert_eq!(r.jobs[2].finish_s, Some(95.0), "{:?}", r.jobs[2]);
    assert_eq!(r.jobs[2].sched_delay_s, 61.0 - 10.0);
    assert_eq!(r.jobs[2].response_collection_s, 95.0 - 61.0);
}

/// Arguments of the test's own policy.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ArrivalArgs {
    /// Newest job first instead of oldest.
    newest_first: bool,
}

/// Job-arrival order (what the built-in `fifo` does), or its reverse.
#[derive(Debug)]
struct Arrival(ArrivalArgs);

impl venn_core::Policy for Arrival {
    fn name(&self) -> &'static str {
        "arrival"
    }
    fn queue_key(&self, job: &venn_core::JobState, _: &venn_core::policy::SchedView<'_>) -> f64 {
        let t = job.registered_at.secs();
        if self.0.newest_first { -t } else { t }
    }
    fn select(
        &mut self,
        v: &venn_core::policy::SchedView<'_>,
        d: &venn_core::policy::DeviceCtx<'_>,
        _: &mut venn_core::SeededRng,
    ) -> Option<venn_core::JobId> {
        v.best_head(d)
    }
}

#[test]
fn a_custom_registered_policy_runs_in_the_simulator() {
    let mut registry = venn_core::PolicyRegistry::builtin();
    registry
        .register("arrival", |a: ArrivalArgs| Ok(Box::new(Arrival(a))))
        .unwrap();
    let custom = SimConfig {
        policy: SimConfig::from_toml_str("[policy]\nname = \"arrival\"\n")
            .unwrap()
            .policy,
        ..config()
    };
    let r =
        venn_sim::engine::run_with_registry(&scenario(), &custom, &registry, |_, _| {}).unwrap();
    assert_eq!(r.summary.policy, "arrival");
    // The same ordering as the built-in fifo: the same schedule.
    let fifo = run(&scenario(), &config()).unwrap();
    let jct = |r: &venn_sim::engine::SimResult| r.jobs.iter().map(|j| j.jct_s).collect::<Vec<_>>();
    assert_eq!(jct(&r), jct(&fifo));
    // Its own args come from the same table.
    let reversed = SimConfig {
        policy: SimConfig::from_toml_str("[policy]\nname = \"arrival\"\nnewest_first = true\n")
            .unwrap()
            .policy,
        ..config()
    };
    let r =
        venn_sim::engine::run_with_registry(&scenario(), &reversed, &registry, |_, _| {}).unwrap();
    assert_eq!(r.summary.finished + r.summary.unfinished, 3);
    // The built-in registry does not know it: the error lists what it knows.
    let e = run(&scenario(), &custom).unwrap_err().to_string();
    assert!(e.contains("arrival") && e.contains("chunked"), "{e}");
}

/// Records what the engine's hooks see.
#[derive(Default)]
struct Recorder {
    dispatches: Vec<(usize, u64, bool)>,
    results: Vec<(f64, usize, u64, u32)>,
    closes: Vec<(f64, usize, RoundOutcome, u32, bool)>,
    /// Finish job 0 after its first successful round (as a target accuracy would).
    finish_j0_early: bool,
}

impl SimHooks for Recorder {
    fn on_dispatch(&mut self, d: &Dispatch) {
        assert!(d.start_s >= d.check_in_s && d.end_s >= d.start_s, "{d:?}");
        self.dispatches.push((d.job, d.device, d.returns));
    }

    fn on_result(&mut self, r: &TaskResult) {
        self.results.push((r.time_s, r.job, r.device, r.round));
    }

    fn on_round_close(&mut self, c: &RoundClose<'_>) -> Result<AfterClose, SimError> {
        assert_eq!(c.record.outcome, c.outcome);
        self.closes
            .push((c.time_s, c.job, c.outcome, c.rounds_done, c.last));
        if self.finish_j0_early && c.job == 0 && c.outcome == RoundOutcome::Success {
            return Ok(AfterClose::Finish);
        }
        Ok(AfterClose::Continue)
    }
}

/// Runs the scenario with `rec` as the engine's hooks.
fn run_recorded(rec: &mut Recorder) -> venn_sim::engine::SimResult {
    run_with_hooks(
        &scenario(),
        &config(),
        &PolicyRegistry::builtin(),
        rec,
        |_, _| {},
    )
    .unwrap()
}

#[test]
fn hooks_see_every_dispatch_result_and_close_without_changing_the_run() {
    use RoundOutcome::{Abort, Success};
    let plain = run(&scenario(), &config()).unwrap();
    let mut rec = Recorder::default();
    let hooked = run_recorded(&mut rec);
    assert_eq!(
        format!("{:?}", hooked.jobs),
        format!("{:?}", plain.jobs),
        "hooks that only observe change nothing"
    );
    // 12 assignments; i1 and i10 leave before their results.
    assert_eq!(rec.dispatches.len(), 12);
    let lost: Vec<u64> = rec
        .dispatches
        .iter()
        .filter(|d| !d.2)
        .map(|d| d.1)
        .collect();
    assert_eq!(lost, vec![1, 10]);
    // Results that reached an open round (the timeline in the module docs); i2's (J1's
    // aborted attempt) and i5's (after J2 closed) are stragglers and not reported.
    assert_eq!(
        rec.results,
        vec![
            (41.0, 0, 0, 0),
            (95.0, 2, 3, 0),
            (96.0, 1, 4, 0),
            (170.0, 0, 7, 0),
            (180.0, 0, 8, 0),
            (230.0, 0, 9, 1),
            (340.0, 0, 11, 1),
            (379.0, 0, 12, 1),
        ]
    );
    assert_eq!(
        rec.closes,
        vec![
            (55.0, 1, Abort, 0, false),
            (96.0, 1, Success, 1, true),
            (100.0, 0, Abort, 0, false),
            (110.0, 2, Success, 1, true),
            (180.0, 0, Success, 1, false),
            (280.0, 0, Abort, 1, false),
            (379.0, 0, Success, 2, true),
        ]
    );
}

#[test]
fn a_hook_can_finish_a_job_after_a_successful_round() {
    let mut rec = Recorder {
        finish_j0_early: true,
        ..Recorder::default()
    };
    let r = run_recorded(&mut rec);
    // J0 stops after its first round, at 180, instead of running its second.
    assert_eq!((r.jobs[0].finish_s, r.jobs[0].rounds), (Some(180.0), 1));
    assert_eq!(r.summary.finished, 3);
    assert_eq!(r.summary.end_time_s, 180.0);
}
