//! Shrinking a failure: the smallest run that still violates the same
//! property under the same variant (`fencesim shrink`, `hunt --shrink`).
//!
//! A run is data — a seed, a model and a fault plan — so every reduction is a
//! new run of changed data, kept only if the property still fails, and the
//! result replays byte for byte from a scenario file. The passes, one file
//! each, in the order they run:
//!
//! 1. `length`: the run stops just after the violation (no liveness phase).
//! 2. `plan`: whole fault families away, then ddmin over units (a fault
//!    with the event that ends it), then single events swept, to a
//!    1-minimal plan; `shift`: the events moved earlier together, then the
//!    gaps between them closed, where the cut run gets shorter.
//! 3. `workload`: fewer keys, workers and jobs, no drawn stalls (a worker's
//!    removal renumbers the plan, `renumber`).
//! 4. `cluster`: 5 servers to 3, then to 1, where it still fails.
//! 5. `plan` again, then `sizes`: each remaining fault made smaller and
//!    shorter, then `shift` and `length` again, and `plan::prove`: the run
//!    without each remaining event, which shows it is needed.
//! 6. `roles`: a fault naming a server is rewritten to name its role ("crash
//!    the leader"), and the workload's stalls of lock holders become planned
//!    ones, where the plan then fails in at least as many probe seeds.
//! 7. `robustness`: a minimal case that fails in fewer than most of a few
//!    probe seeds gets back time and workload until it fails in most of
//!    them, within a trace-line cap, its faults told by what they wait for
//!    where that helps (strike windows opened to the whole run, stalls that
//!    last until another worker overtakes the holder, `roles`); then the
//!    result is measured under other seeds (other workloads and timing), so
//!    a plan that fails only by luck of timing is labelled so.
//!
//! Wall time bounds the search (and is reported) but never enters a run.

mod cluster;
pub mod ddmin;
mod length;
mod plan;
pub mod renumber;
mod robustness;
mod roles;
mod shift;
mod sizes;
pub mod text;
mod told;
mod workload;

use crate::faults::{self, FaultEvent};
use crate::model::Model;
use crate::run::seed::{run_plan, Outcome};
use serde::Serialize;
use std::time::{Duration, Instant};

pub use robustness::Robustness;

/// One run as data: what a scenario file with `faults` holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub seed: u64,
    pub model: Model,
    pub plan: Vec<FaultEvent>,
}

/// What to keep and how long to look.
#[derive(Clone, Debug)]
pub struct Options {
    /// The property id that must stay violated; `None`: the first violation's.
    pub property: Option<String>,
    /// Wall time for the reduction (robustness runs come after it).
    pub budget: Duration,
    /// Other seeds the shrunk plan is tried under.
    pub robustness_seeds: u64,
    /// Probe seeds a fragile minimal case is repaired against (0: no repair).
    pub probes: u64,
}

/// Size of a run, before or after.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Size {
    pub faults: usize,
    pub trace_lines: usize,
    pub sim_ms: u64,
}

impl Size {
    fn of(case: &Case, outcome: &Outcome) -> Size {
        Size { faults: case.plan.len(), trace_lines: outcome.history.events().len(), sim_ms: outcome.sim_ms }
    }
}

/// A remaining fault event and the run that shows it is needed.
#[derive(Clone, Debug, Serialize)]
pub struct Needed {
    pub at_ms: u64,
    pub fault: String,
    /// What the run without it did: "passes" or the properties it violated instead.
    pub without: String,
    pub trace_hash: String,
}

/// The result of a shrink.
#[derive(Clone, Debug)]
pub struct Report {
    pub property: String,
    pub before: Size,
    pub after: Size,
    pub runs: u64,
    pub wall_ms: u64,
    pub robustness: Option<Robustness>,
    pub needed: Vec<Needed>,
    /// Whether every remaining fault was proven needed (the plan is
    /// 1-minimal; in a repaired case an event may be needed for robustness
    /// only, as its `without` says); false when the budget ran out or
    /// Ctrl-C came first.
    pub minimal: bool,
    /// The kept violation in the shrunk run.
    pub violation: String,
    pub interrupted: bool,
    /// Whether the minimal case failed in too few probe seeds and was given
    /// more time and workload until it failed in most of them (`robustness::repair`).
    pub repaired: bool,
    pub case: Case,
    pub outcome: Outcome,
}

/// Shrinks `case`. Bad input — a case that passes, or a property it does not
/// violate — is an error line.
pub fn shrink(case: Case, options: &Options) -> Result<Report, String> {
    faults::validate(&case.plan, &case.model)?;
    let started = Instant::now();
    let outcome = run_plan(case.seed, &case.model, case.plan.clone());
    let violated: Vec<String> = outcome.violations.iter().map(|v| v.property.to_string()).collect();
    let property = match &options.property {
        _ if outcome.ok => {
            return Err(format!(
                "seed {} passes under variant {}: nothing to shrink",
                case.seed,
                case.model.variant.name()
            ))
        }
        Some(p) if !violated.contains(p) => {
            return Err(format!(
                "seed {} never violates `{p}` under variant {} (it violates: {})",
                case.seed,
                case.model.variant.name(),
                dedup(&violated).join(", ")
            ))
        }
        Some(p) => p.clone(),
        None => violated[0].clone(),
    };
    let before = Size::of(&case, &outcome);
    let start = case.clone();
    let mut s = Shrinker { property, best: case, best_outcome: outcome, runs: 1, deadline: started + options.budget };
    s.reduce();
    roles::generalize(&mut s, options.probes);
    let repaired_failing = robustness::repair(&mut s, &start, options.probes);
    if let Some(failing) = repaired_failing {
        robustness::trim(&mut s, options.probes, failing);
    }
    let repaired = repaired_failing.is_some();
    let minimal = !s.stopped();
    let needed = if minimal { plan::prove(&mut s, repaired.then_some(options.probes)) } else { Vec::new() };
    // Ctrl-C or SIGTERM: the shrink stops after the run in progress and reports the best case so far.
    let interrupted = crate::signals::interrupted();
    let robustness = (!interrupted).then(|| robustness::measure(&s.best, &s.property, options.robustness_seeds));
    let violation = s.kept_violation().to_string();
    Ok(Report {
        before,
        after: Size::of(&s.best, &s.best_outcome),
        runs: s.runs + robustness.as_ref().map_or(0, |r| r.seeds),
        wall_ms: started.elapsed().as_millis() as u64,
        robustness,
        needed,
        minimal,
        violation,
        interrupted,
        repaired,
        property: s.property,
        case: s.best,
        outcome: s.best_outcome,
    })
}

fn dedup(items: &[String]) -> Vec<String> {
    items.iter().collect::<std::collections::BTreeSet<_>>().into_iter().cloned().collect()
}

/// The search state: the smallest failing case so far and its outcome.
pub(crate) struct Shrinker {
    pub(crate) property: String,
    pub(crate) best: Case,
    pub(crate) best_outcome: Outcome,
    pub(crate) runs: u64,
    deadline: Instant,
}

/// Rounds of the whole reduction; a round that changes nothing ends it.
const ROUNDS_MAX: usize = 3;

impl Shrinker {
    fn reduce(&mut self) {
        length::cut(self);
        for _ in 0..ROUNDS_MAX {
            let start = self.best.clone();
            plan::minimize(self);
            shift::earlier(self);
            workload::reduce(self);
            cluster::reduce(self);
            plan::minimize(self);
            sizes::reduce(self);
            shift::earlier(self);
            length::cut(self);
            if self.best == start || self.stopped() {
                break;
            }
        }
    }

    /// The budget is spent or Ctrl-C was pressed.
    pub(crate) fn stopped(&self) -> bool {
        crate::signals::interrupted() || Instant::now() >= self.deadline
    }

    /// Runs a candidate; `None` when stopped or when the candidate is not a
    /// valid run (a plan naming an actor the model lost).
    pub(crate) fn run(&mut self, case: &Case) -> Option<Outcome> {
        if self.stopped() || case.model.validate().is_err() || faults::validate(&case.plan, &case.model).is_err() {
            return None;
        }
        self.runs += 1;
        Some(run_plan(case.seed, &case.model, case.plan.clone()))
    }

    /// The kept property is judged only after the heal (`liveness` and the
    /// availability properties): the liveness phase stays as it is.
    pub(crate) fn after_heal(&self) -> bool {
        self.property.parse::<fencelock::Property>().is_ok_and(|p| p.after_heal())
    }

    pub(crate) fn shows(&self, outcome: &Outcome) -> bool {
        outcome.violations.iter().any(|v| v.property.to_string() == self.property)
    }

    /// Keeps `candidate` if it still violates the property (and, with
    /// `no_longer`, if its trace is not longer than the best one's).
    pub(crate) fn attempt(&mut self, candidate: Case, no_longer: bool) -> bool {
        if candidate == self.best {
            return false;
        }
        let Some(outcome) = self.run(&candidate) else { return false };
        let longer = outcome.history.events().len() > self.best_outcome.history.events().len();
        if !self.shows(&outcome) || (no_longer && longer) {
            return false;
        }
        self.best = candidate;
        self.best_outcome = outcome;
        true
    }

    /// The earliest violation of the kept property in the best run.
    pub(crate) fn kept_violation(&self) -> &crate::checker::Violation {
        self.best_outcome
            .violations
            .iter()
            .filter(|v| v.property.to_string() == self.property)
            .min_by_key(|v| v.at_us)
            .expect("the best case always violates the property")
    }
}
