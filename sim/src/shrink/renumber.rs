//! Rewriting a plan when workers or servers leave the model: ids are dense
//! (`c0..c{clients}`, `n0..n{nodes}`), so removing one renumbers the rest,
//! and every event that names them is rewritten the same way. An event whose
//! only actor is gone is dropped; a list (a partition side, the workers
//! isolated with a leader) loses the member; a partition left with fewer
//! than two sides cuts nothing and is dropped.

use crate::faults::{Fault, FaultEvent};
use crate::history::Actor;
use crate::machine::net::Addr;
use fencelock::{ClientId, NodeId};

/// Where each old id goes (`None`: removed).
pub struct IdMap<'a> {
    pub client: &'a dyn Fn(ClientId) -> Option<ClientId>,
    pub node: &'a dyn Fn(NodeId) -> Option<NodeId>,
}

/// The plan without worker `gone`: higher worker ids move down by one.
pub fn without_client(plan: &[FaultEvent], gone: u32) -> Vec<FaultEvent> {
    let client = |c: ClientId| match c.0.cmp(&gone) {
        std::cmp::Ordering::Less => Some(c),
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Greater => Some(ClientId(c.0 - 1)),
    };
    remap(plan, &IdMap { client: &client, node: &|n| Some(n) })
}

/// The plan with its servers renamed by `node` (`None`: the server is gone).
pub fn with_nodes(plan: &[FaultEvent], node: &dyn Fn(NodeId) -> Option<NodeId>) -> Vec<FaultEvent> {
    remap(plan, &IdMap { client: &|c| Some(c), node })
}

pub fn remap(plan: &[FaultEvent], map: &IdMap<'_>) -> Vec<FaultEvent> {
    plan.iter()
        .filter_map(|event| Some(FaultEvent { at_ms: event.at_ms, fault: remap_fault(&event.fault, map)? }))
        .collect()
}

fn actor(a: Actor, map: &IdMap<'_>) -> Option<Actor> {
    match a {
        Actor::Server(n) => (map.node)(n).map(Actor::Server),
        Actor::Client(c) => (map.client)(c).map(Actor::Client),
        Actor::Resource => Some(Actor::Resource),
    }
}

fn addr(a: Addr, map: &IdMap<'_>) -> Option<Addr> {
    match a {
        Addr::Server(n) => (map.node)(n).map(Addr::Server),
        Addr::Client(c) => (map.client)(c).map(Addr::Client),
        Addr::Resource => Some(Addr::Resource),
    }
}

fn remap_fault(fault: &Fault, map: &IdMap<'_>) -> Option<Fault> {
    let node = |n: &NodeId| (map.node)(*n);
    Some(match fault {
        Fault::Partition { sides } => {
            let sides: Vec<Vec<Addr>> = sides
                .iter()
                .map(|side| side.iter().filter_map(|a| addr(*a, map)).collect::<Vec<_>>())
                .filter(|side| !side.is_empty())
                .collect();
            if sides.len() < 2 {
                return None;
            }
            Fault::Partition { sides }
        }
        Fault::OneWay { from, to } => Fault::OneWay { from: addr(*from, map)?, to: addr(*to, map)? },
        Fault::IsolateLeaderWith { clients, pause_ms } => Fault::IsolateLeaderWith {
            clients: clients.iter().filter_map(|c| (map.client)(*c)).collect(),
            pause_ms: *pause_ms,
        },
        Fault::CutClient { client } => Fault::CutClient { client: (map.client)(*client)? },
        Fault::Crash { node: n, torn } => Fault::Crash { node: node(n)?, torn: *torn },
        Fault::Restart { node: n } => Fault::Restart { node: node(n)? },
        Fault::BackupNode { node: n } => Fault::BackupNode { node: node(n)? },
        Fault::RestoreNode { node: n } => Fault::RestoreNode { node: node(n)? },
        Fault::DiskStall { node: n, fsync_ms } => Fault::DiskStall { node: node(n)?, fsync_ms: *fsync_ms },
        Fault::Pause { actor: a, ms } => Fault::Pause { actor: actor(*a, map)?, ms: *ms },
        Fault::ClockRate { actor: a, ppm } => Fault::ClockRate { actor: actor(*a, map)?, ppm: *ppm },
        Fault::ClockStep { actor: a, delta_ms } => Fault::ClockStep { actor: actor(*a, map)?, delta_ms: *delta_ms },
        Fault::IsolateLeader
        | Fault::CrashLeader { .. }
        | Fault::PauseLeader { .. }
        | Fault::StallHolder { .. }
        | Fault::StallUntilOvertaken(_)
        | Fault::StallOnGrant { .. }
        | Fault::LoseWriteAnswer
        | Fault::ElectionStorm { .. }
        | Fault::Heal
        | Fault::BackupCluster
        | Fault::RestoreCluster
        | Fault::CrashResource
        | Fault::RestartResource
        | Fault::BackupResource
        | Fault::RestoreResource
        | Fault::LeaderChurn { .. }
        | Fault::AckCrashes { .. }
        | Fault::RenewStrikes { .. }
        | Fault::AckAmnesia { .. }
        | Fault::GrantStrikes { .. }
        | Fault::VoteStrikes { .. }
        | Fault::FenceStrikes { .. }
        | Fault::LateRenewals { .. }
        | Fault::Figure8Strikes { .. } => fault.clone(),
    })
}

/// The servers a plan names, in id order.
pub fn servers_named(plan: &[FaultEvent]) -> Vec<NodeId> {
    let named: std::collections::BTreeSet<NodeId> = plan
        .iter()
        .flat_map(|event| event.fault.named())
        .filter_map(|actor| match actor {
            Actor::Server(node) => Some(node),
            _ => None,
        })
        .collect();
    named.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(at_ms: u64, fault: Fault) -> FaultEvent {
        FaultEvent { at_ms, fault }
    }

    #[test]
    fn removing_a_worker_renumbers_the_others_and_drops_its_own_events() {
        let plan = vec![
            at(0, Fault::ClockRate { actor: Actor::Client(ClientId(1)), ppm: 5 }),
            at(0, Fault::ClockRate { actor: Actor::Client(ClientId(2)), ppm: 7 }),
            at(10, Fault::IsolateLeaderWith { clients: vec![ClientId(0), ClientId(1), ClientId(3)], pause_ms: 9 }),
            at(20, Fault::Partition { sides: vec![vec![Addr::Client(ClientId(1))], vec![Addr::Server(NodeId(0))]] }),
            at(30, Fault::CutClient { client: ClientId(3) }),
        ];
        let shrunk = without_client(&plan, 1);
        assert_eq!(
            shrunk,
            vec![
                at(0, Fault::ClockRate { actor: Actor::Client(ClientId(1)), ppm: 7 }),
                at(10, Fault::IsolateLeaderWith { clients: vec![ClientId(0), ClientId(2)], pause_ms: 9 }),
                at(30, Fault::CutClient { client: ClientId(2) }),
            ]
        );
    }

    #[test]
    fn servers_beyond_a_smaller_cluster_leave_with_their_events() {
        let plan = vec![
            at(5, Fault::Crash { node: NodeId(4), torn: false }),
            at(6, Fault::Crash { node: NodeId(1), torn: true }),
            at(
                7,
                Fault::Partition {
                    sides: vec![
                        vec![Addr::Server(NodeId(0)), Addr::Server(NodeId(3))],
                        vec![Addr::Server(NodeId(1))],
                        vec![Addr::Server(NodeId(4))],
                    ],
                },
            ),
        ];
        let shrunk = with_nodes(&plan, &|n| (n.0 < 3).then_some(n));
        assert_eq!(servers_named(&plan), vec![NodeId(0), NodeId(1), NodeId(3), NodeId(4)]);
        assert_eq!(
            shrunk,
            vec![
                at(6, Fault::Crash { node: NodeId(1), torn: true }),
                at(7, Fault::Partition { sides: vec![vec![Addr::Server(NodeId(0))], vec![Addr::Server(NodeId(1))]] }),
            ]
        );
    }
}
