//! The workload pass: one key instead of several, workers that play no part
//! removed (the plan renumbered with them), and each worker's jobs capped
//! (`jobs_max`). A change is kept only if the trace does not grow.

use super::renumber::without_client;
use super::{Case, Shrinker};
use crate::model::Model;

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
    for jobs_max in JOBS_TRIED {
        if s.best.model.jobs_max.is_some_and(|now| jobs_max >= now) {
            return;
        }
        let model = Model { jobs_max: Some(jobs_max), ..s.best.model.clone() };
        if s.attempt(Case { model, ..s.best.clone() }, true) {
            return;
        }
    }
}
