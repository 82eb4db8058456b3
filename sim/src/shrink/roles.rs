//! The roles pass: a fault that names a server or a worker is rewritten to
//! name the part it played — `crash n3` and its restart become "crash the
//! leader, restart it 400 ms later" when n3 led, the workload's own stall of
//! a lock holder becomes a planned `StallHolder` — so the plan keeps its
//! meaning under another seed, where another server wins the election and
//! another worker holds the lock. A minimal plan that names nodes fails by
//! the luck of who led; one that names roles can fail by itself.
//!
//! A rewrite is kept only if the run still violates the property and the
//! plan then fails in at least as many probe seeds as before (the probes of
//! `robustness::repair`, apart from the seeds the result is measured on);
//! the planned stalls, which add events, only if more fail.

use super::robustness::{measure_from, PROBE_OFFSET};
use super::told::planned_stalls;
use super::{Case, Shrinker};
use crate::faults::{Fault, FaultEvent};
use crate::history::Actor;

/// Tries each rewrite in turn.
pub(crate) fn generalize(s: &mut Shrinker, probes: u64) {
    if probes == 0 || s.stopped() {
        return;
    }
    let mut failing = probe(s, &s.best.clone(), probes);
    let mut i = 0;
    while i < s.best.plan.len() && !s.stopped() {
        if let Some(plan) = leader_form(&s.best.plan, i, s.best.model.safety_ms) {
            let candidate = Case { plan, ..s.best.clone() };
            if let Some(now_failing) = try_keep(s, candidate, probes, failing) {
                failing = now_failing;
            }
        }
        i += 1;
    }
    if let Some(candidate) = planned_stalls(s, &s.best) {
        // It adds events and turns the workload's stalls off: only worth it
        // if more probe seeds fail.
        if try_keep(s, candidate, probes, failing + 1).is_some() {
            super::length::cut(s);
        }
    }
}

/// Keeps `candidate` if it still violates the property here and fails in
/// at least `failing` probe seeds; returns its probe count when kept.
/// A rewrite into roles that removes no event and adds none is kept at an
/// equal count: the plan then says what the run did, not who did it.
fn try_keep(s: &mut Shrinker, candidate: Case, probes: u64, failing: u64) -> Option<u64> {
    let outcome = s.run(&candidate)?;
    if !s.shows(&outcome) {
        return None;
    }
    let now_failing = probe(s, &candidate, probes);
    if now_failing < failing {
        return None;
    }
    s.best = candidate;
    s.best_outcome = outcome;
    Some(now_failing)
}

fn probe(s: &mut Shrinker, case: &Case, probes: u64) -> u64 {
    let probed = measure_from(case, &s.property, PROBE_OFFSET, probes);
    s.runs += probed.seeds;
    probed.failing
}

/// The plan with event `i` told by role, if it names a server a role can
/// stand for: a crash (with the restart of the same server that follows it,
/// if any) becomes `CrashLeader`, a server's pause `PauseLeader`. Whether
/// the server led at that instant is left to the run: a rewrite that misses
/// does not fail and is dropped.
pub fn leader_form(plan: &[FaultEvent], i: usize, safety_ms: u64) -> Option<Vec<FaultEvent>> {
    let event = &plan[i];
    let mut out = plan.to_vec();
    match event.fault {
        Fault::Crash { node, torn } => {
            let back = plan
                .iter()
                .enumerate()
                .skip(i + 1)
                .find(|(_, later)| later.fault.named().contains(&Actor::Server(node)));
            let down_ms = match back {
                Some((j, later)) if later.fault == (Fault::Restart { node }) => {
                    out.remove(j);
                    later.at_ms - event.at_ms
                }
                // A restore from a backup, or another fault on the same server while
                // it is down, ties the crash to that server.
                Some(_) => return None,
                None => safety_ms.saturating_sub(event.at_ms),
            };
            out[i] = FaultEvent { at_ms: event.at_ms, fault: Fault::CrashLeader { torn, down_ms } };
        }
        Fault::Pause { actor: Actor::Server(_), ms } => {
            out[i] = FaultEvent { at_ms: event.at_ms, fault: Fault::PauseLeader { ms } };
        }
        _ => return None,
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::{ClientId, NodeId};

    fn at(at_ms: u64, fault: Fault) -> FaultEvent {
        FaultEvent { at_ms, fault }
    }

    #[test]
    fn a_crash_and_its_restart_become_one_crash_of_the_leader() {
        let plan = vec![
            at(100, Fault::Pause { actor: Actor::Client(ClientId(0)), ms: 50 }),
            at(1_000, Fault::Crash { node: NodeId(2), torn: true }),
            at(1_200, Fault::Pause { actor: Actor::Server(NodeId(1)), ms: 30 }),
            at(1_400, Fault::Restart { node: NodeId(2) }),
        ];
        assert_eq!(
            leader_form(&plan, 1, 30_000),
            Some(vec![plan[0].clone(), at(1_000, Fault::CrashLeader { torn: true, down_ms: 400 }), plan[2].clone(),])
        );
        assert_eq!(leader_form(&plan, 0, 30_000), None, "a worker's pause has no leader form");
        assert_eq!(leader_form(&plan, 2, 30_000).map(|p| p[2].clone()), Some(at(1_200, Fault::PauseLeader { ms: 30 })));
    }

    #[test]
    fn a_crash_never_restarted_stays_down_to_the_end_and_a_restored_one_keeps_its_name() {
        let plan = vec![at(1_000, Fault::Crash { node: NodeId(0), torn: false })];
        assert_eq!(
            leader_form(&plan, 0, 5_000),
            Some(vec![at(1_000, Fault::CrashLeader { torn: false, down_ms: 4_000 })])
        );
        let restored = vec![plan[0].clone(), at(2_000, Fault::RestoreNode { node: NodeId(0) })];
        assert_eq!(leader_form(&restored, 0, 5_000), None);
    }
}
