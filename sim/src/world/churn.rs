//! Leader churn at run time ([`crate::faults::Fault::LeaderChurn`], planned
//! in `faults/churn.rs`): while it lasts, the supervisor watches the servers'
//! reported roles and strikes down every leader of a new term, then brings
//! it back `down_ms` later. The first victim is whoever leads when the churn
//! starts. Every strike, and what it did, is in the history.
//!
//! A victim is struck either early (up to `within_ms` after it is seen
//! leading: its first appends are on some followers and not others) or
//! within a watch step of applying its first entries in office (a poison
//! entry: it has just counted something committed, and the append that
//! would spread its own term's entry is still on the wire). A strike either
//! crashes the server (packets it sent still arrive) or pulls its cable
//! (they are lost, [`crate::net::Net::unplug`]). A crash loop can take every
//! server but one away at once; they come back on their own, unless a
//! planned fault takes the victim over first (a restart, a restore, a crash,
//! a heal of the network): from then on the plan owns it, not the churn.
//! The length of a torn write is drawn from the supervisor's stream, as for
//! every crash.
//!
//! Victims and instants depend on the run (who wins which election), so they
//! cannot be planned ahead; they are drawn from the churn's own stream and so
//! still depend on the seed and model alone.

use super::{now_us, Supervisor};
use crate::context::stream_seed;
use crate::faults::Fault;
use crate::history::{Actor, EventKind};
use crate::net::Addr;
use fencelock::raft::Role;
use fencelock::{NodeId, Term};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Separates the churn's stream from the run's other streams.
const STREAM_CHURN: u64 = 0x6368_7572_0000_0005;

/// How often a churning supervisor looks at roles and applies (madsim's finest sleep).
const WATCH_US: u64 = 1_000;

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

pub(crate) struct Churn {
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
    pub(crate) fn new(seed: u64) -> Churn {
        Churn {
            rng: ChaCha8Rng::seed_from_u64(stream_seed(seed, STREAM_CHURN, 0, 0)),
            until_us: 0,
            within_us: 0,
            down_us: 0,
            seen_term: Term(0),
            doomed: None,
            away: BTreeMap::new(),
        }
    }

    /// The next instant the supervisor must act for the churn, if any.
    pub(crate) fn next_wake_us(&self, now_us: u64) -> Option<u64> {
        let watch = now_us < self.until_us || self.doomed.is_some_and(|d| d.at_first_apply);
        let watching = watch.then_some(now_us + WATCH_US);
        let doomed = self.doomed.map(|d| d.strike_us);
        let back = self.away.values().map(|(at_us, _)| *at_us).min();
        [watching, doomed, back].into_iter().flatten().min()
    }
}

impl Supervisor {
    /// Starts a churn stretch; the current leader is its first victim.
    pub(crate) fn start_churn(&mut self, for_ms: u64, within_ms: u64, down_ms: u64) {
        let churn = &mut self.churn;
        churn.until_us = now_us() + for_ms * 1_000;
        churn.within_us = within_ms * 1_000;
        churn.down_us = down_ms * 1_000;
        churn.seen_term = Term(0);
        churn.doomed = None;
    }

    /// Does whatever the churn owes at this instant: victims due back, the
    /// doomed leader's strike, and dooming a newly elected leader.
    pub(crate) fn churn_step(&mut self) {
        let now = now_us();
        let due: Vec<(NodeId, Away)> = self
            .churn
            .away
            .iter()
            .filter(|(_, (at_us, _))| *at_us <= now)
            .map(|(node, (_, away))| (*node, *away))
            .collect();
        for (node, away) in due {
            self.churn.away.remove(&node);
            match away {
                Away::Crashed => self.restart(Actor::Server(node)),
                Away::Unplugged => {
                    self.ctx.net.plug(Addr::Server(node));
                    self.ctx.record(EventKind::Fault { what: format!("churn: plug {node} back in") });
                }
            }
        }
        if let Some(doomed) = self.churn.doomed {
            let applied = doomed.at_first_apply && self.applies(doomed.node) > doomed.applies_seen;
            if applied || doomed.strike_us <= now {
                self.churn.doomed = None;
                self.strike(doomed, applied, now);
            }
        }
        if now < self.churn.until_us && self.churn.doomed.is_none() {
            if let Some((node, term)) = self.newest_leader().filter(|(_, term)| *term > self.churn.seen_term) {
                self.churn.seen_term = term;
                let rng = &mut self.churn.rng;
                let at_first_apply = rng.gen_bool(AT_FIRST_APPLY);
                let after_us =
                    if at_first_apply { FIRST_APPLY_WAIT_US } else { rng.gen_range(0..=self.churn.within_us) };
                let applies_seen = self.applies(node);
                let doomed =
                    Doomed { node, term, seen_us: now, strike_us: now + after_us, applies_seen, at_first_apply };
                self.churn.doomed = Some(doomed);
            }
        }
    }

    /// Crashes the doomed leader or pulls its cable, if it still leads and
    /// another server stays up and connected.
    fn strike(&mut self, doomed: Doomed, applied: bool, now: u64) {
        let nodes = usize::from(self.ctx.model.nodes);
        let unplugged = self.churn.away.values().filter(|(_, away)| *away == Away::Unplugged).count();
        let held = self.churn.away.contains_key(&doomed.node);
        if held || !self.leads(doomed.node, doomed.term) || self.servers_down() + unplugged + 1 >= nodes {
            return;
        }
        let (node, term) = (doomed.node, doomed.term);
        let crash = self.churn.rng.gen_bool(CRASH_SHARE);
        let torn = self.churn.rng.gen_bool(TORN_SHARE);
        let (verb, away) = if crash { ("crash", Away::Crashed) } else { ("unplug", Away::Unplugged) };
        let when = if applied { ", as it applied its first entries" } else { "" };
        let seen_ms = (now - doomed.seen_us) / 1_000;
        let what = format!("churn: {verb} {node}, leader of {term}, {seen_ms} ms after it was seen leading{when}");
        self.ctx.record(EventKind::Fault { what });
        if crash {
            self.crash_server(node, torn);
        } else {
            self.ctx.net.unplug(Addr::Server(node));
        }
        let previous = self.churn.away.insert(node, (now + self.churn.down_us, away));
        assert!(previous.is_none(), "churn: struck {node}, which it already holds away");
        let away_now = self.servers_down() + unplugged + usize::from(away == Away::Unplugged);
        assert!(away_now < nodes, "churn: {away_now} servers away of {nodes}");
    }

    /// Sleeps until `at_us`, doing the churn's work on the way.
    pub(crate) async fn sleep_until_us(&mut self, at_us: u64) {
        loop {
            let now = now_us();
            let wake_us = self.churn.next_wake_us(now).map_or(at_us, |w| w.min(at_us));
            super::sleep_until_us(wake_us).await;
            self.churn_step();
            if now_us() >= at_us {
                return;
            }
        }
    }

    /// A planned fault takes over the victims it touches: a crash, restart
    /// or restore of a crashed victim, a whole-cluster restore (every crashed
    /// victim), a heal of the network (every pulled cable). The churn forgets
    /// them, so it never restarts or plugs in what the plan already brought
    /// back or took down again.
    pub(crate) fn churn_yield_to(&mut self, fault: &Fault) {
        let away = &mut self.churn.away;
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

    fn applies(&self, node: NodeId) -> u64 {
        self.ctx.shared().applies.get(&node).copied().unwrap_or(0)
    }

    fn servers_down(&self) -> usize {
        self.down.keys().filter(|actor| matches!(actor, Actor::Server(_))).count()
    }

    /// The live server that reported itself leader in the highest term.
    fn newest_leader(&self) -> Option<(NodeId, Term)> {
        let shared = self.ctx.shared();
        shared
            .roles
            .iter()
            .filter(|(node, soft)| soft.role == Role::Leader && !self.down.contains_key(&Actor::Server(**node)))
            // A victim with its cable pulled may not know yet that it was deposed.
            .filter(|(node, _)| !self.churn.away.contains_key(node))
            .max_by_key(|(_, soft)| soft.term)
            .map(|(node, soft)| (*node, soft.term))
    }

    fn leads(&self, node: NodeId, term: Term) -> bool {
        let alive = !self.down.contains_key(&Actor::Server(node));
        let shared = self.ctx.shared();
        alive && shared.roles.get(&node).is_some_and(|soft| soft.role == Role::Leader && soft.term == term)
    }
}
