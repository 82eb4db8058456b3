//! `linearizable`: the clients' view of the lock service, judged against a
//! sequential specification that knows true time.
//!
//! Every other family judges what servers did. This one judges only what
//! clients saw: each request from its first send to the answer that settled
//! it (`ops.rs`). The history is linearizable if each operation can be given
//! one instant inside its interval at which it takes effect, in an order the
//! sequential specification of a key (`spec.rs`) allows — where a lease may
//! end by itself, but never before its earliest possible end in true time.
//! That is what a plain mutex model (Jepsen's) cannot say: without a trusted
//! clock every lease looks unsafe. We have one.
//!
//! Keys are judged apart (`search.rs`, Wing & Gong with Lowe's memoization,
//! as Porcupine does it), each bounded; a key that hits a bound is counted
//! as `unknown`, never passed. Tokens join the keys in `tokens.rs`: a token
//! told to two requests, or a token below one a client was told before the
//! request was sent, whatever the keys. A violation names the smallest window
//! of a key's operations with no linearization (`window.rs`) and prints it.

mod ops;
mod search;
mod spec;
mod tokens;
mod window;

#[cfg(test)]
mod tests;

use super::state::{Context, Facts};
use super::{CheckConfig, Family, Property, Report, Undecided, Violation};
use crate::history::{Actor, Event, EventKind};
use fencelock::service::ClientReply;
use fencelock::NodeId;
use ops::{Call, Op, OpLog};
use search::{search, Found, Limits, Search};
use spec::State;
use std::collections::BTreeMap;

/// One million: rates are in parts per million.
const PPM_ONE: u128 = 1_000_000;
/// A jump this small between a clock's old and new mapping is rounding, not a step.
const STEP_TOLERANCE_US: i128 = 100;
/// Servers count lease time in whole local milliseconds: a deadline can be
/// reached up to this much before the lease's exact length has passed.
const LEASE_ROUNDING_US: u64 = 1_000;

/// A server clock's mapping, to tell a step from a rate change.
#[derive(Clone, Copy, Debug)]
struct ClockMap {
    at_us: u64,
    local_us: u64,
    rate_ppm: i64,
}

impl ClockMap {
    fn local_at(&self, true_us: u64) -> i128 {
        let elapsed = i128::from(true_us.saturating_sub(self.at_us));
        i128::from(self.local_us) + (elapsed * (1_000_000 + i128::from(self.rate_ppm))).div_euclid(1_000_000)
    }
}

#[derive(Debug)]
pub(crate) struct LinearizableChecker {
    drift_ppm_max: u64,
    lease_ms: u64,
    limits: Limits,
    log: OpLog,
    clocks: BTreeMap<NodeId, ClockMap>,
    /// Since when each server clock runs beyond the drift bound.
    beyond_since: BTreeMap<NodeId, u64>,
    /// True-time stretches in which some server clock was stepped or beyond
    /// the bound: a lease may end early there.
    bad_clock: Vec<(u64, u64)>,
}

impl LinearizableChecker {
    pub fn new(config: &CheckConfig) -> LinearizableChecker {
        LinearizableChecker {
            drift_ppm_max: config.drift_ppm_max,
            lease_ms: config.lease_ms,
            limits: Limits::STANDARD,
            log: OpLog::new(Limits::STANDARD.ops_per_key_max),
            clocks: BTreeMap::new(),
            beyond_since: BTreeMap::new(),
            bad_clock: Vec::new(),
        }
    }

    /// The family with other search bounds (a test's).
    #[cfg(test)]
    pub(crate) fn with_limits(config: &CheckConfig, limits: Limits) -> LinearizableChecker {
        LinearizableChecker { limits, log: OpLog::new(limits.ops_per_key_max), ..LinearizableChecker::new(config) }
    }

    fn on_clock(&mut self, at_us: u64, node: NodeId, local_us: u64, rate_ppm: i64, within_bound: bool) {
        let map = ClockMap { at_us, local_us, rate_ppm };
        let stepped = self
            .clocks
            .get(&node)
            .is_some_and(|prev| (prev.local_at(at_us) - i128::from(local_us)).abs() > STEP_TOLERANCE_US);
        if stepped {
            self.bad_clock.push((at_us, at_us));
        }
        let beyond = !within_bound || rate_ppm.unsigned_abs() > self.drift_ppm_max;
        match (beyond, self.beyond_since.get(&node).copied()) {
            (true, None) => {
                self.beyond_since.insert(node, at_us);
            }
            (false, Some(since_us)) => {
                self.beyond_since.remove(&node);
                self.bad_clock.push((since_us, at_us));
            }
            _ => {}
        }
        self.clocks.insert(node, map);
    }

    /// The earliest true instant a lease of `lease_ms` that starts no earlier
    /// than `from_us` can end: a lease runs on a server clock no faster than
    /// the drift bound allows, so at least `lease / (1 + ρ)` of true time —
    /// unless a server clock is stepped or beyond the bound meanwhile.
    fn lease_end_min_us(&self, from_us: u64, lease_ms: u64) -> u64 {
        let lease_us = u128::from(lease_ms) * 1_000 * PPM_ONE / (PPM_ONE + u128::from(self.drift_ppm_max));
        let lease_us = u64::try_from(lease_us).unwrap_or(u64::MAX).saturating_sub(LEASE_ROUNDING_US);
        let nominal_us = from_us.saturating_add(lease_us);
        let early = self.bad_clock_between(from_us, nominal_us).map(|start_us| start_us.max(from_us));
        early.unwrap_or(nominal_us)
    }

    /// The start of the first stretch of bad server clocks that overlaps `from_us..=to_us`.
    fn bad_clock_between(&self, from_us: u64, to_us: u64) -> Option<u64> {
        let still_beyond = self.beyond_since.values().map(|since_us| (*since_us, u64::MAX));
        self.bad_clock
            .iter()
            .copied()
            .chain(still_beyond)
            .filter(|(start_us, end_us)| *start_us <= to_us && *end_us >= from_us)
            .map(|(start_us, _)| start_us)
            .min()
    }

    fn set_lease_end(&self, op: &mut Op) {
        let lease_ms = match (&op.call, op.answer) {
            (Call::Acquire { lease_ms, .. }, _) => *lease_ms,
            (_, Some(ClientReply::Renewed { lease_ms })) => lease_ms,
            _ => self.lease_ms,
        };
        // A leader's deadline was set at most about a lease before its answer.
        let since_us = op.inv_us.saturating_sub(2 * self.lease_ms * 1_000);
        op.clock_excuse = self.bad_clock_between(since_us, op.resp_us).is_some();
        op.lease_end_min_us = self.lease_end_min_us(op.inv_us, lease_ms);
    }
}

fn violation(key: &fencelock::Key, list: &[Op], limits: Limits) -> Violation {
    let (i, j) = window::smallest_window(list, limits).unwrap_or((0, list.len()));
    // Dated when the last of its answers came (a pending operation: when
    // it was sent): before then an answer still out could have fitted. The
    // operations are in the order they were sent, so the last one listed
    // need not be the last answered.
    let known_us = |op: &Op| if op.resp_us == u64::MAX { op.inv_us } else { op.resp_us };
    let at_us = list[i..j].iter().map(known_us).max().unwrap_or(0);
    let clients: Vec<_> = list[i..j].iter().filter(|op| op.call != Call::Restore).map(|op| op.client).collect();
    let detail = format!(
        "the answers on {key} have no linearization: these {} operations cannot take effect one at a time \
         inside their intervals in any order the lock's specification allows (leases end no earlier than \
         lease / (1 + drift bound) after the first send):\n{}",
        j - i,
        window::table(list, i, j)
    );
    Violation::new(Property::Linearizable, at_us, detail).clients(&clients)
}

impl LinearizableChecker {
    /// Takes one event; this family needs nothing of the applied state.
    pub(crate) fn observe_event(&mut self, event: &Event) {
        self.log.observe(event.at_us, &event.kind);
        if let EventKind::Clock { actor: Actor::Server(node), local_us, rate_ppm, within_bound } = &event.kind {
            self.on_clock(event.at_us, *node, *local_us, *rate_ppm, *within_bound);
        }
    }
}

impl Family for LinearizableChecker {
    fn observe(&mut self, _ctx: &Context, _facts: &Facts, event: &Event, _report: &mut Report) {
        self.observe_event(event);
    }

    /// Judges every key and the tokens across keys.
    fn finish(&mut self, _ctx: &Context, report: &mut Report) {
        let mut keys = self.log.take_keys();
        for op in keys.values_mut().flat_map(|key| key.ops.values_mut()) {
            self.set_lease_end(op);
        }
        // The grants of every key, in history order: the token checks couple the keys.
        let mut grants: Vec<(u64, &Op)> = keys
            .values()
            .flat_map(|key| key.ops.iter())
            .filter(|(_, op)| ops::granted(op))
            .map(|(number, op)| (*number, op))
            .collect();
        grants.sort_by_key(|(number, _)| *number);
        tokens::check(grants.into_iter().map(|(_, op)| op), report);
        for (key, key_ops) in keys {
            let client_ops = key_ops.client_ops;
            let counters = &mut report.counters;
            counters.linearizable_keys += 1;
            counters.linearizable_ops_per_key.push(client_ops);
            // Past the bound the search does not start (only the key's grants were kept).
            let found = if key_ops.past_bound(self.limits.ops_per_key_max) {
                Search { found: Found::Unknown, steps: 0 }
            } else {
                let list = ops::searched(&key, key_ops.ops.into_values().collect(), self.log.restores_at_us());
                let found = search(&list, State::free(), self.limits);
                if found.found == Found::NoLinearization {
                    report.push(violation(&key, &list, self.limits));
                }
                found
            };
            let counters = &mut report.counters;
            counters.linearizable_steps_max = counters.linearizable_steps_max.max(found.steps);
            if found.found == Found::Unknown {
                let undecided = Undecided { key: key.clone(), operations: client_ops, steps: found.steps };
                report.counters.linearizable_undecided.push(undecided);
            }
        }
    }
}
