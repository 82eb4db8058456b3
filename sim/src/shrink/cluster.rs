//! The cluster pass: a 5-server run (or larger) tried on 3 servers, first
//! keeping `n0..n2` (the others leave with their events), then renaming the
//! servers the plan names to `n0`, `n1`, … so their faults stay.

use super::renumber::{servers_named, with_nodes};
use super::{Case, Shrinker};
use crate::model::Model;
use fencelock::NodeId;

const NODES_SMALL: u8 = 3;

pub(crate) fn reduce(s: &mut Shrinker) {
    let nodes = s.best.model.nodes;
    if nodes <= NODES_SMALL {
        return;
    }
    let model = Model { nodes: NODES_SMALL, ..s.best.model.clone() };
    let kept = with_nodes(&s.best.plan, &|n| (n.0 < NODES_SMALL).then_some(n));
    if s.attempt(Case { model: model.clone(), plan: kept, seed: s.best.seed }, true) {
        return;
    }
    // The named servers first, then the others, take the small cluster's ids.
    let named = servers_named(&s.best.plan);
    let order: Vec<NodeId> =
        named.iter().copied().chain((0..nodes).map(NodeId).filter(|n| !named.contains(n))).collect();
    let renamed = with_nodes(&s.best.plan, &|n| {
        let rank = order.iter().position(|o| *o == n).expect("every server has a rank");
        (rank < usize::from(NODES_SMALL)).then_some(NodeId(rank as u8))
    });
    s.attempt(Case { model, plan: renamed, seed: s.best.seed }, true);
}
