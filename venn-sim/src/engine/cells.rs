//! Supply per Venn cell, before a run: the trace's check-ins grouped by the set of jobs
//! they qualify for — the regions of the paper's Venn diagram that Intersection Resource
//! Scheduling assigns — with how many devices and check-ins an hour each holds. Jobs that
//! admit exactly the same check-ins (equal requirements, or requirements this trace cannot
//! tell apart) form one group; a cell is a set of groups.

use std::collections::{BTreeMap, HashSet};

use super::config::SimConfig;
use super::setup::SimInput;

/// Jobs that admit exactly the same check-ins of the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct JobGroup {
    /// The jobs' indices, ascending.
    pub jobs: Vec<usize>,
}

/// One Venn cell: the check-ins whose set of eligible groups is `groups`.
#[derive(Clone, Debug, PartialEq)]
pub struct VennCell {
    /// Indices into [`VennCells::groups`], ascending (empty: no job admits these).
    pub groups: Vec<usize>,
    /// Trace devices with a check-in in this cell.
    pub devices: usize,
    /// Check-ins per hour over the trace's block.
    pub per_hour: f64,
}

/// The groups and the cells, largest supply first.
#[derive(Clone, Debug, PartialEq)]
pub struct VennCells {
    /// Job groups, in order of their first job.
    pub groups: Vec<JobGroup>,
    /// Cells by check-ins an hour, most first.
    pub cells: Vec<VennCell>,
}

/// The Venn cells of `input`'s jobs over the block of the trace a run replays.
pub fn venn_cells(input: &SimInput, cfg: &SimConfig) -> VennCells {
    let block = input.trace.block(cfg.window_s);
    // Which jobs admit each check-in.
    let admits: Vec<Vec<bool>> = block
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let profile = input.devices.profile(input.devices.slot(i as u32));
            input
                .jobs
                .iter()
                .map(|j| j.requirement.admits(profile))
                .collect()
        })
        .collect();
    // Jobs with the same column of `admits` are one group.
    let mut by_column: BTreeMap<Vec<bool>, Vec<usize>> = BTreeMap::new();
    for j in 0..input.jobs.len() {
        let column: Vec<bool> = admits.iter().map(|row| row[j]).collect();
        by_column.entry(column).or_default().push(j);
    }
    let mut groups: Vec<JobGroup> = by_column
        .into_values()
        .map(|jobs| JobGroup { jobs })
        .collect();
    groups.sort_by_key(|g| g.jobs[0]);
    let mut cells: BTreeMap<Vec<usize>, (HashSet<u32>, usize)> = BTreeMap::new();
    for (row, a) in block.iter().zip(&admits) {
        let key: Vec<usize> = (0..groups.len())
            .filter(|&g| a[groups[g].jobs[0]])
            .collect();
        let cell = cells.entry(key).or_default();
        cell.0.insert(row.device);
        cell.1 += 1;
    }
    let hours = cfg.window_s / 3600.0;
    let mut cells: Vec<VennCell> = cells
        .into_iter()
        .map(|(groups, (devices, n))| VennCell {
            groups,
            devices: devices.len(),
            per_hour: n as f64 / hours,
        })
        .collect();
    cells.sort_by(|a, b| {
        b.per_hour
            .total_cmp(&a.per_hour)
            .then(a.groups.cmp(&b.groups))
    });
    VennCells { groups, cells }
}
