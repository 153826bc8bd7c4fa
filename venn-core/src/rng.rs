//! The testbed's one family of seeded random number generators: xoshiro256** seeded by
//! SplitMix64, with [`derive_seed`] to split one seed into independent streams.
//!
//! The core owns its randomness so that a run is reproducible from one seed whatever
//! crate versions the drivers use; a tiny in-house generator keeps that promise stable.
//! Every other reproducible stream of the live testbed draws from it too: the order a
//! device shuffles its samples in (`datasets`), each emulated device's jitter and
//! drop-offs and its training seed (`device-agent`). The one exception is the
//! simulator's input generators (`venn-traces`: synthetic availability, job draws, and
//! the engine's dispatch noise), which use ChaCha8 from `rand_chacha`, whose stream that
//! crate keeps stable across versions: changing it would change every published
//! simulator figure for the same seed.

/// A small, fast, seedable PRNG. Not cryptographic.
#[derive(Clone, Debug)]
pub struct SeededRng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SeededRng {
    /// A generator whose whole stream is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut st = seed;
        let s = [
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
        ];
        SeededRng { s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, n); `n` must be positive.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        // Lemire's multiply-shift; the tiny bias is irrelevant for scheduling.
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Exponentially distributed with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }

    /// Uniform in [lo, hi).
    pub fn range_f64(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }

    /// True with probability `p` (clamped to [0, 1]).
    pub fn chance(&mut self, p: f64) -> bool {
        self.f64() < p.clamp(0.0, 1.0)
    }

    /// Shuffles `items` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.f64();
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// The seed of stream `stream` of `seed` (SplitMix64 finalisation of both): independent,
/// reproducible seeds per device, round or worker from one experiment seed.
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_uniform_mean() {
        let mut a = SeededRng::new(7);
        let mut b = SeededRng::new(7);
        let xs: Vec<u64> = (0..100).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let mut c = SeededRng::new(8);
        assert_ne!(xs[0], c.next_u64());
        let mean = (0..100_000).map(|_| a.f64()).sum::<f64>() / 100_000.0;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        let e = (0..100_000).map(|_| a.exp(3.0)).sum::<f64>() / 100_000.0;
        assert!((e - 3.0).abs() < 0.1, "{e}");
        assert!((0..1000).all(|_| a.below(5) < 5));
    }

    #[test]
    fn helpers_stay_in_range_and_shuffles_permute() {
        let mut r = SeededRng::new(1);
        assert!((0..1000).all(|_| (2.0..3.0).contains(&r.range_f64(2.0, 3.0))));
        assert!(!(0..100).any(|_| r.chance(0.0)) && (0..100).all(|_| r.chance(1.0)));
        let mut v: Vec<u32> = (0..50).collect();
        r.shuffle(&mut v);
        assert_ne!(v, (0..50).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..50).collect::<Vec<_>>());
        assert_ne!(derive_seed(1, 2), derive_seed(1, 3));
        assert_ne!(derive_seed(1, 2), derive_seed(2, 2));
    }
}
