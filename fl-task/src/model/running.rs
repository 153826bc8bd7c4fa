//! BatchNorm running statistics during a training: moved towards each batch's statistics as
//! plain values, and written into the model's `RunningState`s once, when the training ends.
//!
//! Why: a `RunningState` update goes through Burn's per-thread bookkeeping — a read
//! (`value_sync`: a mutex, a hash map drained, a `div_scalar` tensor op), a copy out, a
//! fresh tensor and an insertion back — for each of the two statistics of every BatchNorm
//! in every step: 3 % of a MobileNet-V2 ×0.25 training step and 2.7 % of a ResNet-18 ×4 one
//! (perf, 2026-12-07, sixth session), for a few hundred multiply-adds. Kept here, a step's
//! update is those multiply-adds; the values are the same `f32` arithmetic
//! (`running · (1 − m) + batch · m`), so the model ends with the same bits.
//!
//! Scope: [`collecting`] keeps the values for the thread it runs on (a training's steps run
//! on one thread); an update outside it, or on another thread, goes to the `RunningState`
//! directly, as before.

use std::cell::RefCell;
use std::collections::HashMap;

use burn::module::{ModuleMapper, ModuleVisitor, Param, ParamId, RunningState};
use burn::nn::BatchNorm;
use burn::tensor::Tensor;

thread_local! {
    /// The running statistics moved so far in this thread's [`collecting`] scope, if any.
    static PENDING: RefCell<Option<HashMap<ParamId, Vec<f32>>>> = const { RefCell::new(None) };
}

/// Running statistics kept while a training ran, for [`Pending::apply`].
#[derive(Debug, Default)]
pub(crate) struct Pending(HashMap<ParamId, Vec<f32>>);

/// Runs `f` with this thread's BatchNorm running-statistics updates kept as plain values,
/// and returns them with `f`'s result. The caller writes them into its model with
/// [`Pending::apply`] (a model that is not given them keeps its statistics from before).
pub(crate) fn collecting<R>(f: impl FnOnce() -> R) -> (R, Pending) {
    struct Restore(Option<HashMap<ParamId, Vec<f32>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            PENDING.set(self.0.take());
        }
    }
    // An enclosing scope's values come back when this one ends, also if `f` panics.
    let restore = Restore(PENDING.replace(Some(HashMap::new())));
    let out = f();
    let kept = PENDING.take().unwrap_or_default();
    drop(restore);
    (out, Pending(kept))
}

/// Moves `bn`'s running mean and variance towards this batch's by `momentum`, as
/// `BatchNorm::forward` does in training.
pub(crate) fn update(bn: &BatchNorm, momentum: f64, mean: &[f32], var: &[f32]) {
    let (keep, take) = ((1.0 - momentum) as f32, momentum as f32);
    let blend = |old: &mut [f32], batch: &[f32]| {
        old.iter_mut()
            .zip(batch)
            .for_each(|(o, b)| *o = *o * keep + b * take);
    };
    for (state, batch) in [(&bn.running_mean, mean), (&bn.running_var, var)] {
        let kept = PENDING.with_borrow_mut(|pending| {
            let values = pending
                .as_mut()?
                .entry(id_of(state))
                .or_insert_with(|| values_of(state));
            blend(values, batch);
            Some(())
        });
        if kept.is_none() {
            let mut values = values_of(state);
            blend(&mut values, batch);
            let device = state.value().device();
            state.update(Tensor::<1>::from_floats(values.as_slice(), &device));
        }
    }
}

/// The state's current value (its pending per-thread updates applied).
fn values_of(state: &RunningState<Tensor<1>>) -> Vec<f32> {
    state
        .value_sync()
        .into_data()
        .try_to_vec::<f32>()
        .expect("BatchNorm running statistics are f32")
}

/// The state's parameter id (Burn shows it only to visitors).
fn id_of(state: &RunningState<Tensor<1>>) -> ParamId {
    struct Id(Option<ParamId>);
    impl ModuleVisitor for Id {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0 = Some(param.id);
        }
    }
    let mut id = Id(None);
    burn::module::Module::visit(state, &mut id);
    id.0.expect("a running state visits its value")
}

impl Pending {
    /// `model` with the kept statistics written into its running states (matched by
    /// parameter id; everything else passes through).
    pub(crate) fn apply<M: burn::module::Module>(mut self, model: M) -> M {
        if self.0.is_empty() {
            return model;
        }
        model.map(&mut self)
    }
}

impl ModuleMapper for Pending {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(values) = self.0.remove(&param.id) else {
            return param;
        };
        param.map(|old| {
            Tensor::<1>::from_floats(values.as_slice(), &old.device()).reshape(old.shape())
        })
    }
}

#[cfg(test)]
mod tests {
    use burn::module::Module;
    use burn::nn::BatchNormConfig;

    use super::*;

    fn stats(bn: &BatchNorm) -> Vec<Vec<f32>> {
        [&bn.running_mean, &bn.running_var]
            .map(values_of)
            .into_iter()
            .collect()
    }

    /// Kept as plain values and applied at the end, three updates leave the same bits as
    /// three updates of the running states; before `apply` the model is untouched.
    #[test]
    fn kept_updates_applied_at_the_end_equal_direct_ones() {
        let device = crate::Backend::Flex.device().autodiff();
        let batches = [
            ([0.5f32, -1.0, 2.0], [1.5f32, 0.25, 3.0]),
            ([0.1, 0.2, 0.3], [0.9, 1.1, 0.7]),
            ([-2.0, 4.0, 0.0], [2.0, 0.5, 1.0]),
        ];
        let direct = BatchNormConfig::new(3).init(&device);
        for (m, v) in &batches {
            update(&direct, 0.1, m, v);
        }
        let kept = BatchNormConfig::new(3).init(&device);
        let before = stats(&kept);
        let ((), pending) = collecting(|| {
            for (m, v) in &batches {
                update(&kept, 0.1, m, v);
            }
        });
        assert_eq!(stats(&kept), before, "nothing written while collecting");
        let kept = pending.apply(kept);
        assert_eq!(stats(&kept), stats(&direct));
        assert_ne!(stats(&kept), before);
        // Outside the scope updates go to the running state again.
        update(&kept, 0.1, &[0.0; 3], &[1.0; 3]);
        assert_ne!(stats(&kept), stats(&direct));
        let _ = kept.valid();
    }

    /// A scope inside another keeps its own values, and the outer one's survive it.
    #[test]
    fn nested_scopes_keep_their_own_values() {
        let device = crate::Backend::Flex.device().autodiff();
        let (outer_bn, inner_bn) = (
            BatchNormConfig::new(2).init(&device),
            BatchNormConfig::new(2).init(&device),
        );
        let ((((), inner), ()), outer) = collecting(|| {
            update(&outer_bn, 0.5, &[1.0, 1.0], &[2.0, 2.0]);
            let kept = collecting(|| update(&inner_bn, 0.5, &[3.0, 3.0], &[4.0, 4.0]));
            update(&outer_bn, 0.5, &[1.0, 1.0], &[2.0, 2.0]);
            (kept, ())
        });
        assert_eq!(inner.0.len(), 2, "the inner scope's mean and variance");
        assert_eq!(
            outer.0.len(),
            2,
            "the outer scope's, updated on both sides of it"
        );
        let outer_bn = outer.apply(outer_bn);
        assert_eq!(stats(&outer_bn)[0], vec![0.75, 0.75]);
    }
}
