//! The faults that name a role, not a node (`CrashLeader`, `PauseLeader`,
//! `StallHolder`, `StallUntilOvertaken` (with what the stalled holder does
//! next), `StallOnGrant`, `LoseWriteAnswer`, `ElectionStorm`, a restoring `FenceStrikes`):
//! each strikes whoever plays the role when it fires.

use fencelock::raft::Role;
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::ApplyResult;
use fencelock::{NodeId, Term};
use fencelock::{Property, Variant};
use fencesim::faults::{ChurnEvent, Fault, FaultEvent, JobEnd, Overtake, StallPoint, UntilOvertaken};
use fencesim::history::{Actor, Event, EventKind, WritePath, WriteVerdict};
use fencesim::model::Model;
use fencesim::run::seed::run_plan;
use std::collections::BTreeSet;

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

/// When the stall that `StallUntilOvertaken` armed at `stalled` (holding
/// `key` under `token`) was overtaken: the first later grant of the key, or
/// accepted write on it, under a higher token.
fn overtaken_at(events: &[Event], stalled: &Event, on: Overtake) -> Option<u64> {
    let EventKind::StalledUntilOvertaken { ref key, token, .. } = stalled.kind else { unreachable!() };
    events.iter().filter(|event| event.seq > stalled.seq).find_map(|event| {
        let higher = match (&event.kind, on) {
            (EventKind::Applied { command, result: ApplyResult::Granted { token: t }, .. }, Overtake::Grant) => {
                command.key() == key && *t > token
            }
            (EventKind::WriteDone { key: k, token: t, verdict: WriteVerdict::Accepted, .. }, Overtake::Write) => {
                k == key && *t > token
            }
            _ => false,
        };
        higher.then_some(event.at_us)
    })
}

#[test]
fn stall_until_overtaken_lasts_until_another_worker_overtakes_the_holder_and_the_token_stops_it() {
    let (after_ms, ms_max) = (7, 6_000);
    // Long enough for a stall taken late to end at its cap inside the run.
    let model = Model { safety_ms: 16_000, ..model() };
    for on in [Overtake::Grant, Overtake::Write] {
        let mut overtaken = 0;
        for seed in 0..6 {
            let plan = at(
                1_000,
                Fault::StallUntilOvertaken(UntilOvertaken {
                    on,
                    after_ms,
                    ms_max,
                    before: StallPoint::Write,
                    path: None,
                    end: JobEnd::Drawn,
                }),
            );
            let outcome = run_plan(seed, &model, plan);
            let events = outcome.history.events();
            let stalls: Vec<&Event> =
                events.iter().filter(|e| matches!(e.kind, EventKind::StalledUntilOvertaken { .. })).collect();
            assert_eq!(stalls.len(), 1, "seed {seed} {on:?}: exactly the planned stall");
            let stalled = stalls[0];
            let EventKind::StalledUntilOvertaken { client, .. } = stalled.kind else { unreachable!() };
            assert!(stalled.at_us >= 1_000_000, "seed {seed} {on:?}: armed at 1 s, taken later");
            let resumed =
                first_after(events, stalled.at_us, |kind| *kind == EventKind::Resumed { actor: Actor::Client(client) });
            let deadline_us = stalled.at_us + ms_max * 1_000;
            match overtaken_at(events, stalled, on).filter(|&at_us| at_us < deadline_us) {
                // The world looks once a millisecond, then waits `after_ms`
                // (a madsim sleep lasts a millisecond at least).
                Some(at_us) => {
                    overtaken += 1;
                    let (earliest, latest) = (at_us + after_ms * 1_000, at_us + (after_ms + 2) * 1_000);
                    assert!(
                        (earliest..=latest).contains(&resumed.at_us),
                        "seed {seed} {on:?}: overtaken at {at_us} us, resumed at {} us",
                        resumed.at_us
                    );
                }
                None => assert!(
                    (deadline_us..=deadline_us + 1_000).contains(&resumed.at_us),
                    "seed {seed} {on:?}: never overtaken, so resumed at the cap {deadline_us} us, not {} us",
                    resumed.at_us
                ),
            }
            // The stale holder writes after the takeover; the resource's token check refuses it.
            assert!(outcome.ok, "seed {seed} {on:?}: {:?}", outcome.violations);
        }
        assert!(overtaken >= 3, "{on:?}: overtaken in only {overtaken} of 6 seeds");
    }
}

/// The next holder to write stalls until a write under a higher token on
/// its key is accepted (at most 8 s), then writes as the workload draws.
fn stall_until_written_over() -> Fault {
    Fault::StallUntilOvertaken(UntilOvertaken {
        on: Overtake::Write,
        after_ms: 0,
        ms_max: 8_000,
        before: StallPoint::Write,
        path: None,
        end: JobEnd::Drawn,
    })
}

#[test]
fn stall_until_overtaken_breaks_an_unfenced_sink_in_most_seeds() {
    let model = Model { variant: Variant::SinkUnfenced, ..model() };
    let plan = at(500, stall_until_written_over());
    let caught = (0..20)
        .filter(|&seed| {
            let outcome = run_plan(seed, &model, plan.clone());
            outcome.violations.iter().any(|v| v.property == Property::FencedWrite)
        })
        .count();
    // 15 of 20 when written.
    assert!(caught >= 12, "fenced-write in only {caught} of 20 seeds");
}

/// In how many of seeds `0..seeds` `plan` breaks `property` under `model`.
fn breaks(model: &Model, plan: &[FaultEvent], property: Property, seeds: u64) -> usize {
    (0..seeds)
        .filter(|&seed| run_plan(seed, model, plan.to_vec()).violations.iter().any(|v| v.property == property))
        .count()
}

#[test]
fn a_stall_before_a_renewal_ends_as_the_key_is_regranted_and_the_stale_renewal_is_refused() {
    let (after_ms, ms_max) = (0, 8_000);
    let stall = Fault::StallUntilOvertaken(UntilOvertaken {
        on: Overtake::Grant,
        after_ms,
        ms_max,
        before: StallPoint::Renew,
        path: None,
        end: JobEnd::Drawn,
    });
    // One key, so the stalled holder's lease runs out with others waiting for it.
    let model = Model { safety_ms: 16_000, keys: 1, jobs_max: None, ..model() };
    let mut renewed_stale = 0;
    for seed in 0..6 {
        let outcome = run_plan(seed, &model, at(1_000, stall.clone()));
        let events = outcome.history.events();
        let stalls: Vec<&Event> =
            events.iter().filter(|e| matches!(e.kind, EventKind::StalledUntilOvertaken { .. })).collect();
        assert!(stalls.len() <= 1, "seed {seed}: at most the planned stall");
        if let Some(stalled) = stalls.first() {
            let EventKind::StalledUntilOvertaken { client, ref key, token, before, .. } = stalled.kind else {
                unreachable!()
            };
            assert_eq!(before, StallPoint::Renew, "seed {seed}");
            let resumed =
                first_after(events, stalled.at_us, |kind| *kind == EventKind::Resumed { actor: Actor::Client(client) });
            if let Some(at_us) = overtaken_at(events, stalled, Overtake::Grant) {
                assert!(
                    (at_us..=at_us + 2_000).contains(&resumed.at_us),
                    "seed {seed}: resumed a ms after the regrant"
                );
                // What the worker does next is the renewal it stalled before, naming the old token.
                let next = first_after(
                    events,
                    resumed.at_us,
                    |kind| matches!(kind, EventKind::Requested { client: c, .. } if *c == client),
                );
                let renewal = ClientRequest::Renew { key: key.clone(), token };
                assert!(matches!(&next.kind, EventKind::Requested { body, .. } if *body == renewal), "seed {seed}");
                renewed_stale += 1;
            }
        }
        // The protocol checks the renewal's token: the stale holder is told it lost the lock.
        assert!(outcome.ok, "seed {seed}: {:?}", outcome.violations);
    }
    // 6 of 6 when written.
    assert!(renewed_stale >= 4, "the stale renewal came in only {renewed_stale} of 6 seeds");
    // A service that renews whatever token a renewal names extends the successor's lease for the stale holder.
    let flawed = Model { variant: Variant::RenewIgnoresToken, ..model };
    let caught = breaks(&flawed, &at(1_000, stall), Property::LeaseExclusion, 20);
    // 13 of 20 when written.
    assert!(caught >= 10, "lease-exclusion in only {caught} of 20 seeds");
}

#[test]
fn a_stalled_holder_told_to_revoke_revokes_its_old_token_after_the_takeover() {
    let stall = |end| {
        Fault::StallUntilOvertaken(UntilOvertaken {
            on: Overtake::Grant,
            after_ms: 0,
            ms_max: 8_000,
            before: StallPoint::Write,
            path: None,
            end,
        })
    };
    // One key, so the stalled holder's lease runs out with others waiting for it.
    let model = Model { safety_ms: 16_000, keys: 1, jobs_max: None, ..model() };
    let mut revoked_stale = 0;
    for seed in 0..6 {
        let outcome = run_plan(seed, &model, at(1_000, stall(JobEnd::Revoke)));
        let events = outcome.history.events();
        let stalled = events.iter().find(|e| matches!(e.kind, EventKind::StalledUntilOvertaken { .. }));
        if let Some(stalled) = stalled {
            let EventKind::StalledUntilOvertaken { client, ref key, token, end, .. } = stalled.kind else {
                unreachable!()
            };
            assert_eq!(end, JobEnd::Revoke, "seed {seed}");
            if overtaken_at(events, stalled, Overtake::Grant).is_some() {
                // The job ends as the fault says, whatever the workload draws:
                // a Revoke naming the token the key was taken from.
                let ends = |kind: &EventKind| matches!(kind, EventKind::Requested { client: c, body: ClientRequest::Release { .. } | ClientRequest::Revoke { .. }, .. } if *c == client);
                let end = first_after(events, stalled.at_us, ends);
                let revoke = ClientRequest::Revoke { key: key.clone(), token };
                assert!(matches!(&end.kind, EventKind::Requested { body, .. } if *body == revoke), "seed {seed}");
                revoked_stale += 1;
            }
        }
        // The protocol's Expire checks the token: the late revoke removes nothing it should not.
        assert!(outcome.ok, "seed {seed}: {:?}", outcome.violations);
    }
    // 6 of 6 when written.
    assert!(revoked_stale >= 4, "the stale revoke came in only {revoked_stale} of 6 seeds");
    // An Expire that ignores its token removes the successor's lock: far
    // more often than when the stalled holder ends its job as drawn.
    let flawed = Model { variant: Variant::ExpireIgnoresToken, ..model };
    let told = breaks(&flawed, &at(1_000, stall(JobEnd::Revoke)), Property::ExpireSafety, 20);
    let drawn = breaks(&flawed, &at(1_000, stall(JobEnd::Drawn)), Property::ExpireSafety, 20);
    // 20 and 7 of 20 when written.
    assert!(told >= 15, "expire-safety in only {told} of 20 seeds");
    assert!(told >= drawn + 5, "told {told} of 20, drawn {drawn}");
}

#[test]
fn a_stalled_holder_told_its_path_writes_on_it_after_the_takeover() {
    let stall = |path| {
        Fault::StallUntilOvertaken(UntilOvertaken {
            on: Overtake::Write,
            after_ms: 0,
            ms_max: 8_000,
            before: StallPoint::Write,
            path,
            end: JobEnd::Drawn,
        })
    };
    let model = Model { safety_ms: 16_000, keys: 1, jobs_max: None, ..model() };
    let mut written = 0;
    for seed in 0..6 {
        for path in [WritePath::Status, WritePath::Ledger] {
            let outcome = run_plan(seed, &model, at(1_000, stall(Some(path))));
            let events = outcome.history.events();
            let stalled = events.iter().find(|e| matches!(e.kind, EventKind::StalledUntilOvertaken { .. }));
            if let Some(stalled) = stalled {
                let EventKind::StalledUntilOvertaken { client, token, .. } = stalled.kind else { unreachable!() };
                let sent = |kind: &EventKind| matches!(kind, EventKind::WriteSent { client: c, .. } if *c == client);
                let write = first_after(events, stalled.at_us, sent);
                let EventKind::WriteSent { path: p, token: t, .. } = write.kind else { unreachable!() };
                assert_eq!((p, t), (path, token), "seed {seed}: the stale write goes where the fault says");
                written += 1;
            }
            // Both paths check the token: the stale write is refused.
            assert!(outcome.ok, "seed {seed} {path:?}: {:?}", outcome.violations);
        }
    }
    // 12 of 12 when written.
    assert!(written >= 8, "the told write came in only {written} of 12 runs");
    // A bulk path that skips the token check lets the stale write through:
    // every time it is told to take it, half the time when it draws.
    let flawed = Model { variant: Variant::SecondPathUnfenced, ..model };
    let told = breaks(&flawed, &at(1_000, stall(Some(WritePath::Ledger))), Property::FencedWrite, 20);
    let drawn = breaks(&flawed, &at(1_000, stall(None)), Property::FencedWrite, 20);
    // 18 and 9 of 20 when written.
    assert!(told >= 15, "fenced-write in only {told} of 20 seeds");
    assert!(told >= drawn + 5, "told {told} of 20, drawn {drawn}");
}

/// Roles each server reported, in order: (at_us, node, role, term).
fn roles(events: &[Event]) -> Vec<(u64, NodeId, Role, Term)> {
    events
        .iter()
        .filter_map(|event| match event.kind {
            EventKind::Role { node, role, term, .. } => Some((event.at_us, node, role, term)),
            _ => None,
        })
        .collect()
}

#[test]
fn an_election_storm_makes_its_servers_campaign_together_and_safe_voting_survives_it() {
    let storm = Fault::ElectionStorm { servers: 3 };
    // Before any election timer (100-200 ms) runs out: nobody leads yet.
    let quiet = Model { clients: 0, safety_ms: 2_000, ..model() };
    for seed in 0..6 {
        let outcome = run_plan(seed, &quiet, at(90, storm.clone()));
        let first: Vec<(u64, NodeId)> = roles(outcome.history.events())
            .into_iter()
            .filter(|(.., role, _)| *role == Role::PreCandidate)
            .take(3)
            .map(|(at_us, node, ..)| (at_us, node))
            .collect();
        // The three lowest ids, together: at the servers' tick at 90 ms,
        // which drift moves apart by microseconds.
        let nodes: BTreeSet<NodeId> = first.iter().map(|(_, node)| *node).collect();
        assert_eq!(nodes, BTreeSet::from([NodeId(0), NodeId(1), NodeId(2)]), "seed {seed}: {first:?}");
        assert!(first.iter().all(|(at_us, _)| (90_000..90_100).contains(at_us)), "seed {seed}: {first:?}");
        // One vote per term: at most one leader comes of the split.
        assert!(outcome.ok, "seed {seed}: {:?}", outcome.violations);
    }
    // With a leader in office its other followers are in its lease: they
    // refuse a storm of two of five, and nobody enters a new term.
    let busy = model();
    for seed in 0..4 {
        let outcome = run_plan(seed, &busy, at(3_000, Fault::ElectionStorm { servers: 2 }));
        let terms = roles(outcome.history.events());
        let before = terms.iter().filter(|(at_us, ..)| *at_us < 3_000_000).map(|(.., term)| *term).max();
        let after = terms.iter().map(|(.., term)| *term).max();
        assert_eq!(before, after, "seed {seed}: a term began after the storm");
        assert!(outcome.ok, "seed {seed}: {:?}", outcome.violations);
    }
    // A follower that forgets its vote elects every candidate of the term.
    let flawed = Model { variant: Variant::VoteTwice, ..quiet };
    let caught = breaks(&flawed, &at(90, storm), Property::ElectionSafety, 20);
    // 18 of 20 when written.
    assert!(caught >= 15, "election-safety in only {caught} of 20 seeds");
}

#[test]
fn a_stall_on_grant_delays_reading_the_next_granted_answer_and_the_client_counts_from_its_send() {
    let ms = 1_500;
    let model = Model { safety_ms: 10_000, keys: 1, jobs_max: None, ..model() };
    for seed in 0..4 {
        let outcome = run_plan(seed, &model, at(1_000, Fault::StallOnGrant { ms }));
        let events = outcome.history.events();
        let stalls: Vec<&Event> =
            events.iter().filter(|e| matches!(e.kind, EventKind::StalledOnGrant { .. })).collect();
        assert_eq!(stalls.len(), 1, "seed {seed}: exactly the planned stall");
        let stalled = stalls[0];
        let EventKind::StalledOnGrant { client, request, .. } = stalled.kind else { unreachable!() };
        assert!(stalled.at_us >= 1_000_000, "seed {seed}: armed at 1 s, taken later");
        let read = first_after(
            events,
            stalled.at_us,
            |kind| matches!(kind, EventKind::Answered { client: c, request: r, .. } if *c == client && *r == request),
        );
        // The history keeps whole microseconds and madsim moves time 50-100 ns
        // per poll, so a stall that starts just before a microsecond ends
        // is read as ending 1 us later.
        let end_us = stalled.at_us + ms * 1_000;
        assert!(
            (end_us..=end_us + 1).contains(&read.at_us),
            "seed {seed}: answer read at {} us, the stall ends at {end_us}",
            read.at_us
        );
        assert!(matches!(read.kind, EventKind::Answered { reply: ClientReply::Granted { .. }, .. }), "seed {seed}");
        assert!(outcome.ok, "seed {seed}: {:?}", outcome.violations);
    }
    // A client counting its lease from the answer's arrival believes past the server's lease.
    let flawed = Model { variant: Variant::BeliefFromArrival, ..model };
    let caught = breaks(&flawed, &at(1_000, Fault::StallOnGrant { ms: 2_000 }), Property::LeaseExclusion, 20);
    // 20 of 20 when written.
    assert!(caught >= 15, "lease-exclusion in only {caught} of 20 seeds");
}

#[test]
fn a_lost_write_answer_brings_the_same_write_again_and_the_resource_answers_it_once() {
    let model = Model { safety_ms: 4_000, ..model() };
    for seed in 0..4 {
        let outcome = run_plan(seed, &model, at(500, Fault::LoseWriteAnswer));
        let events = outcome.history.events();
        let lost: Vec<&Event> = events.iter().filter(|e| matches!(e.kind, EventKind::WriteAnswerLost { .. })).collect();
        assert_eq!(lost.len(), 1, "seed {seed}: exactly the planned loss");
        let EventKind::WriteAnswerLost { client, request } = lost[0].kind else { unreachable!() };
        assert!(lost[0].at_us >= 500_000, "seed {seed}: armed at 500 ms, taken later");
        let judged: Vec<WriteVerdict> = events
            .iter()
            .filter_map(|event| match event.kind {
                EventKind::WriteDone { client: c, request: r, verdict, .. } if c == client && r == request => {
                    Some(verdict)
                }
                _ => None,
            })
            .collect();
        // Twice at least: the network may lose the resend's answer too.
        assert!(judged.len() >= 2, "seed {seed}: the worker sent the same write again");
        let answer = WriteVerdict::Duplicate { accepted: judged[0] == WriteVerdict::Accepted };
        assert!(
            judged[1..].iter().all(|verdict| *verdict == answer),
            "seed {seed}: a resend is answered from the record, not applied again: {judged:?}"
        );
        assert!(outcome.ok, "seed {seed}: {:?}", outcome.violations);
    }
    // A resource without a record of answered writes applies the resend again.
    let flawed = Model { variant: Variant::ResourceNoDedup, ..model };
    let caught = breaks(&flawed, &at(500, Fault::LoseWriteAnswer), Property::EqualToken, 20);
    // 20 of 20 when written.
    assert!(caught >= 15, "equal-token in only {caught} of 20 seeds");
}

/// A fence strike with `restore` restores the resource from its last
/// backup within a millisecond of a takeover write (the told form of
/// `RestoreResource`); the protocol's resource reads its floors back and
/// stays safe, one that trusts its backup's highest tokens lets the
/// stalled holder's write in.
#[test]
fn a_restoring_fence_strike_puts_the_resource_back_just_after_a_takeover_write() {
    let stall = stall_until_written_over();
    let strikes = Fault::FenceStrikes { for_ms: 9_700, strikes: 3, down_ms: 0, restore: true };
    let plan: Vec<FaultEvent> =
        [Fault::BackupResource, strikes, stall].into_iter().map(|fault| FaultEvent { at_ms: 300, fault }).collect();
    let model = Model { safety_ms: 10_000, ..model() };
    let mut struck = 0;
    for seed in 0..6 {
        let outcome = run_plan(seed, &model, plan.clone());
        assert!(outcome.ok, "seed {seed}: {:?}", outcome.violations);
        let events = outcome.history.events();
        for (i, event) in events.iter().enumerate() {
            let EventKind::Churn(strike @ ChurnEvent::FenceStruck { after_us, restore, .. }) = &event.kind else {
                continue;
            };
            struck += 1;
            assert!(*restore && *after_us <= 1_000, "seed {seed}: `{strike}`");
            let restored = events[i..]
                .iter()
                .take_while(|e| e.at_us == event.at_us)
                .any(|e| matches!(e.kind, EventKind::ResourceRestored { backup_at_us: 300_000, .. }));
            assert!(restored, "seed {seed}: `{strike}` restored nothing from the 300 ms backup");
        }
    }
    assert!(struck >= 3, "{struck} restoring strikes in six seeds");
    // Without a backup there is nothing to restore: no strike, no restore.
    let unbacked: Vec<FaultEvent> = plan.iter().filter(|e| e.fault != Fault::BackupResource).cloned().collect();
    for seed in 0..2 {
        let outcome = run_plan(seed, &model, unbacked.clone());
        let told = |e: &&Event| {
            matches!(e.kind, EventKind::Churn(ChurnEvent::FenceStruck { .. }) | EventKind::ResourceRestored { .. })
        };
        assert_eq!(outcome.history.events().iter().filter(told).count(), 0, "seed {seed}: nothing to restore");
    }
    let naive = Model { variant: Variant::ResourceRestoreNaive, ..model };
    let caught = breaks(&naive, &plan, Property::FencedWrite, 20);
    let crashing: Vec<FaultEvent> = plan
        .iter()
        .map(|event| match event.fault {
            Fault::FenceStrikes { for_ms, strikes, .. } => {
                let fault = Fault::FenceStrikes { for_ms, strikes, down_ms: 10, restore: false };
                FaultEvent { at_ms: event.at_ms, fault }
            }
            _ => event.clone(),
        })
        .collect();
    let crashed = breaks(&naive, &crashing, Property::FencedWrite, 20);
    // 16 and 0 when written (8 strikes in the six seeds).
    assert!(caught >= 12 && caught >= crashed + 8, "fenced-write in {caught} of 20 seeds ({crashed} crashing)");
}
