//! The admission controller: posted prices rise with commitments, unprofitable jobs are
//! declined with a quote, plans move later under congestion, payments follow the posted
//! prices, and eviction is last-in-first-out so later jobs never evict earlier ones.

use venn_core::admission::*;
use venn_core::{JobId, SeededRng, Time};

/// 60 s slots; 100 check-ins per slot; no slack (ε = 0) so the arithmetic is exact.
fn controller() -> AdmissionController {
    AdmissionController::new(
        AdmissionParams {
            slot_s: 60.0,
            horizon_s: 6000.0,
            epsilon: 0.0,
            price_min: 0.01,
            price_max: 1.0,
            ..AdmissionParams::default()
        },
        CapacityForecast::Flat(100.0),
    )
    .unwrap()
}

/// `demand` devices per 60 s round (usage = demand per slot), `rounds` rounds.
fn sow(value: f64, demand: u32, rounds: RoundsDist, hard_s: f64) -> StatementOfWork {
    StatementOfWork {
        value: ValueFn::deadline(value, 0.0, hard_s),
        rounds,
        demand,
        round_s: 60.0,
        max_wait_s: None,
    }
}

#[test]
fn an_empty_platform_admits_at_once_at_the_floor_price() {
    let mut c = controller();
    let s = sow(100.0, 10, RoundsDist::exactly(3), 10_000.0);
    let a = c.submit(JobId(1), &s, Time(0.0)).unwrap();
    let Admission::Admitted { plan } = a else {
        panic!("{a:?}")
    };
    assert_eq!(plan.launch_at, Time(0.0));
    // 3 slots × 10 units × 0.01.
    assert!((plan.expected_price - 0.3).abs() < 1e-9, "{plan:?}");
    assert!((plan.expected_value - 100.0 * (1.0 - 180.0 / 10_000.0)).abs() < 1e-9);
    assert_eq!(c.prices().committed(0), 10.0);
    assert!(c.prices().price(0) > 0.01);
}

#[test]
fn prices_rise_until_a_job_is_declined_with_a_quote_and_state_is_kept() {
    let mut c = controller();
    // Jobs worth 0.5 per unit of usage, that must finish within two slots.
    let s = sow(10.0, 20, RoundsDist::exactly(1), 120.0);
    let mut last_price = 0.0;
    let mut declined = None;
    for i in 0..20 {
        match c.submit(JobId(i), &s, Time(0.0)).unwrap() {
            Admission::Admitted { plan } => {
                assert!(plan.expected_price >= last_price, "prices only rise");
                last_price = plan.expected_price;
            }
            Admission::Declined { quote, reason } => {
                declined = Some((i, quote, reason));
                break;
            }
        }
    }
    let (i, quote, reason) = declined.expect("a full slot stops admissions");
    let quote = quote.expect("capacity exists, so there is a quote");
    assert!(quote.expected_price >= quote.expected_value, "{quote:?}");
    assert!(reason.contains("costs"), "{reason}");
    let before = (c.prices().committed(0), c.prices().committed(1), c.stats());
    assert!(matches!(
        c.submit(JobId(100 + i), &s, Time(0.0)).unwrap(),
        Admission::Declined { .. }
    ));
    assert_eq!(before.0, c.prices().committed(0));
    assert_eq!(before.1, c.prices().committed(1));
    assert_eq!(c.stats().declined, before.2.declined + 1);
}

#[test]
fn a_patient_job_launches_later_when_early_slots_are_sold() {
    let mut c = controller();
    // Fill slots 0..5 to capacity with impatient, valuable jobs.
    let urgent = sow(1e6, 100, RoundsDist::exactly(5), 400.0);
    assert!(matches!(
        c.submit(JobId(1), &urgent, Time(0.0)).unwrap(),
        Admission::Admitted { .. }
    ));
    // A patient job (value flat for an hour) prefers the empty slots after them.
    let patient = StatementOfWork {
        value: ValueFn(vec![(3600.0, 50.0), (7200.0, 0.0)]),
        ..sow(0.0, 50, RoundsDist::exactly(2), 1.0)
    };
    let Admission::Admitted { plan } = c.submit(JobId(2), &patient, Time(0.0)).unwrap() else {
        panic!("patient job declined")
    };
    assert_eq!(plan.launch_at, Time(300.0), "{plan:?}");
    assert_eq!(plan.eviction_risk, 0.0, "nothing else runs then: {plan:?}");
    // With a one-slot wait limit it could only launch into the sold-out slots, where
    // the earlier job's certain usage would evict it at the first slot's end: its quote
    // says so, is worth nothing, and it is declined rather than admitted to be evicted.
    let hurried = StatementOfWork {
        max_wait_s: Some(60.0),
        ..patient
    };
    let q = c.quote(&hurried, Time(0.0)).unwrap().unwrap();
    assert!(q.launch_at <= Time(60.0));
    assert_eq!(q.eviction_risk, 1.0, "{q:?}");
    assert_eq!((q.expected_value, q.expected_price), (0.0, 0.0));
    assert!(matches!(
        c.submit(JobId(3), &hurried, Time(0.0)).unwrap(),
        Admission::Declined { .. }
    ));
}

#[test]
fn payment_is_realised_usage_at_the_posted_prices_with_overtime_at_the_ceiling() {
    let mut c = controller();
    let s = sow(100.0, 10, RoundsDist(vec![(1, 0.5), (2, 0.5)]), 10_000.0);
    c.submit(JobId(1), &s, Time(0.0)).unwrap();
    let prices = c.admitted(JobId(1)).unwrap().prices.clone();
    assert_eq!(prices, vec![0.01, 0.01]);
    // A second job that ends in its first slot gives back its expected usage of slot 1.
    c.submit(JobId(2), &s, Time(0.0)).unwrap();
    assert_eq!(c.prices().committed(1), 10.0);
    c.finished(JobId(2), Time(30.0)).unwrap();
    assert_eq!(c.prices().committed(1), 5.0, "finishing releases the plan");
    // Ran 4 slots: two at the posted 0.01, two past the stated support at 1.0.
    let st = c.finished(JobId(1), Time(230.0)).unwrap();
    assert!(
        (st.payment - 10.0 * (0.01 + 0.01 + 1.0 + 1.0)).abs() < 1e-9,
        "{st:?}"
    );
    assert!((st.value - 100.0 * (1.0 - 230.0 / 10_000.0)).abs() < 1e-9);
    assert_eq!(c.stats().completed, 2);
}

#[test]
fn overload_evicts_the_latest_admission_first() {
    let mut c = controller();
    // Steep value loss: every job launches at once despite the rising prices.
    let s = sow(1000.0, 30, RoundsDist::exactly(10), 2_000.0);
    for j in 0..3 {
        assert!(matches!(
            c.submit(JobId(j), &s, Time(0.0)).unwrap(),
            Admission::Admitted { .. }
        ));
    }
    // Slot ends: usage 90 fits 100, then 70 evicts the latest, then 35 the next.
    assert!(c.on_slot(Time(60.0), 100.0).is_empty());
    let ev = c.on_slot(Time(120.0), 70.0);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].job, JobId(2));
    assert!(ev[0].evicted && ev[0].payment == 0.0);
    let ev = c.on_slot(Time(180.0), 35.0);
    assert_eq!(ev.iter().map(|s| s.job).collect::<Vec<_>>(), vec![JobId(1)]);
    assert!(c.admitted(JobId(0)).is_some());
    let st = c.stats();
    assert_eq!((st.admitted, st.evicted), (3, 2));
    assert!((st.eviction_rate() - 2.0 / 3.0).abs() < 1e-12);
    assert!((st.utilisation() - (90.0 + 60.0 + 30.0) / 205.0).abs() < 1e-9);
}

/// Replays jobs with given realised lengths through the controller and returns who was
/// evicted; capacity fluctuates by a seeded walk.
fn replay(sows: &[(StatementOfWork, u32)], caps: &[f64]) -> Vec<JobId> {
    let mut c = controller();
    let mut end: Vec<Option<f64>> = vec![None; sows.len()];
    let mut evicted = Vec::new();
    for (slot, cap) in caps.iter().enumerate() {
        let now = slot as f64 * 60.0;
        if slot < sows.len() {
            let (s, rounds) = &sows[slot];
            if let Admission::Admitted { plan } =
                c.submit(JobId(slot as u64), s, Time(now)).unwrap()
            {
                end[slot] = Some(plan.launch_at.secs() + *rounds as f64 * 60.0);
            }
        }
        for (j, e) in end.iter_mut().enumerate() {
            if e.is_some_and(|t| t <= now) {
                c.finished(JobId(j as u64), Time(now));
                *e = None;
            }
        }
        for st in c.on_slot(Time(now), *cap) {
            end[st.job.0 as usize] = None;
            evicted.push(st.job);
        }
    }
    evicted
}

#[test]
fn later_arrivals_never_change_whether_an_earlier_job_is_evicted() {
    let mut rng = SeededRng::new(11);
    for _ in 0..50 {
        let n = 12;
        let sows: Vec<(StatementOfWork, u32)> = (0..n)
            .map(|_| {
                let lo = 1 + rng.below(4) as u32;
                let d = RoundsDist::uniform(lo, lo + 3);
                let real = d.sample(rng.f64());
                let s = sow(
                    50.0 + 200.0 * rng.f64(),
                    10 + rng.below(30) as u32,
                    d,
                    3000.0,
                );
                (s, real)
            })
            .collect();
        let caps: Vec<f64> = (0..40).map(|_| 40.0 + 80.0 * rng.f64()).collect();
        let all = replay(&sows, &caps);
        for k in 1..n {
            let prefix = replay(&sows[..k], &caps);
            let early: Vec<JobId> = all.iter().copied().filter(|j| (j.0 as usize) < k).collect();
            assert_eq!(
                prefix, early,
                "jobs ≥ {k} changed evictions of earlier jobs"
            );
        }
    }
}

#[test]
fn statements_too_big_for_the_platform_are_refused_or_declined() {
    let mut c = controller();
    // A job that alone needs 150 check-ins per slot of 100: no slot can hold it.
    let huge = sow(1e9, 150, RoundsDist::exactly(2), 1e9);
    match c.submit(JobId(1), &huge, Time(0.0)).unwrap() {
        Admission::Declined { quote, .. } => assert!(quote.is_none()),
        other => panic!("{other:?}"),
    }
    // A statement whose longest outcome would need millions of slots is an input error.
    let endless = sow(1.0, 1, RoundsDist::exactly(4_000_000_000), 1e9);
    match c.submit(JobId(2), &endless, Time(0.0)) {
        Err(venn_core::CoreError::Invalid { field, .. }) => assert_eq!(field, "statement.rounds"),
        other => panic!("{other:?}"),
    }
    let bad: Result<StatementOfWork, _> = serde_json::from_str(
        r#"{"value": [[0, 1]], "rounds": [[1, 1]], "demand": 1, "round_s": 60, "colour": 1}"#,
    );
    assert!(bad.unwrap_err().to_string().contains("colour"));
    assert_eq!(c.stats().admitted, 0);
}

#[test]
fn a_truthful_job_pays_exactly_its_quote_wherever_in_a_slot_it_starts() {
    for start in [0.0, 30.0, 59.0] {
        let mut c = controller();
        // Two rounds of 60 s: from mid-slot the run touches three slots, and the plan
        // prices and commits all three.
        let s = sow(100.0, 10, RoundsDist::exactly(2), 10_000.0);
        let Admission::Admitted { plan } = c.submit(JobId(1), &s, Time(start)).unwrap() else {
            panic!("declined")
        };
        // (From 59 s, waiting a second for the next slot saves a slot's price.)
        assert!(plan.launch_at.secs() >= start && plan.launch_at.secs() <= 60.0);
        let st = c.finished(JobId(1), plan.launch_at + 120.0).unwrap();
        assert!(
            (st.payment - plan.expected_price).abs() < 1e-9,
            "start {start}: paid {} for a quote of {}",
            st.payment,
            plan.expected_price
        );
    }
}

#[test]
fn an_eviction_at_a_slot_boundary_releases_the_slot_that_starts() {
    let mut c = controller();
    let s = sow(1000.0, 30, RoundsDist::exactly(10), 2_000.0);
    for j in 0..3 {
        c.submit(JobId(j), &s, Time(0.0)).unwrap();
    }
    assert_eq!(c.prices().committed(1), 90.0);
    let ev = c.on_slot(Time(60.0), 70.0);
    assert_eq!(ev.len(), 1);
    assert_eq!(c.prices().committed(1), 60.0);
}

#[test]
fn a_plan_is_valued_net_of_its_eviction_risk_from_earlier_uncertain_jobs() {
    // Job A uses 60 of 100 and runs 1 or 10 slots (even odds): slot 0 is 60 for sure,
    // slots 1–9 are 60 with probability ½ (mean 30, variance 900).
    let uncertain = sow(1e4, 60, RoundsDist(vec![(1, 0.5), (10, 0.5)]), 1e5);
    // Job B uses 50 for 3 slots and may wait one slot.
    let b = StatementOfWork {
        max_wait_s: Some(60.0),
        ..sow(100.0, 50, RoundsDist::exactly(3), 10_000.0)
    };
    let quote_after = |c: &mut AdmissionController, t: f64| {
        assert!(matches!(
            c.submit(JobId(1), &uncertain, Time(t)).unwrap(),
            Admission::Admitted { .. }
        ));
        c.quote(&b, Time(t)).unwrap().unwrap()
    };

    let mut c = controller();
    let q = quote_after(&mut c, 0.0);
    // In slot 0 it would be evicted for sure; from slot 1 it is checked at the ends of
    // slots 1 and 2, where A runs on with probability ½: P(N(30, 30²) + 50 > 100).
    assert_eq!(q.launch_at, Time(60.0), "{q:?}");
    assert!((q.eviction_risk - 0.252_492_5).abs() < 1e-5, "{q:?}");
    let value = 100.0 * (1.0 - 240.0 / 10_000.0);
    assert!((q.expected_value - (1.0 - q.eviction_risk) * value).abs() < 1e-6);
    // Price of 3 slots at the posted prices, paid only if it is not evicted.
    let paid: f64 = (1..4).map(|t| 50.0 * c.prices().price(t)).sum();
    assert!((q.expected_price - (1.0 - q.eviction_risk) * paid).abs() < 1e-9);

    // A controller that has seen realised capacity stray ±20 % from the forecast widens
    // the risk: P(N(30, 30² + 20²) + 50 > 100).
    let mut c = controller();
    for k in 1..=10u32 {
        let realised = if k.is_multiple_of(2) { 80.0 } else { 120.0 };
        assert!(c.on_slot(Time(60.0 * k as f64), realised).is_empty());
    }
    assert!((c.capacity_error() - 0.2).abs() < 1e-9);
    let q = quote_after(&mut c, 600.0);
    assert_eq!(q.launch_at, Time(660.0), "{q:?}");
    assert!((q.eviction_risk - 0.289_546).abs() < 1e-4, "{q:?}");
}
