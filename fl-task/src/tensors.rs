//! Reading every float tensor of a model (parameters and BatchNorm running statistics) and
//! writing them back, by module path. FedAvg and the tests build on this.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::{Tensor, TensorData};

use crate::error::FlError;
use crate::model::Model;

/// One float tensor of a model, in its saved layout.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    /// Module path, e.g. `ResNet18.blocks.0.conv1.bn.running_mean`.
    pub path: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub values: Vec<f32>,
}

struct Collect {
    path: Vec<String>,
    out: Vec<NamedTensor>,
    err: Option<String>,
}

impl ModuleVisitor for Collect {
    fn enter_module(&mut self, name: &str, _container: &str) {
        self.path.push(name.to_owned());
    }

    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        // The saved form, so that writing back through `transform_for_load` round-trips
        // parameters whose live layout differs from the stored one.
        let t = param.transform_for_save().val();
        let shape = t.dims().to_vec();
        match t.try_into_vec_as::<f32>() {
            Ok(values) => self.out.push(NamedTensor {
                path: self.path.join("."),
                shape,
                values,
            }),
            Err(e) => {
                self.err
                    .get_or_insert_with(|| format!("{}: {e:?}", self.path.join(".")));
            }
        }
    }
}

/// Every float tensor of `model` in visiting order (parameters and running statistics).
pub fn read_tensors(model: &Model) -> Result<Vec<NamedTensor>, FlError> {
    let mut c = Collect {
        path: Vec::new(),
        out: Vec::new(),
        err: None,
    };
    model.visit(&mut c);
    match c.err {
        Some(e) => Err(FlError::Tensor(e)),
        None => Ok(c.out),
    }
}

struct Write {
    tensors: std::vec::IntoIter<NamedTensor>,
}

impl ModuleMapper for Write {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let t = self
            .tensors
            .next()
            .expect("checked: one tensor per float parameter");
        let device = param.lazy_device();
        let tensor = Tensor::from_data(TensorData::new(t.values, t.shape), &device);
        let id = param.id;
        param.transform_for_load(tensor, id)
    }
}

/// `model` with its float tensors replaced by `tensors` (which must come from
/// [`read_tensors`] on a model of the same structure).
///
/// Burn's BatchNorm `RunningState` is shared by a module's clones and written in place, so
/// writing into `kept.clone()` changes `kept`'s running statistics too: pass a model of
/// your own (a fresh `ModelKind::init`, or `kept.valid()`, which gives an initialised
/// model running states of its own).
pub fn write_tensors(model: Model, tensors: Vec<NamedTensor>) -> Result<Model, FlError> {
    let current = read_shapes(&model);
    if current.len() != tensors.len() {
        return Err(FlError::FedAvg(format!(
            "model has {} float tensors, got {}",
            current.len(),
            tensors.len()
        )));
    }
    for ((path, shape), t) in current.iter().zip(&tensors) {
        if *path != t.path || *shape != t.shape || t.values.len() != shape.iter().product::<usize>()
        {
            return Err(FlError::FedAvg(format!(
                "tensor {} {:?} does not fit {path} {shape:?}",
                t.path, t.shape
            )));
        }
    }
    Ok(model.map(&mut Write {
        tensors: tensors.into_iter(),
    }))
}

struct Shapes {
    path: Vec<String>,
    out: Vec<(String, Vec<usize>)>,
}

impl ModuleVisitor for Shapes {
    fn enter_module(&mut self, name: &str, _container: &str) {
        self.path.push(name.to_owned());
    }

    fn exit_module(&mut self, _name: &str, _container: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.out
            .push((self.path.join("."), param.lazy_shape().as_slice().to_vec()));
    }
}

/// Paths and shapes of the float tensors, without reading their values.
pub fn read_shapes(model: &Model) -> Vec<(String, Vec<usize>)> {
    let mut s = Shapes {
        path: Vec::new(),
        out: Vec::new(),
    };
    model.visit(&mut s);
    s.out
}

/// Whether the tensor at module path `path` is a BatchNorm running statistic (not trained).
pub(crate) fn is_running_statistic(path: &str) -> bool {
    path.ends_with("running_mean") || path.ends_with("running_var")
}

/// Trainable parameter count: every float tensor except BatchNorm running statistics.
pub fn trainable_params(model: &Model) -> usize {
    read_shapes(model)
        .iter()
        .filter(|(p, _)| !is_running_statistic(p))
        .map(|(_, s)| s.iter().product::<usize>())
        .sum()
}
