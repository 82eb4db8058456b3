//! Real runs that restore: the protected resource from its backup, one
//! server from a stale copy of its data directory, and a one-way cut
//! between two servers, judged by the simulator's checker.
//!
//! The plan is written here, not drawn. The resource is backed up early;
//! the holder of the one key is stopped between its lease check and its
//! write for ten leases, and the others take the key and write above its
//! token. Every other worker is then paused, the resource is restored from
//! the backup (its highest token goes back below the stopped holder's) and
//! the stopped holder wakes and writes, while nobody else can. Under the
//! default protocol the restored resource refuses writes until it has
//! raised its floor from the lock service, so the late write is rejected;
//! under `resource-restore-naive` it trusts the restored token, takes the
//! late write, and the checker names `fenced-write`. Meanwhile server 1
//! crashes and comes back from its stale backup, and server 0 stops
//! sending to server 2 for a second.
//!
//! A second plan restores the whole cluster from a backup taken one and
//! a half seconds earlier, while three workers keep taking the key: the default
//! protocol raises the token counter into the new restore epoch, while
//! `restore-naive` issues the backup's tokens again and the checker names
//! `token-monotonic`.

use crate::common;

use fencelock::resource::WriteVerdict;
use fencelock::{ClientId, NodeId, Token, Variant};
use fencesim::actor::Actor;
use fencesim::checker::Property;
use fencesim::faults::{Fault, FaultEvent};
use fencesim::history::{Event, EventKind};
use fencesim::machine::net::Addr;
use fencesim::model::Model;
use fencesim::real::RealRun;

const LEASE_MS: u64 = 500;
const STALL_MS: u64 = 10 * LEASE_MS;
/// The stall is armed at 1 s; the holder to take it wakes 5 s after it did.
const STALL_ARMED_AT_MS: u64 = 1_000;
/// The restore: after the stopped holder's lease ran out and the others
/// wrote above it, before it wakes (it took the stall at 1 s at the earliest).
const RESTORE_AT_MS: u64 = 5_500;
/// How long the other workers are held, from just before the restore:
/// past the stopped holder's waking, however late it took the stall (its
/// job's work lasts at most three leases).
const HOLD_MS: u64 = 3_500;

fn plan() -> Vec<FaultEvent> {
    let at = |at_ms: u64, fault: Fault| FaultEvent { at_ms, fault };
    let mut plan = vec![
        at(500, Fault::BackupNode { node: NodeId(1) }),
        at(800, Fault::BackupResource),
        at(STALL_ARMED_AT_MS, Fault::StallHolder { ms: STALL_MS }),
    ];
    // Every worker but the stopped one (already stopped, so the pause passes
    // it by) is held from just before the restore until after the late write.
    for c in 0..3 {
        plan.push(at(RESTORE_AT_MS - 100, Fault::Pause { actor: Actor::Client(ClientId(c)), ms: HOLD_MS }));
    }
    plan.push(at(RESTORE_AT_MS, Fault::RestoreResource));
    plan.push(at(RESTORE_AT_MS + 500, Fault::Crash { node: NodeId(1), torn: false }));
    plan.push(at(RESTORE_AT_MS + 1_100, Fault::RestoreNode { node: NodeId(1) }));
    plan.push(at(RESTORE_AT_MS + 1_500, Fault::OneWay { from: Addr::Server(NodeId(0)), to: Addr::Server(NodeId(2)) }));
    plan.push(at(RESTORE_AT_MS + 2_500, Fault::Heal));
    plan
}

fn model(variant: Variant) -> Model {
    Model {
        nodes: 3,
        clients: 3,
        keys: 1,
        lease_ms: LEASE_MS,
        // Past the other workers' hold (8.9 s).
        safety_ms: 9_500,
        liveness_ms: 2_500,
        // Only the planned stall: the workload draws none of its own.
        stalls: false,
        variant,
        ..Model::default()
    }
}

/// The real runs of this file's tests (`common::planned_run`).
pub fn planned() -> Vec<common::Planned> {
    let planned = |test, model, plan| common::Planned { test, seed: 11, model, plan };
    vec![
        planned(RESTORED, model(Variant::Default), plan()),
        planned(NAIVE, model(Variant::ResourceRestoreNaive), plan()),
        planned(CLUSTER_RESTORED, cluster_model(Variant::Default), cluster_plan()),
        planned(CLUSTER_NAIVE, cluster_model(Variant::RestoreNaive), cluster_plan()),
    ]
}

const RESTORED: &str = "a_restored_resource_raises_its_floor_and_rejects_the_stopped_holders_write";
const NAIVE: &str = "a_naive_restore_takes_the_stopped_holders_write_and_is_caught";
const CLUSTER_RESTORED: &str = "a_cluster_restore_raises_the_token_floor_into_a_new_epoch";
const CLUSTER_NAIVE: &str = "a_naive_cluster_restore_issues_tokens_again_and_is_caught";

/// The real run planned for `test` (played beside the others), checked
/// that every fault of its `plan` was played; `real_run` checks that no
/// process of it outlives it.
fn play(test: &str, plan: Vec<FaultEvent>) -> RealRun {
    let (_temp, _dir, run) = common::planned_run(test);
    assert_eq!(run.played.len(), plan.len(), "every planned fault is played");
    assert!(run.skipped.is_empty());
    run
}

/// Checks what every run of the resource plan must show: the restores and
/// the floor in the history, and a stopped holder overtaken before the
/// restore. Returns the run and its late write.
fn run(test: &str) -> (RealRun, WriteVerdict) {
    let run = play(test, plan());
    let events = run.outcome.history.events();

    // The restore names the backup the runner recorded, so the checker pairs them.
    let backup_at_us = events
        .iter()
        .find(|e| e.kind == EventKind::Fault { fault: Fault::BackupResource })
        .map(|e| e.at_us)
        .expect("the backup is in the history");
    let restored = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::ResourceRestored { .. }))
        .expect("the restore tool recorded the restore");
    assert_eq!(restored.kind, EventKind::ResourceRestored { restore: 1, backup_at_us });
    let node_restored = events.iter().any(|e| matches!(e.kind, EventKind::NodeRestored { node: NodeId(1), .. }));
    assert!(node_restored, "server 1 came back from its backup");

    let (client, stalled_at_us) = events
        .iter()
        .find_map(|e| match e.kind {
            EventKind::Stalled { client, .. } => Some((client, e.at_us)),
            _ => None,
        })
        .expect("a worker took the armed stall");
    let late = first_write_after(events, client, restored.at_us).unwrap_or_else(|| {
        // What a slow machine made of the timing, for the next look.
        let writes: Vec<(u64, &EventKind)> = events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::WriteDone { client: c, .. } if *c == client))
            .map(|e| (e.at_us, &e.kind))
            .collect();
        panic!(
            "the stopped worker wrote after the restore: {client} stalled at {stalled_at_us} µs, the restore \
             was recorded at {} µs; its writes: {writes:?}",
            restored.at_us
        )
    });
    let token_late = late.1;
    // The situation the test is about: above the stopped holder's token,
    // another worker's write was accepted during the stall, before the restore.
    let overtaken = events.iter().any(|e| {
        e.at_us > stalled_at_us
            && e.at_us < restored.at_us
            && matches!(&e.kind, EventKind::WriteDone { client: other, token, verdict: WriteVerdict::Accepted, .. }
                if *other != client && *token > token_late)
    });
    let told: Vec<String> = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::WriteDone { .. }
                    | EventKind::Stalled { .. }
                    | EventKind::ResourceRestored { .. }
                    | EventKind::FloorRaised { .. }
                    | EventKind::Fault { .. }
                    | EventKind::Paused { .. }
                    | EventKind::Resumed { .. }
            )
        })
        .map(|e| format!("{} {:?}", e.at_us / 1_000, e.kind))
        .collect();
    assert!(
        overtaken,
        "no write above {token_late} was accepted during the stall (too slow a machine?):\n{}",
        told.join("\n")
    );
    (run, late.0)
}

/// The verdict and token of `client`'s first write done after `after_us`.
fn first_write_after(events: &[Event], client: ClientId, after_us: u64) -> Option<(WriteVerdict, Token)> {
    events.iter().filter(|e| e.at_us > after_us).find_map(|e| match &e.kind {
        EventKind::WriteDone { client: c, token, verdict, .. } if *c == client => Some((*verdict, *token)),
        _ => None,
    })
}

#[test]
fn a_restored_resource_raises_its_floor_and_rejects_the_stopped_holders_write() {
    let (run, late) = run(RESTORED);
    let events = run.outcome.history.events();
    let raised = events.iter().any(|e| matches!(e.kind, EventKind::FloorRaised { restore: 1, .. }));
    assert!(raised, "the restore tool raised the floor from the lock service");
    assert!(events.iter().any(|e| matches!(e.kind, EventKind::FloorAsked { restore: 1, .. })));
    assert!(matches!(late, WriteVerdict::RejectedStale { .. }), "the late write is refused: {late:?}");
    assert!(run.outcome.ok, "the default protocol passes: {:?}", run.outcome.violations);
}

#[test]
fn a_naive_restore_takes_the_stopped_holders_write_and_is_caught() {
    let (run, late) = run(NAIVE);
    let events = run.outcome.history.events();
    assert!(!events.iter().any(|e| matches!(e.kind, EventKind::FloorAsked { .. })), "a naive restore reads no floor");
    assert_eq!(late, WriteVerdict::Accepted, "the restored resource trusted its old highest token");
    assert!(!run.outcome.ok);
    let caught = run.outcome.violations.iter().any(|v| v.property == Property::FencedWrite);
    assert!(caught, "fenced-write names the flaw: {:?}", run.outcome.violations);
}

/// The cluster backed up at 1 s and restored from it at 2.5 s: three
/// workers on one key take it several times in between.
fn cluster_plan() -> Vec<FaultEvent> {
    vec![
        FaultEvent { at_ms: 1_000, fault: Fault::BackupCluster },
        FaultEvent { at_ms: 2_500, fault: Fault::RestoreCluster },
    ]
}

fn cluster_model(variant: Variant) -> Model {
    Model { safety_ms: 3_500, liveness_ms: 2_000, ..model(variant) }
}

/// The tokens granted (first applies of a Grant) after the cluster restore, and the restore's event.
fn cluster_restore(run: &RealRun) -> (EventKind, Vec<Token>) {
    let events = run.outcome.history.events();
    let restored =
        events.iter().find(|e| matches!(e.kind, EventKind::ClusterRestored { .. })).expect("the cluster was restored");
    let granted = events
        .iter()
        .filter(|e| e.at_us > restored.at_us)
        .filter_map(|e| match &e.kind {
            EventKind::Applied { result: fencelock::ApplyResult::Granted { token }, .. } => Some(*token),
            _ => None,
        })
        .collect();
    (restored.kind.clone(), granted)
}

#[test]
fn a_cluster_restore_raises_the_token_floor_into_a_new_epoch() {
    let run = play(CLUSTER_RESTORED, cluster_plan());
    let (restored, granted) = cluster_restore(&run);
    let EventKind::ClusterRestored { epoch, token_floor, .. } = restored else { unreachable!() };
    assert_eq!(epoch, 1);
    assert!(token_floor >= Token::epoch_base(1), "the floor is in epoch 1: {token_floor}");
    assert!(!granted.is_empty(), "the restored cluster grants again");
    assert!(granted.iter().all(|t| *t > token_floor), "every later token is above the floor: {granted:?}");
    assert!(run.outcome.ok, "the default protocol passes: {:?}", run.outcome.violations);
}

#[test]
fn a_naive_cluster_restore_issues_tokens_again_and_is_caught() {
    let run = play(CLUSTER_NAIVE, cluster_plan());
    let (restored, granted) = cluster_restore(&run);
    let EventKind::ClusterRestored { token_floor, .. } = restored else { unreachable!() };
    assert!(token_floor < Token::epoch_base(1), "the naive restore keeps the backup's counter: {token_floor}");
    assert!(!granted.is_empty(), "the restored cluster grants again");
    let caught = run.outcome.violations.iter().any(|v| v.property == Property::TokenMonotonic);
    assert!(caught, "token-monotonic names the flaw: {:?}", run.outcome.violations);
}
