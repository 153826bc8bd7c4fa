//! Throughput and weight-exchange measurements per model and width.

use std::time::{Duration, Instant};

use burn::tensor::Device;
use datasets::{IMAGE_PIXELS, Samples, SeededRng};
use serde::{Deserialize, Serialize};

use fl_task::FlError;
use fl_task::TrainConfig;
use fl_task::evaluate;
use fl_task::model::ModelKind;
use fl_task::train_local;
use fl_task::trainable_params;
use fl_task::weights;

/// One model's measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchRow {
    /// The model, written as its spec (`resnet18:16`, `mobilenet_v2:0.5`): the string the
    /// CLI takes and the PyTorch reference prints.
    #[serde(with = "model_spec")]
    pub model: ModelKind,
    /// Trainable parameters.
    pub params: usize,
    /// Batch size used.
    pub batch_size: usize,
    /// Training samples per second (forward, backward, SGD step).
    pub train_samples_per_s: f64,
    /// Inference samples per second (forward only, no autodiff).
    pub infer_samples_per_s: f64,
    /// CPU milliseconds (all threads) per training sample; `None` where the OS does not tell.
    #[serde(default)]
    pub train_cpu_ms_per_sample: Option<f64>,
    /// CPU milliseconds (all threads) per inference sample.
    #[serde(default)]
    pub infer_cpu_ms_per_sample: Option<f64>,
    /// Size of the serialised weights in bytes.
    pub weight_bytes: usize,
    /// Time to serialise, milliseconds (best of 3).
    pub serialize_ms: f64,
    /// Time to deserialise into a model, milliseconds (best of 3).
    pub deserialize_ms: f64,
}

/// [`ModelKind`] as its spec string.
mod model_spec {
    use fl_task::model::ModelKind;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &ModelKind, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(m)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ModelKind, D::Error> {
        let spec = String::deserialize(d)?;
        spec.parse().map_err(serde::de::Error::custom)
    }
}

/// Version of [`BenchReport`]'s layout; bumped when a field changes meaning or goes.
pub const BENCH_SCHEMA: u32 = 1;

/// What `fl-job bench --json` writes: one run, with what it ran on, so that a script can
/// compare runs (and refuse a layout it does not know by `schema`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// [`BENCH_SCHEMA`].
    pub schema: u32,
    /// The compute backend (`flex`, `wgpu`, …).
    pub backend: String,
    /// Whose CPU kernels ran the convolutions and BatchNorm: `fl-job` (the default, see
    /// [`fl_task::set_cpu_kernels`]) or `burn` (`--burn-ops`). Added within schema 1: reports
    /// from before it existed ran Burn's ops, so they read as `burn`.
    #[serde(default = "burn_kernels")]
    pub kernels: String,
    /// The instruction set fl-job's kernels ran (`avx512`, `avx2`, `neon`, `scalar`; see
    /// [`fl_task::model::kernel_isa`]). Added within schema 1: empty in older reports.
    #[serde(default)]
    pub isa: String,
    /// CPU threads the backend could use (`RAYON_NUM_THREADS`, else the cores).
    pub threads: usize,
    /// Mini-batch size.
    pub batch_size: usize,
    /// Seconds spent timing each of training and inference per model.
    pub seconds: f64,
    /// One row per model, in the order measured.
    pub rows: Vec<BenchRow>,
}

fn burn_kernels() -> String {
    "burn".into()
}

/// Random images with random labels; speed does not depend on the data.
fn noise(n: usize, seed: u64) -> Samples {
    let mut rng = SeededRng::new(seed);
    Samples {
        images: (0..n * IMAGE_PIXELS)
            .map(|_| rng.next_u64() as u8)
            .collect(),
        labels: (0..n).map(|_| rng.below(62) as u8).collect(),
    }
}

/// CPU time this process's threads have run, summed from `/proc/self/task/*/schedstat`
/// (Linux; `None` elsewhere). Unlike wall time it leaves out the time a shared or virtual
/// machine gave to others (steal), so it compares two builds on a noisy machine.
fn process_cpu_seconds() -> Option<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 * 1e-9)
}

/// Run `f(steps)` with growing step counts until one call takes at least `budget`, and
/// return samples per second of that call and, where known, its CPU milliseconds per sample.
/// A first short call warms caches up.
fn rate(
    batch: usize,
    budget: Duration,
    mut f: impl FnMut(usize) -> Result<(), FlError>,
) -> Result<(f64, Option<f64>), FlError> {
    f(1)?;
    let mut steps = 2;
    loop {
        let (t, cpu) = (Instant::now(), process_cpu_seconds());
        f(steps)?;
        let dt = t.elapsed();
        if dt >= budget || steps >= 10_000 {
            let samples = (steps * batch) as f64;
            let cpu_ms = match (cpu, process_cpu_seconds()) {
                (Some(a), Some(b)) => Some((b - a) * 1e3 / samples),
                _ => None,
            };
            return Ok((samples / dt.as_secs_f64(), cpu_ms));
        }
        let scale = budget.as_secs_f64() / dt.as_secs_f64().max(1e-3);
        steps = ((steps as f64 * scale * 1.1).ceil() as usize).max(steps + 1);
    }
}

/// Measure `kind` on `device` with mini-batches of `batch_size`, spending about `budget`
/// on each of training and inference.
pub fn bench_model(
    kind: ModelKind,
    batch_size: usize,
    budget: Duration,
    device: &Device,
) -> Result<BenchRow, FlError> {
    let mut model = kind.init(device);
    let params = trainable_params(&model);
    let cfg = TrainConfig {
        batch_size,
        ..Default::default()
    };
    let (train, train_cpu) = rate(batch_size, budget, |steps| {
        let data = noise(steps * batch_size, steps as u64);
        let cfg = TrainConfig {
            max_steps: Some(steps),
            ..cfg.clone()
        };
        let (m, _) = train_local(model.clone(), data.view(), &cfg, device)?;
        model = m;
        Ok(())
    })?;
    let (infer, infer_cpu) = rate(batch_size, budget, |steps| {
        let data = noise(steps * batch_size, 1);
        evaluate(&model, data.view(), batch_size, device);
        Ok(())
    })?;
    let (mut ser, mut de, mut size) = (f64::MAX, f64::MAX, 0);
    for _ in 0..3 {
        let t = Instant::now();
        let bytes = weights::to_bytes(kind, &model)?;
        ser = ser.min(t.elapsed().as_secs_f64() * 1e3);
        size = bytes.len();
        let t = Instant::now();
        let _ = weights::from_bytes(&bytes, device)?;
        de = de.min(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(BenchRow {
        model: kind,
        params,
        batch_size,
        train_samples_per_s: train,
        infer_samples_per_s: infer,
        train_cpu_ms_per_sample: train_cpu,
        infer_cpu_ms_per_sample: infer_cpu,
        weight_bytes: size,
        serialize_ms: ser,
        deserialize_ms: de,
    })
}

/// The rows as a Markdown table.
pub fn markdown(rows: &[BenchRow]) -> String {
    let mut s = String::from(
        "| model | params | train samples/s | infer samples/s | train CPU ms/sample | infer CPU ms/sample | weight bytes | serialise ms | deserialise ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let ms = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{v:.2}"));
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {} | {} | {} | {:.1} | {:.1} |\n",
            r.model,
            r.params,
            r.train_samples_per_s,
            r.infer_samples_per_s,
            ms(r.train_cpu_ms_per_sample),
            ms(r.infer_cpu_ms_per_sample),
            r.weight_bytes,
            r.serialize_ms,
            r.deserialize_ms
        ));
    }
    s
}

#[cfg(test)]
mod json_tests {
    use super::*;

    #[test]
    fn the_json_report_has_a_fixed_layout_with_models_as_specs() {
        let report = BenchReport {
            schema: BENCH_SCHEMA,
            backend: "flex".into(),
            kernels: "fl-job".into(),
            isa: "avx2".into(),
            threads: 2,
            batch_size: 20,
            seconds: 8.0,
            rows: vec![BenchRow {
                model: "mobilenet_v2:0.5".parse().unwrap(),
                params: 766_814,
                batch_size: 20,
                train_samples_per_s: 30.5,
                infer_samples_per_s: 264.7,
                train_cpu_ms_per_sample: Some(60.1),
                infer_cpu_ms_per_sample: None,
                weight_bytes: 3_194_438,
                serialize_ms: 2.5,
                deserialize_ms: 1.7,
            }],
        };
        let v = serde_json::to_value(&report).unwrap();
        let keys = |o: &serde_json::Value| {
            let mut k: Vec<String> = o.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(
            keys(&v),
            [
                "backend",
                "batch_size",
                "isa",
                "kernels",
                "rows",
                "schema",
                "seconds",
                "threads"
            ]
        );
        assert_eq!(
            keys(&v["rows"][0]),
            [
                "batch_size",
                "deserialize_ms",
                "infer_cpu_ms_per_sample",
                "infer_samples_per_s",
                "model",
                "params",
                "serialize_ms",
                "train_cpu_ms_per_sample",
                "train_samples_per_s",
                "weight_bytes"
            ]
        );
        assert_eq!(v["rows"][0]["model"], "mobilenet_v2:0.5");
        assert_eq!(v["schema"], 1);
        let back: BenchReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, report);
        let bad = serde_json::json!({"model": "vgg:1"});
        assert!(serde_json::from_value::<BenchRow>(bad).is_err());
    }
}
