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
//! as Porcupine does it), and each key in segments as the run goes: cut
//! where every operation sent is settled and the next is sent after the
//! last answer, each segment starting from every state the one before can
//! end in (`carry.rs`), so a run of any length is judged in pieces of the
//! size of its busiest stretch. Each search is bounded; a key that hits a
//! bound is counted as `unknown`, never passed. Tokens join the keys in `tokens.rs`: a token
//! told to two requests, or a token below one a client was told before the
//! request was sent, whatever the keys. A violation names the smallest window
//! of a key's operations with no linearization (`window.rs`) and prints it.

mod carry;
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
use carry::Carry;
use fencelock::service::ClientReply;
use fencelock::Key;
use fencelock::NodeId;
use ops::{Call, Op, OpLog, Segment};
use search::{search_from, Found, Limits};
use spec::State;
use std::collections::{BTreeMap, VecDeque};

/// One million: rates are in parts per million.
const PPM_ONE: u128 = 1_000_000;
/// A jump this small between a clock's old and new mapping is rounding, not a step.
const STEP_TOLERANCE_US: i128 = 100;
/// Servers count lease time in whole local milliseconds: a deadline can be
/// reached up to this much before the lease's exact length has passed.
const LEASE_ROUNDING_US: u64 = 1_000;
/// The operations of a key's last segments kept to show a violation's
/// window (a segment's own are always kept while it is judged).
const TAIL_OPS: usize = 64;

/// The stretches of bad clocks held before the first sifting (`forget_bad_clocks`).
const BAD_CLOCK_SIFT_MIN: usize = 64;

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
    /// Each key's judgment so far.
    judged: BTreeMap<Key, KeyJudgment>,
    clocks: BTreeMap<NodeId, ClockMap>,
    /// Since when each server clock runs beyond the drift bound.
    beyond_since: BTreeMap<NodeId, u64>,
    /// True-time stretches in which some server clock was stepped or beyond
    /// the bound: a lease may end early there. Those that end before the
    /// earliest an operation still to be judged may ask of are forgotten
    /// (`forget_bad_clocks`).
    bad_clock: Vec<(u64, u64)>,
    /// `bad_clock` is sifted when it holds this many stretches.
    bad_clock_sift_at: usize,
}

impl LinearizableChecker {
    pub fn new(config: &CheckConfig) -> LinearizableChecker {
        LinearizableChecker {
            drift_ppm_max: config.drift_ppm_max,
            lease_ms: config.lease_ms,
            limits: Limits::STANDARD,
            log: OpLog::new(Limits::STANDARD.ops_per_search_max, config.lease_ms),
            judged: BTreeMap::new(),
            clocks: BTreeMap::new(),
            beyond_since: BTreeMap::new(),
            bad_clock: Vec::new(),
            bad_clock_sift_at: BAD_CLOCK_SIFT_MIN,
        }
    }

    /// The family with other search bounds (a test's).
    #[cfg(test)]
    pub(crate) fn with_limits(config: &CheckConfig, limits: Limits) -> LinearizableChecker {
        let log = OpLog::new(limits.ops_per_search_max, config.lease_ms);
        LinearizableChecker { limits, log, ..LinearizableChecker::new(config) }
    }

    /// The family judging each segment as soon as it may be, not only once
    /// a key holds many operations (a test's).
    #[cfg(test)]
    pub(crate) fn eager(config: &CheckConfig) -> LinearizableChecker {
        let log = OpLog::eager(Limits::STANDARD.ops_per_search_max, config.lease_ms);
        LinearizableChecker { log, ..LinearizableChecker::new(config) }
    }

    /// The family judging each key whole, in one search (a test's yardstick for the segments).
    #[cfg(test)]
    pub(crate) fn uncut(config: &CheckConfig) -> LinearizableChecker {
        let log = OpLog::uncut(Limits::STANDARD.ops_per_search_max, config.lease_ms);
        LinearizableChecker { log, ..LinearizableChecker::new(config) }
    }

    /// The operations the family holds now: those not judged yet, and those kept for windows.
    #[cfg(test)]
    pub(crate) fn ops_held(&self) -> usize {
        self.log.ops_held()
            + self.judged.values().map(|j| j.tail.iter().map(|(_, ops)| ops.len()).sum::<usize>()).sum::<usize>()
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
        if self.bad_clock.len() >= self.bad_clock_sift_at {
            self.forget_bad_clocks(at_us);
        }
    }

    /// Forgets the stretches of bad clocks no judgment can ask of again:
    /// every operation judged from now on was sent at or after the earliest
    /// one held, or `now_us`, and asks of none that ended before `excuse_from_us` of that.
    fn forget_bad_clocks(&mut self, now_us: u64) {
        let sent_us = self.log.earliest_held_us().map_or(now_us, |held_us| held_us.min(now_us));
        let asked_from_us = self.excuse_from_us(sent_us);
        self.bad_clock.retain(|(_, end_us)| *end_us >= asked_from_us);
        self.bad_clock_sift_at = (2 * self.bad_clock.len()).max(BAD_CLOCK_SIFT_MIN);
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

    /// The earliest end a stretch of bad clocks may have and still excuse
    /// an answer to a request first sent at `sent_us`: a leader's deadline
    /// was set at most about a lease before its answer, so two leases before the send.
    fn excuse_from_us(&self, sent_us: u64) -> u64 {
        sent_us.saturating_sub(2 * self.lease_ms * 1_000)
    }

    fn set_lease_end(&self, op: &mut Op) {
        let lease_ms = match (&op.call, op.answer) {
            (Call::Acquire { lease_ms, .. }, _) => *lease_ms,
            (_, Some(ClientReply::Renewed { lease_ms })) => lease_ms,
            _ => self.lease_ms,
        };
        op.clock_excuse = self.bad_clock_between(self.excuse_from_us(op.inv_us), op.resp_us).is_some();
        op.lease_end_min_us = self.lease_end_min_us(op.inv_us, lease_ms);
    }
}

/// One key's judgment, segment by segment.
#[derive(Debug)]
struct KeyJudgment {
    /// What the segments judged so far leave to the next.
    carry: Carry,
    /// The last segments' own operations (at most about [`TAIL_OPS`]), each
    /// with what it started from.
    tail: VecDeque<(Carry, Vec<Op>)>,
    /// Whether the tail starts at the key's first operation.
    tail_from_start: bool,
    /// The state before the key's first operation.
    first: State,
    /// An acquire that waits was never answered in a segment judged.
    waiter_given_up: bool,
    /// A segment hit a bound: the key can no longer pass.
    undecided: bool,
    /// The key's violation; nothing more of it is judged.
    failed: Option<Violation>,
    steps_max: u64,
    /// Client operations (see `KeyOps::client_ops`).
    client_ops: u64,
}

impl KeyJudgment {
    fn new(restored_before_us: Option<u64>) -> KeyJudgment {
        let first = restored_before_us.map_or(State::free(), State::unknown);
        KeyJudgment {
            carry: Carry::start(first),
            tail: VecDeque::new(),
            tail_from_start: true,
            first,
            waiter_given_up: false,
            undecided: false,
            failed: None,
            steps_max: 0,
            client_ops: 0,
        }
    }

    /// The operations a violation's window is looked for in: copies of
    /// what the tail started with, the tail's own, then `own` (the segment
    /// judged now); and the state before them (unknown unless they start at
    /// the key's start).
    fn window_list(&self, own: &[Op]) -> (Vec<Op>, State) {
        let entry = self.tail.front().map_or(&self.carry, |(carry, _)| carry);
        let earlier = || self.tail.iter().flat_map(|(_, ops)| ops.iter());
        let t_us = earlier().chain(own).next().map_or(0, |op| op.inv_us);
        let total = earlier().count() + own.len();
        let (mut list, _) = entry.copies(t_us, total as u64 + 1);
        list.extend(earlier().cloned());
        list.extend(own.iter().cloned());
        let first = if self.tail_from_start { self.first } else { State::unknown(0) };
        (list, first)
    }

    /// Keeps `own` (started from `carry`) in the tail, dropping the oldest past [`TAIL_OPS`].
    fn remember(&mut self, carry: Carry, own: Vec<Op>) {
        self.tail.push_back((carry, own));
        while self.tail.len() > 1 && self.tail.iter().map(|(_, ops)| ops.len()).sum::<usize>() > TAIL_OPS {
            self.tail.pop_front();
            self.tail_from_start = false;
        }
    }
}

fn violation(key: &fencelock::Key, list: &[Op], first: State, limits: Limits) -> Violation {
    let window = window::smallest_window(list, first, limits);
    let (i, j) = window.unwrap_or((0, list.len()));
    // Dated when the last of its answers came (a pending operation: when
    // it was sent): before then an answer still out could have fitted. The
    // operations are in the order they were sent, so the last one listed
    // need not be the last answered.
    let known_us = |op: &Op| if op.resp_us == u64::MAX { op.inv_us } else { op.resp_us };
    let at_us = list[i..j].iter().map(known_us).max().unwrap_or(0);
    let clients: Vec<_> = list[i..j].iter().filter(|op| op.call != Call::Restore).map(|op| op.client).collect();
    // A window shown to fail on its own fails whatever came before it;
    // without one, the operations fail after what the earlier ones left.
    let after_earlier = if window.is_some() { "" } else { " after what the key's earlier operations left" };
    let detail = format!(
        "the answers on {key} have no linearization: these {} operations cannot take effect one at a time \
         inside their intervals in any order the lock's specification allows{after_earlier} (leases end no \
         earlier than lease / (1 + drift bound) after the first send):\n{}",
        j - i,
        window::table(list, i, j)
    );
    Violation::new(Property::Linearizable, at_us, detail).clients(&clients)
}

impl LinearizableChecker {
    /// Takes one event; this family needs nothing of the applied state.
    pub(crate) fn observe_event(&mut self, event: &Event) {
        self.log.observe(event.at_us, &event.kind);
        for (key, segment) in self.log.take_ready(event.at_us) {
            self.judge(key, segment);
        }
        if let EventKind::Clock { actor: Actor::Server(node), local_us, rate_ppm, within_bound } = &event.kind {
            self.on_clock(event.at_us, *node, *local_us, *rate_ppm, *within_bound);
        }
    }

    /// Judges a key's next segment from what the segments before it left.
    fn judge(&mut self, key: Key, mut segment: Segment) {
        for op in segment.ops.values_mut() {
            self.set_lease_end(op);
        }
        let restored_before_us = segment.restored_before_us;
        let judgment = self.judged.entry(key.clone()).or_insert_with(|| KeyJudgment::new(restored_before_us));
        if judgment.failed.is_some() {
            return;
        }
        let own =
            ops::searched(&key, segment.ops.into_values().collect(), &segment.restores_at_us, judgment.waiter_given_up);
        // A segment past the bound may keep no operation at all (all answered).
        let Some(t_us) = own.first().map(|op| op.inv_us).or(segment.next_us.filter(|_| segment.trimmed)) else {
            judgment.undecided |= segment.trimmed;
            return;
        };
        // Two copies of a class placed with nothing between them act as one.
        let uses = own.len() as u64 + 1;
        let (mut list, starts) = judgment.carry.copies(t_us, uses);
        let copies = list.len();
        list.extend(own.iter().cloned());
        let (search, ends) = if segment.trimmed {
            (search::Search { found: Found::Unknown, steps: 0 }, Vec::new())
        } else {
            search_from(&list, &starts, self.limits, segment.next_us.is_some())
        };
        judgment.steps_max = judgment.steps_max.max(search.steps);
        judgment.waiter_given_up |= own.iter().any(|op| {
            matches!(op.call, Call::Acquire { wait_ms, .. } if wait_ms > 0)
                && op.answer.is_none()
                && op.resp_us == u64::MAX
        });
        let next_us = segment.next_us.unwrap_or(u64::MAX);
        let carry = match search.found {
            Found::Linearizable => judgment.carry.after(&list, copies, uses, &ends, next_us).unwrap_or_else(|| {
                judgment.undecided = true;
                judgment.carry.anything(next_us, &own)
            }),
            Found::Unknown => {
                judgment.undecided = true;
                judgment.carry.anything(next_us, &own)
            }
            Found::NoLinearization => {
                let (window_list, first) = judgment.window_list(&own);
                judgment.failed = Some(violation(&key, &window_list, first, self.limits));
                return;
            }
        };
        let entered = std::mem::replace(&mut judgment.carry, carry);
        judgment.remember(entered, own);
    }
}

impl Family for LinearizableChecker {
    fn observe(&mut self, _ctx: &Context, _facts: &Facts, event: &Event, _report: &mut Report) {
        self.observe_event(event);
    }

    /// Judges what is left of every key, and reports what the token checks across keys found.
    fn finish(&mut self, _ctx: &Context, report: &mut Report) {
        for (key, key_ops) in self.log.take_keys() {
            let client_ops = key_ops.client_ops;
            let segments: Vec<Segment> = key_ops.segments().collect();
            // What one search takes is searched at once (it may stop at the first linearization).
            let ops: u64 = segments.iter().map(|segment| segment.client_ops).sum();
            let trimmed = segments.iter().any(|segment| segment.trimmed);
            if ops <= self.limits.ops_per_search_max as u64 && !trimmed {
                self.judge(key.clone(), Segment::joined(segments));
            } else {
                for segment in segments {
                    self.judge(key.clone(), segment);
                }
            }
            if let Some(judgment) = self.judged.get_mut(&key) {
                judgment.client_ops = client_ops;
            }
        }
        for violation in self.log.tokens().take_found() {
            report.push(violation);
        }
        for (key, mut judgment) in std::mem::take(&mut self.judged) {
            let counters = &mut report.counters;
            counters.linearizable_keys += 1;
            counters.linearizable_ops_per_key.push(judgment.client_ops);
            counters.linearizable_steps_max = counters.linearizable_steps_max.max(judgment.steps_max);
            if let Some(violation) = judgment.failed.take() {
                report.push(violation);
            } else if judgment.undecided {
                let undecided = Undecided { key, operations: judgment.client_ops, steps: judgment.steps_max };
                report.counters.linearizable_undecided.push(undecided);
            }
        }
    }
}
