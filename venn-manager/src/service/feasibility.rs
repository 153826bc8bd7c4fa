//! The manager's own check of a submitted round against the supply it has seen: a round
//! no device that checks in here could serve is refused with the reason (HTTP 422 naming
//! `demand` or `deadline_s`) instead of being retried until its job gives up — as the
//! authors' Venn rejects requests its supply cannot meet.
//!
//! Early in a manager's life its supply estimate is empty, and an empty estimate is no
//! evidence that a round cannot work: the check judges only once the manager has watched
//! check-ins for [`Feasibility::min_observed_s`] and counted
//! [`Feasibility::min_check_ins`] of them. It counts check-ins, not devices (a device that
//! waits and checks in again counts twice), so it refuses only what the evidence rules
//! out: no eligible device at all, fewer eligible check-ins over the whole window than the
//! results the round needs, or a deadline shorter than the fastest eligible device's task.
//! `venn-lab` checks its emulated population (devices, not check-ins) before it starts.

use venn_core::{JobId, ResourceManager, RoundRequest, Time};

use crate::error::ServiceError;
use crate::settings::Feasibility;

/// Refuses `request` for `job` when the supply seen so far rules it out.
pub(super) fn check_round(
    core: &ResourceManager,
    job: JobId,
    request: &RoundRequest,
    now: Time,
    rule: Feasibility,
) -> Result<(), ServiceError> {
    let supply = core.supply();
    let observed = supply.effective_window(now);
    let classes = supply.classes().iter().filter(|c| c.in_window > 0);
    let seen: u64 = classes.clone().map(|c| c.in_window).sum();
    if observed < rule.min_observed_s || seen < rule.min_check_ins {
        return Ok(());
    }
    let Some(state) = core.job(job) else {
        return Ok(());
    };
    let spec = &state.spec;
    let eligible: Vec<_> = classes
        .filter(|c| spec.requirement.admits(&c.profile))
        .collect();
    let evidence = format!("{seen} check-ins over the last {observed:.0} s");
    let eligible_check_ins: u64 = eligible.iter().map(|c| c.in_window).sum();
    if eligible.is_empty() {
        return Err(ServiceError::field(
            "demand",
            format!(
                "no device that checked in meets job {}'s requirement ({evidence})",
                spec.name
            ),
        ));
    }
    let needed = request.fewest_devices();
    if eligible_check_ins < u64::from(needed) {
        return Err(ServiceError::field(
            "demand",
            format!(
                "the round needs at least {needed} devices but only {eligible_check_ins} \
                 check-ins of eligible devices arrived ({evidence})"
            ),
        ));
    }
    let deadline_s = request.deadline.since(now);
    let fastest = eligible
        .iter()
        .map(|c| c.profile.task_seconds(spec.task_cost))
        .fold(f64::INFINITY, f64::min);
    if fastest > deadline_s {
        return Err(ServiceError::field(
            "deadline_s",
            format!(
                "{deadline_s:.0} s is shorter than the fastest eligible device's task \
                 ({fastest:.1} s; {evidence})"
            ),
        ));
    }
    Ok(())
}
