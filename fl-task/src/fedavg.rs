//! FedAvg: the sample-weighted mean of every float tensor of the clients' models.
//!
//! BatchNorm running mean and variance are averaged exactly like parameters, weighted by
//! sample counts (what averaging a PyTorch `state_dict` does). The running variance is
//! therefore the mean of the client variances, which ignores the spread between client
//! means; it is the common FedAvg practice and keeps aggregation one rule for all tensors.

use burn::module::Module;

use crate::error::FlError;
use crate::model::Model;
use crate::tensors::{read_tensors, write_tensors};

/// Average `models` weighted by their sample counts: `Σ nₖ·wₖ / Σ nₖ` per tensor element,
/// accumulated in `f64`, so averaging identical models returns them bit for bit.
///
/// All models must have the same structure (kind and width); clients with 0 samples count
/// for nothing, but at least one must have samples.
pub fn fedavg(models: &[(&Model, u64)]) -> Result<Model, FlError> {
    let total: u64 = models.iter().map(|(_, n)| n).sum();
    let Some(&(first, _)) = models.first() else {
        return Err(FlError::FedAvg("no models to average".into()));
    };
    if total == 0 {
        return Err(FlError::FedAvg("every client reported 0 samples".into()));
    }
    let mut template = read_tensors(first)?;
    let mut acc: Vec<Vec<f64>> = template.iter().map(|t| vec![0.0; t.values.len()]).collect();
    for (k, &(model, n)) in models.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let tensors = read_tensors(model)?;
        if tensors.len() != template.len() {
            return Err(FlError::FedAvg(format!(
                "model {k} has {} float tensors, model 0 has {}",
                tensors.len(),
                template.len()
            )));
        }
        let w = n as f64;
        for ((a, t), t0) in acc.iter_mut().zip(&tensors).zip(&template) {
            if t.path != t0.path || t.shape != t0.shape {
                return Err(FlError::FedAvg(format!(
                    "model {k}: tensor {} {:?} differs from model 0's {} {:?}",
                    t.path, t.shape, t0.path, t0.shape
                )));
            }
            for (a, &v) in a.iter_mut().zip(&t.values) {
                *a += w * f64::from(v);
            }
        }
    }
    let total = total as f64;
    for (t, a) in template.iter_mut().zip(acc) {
        for (v, a) in t.values.iter_mut().zip(a) {
            *v = (a / total) as f32;
        }
    }
    // `valid()`: running states of the result's own (`write_tensors`), so that averaging
    // leaves `first` as it was.
    write_tensors(first.valid(), template)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ModelKind, read_tensors};

    /// Averaging leaves its inputs whole, BatchNorm running statistics included (Burn
    /// shares those between a model's clones and writes them in place).
    #[test]
    fn averaging_leaves_the_inputs_alone() {
        let device = crate::Backend::Flex.device();
        let a = ModelKind::ResNet18 { base_width: 2 }.init(&device);
        let mut shifted = read_tensors(&a).unwrap();
        for t in &mut shifted {
            t.values.iter_mut().for_each(|v| *v += 1.0);
        }
        let b =
            write_tensors(ModelKind::ResNet18 { base_width: 2 }.init(&device), shifted).unwrap();
        let before = read_tensors(&a).unwrap();
        let avg = fedavg(&[(&a, 1), (&b, 1)]).unwrap();
        assert_ne!(read_tensors(&avg).unwrap(), before);
        assert_eq!(read_tensors(&a).unwrap(), before);
    }
}
