//! The server's BatchNorm re-estimation (`fl_task::recalibrate_bn`, a built-in task's
//! `bn_calibration`): what statistics it leaves, that nothing else changes, and how the
//! drivers draw and refuse its held-out samples.

mod common;

use burn::module::Module;
use common::{TINY_MOBILENET, TINY_RESNET, device, model, rng_lock, samples};
use datasets::{IMAGE_PIXELS, Samples};
use fl_task::{CALIBRATION_BATCH, Model, NamedTensor, read_tensors, recalibrate_bn};

fn is_running(t: &NamedTensor) -> bool {
    t.path.ends_with("running_mean") || t.path.ends_with("running_var")
}

/// Samples `from..to` of `s`.
fn slice(s: &Samples, from: usize, to: usize) -> Samples {
    Samples {
        images: s.images[from * IMAGE_PIXELS..to * IMAGE_PIXELS].to_vec(),
        labels: s.labels[from..to].to_vec(),
    }
}

/// Logits of `m` on `data` as one batch, with BatchNorm on that batch's own statistics.
fn train_mode_logits(m: &Model, data: &Samples) -> Vec<f32> {
    let ad = device().autodiff();
    let (images, _) = data
        .view()
        .gather(&(0..data.labels.len()).collect::<Vec<_>>())
        .to_tensors(&ad);
    let logits = m.clone().to_device(&ad).train().forward(images);
    logits.into_data().try_to_vec::<f32>().unwrap()
}

/// Logits of `m` on `data` as one batch in evaluation (running statistics).
fn eval_logits(m: &Model, data: &Samples) -> Vec<f32> {
    let (images, _) = data
        .view()
        .gather(&(0..data.labels.len()).collect::<Vec<_>>())
        .to_tensors(&device());
    m.forward(images).into_data().try_to_vec::<f32>().unwrap()
}

/// After re-estimation on one batch, evaluation normalises exactly as training does on that
/// batch, and only the running statistics changed.
#[test]
fn recalibrated_evaluation_equals_training_mode_on_the_batch() {
    let _rng = rng_lock();
    for kind in [TINY_RESNET, TINY_MOBILENET] {
        device().seed(3);
        let m = model(kind);
        let data = samples(48, 6);
        let before = read_tensors(&m).unwrap();
        let recal = recalibrate_bn(m.clone(), data.view(), &device());
        let after = read_tensors(&recal).unwrap();
        let mut changed = 0;
        for (b, a) in before.iter().zip(&after) {
            assert_eq!(b.path, a.path);
            if is_running(b) {
                changed += usize::from(b.values != a.values);
            } else {
                assert_eq!(b.values, a.values, "{kind}: {} changed", b.path);
            }
        }
        assert!(
            changed > 10,
            "{kind}: {changed} running tensors re-estimated"
        );
        let (want, got) = (train_mode_logits(&m, &data), eval_logits(&recal, &data));
        let scale = want.iter().fold(0f32, |s, v| s.max(v.abs()));
        let diff = want
            .iter()
            .zip(&got)
            .fold(0f32, |d, (x, y)| d.max((x - y).abs()));
        assert!(
            diff <= 1e-3 * scale.max(1.0),
            "{kind}: {diff} (scale {scale})"
        );
        // The averaged statistics it replaces do not give that (the test can fail).
        let stale = eval_logits(&m, &data);
        let off = want
            .iter()
            .zip(&stale)
            .fold(0f32, |d, (x, y)| d.max((x - y).abs()));
        assert!(
            off > 100.0 * diff.max(1e-6),
            "{kind}: stale statistics off by {off}"
        );
    }
}

/// Over several batches the statistics are the sample-weighted mean of each batch's: the
/// stem's BatchNorm (whose input does not depend on any statistics) after 100 + 50 samples
/// equals ⅔ of the first batch's plus ⅓ of the second's.
#[test]
fn batches_are_weighted_by_their_samples() {
    let _rng = rng_lock();
    device().seed(5);
    let m = model(TINY_MOBILENET);
    let data = samples(CALIBRATION_BATCH + 50, 9);
    let stem = |recal: Model| -> Vec<Vec<f32>> {
        let t = read_tensors(&recal).unwrap();
        let mean = t.iter().find(|t| t.path.ends_with("running_mean")).unwrap();
        let var = t.iter().find(|t| t.path.ends_with("running_var")).unwrap();
        vec![mean.values.clone(), var.values.clone()]
    };
    let both = stem(recalibrate_bn(m.clone(), data.view(), &device()));
    let first = slice(&data, 0, CALIBRATION_BATCH);
    let second = slice(&data, CALIBRATION_BATCH, CALIBRATION_BATCH + 50);
    let a = stem(recalibrate_bn(m.clone(), first.view(), &device()));
    let b = stem(recalibrate_bn(m.clone(), second.view(), &device()));
    for k in 0..2 {
        for ((x, y), z) in a[k].iter().zip(&b[k]).zip(&both[k]) {
            let want = (2.0 * x + y) / 3.0;
            assert!(
                (want - z).abs() <= 1e-5 * want.abs().max(1.0),
                "{want} vs {z}"
            );
        }
    }
    // No data: the model as it was.
    let same = recalibrate_bn(m.clone(), Samples::default().view(), &device());
    let values = |m: &Model| -> Vec<Vec<f32>> {
        read_tensors(m)
            .unwrap()
            .into_iter()
            .map(|t| t.values)
            .collect()
    };
    assert_eq!(values(&same), values(&m));
}

/// The registry takes `bn_calibration`, refuses an unbounded one, and a task without it
/// hands its weights back unchanged.
#[test]
fn the_task_option_is_bounded_and_off_by_default() {
    use fl_task::task::Registry;
    let _rng = rng_lock();
    let r = Registry::with_builtins();
    let err = r
        .build(
            "mobilenet_v2-femnist",
            &serde_json::json!({ "width": 0.25, "bn_calibration": 20_000 }),
        )
        .err()
        .expect("refused");
    assert!(err.to_string().contains("bn_calibration"), "{err}");
    let on = r
        .build(
            "resnet18-femnist",
            &serde_json::json!({ "width": 4, "bn_calibration": 300 }),
        )
        .unwrap();
    assert_eq!(on.calibration_samples(), 300);
    let off = r
        .build("resnet18-femnist", &serde_json::json!({ "width": 4 }))
        .unwrap();
    assert_eq!(off.calibration_samples(), 0);
    let w = off.init(1).unwrap();
    assert_eq!(off.calibrate(&w, samples(10, 2).view()).unwrap(), w);
}
