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

/// In 4 seeds, `fault` at `at_ms` strikes whoever leads at that instant
/// (`struck`) and lets it go `back_ms` later (`back`).
#[track_caller]
fn strikes_the_leader(
    fault: Fault,
    at_ms: u64,
    back_ms: u64,
    struck: fn(Actor) -> EventKind,
    back: fn(Actor) -> EventKind,
) {
    let (at_us, back_us) = (at_ms * 1_000, (at_ms + back_ms) * 1_000);
    for seed in 0..4 {
        let outcome = run_plan(seed, &model(), at(at_ms, fault.clone()));
        let events = outcome.history.events();
        let leader = leader_before(events, at_us);
        let (hit, freed) = (struck(leader), back(leader));
        let kind_of = |wanted: &EventKind| std::mem::discriminant(wanted);
        let first = first_after(events, at_us, |kind| kind_of(kind) == kind_of(&hit));
        assert_eq!((first.at_us, &first.kind), (at_us, &hit), "seed {seed}");
        let then = first_after(events, at_us, |kind| kind_of(kind) == kind_of(&freed));
        assert_eq!((then.at_us, &then.kind), (back_us, &freed), "seed {seed}");
    }
}

#[test]
fn crash_leader_crashes_whoever_leads_and_brings_it_back() {
    let (crashed, restarted) = (|actor| EventKind::Crashed { actor }, |actor| EventKind::Restarted { actor });
    strikes_the_leader(Fault::CrashLeader { torn: false, down_ms: 700 }, 3_000, 700, crashed, restarted);
}

#[test]
fn pause_leader_stalls_whoever_leads() {
    let (paused, resumed) = (|actor| EventKind::Paused { actor }, |actor| EventKind::Resumed { actor });
    strikes_the_leader(Fault::PauseLeader { ms: 300 }, 2_500, 300, paused, resumed);
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
