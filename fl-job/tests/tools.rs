//! The bench and plot helpers behind the `fl-job` commands, on tiny inputs.

mod common;

use std::time::Duration;

use common::{TINY_RESNET, device};
use fl_job::bench::{bench_model, markdown};
use venn_plot::accuracy::{Series, accuracy_png};

#[test]
fn bench_measures_a_tiny_model() {
    let row = bench_model(TINY_RESNET, 4, Duration::from_millis(20), &device()).unwrap();
    assert!(row.train_samples_per_s > 0.0 && row.infer_samples_per_s > 0.0);
    assert!(
        row.weight_bytes > 4 * row.params,
        "f32 weights plus running stats"
    );
    assert!(markdown(&[row]).contains("| resnet18:4 |"));
}

#[test]
fn accuracy_plot_is_a_png() {
    let path = std::env::temp_dir().join(format!("venn-plot-{}.png", std::process::id()));
    let s = Series::new("test", vec![(0.5, 10.0), (1.0, 50.0), (2.0, 70.0)]).with_band(vec![
        (0.5, 8.0, 12.0),
        (1.0, 47.0, 53.0),
        (2.0, 68.0, 72.0),
    ]);
    accuracy_png(&path, "title", &[s]).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    std::fs::remove_file(path).unwrap();
}
