//! Picking the Burn device. Burn 0.22 has no backend type parameter: one `Device` value
//! selects the backend at run time, so the choice is an enum here, and GPU backends are
//! compiled in only with the `wgpu` / `cuda` cargo features.

use std::fmt;
use std::str::FromStr;

use burn::tensor::Device;

use crate::error::FlError;

/// A compute backend this build can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// Burn's pure-Rust CPU backend (the default: fastest CPU backend measured here).
    #[default]
    Flex,
    /// The deprecated `burn-ndarray` CPU backend (feature `ndarray`), kept for comparison.
    #[cfg(feature = "ndarray")]
    Ndarray,
    /// WebGPU / Vulkan / Metal (feature `wgpu`).
    #[cfg(feature = "wgpu")]
    Wgpu,
    /// CUDA GPU 0 (feature `cuda`).
    #[cfg(feature = "cuda")]
    Cuda,
}

impl Backend {
    /// The device of this backend (without autodiff; training adds it).
    pub fn device(self) -> Device {
        match self {
            Backend::Flex => {
                fl_kernels::heap::keep_freed_memory();
                Device::flex()
            }
            #[cfg(feature = "ndarray")]
            #[allow(deprecated)]
            Backend::Ndarray => Device::ndarray(),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu => Device::wgpu(burn::tensor::DeviceKind::DefaultDevice),
            #[cfg(feature = "cuda")]
            Backend::Cuda => Device::cuda(0),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Backend::Flex => "flex",
            #[cfg(feature = "ndarray")]
            Backend::Ndarray => "ndarray",
            #[cfg(feature = "wgpu")]
            Backend::Wgpu => "wgpu",
            #[cfg(feature = "cuda")]
            Backend::Cuda => "cuda",
        };
        f.write_str(name)
    }
}

impl FromStr for Backend {
    type Err = FlError;

    fn from_str(s: &str) -> Result<Self, FlError> {
        match s {
            "flex" => Ok(Backend::Flex),
            #[cfg(feature = "ndarray")]
            "ndarray" => Ok(Backend::Ndarray),
            #[cfg(feature = "wgpu")]
            "wgpu" => Ok(Backend::Wgpu),
            #[cfg(feature = "cuda")]
            "cuda" => Ok(Backend::Cuda),
            _ => Err(FlError::Config(format!(
                "backend {s:?} is not built in; this build has: {}",
                Backend::available().join(", ")
            ))),
        }
    }
}

impl Backend {
    /// Names of the backends compiled into this build.
    pub fn available() -> Vec<&'static str> {
        let mut v = vec!["flex"];
        if cfg!(feature = "ndarray") {
            v.push("ndarray");
        }
        if cfg!(feature = "wgpu") {
            v.push("wgpu");
        }
        if cfg!(feature = "cuda") {
            v.push("cuda");
        }
        v
    }
}
