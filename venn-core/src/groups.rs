//! Job groups: jobs with equal requirements, and each group's queue of open requests.
//!
//! Device tags come from anonymous clients, so classifying a new profile must not cost
//! groups × required tags × device tags × tag bytes: the tags the groups require are
//! interned to small ids, a device's tags are looked up once, and each group checks its
//! ids against the device's.

use crate::error::CoreError;
use crate::groupset::{GroupIdx, GroupSet, MAX_GROUPS};
use crate::hash::FastMap;
use crate::ids::JobId;
use crate::profile::{DeviceProfile, Requirement};

/// One job group.
#[derive(Clone, Debug)]
pub struct Group {
    /// The requirement all its jobs share.
    pub requirement: Requirement,
    /// Registered jobs of the group.
    pub members: Vec<JobId>,
    /// Jobs with open demand, in the policy's queue order (head first).
    pub queue: Vec<JobId>,
    /// The ids of its required tags in [`Groups`]' tag index, sorted.
    tag_ids: Vec<u32>,
}

/// All groups, by index.
#[derive(Clone, Debug, Default)]
pub struct Groups {
    slots: Vec<Option<Group>>,
    by_requirement: FastMap<Requirement, GroupIdx>,
    active: GroupSet,
    open: GroupSet,
    epoch: u64,
    /// Every tag some live group requires, with its id (keyed hash: registrants choose
    /// the tags).
    tag_index: foldhash::HashMap<String, u32>,
}

impl Groups {
    /// The group at `g`, if it exists.
    pub fn get(&self, g: GroupIdx) -> Option<&Group> {
        self.slots.get(g.0 as usize).and_then(|s| s.as_ref())
    }

    pub(crate) fn get_mut(&mut self, g: GroupIdx) -> &mut Group {
        self.slots[g.0 as usize]
            .as_mut()
            .expect("group index held by a job refers to a live group")
    }

    /// Groups with at least one registered job.
    pub fn active(&self) -> GroupSet {
        self.active
    }

    /// Bumped whenever a group is created or removed (the Venn diagram changed).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Groups with at least one job that wants devices.
    pub fn open(&self) -> GroupSet {
        self.open
    }

    /// Iterates over live groups.
    pub fn iter(&self) -> impl Iterator<Item = (GroupIdx, &Group)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|g| (GroupIdx(i as u16), g)))
    }

    /// Groups whose requirement admits `profile` (as [`Requirement::admits`] decides,
    /// in time linear in the device's tags plus the groups' required tags).
    pub fn admitting(&self, profile: &DeviceProfile) -> GroupSet {
        let mut s = GroupSet::EMPTY;
        let mut ids: Vec<u32> = Vec::new();
        if !self.tag_index.is_empty() {
            ids.extend(
                profile
                    .tags
                    .iter()
                    .filter_map(|t| self.tag_index.get(t.as_str()).copied()),
            );
            ids.sort_unstable();
            ids.dedup();
        }
        for (g, group) in self.iter() {
            if group.requirement.admits_numbers(profile)
                && group.tag_ids.iter().all(|t| ids.binary_search(t).is_ok())
            {
                s.insert(g);
            }
        }
        s
    }

    /// Rebuilds the tag index from the live groups (a group came or went).
    fn reindex_tags(&mut self) {
        self.tag_index.clear();
        for group in self.slots.iter_mut().flatten() {
            group.tag_ids.clear();
            for t in &group.requirement.tags {
                let next = self.tag_index.len() as u32;
                let id = *self.tag_index.entry(t.clone()).or_insert(next);
                group.tag_ids.push(id);
            }
            group.tag_ids.sort_unstable();
            group.tag_ids.dedup();
        }
    }

    /// Adds `job` to the group of `req`, creating it if needed. Returns the group and
    /// whether it is new.
    pub(crate) fn join(
        &mut self,
        req: &Requirement,
        job: JobId,
    ) -> Result<(GroupIdx, bool), CoreError> {
        if let Some(&g) = self.by_requirement.get(req) {
            self.get_mut(g).members.push(job);
            return Ok((g, false));
        }
        let idx = match self.slots.iter().position(|s| s.is_none()) {
            Some(i) => i,
            None if self.slots.len() < MAX_GROUPS => {
                self.slots.push(None);
                self.slots.len() - 1
            }
            None => return Err(CoreError::TooManyGroups(MAX_GROUPS)),
        };
        let g = GroupIdx(idx as u16);
        self.slots[idx] = Some(Group {
            requirement: req.clone(),
            members: vec![job],
            queue: Vec::new(),
            tag_ids: Vec::new(),
        });
        self.by_requirement.insert(req.clone(), g);
        self.active.insert(g);
        self.epoch += 1;
        if !req.tags.is_empty() {
            self.reindex_tags();
        }
        Ok((g, true))
    }

    /// Removes `job` from group `g`; returns `true` if the group is now gone.
    pub(crate) fn leave(&mut self, g: GroupIdx, job: JobId) -> bool {
        let group = self.get_mut(g);
        group.members.retain(|j| *j != job);
        group.queue.retain(|j| *j != job);
        if group.queue.is_empty() {
            self.open.remove(g);
        }
        if self.get_mut(g).members.is_empty() {
            let group = self.slots[g.0 as usize].take().expect("live group");
            self.by_requirement.remove(&group.requirement);
            self.active.remove(g);
            self.open.remove(g);
            self.epoch += 1;
            if !group.requirement.tags.is_empty() {
                self.reindex_tags();
            }
            return true;
        }
        false
    }

    pub(crate) fn enqueue(&mut self, g: GroupIdx, job: JobId) {
        let group = self.get_mut(g);
        if !group.queue.contains(&job) {
            group.queue.push(job);
        }
        self.open.insert(g);
    }

    pub(crate) fn dequeue(&mut self, g: GroupIdx, job: JobId) {
        let group = self.get_mut(g);
        group.queue.retain(|j| *j != job);
        if group.queue.is_empty() {
            self.open.remove(g);
        }
    }

    pub(crate) fn queues_mut(&mut self) -> impl Iterator<Item = &mut Vec<JobId>> {
        self.slots.iter_mut().flatten().map(|g| &mut g.queue)
    }
}
