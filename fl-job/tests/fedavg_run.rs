//! `fl-job fedavg`'s run on a tiny synthetic FEMNIST: it replays bit for bit from its seed
//! (with its participants trained one after another or side by side on lanes),
//! and records what a PyTorch replay needs (participants, seeds, shuffle, evaluation set).

mod common;

use common::{TINY_RESNET, samples};
use datasets::{Femnist, Writer, shuffled_indices};
use fl_job::fedavg_run::{FedAvgConfig, participants, run_fedavg};
use fl_task::TrainConfig;

/// `n` writers of 12–19 synthetic samples each, with test parts of 4.
fn data(n: usize) -> Femnist {
    let writer = |id: String, s: datasets::Samples| Writer {
        id,
        images: s.images,
        labels: s.labels,
    };
    let mut d = Femnist::default();
    for w in 0..n {
        d.train
            .push(writer(format!("w{w:02}"), samples(12 + w % 8, 4)));
        d.test.push(writer(format!("w{w:02}"), samples(4, 4)));
    }
    d
}

/// A tiny ResNet's run of `rounds` rounds of `participants` writers, batches of 5, scored
/// on 10 held-out samples.
fn tiny(rounds: u32, participants: usize) -> FedAvgConfig {
    FedAvgConfig {
        model: TINY_RESNET,
        rounds,
        participants,
        train: TrainConfig {
            batch_size: 5,
            ..Default::default()
        },
        eval_samples: 10,
        ..Default::default()
    }
}

#[test]
fn a_tiny_run_replays_from_its_seed_and_records_its_inputs() {
    let d = data(6);
    let cfg = FedAvgConfig {
        seed: 5,
        ..tiny(2, 3)
    };
    // One after another (1 lane), then side by side on 3 lanes: the same bytes every round.
    let (mut wa, mut wb) = (Vec::new(), Vec::new());
    let (init, a) = {
        let _rng = common::rng_lock();
        run_fedavg(&d, "synthetic", &cfg, 1, |_, w| wa.push(w.to_vec())).unwrap()
    };
    let (_, b) = {
        let _rng = common::rng_lock();
        run_fedavg(&d, "synthetic", &cfg, 3, |_, w| wb.push(w.to_vec())).unwrap()
    };
    // Each round's participants as one computation (`--stack-clients`): the same again.
    let mut wc = Vec::new();
    let stacked = FedAvgConfig {
        stack_clients: true,
        ..cfg.clone()
    };
    let (_, c) = {
        let _rng = common::rng_lock();
        run_fedavg(&d, "synthetic", &stacked, 3, |_, w| wc.push(w.to_vec())).unwrap()
    };
    assert_eq!(wa.len(), 3);
    // Compared as values: the bytes also carry Burn's parameter ids, fresh per model.
    let values = |w: &[u8]| {
        let device = fl_task::Backend::Flex.device();
        let (_, model) = fl_task::weights::from_bytes(w, &device).unwrap();
        fl_task::read_tensors(&model).unwrap()
    };
    for (k, ((x, y), z)) in wa.iter().zip(&wb).zip(&wc).enumerate() {
        assert!(
            values(x) == values(y),
            "round {k}: side by side, the global weights are the same values bit for bit"
        );
        assert!(
            values(x) == values(z),
            "round {k}: stacked, the global weights are the same values bit for bit"
        );
    }
    let curve = |r: &fl_job::fedavg_run::FedAvgReport| {
        r.rounds
            .iter()
            .map(|x| (x.accuracy.to_bits(), x.loss.to_bits()))
            .collect::<Vec<_>>()
    };
    assert_eq!(curve(&a), curve(&b), "same seed, same curve bit for bit");
    assert_eq!(curve(&a), curve(&c), "stacked, the same curve bit for bit");
    assert_eq!(
        a.rounds.len(),
        3,
        "round 0 (the initial model) and 2 rounds"
    );
    assert!(init.iter().any(|t| t.path.ends_with("running_var")));
    for r in &a.rounds[1..] {
        let ids: Vec<String> = participants(6, 3, 5, r.round)
            .iter()
            .map(|&w| d.train[w].id.clone())
            .collect();
        let got: Vec<String> = r.participants.iter().map(|p| p.writer.clone()).collect();
        assert_eq!(got, ids);
        assert!(r.loss.is_finite() && r.train_loss.is_finite());
    }
    let first = &a.rounds[1].participants[0];
    let n = d.train.iter().find(|w| w.id == first.writer).unwrap().len();
    assert_eq!(a.first_shuffle, shuffled_indices(n, first.seed));
    assert_eq!(a.eval_set.len(), 10);
    assert_eq!(a.test_samples, 24);
}

/// On lanes the evaluation set is cut into parts scored side by side: the same hits as in
/// one piece (BatchNorm uses running statistics, sample by sample), the mean loss equal but
/// for the grouping of its sums.
#[test]
fn the_evaluation_in_parts_on_lanes_scores_as_in_one_piece() {
    let d = data(6);
    let cfg = FedAvgConfig {
        // 24 samples in batches of 4: three parts of 8 on 3 lanes.
        eval_samples: 24,
        eval_batch: 4,
        ..tiny(1, 3)
    };
    let run = |lanes| {
        let _rng = common::rng_lock();
        run_fedavg(&d, "synthetic", &cfg, lanes, |_, _| {})
            .unwrap()
            .1
    };
    let (one, three) = (run(1), run(3));
    for (a, b) in one.rounds.iter().zip(&three.rounds) {
        assert_eq!(a.accuracy, b.accuracy, "round {}", a.round);
        assert!(
            (a.loss - b.loss).abs() <= 1e-12 * a.loss.abs(),
            "round {}: {} vs {}",
            a.round,
            a.loss,
            b.loss
        );
    }
}

/// With `bn_calibration` the run draws its calibration set after the evaluation set (the
/// two disjoint, recorded for a replay), re-estimates every round's statistics, and refuses
/// a set the test parts cannot hold.
#[test]
fn a_run_with_calibration_records_its_held_out_samples() {
    let d = data(6);
    let cfg = FedAvgConfig {
        bn_calibration: 8,
        ..tiny(1, 2)
    };
    let (_, plain) = {
        let _rng = common::rng_lock();
        let cfg = FedAvgConfig {
            bn_calibration: 0,
            ..cfg.clone()
        };
        run_fedavg(&d, "synthetic", &cfg, 1, |_, _| {}).unwrap()
    };
    let (_, a) = {
        let _rng = common::rng_lock();
        run_fedavg(&d, "synthetic", &cfg, 1, |_, _| {}).unwrap()
    };
    assert!(plain.calibration_set.is_empty());
    assert_eq!(a.calibration_set.len(), 8);
    assert!(a.calibration_set.iter().all(|s| !a.eval_set.contains(s)));
    // The same training, different statistics: round 1 scores differently.
    assert_eq!(plain.rounds[0].loss, a.rounds[0].loss);
    assert_ne!(plain.rounds[1].loss, a.rounds[1].loss);
    let too_many = FedAvgConfig {
        bn_calibration: 15,
        ..cfg
    };
    let err = run_fedavg(&d, "synthetic", &too_many, 1, |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("bn_calibration"), "{err}");
}

#[test]
fn too_many_participants_is_a_config_error() {
    let cfg = FedAvgConfig {
        model: TINY_RESNET,
        participants: 7,
        ..Default::default()
    };
    let err = run_fedavg(&data(6), "synthetic", &cfg, 0, |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("participants"), "{err}");
}
