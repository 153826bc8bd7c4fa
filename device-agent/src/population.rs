//! Device profiles for an emulated population, from the shared FedScale capacity and
//! AI-Benchmark eligibility traces (as the simulator assigns them), or synthetic.

use std::path::Path;
use venn_core::DeviceProfile;
use venn_traces::{DeviceCatalog, InputError};

/// Profiles of `n` devices: device i gets capacity row `i mod 992` and eligibility row
/// `i mod 959` of the traces in `traces_dir`, with benchmark scores that meet exactly its
/// eligible specs.
pub fn from_traces(traces_dir: &Path, n: usize) -> Result<Vec<DeviceProfile>, InputError> {
    let catalog = DeviceCatalog::load(traces_dir)?;
    Ok((0..n)
        .map(|i| {
            let p = catalog.profile(i);
            let hw = catalog
                .specs
                .hardware_for(p.eligible)
                .unwrap_or(venn_traces::Hardware {
                    fp16_memory: 0.0,
                    cpu_f: 0.0,
                    android_os: 0.0,
                });
            DeviceProfile::new(hw.cpu_f, hw.fp16_memory, hw.android_os)
                .with_speed(p.ms_per_sample, p.bandwidth_kbps)
        })
        .collect())
}

/// A deterministic synthetic population for when the traces are absent: a spread of
/// scores and speeds (device i's values cycle through small prime-length patterns).
pub fn synthetic(n: usize) -> Vec<DeviceProfile> {
    (0..n)
        .map(|i| {
            DeviceProfile::new(
                (i % 11) as f64,
                [10.0, 1000.0, 10.0, 1000.0, 0.0][i % 5],
                6.0 + (i % 3) as f64,
            )
            .with_speed(
                30.0 + (i % 7) as f64 * 20.0,
                4000.0 + (i % 13) as f64 * 2000.0,
            )
        })
        .collect()
}
