//! A custom FL job, written outside the built-ins: multinomial logistic regression on
//! FEMNIST in plain Rust (no Burn), aggregated with **FedAvgM** (server momentum,
//! Hsu et al. 2019) instead of plain FedAvg.
//!
//! It shows everything a task defines — model construction, local training, the server
//! rule, evaluation, and the byte format that travels. `venn-lab` and `device-agent`
//! pick it up by name once it is registered (see the README, "Write your own FL job").
//!
//! Run alone (a three-round federated loop in this process on the shared FEMNIST data):
//! `cargo run --release -p fl-job --example custom_task`
#![allow(dead_code)]

use datasets::{IMAGE_PIXELS, NUM_CLASSES, SampleView, model_pixel};
use fl_task::task::{FlTask, LocalUpdate, ServerState, weighted_mean};
use fl_task::{EvalStats, FlError, NamedTensor};
use std::sync::Arc;

/// Registry name of the example task.
pub const NAME: &str = "softmax-fedavgm";
const MAGIC: &[u8; 4] = b"SMX1";

/// Softmax regression trained with SGD, aggregated with server momentum.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SoftmaxFedAvgM {
    /// Client learning rate.
    pub lr: f32,
    /// Client epochs over the local data.
    pub epochs: usize,
    /// Client mini-batch size.
    pub batch_size: usize,
    /// Server momentum β.
    pub server_momentum: f32,
    /// Server learning rate.
    pub server_lr: f32,
}

impl Default for SoftmaxFedAvgM {
    fn default() -> Self {
        SoftmaxFedAvgM {
            lr: 0.1,
            epochs: 1,
            batch_size: 20,
            server_momentum: 0.9,
            server_lr: 1.0,
        }
    }
}

/// Registers the task in `registry` (params: this struct's fields as JSON).
pub fn register(registry: &mut fl_task::task::Registry) {
    registry.register(NAME, |p| {
        let t: SoftmaxFedAvgM = if p.is_null() {
            SoftmaxFedAvgM::default()
        } else {
            serde_json::from_value(p.clone())
                .map_err(|e| FlError::Config(format!("{NAME} params: {e}")))?
        };
        Ok(Arc::new(t) as Arc<dyn FlTask>)
    });
}

const W: usize = NUM_CLASSES * IMAGE_PIXELS;

fn to_bytes(params: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + params.len() * 4);
    out.extend_from_slice(MAGIC);
    for v in params {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn from_bytes(b: &[u8]) -> Result<Vec<f32>, FlError> {
    if b.len() != 4 + (W + NUM_CLASSES) * 4 || &b[..4] != MAGIC {
        return Err(FlError::Weights(format!(
            "not {NAME} weights ({} bytes)",
            b.len()
        )));
    }
    Ok(b[4..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Logits → probabilities in place; returns the log-probability of `label`.
fn softmax(logits: &mut [f32], label: usize) -> f32 {
    let m = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let mut z = 0.0;
    for l in logits.iter_mut() {
        *l = (*l - m).exp();
        z += *l;
    }
    for l in logits.iter_mut() {
        *l /= z;
    }
    logits[label].max(1e-12).ln()
}

fn forward(p: &[f32], x: &[f32], out: &mut [f32]) {
    for (c, o) in out.iter_mut().enumerate() {
        let row = &p[c * IMAGE_PIXELS..(c + 1) * IMAGE_PIXELS];
        *o = p[W + c] + row.iter().zip(x).map(|(w, v)| w * v).sum::<f32>();
    }
}

impl FlTask for SoftmaxFedAvgM {
    fn name(&self) -> &str {
        NAME
    }

    fn init(&self, _seed: u64) -> Result<Vec<u8>, FlError> {
        Ok(to_bytes(&vec![0.0; W + NUM_CLASSES]))
    }

    fn train(
        &self,
        global: &[u8],
        data: SampleView<'_>,
        seed: u64,
    ) -> Result<LocalUpdate, FlError> {
        let mut p = from_bytes(global)?;
        let n = data.labels.len();
        let (mut x, mut probs, mut grad) = (
            vec![0f32; IMAGE_PIXELS],
            vec![0f32; NUM_CLASSES],
            vec![0f32; W + NUM_CLASSES],
        );
        let (mut loss_sum, mut seen) = (0.0f64, 0usize);
        for epoch in 0..self.epochs.max(1) {
            let order = datasets::shuffled_indices(n, seed.wrapping_add(epoch as u64));
            for batch in order.chunks(self.batch_size.max(1)) {
                grad.iter_mut().for_each(|g| *g = 0.0);
                for &i in batch {
                    for (xv, k) in x
                        .iter_mut()
                        .zip(&data.images[i * IMAGE_PIXELS..(i + 1) * IMAGE_PIXELS])
                    {
                        *xv = model_pixel(*k);
                    }
                    let y = data.labels[i] as usize;
                    forward(&p, &x, &mut probs);
                    loss_sum -= softmax(&mut probs, y) as f64;
                    seen += 1;
                    probs[y] -= 1.0;
                    for (c, d) in probs.iter().enumerate() {
                        for (g, v) in grad[c * IMAGE_PIXELS..(c + 1) * IMAGE_PIXELS]
                            .iter_mut()
                            .zip(&x)
                        {
                            *g += d * v;
                        }
                        grad[W + c] += d;
                    }
                }
                let scale = self.lr / batch.len() as f32;
                for (w, g) in p.iter_mut().zip(&grad) {
                    *w -= scale * g;
                }
            }
        }
        Ok(LocalUpdate {
            weights: to_bytes(&p),
            samples: n as u64,
            loss: loss_sum / seen.max(1) as f64,
        })
    }

    fn evaluate(&self, weights: &[u8], data: SampleView<'_>) -> Result<EvalStats, FlError> {
        let p = from_bytes(weights)?;
        let n = data.labels.len();
        let (mut x, mut probs) = (vec![0f32; IMAGE_PIXELS], vec![0f32; NUM_CLASSES]);
        let (mut correct, mut loss) = (0usize, 0.0f64);
        for i in 0..n {
            for (xv, k) in x
                .iter_mut()
                .zip(&data.images[i * IMAGE_PIXELS..(i + 1) * IMAGE_PIXELS])
            {
                *xv = model_pixel(*k);
            }
            forward(&p, &x, &mut probs);
            let best = probs
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |b| b.0);
            correct += usize::from(best == data.labels[i] as usize);
            loss -= softmax(&mut probs, data.labels[i] as usize) as f64;
        }
        Ok(EvalStats {
            samples: n,
            accuracy: correct as f64 / n.max(1) as f64,
            loss: loss / n.max(1) as f64,
        })
    }

    fn decode(&self, weights: &[u8]) -> Result<Vec<NamedTensor>, FlError> {
        let p = from_bytes(weights)?;
        Ok(vec![
            NamedTensor {
                path: "weight".into(),
                shape: vec![NUM_CLASSES, IMAGE_PIXELS],
                values: p[..W].to_vec(),
            },
            NamedTensor {
                path: "bias".into(),
                shape: vec![NUM_CLASSES],
                values: p[W..].to_vec(),
            },
        ])
    }

    fn encode(&self, tensors: Vec<NamedTensor>) -> Result<Vec<u8>, FlError> {
        let p: Vec<f32> = tensors.into_iter().flat_map(|t| t.values).collect();
        if p.len() != W + NUM_CLASSES {
            return Err(FlError::Weights(format!(
                "{NAME}: {} values, expected {}",
                p.len(),
                W + NUM_CLASSES
            )));
        }
        Ok(to_bytes(&p))
    }

    /// FedAvgM: Δ = global − mean(updates); v ← β·v + Δ; global ← global − η·v.
    fn aggregate(
        &self,
        global: &[u8],
        updates: &[(Vec<u8>, u64)],
        state: &mut ServerState,
    ) -> Result<Vec<u8>, FlError> {
        let g = from_bytes(global)?;
        let mean: Vec<f32> = weighted_mean(self, updates)?
            .into_iter()
            .flat_map(|t| t.values)
            .collect();
        let v = state.slots.entry("velocity".into()).or_insert_with(|| {
            vec![NamedTensor {
                path: "all".into(),
                shape: vec![g.len()],
                values: vec![0.0; g.len()],
            }]
        });
        let vel = &mut v[0].values;
        let mut next = g.clone();
        for i in 0..g.len() {
            vel[i] = self.server_momentum * vel[i] + (g[i] - mean[i]);
            next[i] = g[i] - self.server_lr * vel[i];
        }
        state.rounds += 1;
        Ok(to_bytes(&next))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = datasets::Femnist::open(None, datasets::WriterSet::Main)?;
    let task = SoftmaxFedAvgM::default();
    let test = datasets::Samples::from_writers(data.test.iter().rev().take(50));
    let mut global = task.init(0)?;
    let mut state = ServerState::default();
    for round in 0..3u64 {
        let updates: Vec<(Vec<u8>, u64)> = data
            .train
            .iter()
            .skip(round as usize * 20)
            .take(20)
            .map(|w| {
                task.train(&global, w.view(), round)
                    .map(|u| (u.weights, u.samples))
            })
            .collect::<Result<_, _>>()?;
        global = task.aggregate(&global, &updates, &mut state)?;
        let e = task.evaluate(&global, test.view())?;
        println!(
            "round {round}: accuracy {:.1}% loss {:.3}",
            e.accuracy * 100.0,
            e.loss
        );
    }
    Ok(())
}
