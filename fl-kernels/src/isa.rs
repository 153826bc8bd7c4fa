//! Which vector instructions the kernels run: the one place that asks the CPU.
//!
//! Why one place: the kernels used to choose an instruction set three ways (a macro of our
//! own over `is_x86_feature_detected!`, raw AVX-512 intrinsics behind a cached check, and
//! the `gemm` crate's own dispatch), and one of them, the direct convolution, ran AVX-512
//! from a safe function that did not check, so its tests died with SIGILL on AVX2 machines.
//! Now every kernel of ours runs through [`pulp`]: [`arch`] is the instruction set picked
//! once per process (AVX-512, AVX2 + FMA or scalar on x86-64; NEON or scalar on AArch64),
//! and `arch().run(op)` ([`Dispatch`]) runs `op` compiled for it (pulp's `vectorize`, a
//! `#[target_feature]` function entered only after its features were detected, so there
//! is no unsafe code here). The one kernel that only makes sense with one instruction
//! set's special instructions (the AVX-512 permutes of `simd/im2col.rs`) asks [`avx512`],
//! which is the same choice.
//!
//! `FL_JOB_ISA` (read once) lowers the choice, to measure or test one path on a machine
//! that has a wider one: `scalar`, or `avx2` (x86-64); unset or anything else: the widest.

use std::sync::OnceLock;

use pulp::{Simd, WithSimd};

/// An instruction set the kernels can run, with the proof (pulp's token) that the CPU has
/// it: only [`Isa::detect`] and [`Isa::all`] make one.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Isa {
    /// Plain `f32` arithmetic (fused multiply-adds in software where the CPU has none).
    Scalar,
    /// AVX2 + FMA, 8 lanes, 16 registers.
    #[cfg(target_arch = "x86_64")]
    Avx2(pulp::x86::V3),
    /// AVX-512 (F, VL, DQ, BW, CD), 16 lanes, 32 registers.
    #[cfg(target_arch = "x86_64")]
    Avx512(pulp::x86::V4),
    /// NEON, 4 lanes, 32 registers.
    #[cfg(target_arch = "aarch64")]
    Neon(pulp::aarch64::Neon),
}

impl Isa {
    /// The widest set this CPU runs, lowered to what `wanted` names if it runs that.
    fn detect(wanted: Option<&str>) -> Self {
        let all = Isa::all();
        let widest = *all.last().expect("scalar at least");
        match wanted {
            Some(name) => all.into_iter().find(|i| i.name() == name).unwrap_or(widest),
            None => widest,
        }
    }

    /// Every set this CPU runs, narrowest first: the tests run each kernel on all of them.
    pub(crate) fn all() -> Vec<Isa> {
        #[allow(unused_mut)]
        let mut out = vec![Isa::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(v3) = pulp::x86::V3::try_new() {
                out.push(Isa::Avx2(v3));
            }
            if let Some(v4) = pulp::x86::V4::try_new() {
                out.push(Isa::Avx512(v4));
            }
        }
        #[cfg(target_arch = "aarch64")]
        if let Some(neon) = pulp::aarch64::Neon::try_new() {
            out.push(Isa::Neon(neon));
        }
        out
    }

    /// Its short name: `scalar`, `avx2`, `avx512` or `neon`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2(_) => "avx2",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512(_) => "avx512",
            #[cfg(target_arch = "aarch64")]
            Isa::Neon(_) => "neon",
        }
    }
}

/// The instruction set the kernels run, chosen once (see the module doc).
pub(crate) fn arch() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| Isa::detect(std::env::var("FL_JOB_ISA").ok().as_deref()))
}

/// Runs a pulp op compiled for one instruction set: an [`Isa`] (what [`arch`] picked), or
/// [`On`] one `Simd` type, which tests use to run pulp's software-emulated 16 lanes
/// (AVX-512's blocking, on any CPU).
pub(crate) trait Dispatch: Copy + Send + Sync {
    /// `op` on this instruction set.
    fn run<Op: WithSimd>(self, op: Op) -> Op::Output;
}

impl Dispatch for Isa {
    #[inline(always)]
    fn run<Op: WithSimd>(self, op: Op) -> Op::Output {
        // `Simd::vectorize`, not the tokens' own `vectorize` (which takes a closure).
        match self {
            Isa::Scalar => Simd::vectorize(pulp::Scalar::new(), op),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2(simd) => Simd::vectorize(simd, op),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512(simd) => Simd::vectorize(simd, op),
            #[cfg(target_arch = "aarch64")]
            Isa::Neon(simd) => Simd::vectorize(simd, op),
        }
    }
}

/// One `Simd` type as a [`Dispatch`].
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct On<S>(pub S);

#[cfg(test)]
impl<S: Simd> Dispatch for On<S> {
    #[inline(always)]
    fn run<Op: WithSimd>(self, op: Op) -> Op::Output {
        Simd::vectorize(self.0, op)
    }
}

/// Whether [`arch`] is AVX-512 (then the AVX-512-only kernels may run).
pub(crate) fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    return matches!(arch(), Isa::Avx512(_));
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether the CPU is Intel's (`GenuineIntel`): a few path choices were measured to go the
/// other way there than on AMD's cores (`conv/direct.rs`, `weight_grad_pays`).
pub(crate) fn intel() -> bool {
    static INTEL: OnceLock<bool> = OnceLock::new();
    *INTEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let id = std::arch::x86_64::__cpuid(0);
            // "Genu" "ineI" "ntel" in EBX, EDX, ECX.
            (id.ebx, id.edx, id.ecx) == (0x756e_6547, 0x4965_6e69, 0x6c65_746e)
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// The name of the instruction set the kernels run (`avx512`, `avx2`, `neon`, `scalar`),
/// for reports (`fl-job bench`, test output).
pub fn name() -> &'static str {
    arch().name()
}

/// Writes a line to the terminal from a test, past the harness's capture (which hides
/// `println!` and `eprintln!` of passing tests): for what a test skipped or which paths
/// it ran, which the reader must see.
#[cfg(test)]
pub(crate) fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chosen set is the widest unless lowered, and lowering never picks one the CPU
    /// lacks. Prints the choice, so a test log says which paths ran.
    #[test]
    fn picks_the_widest_unless_lowered() {
        let names: Vec<&str> = Isa::all().into_iter().map(Isa::name).collect();
        say(&format!(
            "fl-job kernels run {} on this CPU; the tests run each of {names:?}",
            name()
        ));
        let widest = *names.last().expect("scalar at least");
        assert_eq!(names[0], "scalar");
        assert_eq!(Isa::detect(None).name(), widest);
        assert_eq!(Isa::detect(Some("scalar")).name(), "scalar");
        assert_eq!(Isa::detect(Some("no such set")).name(), widest);
        for n in &names {
            assert_eq!(Isa::detect(Some(n)).name(), *n);
        }
        #[cfg(target_arch = "x86_64")]
        {
            let has_avx2 = std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma");
            assert_eq!(names.contains(&"avx2"), has_avx2);
            let has_avx512 = std::arch::is_x86_feature_detected!("avx512f");
            if !has_avx512 {
                assert!(!names.contains(&"avx512"));
            }
        }
    }
}
