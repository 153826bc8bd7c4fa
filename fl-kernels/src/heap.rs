//! The process heap's settings for training: freed activation-sized buffers stay in the
//! heap for the next layer instead of going back to the OS.
//!
//! Why: glibc serves a block above its mmap threshold (128 KiB at first, raised as such
//! blocks are freed) with a fresh `mmap`, and gives the top of the heap back once more than
//! its trim threshold is free there. A training step allocates and frees activation-sized
//! buffers in every layer (MobileNet-V2 ×0.25 at batch 20: up to 3 MB each), so pages went
//! back to the OS and were faulted in and zeroed by the kernel again: page faults were
//! ~10 % of a MobileNet-V2 ×0.25 training step in perf (2026-12-07, fifth session). With
//! the thresholds fixed high, `fl-job bench` trained MobileNet-V2 ×0.25 6–11 % faster
//! (1 thread, alternated twice; ResNet-18 ×4 unchanged). The cost: up to
//! [`TRIM_THRESHOLD`] of freed memory per arena is kept rather than returned.

/// Blocks up to this size come from the heap (glibc's largest mmap threshold on 64-bit).
const MMAP_THRESHOLD: i32 = 32 << 20;

/// Free memory at the top of a heap kept before trimming.
pub const TRIM_THRESHOLD: i32 = 256 << 20;

/// Sets the heap's thresholds once for the process (glibc on Linux; elsewhere nothing).
/// fl-task calls it when a `flex` device is made.
pub fn keep_freed_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(set_thresholds);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn set_thresholds() {
    // SAFETY: `mallopt` only changes the allocator's parameters; it is called once, before
    // the training it tunes, and a refused value (0 returned) leaves glibc's defaults.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_thresholds() {}
