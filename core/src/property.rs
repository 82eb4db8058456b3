//! The properties a run is judged by, with the ids of SPEC.md
//! (`docs/SPEC.md`): one type for the checker, the scenario files, the
//! variants and the command line, so an id is spelled in one place.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A property of SPEC.md, or one of the run-level ones (`panic`,
/// `determinism`) the harness reports itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Property {
    ElectionSafety,
    ApplyAgreement,
    CommitDurability,
    TokenMonotonic,
    FencedWrite,
    EqualToken,
    ExpireSafety,
    GrantValidity,
    LeaseExclusion,
    Liveness,
    /// After the heal every request is answered, not given up, within its
    /// wait plus the bound, unless the run shows why it could not be.
    Answered,
    /// After the heal a free key that a client asks for is granted within
    /// the progress bound: the service grants, not only answers.
    Progress,
    /// After the heal the leader changes at most once, plus once for each
    /// server the heal brought back.
    LeaderStability,
    /// After the heal the cluster's messages, Ready rounds and disk syncs
    /// per simulated second stay within a budget derived from the model.
    WorkBudget,
    /// Every client-visible lock operation takes effect at one instant between
    /// its first send and its answer (the sequential specification with
    /// expiry in true time; `sim/src/checker/linearizable/`).
    Linearizable,
    /// The run's code panicked (an `assert!` of an invariant).
    Panic,
    /// Two runs of one seed gave different traces.
    Determinism,
}

impl Property {
    /// The properties of SPEC.md, in the order of its table.
    pub const SPEC: [Property; 15] = [
        Property::ElectionSafety,
        Property::ApplyAgreement,
        Property::CommitDurability,
        Property::TokenMonotonic,
        Property::FencedWrite,
        Property::EqualToken,
        Property::ExpireSafety,
        Property::GrantValidity,
        Property::LeaseExclusion,
        Property::Liveness,
        Property::Answered,
        Property::Progress,
        Property::LeaderStability,
        Property::WorkBudget,
        Property::Linearizable,
    ];

    /// Every property a run can report: SPEC.md's, then the run-level ones.
    pub const ALL: [Property; 17] = {
        let mut all = [Property::Panic; 17];
        let mut i = 0;
        while i < Property::SPEC.len() {
            all[i] = Property::SPEC[i];
            i += 1;
        }
        all[Property::SPEC.len() + 1] = Property::Determinism;
        all
    };

    /// The id of SPEC.md.
    pub fn id(self) -> &'static str {
        match self {
            Property::ElectionSafety => "election-safety",
            Property::ApplyAgreement => "apply-agreement",
            Property::CommitDurability => "commit-durability",
            Property::TokenMonotonic => "token-monotonic",
            Property::FencedWrite => "fenced-write",
            Property::EqualToken => "equal-token",
            Property::ExpireSafety => "expire-safety",
            Property::GrantValidity => "grant-validity",
            Property::LeaseExclusion => "lease-exclusion",
            Property::Liveness => "liveness",
            Property::Answered => "answered",
            Property::Progress => "progress",
            Property::LeaderStability => "leader-stability",
            Property::WorkBudget => "work-budget",
            Property::Linearizable => "linearizable",
            Property::Panic => "panic",
            Property::Determinism => "determinism",
        }
    }

    /// Judged only in the liveness phase, with every fault healed: a run cut
    /// short (a panic, a shrink's shortened run) cannot decide these.
    pub fn after_heal(self) -> bool {
        matches!(
            self,
            Property::Liveness
                | Property::Answered
                | Property::Progress
                | Property::LeaderStability
                | Property::WorkBudget
        )
    }
}

/// The id, padded as asked (`{:<18}` lines up a table).
impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.id())
    }
}

impl FromStr for Property {
    type Err = String;

    fn from_str(text: &str) -> Result<Property, String> {
        Property::ALL.into_iter().find(|p| p.id() == text).ok_or_else(|| {
            let known: Vec<&str> = Property::ALL.iter().map(|p| p.id()).collect();
            format!("unknown property `{text}` (known: {})", known.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Property;

    #[test]
    fn every_property_reads_back_from_its_id_and_serializes_as_it() {
        for property in Property::ALL {
            assert_eq!(property.id().parse::<Property>(), Ok(property));
            assert_eq!(serde_json::to_string(&property).unwrap(), format!("\"{property}\""));
        }
        assert_eq!(format!("[{:<16}]", Property::Liveness), "[liveness        ]");
        let ids: std::collections::BTreeSet<&str> = Property::ALL.iter().map(|p| p.id()).collect();
        assert_eq!(ids.len(), Property::ALL.len(), "ids are distinct");
        assert_eq!(Property::ALL[..Property::SPEC.len()], Property::SPEC, "SPEC.md's first, in its order");
        assert_eq!(
            Property::ALL[Property::SPEC.len()..],
            [Property::Panic, Property::Determinism],
            "then the run's own"
        );
    }

    #[test]
    fn an_unknown_id_is_refused_with_the_known_ones() {
        let error = "fenced-writes".parse::<Property>().unwrap_err();
        assert!(error.starts_with("unknown property `fenced-writes` (known: election-safety, "), "{error}");
    }
}
