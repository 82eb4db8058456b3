//! The fault plan pass: ddmin over the events, then the proof that each
//! remaining event is needed (the run without it no longer shows the property).

use super::ddmin::ddmin;
use super::{Case, Needed, Shrinker};
use crate::faults::FaultEvent;

/// Rounds of proof: an event found removable is dropped and the proof starts over.
const PROOF_ROUNDS_MAX: usize = 8;

/// ddmin over the best case's plan; every failing subset tried becomes the best case.
pub(crate) fn minimize(s: &mut Shrinker) {
    let plan = s.best.plan.clone();
    ddmin(&plan, |subset: &[FaultEvent]| {
        let candidate = Case { plan: subset.to_vec(), ..s.best.clone() };
        s.attempt(candidate, false)
    });
}

/// For each remaining event, the run without it. An event whose removal
/// still fails is dropped (the passes after ddmin can make one redundant).
pub(crate) fn prove(s: &mut Shrinker) -> Vec<Needed> {
    'rounds: for _ in 0..PROOF_ROUNDS_MAX {
        let mut needed = Vec::with_capacity(s.best.plan.len());
        for i in 0..s.best.plan.len() {
            let mut plan = s.best.plan.clone();
            let event = plan.remove(i);
            let candidate = Case { plan, ..s.best.clone() };
            let Some(outcome) = s.run(&candidate) else { return Vec::new() };
            if s.shows(&outcome) {
                s.best = candidate;
                s.best_outcome = outcome;
                continue 'rounds;
            }
            let mut others: Vec<String> = outcome.violations.iter().map(|v| v.property.to_string()).collect();
            others.dedup();
            let without =
                if others.is_empty() { "passes".to_string() } else { format!("violates only {}", others.join(", ")) };
            needed.push(Needed {
                at_ms: event.at_ms,
                fault: event.fault.to_string(),
                without,
                trace_hash: outcome.trace_hash,
            });
        }
        return needed;
    }
    Vec::new()
}
