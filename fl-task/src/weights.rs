//! Weights as bytes: what travels between job and device.
//!
//! Layout: the magic `VENNWTS1`, a little-endian `u32` header length, a JSON
//! [`WeightsHeader`] (model kind and width, parameter and tensor counts), then Burn's
//! burnpack record at full `f32` precision (parameters and BatchNorm running statistics).
//! Loading checks the magic, the kind, the counts and every tensor's path and shape, and
//! says which one is wrong.

use burn::module::Module;
use burn::store::ModuleRecord;
use burn::tensor::{Bytes, Device};
use serde::{Deserialize, Serialize};

use crate::error::FlError;
use crate::model::{Model, ModelKind};
use crate::tensors::read_shapes;

/// First bytes of every weights blob.
pub const MAGIC: &[u8; 8] = b"VENNWTS1";

/// What a weights blob says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeightsHeader {
    /// The model the weights belong to.
    #[serde(flatten)]
    pub kind: ModelKind,
    /// Float values stored: parameters plus BatchNorm running statistics.
    pub params: usize,
    /// Float tensors stored (parameters and running statistics).
    pub tensors: usize,
}

/// Serialise `model` (of kind `kind`) at full precision.
pub fn to_bytes(kind: ModelKind, model: &Model) -> Result<Vec<u8>, FlError> {
    let header = WeightsHeader {
        kind,
        params: model.num_params(),
        tensors: read_shapes(model).len(),
    };
    let header = serde_json::to_vec(&header).map_err(|e| FlError::Weights(e.to_string()))?;
    let record = model
        .clone()
        .into_record()
        .into_bytes()
        .map_err(|e| FlError::Weights(e.to_string()))?;
    let mut out = Vec::with_capacity(12 + header.len() + record.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&record);
    Ok(out)
}

/// Split a blob into its header and the burnpack record.
fn split(bytes: &[u8]) -> Result<(WeightsHeader, &[u8]), FlError> {
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Err(FlError::Weights(
            "not a weights blob (missing VENNWTS1 magic)".into(),
        ));
    }
    let len = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    let Some(json) = bytes.get(12..12 + len) else {
        return Err(FlError::Weights(format!(
            "truncated: header of {len} bytes, blob of {}",
            bytes.len()
        )));
    };
    let header: WeightsHeader =
        serde_json::from_slice(json).map_err(|e| FlError::Weights(format!("bad header: {e}")))?;
    Ok((header, &bytes[12 + len..]))
}

/// Read only the header of a blob.
pub fn header(bytes: &[u8]) -> Result<WeightsHeader, FlError> {
    split(bytes).map(|(h, _)| h)
}

/// Rebuild the model a blob holds, on `device`.
pub fn from_bytes(bytes: &[u8], device: &Device) -> Result<(ModelKind, Model), FlError> {
    let (header, record) = split(bytes)?;
    header.kind.validate()?;
    let model = header.kind.init(device);
    let params = model.num_params();
    if params != header.params {
        return Err(FlError::Weights(format!(
            "{}: blob has {} parameters, this build's model has {params}",
            header.kind, header.params
        )));
    }
    let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(record.to_vec()))
        .map_err(|e| FlError::Weights(format!("{}: {e}", header.kind)))?;
    let model = model
        .try_load_record(record)
        .map_err(|e| FlError::Weights(format!("{}: {e}", header.kind)))?;
    Ok((header.kind, model))
}

/// Like [`from_bytes`], but refuse a blob of any kind other than `expected`.
pub fn load(expected: ModelKind, bytes: &[u8], device: &Device) -> Result<Model, FlError> {
    let found = header(bytes)?.kind;
    if found != expected {
        return Err(FlError::Weights(format!(
            "model mismatch: expected {expected}, blob holds {found}"
        )));
    }
    from_bytes(bytes, device).map(|(_, m)| m)
}
