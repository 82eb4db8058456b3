//! Coverage probes: named situations a bug could hide behind, so a hunt can
//! say which of them its seeds reached and which it never did.
//!
//! Every probe is one [`Probe`] value with a name and one line saying why it
//! matters. Those marked [`Seen::Core`] are hit in this crate, at the line
//! that handles the situation, through a [`Probes`] collector that the
//! driver owns per node: it is off unless the driver turns it on
//! ([`Probes::turn_on`]), and a hit is then one `or` into a bit set, so the
//! real node (which never turns it on) pays one branch per probe. The driver
//! takes the set after each round ([`Probes::take`]). Those marked
//! [`Seen::Simulator`] are judged by the simulator from a run's history or
//! its disks, where the situation is visible and this crate's is not.
//!
//! A probe only observes: no probe changes a decision, a message or a draw,
//! so turning the collector on leaves a run byte for byte the same.

use std::fmt;

/// Where a probe is hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seen {
    /// In `fencelock`, at the line that handles the situation.
    Core,
    /// By the simulator, from the history, the disks or the driver.
    Simulator,
}

macro_rules! probes {
    ($($variant:ident => $name:literal, $seen:ident, $why:literal;)*) => {
        /// One named situation; [`Probe::ALL`] lists them in declaration order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Probe {
            $($variant,)*
        }

        impl Probe {
            /// Every probe, in declaration order (the order of the bits of a [`ProbeSet`]).
            pub const ALL: &'static [Probe] = &[$(Probe::$variant,)*];

            /// The probe's name, kebab-case, as reports and records write it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Probe::$variant => $name,)*
                }
            }

            /// One line: why a bug could hide behind this situation.
            pub fn why(self) -> &'static str {
                match self {
                    $(Probe::$variant => $why,)*
                }
            }

            /// Where it is hit.
            pub fn seen(self) -> Seen {
                match self {
                    $(Probe::$variant => Seen::$seen,)*
                }
            }
        }
    };
}

probes! {
    // ---- elections (core/src/raft/election.rs) ----
    PreVoteIgnoredInLease => "pre-vote-ignored-in-lease", Core,
        "a node that heard a leader within the election timeout ignored a pre-vote: a returning node must not depose a working leader";
    PreVoteRefusedBackingCampaign => "pre-vote-refused-backing-campaign", Core,
        "a node that just voted refused a pre-vote for a later term: the loser of a close race must not depose its winner";
    VoteRefusedVotedForOther => "vote-refused-voted-for-other", Core,
        "two candidates asked one voter in one term: the one-vote-per-term rule is all that keeps a second leader out";
    VoteRefusedLogBehind => "vote-refused-log-behind", Core,
        "the election restriction refused a candidate whose log is behind: without it a leader could lack committed entries";
    VoteRefusedRecovering => "vote-refused-recovering", Core,
        "a node restored from a stale backup refused a vote: it may have voted in terms it no longer remembers";
    PreCampaignLost => "pre-campaign-lost", Core,
        "a pre-candidate was refused by a majority and went back to following without raising its term";
    SplitVoteRetry => "split-vote-retry", Core,
        "a candidate's election timer ran out before it won: a split vote, and a second campaign in a new term";
    CheckQuorumStepDown => "check-quorum-step-down", Core,
        "a leader cut off from a majority stepped down by itself: a stale leader must stop confirming reads and leases";
    LeaderDeposedByHigherTerm => "leader-deposed-by-higher-term", Core,
        "a leader saw a higher term and stepped down: everything it had in flight must be abandoned safely";
    StaleLeaderAppendRejected => "stale-leader-append-rejected", Core,
        "an append from a leader of an older term was refused: a deposed leader woke up and kept sending";
    // ---- replication (core/src/raft/replication.rs) ----
    AppendRejectedLogMismatch => "append-rejected-log-mismatch", Core,
        "a follower lacked the leader's previous entry: the conflict backoff must find the match point without skipping an entry";
    FollowerSuffixOverwritten => "follower-suffix-overwritten", Core,
        "a follower cut a conflicting uncommitted suffix of its log: only uncommitted entries may ever be overwritten";
    Figure8CommitDeferred => "figure-8-commit-deferred", Core,
        "a majority stored an entry of an older term and the leader did not commit it by counting (Raft's figure 8)";
    OldTermCommittedByCurrent => "old-term-committed-by-current", Core,
        "entries of an older term were committed only through an entry of the leader's own term";
    Figure8LeaderLostOffice => "figure-8-leader-lost-office", Core,
        "a leader lost office after an older term's entry reached a majority under it and before its own term's did: counted, that entry is lost to a rival's overwrite";
    AppendBelowCommitTrimmed => "append-below-commit-trimmed", Core,
        "an append reached back below the follower's commit: the committed prefix is skipped, never rewritten";
    FollowerCommitCapped => "follower-commit-capped", Core,
        "a follower's stale tail lay past what the append matched: its commit is capped at the match, not at its log's end";
    EmptyAppendRevealsLoss => "empty-append-reveals-loss", Core,
        "a follower was behind and nothing was left to send: an empty append makes it say so, or lost appends go unnoticed";
    SnapshotSent => "snapshot-sent", Core,
        "a follower fell behind the leader's compacted log and was sent the snapshot";
    SnapshotInstalled => "snapshot-installed", Core,
        "a follower replaced its log and state machine with the leader's snapshot";
    SnapshotArrivedStale => "snapshot-arrived-stale", Core,
        "a snapshot arrived at a follower already committed past it: installing it would move the state machine back";
    SnapshotAnswerAfterLeaderMovedOn => "snapshot-answer-after-leader-moved-on", Core,
        "a snapshot's answer reached a leader that had stopped waiting for it (sent again, or probing)";
    SnapshotResentAfterWait => "snapshot-resent-after-wait", Core,
        "a snapshot got no answer within two election timeouts and the leader tried again";
    // ---- restores and read rounds (core/src/raft/recovery.rs, read_index.rs) ----
    AppendRefusedWhileSurveying => "append-refused-while-surveying", Core,
        "a node restored from a backup refused appends until it had surveyed its peers' terms";
    SurveyAdoptedHigherTerm => "survey-adopted-higher-term", Core,
        "a restored node learned from the term survey that it had missed terms";
    RecoveryFinished => "recovery-finished", Core,
        "a restored node caught up with a leader and voted again: the moment its lost votes stop mattering";
    ReadRoundsDroppedOnStepDown => "read-rounds-dropped-on-step-down", Core,
        "a leader lost office with read-index rounds pending: a round that fails must never be answered";
    // ---- the lock service (core/src/service/) ----
    ExpireWhileRenewInFlight => "expire-while-renew-in-flight", Core,
        "the leader proposed an Expire while the holder's renewal waited for its confirmation round";
    RenewConfirmedDuringExpiry => "renew-confirmed-during-expiry", Core,
        "a renewal was confirmed while the lease's expiry round was out: the expiry must see the new deadline";
    ExpireForReplacedToken => "expire-for-replaced-token", Core,
        "an Expire applied for a token already replaced by a new holder's: the token on Expire is all that keeps the new lock";
    ExpireFoundNothing => "expire-found-nothing", Core,
        "an Expire applied after the lock was already gone (released or expired twice)";
    ReleaseFoundNothing => "release-found-nothing", Core,
        "a Release applied for a lock already gone or regranted: a late or retried Release must be harmless";
    GrantAnsweredNotHeld => "grant-answered-not-held", Core,
        "a Grant applied but its lock was gone by the time the answer left: it must say NotHeld, never Granted";
    GrantConfirmationStale => "grant-confirmation-stale", Core,
        "a leadership confirmation for a Grant came back too late to prove anything and was asked again";
    GhostReleaseProposed => "ghost-release-proposed", Core,
        "a lock granted to a client that had gone was released by the leader (a ghost lock)";
    CancelWhileGrantInFlight => "cancel-while-grant-in-flight", Core,
        "a client gave up while its Grant was in the log: the grant will be a ghost";
    RetryAnsweredFromSession => "retry-answered-from-session", Core,
        "a retried request was answered from the client's session: the original token, not a second grant";
    RetryOfLostGrant => "retry-of-lost-grant", Core,
        "a retry of a Grant whose lock is gone since was answered NotHeld from the session";
    UnavailableBeforeServing => "unavailable-before-serving", Core,
        "a new leader refused a request before it had applied an entry of its term: its lock table may lack committed commands";
    LeasesRestartedByNewLeader => "leases-restarted-by-new-leader", Core,
        "a new leader inherited held locks and restarted their leases from its own start of office";
    WaitQueueFull => "wait-queue-full", Core,
        "an acquire was turned away by a full wait queue: backpressure, which a client must hear as Unavailable and not as silence";
    WaiterTimedOut => "waiter-timed-out", Core,
        "a waiter's wait ran out in the queue: its TimedOut goes through the log";
    WaiterDeadlinesFollowedClockBack => "waiter-deadlines-followed-clock-back", Core,
        "the leader's clock stepped back with waiters queued: their deadlines moved back with it";
    ConfirmRoundsDroppedOnRoleChange => "confirm-rounds-dropped-on-role-change", Core,
        "the service's leadership confirmations (expiry, renew, grant) died with a role change: each must fail, not succeed";
    ProposalsRedirectedOnStepDown => "proposals-redirected-on-step-down", Core,
        "a leader lost office with proposals of its term pending: their clients are redirected, and a resend must find the first outcome";
    FloorReadDroppedOnRoleChange => "floor-read-dropped-on-role-change", Core,
        "a leader lost office with a restored resource's floor read pending: the resource must ask again";
    Compacted => "compacted", Core,
        "a node compacted its log into a snapshot: the token counter must travel with the locks it counts";
    // ---- the simulator's probes (sim/src/run/coverage.rs, the server driver, the supervisor) ----
    TwoCandidatesOneTerm => "two-candidates-one-term", Simulator,
        "two servers were candidates in the same term: only one may win it (a term race)";
    VoteLostInFsyncCrash => "vote-lost-in-fsync-crash", Simulator,
        "a server granted a vote and crashed before its fsync: the vote must not be sent, or it could vote twice";
    TornLogTailCut => "torn-log-tail-cut", Simulator,
        "a crash kept a torn prefix of a server's unsynced writes: the restart must cut the tail cleanly";
    CompactionRacingCrash => "compaction-racing-crash", Simulator,
        "a server crashed with a compaction written but not synced: the snapshot and its token counter must not fall behind";
    ClockStepBackOnLeader => "clock-step-back-on-leader", Simulator,
        "a leader's clock stepped backward: its lease deadlines and grant confirmations read that clock";
    StaleWriteRejected => "stale-write-rejected", Simulator,
        "the resource rejected a write with a token below one it had accepted: fencing at work";
    SecondPathHigherToken => "second-path-higher-token", Simulator,
        "a write on the second path carried a higher token than the last one accepted on the first";
    ResourceRestoredTwice => "resource-restored-twice", Simulator,
        "the resource was restored from a backup a second time: its floors must be read again";
    WriteRefusedUntilFloor => "write-refused-until-floor", Simulator,
        "a restored resource refused a write until it had read its floors from the lock service";
    ClusterRestored => "cluster-restored", Simulator,
        "the whole cluster was restored from a backup: new tokens must still rise above every old one";
    NodeRestored => "node-restored", Simulator,
        "a server was restarted from a stale backup of its own disk (amnesia)";
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Probe {
    type Err = String;

    fn from_str(name: &str) -> Result<Probe, String> {
        Probe::ALL.iter().copied().find(|probe| probe.name() == name).ok_or_else(|| format!("unknown probe `{name}`"))
    }
}

/// A set of probes as bits, in [`Probe::ALL`]'s order: a run keeps one, a
/// hunt counts seeds per probe from them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeSet(u128);

const _: () = assert!(Probe::ALL.len() <= 128, "a ProbeSet holds at most 128 probes");

impl ProbeSet {
    pub fn insert(&mut self, probe: Probe) {
        self.0 |= 1 << probe as u32;
    }

    pub fn contains(self, probe: Probe) -> bool {
        self.0 & (1 << probe as u32) != 0
    }

    pub fn union(self, other: ProbeSet) -> ProbeSet {
        ProbeSet(self.0 | other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The probes in the set, in [`Probe::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Probe> {
        Probe::ALL.iter().copied().filter(move |probe| self.contains(*probe))
    }

    /// The set as raw bits (bit `i` is `Probe::ALL[i]`).
    pub fn bits(self) -> u128 {
        self.0
    }
}

impl FromIterator<Probe> for ProbeSet {
    fn from_iter<I: IntoIterator<Item = Probe>>(probes: I) -> ProbeSet {
        let mut set = ProbeSet::default();
        for probe in probes {
            set.insert(probe);
        }
        set
    }
}

/// One node's collector: off (every hit ignored) until the driver turns it on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    on: bool,
    hit: ProbeSet,
}

impl Probes {
    /// From now on, hits are kept until [`Probes::take`].
    pub fn turn_on(&mut self) {
        self.on = true;
    }

    /// Notes that the situation `probe` names was reached.
    #[inline]
    pub fn hit(&mut self, probe: Probe) {
        if self.on {
            self.hit.insert(probe);
        }
    }

    /// The probes hit since the last take.
    pub fn take(&mut self) -> ProbeSet {
        std::mem::take(&mut self.hit)
    }
}

#[cfg(test)]
mod tests {
    use super::{Probe, ProbeSet, Probes};

    #[test]
    fn names_are_unique_kebab_case_and_parse_back() {
        let mut names: Vec<&str> = Probe::ALL.iter().map(|probe| probe.name()).collect();
        for (probe, name) in Probe::ALL.iter().zip(&names) {
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{name}");
            assert_eq!(name.parse::<Probe>(), Ok(*probe));
            assert!(!probe.why().is_empty() && !probe.why().contains('\n'), "{name}: one why-line");
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Probe::ALL.len(), "probe names are unique");
        assert!("no-such-probe".parse::<Probe>().is_err());
    }

    #[test]
    fn a_collector_keeps_nothing_until_turned_on() {
        let mut probes = Probes::default();
        probes.hit(Probe::Compacted);
        assert!(probes.take().is_empty(), "off: hits are ignored");
        probes.turn_on();
        probes.hit(Probe::Compacted);
        probes.hit(Probe::SnapshotSent);
        probes.hit(Probe::Compacted);
        let taken = probes.take();
        assert_eq!(taken.iter().collect::<Vec<_>>(), vec![Probe::SnapshotSent, Probe::Compacted]);
        assert!(probes.take().is_empty(), "take clears");
        let all: ProbeSet = Probe::ALL.iter().copied().collect();
        assert_eq!(all.len(), Probe::ALL.len());
    }
}
