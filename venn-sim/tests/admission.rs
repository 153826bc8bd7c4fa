//! Admission control in the engine: declined jobs never run, admitted jobs launch at
//! their plan and settle value and payment, the summary adds up, admit-all admits
//! everyone at arrival, and a misreport changes only the misreporting job's statement.

use crate::common;

use common::{catalog, job, trace};
use venn_sim::engine::admission::{AdmissionMode, AdmissionSim, Misreport};
use venn_sim::engine::{SimConfig, SimInput, run};
use venn_sim::incentives::utility;

/// Forty jobs arriving in a burst on a stream of one check-in per 4 s: more demand
/// than the supply serves quickly, so posted prices rise and some jobs are declined.
fn burst() -> SimInput {
    let jobs: Vec<_> = (0..40)
        .map(|i| {
            job(
                i,
                f64::from(i) * 30.0,
                [1, 1, 3, 4][i as usize % 4],
                10 + 5 * (i % 3),
                30,
            )
        })
        .collect();
    SimInput::new(trace(4.0, 3_000_000.0), &catalog(), &jobs, Some(1), 1.0).unwrap()
}

fn cfg(mode: AdmissionMode, misreport: Option<Misreport>) -> SimConfig {
    let mut a = AdmissionSim {
        mode,
        misreport,
        ..AdmissionSim::default()
    };
    a.controller.slot_s = 300.0;
    SimConfig {
        policy: "venn".into(),
        seed: 4,
        window_s: 3_000_000.0,
        admission: Some(a),
        ..SimConfig::default()
    }
}

#[test]
fn posted_prices_decline_some_jobs_and_settle_the_rest() {
    let r = run(&burst(), &cfg(AdmissionMode::PostedPrice, None)).unwrap();
    let a = r.summary.admission.clone().expect("admission summary");
    assert_eq!(a.submitted, 40);
    assert_eq!(a.admitted + a.declined, 40);
    assert!(a.declined > 0 && a.admitted > 0, "{a:?}");
    let welfare: f64 = r.jobs.iter().filter_map(|j| j.value).sum();
    assert!((a.welfare - welfare).abs() < 1e-6);
    for j in &r.jobs {
        match j.admission.as_deref() {
            Some("declined") => {
                assert_eq!(j.rounds, 0, "job {} was declined but ran", j.idx);
                assert_eq!((j.value, j.payment), (Some(0.0), Some(0.0)));
                assert!(j.launch_s.is_none());
            }
            Some("admitted") => {
                let launch = j.launch_s.expect("admitted jobs launch");
                assert!(launch >= j.arrival_s);
                if j.finished() {
                    assert!(
                        j.payment.unwrap() > 0.0,
                        "job {} used devices for free",
                        j.idx
                    );
                    assert!(j.finish_s.unwrap() >= launch);
                }
            }
            Some("evicted") => assert_eq!(j.value, Some(0.0)),
            other => panic!("job {} has admission {other:?}", j.idx),
        }
    }
    assert_eq!(
        r.summary.finished + r.summary.unfinished,
        (a.admitted - a.evicted) as usize,
        "declined and evicted jobs leave the JCT averages"
    );
}

#[test]
fn admit_all_runs_everyone_from_arrival() {
    let r = run(&burst(), &cfg(AdmissionMode::AdmitAll, None)).unwrap();
    let a = r.summary.admission.expect("admission summary");
    assert_eq!((a.admitted, a.declined, a.evicted), (40, 0, 0));
    for j in &r.jobs {
        assert_eq!(j.launch_s, Some(j.arrival_s));
        assert_eq!(j.payment, Some(0.0));
    }
}

#[test]
fn a_misreport_touches_only_the_liar() {
    let input = burst();
    let adm = AdmissionSim::default();
    let liar = Misreport {
        job: 3,
        factor: 0.5,
    };
    let lying = AdmissionSim {
        misreport: Some(liar),
        ..adm.clone()
    };
    for sj in &input.jobs {
        let (truth, real) = adm.statement(&sj.row, 4, 1.0);
        let (again, real_again) = lying.statement(&sj.row, 4, 1.0);
        assert_eq!(
            (&truth, real),
            (&again, real_again),
            "the truth is the same"
        );
        let reported = lying.reported(&sj.row, &truth);
        if sj.row.idx == liar.job {
            assert!(reported.rounds.mean() < truth.rounds.mean());
        } else {
            assert_eq!(reported, truth);
        }
    }
    // Same run otherwise: the liar's real rounds do not change with its report.
    let t = run(&input, &cfg(AdmissionMode::PostedPrice, None)).unwrap();
    let l = run(&input, &cfg(AdmissionMode::PostedPrice, Some(liar))).unwrap();
    let pos = t.jobs.iter().position(|j| j.idx == liar.job).unwrap();
    assert_eq!(t.jobs[pos].rounds_target, l.jobs[pos].rounds_target);
    eprintln!(
        "job {}: truthful utility {:.2}, misreport ×0.5 utility {:.2}",
        liar.job,
        utility(&t.jobs[pos]),
        utility(&l.jobs[pos])
    );
}
