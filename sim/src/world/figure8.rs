//! Figure-8 strikes at run time ([`crate::faults::Fault::Figure8Strikes`],
//! planned in `faults/figure8.rs`): while an episode lasts, the supervisor
//! walks the cluster through figure 8 of the Raft paper, one step as each
//! is reached:
//!
//! 1. **Strand.** With every server up, whoever leads (call it A, of term
//!    `a`) is cut off, both ways, from the other servers. Its clients still
//!    reach it, so until check-quorum deposes it, what they ask is appended
//!    to its log alone.
//! 2. **Successor.** In the instant another server leads a later
//!    term (B, of term `b`), before its first entry of `b` (its no-op) can
//!    reach anyone (a packet takes a millisecond at least), B's cable is
//!    pulled — what it sent is lost — and A reconnected. B now holds an entry
//!    of term `b` where A holds entries of term `a`, and no other server
//!    holds either.
//! 3. **Return.** On three servers only A can win the next election: the
//!    other's log ends before A's, and B is away (above three, the others
//!    may elect one of themselves instead, and the strike is given up; a
//!    strand of A with followers, tried, let the figure through in fewer
//!    seeds: the others must then elect B without a spare server). In the
//!    instant A leads a term above `b`, the strike is armed: A is unplugged
//!    at its first apply in that office, or `strike_ms` after it was seen leading, whichever is
//!    first. Its first apply is where a leader counting replicas has just
//!    committed an entry of term `a` that reached a majority ahead of its
//!    own no-op; the rule commits nothing before that no-op, so a strike
//!    `strike_ms` in may instead leave term `a`'s entries on a majority
//!    uncommitted (probe `figure-8-leader-lost-office`).
//! 4. **Overwrite.** B is plugged back in as A is struck: its last term `b`
//!    beats the majority's `a`, so it wins and overwrites the entries A
//!    carried there. A comes back `down_ms` later.
//!
//! A step not reached in time is given up, and every cut and cable of the
//! strike undone: no successor within `FIGURE8_STRAND_WAIT_MS`, no return
//! of A within `FIGURE8_RETURN_WAIT_MS` or another server winning instead.
//! A strike given up does not count against `strikes`: the next leader seen may
//! strand the next leader. A strand needs three servers or more, all up and
//! plugged in (leader churn and ack amnesia pull cables too; a server held
//! away by them stands on neither side of the figure); once it stands, the
//! other families may still strike its servers, as they would any others.
//! Every step is in the history (`ChurnEvent::Figure8Stranded`,
//! `Figure8SuccessorUnplugged`, `Figure8Struck`, `Reconnected`,
//! `PluggedBack`). Reconnecting A restores every link between it and the
//! other servers, so it also ends a planned cut of those links early, as
//! the vote strikes' reconnection does. A planned heal ends the strike.

use super::churn::Cluster;
use crate::faults::{ChurnEvent, Fault, FIGURE8_RETURN_WAIT_MS, FIGURE8_STRAND_WAIT_MS};
use crate::machine::net::Addr;
use fencelock::{NodeId, Term};

/// Where the strike stands.
#[derive(Clone, Copy, Debug)]
enum Stage {
    /// Waiting for a leader with every server up and plugged in.
    Watching,
    /// `leader` (of `term`) cut off from the other servers until one of them leads a later term.
    Stranded { leader: NodeId, term: Term, give_up_us: u64 },
    /// `successor` (leader of `term`) unplugged and `leader` reconnected, until a server leads a later term.
    Successor { leader: NodeId, successor: NodeId, term: Term, give_up_us: u64 },
    /// `leader` leads `term` again: struck at its first apply or at `strike_us`.
    Returned { leader: NodeId, successor: NodeId, term: Term, seen_us: u64, applies_seen: u64, strike_us: u64 },
    /// `leader` unplugged until `back_us`.
    Away { leader: NodeId, back_us: u64 },
}

pub(super) struct Figure8Strike {
    /// The episode lasts until this true instant (0: none started).
    until_us: u64,
    strikes_left: u64,
    strike_us: u64,
    down_us: u64,
    stage: Stage,
}

impl Figure8Strike {
    pub(super) fn new() -> Figure8Strike {
        Figure8Strike { until_us: 0, strikes_left: 0, strike_us: 0, down_us: 0, stage: Stage::Watching }
    }

    fn watching(&self, now_us: u64) -> bool {
        now_us < self.until_us && self.strikes_left > 0
    }

    /// Whether the family looks at every role and apply as it is
    /// recorded: during an episode, and while a strike is under way (but
    /// not while its leader is away).
    pub(super) fn listens(&self, now_us: u64) -> bool {
        match self.stage {
            Stage::Watching => self.watching(now_us),
            Stage::Away { .. } => false,
            Stage::Stranded { .. } | Stage::Successor { .. } | Stage::Returned { .. } => true,
        }
    }

    /// The next instant the family must act whatever is recorded: the
    /// episode's end, a stage's give-up or strike instant, the leader due back.
    pub(super) fn next_wake_us(&self, now_us: u64) -> Option<u64> {
        match self.stage {
            Stage::Watching => self.watching(now_us).then_some(self.until_us),
            Stage::Stranded { give_up_us, .. } | Stage::Successor { give_up_us, .. } => Some(give_up_us),
            Stage::Returned { strike_us, .. } => Some(strike_us),
            Stage::Away { back_us, .. } => Some(back_us),
        }
    }

    /// Starts an episode.
    pub(super) fn start(&mut self, now_us: u64, fault: &Fault) {
        let Fault::Figure8Strikes { for_ms, strikes, strike_ms, down_ms } = *fault else {
            unreachable!("a figure-8 episode starts from its fault")
        };
        self.until_us = now_us + for_ms * 1_000;
        self.strikes_left = strikes;
        self.strike_us = strike_ms * 1_000;
        self.down_us = down_ms * 1_000;
    }

    /// Moves the strike on by what the cluster's roles and applies show now.
    pub(super) fn step(&mut self, now_us: u64, cluster: &mut impl Cluster) {
        self.stage = match self.stage {
            Stage::Watching if self.watching(now_us) => strand(now_us, cluster),
            Stage::Stranded { leader, term, give_up_us } => {
                match newest_leader(cluster, |node, t| node != leader && t > term) {
                    Some((successor, term)) => {
                        cluster.note(ChurnEvent::Figure8SuccessorUnplugged { successor, leader, term });
                        cluster.unplug(successor);
                        reconnect(leader, cluster);
                        let give_up_us = now_us + FIGURE8_RETURN_WAIT_MS * 1_000;
                        Stage::Successor { leader, successor, term, give_up_us }
                    }
                    None if give_up_us <= now_us => {
                        reconnect(leader, cluster);
                        Stage::Watching
                    }
                    None => self.stage,
                }
            }
            Stage::Successor { leader, successor, term, give_up_us } => {
                match newest_leader(cluster, |node, t| node != successor && t > term) {
                    Some((node, term)) if node == leader => {
                        let (seen_us, applies_seen) = (now_us, cluster.applies(leader));
                        let strike_us = now_us + self.strike_us;
                        Stage::Returned { leader, successor, term, seen_us, applies_seen, strike_us }
                    }
                    Some(_) => plug_back(successor, cluster),
                    None if give_up_us <= now_us => plug_back(successor, cluster),
                    None => self.stage,
                }
            }
            Stage::Returned { leader, successor, term, seen_us, applies_seen, strike_us } => {
                let applied = cluster.applies(leader) > applies_seen;
                if !cluster.leads(leader, term) {
                    plug_back(successor, cluster)
                } else if applied || strike_us <= now_us {
                    let seen_ms = (now_us - seen_us) / 1_000;
                    let down_ms = self.down_us / 1_000;
                    let at_first_apply = applied;
                    cluster.note(ChurnEvent::Figure8Struck {
                        leader,
                        successor,
                        term,
                        seen_ms,
                        at_first_apply,
                        down_ms,
                    });
                    cluster.unplug(leader);
                    plug_back(successor, cluster);
                    self.strikes_left = self.strikes_left.saturating_sub(1);
                    Stage::Away { leader, back_us: now_us + self.down_us }
                } else {
                    self.stage
                }
            }
            Stage::Away { leader, back_us } if back_us <= now_us => plug_back(leader, cluster),
            stage => stage,
        };
    }

    /// A planned heal undoes every cut and cable of the strike: it is over.
    pub(super) fn yield_to(&mut self, fault: &Fault) {
        if matches!(fault, Fault::Heal) {
            self.stage = Stage::Watching;
        }
    }
}

/// Strands the leader, alone, if there are at least three servers, all up
/// and plugged in (a server another family holds away would stand on
/// neither side of the figure).
fn strand(now_us: u64, cluster: &mut impl Cluster) -> Stage {
    if cluster.nodes() < 3 || cluster.servers_down() > 0 || cluster.servers_unplugged() > 0 {
        return Stage::Watching;
    }
    let Some((leader, term)) = newest_leader(cluster, |_, _| true) else {
        return Stage::Watching;
    };
    cluster.note(ChurnEvent::Figure8Stranded { leader, term });
    cluster.cut_between(Addr::Server(leader), &others(cluster, leader));
    Stage::Stranded { leader, term, give_up_us: now_us + FIGURE8_STRAND_WAIT_MS * 1_000 }
}

/// The live server leading the highest term among those `pick` accepts.
fn newest_leader(cluster: &impl Cluster, pick: impl Fn(NodeId, Term) -> bool) -> Option<(NodeId, Term)> {
    cluster.live_leaders().into_iter().filter(|(node, term)| pick(*node, *term)).max_by_key(|(_, term)| *term)
}

/// Every server but `node`, as addresses.
fn others(cluster: &impl Cluster, node: NodeId) -> Vec<Addr> {
    (0..cluster.nodes())
        .map(|n| NodeId(u8::try_from(n).expect("a cluster has at most 255 servers")))
        .filter(|n| *n != node)
        .map(Addr::Server)
        .collect()
}

/// Undoes the strand of `leader`.
fn reconnect(leader: NodeId, cluster: &mut impl Cluster) {
    cluster.reconnect_between(Addr::Server(leader), &others(cluster, leader));
    cluster.note(ChurnEvent::Reconnected { addrs: vec![Addr::Server(leader)] });
}

/// Plugs `node` back in; the strike is back to watching.
fn plug_back(node: NodeId, cluster: &mut impl Cluster) -> Stage {
    cluster.plug(node);
    cluster.note(ChurnEvent::PluggedBack { node });
    Stage::Watching
}
