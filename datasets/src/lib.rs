//! FEMNIST in the LEAF JSON format: loading (plain or gzipped, one file or a directory
//! tree), per-writer partitions, the label map, seeded mini-batching, and (feature
//! `burn`) batches as Burn tensors; where the data lives ([`locate_data`]: flag,
//! `$VENN_DATA`, a downloaded set, `../shared/data`, then the subset built in). Feature
//! `download` adds [`download`]: fetching the full FEMNIST from Hugging Face and
//! converting it to this layout.
//!
//! Pixels are kept as the stored LEAF values `k/255` (1.0 = white background) in `u8`;
//! the models see [`model_pixel`]`(k) = 1 − k/255` (background 0, ink 1).

mod data_kind;
#[cfg(feature = "download")]
pub mod download;
mod embedded;
mod error;
mod femnist;
mod labels;
mod leaf;
mod location;
mod samples;
mod shuffle;
#[cfg(feature = "burn")]
mod tensor;

pub use error::LeafError;
pub use femnist::{Femnist, HeldOut, Stats, TooFewHeldOut, WriterSet};
pub use labels::{NUM_CLASSES, char_label, label_char};
pub use leaf::{IMAGE_PIXELS, Writer, leaf_files, parse_leaf, read_leaf, read_leaf_file};
pub use location::{
    DATA_ENV, DataKind, LEGACY_DATA_ENV, Located, Origin, locate, locate_data, user_data_dir,
};
pub use samples::{Batch, SampleView, Samples, model_pixel};
pub use shuffle::{SeededRng, shuffle, shuffled_indices};
