//! The shift pass: the story told sooner. A plan found late in a long run
//! often needs only what happens around its last faults, not the seconds of
//! workload and faults before them (each second is some 40 trace lines).
//! First the plan's tail from some event on (with the clocks' initial
//! rates, at 0) is moved to the start of the run, the events before it
//! left out — the shortest tail first, the whole plan last; then each gap
//! between two events is closed, the later events moving with it. A move
//! is kept only if the property still fails and the run, cut just after
//! its violation again (`length::cut`), has fewer trace lines.

use super::length::window_ms;
use super::{length, Case, Shrinker};
use crate::faults::FaultEvent;
use crate::model::Model;

/// Where the tail's first event is tried, soonest first: the cluster has
/// elected a leader and granted locks by 300 ms in most seeds.
const FIRST_AT_MS: [u64; 5] = [300, 1_000, 2_000, 4_000, 8_000];

/// A gap is closed by these shares of it, tried in order.
const GAP_SHARES_PERCENT: [u64; 3] = [75, 50, 25];

/// Gaps shorter than this stay: a few lines at most to win, a run to pay.
const GAP_MS_MIN: u64 = 200;

/// Plans longer than this only move as a whole: closing each gap costs a
/// few runs per event.
const GAPS_EVENTS_MAX: usize = 16;

pub(crate) fn earlier(s: &mut Shrinker) {
    let Some(first) = s.best.plan.iter().position(|e| e.at_ms > 0) else { return };
    'tails: for from in (first..s.best.plan.len()).rev() {
        let from_ms = s.best.plan[from].at_ms;
        for target_ms in FIRST_AT_MS {
            if target_ms >= from_ms || s.stopped() {
                break;
            }
            if try_shift(s, first, from, from_ms - target_ms) {
                break 'tails;
            }
        }
    }
    if s.best.plan.len() > GAPS_EVENTS_MAX {
        return;
    }
    let mut i = first + 1;
    while i < s.best.plan.len() && !s.stopped() {
        let gap_ms = s.best.plan[i].at_ms.saturating_sub(s.best.plan[i - 1].at_ms);
        if gap_ms >= GAP_MS_MIN {
            for share in GAP_SHARES_PERCENT {
                if try_shift(s, i, i, gap_ms * share / 100) {
                    break;
                }
            }
        }
        i += 1;
    }
}

/// `plan` with the events from `from` on `by_ms` earlier and those from
/// `gone` up to `from` left out; `None` where an event would move to 0 or
/// before the event ahead of it. The shift pass and the repair's trim both
/// move stories sooner this way.
pub(crate) fn moved_sooner(plan: &[FaultEvent], gone: usize, from: usize, by_ms: u64) -> Option<Vec<FaultEvent>> {
    let floor_ms = if gone == 0 { 0 } else { plan[gone - 1].at_ms };
    let mut moved = plan[..gone].to_vec();
    for event in &plan[from..] {
        match event.at_ms.checked_sub(by_ms) {
            Some(at_ms) if at_ms > 0 && at_ms >= floor_ms => moved.push(FaultEvent { at_ms, ..event.clone() }),
            _ => return None,
        }
    }
    Some(moved)
}

/// The events from `from` on moved `by_ms` earlier (none to 0 or before the
/// event ahead of them), the events from `gone` up to `from` left out; kept
/// when the property still fails and the cut run is shorter in trace lines
/// than the best one. The candidate's run is shortened by as much (with the
/// slack `minimize` gives), so a move that fails costs a short run.
fn try_shift(s: &mut Shrinker, gone: usize, from: usize, by_ms: u64) -> bool {
    if by_ms == 0 || s.stopped() {
        return false;
    }
    let Some(plan) = moved_sooner(&s.best.plan, gone, from, by_ms) else { return false };
    let old = &s.best.model;
    let safety_ms = match old.liveness_ms {
        0 => (old.safety_ms - by_ms + window_ms(old.safety_ms - by_ms)).min(old.safety_ms),
        _ => old.safety_ms,
    };
    let model = Model { safety_ms, ..old.clone() };
    let lines = s.best_outcome.history.events().len();
    let saved = (s.best.clone(), s.best_outcome.clone());
    if !s.attempt(Case { plan, model, seed: s.best.seed }, false) {
        return false;
    }
    length::cut(s);
    if s.best_outcome.history.events().len() < lines {
        return true;
    }
    (s.best, s.best_outcome) = saved;
    false
}
