//! Renew strikes at run time ([`crate::faults::Fault::RenewStrikes`],
//! planned in `faults/renews.rs`): while an episode lasts, the supervisor
//! reads each renew a server answers `Renewed` (from the history, as it is
//! recorded), and in the instant it is recorded cuts that server
//! off from the other servers together with the client it renewed for, and
//! pauses it `pause_ms`. The other servers elect a successor, which restarts
//! the lease at its start of office; the client's next renew (every 40% of a
//! lease) reaches only the stalled leader and waits in its mailbox. A leader
//! that confirms its leadership before it answers a renew (the protocol)
//! never gets the confirmation; one that answers at once
//! (`renew-without-leadership-check`) extends the client's belief past the
//! successor's expiry. The links come back 50-1,000 ms after the pause ends.
//!
//! One victim at a time. The cuts are one-way cuts of the net, so a planned
//! heal ends them early, and their end may end a planned cut of the same
//! links early; the pause is an ordinary pause. Every strike is in the
//! history (`ChurnEvent::RenewStruck`), and so is the reconnection.

use super::churn::Cluster;
use crate::faults::{ChurnEvent, Fault, RENEW_CUT_AFTER_PAUSE_MS_MAX};
use crate::history::{Event, EventKind, Reader};
use crate::machine::net::Addr;
use fencelock::service::ClientReply;
use fencelock::{ClientId, NodeId};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The shortest time the links stay cut after the victim's pause ends.
const CUT_AFTER_PAUSE_MS_MIN: u64 = 50;

/// A renew a server answered `Renewed`, as the history recorded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Renewal {
    node: NodeId,
    client: ClientId,
    at_us: u64,
}

impl Renewal {
    /// The renewal `event` records, if it is one.
    fn of(event: &Event) -> Option<Renewal> {
        match event.kind {
            EventKind::Replied { node, client, reply: ClientReply::Renewed { .. }, .. } => {
                Some(Renewal { node, client, at_us: event.at_us })
            }
            _ => None,
        }
    }
}

pub(super) struct RenewStrike {
    rng: ChaCha8Rng,
    /// The episode lasts until this true instant (0: none started).
    until_us: u64,
    strikes_left: u64,
    pause_ms: u64,
    /// The side cut off now, and the instant its links come back.
    cut: Option<(Vec<Addr>, u64)>,
}

impl RenewStrike {
    pub(super) fn new(seed: u64) -> RenewStrike {
        RenewStrike { rng: crate::streams::renew_strike(seed), until_us: 0, strikes_left: 0, pause_ms: 0, cut: None }
    }

    fn watching(&self, now_us: u64) -> bool {
        now_us < self.until_us && self.strikes_left > 0
    }

    /// Whether the family reads every event as it is recorded (an episode is on).
    pub(super) fn listens(&self, now_us: u64) -> bool {
        self.watching(now_us)
    }

    /// The next instant the family must act whatever is recorded: the
    /// episode's end, the cut side's reconnection.
    pub(super) fn next_wake_us(&self, now_us: u64) -> Option<u64> {
        let end = self.watching(now_us).then_some(self.until_us);
        let back = self.cut.as_ref().map(|(_, at_us)| *at_us);
        [end, back].into_iter().flatten().min()
    }

    /// Starts an episode: renewals answered from now on are watched.
    pub(super) fn start(&mut self, now_us: u64, fault: &Fault, cluster: &impl Cluster) {
        let Fault::RenewStrikes { for_ms, strikes, pause_ms } = *fault else {
            unreachable!("a renew-strike episode starts from its fault")
        };
        self.until_us = now_us + for_ms * 1_000;
        self.strikes_left = strikes;
        self.pause_ms = pause_ms;
        cluster.follow_history(Reader::RenewStrikes);
    }

    /// Reconnects the side whose time is up, then strikes the first leader
    /// that renewed a lease since the last step, if no side is cut off.
    pub(super) fn step(&mut self, now_us: u64, cluster: &mut impl Cluster) {
        if let Some((side, at_us)) = self.cut.take() {
            if at_us <= now_us {
                cluster.reconnect(&side);
                cluster.note(ChurnEvent::Reconnected { addrs: side });
            } else {
                self.cut = Some((side, at_us));
            }
        }
        if !self.watching(now_us) {
            // Renewals before the next episode are not its own.
            cluster.unfollow_history(Reader::RenewStrikes);
            return;
        }
        let renewals = cluster.read_history(Reader::RenewStrikes, Renewal::of);
        if self.cut.is_some() {
            return;
        }
        let leaders = cluster.live_leaders();
        let victim = renewals.into_iter().find_map(|renewal: Renewal| {
            let term = leaders.iter().find(|(node, _)| *node == renewal.node).map(|(_, term)| *term)?;
            Some((renewal, term))
        });
        if let Some((renewal, term)) = victim {
            let cut_ms = self.pause_ms + self.rng.gen_range(CUT_AFTER_PAUSE_MS_MIN..=RENEW_CUT_AFTER_PAUSE_MS_MAX);
            let (node, client) = (renewal.node, renewal.client);
            let after_us = now_us - renewal.at_us;
            cluster.note(ChurnEvent::RenewStruck { node, client, term, after_us, pause_ms: self.pause_ms, cut_ms });
            let side = vec![Addr::Server(node), Addr::Client(client)];
            cluster.cut_off(&side);
            cluster.pause(node, self.pause_ms);
            self.cut = Some((side, now_us + cut_ms * 1_000));
            self.strikes_left -= 1;
        }
    }

    /// A heal of the network ends the cut: the family does not reconnect
    /// what the plan already did.
    pub(super) fn yield_to(&mut self, fault: &Fault) {
        if matches!(fault, Fault::Heal) {
            self.cut = None;
        }
    }
}
