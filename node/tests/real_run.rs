//! A real run end to end (`fencesim real`'s library): 3 servers, SQLite,
//! one stopped worker and one crashed server, judged by the simulator's
//! checker.
//!
//! The plan is written here, not drawn: the holder of a lock is stopped
//! (SIGSTOP) between its lease check and its write for six leases, a
//! server is paused, another is killed and restarted from its disk. With
//! one key and three workers, another worker takes the key while the
//! stopped one sleeps and writes under a higher token; the stopped worker's
//! late write must then be rejected by the database. The verdict is the
//! checker's; the test asserts that it judged a history with grants,
//! elections and the stall, that the stale write was rejected, and that no
//! process of the run outlives it.

mod common;

use fencelock::resource::WriteVerdict;
use fencelock::NodeId;
use fencesim::actor::Actor;
use fencesim::faults::{Fault, FaultEvent};
use fencesim::history::EventKind;
use fencesim::model::Model;
use fencesim::real::{self, RealOptions};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

const LEASE_MS: u64 = 500;

fn plan() -> Vec<FaultEvent> {
    vec![
        FaultEvent { at_ms: 1_000, fault: Fault::StallHolder { ms: 6 * LEASE_MS } },
        FaultEvent { at_ms: 2_500, fault: Fault::Pause { actor: Actor::Server(NodeId(2)), ms: 700 } },
        FaultEvent { at_ms: 4_000, fault: Fault::CrashLeader { torn: false, down_ms: 1_000 } },
    ]
}

fn model() -> Model {
    Model {
        nodes: 3,
        clients: 3,
        keys: 1,
        lease_ms: LEASE_MS,
        safety_ms: 7_000,
        liveness_ms: 3_000,
        // Only the planned stall: the workload draws none of its own.
        stalls: false,
        ..Model::default()
    }
}

#[test]
fn a_real_run_is_judged_and_the_stopped_workers_stale_write_is_rejected() {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir: PathBuf = temp.path().join("run");
    let options = RealOptions {
        seed: 7,
        model: model(),
        resource: None,
        dir: dir.clone(),
        node_bin: PathBuf::from(env!("CARGO_BIN_EXE_fencelock-node")),
        plan: Some(plan()),
        stop: Arc::new(AtomicBool::new(false)),
    };
    let run = real::run(&options).expect("the run starts and ends");
    let outcome = &run.outcome;
    for violation in &outcome.violations {
        eprintln!("VIOLATION {violation}");
    }
    assert!(common::processes_naming(&dir).is_empty(), "every process of the run is stopped");
    assert_eq!(run.played.len(), 3, "every planned fault is played");
    assert!(run.skipped.is_empty());
    assert!(outcome.grants >= 3, "the workers took the lock: {} grants", outcome.grants);
    assert!(outcome.elections >= 2, "the crashed leader was replaced: {} elections", outcome.elections);

    // The stopped worker and what the database said to its late write.
    let events = outcome.history.events();
    let stalled = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Stalled { client, .. } => Some((*client, e.at_us)),
            _ => None,
        })
        .expect("a worker took the armed stall");
    let resumed = events.iter().any(|e| e.kind == EventKind::Resumed { actor: Actor::Client(stalled.0) });
    assert!(resumed, "the runner sent SIGCONT");
    let writes_after: Vec<(u64, fencelock::ClientId, fencelock::Token, WriteVerdict)> = events
        .iter()
        .filter(|e| e.at_us > stalled.1)
        .filter_map(|e| match &e.kind {
            EventKind::WriteDone { client, token, verdict, .. } => Some((e.at_us, *client, *token, *verdict)),
            _ => None,
        })
        .collect();
    let late = writes_after.iter().find(|w| w.1 == stalled.0).expect("the stopped worker wrote after its stall");
    // The situation the test is about: another worker's higher token was
    // accepted while the stopped one slept (one key, three workers, a stall
    // of six leases: the others take the key as soon as its lease runs out).
    let overtaken = writes_after.iter().any(|w| w.0 < late.0 && w.1 != stalled.0 && w.3 == WriteVerdict::Accepted);
    assert!(overtaken, "no other write was accepted during the stall (too slow a machine?): {writes_after:?}");
    assert!(
        matches!(late.3, WriteVerdict::RejectedStale { .. }),
        "the stopped worker's first write after its stall is rejected as stale: {late:?}; all: {writes_after:?}"
    );
    assert!(outcome.stale_writes_rejected >= 1);
    assert!(outcome.ok, "the default protocol passes: {:?}", outcome.violations);
    let actors: BTreeSet<String> = std::fs::read_dir(dir.join("history"))
        .expect("histories")
        .filter_map(|e| e.ok()?.file_name().to_str().map(str::to_owned))
        .collect();
    assert_eq!(actors.len(), 6, "one history per server and worker: {actors:?}");
}
