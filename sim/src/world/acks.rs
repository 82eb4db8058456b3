//! Crashes after acknowledging at run time ([`crate::faults::Fault::AckCrashes`],
//! planned in `faults/acks.rs`): while an episode lasts, servers report the
//! vote grants or entry acknowledgements they send in a round that wrote to
//! their disk (`nodes/server.rs`), and the supervisor crashes the sender in
//! the instant of the send (the report rings its bell): inside the fsync that
//! follows the write (1 ms), so whatever was sent before it was durable is
//! forgotten, and whatever waited for the fsync was never sent. The victim
//! comes back 1 ms to `down_ms` later, in time to vote again in the same
//! term or to be counted again by the same leader. One victim is down at a
//! time, and a strike never takes the last server up. Every strike is in the
//! history (`ChurnEvent::AckStruck`); the crash and restart are ordinary
//! `Crashed` and `Restarted` events. A planned fault that touches a victim
//! (a restart, a restore, a crash, a whole-cluster restore) takes it over.
//!
//! The down times come from the family's own stream, drawn at each strike in
//! the order of the run's events, so they depend on the seed and model alone.

use super::churn::Cluster;
use crate::faults::{Acked, ChurnEvent, Fault};
use crate::nodes::context::AckSent;
use fencelock::NodeId;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

pub(super) struct AckCrash {
    rng: ChaCha8Rng,
    /// The episode lasts until this true instant (0: none started).
    until_us: u64,
    acked: Acked,
    strikes_left: u64,
    down_ms: u64,
    /// Victims still down, and the instant each comes back.
    away: BTreeMap<NodeId, u64>,
}

impl AckCrash {
    pub(super) fn new(seed: u64) -> AckCrash {
        AckCrash {
            rng: crate::streams::ack_crash(seed),
            until_us: 0,
            acked: Acked::Vote,
            strikes_left: 0,
            down_ms: 1,
            away: BTreeMap::new(),
        }
    }

    /// Whether an episode is on at `now_us`.
    fn watching(&self, now_us: u64) -> bool {
        now_us < self.until_us && self.strikes_left > 0
    }

    /// Whether the family looks at every report the servers make (an episode is on).
    pub(super) fn listens(&self, now_us: u64) -> bool {
        self.watching(now_us)
    }

    /// The next instant the family must act whatever the servers report:
    /// the episode's end, a victim due back.
    pub(super) fn next_wake_us(&self, now_us: u64) -> Option<u64> {
        let end = self.watching(now_us).then_some(self.until_us);
        let back = self.away.values().min().copied();
        [end, back].into_iter().flatten().min()
    }

    /// Starts an episode: from now, servers report their acknowledgements.
    pub(super) fn start(&mut self, now_us: u64, fault: &Fault, cluster: &mut impl Cluster) {
        let Fault::AckCrashes { for_ms, votes, strikes, down_ms } = *fault else {
            unreachable!("an ack-crash episode starts from its fault")
        };
        self.until_us = now_us + for_ms * 1_000;
        self.acked = if votes { Acked::Vote } else { Acked::Entries };
        self.strikes_left = strikes;
        self.down_ms = down_ms.max(1);
        cluster.watch_acks(true);
    }

    /// Brings back the victims due, then strikes the first sender of a
    /// watched acknowledgement since the last step, if one may go down.
    pub(super) fn step(&mut self, now_us: u64, cluster: &mut impl Cluster) {
        let due: Vec<NodeId> = self.away.iter().filter(|(_, at_us)| **at_us <= now_us).map(|(node, _)| *node).collect();
        for node in due {
            self.away.remove(&node);
            cluster.restart(node);
        }
        if !self.watching(now_us) {
            if cluster.acks_watched() {
                cluster.watch_acks(false);
            }
            return;
        }
        let acks = cluster.take_acks();
        if !self.away.is_empty() || cluster.servers_down() + 1 >= cluster.nodes() {
            return;
        }
        let victim = acks.into_iter().find(|ack| ack.acked == self.acked && cluster.is_up(ack.node));
        if let Some(ack) = victim {
            self.strike(ack, now_us, cluster);
        }
    }

    fn strike(&mut self, ack: AckSent, now_us: u64, cluster: &mut impl Cluster) {
        let AckSent { node, to, term, acked, at_us } = ack;
        let down_ms = self.rng.gen_range(1..=self.down_ms);
        self.strikes_left -= 1;
        cluster.note(ChurnEvent::AckStruck { node, to, term, acked, after_us: now_us - at_us, down_ms });
        cluster.crash(node, false);
        self.away.insert(node, now_us + down_ms * 1_000);
        if self.strikes_left == 0 {
            cluster.watch_acks(false);
        }
    }

    /// A planned crash, restart or restore of a victim, or a whole-cluster
    /// restore, takes the victims it touches over: the family never restarts
    /// what the plan brought back or took down again.
    pub(super) fn yield_to(&mut self, fault: &Fault) {
        match fault {
            Fault::Crash { node, .. } | Fault::Restart { node } | Fault::RestoreNode { node } => {
                self.away.remove(node);
            }
            Fault::RestoreCluster => self.away.clear(),
            _ => {}
        }
    }
}
