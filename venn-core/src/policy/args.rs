//! [`PolicyArgs`]: the command-line flags of the built-in policies' parameters, written
//! once and flattened into every command line that runs a policy (`venn-sim`,
//! `venn-manager`). Only with the `clap` feature.

use super::config::{PolicyConfig, PolicyKind};

impl PolicyKind {
    /// A clap value parser for a policy-name argument kept as a `String`: it accepts the
    /// built-in names and lists them, with their descriptions, in `--help`.
    pub fn names_parser() -> clap::builder::PossibleValuesParser {
        use clap::ValueEnum;
        clap::builder::PossibleValuesParser::new(
            PolicyKind::value_variants()
                .iter()
                .filter_map(ValueEnum::to_possible_value),
        )
    }
}

/// Policy parameters from the command line. Each flag sets that knob on whichever policy
/// has it (`--epsilon` on `venn` and `irs`, `--tiers` on `venn`, ...) and is ignored by the
/// others; a custom policy's arguments come from its config table.
#[derive(Clone, Debug, Default, PartialEq, clap::Args)]
pub struct PolicyArgs {
    /// Fairness knob epsilon of venn and irs (0 = plain IRS ordering).
    #[arg(long, help_heading = "Policy parameters")]
    pub epsilon: Option<f64>,
    /// Tiers V of venn's tier matching (1 disables it).
    #[arg(long, help_heading = "Policy parameters")]
    pub tiers: Option<u32>,
    /// Task samples a tier needs before venn's tier matching trusts it.
    #[arg(long, help_heading = "Policy parameters")]
    pub min_samples_per_tier: Option<usize>,
    /// random-delay: delays are uniform in [0, scale × congestion].
    #[arg(long, help_heading = "Policy parameters")]
    pub delay_scale: Option<f64>,
    /// random-delay: a fresh delay for every round request (else once per job).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", help_heading = "Policy parameters")]
    pub delay_per_round: Option<bool>,
    /// chunked: devices the running chunk cannot use go to later chunks.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", help_heading = "Policy parameters")]
    pub chunk_backfill: Option<bool>,
}

impl PolicyArgs {
    /// Sets the given flags on `policy` where it has that knob.
    pub fn apply(&self, policy: &mut PolicyConfig) {
        match policy {
            PolicyConfig::Venn(p) => {
                set(&mut p.epsilon, self.epsilon);
                set(&mut p.tiers.v, self.tiers);
                set(&mut p.tiers.min_samples_per_tier, self.min_samples_per_tier);
            }
            PolicyConfig::Irs(p) => set(&mut p.epsilon, self.epsilon),
            PolicyConfig::RandomDelay(p) => {
                set(&mut p.delay_scale, self.delay_scale);
                set(&mut p.delay_per_round, self.delay_per_round);
            }
            PolicyConfig::Chunked(p) => set(&mut p.chunk_backfill, self.chunk_backfill),
            PolicyConfig::Random
            | PolicyConfig::RandomOrder
            | PolicyConfig::Fifo
            | PolicyConfig::FifoRequest
            | PolicyConfig::Srsf
            | PolicyConfig::Custom(_) => {}
        }
    }

    /// The policy called `name`: `base`'s parameters if `base` has that name (else the
    /// policy's defaults), then the flags.
    pub fn resolve(&self, base: &PolicyConfig, name: &str) -> PolicyConfig {
        let mut p = base.with_name(name);
        self.apply(&mut p);
        p
    }
}

fn set<T>(slot: &mut T, v: Option<T>) {
    if let Some(v) = v {
        *slot = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        policy: PolicyArgs,
    }

    #[test]
    fn flags_set_the_knobs_each_policy_has() {
        let a = Cli::try_parse_from(["x", "--epsilon", "1", "--tiers", "3", "--delay-per-round"])
            .unwrap()
            .policy;
        assert_eq!(a.delay_per_round, Some(true));
        let PolicyConfig::Venn(v) = a.resolve(&PolicyConfig::default(), "venn") else {
            panic!()
        };
        assert_eq!((v.epsilon, v.tiers.v), (1.0, 3));
        let PolicyConfig::Irs(i) = a.resolve(&PolicyConfig::default(), "irs") else {
            panic!()
        };
        assert_eq!(i.epsilon, 1.0);
        let PolicyConfig::RandomDelay(r) = a.resolve(&PolicyConfig::default(), "random-delay")
        else {
            panic!()
        };
        assert!(r.delay_per_round);
        assert_eq!(r.delay_scale, 1.0);
        assert_eq!(a.resolve(&PolicyConfig::Fifo, "fifo"), PolicyConfig::Fifo);
        #[derive(Parser)]
        struct Named {
            #[arg(long, value_parser = PolicyKind::names_parser())]
            policy: String,
        }
        let n = Named::try_parse_from(["x", "--policy", "random-order"]).unwrap();
        assert_eq!(n.policy, "random-order");
        let e = Named::try_parse_from(["x", "--policy", "nope"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("chunked"), "{e}");
        let off = Cli::try_parse_from(["x", "--chunk-backfill=false"])
            .unwrap()
            .policy;
        assert_eq!(off.chunk_backfill, Some(false));
    }
}
