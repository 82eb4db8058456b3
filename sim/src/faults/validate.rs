//! The check of a fault plan read from a file (`replay --fault-file`): bad
//! input is one clear error line, never a panic inside the simulation.

use super::{Fault, FaultEvent, EVENTS_MAX};
use crate::actor::Actor;
use crate::machine::net::Addr;
use crate::model::Model;
use fencelock::{ClientId, NodeId};

/// Checks a plan read from a file against `model`: every server, worker and
/// address it names exists, and every event but the initial clock rates is
/// inside the safety phase. The error names the first offending event.
pub fn validate(plan: &[FaultEvent], model: &Model) -> Result<(), String> {
    if plan.len() > EVENTS_MAX {
        return Err(format!("a fault plan holds at most {EVENTS_MAX} events, got {}", plan.len()));
    }
    let node_ok = |node: &NodeId| node.0 < model.nodes;
    let client_ok = |client: &ClientId| client.0 < model.clients;
    let addr_ok = |addr: &Addr| match addr {
        Addr::Server(node) => node_ok(node),
        Addr::Client(client) => client_ok(client),
        Addr::Resource => true,
    };
    let actor_ok = |actor: &Actor| match actor {
        Actor::Server(node) => node_ok(node),
        Actor::Client(client) => client_ok(client),
        Actor::Resource => true,
    };
    for (i, event) in plan.iter().enumerate() {
        let names_ok = match &event.fault {
            Fault::Partition { sides } => sides.iter().flatten().all(addr_ok),
            Fault::OneWay { from, to } => addr_ok(from) && addr_ok(to),
            Fault::IsolateLeaderWith { clients, .. } => clients.iter().all(client_ok),
            Fault::CutClient { client } => client_ok(client),
            Fault::Crash { node, .. }
            | Fault::Restart { node }
            | Fault::BackupNode { node }
            | Fault::RestoreNode { node }
            | Fault::DiskStall { node, .. } => node_ok(node),
            Fault::Pause { actor, .. } | Fault::ClockRate { actor, .. } | Fault::ClockStep { actor, .. } => {
                actor_ok(actor)
            }
            Fault::IsolateLeader
            | Fault::Heal
            | Fault::BackupCluster
            | Fault::RestoreCluster
            | Fault::CrashResource
            | Fault::RestartResource
            | Fault::LeaderChurn { .. } => true,
        };
        if !names_ok {
            return Err(format!(
                "event {i} ({} at {} ms) names a server or worker the model does not have ({} servers, {} workers)",
                event.fault, event.at_ms, model.nodes, model.clients
            ));
        }
        if event.at_ms >= model.safety_ms && !(event.at_ms == 0 && matches!(event.fault, Fault::ClockRate { .. })) {
            return Err(format!(
                "event {i} ({} at {} ms) is not inside the safety phase (0..{} ms)",
                event.fault, event.at_ms, model.safety_ms
            ));
        }
    }
    Ok(())
}
