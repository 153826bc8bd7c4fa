//! One slice of a population: `--shard K/N` emulates the devices whose index in the
//! whole population is K modulo N, with the ids, profiles, availability, writers and
//! random draws they have when the whole population runs in one process (each device's
//! behaviour depends on its index and the seed only). N agents on N hosts with shards
//! 0/N … N−1/N are therefore the same experiment as one agent with all devices.

use std::fmt;
use std::str::FromStr;

/// The K-th of N disjoint slices (`0/1`: the whole population).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// K, in 0..N.
    pub index: usize,
    /// N, at least 1.
    pub count: usize,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// The whole population.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Shard `index` of `count`, or why not.
    pub fn new(index: usize, count: usize) -> Result<Shard, String> {
        if count == 0 {
            return Err("a population has at least one shard (N ≥ 1)".into());
        }
        if index >= count {
            return Err(format!(
                "shard {index}/{count}: K must be below N (0-based)"
            ));
        }
        Ok(Shard { index, count })
    }

    /// Whether the device at `index` of the whole population is in this shard.
    pub fn contains(&self, index: usize) -> bool {
        index % self.count == self.index
    }

    /// The indices of this shard's devices in a population of `n`.
    pub fn devices(&self, n: usize) -> impl Iterator<Item = usize> + '_ {
        (self.index..n).step_by(self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: a shard is K/N, e.g. 0/4"))?;
        let parse = |v: &str, what: &str| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| format!("{s:?}: {what} is not a number"))
        };
        Shard::new(parse(k, "K")?, parse(n, "N")?)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_population() {
        for n in [0, 1, 7, 100] {
            for count in 1..=5 {
                let mut seen = vec![0; n];
                for k in 0..count {
                    let s = Shard::new(k, count).unwrap();
                    for i in s.devices(n) {
                        assert!(s.contains(i));
                        seen[i] += 1;
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "n {n}, N {count}: {seen:?}");
            }
        }
    }

    #[test]
    fn parses_k_of_n_and_names_what_is_wrong() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        assert_eq!("0/1".parse::<Shard>(), Ok(Shard::WHOLE));
        assert_eq!(Shard::new(3, 8).unwrap().to_string(), "3/8");
        for bad in ["4/4", "1/0", "x/2", "3", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
