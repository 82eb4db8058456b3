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
    // On the tick grid, and between two ticks (the tick at 90 ms has passed:
    // a ticking server campaigns at 100 ms).
    for (storm_ms, tick_ms) in [(90, 90), (95, 100)] {
        for seed in 0..6 {
            let plan = vec![FaultEvent { at_ms: storm_ms, fault: Fault::ElectionStorm { servers: 3 } }];
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
            assert_eq!(nodes.len(), 3, "seed {seed}: three servers campaign: {first:?}");
            // At the next tick (drift moves it by microseconds), not at an election timeout.
            let tick_us = tick_ms * 1_000;
            assert!(
                first.iter().all(|(at_us, _)| (tick_us..tick_us + 1_000).contains(at_us)),
                "seed {seed}, storm at {storm_ms} ms: {first:?}"
            );
            assert!(outcome.ok, "seed {seed}: {:?}", outcome.violations);
        }
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

/// The first instant `node` became a pre-candidate after `after_us`.
fn pre_candidacy(outcome: &fencesim::run::seed::Outcome, node: NodeId, after_us: u64) -> Option<u64> {
    outcome.history.events().iter().find_map(|event| match event.kind {
        EventKind::Role { node: n, role: Role::PreCandidate, .. } if n == node && event.at_us > after_us => {
            Some(event.at_us)
        }
        _ => None,
    })
}

#[test]
fn a_pause_inside_a_sleep_delays_an_election_timeout_by_the_pause_alone() {
    // Three servers cut apart at 1 s: a follower sleeps until its election
    // timeout (100-200 ms after the last heartbeat) runs out. A 60 ms pause
    // inside that sleep loses the ticks in the pause, no more, ticking or tickless.
    let quiet = Model { nodes: 3, clients: 0, safety_ms: 3_000, liveness_ms: 0, stalls: false, ..Model::default() };
    let servers = (0..3).map(|n| vec![fencesim::machine::net::Addr::Server(NodeId(n))]).collect();
    let cut = vec![FaultEvent { at_ms: 1_000, fault: Fault::Partition { sides: servers } }];
    for seed in 0..6 {
        let delays: Vec<u64> = [Some(false), Some(true)]
            .into_iter()
            .map(|ticks| {
                let model = Model { tickless: ticks, ..quiet.clone() };
                let base = run_plan(seed, &model, cut.clone());
                let leader = base
                    .history
                    .events()
                    .iter()
                    .filter(|event| event.at_us < 1_000_000)
                    .filter_map(|event| match event.kind {
                        EventKind::Role { node, role: Role::Leader, .. } => Some(node),
                        _ => None,
                    })
                    .next_back()
                    .expect("a leader within the first second");
                let node = NodeId((leader.0 + 1) % 3);
                let on_time = pre_candidacy(&base, node, 1_000_000).expect("a pre-candidacy after the cut");
                // Off the tick grid (a tick at the pause's instant would go either way).
                let mut plan = cut.clone();
                plan.push(FaultEvent { at_ms: 1_025, fault: Fault::Pause { actor: node.into(), ms: 60 } });
                let late = pre_candidacy(&run_plan(seed, &model, plan), node, 1_000_000).expect("one when paused");
                late - on_time
            })
            .collect();
        let (ticking, tickless) = (delays[0], delays[1]);
        // The ticks in the pause are lost (one is taken at the resume)...
        assert!((30_000..=70_000).contains(&ticking), "seed {seed}: a 60 ms pause delayed the timeout {ticking} us");
        // ...and a tickless server loses no others: it wakes at the resume.
        assert!(
            tickless.abs_diff(ticking) <= 1_000,
            "seed {seed}: delayed {ticking} us ticking, {tickless} us tickless"
        );
    }
}
