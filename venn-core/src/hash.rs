//! A fast non-cryptographic hasher for the core's internal maps, whose keys are ids the
//! core or a trusted driver chose (job ids, group sets, class hashes), so HashDoS
//! resistance is not needed there. Device profiles, which come from the network, are
//! hashed with a keyed hasher instead (see `supply.rs`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hasher in the style of rustc's FxHasher.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(buf));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(26) ^ n).wrapping_mul(K);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0.rotate_left(20)
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
