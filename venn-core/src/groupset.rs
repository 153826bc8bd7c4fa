//! A fixed-size bitset of job groups: the key of a Venn-diagram cell.

use serde::{Deserialize, Serialize};

/// The most job groups that can be active at once.
pub const MAX_GROUPS: usize = 256;

/// Index of a job group (stable while the group has at least one job).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupIdx(pub u16);

/// A set of job groups, as a 256-bit bitset (`Copy`, no allocation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupSet([u64; MAX_GROUPS / 64]);

impl GroupSet {
    /// The empty set.
    pub const EMPTY: GroupSet = GroupSet([0; MAX_GROUPS / 64]);

    /// Adds a group.
    pub fn insert(&mut self, g: GroupIdx) {
        self.0[g.0 as usize / 64] |= 1 << (g.0 % 64);
    }

    /// Removes a group.
    pub fn remove(&mut self, g: GroupIdx) {
        self.0[g.0 as usize / 64] &= !(1 << (g.0 % 64));
    }

    /// Whether the group is in the set.
    pub fn contains(&self, g: GroupIdx) -> bool {
        self.0[g.0 as usize / 64] & (1 << (g.0 % 64)) != 0
    }

    /// Intersection.
    pub fn and(&self, o: &GroupSet) -> GroupSet {
        let mut r = *self;
        for (a, b) in r.0.iter_mut().zip(o.0.iter()) {
            *a &= *b;
        }
        r
    }

    /// Union.
    pub fn or(&self, o: &GroupSet) -> GroupSet {
        let mut r = *self;
        for (a, b) in r.0.iter_mut().zip(o.0.iter()) {
            *a |= *b;
        }
        r
    }

    /// Whether the two sets share a group.
    pub fn intersects(&self, o: &GroupSet) -> bool {
        self.0.iter().zip(o.0.iter()).any(|(a, b)| a & b != 0)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// Number of groups in the set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The groups in increasing index order.
    pub fn iter(&self) -> impl Iterator<Item = GroupIdx> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some(GroupIdx((i * 64 + b as usize) as u16))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_iterate() {
        let mut s = GroupSet::EMPTY;
        for g in [0u16, 63, 64, 200, 255] {
            s.insert(GroupIdx(g));
        }
        assert_eq!(s.len(), 5);
        assert!(s.contains(GroupIdx(200)));
        s.remove(GroupIdx(200));
        assert!(!s.contains(GroupIdx(200)));
        let v: Vec<u16> = s.iter().map(|g| g.0).collect();
        assert_eq!(v, vec![0, 63, 64, 255]);
        let mut t = GroupSet::EMPTY;
        t.insert(GroupIdx(64));
        assert_eq!(s.and(&t).iter().map(|g| g.0).collect::<Vec<_>>(), vec![64]);
        assert!(GroupSet::EMPTY.is_empty());
    }
}
