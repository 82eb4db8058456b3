//! The faults that name a role, not a node (`CrashLeader`, `PauseLeader`,
//! `StallHolder`): each strikes whoever plays the role when it fires.

use fencelock::raft::Role;
use fencesim::faults::{Fault, FaultEvent};
use fencesim::history::{Actor, Event, EventKind};
use fencesim::model::Model;
use fencesim::run::seed::run_plan;

fn model() -> Model {
    Model { safety_ms: 8_000, liveness_ms: 0, stalls: false, ..Model::default() }
}

fn at(at_ms: u64, fault: Fault) -> Vec<FaultEvent> {
    vec![FaultEvent { at_ms, fault }]
}

/// The server that last reported itself leader of the highest term before `at_us`.
fn leader_before(events: &[Event], at_us: u64) -> Actor {
    events
        .iter()
        .take_while(|event| event.at_us < at_us)
        .filter_map(|event| match event.kind {
            EventKind::Role { node, role: Role::Leader, term, .. } => Some((term, node)),
            _ => None,
        })
        .max()
        .map(|(_, node)| Actor::Server(node))
        .expect("a leader within the first seconds")
}

fn first_after(events: &[Event], at_us: u64, wanted: impl Fn(&EventKind) -> bool) -> &Event {
    events.iter().find(|event| event.at_us >= at_us && wanted(&event.kind)).expect("the event happened")
}

#[test]
fn crash_leader_crashes_whoever_leads_and_brings_it_back() {
    for seed in 0..4 {
        let outcome = run_plan(seed, &model(), at(3_000, Fault::CrashLeader { torn: false, down_ms: 700 }));
        let events = outcome.history.events();
        let leader = leader_before(events, 3_000_000);
        let crashed = first_after(events, 3_000_000, |kind| matches!(kind, EventKind::Crashed { .. }));
        assert_eq!((crashed.at_us, &crashed.kind), (3_000_000, &EventKind::Crashed { actor: leader }), "seed {seed}");
        let back = first_after(events, 3_000_000, |kind| matches!(kind, EventKind::Restarted { .. }));
        assert_eq!((back.at_us, &back.kind), (3_700_000, &EventKind::Restarted { actor: leader }), "seed {seed}");
    }
}

#[test]
fn pause_leader_stalls_whoever_leads() {
    for seed in 0..4 {
        let outcome = run_plan(seed, &model(), at(2_500, Fault::PauseLeader { ms: 300 }));
        let events = outcome.history.events();
        let leader = leader_before(events, 2_500_000);
        let paused = first_after(events, 2_500_000, |kind| matches!(kind, EventKind::Paused { .. }));
        assert_eq!((paused.at_us, &paused.kind), (2_500_000, &EventKind::Paused { actor: leader }), "seed {seed}");
        let resumed = first_after(events, 2_500_000, |kind| matches!(kind, EventKind::Resumed { .. }));
        assert_eq!((resumed.at_us, &resumed.kind), (2_800_000, &EventKind::Resumed { actor: leader }), "seed {seed}");
    }
}

#[test]
fn stall_holder_stalls_the_next_writer_once_and_only_then() {
    for seed in 0..4 {
        let quiet = run_plan(seed, &model(), Vec::new());
        let stalls = |events: &[Event]| -> Vec<(u64, u64)> {
            events
                .iter()
                .filter_map(|event| match event.kind {
                    EventKind::Stalled { ms, .. } => Some((event.at_us, ms)),
                    _ => None,
                })
                .collect()
        };
        assert!(stalls(quiet.history.events()).is_empty(), "stalls = false draws none");
        let outcome = run_plan(seed, &model(), at(1_000, Fault::StallHolder { ms: 1_234 }));
        let stalled = stalls(outcome.history.events());
        assert_eq!(stalled.len(), 1, "seed {seed}: exactly the planned stall");
        assert!(stalled[0].0 >= 1_000_000 && stalled[0].1 == 1_234, "seed {seed}: {stalled:?}");
    }
}
