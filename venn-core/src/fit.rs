//! The device's acceptance rule: does a job's task fit before the device goes offline?
//!
//! A policy offers a checked-in device an ordered list of jobs ([`crate::policy::Policy::offer`]);
//! the device takes the first job whose task it expects to finish before its session ends,
//! and nothing at all when none fits — then no job's demand is consumed. This is the
//! authors' client (`VennClient.assign` in SymbioticLab/Venn): it judges a task by its
//! *nominal* time (the job's compute plus transfer time on the reference device), since a
//! device cannot predict its own speed on a job it has not run. [`FitRule::DeviceSpeed`]
//! judges by the device's own profile instead; [`FitRule::Any`] turns the rule off.
//!
//! A device that does not say when it goes offline (a live check-in without
//! `online_for_s`) fits every job.

use crate::profile::{DeviceProfile, TaskCost};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// How a device judges whether an offered job's task fits before its session ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum FitRule {
    /// The job's nominal time, compute + transfer on the reference device (the authors'
    /// `VennClient`): a device cannot know its speed on a job it has not run.
    #[default]
    Nominal,
    /// The device's own time for the task (its profile's speed and bandwidth).
    DeviceSpeed,
    /// Every offered job fits: the device takes the first one.
    Any,
}

impl FitRule {
    /// Seconds the device expects `cost` to take under this rule (0 for [`FitRule::Any`]).
    pub fn expected_seconds(self, cost: TaskCost, profile: &DeviceProfile) -> f64 {
        match self {
            FitRule::Nominal => cost.compute_s + cost.comm_s,
            FitRule::DeviceSpeed => profile.task_seconds(cost),
            FitRule::Any => 0.0,
        }
    }

    /// Does a task of `cost` started at `now` end by `online_until`? `None`: the device
    /// did not say when it leaves, so it fits.
    pub fn fits(
        self,
        cost: TaskCost,
        profile: &DeviceProfile,
        now: Time,
        online_until: Option<Time>,
    ) -> bool {
        match online_until {
            None => true,
            Some(_) if self == FitRule::Any => true,
            Some(end) => now.secs() + self.expected_seconds(cost, profile) <= end.secs(),
        }
    }

    /// The rule's name as configs spell it.
    pub fn name(self) -> &'static str {
        match self {
            FitRule::Nominal => "nominal",
            FitRule::DeviceSpeed => "device-speed",
            FitRule::Any => "any",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost() -> TaskCost {
        TaskCost {
            compute_s: 60.0,
            comm_s: 20.0,
        }
    }

    #[test]
    fn nominal_time_ignores_the_device_speed() {
        let slow = DeviceProfile::new(1.0, 1.0, 1.0).with_speed(780.0, 1_373.6);
        // Nominal: 80 s, whatever the device; the slow device really needs 600 + 200 s.
        assert!(FitRule::Nominal.fits(cost(), &slow, Time(0.0), Some(Time(80.0))));
        assert!(!FitRule::Nominal.fits(cost(), &slow, Time(0.0), Some(Time(79.9))));
        assert!(!FitRule::DeviceSpeed.fits(cost(), &slow, Time(0.0), Some(Time(799.0))));
        assert!(FitRule::DeviceSpeed.fits(cost(), &slow, Time(0.0), Some(Time(800.0))));
    }

    #[test]
    fn an_unknown_session_end_or_the_any_rule_fits_everything() {
        let d = DeviceProfile::new(1.0, 1.0, 1.0);
        for rule in [FitRule::Nominal, FitRule::DeviceSpeed, FitRule::Any] {
            assert!(rule.fits(cost(), &d, Time(100.0), None));
        }
        assert!(FitRule::Any.fits(cost(), &d, Time(100.0), Some(Time(0.0))));
    }
}
