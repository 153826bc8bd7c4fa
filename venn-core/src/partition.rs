//! Which samples each device holds: device `d` owns train writers `(d × W + k) mod n`,
//! `k < W`. The live device agent trains on those writers, `venn-lab sim` trains the same
//! ones on the virtual clock, and a task's time ([`TaskWork`](crate::TaskWork)) follows from
//! their sample count — one rule for all three.

/// Which train writers each device holds (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct DataPartition {
    /// Train samples of each writer, in the data set's writer order.
    pub writer_samples: Vec<u64>,
    /// Writers per device (`W`).
    pub writers_per_device: usize,
}

impl DataPartition {
    /// The writers device `device` holds (indices into [`Self::writer_samples`]).
    pub fn writers(&self, device: u64) -> impl Iterator<Item = usize> + '_ {
        let n = self.writer_samples.len().max(1);
        let w = self.writers_per_device;
        let first = (device as usize).wrapping_mul(w);
        (0..w).map(move |k| first.wrapping_add(k) % n)
    }

    /// Local samples of device `device`.
    pub fn samples(&self, device: u64) -> u64 {
        if self.writer_samples.is_empty() {
            return 0;
        }
        self.writers(device).map(|i| self.writer_samples[i]).sum()
    }

    /// A device's local samples on average over the writers: the nominal task's.
    pub fn mean_samples(&self) -> u64 {
        let n = self.writer_samples.len().max(1) as f64;
        let total: u64 = self.writer_samples.iter().sum();
        (total as f64 / n * self.writers_per_device as f64).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::DataPartition;

    #[test]
    fn a_device_holds_its_writers_samples() {
        let p = DataPartition {
            writer_samples: vec![10, 20, 30, 40, 50],
            writers_per_device: 2,
        };
        assert_eq!(p.writers(0).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(p.samples(0), 30);
        assert_eq!(p.samples(2), 50 + 10, "wraps around the writers");
        assert_eq!(p.samples(7), 50 + 10);
        assert_eq!(p.mean_samples(), 60);
    }
}
