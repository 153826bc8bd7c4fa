//! What travels between job and device: weight bytes and FedAvg.

mod common;

use common::{TINY_MOBILENET, TINY_RESNET, device, model};
use fl_task::{ModelKind, fedavg, read_tensors, weights};

#[test]
fn weights_round_trip_bit_exactly_with_running_stats() {
    for kind in [TINY_RESNET, TINY_MOBILENET] {
        // Train a step so BatchNorm running statistics differ from their init.
        let data = common::samples(8, 4);
        let cfg = fl_task::TrainConfig {
            max_steps: Some(1),
            batch_size: 8,
            ..Default::default()
        };
        let (m, _) = fl_task::train_local(model(kind), data.view(), &cfg, &device()).unwrap();
        let bytes = weights::to_bytes(kind, &m).unwrap();
        let header = weights::header(&bytes).unwrap();
        assert_eq!(header.kind, kind);
        let (back_kind, back) = weights::from_bytes(&bytes, &device()).unwrap();
        assert_eq!(back_kind, kind);
        let (a, b) = (read_tensors(&m).unwrap(), read_tensors(&back).unwrap());
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.path, y.path);
            let xb: Vec<u32> = x.values.iter().map(|v| v.to_bits()).collect();
            let yb: Vec<u32> = y.values.iter().map(|v| v.to_bits()).collect();
            assert_eq!(xb, yb, "{} differs after the round trip", x.path);
        }
        assert!(
            a.iter()
                .any(|t| t.path.ends_with("running_mean") && t.values.iter().any(|&v| v != 0.0)),
            "running statistics are part of the weights"
        );
        // Not byte-equal: running statistics get fresh parameter ids on load.
        assert_eq!(weights::to_bytes(kind, &back).unwrap().len(), bytes.len());
    }
}

#[test]
fn weights_of_another_model_are_refused_clearly() {
    let bytes = weights::to_bytes(TINY_RESNET, &model(TINY_RESNET)).unwrap();
    let wider = ModelKind::ResNet18 { base_width: 8 };
    let err = weights::load(wider, &bytes, &device())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("expected resnet18:8") && err.contains("resnet18:4"),
        "{err}"
    );
    let err = weights::load(TINY_MOBILENET, &bytes, &device())
        .unwrap_err()
        .to_string();
    assert!(err.contains("mobilenet_v2"), "{err}");

    // A header that lies about the width: the parameter count check catches it.
    let mut forged = bytes.clone();
    let len = u32::from_le_bytes(forged[8..12].try_into().unwrap()) as usize;
    let text = String::from_utf8(forged[12..12 + len].to_vec()).unwrap();
    let lie = text.replace("\"base_width\":4", "\"base_width\":5");
    assert_eq!(lie.len(), len);
    forged[12..12 + len].copy_from_slice(lie.as_bytes());
    let err = weights::from_bytes(&forged, &device())
        .unwrap_err()
        .to_string();
    assert!(err.contains("parameters"), "{err}");

    let err = weights::from_bytes(b"garbage!garbage!", &device())
        .unwrap_err()
        .to_string();
    assert!(err.contains("magic"), "{err}");
    let err = weights::from_bytes(&bytes[..bytes.len() / 2], &device())
        .unwrap_err()
        .to_string();
    assert!(err.contains("resnet18:4"), "{err}");
}

#[test]
fn fedavg_of_identical_models_is_the_model() {
    let m = model(TINY_RESNET);
    let avg = fedavg(&[(&m, 3), (&m.clone(), 7), (&m.clone(), 1)]).unwrap();
    assert_eq!(read_tensors(&avg).unwrap(), read_tensors(&m).unwrap());
}

#[test]
fn fedavg_of_two_models_is_the_weighted_mean() {
    let (a, b) = (model(TINY_MOBILENET), model(TINY_MOBILENET));
    let avg = fedavg(&[(&a, 1), (&b, 3)]).unwrap();
    let (ta, tb, tavg) = (
        read_tensors(&a).unwrap(),
        read_tensors(&b).unwrap(),
        read_tensors(&avg).unwrap(),
    );
    let mut checked = 0;
    for ((x, y), z) in ta.iter().zip(&tb).zip(&tavg) {
        assert_eq!(x.path, z.path);
        for ((&x, &y), &z) in x.values.iter().zip(&y.values).zip(&z.values) {
            let want = ((f64::from(x) + 3.0 * f64::from(y)) / 4.0) as f32;
            assert_eq!(z, want, "{}", z_path(&tavg, checked));
            checked += 1;
        }
    }
    assert!(checked > 10_000);
    // A client with no samples does not pull the mean.
    let same = fedavg(&[(&a, 5), (&b, 0)]).unwrap();
    assert_eq!(read_tensors(&same).unwrap(), ta);
}

fn z_path(t: &[fl_task::NamedTensor], _i: usize) -> String {
    t.first().map(|t| t.path.clone()).unwrap_or_default()
}

#[test]
fn fedavg_refuses_mixed_models_and_no_samples() {
    let (a, b) = (model(TINY_RESNET), model(TINY_MOBILENET));
    assert!(fedavg(&[(&a, 1), (&b, 1)]).is_err());
    assert!(fedavg(&[(&a, 0)]).is_err());
    assert!(fedavg(&[]).is_err());
}
