//! The checker: reads a run's history and judges every property of SPEC.md by its id.
//!
//! One file per family of properties (TigerBeetle's `*_checker.zig`): Raft
//! (`election-safety`, `apply-agreement`, `commit-durability`), tokens
//! (`token-monotonic`), the protected resource (`fenced-write`,
//! `equal-token`), the lock table (`expire-safety`, `grant-validity`), leases
//! (`lease-exclusion` and exposures) and `liveness`. They share one
//! reconstruction of the applied state ([`state::Context`]), so that a fact
//! such as "which token was issued at this index" is decided in one place.
//!
//! Cheap checks run online in [`Checker::observe`]; checks that need the whole
//! run (pending requests, lost acknowledgements, belief intervals not decided
//! before) run in [`Checker::finish`]. Violations are typed values with the simulated time,
//! the nodes, clients and tokens involved and a sentence a person can act on.

mod availability_checker;
mod bad_clocks;
mod first_entries;
pub(crate) mod index_runs;
mod keys;
mod lease_checker;
mod linearizable;
mod liveness_checker;
mod lock_checker;
pub(crate) mod packed;
mod raft_checker;
mod request_keys;
mod resource_checker;
mod state;
mod token_checker;

#[cfg(test)]
mod testkit;

use crate::history::{Event, EventKind, History};
use crate::model::Model;
use fencelock::{ClientId, NodeId, Token};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

pub use lease_checker::{true_us_reaching, Belief, Cause, Exposure};

pub use fencelock::Property;

/// How long a leader may take to appear after the heal.
pub const LIVENESS_LEADER_BOUND_MS: u64 = 5_000;
/// How much longer than its lease a crashed holder's lock may stay after the heal.
pub const LIVENESS_FREE_BOUND_MS: u64 = 5_000;
/// How long a worker waits for an answer before it sends a request again:
/// a client that lost its leader learns of the new one no sooner.
pub const CLIENT_RETRY_MS: u64 = crate::nodes::worker::REQUEST_TIMEOUT_US / 1_000;

pub use availability_checker::WORK_BUDGET_FACTOR;

/// One broken property, found at one simulated instant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Violation {
    /// The property id of SPEC.md.
    pub property: Property,
    pub at_us: u64,
    pub nodes: Vec<NodeId>,
    pub clients: Vec<ClientId>,
    pub tokens: Vec<Token>,
    /// One sentence: what happened and what it means.
    pub detail: String,
}

impl Violation {
    pub fn new(property: Property, at_us: u64, detail: String) -> Violation {
        Violation { property, at_us, nodes: Vec::new(), clients: Vec::new(), tokens: Vec::new(), detail }
    }

    /// The violation on one line, as a hunt prints it among many: a detail
    /// that goes on over more lines (the `linearizable` window's table) ends
    /// at its first line, saying that `replay` shows the rest.
    pub fn one_line(&self) -> String {
        let text = self.to_string();
        match text.split_once('\n') {
            None => text,
            Some((first, _)) => {
                format!("{}; replay shows them", first.trim_end().trim_end_matches(':'))
            }
        }
    }

    pub(crate) fn nodes(mut self, nodes: &[NodeId]) -> Violation {
        self.nodes = sorted_unique(nodes);
        self
    }

    pub(crate) fn clients(mut self, clients: &[ClientId]) -> Violation {
        self.clients = sorted_unique(clients);
        self
    }

    pub(crate) fn tokens(mut self, tokens: &[Token]) -> Violation {
        self.tokens = sorted_unique(tokens);
        self
    }
}

fn sorted_unique<T: Ord + Copy>(items: &[T]) -> Vec<T> {
    items.iter().copied().collect::<BTreeSet<T>>().into_iter().collect()
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}ms: {}", self.property, self.at_us / 1_000, self.detail)
    }
}

/// A key one of whose `linearizable` searches reached a bound (its steps, or
/// its operations) before it found every linearization of a segment or
/// proved there is none: the run's verdict does not cover this key's answers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Undecided {
    pub key: fencelock::Key,
    /// The key's client operations.
    pub operations: u64,
    /// The most search nodes a search of the key explored; 0 when a segment
    /// had more operations than a search takes, and none was started.
    pub steps: u64,
}

impl fmt::Display for Undecided {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operations = crate::plural(self.operations, "operation");
        let why = if self.steps == 0 {
            format!("of its {operations}, a stretch with no pause (never all settled) is longer than one search takes")
        } else {
            format!("a search over a segment of its {operations} reached a bound after {} steps", self.steps)
        };
        write!(
            f,
            "linearizable: {} not judged: {why}, neither finding a linearization nor showing there is none (the \
             verdict does not cover this key)",
            self.key
        )
    }
}

/// What every run reports besides its violations.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counters {
    /// New tokens issued (first apply of a Grant for a new holder).
    pub grants: u64,
    pub writes_accepted: u64,
    /// Writes rejected as stale (lower token), per write path.
    pub stale_writes_rejected_status: u64,
    pub stale_writes_rejected_ledger: u64,
    /// Writes rejected because another holder already wrote with the same token.
    pub equal_token_writes_rejected: u64,
    /// Retried writes answered with their original result.
    pub duplicate_writes: u64,
    /// Belief overlaps of two clients that the drift bound or a restore excuses; fencing must contain them.
    pub lease_exposures: u64,
    /// Distinct terms in which some node became leader.
    pub elections: u64,
    pub first_leader_us: Option<u64>,
    /// Whole-cluster restores.
    pub restores: u64,
    /// Single-node restores from a stale backup.
    pub node_restores: u64,
    /// Restores of the protected resource from its backup.
    pub resource_restores: u64,
    /// Floor reads the restored resource sent (every attempt).
    pub floor_reads: u64,
    /// Writes answered `Unavailable` while a restored resource read its floors.
    pub writes_unavailable: u64,
    /// Keys judged by `linearizable`.
    pub linearizable_keys: u64,
    /// The keys whose search hit a bound (neither passed nor failed), each
    /// said (`UNDECIDED`), never passed in silence.
    pub linearizable_undecided: Vec<Undecided>,
    /// Client operations per key judged by `linearizable`, one entry per key.
    pub linearizable_ops_per_key: Vec<u64>,
    /// The most search nodes one key's linearizability search explored.
    pub linearizable_steps_max: u64,
    /// Requests answered and grants made, during the faults and after the heal.
    pub phases: PhaseAvailability,
}

/// Availability in each phase of a run: requests first sent in the phase (those the
/// client walked away from, crashed or paused on aside), how many got a
/// final answer (not a redirect, not `Unavailable`), and grants applied.
/// Sums of seeds fold into the same type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseAvailability {
    pub fault_requests: u64,
    pub fault_answered: u64,
    pub fault_grants: u64,
    pub healed_requests: u64,
    pub healed_answered: u64,
    pub healed_grants: u64,
}

impl PhaseAvailability {
    /// Counts an applied Grant in its phase, once per index (its first apply).
    pub(crate) fn count_grant(&mut self, first_apply: bool, healed: bool) {
        if first_apply {
            *(if healed { &mut self.healed_grants } else { &mut self.fault_grants }) += 1;
        }
    }

    pub fn add(&mut self, other: &PhaseAvailability) {
        self.fault_requests += other.fault_requests;
        self.fault_answered += other.fault_answered;
        self.fault_grants += other.fault_grants;
        self.healed_requests += other.healed_requests;
        self.healed_answered += other.healed_answered;
        self.healed_grants += other.healed_grants;
    }

    /// The share of requests sent during the faults that got a final answer (1 when none were sent).
    pub fn fault_answered_share(&self) -> f64 {
        share(self.fault_answered, self.fault_requests)
    }

    /// The same after the heal.
    pub fn healed_answered_share(&self) -> f64 {
        share(self.healed_answered, self.healed_requests)
    }

    /// Requests sent during the faults that never got a final answer.
    pub fn fault_unanswered(&self) -> u64 {
        self.fault_requests - self.fault_answered
    }
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        1.0
    } else {
        part as f64 / whole as f64
    }
}

/// What the checker assumes about the run.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckConfig {
    pub nodes: u8,
    /// The drift bound the protocol assumes; a clock beyond it excuses lease overlaps.
    pub drift_ppm_max: u64,
    pub lease_ms: u64,
    /// After the heal, a leader must exist within this bound.
    pub liveness_leader_bound_ms: u64,
    /// After the heal (or the crash, if later), a crashed holder's lock
    /// must be freed within `lease_ms` plus this bound.
    pub liveness_free_bound_ms: u64,
    /// The true instant the run ended; beliefs still open end here.
    pub run_end_us: u64,
    /// Raft's heartbeat interval and the top of its election timeout.
    pub heartbeat_ms: u64,
    pub election_ms_max: u64,
    /// The servers' tick, for the work budget.
    pub tick_ms: u64,
    /// From the leader bound on, a free key asked for must be granted
    /// within this long (`progress`).
    pub progress_bound_ms: u64,
    /// The length of each stretch the `Work` event reports.
    pub work_every_us: u64,
}

impl CheckConfig {
    /// The one configuration every run of `model` is judged with (and the
    /// checker's own tests): a leader within 5 s of the heal, a crashed
    /// holder's lock freed within its lease plus 5 s. A run that ended
    /// early (a panic) sets `run_end_us` to its own end.
    pub fn for_model(model: &Model) -> CheckConfig {
        CheckConfig {
            nodes: model.nodes,
            drift_ppm_max: model.drift_ppm_max,
            lease_ms: model.lease_ms,
            liveness_leader_bound_ms: LIVENESS_LEADER_BOUND_MS,
            liveness_free_bound_ms: LIVENESS_FREE_BOUND_MS,
            run_end_us: (model.safety_ms + model.liveness_ms) * 1_000,
            heartbeat_ms: model.heartbeat_ms,
            election_ms_max: model.election_ms_max,
            tick_ms: fencelock::raft::TICK_MS_STANDARD,
            progress_bound_ms: CheckConfig::progress_bound_ms(model),
            work_every_us: crate::world::WORK_SAMPLE_US,
        }
    }

    /// How long a free key may wait for its grant with every fault healed:
    /// an election that may split once (twice the longest timeout), a
    /// client's retry to learn of the new leader and one more if its request
    /// was lost with the old one (twice `CLIENT_RETRY_MS`), and ten
    /// heartbeats for the Grant's round and the leader's own.
    pub fn progress_bound_ms(model: &Model) -> u64 {
        2 * model.election_ms_max + 2 * CLIENT_RETRY_MS + 10 * model.heartbeat_ms
    }

    /// Checks what the field types cannot express; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes == 0 {
            return Err("check config `nodes` must be at least 1".to_string());
        }
        if self.lease_ms == 0 {
            return Err("check config `lease_ms` must be positive".to_string());
        }
        if self.liveness_leader_bound_ms == 0 {
            return Err("check config `liveness_leader_bound_ms` must be positive".to_string());
        }
        if self.heartbeat_ms == 0 || self.tick_ms == 0 || self.work_every_us == 0 {
            return Err("check config `heartbeat_ms`, `tick_ms` and `work_every_us` must be positive".to_string());
        }
        Ok(())
    }
}

/// A run's verdict: every violation, in the order of the history, the
/// lease exposures (in time order, one per `lease_exposures`), and the counters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub violations: Vec<Violation>,
    pub exposures: Vec<Exposure>,
    pub counters: Counters,
}

impl Verdict {
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// The distinct properties that were violated, in the order of SPEC.md.
    pub fn properties(&self) -> Vec<Property> {
        Property::ALL.into_iter().filter(|p| self.violations.iter().any(|v| v.property == *p)).collect()
    }
}

/// Where the family checkers put what they find.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub violations: Vec<Violation>,
    pub exposures: Vec<Exposure>,
    pub counters: Counters,
}

impl Report {
    pub(crate) fn push(&mut self, violation: Violation) {
        self.violations.push(violation);
    }
}

/// One family of properties, fed every event of the history in order.
trait Family: Send {
    /// Judges `event` against the applied state as it was just before it
    /// (`facts`), online.
    fn observe(&mut self, ctx: &state::Context, facts: &state::Facts, event: &Event, report: &mut Report);

    /// The checks that need the whole run.
    fn finish(&mut self, _ctx: &state::Context, _report: &mut Report) {}
}

/// Judges one run's history event by event.
pub struct Checker {
    ctx: state::Context,
    report: Report,
    /// Raft, tokens, the resource, the lock table, leases, liveness,
    /// availability and the clients' view, in this order (which orders violations found at one instant).
    families: Vec<Box<dyn Family>>,
    seq_next: u64,
}

impl Checker {
    pub fn new(config: CheckConfig) -> Checker {
        if let Err(e) = config.validate() {
            panic!("{e}");
        }
        let families: Vec<Box<dyn Family>> = vec![
            Box::new(raft_checker::RaftChecker::default()),
            Box::new(token_checker::TokenChecker::default()),
            Box::new(resource_checker::ResourceChecker::default()),
            Box::new(lock_checker::LockChecker::default()),
            Box::new(lease_checker::LeaseChecker::new(&config)),
            Box::new(liveness_checker::LivenessChecker::default()),
            Box::new(availability_checker::AvailabilityChecker::default()),
            Box::new(linearizable::LinearizableChecker::new(&config)),
        ];
        Checker { ctx: state::Context::new(config), report: Report::default(), families, seq_next: 0 }
    }

    /// Feeds one event; events must come in history order.
    pub fn observe(&mut self, event: &Event) {
        assert!(event.seq >= self.seq_next, "events out of order: seq {} after {}", event.seq, self.seq_next);
        self.seq_next = event.seq + 1;
        // Every family sees the reconstructed state as it was just before the
        // event; only then does the state absorb it.
        let facts = self.ctx.facts(event);
        match event.kind {
            EventKind::ClusterRestored { .. } => self.report.counters.restores += 1,
            EventKind::NodeRestored { .. } => self.report.counters.node_restores += 1,
            EventKind::ResourceRestored { .. } => self.report.counters.resource_restores += 1,
            EventKind::FloorAsked { .. } => self.report.counters.floor_reads += 1,
            _ => {}
        }
        for family in &mut self.families {
            family.observe(&self.ctx, &facts, event, &mut self.report);
        }
        self.ctx.absorb(event, &facts);
    }

    /// Runs the end-of-run checks for a run that ended at `run_end_us` (a
    /// run judged as it went learns its end last) and returns the verdict.
    pub fn finish_at(mut self, run_end_us: u64) -> Verdict {
        self.ctx.config.run_end_us = run_end_us;
        self.finish()
    }

    /// Runs the end-of-run checks and returns the verdict.
    pub fn finish(mut self) -> Verdict {
        for family in &mut self.families {
            family.finish(&self.ctx, &mut self.report);
        }
        let mut violations = self.report.violations;
        // End-of-run findings carry the time they happened at: a stable sort
        // by time puts them into history order with the online ones.
        violations.sort_by_key(|v| v.at_us);
        let mut seen = BTreeSet::new();
        violations.retain(|v| seen.insert((v.property, v.at_us, v.detail.clone())));
        let mut exposures = self.report.exposures;
        exposures.sort_by_key(|e| (e.at_us, e.end_us));
        assert_eq!(exposures.len() as u64, self.report.counters.lease_exposures, "each exposure is counted once");
        Verdict { violations, exposures, counters: self.report.counters }
    }
}

/// Observes a whole history and finishes.
pub fn check(history: &History, config: CheckConfig) -> Verdict {
    let mut checker = Checker::new(config);
    for event in history.events() {
        checker.observe(event);
    }
    checker.finish()
}

/// The `linearizable` family alone over a whole history: what `bench` times
/// to tell what the clients' view adds to a run.
pub fn check_linearizable(history: &History, config: CheckConfig) -> Verdict {
    let mut family = linearizable::LinearizableChecker::new(&config);
    for event in history.events() {
        family.observe_event(event);
    }
    let mut report = Report::default();
    family.finish(&state::Context::new(config), &mut report);
    Verdict { violations: report.violations, exposures: report.exposures, counters: report.counters }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;
    use fencelock::raft::Role;

    #[test]
    fn a_verdict_lists_violations_in_history_order_with_their_properties() {
        // A lease overlap (found at the end, at 4 s) and a split term (online, at 4.5 s).
        let verdict = happy()
            .at_ms(4_000)
            .belief_until_us(2, "k", 44, 6_000_000)
            .at_ms(4_500)
            .role(2, 1, Role::Candidate)
            .leader(2, 1)
            .check();
        assert_eq!(verdict.properties(), vec![Property::ElectionSafety, Property::LeaseExclusion]);
        let times: Vec<u64> = verdict.violations.iter().map(|v| v.at_us).collect();
        assert_eq!(times, vec![4_000_000, 4_500_000]);
        assert!(verdict.violations[1].to_string().starts_with("election-safety at 4500ms: n0 and n2"));
    }

    #[test]
    fn a_violation_told_over_many_lines_has_a_one_line_form() {
        let table = "no linearization: these 2 operations cannot (…):\n  #  client\n  0  c1\n  1  c2";
        let long = Violation::new(Property::Linearizable, 7_000, table.to_string());
        assert_eq!(
            long.one_line(),
            "linearizable at 7ms: no linearization: these 2 operations cannot (…); replay shows them"
        );
        let short = Violation::new(Property::FencedWrite, 7_000, "a stale write".to_string());
        assert_eq!(short.one_line(), short.to_string());
    }

    #[test]
    fn restores_are_counted() {
        let verdict = happy()
            .at_ms(4_000)
            .ev(EventKind::NodeRestored { node: NodeId(1), backup_at_us: 1_000 })
            .restore(1, 100)
            .restore(2, 200)
            .check();
        assert_clean(&verdict);
        assert_eq!((verdict.counters.restores, verdict.counters.node_restores), (2, 1));
    }

    #[test]
    fn the_standard_config_follows_the_model() {
        let model = Model::default();
        let config = CheckConfig::for_model(&model);
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.run_end_us, 40_000_000);
        assert_eq!(config.liveness_free_bound_ms, LIVENESS_FREE_BOUND_MS);
        let broken = CheckConfig { nodes: 0, ..config };
        assert!(broken.validate().unwrap_err().contains("`nodes`"));
    }
}
