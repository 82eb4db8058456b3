//! The fault plan pass: families, units and single events away (ddmin and
//! a sweep), then the proof that each remaining event is needed (the run
//! without it no longer shows the property).

use super::ddmin::{ddmin, sweep, TESTS_MAX};
use super::robustness::{probes_pass, REPAIR_TRACE_LINES_MAX};
use super::{length, Case, Needed, Shrinker};
use crate::faults::{Fault, FaultEvent};
use crate::history::Actor;
use crate::model::Model;
use std::collections::BTreeSet;

/// Rounds of proof: an event found removable is dropped and the proof starts over.
const PROOF_ROUNDS_MAX: usize = 8;

/// The plan made 1-minimal in three steps, coarse to fine, every failing
/// subset tried becoming the best case: whole families away (every clock
/// fault, every resource crash, …: a handful of runs that can drop dozens of
/// events), then ddmin over units (a fault with the event that ends it — a
/// crash and its restart, a partition and its heal — go together, so a
/// removal does not leave half a story), then single events swept.
pub(crate) fn minimize(s: &mut Shrinker) {
    let plan = s.best.plan.clone();
    if plan.is_empty() {
        return;
    }
    // The run cut just after the violation leaves a subset no time to show
    // it a little later: the candidates run longer, and the kept one is cut again.
    let model = match s.best.model.liveness_ms {
        0 => Model {
            safety_ms: s.best.model.safety_ms + length::window_ms(s.best.model.safety_ms),
            ..s.best.model.clone()
        },
        _ => s.best.model.clone(),
    };
    let indexed: Vec<usize> = (0..plan.len()).collect();
    // The three steps can ask for the same subset (the empty plan, each
    // time): a subset that passed once is not run again.
    let mut passed: BTreeSet<Vec<usize>> = BTreeSet::new();
    let mut try_indices = |s: &mut Shrinker, kept: &[usize]| {
        if passed.contains(kept) {
            return false;
        }
        let events = kept.iter().map(|&i| plan[i].clone()).collect();
        let candidate = Case { plan: events, model: model.clone(), seed: s.best.seed };
        let fails = s.attempt(candidate, false);
        if !fails && !s.stopped() {
            passed.insert(kept.to_vec());
        }
        fails
    };
    let families = groups(&indexed, |i| family(&plan[i].fault) as usize);
    let kept = flat(&ddmin(&families, |subset: &[Vec<usize>]| try_indices(s, &flat(subset))));
    let paired = units(&plan, &kept);
    let kept = flat(&ddmin(&paired, |subset: &[Vec<usize>]| try_indices(s, &flat(subset))));
    sweep(kept, |subset: &[usize]| try_indices(s, subset), TESTS_MAX);
    if s.best.model == model {
        length::cut(s);
    }
}

/// Groups of indices, in order of each group's first member.
fn groups(indices: &[usize], key: impl Fn(usize) -> usize) -> Vec<Vec<usize>> {
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    for &i in indices {
        match out.iter_mut().find(|(k, _)| *k == key(i)) {
            Some((_, group)) => group.push(i),
            None => out.push((key(i), vec![i])),
        }
    }
    out.into_iter().map(|(_, group)| group).collect()
}

/// The indices of `groups` in plan order.
fn flat(groups: &[Vec<usize>]) -> Vec<usize> {
    let mut out: Vec<usize> = groups.iter().flatten().copied().collect();
    out.sort_unstable();
    out
}

/// A fault's family: the faults that tell one kind of story.
fn family(fault: &Fault) -> Family {
    match fault {
        Fault::Partition { .. }
        | Fault::OneWay { .. }
        | Fault::IsolateLeader
        | Fault::IsolateLeaderWith { .. }
        | Fault::CutClient { .. }
        | Fault::LoseWriteAnswer
        | Fault::Heal => Family::Network,
        Fault::Crash { .. } | Fault::Restart { .. } | Fault::CrashLeader { .. } => Family::Crashes,
        Fault::ElectionStorm { .. } => Family::Elections,
        Fault::Pause { actor: Actor::Server(_), .. } | Fault::PauseLeader { .. } => Family::ServerPauses,
        Fault::Pause { .. }
        | Fault::StallHolder { .. }
        | Fault::StallUntilOvertaken(_)
        | Fault::StallOnGrant { .. } => Family::WorkerPauses,
        Fault::ClockRate { .. } | Fault::ClockStep { .. } => Family::Clocks,
        Fault::BackupNode { .. } | Fault::RestoreNode { .. } => Family::NodeRestores,
        Fault::BackupCluster | Fault::RestoreCluster => Family::ClusterRestores,
        Fault::CrashResource | Fault::RestartResource | Fault::BackupResource | Fault::RestoreResource => {
            Family::Resource
        }
        Fault::DiskStall { .. } => Family::Disks,
        Fault::LeaderChurn { .. }
        | Fault::AckCrashes { .. }
        | Fault::RenewStrikes { .. }
        | Fault::AckAmnesia { .. }
        | Fault::GrantStrikes { .. }
        | Fault::VoteStrikes { .. }
        | Fault::FenceStrikes { .. }
        | Fault::LateRenewals { .. }
        | Fault::Figure8Strikes { .. } => Family::Reactive,
    }
}

#[derive(Clone, Copy)]
enum Family {
    Network,
    Crashes,
    Elections,
    ServerPauses,
    WorkerPauses,
    Clocks,
    NodeRestores,
    ClusterRestores,
    Resource,
    Disks,
    Reactive,
}

/// The kept events (indices into `plan`) as units: an event with the later
/// events that end what it started — a crash with the restart or restore of
/// the same server, a network fault with the heal after it, a resource crash
/// with its restart, a slow disk with its return to normal, a backup with
/// the restore from it. Every other event is a unit alone.
fn units(plan: &[FaultEvent], kept: &[usize]) -> Vec<Vec<usize>> {
    // Each kept event's unit (a position in `kept`); an event ends every
    // open event it closes, which then share its unit.
    let mut unit_of: Vec<usize> = (0..kept.len()).collect();
    let mut open: Vec<usize> = Vec::new();
    for (k, &i) in kept.iter().enumerate() {
        let closed: Vec<usize> = open.iter().copied().filter(|&o| ends(&plan[kept[o]].fault, &plan[i].fault)).collect();
        if !closed.is_empty() {
            let merged: Vec<usize> = closed.iter().map(|&c| unit_of[c]).collect();
            let unit = merged.iter().copied().min().expect("closed is not empty");
            for u in unit_of.iter_mut() {
                if merged.contains(u) {
                    *u = unit;
                }
            }
            unit_of[k] = unit;
            open.retain(|o| !closed.contains(o));
        }
        open.push(k);
    }
    groups(&(0..kept.len()).collect::<Vec<_>>(), |k| unit_of[k])
        .into_iter()
        .map(|group| group.iter().map(|&k| kept[k]).collect())
        .collect()
}

/// Whether `closer` ends what `opener` started.
fn ends(opener: &Fault, closer: &Fault) -> bool {
    match (opener, closer) {
        (Fault::Crash { node: a, .. }, Fault::Restart { node: b } | Fault::RestoreNode { node: b }) => a == b,
        (Fault::BackupNode { node: a }, Fault::RestoreNode { node: b }) => a == b,
        (Fault::BackupCluster, Fault::RestoreCluster) => true,
        (Fault::CrashResource, Fault::RestartResource | Fault::RestoreResource) => true,
        (Fault::BackupResource, Fault::RestoreResource) => true,
        (Fault::DiskStall { node: a, fsync_ms }, Fault::DiskStall { node: b, fsync_ms: 0 }) => a == b && *fsync_ms > 0,
        (opener, Fault::Heal) => matches!(family(opener), Family::Network) && !matches!(opener, Fault::Heal),
        _ => false,
    }
}

/// For each remaining event, the run without it. An event whose removal
/// still fails is dropped (the passes after ddmin can make one redundant),
/// unless the case was repaired for robustness (`repaired_probes`: the
/// probe seeds it was repaired against) and the run without it no longer
/// fails in most probe seeds or outgrows the repair's trace cap: such an
/// event is needed for robustness, not for this seed, and is kept.
pub(crate) fn prove(s: &mut Shrinker, repaired_probes: Option<u64>) -> Vec<Needed> {
    'rounds: for _ in 0..PROOF_ROUNDS_MAX {
        let mut needed = Vec::with_capacity(s.best.plan.len());
        for i in 0..s.best.plan.len() {
            let mut plan = s.best.plan.clone();
            let event = plan.remove(i);
            let candidate = Case { plan, ..s.best.clone() };
            let Some(outcome) = s.run(&candidate) else { return Vec::new() };
            let without = if s.shows(&outcome) {
                let robust_without = match repaired_probes {
                    None => true,
                    Some(probes) => {
                        outcome.history.events().len() <= REPAIR_TRACE_LINES_MAX && probes_pass(s, &candidate, probes)
                    }
                };
                if robust_without {
                    s.best = candidate;
                    s.best_outcome = outcome;
                    continue 'rounds;
                }
                "still fails, but in fewer than 3 in 4 probe seeds: needed for robustness".to_string()
            } else {
                let mut others: Vec<String> = outcome.violations.iter().map(|v| v.property.to_string()).collect();
                others.dedup();
                if others.is_empty() {
                    "passes".to_string()
                } else {
                    format!("violates only {}", others.join(", "))
                }
            };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::net::Addr;
    use fencelock::{ClientId, NodeId};

    fn at(at_ms: u64, fault: Fault) -> FaultEvent {
        FaultEvent { at_ms, fault }
    }

    #[test]
    fn a_fault_and_the_events_that_end_it_are_one_unit() {
        let (n1, n2) = (NodeId(1), NodeId(2));
        let plan = vec![
            at(0, Fault::ClockRate { actor: Actor::Server(n1), ppm: 30 }),
            at(100, Fault::Crash { node: n1, torn: false }),
            at(200, Fault::OneWay { from: Addr::Server(n2), to: Addr::Client(ClientId(0)) }),
            at(300, Fault::IsolateLeader),
            at(400, Fault::Restart { node: n1 }),
            at(500, Fault::Heal),
            at(600, Fault::Heal),
            at(700, Fault::DiskStall { node: n2, fsync_ms: 80 }),
            at(800, Fault::CrashResource),
            at(900, Fault::DiskStall { node: n2, fsync_ms: 0 }),
        ];
        let all: Vec<usize> = (0..plan.len()).collect();
        assert_eq!(units(&plan, &all), vec![vec![0], vec![1, 4], vec![2, 3, 5], vec![6], vec![7, 9], vec![8]]);
        // Without the crash, its restart is a unit alone.
        assert_eq!(units(&plan, &[0, 4, 5]), vec![vec![0], vec![4], vec![5]]);
    }

    #[test]
    fn families_gather_the_kinds_of_fault_that_tell_one_story() {
        let plan = [
            at(0, Fault::ClockRate { actor: Actor::Client(ClientId(1)), ppm: -20 }),
            at(100, Fault::Pause { actor: Actor::Server(NodeId(0)), ms: 40 }),
            at(150, Fault::Pause { actor: Actor::Client(ClientId(0)), ms: 40 }),
            at(200, Fault::ClockStep { actor: Actor::Server(NodeId(1)), delta_ms: 9 }),
            at(300, Fault::PauseLeader { ms: 10 }),
            at(400, Fault::StallHolder { ms: 10 }),
        ];
        let all: Vec<usize> = (0..plan.len()).collect();
        let families = groups(&all, |i| family(&plan[i].fault) as usize);
        assert_eq!(families, vec![vec![0, 3], vec![1, 4], vec![2, 5]]);
    }
}
