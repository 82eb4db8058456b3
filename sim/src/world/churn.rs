//! Leader churn at run time ([`crate::faults::Fault::LeaderChurn`], planned in
//! `faults/churn.rs`): while it lasts, the supervisor watches the servers'
//! reported roles and crashes every leader of a new term a few milliseconds
//! after it takes office, then restarts it. The first victim is whoever leads
//! when the churn starts. Every crash and its instant are in the history.
//!
//! Victims and instants depend on the run (who wins which election), so they
//! cannot be planned ahead; they are drawn from the churn's own stream and so
//! still depend on the seed and model alone.

use super::{now_us, Supervisor};
use crate::context::stream_seed;
use crate::history::{Actor, EventKind};
use fencelock::raft::Role;
use fencelock::{NodeId, Term};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;

/// Separates the churn's stream from the run's other streams.
const STREAM_CHURN: u64 = 0x6368_7572_0000_0005;

/// How often a churning supervisor looks for a new leader (madsim's finest sleep).
const WATCH_US: u64 = 1_000;

/// Churn crashes a server sends toward a restart at most this many at once (a
/// server is never down twice, so the set stays below the cluster size).
const CHURNED_MAX: usize = 9;

#[derive(Clone, Copy)]
struct Doomed {
    node: NodeId,
    term: Term,
    seen_us: u64,
    crash_us: u64,
}

pub(crate) struct Churn {
    rng: ChaCha8Rng,
    /// Churn lasts until this true instant (0: never started).
    until_us: u64,
    within_us: u64,
    down_us: u64,
    /// Leaders of terms up to this one have been seen (and perhaps doomed).
    seen_term: Term,
    /// The leader to crash: who, the term it must still lead, when it was
    /// first seen leading and when it crashes.
    doomed: Option<Doomed>,
    /// Churned servers and the instant each comes back.
    restarts: BTreeSet<(u64, NodeId)>,
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
            restarts: BTreeSet::new(),
        }
    }

    /// The next instant the supervisor must act for the churn, if any.
    pub(crate) fn next_wake_us(&self, now_us: u64) -> Option<u64> {
        let watching = (now_us < self.until_us && self.doomed.is_none()).then_some(now_us + WATCH_US);
        let doomed = self.doomed.map(|d| d.crash_us);
        let restart = self.restarts.first().map(|(at_us, _)| *at_us);
        [watching, doomed, restart].into_iter().flatten().min()
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

    /// Does whatever the churn owes at this instant: restarts that are due,
    /// the doomed leader's crash, and dooming a newly elected leader.
    pub(crate) fn churn_step(&mut self) {
        let now = now_us();
        while let Some(&(at_us, node)) = self.churn.restarts.first() {
            if at_us > now {
                break;
            }
            self.churn.restarts.pop_first();
            self.restart(Actor::Server(node));
        }
        if let Some(Doomed { node, term, seen_us, .. }) = self.churn.doomed.filter(|d| d.crash_us <= now) {
            self.churn.doomed = None;
            if self.leads(node, term) && self.servers_down() < self.ctx.model.minority() {
                let seen_ms = (now - seen_us) / 1_000;
                let what = format!("churn: crash {node}, leader of {term}, {seen_ms} ms after it was seen leading");
                self.ctx.record(EventKind::Fault { what });
                let torn = self.churn.rng.gen_bool(0.3);
                self.crash_server(node, torn);
                assert!(self.churn.restarts.len() < CHURNED_MAX, "churn: too many servers down");
                self.churn.restarts.insert((now + self.churn.down_us, node));
            }
        }
        if now < self.churn.until_us && self.churn.doomed.is_none() {
            if let Some((node, term)) = self.newest_leader().filter(|(_, term)| *term > self.churn.seen_term) {
                self.churn.seen_term = term;
                let after_us = self.churn.rng.gen_range(0..=self.churn.within_us);
                self.churn.doomed = Some(Doomed { node, term, seen_us: now, crash_us: now + after_us });
            }
        }
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
            .max_by_key(|(_, soft)| soft.term)
            .map(|(node, soft)| (*node, soft.term))
    }

    fn leads(&self, node: NodeId, term: Term) -> bool {
        let alive = !self.down.contains_key(&Actor::Server(node));
        let shared = self.ctx.shared();
        alive && shared.roles.get(&node).is_some_and(|soft| soft.role == Role::Leader && soft.term == term)
    }
}
