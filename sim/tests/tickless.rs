//! Tickless servers (the model key `tickless`, on unless `false`): servers
//! sleep through ticks that would only advance Raft's timers and make them
//! up when they wake. The protocol must be the one a ticking run drives: the same heartbeats, the same safety,
//! the same flaws caught, a storm's campaign at the tick it falls on.

use fencelock::raft::Role;
use fencelock::{NodeId, Property, Variant};
use fencesim::faults::{Fault, FaultEvent};
use fencesim::history::EventKind;
use fencesim::model::Model;
use fencesim::run::seed::{run_plan, run_seed};
use std::collections::BTreeSet;

fn tickless(model: Model) -> Model {
    Model { tickless: Some(true), ..model }
}

#[test]
fn an_idle_cluster_sends_the_same_heartbeats_ticking_or_not() {
    // No workers, no faults: only the leader's heartbeats and their answers.
    let idle = Model { clients: 0, safety_ms: 20_000, liveness_ms: 0, ..Model::default() };
    for seed in 0..3 {
        let ticking = run_plan(seed, &Model { tickless: Some(false), ..idle.clone() }, Vec::new());
        let sleeping = run_plan(seed, &tickless(idle.clone()), Vec::new());
        assert!(ticking.ok && sleeping.ok, "seed {seed}");
        assert_eq!(sleeping.elections, ticking.elections, "seed {seed}: a tickless follower timed out");
        // What ticking sends, within the first election's jitter.
        let (a, b) = (ticking.messages as f64, sleeping.messages as f64);
        assert!((a - b).abs() / a < 0.02, "seed {seed}: {a} messages ticking, {b} tickless");
        // A heartbeat to each follower and its answer every heartbeat_ms, for 20 s, less the first election.
        let followers = f64::from(idle.nodes - 1);
        let heartbeats = 20_000.0 / idle.heartbeat_ms as f64;
        assert!(b > 0.95 * 2.0 * followers * heartbeats, "seed {seed}: only {b} messages in 20 s");
    }
}

#[test]
fn a_storm_wakes_a_tickless_server_and_its_campaign_comes_at_the_next_tick() {
    // Before any election timer (100-200 ms) runs out: nobody leads yet.
    let quiet = tickless(Model { clients: 0, safety_ms: 2_000, liveness_ms: 0, stalls: false, ..Model::default() });
    for seed in 0..6 {
        let plan = vec![FaultEvent { at_ms: 90, fault: Fault::ElectionStorm { servers: 3 } }];
        let outcome = run_plan(seed, &quiet, plan);
        let first: Vec<(u64, NodeId)> = outcome
            .history
            .events()
            .iter()
            .filter_map(|event| match event.kind {
                EventKind::Role { node, role: Role::PreCandidate, .. } => Some((event.at_us, node)),
                _ => None,
            })
            .take(3)
            .collect();
        let nodes: BTreeSet<NodeId> = first.iter().map(|(_, node)| *node).collect();
        assert_eq!(nodes, BTreeSet::from([NodeId(0), NodeId(1), NodeId(2)]), "seed {seed}: {first:?}");
        // At the tick at 90 ms (drift moves it by microseconds), not at an election timeout.
        assert!(first.iter().all(|(at_us, _)| (90_000..91_000).contains(at_us)), "seed {seed}: {first:?}");
        assert!(outcome.ok, "seed {seed}: {:?}", outcome.violations);
    }
}

#[test]
fn tickless_runs_stay_safe_and_still_catch_the_flawed_variants() {
    for seed in 0..40 {
        let outcome = run_seed(seed, &tickless(Model::default()));
        assert!(outcome.ok, "seed {seed}: {:?}", outcome.violations);
    }
    // Flaws that live in timers and leases: a tickless server must still
    // time them out where a ticking one does.
    for (variant, property) in [
        (Variant::NoLeaseRestartOnNewLeader, Property::LeaseExclusion),
        (Variant::ServeWithoutQuorum, Property::LeaseExclusion),
        (Variant::WaitersNeverTimeOut, Property::Answered),
        (Variant::NeverCommit, Property::Progress),
    ] {
        let model = tickless(Model::declared(variant));
        let caught = (0..60).find(|&seed| run_seed(seed, &model).violations.iter().any(|v| v.property == property));
        assert!(caught.is_some(), "{variant:?}: {property:?} not broken in 60 tickless seeds");
    }
}
