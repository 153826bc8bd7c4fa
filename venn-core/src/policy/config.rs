//! Naming and configuring a policy: [`PolicyKind`] (the built-in policies), one typed
//! parameter struct per policy that has knobs, and [`PolicyConfig`], the value every
//! driver embeds (the simulator's config, the manager's settings, a lab experiment).
//!
//! In TOML a policy is a table named by `name` (or `kind`) whose other keys are that
//! policy's parameters; a bare string names a policy with its default parameters:
//!
//! ```toml
//! [policy]
//! name = "venn"
//! epsilon = 1.0
//! [policy.tiers]
//! v = 2
//! ```
//!
//! ```toml
//! policy = "random-delay"
//! ```
//!
//! A key the named built-in policy does not have is an error naming the key. A name that
//! is not built in parses as [`PolicyConfig::Custom`] with its keys kept as neutral JSON
//! arguments; the [`PolicyRegistry`](super::PolicyRegistry) that builds it deserialises
//! them into the custom policy's own type (and rejects names it does not know).

use std::fmt;
use std::str::FromStr;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::tier::TierParams;
use crate::error::CoreError;

/// The built-in policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum PolicyKind {
    /// Each check-in goes to a uniformly random eligible job (Meta's and Apple's managers).
    Random,
    /// A random priority per round request (the paper's optimised baseline).
    RandomOrder,
    /// Job arrival order; a job keeps its place across rounds.
    Fifo,
    /// Arrival order of the current round request.
    FifoRequest,
    /// Smallest remaining demand of the current request first.
    Srsf,
    /// IRS across groups, tier matching and the fairness knob ε.
    Venn,
    /// `venn` without tier matching.
    Irs,
    /// Congestion-scaled random start delays.
    RandomDelay,
    /// Jobs run in chunks that fit the eligible supply.
    Chunked,
}

impl PolicyKind {
    /// Every built-in policy, in the order they are listed.
    pub const ALL: [PolicyKind; 9] = [
        PolicyKind::Random,
        PolicyKind::RandomOrder,
        PolicyKind::Fifo,
        PolicyKind::FifoRequest,
        PolicyKind::Srsf,
        PolicyKind::Venn,
        PolicyKind::Irs,
        PolicyKind::RandomDelay,
        PolicyKind::Chunked,
    ];

    /// The name it is selected by (kebab-case).
    pub const fn name(self) -> &'static str {
        match self {
            PolicyKind::Random => "random",
            PolicyKind::RandomOrder => "random-order",
            PolicyKind::Fifo => "fifo",
            PolicyKind::FifoRequest => "fifo-request",
            PolicyKind::Srsf => "srsf",
            PolicyKind::Venn => "venn",
            PolicyKind::Irs => "irs",
            PolicyKind::RandomDelay => "random-delay",
            PolicyKind::Chunked => "chunked",
        }
    }

    /// The built-in policy called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<PolicyKind> {
        PolicyKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PolicyKind {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyKind::from_name(s).ok_or_else(|| {
            let known: Vec<&str> = PolicyKind::ALL.iter().map(|k| k.name()).collect();
            CoreError::UnknownPolicy(s.to_string(), known.join(", "))
        })
    }
}

fn non_negative(field: &'static str, v: f64) -> Result<(), CoreError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(CoreError::invalid(
            field,
            "must be a finite non-negative number",
        ))
    }
}

/// Parameters of a policy without knobs (none are accepted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// Parameters of `venn`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VennParams {
    /// Fairness knob ε (0 = plain IRS ordering).
    pub epsilon: f64,
    /// Tier matching (Algorithm 2).
    pub tiers: TierParams,
}

impl VennParams {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), CoreError> {
        non_negative("epsilon", self.epsilon)
    }
}

/// Parameters of `irs` (`venn` without tier matching).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IrsParams {
    /// Fairness knob ε (0 = plain IRS ordering).
    pub epsilon: f64,
}

impl IrsParams {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), CoreError> {
        non_negative("epsilon", self.epsilon)
    }

    /// The same policy as `venn` parameters (tier matching off).
    pub fn as_venn(self) -> VennParams {
        VennParams {
            epsilon: self.epsilon,
            tiers: TierParams::disabled(),
        }
    }
}

/// Parameters of `random-delay`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RandomDelayParams {
    /// Delays are uniform in [0, scale·Δ], Δ the congestion (open demand over eligible
    /// supply rate, in seconds).
    pub delay_scale: f64,
    /// Draw a new delay for every round request (true) or once per job, shifting its whole
    /// schedule as in Leighton–Maggs–Rao (false).
    pub delay_per_round: bool,
}

impl Default for RandomDelayParams {
    fn default() -> Self {
        RandomDelayParams {
            delay_scale: 1.0,
            delay_per_round: false,
        }
    }
}

impl RandomDelayParams {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), CoreError> {
        non_negative("delay_scale", self.delay_scale)
    }
}

/// Parameters of `chunked`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChunkedParams {
    /// Let devices the running chunk cannot use go to later chunks.
    pub chunk_backfill: bool,
}

/// A policy that is not built in: its registered name and its arguments, kept as neutral
/// JSON until a [`PolicyRegistry`](super::PolicyRegistry) deserialises them into the
/// policy's own argument type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CustomPolicy {
    /// The name it was registered under.
    pub name: String,
    /// Its arguments (the config table's keys other than `name`).
    pub args: Map<String, Value>,
}

/// Which policy a driver runs, with its parameters. See the module docs for the TOML
/// shape; [`PolicyConfig::named`] and `"venn".parse()` give a policy's defaults.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyConfig {
    /// `random`.
    Random,
    /// `random-order`.
    RandomOrder,
    /// `fifo`.
    Fifo,
    /// `fifo-request`.
    FifoRequest,
    /// `srsf`.
    Srsf,
    /// `venn`.
    Venn(VennParams),
    /// `irs`.
    Irs(IrsParams),
    /// `random-delay`.
    RandomDelay(RandomDelayParams),
    /// `chunked`.
    Chunked(ChunkedParams),
    /// A policy registered by the user.
    Custom(CustomPolicy),
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig::Venn(VennParams::default())
    }
}

impl From<PolicyKind> for PolicyConfig {
    fn from(kind: PolicyKind) -> Self {
        match kind {
            PolicyKind::Random => PolicyConfig::Random,
            PolicyKind::RandomOrder => PolicyConfig::RandomOrder,
            PolicyKind::Fifo => PolicyConfig::Fifo,
            PolicyKind::FifoRequest => PolicyConfig::FifoRequest,
            PolicyKind::Srsf => PolicyConfig::Srsf,
            PolicyKind::Venn => PolicyConfig::Venn(VennParams::default()),
            PolicyKind::Irs => PolicyConfig::Irs(IrsParams::default()),
            PolicyKind::RandomDelay => PolicyConfig::RandomDelay(RandomDelayParams::default()),
            PolicyKind::Chunked => PolicyConfig::Chunked(ChunkedParams::default()),
        }
    }
}

impl From<&str> for PolicyConfig {
    /// [`PolicyConfig::named`].
    fn from(name: &str) -> Self {
        PolicyConfig::named(name)
    }
}

impl FromStr for PolicyConfig {
    type Err = std::convert::Infallible;

    /// A name alone: the built-in policy with its defaults, or a custom one without args.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(PolicyConfig::named(s))
    }
}

impl PolicyConfig {
    /// The policy called `name` with its default parameters (a custom policy with no
    /// arguments if no built-in policy has that name).
    pub fn named(name: &str) -> Self {
        match PolicyKind::from_name(name) {
            Some(kind) => kind.into(),
            None => PolicyConfig::Custom(CustomPolicy {
                name: name.to_string(),
                args: Map::new(),
            }),
        }
    }

    /// The policy from its name and the other keys of its table; the keys are checked
    /// against the built-in policy's parameters (a custom policy's are kept as they are).
    pub fn from_parts(name: &str, args: Map<String, Value>) -> Result<Self, String> {
        fn typed<P: serde::de::DeserializeOwned>(
            name: &str,
            args: Map<String, Value>,
        ) -> Result<P, String> {
            serde_json::from_value(Value::Object(args)).map_err(|e| format!("policy {name}: {e}"))
        }
        let Some(kind) = PolicyKind::from_name(name) else {
            return Ok(PolicyConfig::Custom(CustomPolicy {
                name: name.to_string(),
                args,
            }));
        };
        Ok(match kind {
            PolicyKind::Venn => PolicyConfig::Venn(typed(name, args)?),
            PolicyKind::Irs => PolicyConfig::Irs(typed(name, args)?),
            PolicyKind::RandomDelay => PolicyConfig::RandomDelay(typed(name, args)?),
            PolicyKind::Chunked => PolicyConfig::Chunked(typed(name, args)?),
            PolicyKind::Random
            | PolicyKind::RandomOrder
            | PolicyKind::Fifo
            | PolicyKind::FifoRequest
            | PolicyKind::Srsf => {
                typed::<NoParams>(name, args)?;
                kind.into()
            }
        })
    }

    /// The built-in policy, or `None` for a custom one.
    pub fn kind(&self) -> Option<PolicyKind> {
        Some(match self {
            PolicyConfig::Random => PolicyKind::Random,
            PolicyConfig::RandomOrder => PolicyKind::RandomOrder,
            PolicyConfig::Fifo => PolicyKind::Fifo,
            PolicyConfig::FifoRequest => PolicyKind::FifoRequest,
            PolicyConfig::Srsf => PolicyKind::Srsf,
            PolicyConfig::Venn(_) => PolicyKind::Venn,
            PolicyConfig::Irs(_) => PolicyKind::Irs,
            PolicyConfig::RandomDelay(_) => PolicyKind::RandomDelay,
            PolicyConfig::Chunked(_) => PolicyKind::Chunked,
            PolicyConfig::Custom(_) => return None,
        })
    }

    /// The name it is selected by.
    pub fn name(&self) -> &str {
        match self {
            PolicyConfig::Custom(c) => &c.name,
            other => other.kind().expect("built in").name(),
        }
    }

    /// The policy called `name`: this one if it has that name (its parameters kept), else
    /// that policy's defaults.
    pub fn with_name(&self, name: &str) -> Self {
        if self.name() == name {
            self.clone()
        } else {
            PolicyConfig::named(name)
        }
    }

    /// The parameters as a JSON object (what a registry's factory deserialises).
    pub fn args(&self) -> Map<String, Value> {
        fn obj(v: impl Serialize) -> Map<String, Value> {
            match serde_json::to_value(v) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            }
        }
        match self {
            PolicyConfig::Venn(p) => obj(p),
            PolicyConfig::Irs(p) => obj(p),
            PolicyConfig::RandomDelay(p) => obj(p),
            PolicyConfig::Chunked(p) => obj(p),
            PolicyConfig::Custom(c) => c.args.clone(),
            _ => Map::new(),
        }
    }

    /// Checks the parameters of a built-in policy (a custom policy's are checked by its
    /// factory when it is built).
    pub fn validate(&self) -> Result<(), CoreError> {
        match self {
            PolicyConfig::Venn(p) => p.validate(),
            PolicyConfig::Irs(p) => p.validate(),
            PolicyConfig::RandomDelay(p) => p.validate(),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for PolicyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for PolicyConfig {
    /// Always the table form: `name` first, then the parameters.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let args = self.args();
        let mut m = s.serialize_map(Some(args.len() + 1))?;
        m.serialize_entry("name", self.name())?;
        for (k, v) in &args {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for PolicyConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PolicyConfig;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a policy name or a table with `name` and the policy's parameters")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<PolicyConfig, E> {
                Ok(PolicyConfig::named(v))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<PolicyConfig, A::Error> {
                let mut args =
                    Map::<String, Value>::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let name = match (args.remove("name"), args.remove("kind")) {
                    (Some(_), Some(_)) => {
                        return Err(de::Error::custom("policy: give `name` or `kind`, not both"));
                    }
                    (Some(n), None) | (None, Some(n)) => n,
                    (None, None) => return Err(de::Error::missing_field("name")),
                };
                let Value::String(name) = name else {
                    return Err(de::Error::custom("policy: `name` must be a string"));
                };
                PolicyConfig::from_parts(&name, args).map_err(de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    struct Cfg {
        policy: PolicyConfig,
    }

    fn parse(text: &str) -> Result<PolicyConfig, String> {
        toml::from_str::<Cfg>(text)
            .map(|c| c.policy)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn kinds_round_trip_through_their_names() {
        for k in PolicyKind::ALL {
            assert_eq!(k.to_string().parse::<PolicyKind>().unwrap(), k);
            assert_eq!(PolicyConfig::from(k).kind(), Some(k));
            assert_eq!(PolicyConfig::named(k.name()).name(), k.name());
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
        }
        let e = "nope".parse::<PolicyKind>().unwrap_err().to_string();
        assert!(e.contains("random-order") && e.contains("chunked"), "{e}");
    }

    #[test]
    fn the_table_form_sets_the_named_policys_parameters() {
        let p = parse("[policy]\nname = \"venn\"\nepsilon = 1.0\n[policy.tiers]\nv = 3\n").unwrap();
        let PolicyConfig::Venn(v) = p else {
            panic!("{p:?}")
        };
        assert_eq!(v.epsilon, 1.0);
        assert_eq!(v.tiers.v, 3);
        assert_eq!(
            v.tiers.min_samples_per_tier,
            TierParams::default().min_samples_per_tier
        );
        let p = parse("policy = { kind = \"random-delay\", delay_per_round = true }").unwrap();
        assert_eq!(
            p,
            PolicyConfig::RandomDelay(RandomDelayParams {
                delay_per_round: true,
                ..RandomDelayParams::default()
            })
        );
    }

    #[test]
    fn the_string_form_names_a_policy_with_its_defaults() {
        assert_eq!(parse("policy = \"venn\"").unwrap(), PolicyConfig::default());
        assert_eq!(parse("policy = \"fifo\"").unwrap(), PolicyConfig::Fifo);
        assert_eq!(
            parse("policy = \"chunked\"").unwrap(),
            PolicyConfig::Chunked(ChunkedParams::default())
        );
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_it() {
        let e = parse("[policy]\nname = \"venn\"\nepsilom = 1.0\n").unwrap_err();
        assert!(e.contains("epsilom"), "{e}");
        let e = parse("[policy]\nname = \"irs\"\ntiers = { v = 2 }\n").unwrap_err();
        assert!(e.contains("tiers"), "{e}");
        let e = parse("[policy]\nname = \"fifo\"\nepsilon = 1.0\n").unwrap_err();
        assert!(e.contains("epsilon"), "{e}");
        let e = parse("[policy]\nname = \"venn\"\n[policy.tiers]\nw = 1\n").unwrap_err();
        assert!(e.contains("`w`"), "{e}");
        let e = parse("[policy]\nepsilon = 1.0\n").unwrap_err();
        assert!(e.contains("name"), "{e}");
    }

    #[test]
    fn unknown_names_are_kept_as_custom_policies_with_their_args() {
        let p = parse("[policy]\nname = \"mine\"\nweight = 3\n").unwrap();
        let PolicyConfig::Custom(c) = &p else {
            panic!("{p:?}")
        };
        assert_eq!(c.name, "mine");
        assert_eq!(c.args["weight"], 3);
        assert_eq!(p.kind(), None);
    }

    #[test]
    fn serialising_gives_the_table_form_back() {
        for p in [
            PolicyConfig::Fifo,
            PolicyConfig::Venn(VennParams {
                epsilon: 0.5,
                tiers: TierParams {
                    v: 4,
                    min_samples_per_tier: 2,
                },
            }),
            PolicyConfig::named("irs"),
            PolicyConfig::RandomDelay(RandomDelayParams {
                delay_scale: 2.5,
                delay_per_round: true,
            }),
            parse("[policy]\nname = \"mine\"\nweight = 3\n").unwrap(),
        ] {
            let text = toml::to_string(&Cfg { policy: p.clone() }).unwrap();
            assert_eq!(parse(&text).unwrap(), p, "{text}");
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<PolicyConfig>(&json).unwrap(), p);
        }
    }

    #[test]
    fn with_name_keeps_the_parameters_only_of_the_same_policy() {
        let v = PolicyConfig::Venn(VennParams {
            epsilon: 2.0,
            ..VennParams::default()
        });
        assert_eq!(v.with_name("venn"), v);
        assert_eq!(v.with_name("irs"), PolicyConfig::Irs(IrsParams::default()));
    }

    #[test]
    fn validation_names_the_field() {
        let e = PolicyConfig::Irs(IrsParams { epsilon: -1.0 })
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("epsilon"), "{e}");
        let e = PolicyConfig::RandomDelay(RandomDelayParams {
            delay_scale: f64::NAN,
            ..RandomDelayParams::default()
        })
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("delay_scale"), "{e}");
    }
}
