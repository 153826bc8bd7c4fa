//! The `venn` policy: IRS (Algorithm 1) across groups, smallest remaining demand first
//! inside a group, tier matching (Algorithm 2) per request, and the fairness knob ε.
//!
//! **Fairness.** The paper's fair-share JCT is T_i = M·sd_i (M jobs sharing the
//! devices, sd_i the job's JCT alone). Its printed adjustment d'_i = d_i·(t_i/T_i)^ε
//! would make a job that has waited longer (larger t_i) look *bigger* and so later under
//! smallest-first, the opposite of the stated intent. We use
//!
//! ```text
//! d'_i = d_i · (1 + t_i / T_i)^(−ε)
//! ```
//!
//! with t_i the time since the job registered: ε = 0 is plain IRS; for ε > 0 a job's
//! priority rises smoothly as it uses up its fair share (at t_i = T_i its remaining
//! demand counts 2^ε times less), no job is ever starved by a stream of smaller ones, and
//! the factor is finite at t_i = 0 (unlike (T_i/t_i)^ε).

use super::irs::{self, IrsGroup};
use super::tier::choose_tier;
use super::{DeviceCtx, Policy, RequestPlan, SchedView, VennParams};
use crate::groupset::{GroupIdx, GroupSet};
use crate::hash::FastMap;
use crate::ids::JobId;
use crate::job::JobState;
use crate::rng::SeededRng;

const UNOWNED: u16 = u16::MAX;

/// Venn: IRS + tier matching + fairness.
#[derive(Debug, Clone)]
pub struct Venn {
    params: VennParams,
    owner_by_class: Vec<u16>,
    rank_of_group: Vec<u32>,
    planned_generation: u64,
    /// Cell of each class and the cells' group sets, valid while the diagram is unchanged
    /// (same classes, same groups): re-plans then only re-sum the counts.
    class_cell: Vec<usize>,
    cell_sets: Vec<GroupSet>,
    diagram_key: (u64, usize, u64),
}

impl Venn {
    /// A Venn policy with the given knobs (`irs` is tier matching off, V = 1).
    pub fn new(params: VennParams) -> Self {
        Venn {
            params,
            owner_by_class: Vec::new(),
            rank_of_group: Vec::new(),
            planned_generation: u64::MAX,
            class_cell: Vec::new(),
            cell_sets: Vec::new(),
            diagram_key: (u64::MAX, 0, 0),
        }
    }

    fn rank(&self, g: GroupIdx) -> u32 {
        self.rank_of_group
            .get(g.0 as usize)
            .copied()
            .unwrap_or(u32::MAX)
    }
}

impl Policy for Venn {
    fn name(&self) -> &'static str {
        if self.params.tiers.v <= 1 {
            "irs"
        } else {
            "venn"
        }
    }

    fn queue_key(&self, job: &JobState, view: &SchedView<'_>) -> f64 {
        let d = job.remaining_demand();
        match job.fair_share_jct {
            Some(t_fair) if self.params.epsilon > 0.0 && t_fair > 0.0 => {
                let waited = view.now.since(job.registered_at).max(0.0);
                d * (1.0 + waited / t_fair).powf(-self.params.epsilon)
            }
            _ => d,
        }
    }

    fn on_request(
        &mut self,
        job: &JobState,
        _: &SchedView<'_>,
        _: f64,
        rng: &mut SeededRng,
    ) -> RequestPlan {
        RequestPlan {
            tier: choose_tier(job, self.params.tiers, rng),
            not_before: None,
        }
    }

    fn plan(&mut self, view: &SchedView<'_>) {
        let classes = view.supply.classes();
        let key = (view.supply.generation(), classes.len(), view.groups.epoch());
        if key != self.diagram_key {
            let mut cell_of: FastMap<GroupSet, usize> = FastMap::default();
            self.cell_sets.clear();
            self.class_cell.clear();
            for c in classes {
                let i = *cell_of.entry(c.groups).or_insert_with(|| {
                    self.cell_sets.push(c.groups);
                    self.cell_sets.len() - 1
                });
                self.class_cell.push(i);
            }
            self.diagram_key = key;
        }
        let mut cells: Vec<(GroupSet, f64)> = self.cell_sets.iter().map(|s| (*s, 0.0)).collect();
        for (c, &i) in classes.iter().zip(&self.class_cell) {
            cells[i].1 += c.in_window as f64;
        }
        let class_cell = &self.class_cell;
        let groups: Vec<IrsGroup> = view
            .groups
            .iter()
            .map(|(g, group)| IrsGroup {
                group: g,
                demands: group
                    .queue
                    .iter()
                    .filter_map(|j| view.jobs.get(j))
                    .map(|j| j.remaining_demand())
                    .collect(),
            })
            .collect();
        let plan = irs::plan(&cells, &groups);
        self.owner_by_class = class_cell
            .iter()
            .map(|&c| plan.cell_owner[c].map_or(UNOWNED, |g| g.0))
            .collect();
        self.rank_of_group.clear();
        for (rank, g) in plan.scarcity_order.iter().enumerate() {
            let i = g.0 as usize;
            if self.rank_of_group.len() <= i {
                self.rank_of_group.resize(i + 1, u32::MAX);
            }
            self.rank_of_group[i] = rank as u32;
        }
        self.planned_generation = view.supply.generation();
    }

    fn region_owners(&self) -> Vec<(GroupSet, GroupIdx)> {
        let mut out: Vec<(GroupSet, GroupIdx)> = Vec::new();
        for (&cell, &o) in self.class_cell.iter().zip(&self.owner_by_class) {
            let set = self.cell_sets[cell];
            if o != UNOWNED && !out.iter().any(|(s, _)| *s == set) {
                out.push((set, GroupIdx(o)));
            }
        }
        out
    }

    fn select(
        &mut self,
        view: &SchedView<'_>,
        dev: &DeviceCtx<'_>,
        _: &mut SeededRng,
    ) -> Option<JobId> {
        if self.planned_generation == view.supply.generation()
            && let Some(&o) = self.owner_by_class.get(dev.class as usize)
            && o != UNOWNED
            && dev.eligible.contains(GroupIdx(o))
            && let Some(j) = view.first_fit(GroupIdx(o), dev)
        {
            return Some(j);
        }
        // Unowned cell, a class first seen after the plan, or the owner cannot use the
        // device: the scarcest eligible group with an accepting job gets it.
        let mut best: Option<(u32, JobId)> = None;
        for g in dev.eligible.iter() {
            let r = self.rank(g);
            if best.is_some_and(|b| b.0 <= r) {
                continue;
            }
            if let Some(j) = view.first_fit(g, dev) {
                best = Some((r, j));
            }
        }
        best.map(|b| b.1)
    }
}
