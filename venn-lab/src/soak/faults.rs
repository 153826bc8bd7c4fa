//! When things break: the soak's faults at seeded random moments. The faults are shuffled
//! and each gets its own slot of the middle of the run (10 % to 85 % of its duration), at
//! a random point of the slot, so no two overlap; the disk-full phase starts early in its
//! slot, so that it ends before the next fault.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// One fault.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// SIGKILL the manager and start it again on the same database.
    KillManager,
    /// SIGKILL a device shard while a round is open, and start it again.
    KillShard(usize),
    /// SIGKILL a job process while its round is open, and start it again.
    KillJob,
    /// Fill the manager's disk; it is freed `disk_full_s` later.
    DiskFull,
}

impl Fault {
    /// In words.
    pub fn describe(self) -> String {
        match self {
            Fault::KillManager => "SIGKILL manager, restart".into(),
            Fault::KillShard(k) => format!("SIGKILL device shard {k}, restart"),
            Fault::KillJob => "SIGKILL a job mid-round, restart".into(),
            Fault::DiskFull => "fill the manager's disk".into(),
        }
    }
}

/// The faults of a run of `seconds`, in time order: `(seconds after the start, fault)`.
pub fn schedule(
    seconds: f64,
    manager_kills: u32,
    shards: usize,
    disk: bool,
    seed: u64,
) -> Vec<(f64, Fault)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut faults: Vec<Fault> = (0..manager_kills).map(|_| Fault::KillManager).collect();
    faults.push(Fault::KillShard(rng.random_range(0..shards.max(1))));
    faults.push(Fault::KillJob);
    if disk {
        faults.push(Fault::DiskFull);
    }
    faults.shuffle(&mut rng);
    let (from, span) = (0.10 * seconds, 0.75 * seconds);
    let slot = span / faults.len() as f64;
    faults
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let within = match f {
                Fault::DiskFull => 0.05,
                _ => rng.random_range(0.1..0.9),
            };
            (from + slot * (i as f64 + within), f)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_gets_its_own_moment_inside_the_run() {
        let s = schedule(60.0, 3, 2, true, 9);
        assert_eq!(s.len(), 6);
        assert_eq!(
            s.iter().filter(|(_, f)| *f == Fault::KillManager).count(),
            3
        );
        assert!(s.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(s.iter().all(|(t, _)| *t >= 6.0 && *t <= 51.0));
        assert_eq!(s.iter().map(|x| x.0).collect::<Vec<_>>(), {
            let again = schedule(60.0, 3, 2, true, 9);
            again.iter().map(|x| x.0).collect::<Vec<_>>()
        });
    }
}
