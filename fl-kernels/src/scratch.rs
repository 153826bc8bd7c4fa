//! Per-thread scratch buffers, the zeroed (or, for kernels that write them whole, uninitialised)
//! outputs and the ordered sums the kernels share.

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::thread::LocalKey;

use rayon::prelude::*;

/// Runs `f` with this thread's `T`, kept from call to call. Why not rayon's `map_init`: that
/// makes a fresh `T` for every piece rayon splits a loop into, so every layer regrew (zeroed
/// and page-faulted) its buffers: 7 % of a ResNet-18 training step went to that `memset`. A
/// re-entrant call on the same thread (a kernel that runs a parallel loop while it holds its
/// buffer, as `conv/direct.rs`'s weight gradient does, may steal other work while it waits)
/// gets a fresh `T` instead of a borrow panic.
pub(crate) fn with_local<T: Default + 'static, R>(
    key: &'static LocalKey<RefCell<T>>,
    f: impl FnOnce(&mut T) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut t) => f(&mut t),
        Err(_) => f(&mut T::default()),
    })
}

/// `len` zeros. On a pool of one thread (a round's trainings and evaluations run one per
/// thread, on lanes) `vec![0.0; len]`, which allocates zeroed memory (`calloc`: fresh pages
/// come zeroed from the kernel, reused ones are cleared by `memset`, tens of bytes a cycle);
/// on a larger pool, written by all its threads.
///
/// Why both: one computation spread over the pool would otherwise zero (or page-fault in) a
/// layer's whole output on the calling thread while the others wait, 3–4 % of a 2-thread
/// training step; but rayon writes those zeros element by element through its generic
/// collector, a few bytes a cycle, so on one thread that loop was 12.6 % of a MobileNet-V2
/// ×0.25 evaluation and 5.7 % of its training (perf, 2026-12-07). Side by side, `fl-job
/// bench`, 3 alternations: 1 thread, inference 3,337–3,496 → 3,630–3,690 samples/s; 2
/// threads, the parallel writes kept (5,115–5,346 samples/s with `vec!` against
/// 5,429–5,549).
pub(crate) fn zeroed(len: usize) -> Vec<f32> {
    const PARALLEL_FROM: usize = 1 << 16;
    if len < PARALLEL_FROM || rayon::current_num_threads() == 1 {
        return vec![0.0; len];
    }
    let mut v = Vec::with_capacity(len);
    v.par_extend(rayon::iter::repeat_n(0.0f32, len));
    v
}

/// `len` values written by `fill(piece index, piece)` over pieces of `piece` values (the
/// last may be shorter), each piece zero when `fill` gets it. On a one-thread pool each
/// piece is zeroed just before it is filled, while it is in cache; on more threads the
/// buffer is [`zeroed`] and the pieces filled in parallel.
///
/// Why: zeroing a fresh activation-sized output whole and then writing it is two passes
/// over memory that is not in cache; for a pass of one multiply-add per value (BatchNorm)
/// the zeroing was a third of its time, and 3.7 % of a MobileNet-V2 ×0.25 training step in
/// the convolutions' outputs (perf, 2026-12-07).
pub(crate) fn build(len: usize, piece: usize, fill: impl Fn(usize, &mut [f32]) + Sync) -> Vec<f32> {
    build_with(len, piece, fill).0
}

/// [`build`], also collecting what `fill` returns for each piece, in piece order.
pub(crate) fn build_with<R: Send>(
    len: usize,
    piece: usize,
    fill: impl Fn(usize, &mut [f32]) -> R + Sync,
) -> (Vec<f32>, Vec<R>) {
    assert!(piece > 0, "scratch::build: empty pieces");
    if rayon::current_num_threads() == 1 {
        let mut v = Vec::with_capacity(len);
        let mut results = Vec::with_capacity(len.div_ceil(piece));
        while v.len() < len {
            let start = v.len();
            v.resize((start + piece).min(len), 0.0);
            results.push(fill(results.len(), &mut v[start..]));
        }
        (v, results)
    } else {
        let mut v = zeroed(len);
        let results = v
            .par_chunks_mut(piece)
            .enumerate()
            .map(|(i, p)| fill(i, p))
            .collect();
        (v, results)
    }
}

/// [`build_with`] for fills that write every value of their piece: the pieces are handed
/// over uninitialised instead of zeroed.
///
/// Why: where a kernel overwrites its whole output (a GEMM without accumulation,
/// BatchNorm's normalising pass), zeroing it first is one more pass over memory that is
/// not in cache; the zeroing in front of the pointwise convolutions' and BatchNorm's
/// outputs was 4.7 % of a MobileNet-V2 ×0.25 round (perf, 2026-12-08).
///
/// # Safety
///
/// `fill(i, piece)` must initialise every element of `piece` before it returns.
#[allow(unsafe_code)]
pub(crate) unsafe fn build_uninit<R: Send>(
    len: usize,
    piece: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<f32>]) -> R + Sync,
) -> (Vec<f32>, Vec<R>) {
    assert!(piece > 0, "scratch::build_uninit: empty pieces");
    let mut v: Vec<f32> = Vec::with_capacity(len);
    let spare = &mut v.spare_capacity_mut()[..len];
    let results = if rayon::current_num_threads() == 1 {
        spare
            .chunks_mut(piece)
            .enumerate()
            .map(|(i, p)| fill(i, p))
            .collect()
    } else {
        spare
            .par_chunks_mut(piece)
            .enumerate()
            .map(|(i, p)| fill(i, p))
            .collect()
    };
    // SAFETY: the pieces cover `0..len` and the caller's `fill` initialised each.
    unsafe { v.set_len(len) };
    (v, results)
}

/// A backward pass cut into pieces: with `want_dx`, `f(i, Some(piece))` fills piece `i` of
/// a `len`-long input gradient built as by [`build_with`]; without, `f(i, None)` runs for
/// each of the `len / piece` pieces in parallel. Either way `f`'s results (its share of a
/// weight gradient) come back in piece order, for [`sum_partials`].
pub(crate) fn backward_pieces<R: Send>(
    want_dx: bool,
    len: usize,
    piece: usize,
    f: impl Fn(usize, Option<&mut [f32]>) -> R + Sync,
) -> (Option<Vec<f32>>, Vec<R>) {
    if want_dx {
        let (dx, results) = build_with(len, piece, |i, d| f(i, Some(d)));
        (Some(dx), results)
    } else {
        let pieces = len.div_ceil(piece);
        (
            None,
            (0..pieces).into_par_iter().map(|i| f(i, None)).collect(),
        )
    }
}

/// Piece `i` of `data` cut into pieces of `len` (the last may be shorter): the input
/// beside [`build`]'s piece `i`.
pub(crate) fn piece(data: &[f32], i: usize, len: usize) -> &[f32] {
    &data[i * len..((i + 1) * len).min(data.len())]
}

/// The first `len` elements of `buf`, growing it if needed.
pub(crate) fn take(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

/// Sums the groups' weight gradients, in group order.
pub(crate) fn sum_partials(partials: Vec<Option<Vec<f32>>>, len: usize) -> Vec<f32> {
    let mut it = partials.into_iter().flatten();
    let mut total = it.next().unwrap_or_else(|| vec![0.0; len]);
    let rest: Vec<Vec<f32>> = it.collect();
    // In parallel over pieces of the result; each element still adds the partials in group
    // order, so the bits do not depend on the thread count. (Serial, this sum was a
    // millisecond per ResNet-18 ×64 4 × 4 layer with the other thread idle.)
    const PIECE: usize = 1 << 14;
    total.par_chunks_mut(PIECE).enumerate().for_each(|(i, t)| {
        for p in &rest {
            for (t, v) in t.iter_mut().zip(&p[i * PIECE..]) {
                *t += *v;
            }
        }
    });
    total
}

#[cfg(test)]
mod tests {
    use std::mem::MaybeUninit;

    use super::{build, build_uninit};

    /// One thread or two: every piece arrives zeroed, the last one short, in index order.
    #[test]
    fn build_hands_out_zeroed_pieces_in_order() {
        let pool = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        };
        let fill = |i: usize, p: &mut [f32]| {
            assert!(p.iter().all(|&v| v == 0.0), "piece {i} not zeroed");
            for (j, v) in p.iter_mut().enumerate() {
                *v += (i * 10 + j) as f32;
            }
        };
        for threads in [1, 2] {
            // Twice, so the second call may reuse the first's freed (dirty) memory.
            for _ in 0..2 {
                let v = pool(threads).install(|| build(23, 10, fill));
                let want: Vec<f32> = (0..23).map(|k| ((k / 10) * 10 + k % 10) as f32).collect();
                assert_eq!(v, want, "{threads} thread(s)");
            }
        }
    }

    /// One thread or two: uninitialised pieces cover the output in index order, the last
    /// one short, and what each fill returns comes back in that order.
    #[test]
    fn build_uninit_hands_out_every_piece_once() {
        let fill = |i: usize, p: &mut [MaybeUninit<f32>]| {
            for (j, v) in p.iter_mut().enumerate() {
                *v = MaybeUninit::new((i * 10 + j) as f32);
            }
            (i, p.len())
        };
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
            // SAFETY: `fill` writes every element of its piece.
            #[allow(unsafe_code)]
            let (v, r) = pool
                .unwrap()
                .install(|| unsafe { build_uninit(23, 10, fill) });
            let want: Vec<f32> = (0..23).map(|k| ((k / 10) * 10 + k % 10) as f32).collect();
            assert_eq!(v, want, "{threads} thread(s)");
            assert_eq!(r, vec![(0, 10), (1, 10), (2, 3)]);
        }
    }
}
