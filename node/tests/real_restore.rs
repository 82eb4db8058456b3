//! Real runs that restore: the protected resource from its backup, one
//! server from a stale copy of its data directory, and a one-way cut
//! between two servers, judged by the simulator's checker.
//!
//! The plan is written here, not drawn. The resource is backed up early;
//! the holder of the one key is stopped between its lease check and its
//! write for six leases, and the others take the key and write above its
//! token. Every other worker is then paused, the resource is restored from
//! the backup (its highest token goes back below the stopped holder's) and
//! the stopped holder wakes and writes, while nobody else can. Under the
//! default protocol the restored resource refuses writes until it has
//! raised its floor from the lock service, so the late write is rejected;
//! under `resource-restore-naive` it trusts the restored token, takes the
//! late write, and the checker names `fenced-write`. Meanwhile server 1
//! crashes and comes back from its stale backup, and server 0 stops
//! sending to server 2 for a second.

use fencelock::resource::WriteVerdict;
use fencelock::{ClientId, NodeId, Token, Variant};
use fencesim::actor::Actor;
use fencesim::checker::Property;
use fencesim::faults::{Fault, FaultEvent};
use fencesim::history::{Event, EventKind};
use fencesim::machine::net::Addr;
use fencesim::model::Model;
use fencesim::real::{self, RealOptions, RealRun};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

const LEASE_MS: u64 = 500;
const STALL_MS: u64 = 6 * LEASE_MS;
/// The restore: after the stopped holder's lease ran out and the others
/// wrote above it, before it wakes (its stall began at 1 s at the earliest).
const RESTORE_AT_MS: u64 = 3_500;

/// One real cluster at a time: the two cores are shared.
static SERIAL: Mutex<()> = Mutex::new(());

fn plan() -> Vec<FaultEvent> {
    let at = |at_ms: u64, fault: Fault| FaultEvent { at_ms, fault };
    let mut plan = vec![
        at(500, Fault::BackupNode { node: NodeId(1) }),
        at(800, Fault::BackupResource),
        at(1_000, Fault::StallHolder { ms: STALL_MS }),
        at(2_000, Fault::Crash { node: NodeId(1), torn: false }),
        at(2_600, Fault::RestoreNode { node: NodeId(1) }),
    ];
    // Every worker but the stopped one (already stopped, so the pause passes
    // it by) is held from just before the restore until after the late write.
    for c in 0..3 {
        plan.push(at(RESTORE_AT_MS - 100, Fault::Pause { actor: Actor::Client(ClientId(c)), ms: 2_500 }));
    }
    plan.push(at(RESTORE_AT_MS, Fault::RestoreResource));
    plan.push(at(4_200, Fault::OneWay { from: Addr::Server(NodeId(0)), to: Addr::Server(NodeId(2)) }));
    plan.push(at(5_200, Fault::Heal));
    plan
}

fn model(variant: Variant) -> Model {
    Model {
        nodes: 3,
        clients: 3,
        keys: 1,
        lease_ms: LEASE_MS,
        safety_ms: 6_500,
        liveness_ms: 3_000,
        // Only the planned stall: the workload draws none of its own.
        stalls: false,
        variant,
        ..Model::default()
    }
}

/// PIDs of live processes whose command line names `dir`.
fn processes_naming(dir: &Path) -> Vec<u32> {
    let needle = dir.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| String::from_utf8_lossy(&line).replace('\0', " ").contains(&needle))
        })
        .collect()
}

/// Runs the plan under `variant` and checks what every run must show:
/// each fault played, the restores and the floor in the history, no
/// process left. Returns the run and the stopped holder's late write.
fn run(variant: Variant) -> (RealRun, WriteVerdict) {
    let _serial = SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let temp = tempfile::tempdir().expect("temp dir");
    let dir: PathBuf = temp.path().join("run");
    let options = RealOptions {
        seed: 11,
        model: model(variant),
        resource: None,
        dir: dir.clone(),
        node_bin: PathBuf::from(env!("CARGO_BIN_EXE_fencelock-node")),
        plan: Some(plan()),
        stop: Arc::new(AtomicBool::new(false)),
    };
    let run = real::run(&options).expect("the run starts and ends");
    for violation in &run.outcome.violations {
        eprintln!("VIOLATION {violation}");
    }
    assert!(processes_naming(&dir).is_empty(), "every process of the run is stopped, tools included");
    assert_eq!(run.played.len(), plan().len(), "every planned fault is played");
    assert!(run.skipped.is_empty());
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
    let late = first_write_after(events, client, restored.at_us).expect("the stopped worker wrote after the restore");
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
    let (run, late) = run(Variant::Default);
    let events = run.outcome.history.events();
    let raised = events.iter().any(|e| matches!(e.kind, EventKind::FloorRaised { restore: 1, .. }));
    assert!(raised, "the restore tool raised the floor from the lock service");
    assert!(events.iter().any(|e| matches!(e.kind, EventKind::FloorAsked { restore: 1, .. })));
    assert!(matches!(late, WriteVerdict::RejectedStale { .. }), "the late write is refused: {late:?}");
    assert!(run.outcome.ok, "the default protocol passes: {:?}", run.outcome.violations);
}

#[test]
fn a_naive_restore_takes_the_stopped_holders_write_and_is_caught() {
    let (run, late) = run(Variant::ResourceRestoreNaive);
    let events = run.outcome.history.events();
    assert!(!events.iter().any(|e| matches!(e.kind, EventKind::FloorAsked { .. })), "a naive restore reads no floor");
    assert_eq!(late, WriteVerdict::Accepted, "the restored resource trusted its old highest token");
    assert!(!run.outcome.ok);
    let caught = run.outcome.violations.iter().any(|v| v.property == Property::FencedWrite);
    assert!(caught, "fenced-write names the flaw: {:?}", run.outcome.violations);
}
