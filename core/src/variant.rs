//! Protocol variants: one closed enum, consulted at the one place each changes.
//!
//! `Default` is the safe protocol. Every other variant is a deliberately flawed
//! design that the testbed must catch; `breaks` names the property that shows it.
//! Most are unsafe; five (`NeverCommit` to `ElectionChurn`) stay safe but
//! leave the service unavailable, which only the properties judged after the
//! heal (`answered`, `progress`, `leader-stability`) can show, and the last
//! stays safe and available but busy, which `work-budget` shows.

use crate::Property;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Variant {
    #[default]
    Default,
    /// Expire removes the lock whatever its token.
    ExpireIgnoresToken,
    /// Release removes the lock whatever its token.
    ReleaseIgnoresToken,
    /// The resource accepts every write; only the worker checks its own lease.
    SinkUnfenced,
    /// The second write path (bulk import) skips the token comparison.
    SecondPathUnfenced,
    /// The resource keeps its highest accepted token only in memory.
    SinkMaxInMemory,
    /// Workers use their local clock reading as the token.
    ClientClockToken,
    /// A whole-cluster restore takes the token counter from the backup as is.
    RestoreNaive,
    /// A new leader keeps the old deadlines instead of restarting lease timers.
    NoLeaseRestartOnNewLeader,
    /// Renewals are acknowledged without confirming leadership.
    RenewWithoutLeadershipCheck,
    /// A queued waiter is told Granted without re-checking its own wait deadline.
    GrantAfterExpiredWait,
    /// A leader commits entries of earlier terms by counting replicas (Raft figure 8).
    CommitOldTermByCount,
    /// Votes are sent before the vote is durable.
    VoteNotDurable,
    /// Append acknowledgements are sent before the entries are durable.
    AckBeforeDurable,
    /// A node restored from a stale backup votes at once.
    AmnesiaRejoin,
    /// The client counts its lease belief from the answer's arrival, not the first send.
    BeliefFromArrival,
    /// The resource answers a write before syncing it; it syncs at most once a second.
    ResourceSyncLazy,
    /// The resource does not remember its answers; a retried write takes effect again.
    ResourceNoDedup,
    /// A vote is granted without comparing how up to date the logs are.
    VoteIgnoresLog,
    /// A follower commits up to the leader's commit index, not capped at what the append covered.
    FollowerCommitUncapped,
    /// A follower drops whatever follows an append, even entries the append agreed with.
    TruncateAfterAppend,
    /// Check-quorum off, and a leader confirms read-index rounds by itself.
    ServeWithoutQuorum,
    /// A node votes for every candidate of a term, not only the first.
    VoteTwice,
    /// Renew extends the key's live lease whatever token it names.
    RenewIgnoresToken,
    /// A follower answers a try-lock `Busy` from its own, possibly stale, copy of the locks.
    FollowerAnswersTryLock,
    /// A Release is answered `Released` as soon as it is proposed, before it commits.
    ReleasedBeforeCommit,
    /// The resource restored from a backup trusts its restored highest tokens as they are.
    ResourceRestoreNaive,
    /// A renewal is confirmed after the leader proposed its lease's Expire.
    RenewWhileExpiring,
    /// The leader drops what append answers acknowledge; nothing ever commits.
    NeverCommit,
    /// The service never answers `Unavailable`; it stays silent and the client times out.
    SilentUnavailable,
    /// A waiter whose wait ran out is never told `TimedOut`; it stays queued.
    WaitersNeverTimeOut,
    /// A follower redirects a client without naming the leader it knows.
    NoLeaderHint,
    /// A follower's election timer is not reset by its leader's messages, and
    /// leader stickiness reads that timer: a healthy cluster changes leader every timeout or two.
    ElectionChurn,
    /// A leader sends an empty append to reveal lost appends after every
    /// answer that moves nothing while appends are in flight, not once per
    /// heartbeat interval: under load each check's answer sends the next.
    LossCheckEveryAnswer,
}

/// One row of `fencesim variants`.
pub struct VariantInfo {
    pub variant: Variant,
    pub name: &'static str,
    /// The property this variant is expected to break; `None` for the safe default.
    pub breaks: Option<Property>,
    pub about: &'static str,
    /// A model the variant declares (a TOML fragment of model keys, empty for
    /// the standard model): the situations its failure needs, e.g. a smaller
    /// cluster. `variants --score`, and `hunt`/`replay --variant` without
    /// `--model`, run the variant on it.
    pub model: &'static str,
}

pub const VARIANTS: &[VariantInfo] = &[
    VariantInfo {
        variant: Variant::Default,
        name: "default",
        breaks: None,
        about: "the safe protocol: tokens on Expire and Release, fenced resource on every path, durable highest token",
        model: "",
    },
    VariantInfo {
        variant: Variant::ExpireIgnoresToken,
        name: "expire-ignores-token",
        breaks: Some(Property::ExpireSafety),
        about: "Expire removes the lock whatever its token, so a late Expire deletes a regranted lock",
        model: "",
    },
    VariantInfo {
        variant: Variant::ReleaseIgnoresToken,
        name: "release-ignores-token",
        breaks: Some(Property::ExpireSafety),
        about: "Release { key } as in the seed: a late or retried release deletes the next holder's lock",
        model: "",
    },
    VariantInfo {
        variant: Variant::SinkUnfenced,
        name: "sink-unfenced",
        breaks: Some(Property::FencedWrite),
        about: "the token is checked only in the worker; a paused worker wakes and writes anyway",
        model: "",
    },
    VariantInfo {
        variant: Variant::SecondPathUnfenced,
        name: "second-path-unfenced",
        breaks: Some(Property::FencedWrite),
        about: "the bulk-import path skips the token comparison",
        model: "",
    },
    VariantInfo {
        variant: Variant::SinkMaxInMemory,
        name: "sink-max-in-memory",
        breaks: Some(Property::FencedWrite),
        about: "the resource keeps its highest token in memory only; a restart forgets it",
        model: "",
    },
    VariantInfo {
        variant: Variant::ClientClockToken,
        name: "client-clock-token",
        breaks: Some(Property::TokenMonotonic),
        about: "workers use their local clock as the token; drift and steps make it go backwards",
        model: "",
    },
    VariantInfo {
        variant: Variant::RestoreNaive,
        name: "restore-naive",
        breaks: Some(Property::TokenMonotonic),
        about: "a whole-cluster restore keeps the backup's token counter, so tokens are reissued",
        model: "",
    },
    VariantInfo {
        variant: Variant::NoLeaseRestartOnNewLeader,
        name: "no-lease-restart-on-new-leader",
        breaks: Some(Property::LeaseExclusion),
        about: "a new leader expires leases on the old deadlines instead of a full lease from taking office",
        model: "",
    },
    VariantInfo {
        variant: Variant::RenewWithoutLeadershipCheck,
        name: "renew-without-leadership-check",
        breaks: Some(Property::LeaseExclusion),
        about: "a deposed leader acknowledges renewals without confirming leadership",
        model: "",
    },
    VariantInfo {
        variant: Variant::GrantAfterExpiredWait,
        name: "grant-after-expired-wait",
        breaks: Some(Property::GrantValidity),
        about: "a waiter is told Granted without re-checking that its lock is still live (etcd 11456)",
        model: "",
    },
    VariantInfo {
        variant: Variant::CommitOldTermByCount,
        name: "commit-old-term-by-count",
        breaks: Some(Property::ApplyAgreement),
        about: "a leader commits entries of earlier terms by counting replicas (Raft figure 8)",
        // A new leader's first entries travel one append at a time, so an older
        // term's entry can reach a majority before the leader's own does, and
        // the figure-8 strikes walk the three leaders of figure 8 through it.
        model: "figure8_strikes = true\nentries_per_message_max = 1\ninflight_max = 1",
    },
    VariantInfo {
        variant: Variant::VoteNotDurable,
        name: "vote-not-durable",
        breaks: Some(Property::ElectionSafety),
        about: "a vote is sent before it is durable; a crash lets the node vote twice in a term",
        // On three nodes one lost vote elects a second leader of the term; the dying disks and power losses of the fault plan crash a node inside its fsync.
        model: "nodes = 3",
    },
    VariantInfo {
        variant: Variant::AckBeforeDurable,
        name: "ack-before-durable",
        breaks: Some(Property::ApplyAgreement),
        about: "appends are acknowledged before they are durable; a crash loses committed entries and replicas diverge",
        // On three nodes one lost acknowledgement is half of the majority that committed an entry.
        model: "nodes = 3",
    },
    VariantInfo {
        variant: Variant::AmnesiaRejoin,
        name: "amnesia-rejoin",
        // Its stale log makes it vote for candidates that lack committed
        // entries (SCENARIOS.md 9): the elected leader overwrites them, which
        // shows first as two nodes applying different entries at one index.
        // Voting twice in one term (election-safety) is rarer: the forgotten
        // vote must be of a term whose election is still open.
        breaks: Some(Property::ApplyAgreement),
        about: "a node restored from a stale backup votes at once: it helps elect leaders that lack committed entries",
        // On three nodes the restored node's vote is half of every majority.
        model: "nodes = 3",
    },
    VariantInfo {
        variant: Variant::BeliefFromArrival,
        name: "belief-from-arrival",
        breaks: Some(Property::LeaseExclusion),
        about: "the client counts its lease from the answer's arrival: a retried acquire answered late believes past the server's deadline",
        model: "",
    },
    VariantInfo {
        variant: Variant::ResourceSyncLazy,
        name: "resource-sync-lazy",
        breaks: Some(Property::FencedWrite),
        about: "the resource answers before its write is durable and syncs at most once a second; a crash forgets a raised fence",
        model: "",
    },
    VariantInfo {
        variant: Variant::ResourceNoDedup,
        name: "resource-no-dedup",
        breaks: Some(Property::EqualToken),
        about: "the resource keeps no table of answered writes; a retried or duplicated write takes effect twice",
        model: "",
    },
    VariantInfo {
        variant: Variant::VoteIgnoresLog,
        name: "vote-ignores-log",
        breaks: Some(Property::ApplyAgreement),
        about: "votes are granted without Raft's election restriction; a leader lacking committed entries overwrites them",
        model: "",
    },
    VariantInfo {
        variant: Variant::FollowerCommitUncapped,
        name: "follower-commit-uncapped",
        breaks: Some(Property::ApplyAgreement),
        about: "a follower commits to the leader's commit index without capping it at the append's last entry, applying a stale tail",
        model: "",
    },
    VariantInfo {
        variant: Variant::TruncateAfterAppend,
        name: "truncate-after-append",
        breaks: Some(Property::ApplyAgreement),
        about: "a follower truncates its log after every append, so a reordered older append erases entries it acknowledged",
        model: "",
    },
    VariantInfo {
        variant: Variant::ServeWithoutQuorum,
        name: "serve-without-quorum",
        breaks: Some(Property::LeaseExclusion),
        about: "check-quorum off and reads confirmed by the leader alone: a leader cut off from its majority keeps renewing leases",
        model: "",
    },
    VariantInfo {
        variant: Variant::VoteTwice,
        name: "vote-twice",
        breaks: Some(Property::ElectionSafety),
        about: "a node votes for every candidate of a term (the voted-for check is missing): two leaders in one term",
        model: "",
    },
    VariantInfo {
        variant: Variant::RenewIgnoresToken,
        name: "renew-ignores-token",
        breaks: Some(Property::LeaseExclusion),
        about: "Renew extends the key's live lease whatever token it names; a holder whose lease expired renews its successor's",
        model: "",
    },
    VariantInfo {
        variant: Variant::FollowerAnswersTryLock,
        name: "follower-answers-try-lock",
        breaks: Some(Property::Linearizable),
        about: "a follower answers a try-lock Busy from its own copy of the locks, which may lag: a Busy for a key already released",
        model: "",
    },
    VariantInfo {
        variant: Variant::ReleasedBeforeCommit,
        name: "released-before-commit",
        breaks: Some(Property::Linearizable),
        about: "a Release is answered Released when proposed, before it commits: a release that finds another token or is lost still says Released",
        model: "",
    },
    VariantInfo {
        variant: Variant::ResourceRestoreNaive,
        name: "resource-restore-naive",
        breaks: Some(Property::FencedWrite),
        about: "the resource restored from a backup trusts its restored highest tokens: a stale holder between the backup's token and the true highest writes again",
        model: "",
    },
    VariantInfo {
        variant: Variant::RenewWhileExpiring,
        name: "renew-while-expiring",
        breaks: Some(Property::LeaseExclusion),
        about: "a renewal that reached the leader as it decided the lease's expiry is confirmed after the Expire was proposed: the holder believes in a lease the log ends",
        model: "late_renewals = true",
    },
    VariantInfo {
        variant: Variant::NeverCommit,
        name: "never-commit",
        breaks: Some(Property::Progress),
        about: "the leader drops what append answers acknowledge: it stays leader, but nothing commits and no key is granted",
        model: "",
    },
    VariantInfo {
        variant: Variant::SilentUnavailable,
        name: "silent-unavailable",
        breaks: Some(Property::Answered),
        about: "the service stays silent where it would answer Unavailable: the client learns nothing until its timeout",
        model: "wait_queue_max = 1",
    },
    VariantInfo {
        variant: Variant::WaitersNeverTimeOut,
        name: "waiters-never-time-out",
        breaks: Some(Property::Answered),
        about: "a waiter whose wait ran out is never told TimedOut: it waits, unanswered, until the key frees",
        model: "",
    },
    VariantInfo {
        variant: Variant::NoLeaderHint,
        name: "no-leader-hint",
        breaks: Some(Property::Answered),
        about: "a follower that knows the leader redirects clients without naming it: they try the servers in turn",
        model: "",
    },
    VariantInfo {
        variant: Variant::ElectionChurn,
        name: "election-churn",
        breaks: Some(Property::LeaderStability),
        about: "a follower's election timer ignores its leader's messages: followers campaign every election timeout",
        model: "",
    },
    VariantInfo {
        variant: Variant::LossCheckEveryAnswer,
        name: "loss-check-every-answer",
        breaks: Some(Property::WorkBudget),
        about: "a leader checks for lost appends after every answer that moves nothing, not once per heartbeat: under load the checks feed each other",
        // examples/load.toml: the storm needs a round trip far shorter than
        // an fsync, and a load that keeps appends in flight.
        model: "clients = 8\nkeys = 3\nthink_ms_max = 0\nwork_ms_max = 0\nserver_fsync_ms = 16\nloss_rate = 0.0\ndup_rate = 0.0\npartitions = false\ncrashes = false\nrestores = false\nclock_steps = false\ncorruption = false\npauses = false\nstalls = false\nresource_crashes = false\nresource_restores = false\nleader_churn = false",
    },
];

impl Variant {
    pub fn info(self) -> &'static VariantInfo {
        VARIANTS.iter().find(|info| info.variant == self).expect("every variant has a row in VARIANTS")
    }

    pub fn name(self) -> &'static str {
        self.info().name
    }

    pub fn is_safe(self) -> bool {
        self == Variant::Default
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Variant {
    /// Whether real processes (`fencelock-node`, `fencesim real`) can run
    /// this variant, and if not, why. Every variant is a switch in this
    /// crate that servers, clients and the resource read (or, for
    /// `restore-naive`, the operator's whole-cluster restore tool), except
    /// these three: two fake the resource's durability (a SQL resource
    /// keeps its fence in a synced transaction and does not pretend
    /// otherwise), and one is the simulator worker's own token.
    pub fn runs_real(self) -> Result<(), &'static str> {
        match self {
            Variant::SinkMaxInMemory | Variant::ResourceSyncLazy => {
                Err("it fakes the resource's durability, which a SQL resource does not")
            }
            Variant::ClientClockToken => {
                Err("the simulator's workers make its tokens; real workers write with the cluster's")
            }
            _ => Ok(()),
        }
    }
}

impl FromStr for Variant {
    type Err = String;

    fn from_str(name: &str) -> Result<Variant, String> {
        VARIANTS.iter().find(|info| info.name == name).map(|info| info.variant).ok_or_else(|| {
            let known: Vec<&str> = VARIANTS.iter().map(|info| info.name).collect();
            format!("unknown variant `{name}` (known: {})", known.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Variant, VARIANTS};

    #[test]
    fn every_variant_has_its_own_row_and_reads_back_from_its_name() {
        for info in VARIANTS {
            let variant = info.variant;
            assert_eq!(variant.info().name, info.name, "{variant:?} finds its own row");
            assert_eq!(variant.name(), info.name);
            assert_eq!(variant.to_string(), info.name);
            assert_eq!(info.name.parse::<Variant>(), Ok(variant));
        }
        let names: std::collections::BTreeSet<&str> = VARIANTS.iter().map(|info| info.name).collect();
        assert_eq!(names.len(), VARIANTS.len(), "names are distinct");
        assert!(names.iter().all(|name| !name.is_empty()));
    }

    #[test]
    fn only_the_default_protocol_is_safe_and_every_unsafe_one_names_what_it_breaks() {
        assert_eq!(Variant::Default.name(), "default");
        for info in VARIANTS {
            assert_eq!(info.variant.is_safe(), info.variant == Variant::Default, "{}", info.name);
            assert_eq!(info.breaks.is_none(), info.variant.is_safe(), "{}", info.name);
        }
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_known_ones() {
        let error = "sink-unfence".parse::<Variant>().unwrap_err();
        assert!(error.starts_with("unknown variant `sink-unfence` (known: default, "), "{error}");
    }
}
