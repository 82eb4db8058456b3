//! Vote strikes at run time ([`crate::faults::Fault::VoteStrikes`], planned
//! in `faults/votes.rs`): while an episode lasts, servers report every
//! pre-vote and vote they grant as they send it (`nodes/server.rs`), and the
//! supervisor splits one election around one voter:
//!
//! 1. In the instant a server grants a pre-vote (before the
//!    pre-candidate has it), it cuts the
//!    pre-candidate off, both ways, from every server but a bare majority
//!    with it: the voter and, in clusters above three, others drawn from the
//!    family's stream. The candidacy that follows reaches only them; the
//!    others never hear of its term.
//! 2. In the instant that voter grants the candidate its vote in
//!    that term, it crashes the voter, inside the fsync that follows its
//!    vote, brings it back 1-`down_ms` ms later, and cuts the candidate off
//!    from every server for `cut_ms`. The others' election timers run out
//!    in the old term, they campaign for the term the candidate already
//!    won, and the restarted voter, if its vote was not durable, votes again.
//!
//! A split whose vote does not come within `VOTE_WAIT_MS` is undone. A
//! split is made only while every server is up (a server that goes down in
//! the milliseconds before the vote does not stop the crash). Every step is
//! in the history (`ChurnEvent::VoteSplit`, `ChurnEvent::VoteStruck`,
//! `ChurnEvent::Reconnected`); the crash and restart are ordinary `Crashed`
//! and `Restarted` events. The cuts are one-way cuts of the net, so undoing
//! them (every link of the candidate to the other servers, after the split
//! or the isolation) also ends a planned cut of those links early, as the
//! renew strikes' reconnection does. A planned heal ends the cuts; a planned crash,
//! restart or restore of the voter takes it over.

use super::churn::Cluster;
use crate::faults::{ChurnEvent, Fault, VOTE_WAIT_MS};
use crate::machine::net::Addr;
use crate::nodes::context::VoteSent;
use fencelock::{NodeId, Term};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Where the strike stands.
enum Stage {
    /// Waiting for a pre-vote grant.
    Watching,
    /// `candidate` cut off from every server but `kept` (the voter among
    /// them) until `voter`'s vote for `term` comes, or `give_up_us`.
    Split { candidate: NodeId, voter: NodeId, term: Term, kept: Vec<NodeId>, give_up_us: u64 },
    /// `candidate` cut off from every server until `back_us`.
    Isolated { candidate: NodeId, back_us: u64 },
}

pub(super) struct VoteStrike {
    rng: ChaCha8Rng,
    /// The episode lasts until this true instant (0: none started).
    until_us: u64,
    strikes_left: u64,
    down_ms: u64,
    cut_ms: u64,
    stage: Stage,
    /// The voter crashed by the last strike, and the instant it comes back.
    away: Option<(NodeId, u64)>,
}

impl VoteStrike {
    pub(super) fn new(seed: u64) -> VoteStrike {
        VoteStrike {
            rng: crate::streams::vote_strike(seed),
            until_us: 0,
            strikes_left: 0,
            down_ms: 1,
            cut_ms: 0,
            stage: Stage::Watching,
            away: None,
        }
    }

    fn watching(&self, now_us: u64) -> bool {
        now_us < self.until_us && self.strikes_left > 0
    }

    /// Whether the family looks at every vote as the servers report it:
    /// during an episode, and while a strike is under way.
    pub(super) fn listens(&self, now_us: u64) -> bool {
        self.watching(now_us) || !matches!(self.stage, Stage::Watching)
    }

    /// The next instant the family must act whatever the servers report:
    /// the episode's end, the split's give-up, the candidate's return, the
    /// voter due back.
    pub(super) fn next_wake_us(&self, now_us: u64) -> Option<u64> {
        let end = self.watching(now_us).then_some(self.until_us);
        let stage = match self.stage {
            Stage::Watching => None,
            Stage::Split { give_up_us, .. } => Some(give_up_us),
            Stage::Isolated { back_us, .. } => Some(back_us),
        };
        let back = self.away.map(|(_, at_us)| at_us);
        [end, stage, back].into_iter().flatten().min()
    }

    /// Starts an episode: from now, servers report the (pre-)votes they grant.
    pub(super) fn start(&mut self, now_us: u64, fault: &Fault, cluster: &mut impl Cluster) {
        let Fault::VoteStrikes { for_ms, strikes, down_ms, cut_ms } = *fault else {
            unreachable!("a vote-strike episode starts from its fault")
        };
        self.until_us = now_us + for_ms * 1_000;
        self.strikes_left = strikes;
        self.down_ms = down_ms.max(1);
        self.cut_ms = cut_ms;
        cluster.watch_votes(true);
    }

    /// Brings the voter back and the candidate in when due, then moves the
    /// strike on with the (pre-)votes granted since the last step.
    pub(super) fn step(&mut self, now_us: u64, cluster: &mut impl Cluster) {
        if let Some((voter, at_us)) = self.away {
            if at_us <= now_us {
                self.away = None;
                cluster.restart(voter);
            }
        }
        match self.stage {
            Stage::Split { candidate, give_up_us, .. } | Stage::Isolated { candidate, back_us: give_up_us }
                if give_up_us <= now_us =>
            {
                reconnect(candidate, cluster);
                self.stage = Stage::Watching;
            }
            _ => {}
        }
        let votes = if cluster.votes_watched() { cluster.take_votes() } else { Vec::new() };
        if !self.watching(now_us) && matches!(self.stage, Stage::Watching) {
            if cluster.votes_watched() {
                cluster.watch_votes(false);
            }
            return;
        }
        for vote in votes {
            match self.stage {
                Stage::Watching if vote.pre && self.watching(now_us) => self.split(vote, now_us, cluster),
                Stage::Split { candidate, voter, term, .. }
                    if !vote.pre && (vote.voter, vote.candidate, vote.term) == (voter, candidate, term) =>
                {
                    self.strike(vote, now_us, cluster)
                }
                _ => {}
            }
        }
    }

    /// Cuts `vote`'s pre-candidate off from every server but a bare majority with the voter.
    fn split(&mut self, vote: VoteSent, now_us: u64, cluster: &mut impl Cluster) {
        let VoteSent { voter, candidate, term, at_us, .. } = vote;
        let nodes = cluster.nodes();
        let quorum = nodes / 2 + 1;
        if nodes < 3 || self.away.is_some() || cluster.servers_down() > 0 || !cluster.is_up(candidate) {
            return;
        }
        let mut others: Vec<NodeId> = (0..nodes)
            .map(|n| NodeId(u8::try_from(n).expect("a cluster has at most 255 servers")))
            .filter(|n| *n != voter && *n != candidate)
            .collect();
        others.shuffle(&mut self.rng);
        let mut kept: Vec<NodeId> = std::iter::once(voter).chain(others.into_iter().take(quorum - 2)).collect();
        kept.sort();
        cluster.note(ChurnEvent::VoteSplit { candidate, voter, term, kept: kept.clone(), after_us: now_us - at_us });
        let cut: Vec<Addr> = (0..nodes)
            .map(|n| NodeId(u8::try_from(n).expect("a cluster has at most 255 servers")))
            .filter(|n| *n != candidate && !kept.contains(n))
            .map(Addr::Server)
            .collect();
        cluster.cut_between(Addr::Server(candidate), &cut);
        let give_up_us = now_us + VOTE_WAIT_MS * 1_000;
        self.stage = Stage::Split { candidate, voter, term, kept, give_up_us };
    }

    /// Crashes the voter of `vote` and cuts its candidate off from every server.
    fn strike(&mut self, vote: VoteSent, now_us: u64, cluster: &mut impl Cluster) {
        let VoteSent { voter, candidate, term, at_us, .. } = vote;
        let Stage::Split { kept, .. } = std::mem::replace(&mut self.stage, Stage::Watching) else {
            unreachable!("a strike follows a split")
        };
        let down_ms = self.rng.gen_range(1..=self.down_ms);
        let cut_ms = self.cut_ms;
        cluster.note(ChurnEvent::VoteStruck { voter, candidate, term, after_us: now_us - at_us, down_ms, cut_ms });
        cluster.crash(voter, false);
        self.away = Some((voter, now_us + down_ms * 1_000));
        cluster.cut_between(Addr::Server(candidate), &kept.into_iter().map(Addr::Server).collect::<Vec<_>>());
        self.stage = Stage::Isolated { candidate, back_us: now_us + cut_ms * 1_000 };
        self.strikes_left -= 1;
    }

    /// A planned heal ends the cuts; a planned crash, restart or restore of
    /// the voter takes it over.
    pub(super) fn yield_to(&mut self, fault: &Fault) {
        match fault {
            Fault::Heal => self.stage = Stage::Watching,
            Fault::Crash { node, .. } | Fault::Restart { node } | Fault::RestoreNode { node }
                if self.away.is_some_and(|(voter, _)| voter == *node) =>
            {
                self.away = None;
            }
            Fault::RestoreCluster => self.away = None,
            _ => {}
        }
    }
}

/// Undoes every cut of the family around `candidate`.
fn reconnect(candidate: NodeId, cluster: &mut impl Cluster) {
    let others: Vec<Addr> = (0..cluster.nodes())
        .map(|n| NodeId(u8::try_from(n).expect("a cluster has at most 255 servers")))
        .filter(|n| *n != candidate)
        .map(Addr::Server)
        .collect();
    cluster.reconnect_between(Addr::Server(candidate), &others);
    cluster.note(ChurnEvent::Reconnected { addrs: vec![Addr::Server(candidate)] });
}
