//! Batches as Burn tensors (feature `burn`).

use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::samples::Batch;

impl Batch {
    /// The batch as `(images [n, 1, 28, 28] in model scale, labels [n])` on `device`.
    ///
    /// Images go through [`crate::model_pixel`]: background 0.0, ink near 1.0.
    pub fn to_tensors(&self, device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
        let n = self.len();
        let images =
            Tensor::from_data(TensorData::new(self.model_pixels(), [n, 1, 28, 28]), device);
        let labels: Vec<i64> = self.labels.iter().map(|&l| i64::from(l)).collect();
        let labels = Tensor::from_data(TensorData::new(labels, [n]), device);
        (images, labels)
    }
}
