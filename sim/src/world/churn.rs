//! Leader churn at run time ([`crate::faults::Fault::LeaderChurn`], planned
//! in `faults/churn.rs`): while it lasts, the supervisor watches the servers'
//! reported roles and strikes down every leader of a new term, then brings
//! it back `down_ms` later. The first victim is whoever leads when the churn
//! starts. Every strike, and what it did, is in the history.
//!
//! A victim is struck either early (up to `within_ms` after it is seen
//! leading: its first appends are on some followers and not others) or
//! in the instant it applies its first entries in office (a poison
//! entry: it has just counted something committed, and the append that
//! would spread its own term's entry is still on the wire). A strike either
//! crashes the server (packets it sent still arrive) or pulls its cable
//! (they are lost, [`crate::machine::net::Net::unplug`]). A crash loop can take every
//! server but one away at once; they come back on their own, unless a
//! planned fault takes the victim over first (a restart, a restore, a crash,
//! a heal of the network): from then on the plan owns it, not the churn.
//! The length of a torn write is drawn from the supervisor's stream, as for
//! every crash.
//!
//! Victims and instants depend on the run (who wins which election), so they
//! cannot be planned ahead; they are drawn from the churn's own stream and so
//! still depend on the seed and model alone.

use crate::faults::{ChurnEvent, Fault};
use crate::history::{Event, Reader};
use crate::machine::disk::NodeImage;
use crate::machine::net::Addr;
use fencelock::{NodeId, Term};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// What the churn sees of the cluster and what it does to it: the
/// supervisor, seen from here.
pub(super) trait Cluster {
    fn nodes(&self) -> usize;
    /// Entries `node` has applied so far (commands and no-ops).
    fn applies(&self, node: NodeId) -> u64;
    fn servers_down(&self) -> usize;
    /// Live servers that last reported themselves leader, in node order.
    fn live_leaders(&self) -> Vec<(NodeId, Term)>;
    /// Whether `node` is up and last reported itself leader of `term`.
    fn leads(&self, node: NodeId, term: Term) -> bool;
    fn crash(&mut self, node: NodeId, torn: bool);
    fn restart(&mut self, node: NodeId);
    fn unplug(&mut self, node: NodeId);
    fn plug(&mut self, node: NodeId);
    /// Servers whose cable is pulled, by whichever family pulled it.
    fn servers_unplugged(&self) -> usize;
    /// Records what the churn did.
    fn note(&self, event: ChurnEvent);
    /// Whether `node` is running (not crashed and not restarted yet).
    fn is_up(&self, node: NodeId) -> bool;
    /// Turns the servers' reports of their acknowledgements on or off (`world/acks.rs`).
    fn watch_acks(&mut self, on: bool);
    fn acks_watched(&self) -> bool;
    /// The acknowledgements servers reported since the last call, oldest first.
    fn take_acks(&mut self) -> Vec<crate::nodes::context::AckSent>;
    /// `reader` follows the history from the next event on: how the renew,
    /// grant and fence strikes follow a run as it is recorded.
    fn follow_history(&self, reader: Reader);
    fn unfollow_history(&self, reader: Reader);
    /// What `pick` takes from each event `reader` has not read yet, oldest first.
    fn read_history<T>(&self, reader: Reader, pick: impl Fn(&Event) -> Option<T>) -> Vec<T>;
    /// Crashes the resource (whatever it has not synced is lost).
    fn crash_resource(&mut self);
    fn restart_resource(&mut self);
    /// Whether the resource has a backup to be restored from.
    fn resource_backed_up(&self) -> bool;
    /// Stops the resource, puts its last backup back and starts it again
    /// (nothing done without a backup).
    fn restore_resource_from_backup(&mut self);
    /// Turns the servers' reports of the (pre-)votes they grant on or off (`world/votes.rs`).
    fn watch_votes(&mut self, on: bool);
    fn votes_watched(&self) -> bool;
    /// The (pre-)vote grants servers reported since the last call, oldest first.
    fn take_votes(&mut self) -> Vec<crate::nodes::context::VoteSent>;
    /// Cuts the links between `addr` and each of `others`, both ways.
    fn cut_between(&mut self, addr: Addr, others: &[Addr]);
    /// Holds the link from `from` to `to` until `until_us` (`Net::hold_link`).
    fn hold_link(&mut self, from: Addr, to: Addr, until_us: u64);
    /// Undoes [`Cluster::cut_between`].
    fn reconnect_between(&mut self, addr: Addr, others: &[Addr]);
    /// Cuts every link between `side` and the servers not on it, both ways.
    fn cut_off(&mut self, side: &[Addr]);
    /// Undoes [`Cluster::cut_off`] of the same side.
    fn reconnect(&mut self, side: &[Addr]);
    /// A stop-the-world stall of `node` for `ms`.
    fn pause(&mut self, node: NodeId, ms: u64);
    /// Makes every fsync of `node`'s disk take `fsync_us` (0: the normal latency again).
    fn set_fsync_us(&mut self, node: NodeId, fsync_us: u64);
    /// A copy of `node`'s durable disk.
    fn back_up(&self, node: NodeId) -> NodeImage;
    /// Restarts `node` from `image`, a backup taken at `backup_at_us`, marked
    /// as restored; false (nothing done) when the operator's rule forbids it.
    fn restore_from_backup(&mut self, node: NodeId, backup_at_us: u64, image: NodeImage) -> bool;
}

/// Share of victims struck as they first apply rather than early.
const AT_FIRST_APPLY: f64 = 0.4;

/// A victim waiting for its first apply is struck anyway this long after it was seen leading.
const FIRST_APPLY_WAIT_US: u64 = 50_000;

/// Share of strikes that crash the server rather than pull its cable.
const CRASH_SHARE: f64 = 0.2;

/// Share of crashes that tear the write in progress.
const TORN_SHARE: f64 = 0.3;

/// What a strike did to a victim, undone when it comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Away {
    Crashed,
    Unplugged,
}

/// The leader to strike next.
#[derive(Clone, Copy)]
struct Doomed {
    node: NodeId,
    /// The term it must still lead when struck.
    term: Term,
    seen_us: u64,
    /// Struck at this instant at the latest.
    strike_us: u64,
    /// Its apply count when seen leading; with `at_first_apply`, any more strikes at once.
    applies_seen: u64,
    at_first_apply: bool,
}

pub(super) struct Churn {
    rng: ChaCha8Rng,
    /// Churn lasts until this true instant (0: never started).
    until_us: u64,
    within_us: u64,
    down_us: u64,
    /// Leaders of terms up to this one have been seen (and perhaps doomed).
    seen_term: Term,
    doomed: Option<Doomed>,
    /// Victims the churn still owns, and the instant each comes back.
    away: BTreeMap<NodeId, (u64, Away)>,
}

impl Churn {
    pub(super) fn new(seed: u64) -> Churn {
        Churn {
            rng: crate::streams::churn(seed),
            until_us: 0,
            within_us: 0,
            down_us: 0,
            seen_term: Term(0),
            doomed: None,
            away: BTreeMap::new(),
        }
    }

    /// Whether the churn looks at every role and apply as it is recorded:
    /// while it lasts, or while a doomed leader waits for its first apply.
    pub(super) fn listens(&self, now_us: u64) -> bool {
        now_us < self.until_us || self.doomed.is_some_and(|d| d.at_first_apply)
    }

    /// The next instant the churn must act whatever is recorded: its end,
    /// the doomed leader's strike, a victim due back.
    pub(super) fn next_wake_us(&self, now_us: u64) -> Option<u64> {
        let end = (now_us < self.until_us).then_some(self.until_us);
        let doomed = self.doomed.map(|d| d.strike_us);
        let back = self.away.values().map(|(at_us, _)| *at_us).min();
        [end, doomed, back].into_iter().flatten().min()
    }

    /// Starts a churn stretch; the current leader is its first victim.
    pub(super) fn start(&mut self, now_us: u64, for_ms: u64, within_ms: u64, down_ms: u64) {
        self.until_us = now_us + for_ms * 1_000;
        self.within_us = within_ms * 1_000;
        self.down_us = down_ms * 1_000;
        self.seen_term = Term(0);
        self.doomed = None;
    }

    /// Does whatever the churn owes at this instant: victims due back, the
    /// doomed leader's strike, and dooming a newly elected leader.
    pub(super) fn step(&mut self, now: u64, cluster: &mut impl Cluster) {
        let due: Vec<(NodeId, Away)> =
            self.away.iter().filter(|(_, (at_us, _))| *at_us <= now).map(|(node, (_, away))| (*node, *away)).collect();
        for (node, away) in due {
            self.away.remove(&node);
            match away {
                Away::Crashed => cluster.restart(node),
                Away::Unplugged => {
                    cluster.plug(node);
                    cluster.note(ChurnEvent::PluggedBack { node });
                }
            }
        }
        if let Some(doomed) = self.doomed {
            let applied = doomed.at_first_apply && cluster.applies(doomed.node) > doomed.applies_seen;
            if applied || doomed.strike_us <= now {
                self.doomed = None;
                self.strike(doomed, applied, now, cluster);
            }
        }
        if now < self.until_us && self.doomed.is_none() {
            if let Some((node, term)) = self.newest_leader(cluster).filter(|(_, term)| *term > self.seen_term) {
                self.seen_term = term;
                let at_first_apply = self.rng.gen_bool(AT_FIRST_APPLY);
                let after_us =
                    if at_first_apply { FIRST_APPLY_WAIT_US } else { self.rng.gen_range(0..=self.within_us) };
                let applies_seen = cluster.applies(node);
                let doomed =
                    Doomed { node, term, seen_us: now, strike_us: now + after_us, applies_seen, at_first_apply };
                self.doomed = Some(doomed);
            }
        }
    }

    /// Crashes the doomed leader or pulls its cable, if it still leads and
    /// another server stays up and connected.
    fn strike(&mut self, doomed: Doomed, applied: bool, now: u64, cluster: &mut impl Cluster) {
        let nodes = cluster.nodes();
        let unplugged = self.away.values().filter(|(_, away)| *away == Away::Unplugged).count();
        let held = self.away.contains_key(&doomed.node);
        if held || !cluster.leads(doomed.node, doomed.term) || cluster.servers_down() + unplugged + 1 >= nodes {
            return;
        }
        let (node, term) = (doomed.node, doomed.term);
        let crash = self.rng.gen_bool(CRASH_SHARE);
        let torn = self.rng.gen_bool(TORN_SHARE);
        let away = if crash { Away::Crashed } else { Away::Unplugged };
        let seen_ms = (now - doomed.seen_us) / 1_000;
        cluster.note(ChurnEvent::Struck { node, term, crashed: crash, seen_ms, at_first_apply: applied });
        if crash {
            cluster.crash(node, torn);
        } else {
            cluster.unplug(node);
        }
        let previous = self.away.insert(node, (now + self.down_us, away));
        assert!(previous.is_none(), "churn: struck {node}, which it already holds away");
        let away_now = cluster.servers_down() + unplugged + usize::from(away == Away::Unplugged);
        assert!(away_now < nodes, "churn: {away_now} servers away of {nodes}");
    }

    /// A planned fault takes over the victims it touches: a crash, restart
    /// or restore of a crashed victim, a whole-cluster restore (every crashed
    /// victim), a heal of the network (every pulled cable). The churn forgets
    /// them, so it never restarts or plugs in what the plan already brought
    /// back or took down again.
    pub(super) fn yield_to(&mut self, fault: &Fault) {
        let away = &mut self.away;
        let owned = |how: Away| move |_: &NodeId, (_, away): &mut (u64, Away)| *away != how;
        match fault {
            Fault::Crash { node, .. } | Fault::Restart { node } | Fault::RestoreNode { node }
                if away.get(node).is_some_and(|(_, how)| *how == Away::Crashed) =>
            {
                away.remove(node);
            }
            Fault::RestoreCluster => away.retain(owned(Away::Crashed)),
            // A pulled cable is a network fault: the heal plugs it back in.
            Fault::Heal => away.retain(owned(Away::Unplugged)),
            _ => {}
        }
    }

    /// The live leader of the highest term, among servers the churn does not
    /// hold away (a victim with its cable pulled may not know yet that it
    /// was deposed).
    fn newest_leader(&self, cluster: &impl Cluster) -> Option<(NodeId, Term)> {
        cluster
            .live_leaders()
            .into_iter()
            .filter(|(node, _)| !self.away.contains_key(node))
            .max_by_key(|(_, term)| *term)
    }
}
