//! The workload pass: one key instead of several, workers that play no part
//! removed (the plan renumbered with them), then the pace: no stalls of lock
//! holders drawn by the workload, shorter leases, and each worker's jobs
//! capped (`jobs_max`). A change is kept only if the trace does not grow.

use super::renumber::without_client;
use super::{Case, Shrinker};
use crate::model::Model;

/// The lease divided by these, the shortest first.
const LEASE_DIVISORS: [u64; 2] = [4, 2];

/// Leases shorter than this are not tried: a few election timeouts.
const LEASE_MS_MIN: u64 = 400;

/// Job caps tried, smallest first.
const JOBS_TRIED: [u32; 10] = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32];

pub(crate) fn reduce(s: &mut Shrinker) {
    if s.best.model.keys > 1 {
        let model = Model { keys: 1, ..s.best.model.clone() };
        s.attempt(Case { model, ..s.best.clone() }, true);
    }
    // Highest id first: removing one renumbers only the ids above it.
    for gone in (0..s.best.model.clients).rev() {
        let model = Model { clients: s.best.model.clients - 1, ..s.best.model.clone() };
        let plan = without_client(&s.best.plan, gone);
        s.attempt(Case { model, plan, seed: s.best.seed }, true);
    }
    if s.best.model.clients == 0 {
        return;
    }
    pace(s);
}

/// How the workers work: with or without the stalls the workload draws for
/// lock holders, with the lease as it is or shorter (a story that waits for
/// one to run out is told sooner: a job's work is drawn as a share of the
/// lease), and each with the smallest job cap that still fails. Each change
/// reshuffles the run, so the first that fails is not the best: every
/// combination is tried and the one with the fewest trace lines kept.
fn pace(s: &mut Shrinker) {
    let now = s.best.model.clone();
    let mut leases = vec![now.lease_ms];
    leases.extend(LEASE_DIVISORS.iter().map(|d| now.lease_ms / d).filter(|ms| *ms >= LEASE_MS_MIN));
    let stalls: &[bool] = if now.stalls { &[true, false] } else { &[false] };
    let mut best: Option<(usize, Case, crate::run::seed::Outcome)> = None;
    for &stalls in stalls {
        for &lease_ms in &leases {
            let paced = Model { stalls, lease_ms, ..now.clone() };
            let caps = JOBS_TRIED.iter().copied().filter(|&jobs| now.jobs_max.is_none_or(|cap| jobs < cap));
            for jobs_max in caps.map(Some).chain([now.jobs_max]) {
                let candidate = Case { model: Model { jobs_max, ..paced.clone() }, ..s.best.clone() };
                if candidate == s.best {
                    break;
                }
                let Some(outcome) = s.run(&candidate) else { return };
                if s.shows(&outcome) {
                    let lines = outcome.history.events().len();
                    if best.as_ref().is_none_or(|(fewest, _, _)| lines < *fewest) {
                        best = Some((lines, candidate, outcome));
                    }
                    break;
                }
            }
        }
    }
    if let Some((lines, case, outcome)) = best {
        if lines <= s.best_outcome.history.events().len() {
            s.best = case;
            s.best_outcome = outcome;
        }
    }
}
