//! A real run end to end (`fencesim real`'s library): 3 servers, SQLite,
//! one stopped worker and one crashed server, judged by the simulator's
//! checker.
//!
//! The plan is written here, not drawn: the holder of a lock is stopped
//! (SIGSTOP) between its lease check and its write until another worker's
//! write under a higher token is accepted (ten leases at most), a server is
//! paused, another is killed and restarted from its disk. With one key and
//! three workers, another worker takes the key while the stopped one sleeps
//! and writes under a higher token; the stopped worker's late write must
//! then be rejected by the database. The verdict is the
//! checker's; the test asserts that it judged a history with grants,
//! elections and the stall, that the stale write was rejected, and that no
//! process of the run outlives it.

use crate::common;

use fencelock::resource::WriteVerdict;
use fencelock::{ClientId, NodeId};
use fencesim::actor::Actor;
use fencesim::faults::{Fault, FaultEvent, Overtake, StallPoint, UntilOvertaken};
use fencesim::history::{Event, EventKind};
use fencesim::machine::net::Addr;
use fencesim::model::Model;
use std::collections::BTreeSet;

const LEASE_MS: u64 = 500;

fn plan() -> Vec<FaultEvent> {
    vec![
        FaultEvent { at_ms: 1_000, fault: Fault::StallUntilOvertaken(STALL) },
        FaultEvent { at_ms: 2_500, fault: Fault::Pause { actor: Actor::Server(NodeId(2)), ms: 700 } },
        FaultEvent { at_ms: 4_000, fault: Fault::CrashLeader { torn: false, down_ms: 1_000 } },
    ]
}

/// Until the resource accepts another's write above the stopped holder's
/// token: on a slow machine the stall waits for it, up to ten leases.
const STALL: UntilOvertaken = UntilOvertaken {
    on: Overtake::Write,
    after_ms: 0,
    ms_max: 10 * LEASE_MS,
    before: StallPoint::Write,
    path: None,
    end: fencesim::faults::JobEnd::Drawn,
};

fn model() -> Model {
    Model {
        nodes: 3,
        clients: 3,
        keys: 1,
        lease_ms: LEASE_MS,
        // The stall comes at 1 s at the earliest (a worker mid-job takes it
        // up to ~2 s later) and ends about a lease later, when another's
        // write is accepted: the stopped worker writes well before the
        // heal, or in the liveness phase if its stall ran ten leases.
        safety_ms: 7_000,
        liveness_ms: 3_000,
        // Only the planned stall: the workload draws none of its own.
        stalls: false,
        ..Model::default()
    }
}

/// The real runs of this file's tests (`common::planned_run`).
pub fn planned() -> Vec<common::Planned> {
    vec![
        common::Planned { test: JUDGED, seed: 7, model: model(), plan: plan() },
        common::Planned { test: CUT_LINKS, seed: 11, model: cut_links_model(), plan: cut_links_plan() },
        common::Planned { test: OUTAGE, seed: 13, model: outage_model(), plan: outage_plan() },
    ]
}

const JUDGED: &str = "a_real_run_is_judged_and_the_stopped_workers_stale_write_is_rejected";
const CUT_LINKS: &str = "a_workers_cut_links_lose_its_requests_and_answers";
const OUTAGE: &str = "a_resource_outage_holds_every_write_until_the_restart";

#[test]
fn a_real_run_is_judged_and_the_stopped_workers_stale_write_is_rejected() {
    let (_temp, dir, run) = common::planned_run(JUDGED);
    let outcome = &run.outcome;
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
    let resumed = events
        .iter()
        .find(|e| e.kind == EventKind::Resumed { actor: Actor::Client(stalled.0) })
        .map(|e| e.at_us)
        .expect("the runner sent SIGCONT");
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
    // until then: the others take the key as soon as its lease runs out).
    let overtaken = writes_after.iter().any(|w| w.0 < late.0 && w.1 != stalled.0 && w.3 == WriteVerdict::Accepted);
    assert!(overtaken, "no other write was accepted during the stall (too slow a machine?): {writes_after:?}");
    // The runner ended the stall at the overtaking, not at its longest length.
    let first_overtaking = writes_after
        .iter()
        .find(|w| w.1 != stalled.0 && w.2 > late.2 && w.3 == WriteVerdict::Accepted)
        .expect("an accepted write above the stopped holder's token");
    assert!(
        first_overtaking.0 <= resumed && resumed < stalled.1 + STALL.ms_max * 1_000,
        "resumed at {resumed} µs: after the overtaking write at {} µs, before the stall's longest length from {} µs",
        first_overtaking.0,
        stalled.1
    );
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

/// Client 0 cut off from every server, then every server's answers to client 1 lost (one way).
fn cut_links_plan() -> Vec<FaultEvent> {
    let (c0, c1) = (ClientId(0), ClientId(1));
    let mut plan = vec![
        FaultEvent { at_ms: 1_000, fault: Fault::CutClient { client: c0 } },
        FaultEvent { at_ms: 2_500, fault: Fault::Heal },
        FaultEvent { at_ms: 4_300, fault: Fault::Heal },
    ];
    // Each cut lasts 1.5 s: longer than a worker's longest job step (a
    // think of 0.3 s, then work of up to three leases renewed every 0.2 s),
    // so each worker asks inside it.
    for n in 0..3 {
        let fault = Fault::OneWay { from: Addr::Server(NodeId(n)), to: Addr::Client(c1) };
        plan.push(FaultEvent { at_ms: 2_800, fault });
    }
    plan.sort_by_key(|e| e.at_ms);
    plan
}

fn cut_links_model() -> Model {
    Model { clients: 2, keys: 2, safety_ms: 4_800, liveness_ms: 2_000, ..model() }
}

/// The cut worker's requests reach no server, the one-way-cut worker's are
/// served but never answered, and both are answered again after the heal.
#[test]
fn a_workers_cut_links_lose_its_requests_and_answers() {
    let (c0, c1) = (ClientId(0), ClientId(1));
    let (_temp, _dir, run) = common::planned_run(CUT_LINKS);
    let outcome = &run.outcome;
    assert!(run.skipped.is_empty(), "a worker's cuts are played: {:?}", run.skipped);
    assert_eq!(run.played.len(), 6);
    assert!(outcome.ok, "the default protocol passes: {:?}", outcome.violations);

    let events = outcome.history.events();
    let fault_at = |wanted: &dyn Fn(&Fault) -> bool| {
        events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::Fault { fault } if wanted(fault) => Some(e.at_us),
                _ => None,
            })
            .expect("the runner recorded the fault")
    };
    let cut_at = fault_at(&|f| matches!(f, Fault::CutClient { .. }));
    let one_way_at = fault_at(&|f| matches!(f, Fault::OneWay { .. }));
    let heals: Vec<u64> =
        events.iter().filter(|e| matches!(e.kind, EventKind::Fault { fault: Fault::Heal })).map(|e| e.at_us).collect();
    assert_eq!(heals.len(), 2);
    // A reply read just as the file was written may still count: 50 ms of slack after each cut.
    let within = |e: &&Event, from: u64, to: u64| e.at_us > from + 50_000 && e.at_us < to;
    let count = |from: u64, to: u64, what: &dyn Fn(&EventKind) -> bool| {
        events.iter().filter(|e| within(e, from, to) && what(&e.kind)).count()
    };

    let sent = count(cut_at, heals[0], &|k| matches!(k, EventKind::Requested { client, .. } if *client == c0));
    let heard = count(cut_at, heals[0], &|k| matches!(k, EventKind::Answered { client, .. } if *client == c0));
    let served = count(cut_at, heals[0], &|k| matches!(k, EventKind::Replied { client, .. } if *client == c0));
    assert!(sent > 0, "the cut worker kept asking");
    assert_eq!((heard, served), (0, 0), "no server heard the cut worker, and it heard none");
    let written = count(cut_at, heals[0], &|k| matches!(k, EventKind::WriteDone { client, .. } if *client == c0));
    assert_eq!(written, 0, "nor did the resource: a cut worker's writes are lost");

    let sent = count(one_way_at, heals[1], &|k| matches!(k, EventKind::Requested { client, .. } if *client == c1));
    let heard = count(one_way_at, heals[1], &|k| matches!(k, EventKind::Answered { client, .. } if *client == c1));
    let served = count(one_way_at, heals[1], &|k| matches!(k, EventKind::Replied { client, .. } if *client == c1));
    assert!(sent > 0 && served > 0, "the servers heard the one-way-cut worker: {sent} sent, {served} served");
    assert_eq!(heard, 0, "and it heard none of their answers");

    for client in [c0, c1] {
        let after = count(heals[1], u64::MAX, &|k| matches!(k, EventKind::Answered { client: c, .. } if *c == client));
        assert!(after > 0, "{client} is answered again after the heal");
    }
}

/// The resource down for 2.5 s (a tool holding its write lock, killed at the restart).
fn outage_plan() -> Vec<FaultEvent> {
    vec![
        FaultEvent { at_ms: 1_000, fault: Fault::CrashResource },
        FaultEvent { at_ms: 3_500, fault: Fault::RestartResource },
    ]
}

fn outage_model() -> Model {
    Model { safety_ms: 4_000, liveness_ms: 2_000, keys: 3, ..model() }
}

/// No write is answered inside the outage, a write sent into it waits and
/// is answered after it, and the tool is stopped by its PID.
#[test]
fn a_resource_outage_holds_every_write_until_the_restart() {
    // The holding tool is one of the run's processes: `real_run` checks none outlives it.
    let (_temp, _dir, run) = common::planned_run(OUTAGE);
    let outcome = &run.outcome;
    assert!(run.skipped.is_empty(), "the outage is played: {:?}", run.skipped);
    assert!(outcome.ok, "the default protocol passes: {:?}", outcome.violations);
    let events = outcome.history.events();
    let at = |wanted: &dyn Fn(&EventKind) -> bool| events.iter().find(|e| wanted(&e.kind)).map(|e| e.at_us);
    let down = at(&|k| *k == EventKind::Crashed { actor: Actor::Resource }).expect("the resource went down");
    let up = at(&|k| *k == EventKind::Restarted { actor: Actor::Resource }).expect("and came back");
    // The tool takes the lock a few milliseconds after the crash is recorded.
    let answered_inside = events
        .iter()
        .filter(|e| e.at_us > down + 200_000 && e.at_us < up)
        .filter(|e| matches!(e.kind, EventKind::WriteDone { .. }))
        .count();
    assert_eq!(answered_inside, 0, "no write is answered while the resource is down");
    // A worker writes every job (a think of at most 0.3 s and work of at most
    // 1.5 s before it); in 2.5 s at least one of three meets the outage and waits it out.
    let waited = events
        .iter()
        .filter(|e| e.at_us > down && e.at_us < up)
        .filter_map(|e| match &e.kind {
            EventKind::WriteSent { client, request, .. } => Some((*client, *request)),
            _ => None,
        })
        .filter(|(client, request)| {
            events.iter().any(|e| {
                e.at_us >= up
                    && matches!(&e.kind, EventKind::WriteDone { client: c, request: r, .. } if c == client && r == request)
            })
        })
        .count();
    assert!(waited > 0, "a write sent into the outage waited for the restart");
}
