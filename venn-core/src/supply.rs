//! Supply estimation: check-in counts per device class over a sliding window.
//!
//! Devices with identical profiles form one *class*; each class carries the set of
//! job groups that admit it (its Venn-diagram cell). Counts live in a ring of time
//! buckets per class, so |S_j| and |S_j ∩ S_k| are check-in rates over the window
//! (paper §4.4), not instantaneous counts. When a group appears or disappears only the
//! class bitsets change: the history keeps counting for the new diagram.

use crate::groupset::{GroupIdx, GroupSet};
use crate::hash::FastMap;
use crate::profile::{DeviceProfile, Requirement};
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::hash::{BuildHasher, Hasher};

/// Sliding-window settings of the supply estimator.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SupplyConfig {
    /// Window length in seconds (paper: 24 h).
    pub window_s: f64,
    /// Number of buckets the window is split into (resolution of expiry).
    pub buckets: usize,
    /// Shortest history, in seconds, a rate is computed over early in a run (capped at
    /// one bucket): a few check-ins in the first instants must not read as a flood.
    #[serde(default = "default_min_span_s")]
    pub min_span_s: f64,
}

/// Default of [`SupplyConfig::min_span_s`]. (The floor used to be one bucket, an hour
/// with the default window, which made a live manager read its first hour's supply up to
/// 3600/elapsed times too low.)
pub const DEFAULT_MIN_SPAN_S: f64 = 10.0;

fn default_min_span_s() -> f64 {
    DEFAULT_MIN_SPAN_S
}

impl Default for SupplyConfig {
    fn default() -> Self {
        SupplyConfig {
            window_s: 24.0 * 3600.0,
            buckets: 24,
            min_span_s: DEFAULT_MIN_SPAN_S,
        }
    }
}

/// Index of a device class inside one estimator (stable until the next compaction).
pub type ClassIdx = u32;

/// One device class: a distinct profile and the groups that admit it.
#[derive(Clone, Debug)]
pub struct DeviceClass {
    /// The profile shared by every device of the class.
    pub profile: DeviceProfile,
    /// Groups that admit this class (its cell).
    pub groups: GroupSet,
    /// Check-ins inside the window.
    pub in_window: u64,
}

/// Check-in counts per class over a sliding window.
#[derive(Clone, Debug)]
pub struct SupplyEstimator {
    cfg: SupplyConfig,
    bucket_len: f64,
    head: Option<i64>,
    first_seen: Option<Time>,
    classes: Vec<DeviceClass>,
    counts: Vec<u32>,
    by_hash: FastMap<u64, ClassIdx>,
    next_same_hash: Vec<ClassIdx>,
    generation: u64,
    hash_key: ProfileHashKey,
    /// At most this many classes are made for distinct profiles; see
    /// [`SupplyEstimator::set_class_cap`].
    class_cap: Option<usize>,
    /// Check-ins counted in a class other than their own profile's (over the cap).
    folded: u64,
}

const NO_CLASS: ClassIdx = ClassIdx::MAX;
/// The tag of the one class that over-cap profiles with no fitting cell fold into (a tag
/// longer than any a client may send, so no real profile has it).
const OVERFLOW_TAG: &str =
    "venn:overflow-of-the-class-cap:no-group-admits-the-devices-counted-here";
/// Compaction only pays off once there are many dead classes.
const COMPACT_MIN_DEAD: usize = 4096;

/// Hashes a profile with the estimator's key. Profiles arrive from the network, so the
/// hash is keyed (foldhash, seeded by the driver: the live manager draws a random key):
/// without the key nobody can make many profiles share one hash and turn the class
/// lookup into a linear scan. The key changes no result, only where classes sit in the
/// lookup table.
fn profile_hash(key: &ProfileHashKey, p: &DeviceProfile) -> u64 {
    let mut h = key.build_hasher();
    p.hash_key(&mut h);
    h.finish()
}

type ProfileHashKey = foldhash::quality::FixedState;

impl SupplyEstimator {
    /// An empty estimator.
    pub fn new(cfg: SupplyConfig) -> Self {
        let buckets = cfg.buckets.max(1);
        SupplyEstimator {
            cfg: SupplyConfig { buckets, ..cfg },
            bucket_len: cfg.window_s.max(1e-9) / buckets as f64,
            head: None,
            first_seen: None,
            classes: Vec::new(),
            counts: Vec::new(),
            by_hash: FastMap::default(),
            next_same_hash: Vec::new(),
            generation: 0,
            hash_key: ProfileHashKey::with_seed(0),
            class_cap: None,
            folded: 0,
        }
    }

    /// Bounds the classes that distinct profiles make (a live driver's profiles come
    /// from anonymous clients; `None`, the default, bounds nothing). Past `cap` classes a
    /// new profile is folded into a class of the same cell — the same groups admit it,
    /// so the supply of every group and intersection counts as before — and only a new
    /// cell still makes a class. Past `2 × cap`, a new profile of a new cell folds into
    /// the class whose cell is the largest part of its own (or a class no group admits):
    /// its supply is under-counted, never over-counted, and the device is offered only
    /// jobs of that part.
    pub fn set_class_cap(&mut self, cap: Option<usize>) {
        self.class_cap = cap.map(|c| c.max(1));
    }

    /// Check-ins folded into another profile's class so far (see
    /// [`SupplyEstimator::set_class_cap`]).
    pub fn folded(&self) -> u64 {
        self.folded
    }

    /// Keys the profile hash with `key` (re-indexing the classes already known). A driver
    /// that takes profiles from the network should pass a key nobody else knows.
    pub fn set_hash_key(&mut self, key: u64) {
        self.hash_key = ProfileHashKey::with_seed(key);
        self.by_hash.clear();
        self.next_same_hash.clear();
        for (i, class) in self.classes.iter().enumerate() {
            let h = profile_hash(&self.hash_key, &class.profile);
            let prev = self.by_hash.insert(h, i as ClassIdx).unwrap_or(NO_CLASS);
            self.next_same_hash.push(prev);
        }
    }

    /// The settings.
    pub fn config(&self) -> SupplyConfig {
        self.cfg
    }

    /// Bumped whenever class indices change (compaction): cached per-class plans are stale.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// All classes, indexed by [`ClassIdx`].
    pub fn classes(&self) -> &[DeviceClass] {
        &self.classes
    }

    /// Seconds of history the counts cover: the window, or the time since the first
    /// check-in early in a run (never less than [`SupplyConfig::min_span_s`] or one
    /// bucket, whichever is shorter).
    pub fn effective_window(&self, now: Time) -> f64 {
        let floor = self.bucket_len.min(self.cfg.min_span_s).max(1e-9);
        match self.first_seen {
            Some(t0) => now.since(t0).clamp(floor, self.cfg.window_s),
            None => self.cfg.window_s,
        }
    }

    /// Finds (or creates) the class of `profile` without counting a check-in.
    /// `classify` gives the admitting groups of a new class.
    pub fn class_of(
        &mut self,
        profile: &DeviceProfile,
        classify: impl FnOnce(&DeviceProfile) -> GroupSet,
    ) -> ClassIdx {
        let h = profile_hash(&self.hash_key, profile);
        let mut c = self.by_hash.get(&h).copied().unwrap_or(NO_CLASS);
        while c != NO_CLASS {
            if self.classes[c as usize].profile.same_key(profile) {
                return c;
            }
            c = self.next_same_hash[c as usize];
        }
        let groups = classify(profile);
        if let Some(cap) = self.class_cap.filter(|c| self.classes.len() >= *c)
            && let Some(c) = self.fold_target(groups, cap)
        {
            self.folded += 1;
            return c;
        }
        self.new_class(h, profile.clone(), groups)
    }

    /// The class a new profile of cell `groups` folds into at the cap, if any.
    fn fold_target(&mut self, groups: GroupSet, cap: usize) -> Option<ClassIdx> {
        if let Some(i) = self.classes.iter().position(|c| c.groups == groups) {
            return Some(i as ClassIdx);
        }
        if self.classes.len() < 2 * cap {
            return None;
        }
        let part = self
            .classes
            .iter()
            .enumerate()
            .filter(|(_, c)| c.groups.and(&groups) == c.groups)
            .max_by_key(|(_, c)| c.groups.len())
            .map(|(i, _)| i as ClassIdx);
        Some(part.unwrap_or_else(|| {
            // No class's cell is part of this one: count it where no group looks.
            let none = DeviceProfile::new(0.0, 0.0, 0.0).with_tag(OVERFLOW_TAG);
            let h = profile_hash(&self.hash_key, &none);
            self.new_class(h, none, GroupSet::EMPTY)
        }))
    }

    fn new_class(&mut self, h: u64, profile: DeviceProfile, groups: GroupSet) -> ClassIdx {
        let idx = self.classes.len() as ClassIdx;
        let prev = self.by_hash.insert(h, idx).unwrap_or(NO_CLASS);
        self.next_same_hash.push(prev);
        self.classes.push(DeviceClass {
            profile,
            groups,
            in_window: 0,
        });
        self.counts.extend(std::iter::repeat_n(0, self.cfg.buckets));
        idx
    }

    /// Records one check-in of `class` at `now`, into the current bucket. Call
    /// [`SupplyEstimator::advance`] first so that `now`'s bucket is the current one
    /// (advancing may compact and renumber classes, so resolve `class` after it).
    pub fn record(&mut self, class: ClassIdx, now: Time) {
        self.record_n(class, now, 1);
    }

    /// Records `n` check-ins of `class` at `now` (see [`SupplyEstimator::record`]).
    pub fn record_n(&mut self, class: ClassIdx, now: Time, n: u32) {
        let slot = self.head.unwrap_or(0).rem_euclid(self.cfg.buckets as i64) as usize;
        self.counts[class as usize * self.cfg.buckets + slot] += n;
        self.classes[class as usize].in_window += n as u64;
        if self.first_seen.is_none() {
            self.first_seen = Some(now);
        }
    }

    /// Moves the window to `now`, expiring old buckets. Returns `true` on compaction.
    pub fn advance(&mut self, now: Time) -> bool {
        let b = (now.secs() / self.bucket_len).floor() as i64;
        let head = match self.head {
            None => {
                self.head = Some(b);
                return false;
            }
            Some(h) => h,
        };
        if b <= head {
            // Same bucket, or a late input: counted in the current bucket.
            return false;
        }
        let nb = self.cfg.buckets as i64;
        let steps = (b - head).min(nb);
        for k in 1..=steps {
            let slot = (head + k).rem_euclid(nb) as usize;
            for (c, class) in self.classes.iter_mut().enumerate() {
                let cell = &mut self.counts[c * self.cfg.buckets + slot];
                class.in_window -= *cell as u64;
                *cell = 0;
            }
        }
        self.head = Some(b);
        self.maybe_compact()
    }

    fn maybe_compact(&mut self) -> bool {
        let dead = self.classes.iter().filter(|c| c.in_window == 0).count();
        if dead < COMPACT_MIN_DEAD || dead * 2 < self.classes.len() {
            return false;
        }
        let nb = self.cfg.buckets;
        let old_classes = std::mem::take(&mut self.classes);
        let old_counts = std::mem::take(&mut self.counts);
        self.by_hash.clear();
        self.next_same_hash.clear();
        for (i, class) in old_classes.into_iter().enumerate() {
            if class.in_window == 0 {
                continue;
            }
            let idx = self.classes.len() as ClassIdx;
            let h = profile_hash(&self.hash_key, &class.profile);
            let prev = self.by_hash.insert(h, idx).unwrap_or(NO_CLASS);
            self.next_same_hash.push(prev);
            self.counts
                .extend_from_slice(&old_counts[i * nb..(i + 1) * nb]);
            self.classes.push(class);
        }
        self.generation += 1;
        true
    }

    /// Updates every class's bit for group `g` (a new group, or a freed slot with `None`).
    pub fn set_group(&mut self, g: GroupIdx, requirement: Option<&Requirement>) {
        // Tags through a hash set: the classes' tags come from anonymous clients, and
        // comparing every pair of strings would cost tags² × bytes per class.
        let wanted: foldhash::HashSet<&str> = requirement
            .map(|r| r.tags.iter().map(String::as_str).collect())
            .unwrap_or_default();
        let mut seen: foldhash::HashSet<&str> = Default::default();
        for class in &mut self.classes {
            let admits = requirement.is_some_and(|r| {
                r.admits_numbers(&class.profile) && {
                    seen.clear();
                    seen.extend(
                        class
                            .profile
                            .tags
                            .iter()
                            .map(String::as_str)
                            .filter(|t| wanted.contains(t)),
                    );
                    seen.len() == wanted.len()
                }
            });
            if admits {
                class.groups.insert(g);
            } else {
                class.groups.remove(g);
            }
        }
    }

    /// Check-ins in the window of devices that group `g` admits (|S_g|).
    pub fn group_supply(&self, g: GroupIdx) -> u64 {
        self.classes
            .iter()
            .filter(|c| c.groups.contains(g))
            .map(|c| c.in_window)
            .sum()
    }

    /// Check-ins per second of devices that group `g` admits.
    pub fn group_rate(&self, g: GroupIdx, now: Time) -> f64 {
        self.group_supply(g) as f64 / self.effective_window(now)
    }

    /// Window counts per non-empty cell of the current Venn diagram.
    pub fn cells(&self) -> Vec<(GroupSet, u64)> {
        let mut map: FastMap<GroupSet, u64> = FastMap::default();
        for c in &self.classes {
            if !c.groups.is_empty() {
                *map.entry(c.groups).or_default() += c.in_window;
            }
        }
        let mut v: Vec<_> = map.into_iter().collect();
        v.sort_by_key(|(g, _)| g.iter().map(|x| x.0).collect::<Vec<_>>());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(mem: f64) -> DeviceProfile {
        DeviceProfile::new(1.0, mem, 6.0)
    }

    #[test]
    fn counts_expire_after_the_window() {
        let mut s = SupplyEstimator::new(SupplyConfig {
            window_s: 100.0,
            buckets: 10,
            ..SupplyConfig::default()
        });
        let c = s.class_of(&dev(1.0), |_| GroupSet::EMPTY);
        for t in 0..50 {
            s.advance(Time(t as f64));
            s.record(c, Time(t as f64));
        }
        assert_eq!(s.classes()[c as usize].in_window, 50);
        s.advance(Time(120.0));
        // The window at t=120 is buckets [30,130): check-ins at t=30..49 remain.
        assert_eq!(s.classes()[c as usize].in_window, 20);
        s.advance(Time(1000.0));
        assert_eq!(s.classes()[c as usize].in_window, 0);
    }

    #[test]
    fn early_rates_are_counts_over_the_time_observed() {
        // The default window: 24 h in hourly buckets, as the live manager runs it.
        let mut s = SupplyEstimator::new(SupplyConfig::default());
        let c = s.class_of(&dev(1.0), |_| GroupSet::EMPTY);
        s.set_group(GroupIdx(0), Some(&Requirement::any()));
        let start = 1000.0;
        for i in 0..120 {
            let t = Time(start + i as f64 * 0.5);
            s.advance(t);
            s.record(c, t);
        }
        // Two check-ins a second for a minute: 2/s, not 120 per hour-long bucket.
        let rate = s.group_rate(GroupIdx(0), Time(start + 60.0));
        assert!((rate - 2.0).abs() < 1e-9, "{rate}");
        // A burst in the first instants is spread over the floor, not read as a flood.
        let mut s = SupplyEstimator::new(SupplyConfig::default());
        let c = s.class_of(&dev(1.0), |_| GroupSet::EMPTY);
        s.set_group(GroupIdx(0), Some(&Requirement::any()));
        for _ in 0..5 {
            s.record(c, Time(start));
        }
        let rate = s.group_rate(GroupIdx(0), Time(start + 0.001));
        assert!((rate - 5.0 / DEFAULT_MIN_SPAN_S).abs() < 1e-9, "{rate}");
        // With buckets shorter than the floor, one bucket is the floor (as before).
        let mut s = SupplyEstimator::new(SupplyConfig {
            window_s: 20.0,
            buckets: 10,
            ..SupplyConfig::default()
        });
        s.class_of(&dev(1.0), |_| GroupSet::EMPTY);
        s.record(0, Time(start));
        assert_eq!(s.effective_window(Time(start)), 2.0);
    }

    #[test]
    fn same_profile_same_class_and_group_bits_follow_requirements() {
        let mut s = SupplyEstimator::new(SupplyConfig::default());
        let a = s.class_of(&dev(1.0), |_| GroupSet::EMPTY);
        let b = s.class_of(&dev(2.0), |_| GroupSet::EMPTY);
        assert_eq!(a, s.class_of(&dev(1.0), |_| GroupSet::EMPTY));
        assert_ne!(a, b);
        for _ in 0..3 {
            s.record(a, Time(1.0));
        }
        s.record(b, Time(1.0));
        let big = Requirement::scores(0.0, 2.0, 0.0);
        s.set_group(GroupIdx(0), Some(&Requirement::any()));
        s.set_group(GroupIdx(1), Some(&big));
        assert_eq!(s.group_supply(GroupIdx(0)), 4);
        assert_eq!(s.group_supply(GroupIdx(1)), 1);
        assert_eq!(s.cells().len(), 2);
        s.set_group(GroupIdx(1), None);
        assert_eq!(s.group_supply(GroupIdx(1)), 0);
    }

    #[test]
    fn the_hash_key_changes_no_class_and_rekeying_keeps_them() {
        let profiles: Vec<_> = (0..50).map(|i| dev(i as f64)).collect();
        let mut a = SupplyEstimator::new(SupplyConfig::default());
        let mut b = SupplyEstimator::new(SupplyConfig::default());
        b.set_hash_key(0xdead_beef);
        let ca: Vec<_> = profiles
            .iter()
            .map(|p| a.class_of(p, |_| GroupSet::EMPTY))
            .collect();
        let cb: Vec<_> = profiles
            .iter()
            .map(|p| b.class_of(p, |_| GroupSet::EMPTY))
            .collect();
        assert_eq!(ca, cb);
        a.set_hash_key(42);
        let again: Vec<_> = profiles
            .iter()
            .map(|p| a.class_of(p, |_| GroupSet::EMPTY))
            .collect();
        assert_eq!(ca, again);
        assert_eq!(a.classes().len(), 50);
    }
}
