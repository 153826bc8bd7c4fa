//! Depthwise 3 × 3 convolution (one filter per channel, MobileNet-V2's middle layer), two
//! layouts chosen per layer by the dispatcher (`conv/mod.rs`): `nhwc.rs`, channels
//! innermost, for maps up to 7 × 7 where a plane is shorter than a vector; `planar.rs`,
//! plane by plane (stride 2 through phase-split padded planes), for larger maps. Activations
//! that are channels-last already (`channels_last/`) take `channels_last.rs` ("same" stride
//! 1, by row runs) or `pixels.rs` (strided, by pixel).

pub(crate) mod channels_last;
pub(crate) mod nhwc;
mod pixels;
pub(crate) mod planar;
