//! Per-thread scratch buffers and the zeroed outputs and ordered sums the kernels share.

use std::cell::RefCell;
use std::thread::LocalKey;

use rayon::prelude::*;

/// Runs `f` with this thread's `T`, kept from call to call. Why not rayon's `map_init`: that
/// makes a fresh `T` for every piece rayon splits a loop into, so every layer regrew (zeroed
/// and page-faulted) its buffers: 7 % of a ResNet-18 training step went to that `memset`. A
/// re-entrant call on the same thread (none of the kernels nests parallel loops, but a
/// future one might steal work while it waits) gets a fresh `T` instead of a borrow panic.
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
