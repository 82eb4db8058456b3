//! The sizes pass: each remaining fault made smaller — shorter pauses,
//! smaller clock steps and drifts, fewer workers and servers cut off, a
//! disk stall or churn that lasts less — and moved: a fault that starts
//! something starts later, one that ends something ends earlier (never
//! past its neighbours, so the plan stays sorted).

use super::{Case, Shrinker};
use crate::faults::{Fault, FaultEvent};
use crate::machine::net::Addr;
use crate::model::Model;

/// Reductions of one event, each from the last one kept.
const STEPS_PER_EVENT_MAX: usize = 8;

pub(crate) fn reduce(s: &mut Shrinker) {
    rates(s);
    for i in 0..s.best.plan.len() {
        for _ in 0..STEPS_PER_EVENT_MAX {
            let mut kept = false;
            for candidate in smaller(&s.best.plan[i].fault) {
                if s.stopped() {
                    return;
                }
                if try_event(s, i, FaultEvent { fault: candidate, ..s.best.plan[i].clone() }) {
                    kept = true;
                    break;
                }
            }
            if !kept {
                break;
            }
        }
        retime(s, i);
    }
}

/// The per-packet faults (model keys, not events): no loss, no
/// duplicates, no corruption where it still fails.
fn rates(s: &mut Shrinker) {
    let quiet = [
        Model { loss_rate: 0.0, ..s.best.model.clone() },
        Model { dup_rate: 0.0, ..s.best.model.clone() },
        Model { corruption: false, ..s.best.model.clone() },
    ];
    for model in quiet {
        let model = Model {
            loss_rate: model.loss_rate.min(s.best.model.loss_rate),
            dup_rate: model.dup_rate.min(s.best.model.dup_rate),
            corruption: model.corruption && s.best.model.corruption,
            ..s.best.model.clone()
        };
        s.attempt(Case { model, ..s.best.clone() }, false);
    }
}

/// Tries event `i` replaced by `event`.
fn try_event(s: &mut Shrinker, i: usize, event: FaultEvent) -> bool {
    let mut plan = s.best.plan.clone();
    plan[i] = event;
    s.attempt(Case { plan, ..s.best.clone() }, false)
}

/// A number's smaller values, smallest first: the floor, a quarter, a half, three quarters.
fn smaller_u64(value: u64, floor: u64) -> Vec<u64> {
    let mut out: Vec<u64> =
        [floor, value / 4, value / 2, value * 3 / 4].into_iter().filter(|v| *v >= floor && *v < value).collect();
    out.dedup();
    out
}

fn smaller_i64(value: i64, floor: u64) -> Vec<i64> {
    smaller_u64(value.unsigned_abs(), floor)
        .into_iter()
        .map(|m| i64::try_from(m).expect("smaller than an i64") * value.signum())
        .collect()
}

/// Candidates for a smaller fault, the most reduced first. Sizes only go
/// down, so the pass ends.
fn smaller(fault: &Fault) -> Vec<Fault> {
    match fault {
        Fault::Pause { actor, ms } => {
            smaller_u64(*ms, 10).into_iter().map(|ms| Fault::Pause { actor: *actor, ms }).collect()
        }
        Fault::IsolateLeaderWith { clients, pause_ms } => {
            let mut out: Vec<Fault> = (0..clients.len())
                .map(|i| {
                    let mut fewer = clients.clone();
                    fewer.remove(i);
                    Fault::IsolateLeaderWith { clients: fewer, pause_ms: *pause_ms }
                })
                .collect();
            out.extend(
                smaller_u64(*pause_ms, 0)
                    .into_iter()
                    .map(|pause_ms| Fault::IsolateLeaderWith { clients: clients.clone(), pause_ms }),
            );
            out
        }
        Fault::Partition { sides } => fewer_cut_off(sides),
        Fault::ClockStep { actor, delta_ms } => {
            smaller_i64(*delta_ms, 1).into_iter().map(|delta_ms| Fault::ClockStep { actor: *actor, delta_ms }).collect()
        }
        Fault::ClockRate { actor, ppm } => {
            smaller_i64(*ppm, 0).into_iter().map(|ppm| Fault::ClockRate { actor: *actor, ppm }).collect()
        }
        Fault::DiskStall { node, fsync_ms } if *fsync_ms > 0 => {
            smaller_u64(*fsync_ms, 1).into_iter().map(|fsync_ms| Fault::DiskStall { node: *node, fsync_ms }).collect()
        }
        Fault::LeaderChurn { for_ms, within_ms, down_ms } => {
            let shorter = smaller_u64(*for_ms, 1).into_iter().map(|for_ms| Fault::LeaderChurn {
                for_ms,
                within_ms: *within_ms,
                down_ms: *down_ms,
            });
            let sooner_back = smaller_u64(*down_ms, 1).into_iter().map(|down_ms| Fault::LeaderChurn {
                for_ms: *for_ms,
                within_ms: *within_ms,
                down_ms,
            });
            shorter.chain(sooner_back).collect()
        }
        _ => Vec::new(),
    }
}

/// A partition with one member fewer on some side: workers first, then
/// servers; a side left empty goes, and two sides must remain.
fn fewer_cut_off(sides: &[Vec<Addr>]) -> Vec<Fault> {
    let mut out = Vec::new();
    for servers_too in [false, true] {
        for (i, side) in sides.iter().enumerate() {
            for (j, addr) in side.iter().enumerate() {
                if matches!(addr, Addr::Server(_)) != servers_too {
                    continue;
                }
                let mut fewer: Vec<Vec<Addr>> = sides.to_vec();
                fewer[i].remove(j);
                fewer.retain(|side| !side.is_empty());
                if fewer.len() >= 2 {
                    out.push(Fault::Partition { sides: fewer });
                }
            }
        }
    }
    out
}

/// Faults that end something (a heal, a restart): they move earlier; all
/// others move later. Initial clock rates (at 0) stay.
fn ends_something(fault: &Fault) -> bool {
    matches!(
        fault,
        Fault::Heal
            | Fault::Restart { .. }
            | Fault::RestoreNode { .. }
            | Fault::RestartResource
            | Fault::DiskStall { fsync_ms: 0, .. }
    )
}

/// Moves event `i` toward its neighbour: by three quarters, a half, a quarter of the room.
fn retime(s: &mut Shrinker, i: usize) {
    let at_ms = s.best.plan[i].at_ms;
    if at_ms == 0 {
        return;
    }
    let earlier = ends_something(&s.best.plan[i].fault);
    let room_ms = if earlier {
        let previous_ms = if i == 0 { 0 } else { s.best.plan[i - 1].at_ms };
        at_ms - previous_ms
    } else {
        let next_ms = s.best.plan.get(i + 1).map_or(s.best.model.safety_ms.saturating_sub(1), |e| e.at_ms);
        next_ms.saturating_sub(at_ms)
    };
    for part in [room_ms * 3 / 4, room_ms / 2, room_ms / 4] {
        if part == 0 || s.stopped() {
            continue;
        }
        let moved_ms = if earlier { at_ms - part } else { at_ms + part };
        if moved_ms == 0 {
            continue;
        }
        if try_event(s, i, FaultEvent { at_ms: moved_ms, ..s.best.plan[i].clone() }) {
            return;
        }
    }
}
