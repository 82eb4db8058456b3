//! The cluster pass: a 5-server run (or larger) tried on 3 servers, then on
//! one (a story told by the lock service or the resource alone needs no
//! replication, and each command is then one applied line, not three or
//! five). For each size, first keeping `n0..` (the others leave with their
//! events), then renaming the servers the plan names to `n0`, `n1`, … so
//! their faults stay.

use super::renumber::{servers_named, with_nodes};
use super::{Case, Shrinker};
use crate::model::Model;
use fencelock::NodeId;

/// Cluster sizes tried, largest first: each from the last one kept.
const NODES_TRIED: [u8; 2] = [3, 1];

pub(crate) fn reduce(s: &mut Shrinker) {
    for small in NODES_TRIED {
        if s.best.model.nodes > small {
            to(s, small);
        }
    }
}

fn to(s: &mut Shrinker, small: u8) {
    let nodes = s.best.model.nodes;
    let model = Model { nodes: small, ..s.best.model.clone() };
    let kept = with_nodes(&s.best.plan, &|n| (n.0 < small).then_some(n));
    if s.attempt(Case { model: model.clone(), plan: kept.clone(), seed: s.best.seed }, true) {
        return;
    }
    // The named servers first, then the others, take the small cluster's ids.
    let named = servers_named(&s.best.plan);
    let order: Vec<NodeId> =
        named.iter().copied().chain((0..nodes).map(NodeId).filter(|n| !named.contains(n))).collect();
    let renamed = with_nodes(&s.best.plan, &|n| {
        let rank = order.iter().position(|o| *o == n).expect("every server has a rank");
        (rank < usize::from(small)).then_some(NodeId(rank as u8))
    });
    if renamed != kept {
        s.attempt(Case { model, plan: renamed, seed: s.best.seed }, true);
    }
}
