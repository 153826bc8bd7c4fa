//! Deterministic shuffles by seed, drawn from the testbed's one generator family
//! (`venn_core::rng`, xoshiro256**) so that a seed gives the same order on every platform
//! and every dependency version: experiments must replay.

pub use venn_core::rng::SeededRng;

/// Shuffle `items` in place (Fisher–Yates) with a generator seeded by `seed`.
pub fn shuffle<T>(items: &mut [T], seed: u64) {
    SeededRng::new(seed).shuffle(items);
}

/// `0..n` in an order fixed by `seed`.
pub fn shuffled_indices(n: usize, seed: u64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    shuffle(&mut idx, seed);
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_order_and_a_permutation() {
        let a = shuffled_indices(100, 7);
        assert_eq!(a, shuffled_indices(100, 7));
        assert_ne!(a, shuffled_indices(100, 8));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
    }
}
