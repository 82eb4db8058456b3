//! The run's length: a safety violation needs no liveness phase
//! (`liveness_ms = 0`), and the safety phase can end just after it. The
//! world is deterministic, so the run up to the new end is the old run's
//! prefix; events at or after the end leave the plan.

use super::{Case, Shrinker};
use crate::faults::FaultEvent;

/// A candidate of `plan::minimize` (and of the shift pass) runs a quarter
/// longer than the best run, and a second at least.
const WINDOW_DIVISOR: u64 = 4;
const WINDOW_MS_MIN: u64 = 1_000;

/// How much longer than the best run a candidate of `plan::minimize` runs:
/// a plan without an event may show the violation a little later.
pub(crate) fn window_ms(safety_ms: u64) -> u64 {
    (safety_ms / WINDOW_DIVISOR).max(WINDOW_MS_MIN)
}

/// How long after the violation the shortened run goes on, tried in order.
const MARGINS_MS: [u64; 8] = [1, 100, 500, 1_000, 2_000, 4_000, 8_000, 16_000];

/// Where an after-heal property's run may heal sooner: these many ms into
/// the run, or a second after the plan's last event, the soonest first.
const HEALS_MS: [u64; 4] = [1_000, 2_000, 5_000, 10_000];

pub(crate) fn cut(s: &mut Shrinker) {
    if s.after_heal() {
        heal_sooner(s);
        return;
    }
    let violation_ms = s.kept_violation().at_us / 1_000;
    for margin_ms in MARGINS_MS {
        let safety_ms = violation_ms + margin_ms;
        let model = &s.best.model;
        if safety_ms >= model.safety_ms && model.liveness_ms == 0 {
            return;
        }
        let safety_ms = safety_ms.min(model.safety_ms);
        if s.attempt(shortened(&s.best, safety_ms), false) {
            return;
        }
    }
    let safety_ms = s.best.model.safety_ms;
    s.attempt(shortened(&s.best, safety_ms), false);
}

/// An after-heal property is judged in the liveness phase, which stays as
/// long as it is; the faults may heal sooner, the plan's events after the
/// new heal leaving it (the same prefix, as for a safety property).
fn heal_sooner(s: &mut Shrinker) {
    let last_ms = s.best.plan.iter().map(|e| e.at_ms).max().unwrap_or(0);
    let safety_ms = s.best.model.safety_ms;
    let mut candidates: Vec<u64> = HEALS_MS.into_iter().chain([last_ms + 1_000]).filter(|ms| *ms < safety_ms).collect();
    candidates.sort_unstable();
    candidates.dedup();
    for safety_ms in candidates {
        if s.attempt(healed_at(&s.best, safety_ms), false) {
            return;
        }
    }
}

/// `case` healed at `safety_ms`, its liveness phase as long as before.
fn healed_at(case: &Case, safety_ms: u64) -> Case {
    let mut sooner = shortened(case, safety_ms);
    sooner.model.liveness_ms = case.model.liveness_ms;
    sooner
}

/// `case` with its safety phase ending at `safety_ms` and no liveness phase.
pub(crate) fn shortened(case: &Case, safety_ms: u64) -> Case {
    let inside = |e: &&FaultEvent| e.at_ms < safety_ms || e.at_ms == 0;
    let plan = case.plan.iter().filter(inside).cloned().collect();
    let model = crate::model::Model { safety_ms, liveness_ms: 0, ..case.model.clone() };
    Case { plan, model, seed: case.seed }
}
