//! [`wide!`]: compile a loop for this CPU's widest vector instructions, chosen at run time.
//!
//! Why: the crate is built for baseline x86-64 (SSE2, 4 lanes) so that one binary runs on
//! any machine, and the `gemm` crate dispatches its micro-kernels at run time, but our own
//! loops (tile transforms, layout conversions) stayed at 4 lanes on a machine with 16.
//! `wide!` wraps a function so that its body runs through [`crate::isa::arch`]: pulp
//! compiles it for AVX-512, AVX2 + FMA and the baseline (NEON on AArch64) and calls the
//! one picked once for the process. Results are bit-identical across them: Rust never
//! contracts `a * b + c` into a fused multiply-add nor reorders float sums, so wider
//! vectors only do the same operations more at a time.
//!
//! Helpers the body calls are compiled wide only if they are inlined into it: mark them
//! `#[inline(always)]`. Kernels that need explicit vectors (fused multiply-adds held in
//! registers) implement [`pulp::WithSimd`] instead (`conv/direct.rs`).

/// `wide! { fn name(arg: Type, …) -> Ret { body } }`: the function, with its body compiled
/// for every instruction set pulp dispatches to, run on [`crate::isa::arch`]'s. Plain
/// (non-generic) functions only; attributes and visibility are kept.
pub(crate) mod im2col;

macro_rules! wide {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $crate::simd::wide! { $(#[$meta])* $vis fn $name($($arg: $ty),*) -> () $body }
    };
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) -> $ret {
            #[inline(always)]
            fn body($($arg: $ty),*) -> $ret $body
            // The arguments travel in a `WithSimd` whose `with_simd` is inlined into pulp's
            // function compiled for the instruction set, and `body` into it. Why not a
            // closure: pulp calls a closure through its `call_once`, which the compiler
            // kept out of line where the body was large, compiled for baseline x86-64
            // (4-lane SSE): BatchNorm's backward loops ran that way (perf annotate,
            // 2026-12-08, tenth session).
            struct Args<T>(T);
            impl pulp::WithSimd for Args<($($ty,)*)> {
                type Output = $ret;
                #[inline(always)]
                fn with_simd<S: pulp::Simd>(self, _: S) -> $ret {
                    let ($($arg,)*) = self.0;
                    body($($arg),*)
                }
            }
            $crate::isa::Dispatch::run($crate::isa::arch(), Args(($($arg,)*)))
        }
    };
}

pub(crate) use wide;

wide! {
    /// `data` as rows of `c` channels (channels-last): `y = act(y · scale[ch] + shift[ch])`
    /// for every row, the [`Epilogue`](crate::types::Epilogue) of a channels-last output.
    pub(crate) fn epilogue_rows(e: &crate::types::Epilogue<'_>, data: &mut [f32], c: usize) {
        let (a, b) = (&e.scale[..c], &e.shift[..c]);
        for row in data.chunks_exact_mut(c) {
            let all = row.iter_mut().zip(a).zip(b);
            match e.act {
                crate::types::Act::None => all.for_each(|((y, &a), &b)| *y = *y * a + b),
                crate::types::Act::Relu => all.for_each(|((y, &a), &b)| *y = (*y * a + b).max(0.0)),
                crate::types::Act::Relu6 => {
                    all.for_each(|((y, &a), &b)| *y = (*y * a + b).clamp(0.0, 6.0))
                }
            }
        }
    }
}

/// Lanes per chunk in [`lin`]: one AVX-512 register of `f32`.
const LANES: usize = 16;

/// `dst = Σ k · s` over the terms, element by element, summed left to right. `s · 1` and
/// `a + (−1) · b` are exactly `s` and `a − b`, so this also serves for copies and
/// differences.
///
/// Why chunks of fixed-size arrays: written as one loop over the elements, the compiler
/// vectorised it with a run-time overlap check and four-register unrolling, and at 32 or 64
/// channels ran the scalar fallback (0.8 ns per element); as whole 16-lane chunks it is one
/// vector instruction per term and chunk (0.09–0.14 ns). Inline it into a [`wide!`] body.
#[inline(always)]
pub(crate) fn lin<const N: usize>(dst: &mut [f32], terms: [(&[f32], f32); N]) {
    let c = dst.len();
    let t = terms.map(|(s, k)| (&s[..c], k));
    let whole = c / LANES * LANES;
    for i in (0..whole).step_by(LANES) {
        let chunk = |s: &[f32]| -> [f32; LANES] { s[i..i + LANES].try_into().expect("16 lanes") };
        let first = chunk(t[0].0);
        let mut acc: [f32; LANES] = std::array::from_fn(|j| first[j] * t[0].1);
        for (s, k) in &t[1..] {
            let x = chunk(s);
            for j in 0..LANES {
                acc[j] += x[j] * k;
            }
        }
        dst[i..i + LANES].copy_from_slice(&acc);
    }
    for i in whole..c {
        let mut acc = t[0].0[i] * t[0].1;
        for (s, k) in &t[1..] {
            acc += s[i] * k;
        }
        dst[i] = acc;
    }
}

/// `dst.copy_from_slice(src)` for short runs (a map's row of a few dozen floats), inlined:
/// whole 16- and 4-float chunks as fixed-size copies, then single floats.
///
/// Why: `copy_from_slice` of a run-time length is a call to libc's `memmove`, whose
/// dispatch costs more than a 28-float copy; the direct convolution's row copies (padding,
/// widening, unpadding) were 19 % of its time on ResNet-18 ×4's 4 → 4 layers (perf,
/// 2026-12-07).
#[inline(always)]
pub(crate) fn copy_run(dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len(), "copy_run: lengths");
    let mut d = dst.chunks_exact_mut(LANES);
    let mut s = src.chunks_exact(LANES);
    for (d, s) in (&mut d).zip(&mut s) {
        let v: [f32; LANES] = s.try_into().expect("16 floats");
        d.copy_from_slice(&v);
    }
    let (d, s) = (d.into_remainder(), s.remainder());
    let mut d4 = d.chunks_exact_mut(4);
    let mut s4 = s.chunks_exact(4);
    for (d, s) in (&mut d4).zip(&mut s4) {
        let v: [f32; 4] = s.try_into().expect("4 floats");
        d.copy_from_slice(&v);
    }
    for (d, s) in d4.into_remainder().iter_mut().zip(s4.remainder()) {
        *d = *s;
    }
}

#[cfg(test)]
mod tests {
    wide! {
        /// A loop the vectoriser widens, and a sum it must not reorder.
        fn scaled_sum(xs: &[f32], a: f32, out: &mut [f32]) -> f32 {
            let mut s = 0.0f32;
            for (o, x) in out.iter_mut().zip(xs) {
                *o = *x * a + 1.0;
                s += *o;
            }
            s
        }
    }

    /// `lin` on lengths around the chunk size: the same bits as the plain expression, and
    /// unit and negative-unit weights give exact copies and differences.
    #[test]
    fn lin_is_the_plain_expression() {
        for c in [1usize, 15, 16, 17, 40, 64] {
            let a: Vec<f32> = (0..c).map(|i| (i as f32 * 0.31).sin()).collect();
            let b: Vec<f32> = (0..c).map(|i| (i as f32 * 0.17).cos()).collect();
            let mut d = vec![0.0; c];
            super::lin(&mut d, [(&a, 4.0), (&b, -5.0), (&a, 0.5)]);
            for i in 0..c {
                let want = a[i] * 4.0 + b[i] * -5.0 + a[i] * 0.5;
                assert_eq!(d[i].to_bits(), want.to_bits(), "c {c} at {i}");
            }
            super::lin(&mut d, [(&a, 1.0), (&b, -1.0)]);
            for i in 0..c {
                assert_eq!(d[i].to_bits(), (a[i] - b[i]).to_bits(), "c {c} at {i}");
            }
        }
    }

    /// The dispatched version gives exactly what the same loop gives unwrapped.
    #[test]
    fn same_bits_as_the_plain_loop() {
        let xs: Vec<f32> = (0..1001).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut a = vec![0.0; xs.len()];
        let mut b = vec![0.0; xs.len()];
        let sa = scaled_sum(&xs, 1.3, &mut a);
        let mut sb = 0.0f32;
        for (o, x) in b.iter_mut().zip(&xs) {
            *o = std::hint::black_box(*x * 1.3) + 1.0;
            sb += *o;
        }
        assert_eq!(a, b);
        assert_eq!(sa.to_bits(), sb.to_bits());
    }
}
