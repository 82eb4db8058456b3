//! Acquire, release and the Granted decision.

use super::*;
use crate::service::ReadPurpose;
use crate::Holder;

#[test]
fn granted_only_after_commit_and_apply() {
    let mut cluster = single(Variant::Default);
    cluster.send(NodeId(0), 1, 1, acquire(0));
    assert_eq!(cluster.answers(1, 1), vec![], "nothing is answered before the Grant is applied");
    cluster.settle();
    assert_eq!(cluster.answers(1, 1), vec![ClientReply::Granted { token: Token(1), lease_ms: LEASE_MS }]);
    assert_eq!(cluster.token_of(NodeId(0)), Some(Token(1)));
}

#[test]
fn granted_in_a_three_node_cluster_is_applied_everywhere() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.request(leader, 1, 1, acquire(0));
    assert_eq!(cluster.replies(1, 1), vec![(leader, ClientReply::Granted { token: Token(1), lease_ms: LEASE_MS })]);
    cluster.run_ms(100);
    for node in 0..3 {
        assert_eq!(cluster.token_of(NodeId(node)), Some(Token(1)));
    }
}

#[test]
fn try_lock_on_a_held_key_answers_busy_with_the_remaining_lease() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.run_ms(300);
    cluster.request(NodeId(0), 2, 1, acquire(0));
    let [ClientReply::Busy { remaining_ms }] = cluster.answers(2, 1)[..] else {
        panic!("expected Busy, got {:?}", cluster.answers(2, 1));
    };
    assert!(remaining_ms <= LEASE_MS - 300, "remaining {remaining_ms}");
    assert!(remaining_ms >= LEASE_MS - 300 - 2 * TICK_MS, "remaining {remaining_ms}");
}

#[test]
fn a_waiter_is_granted_when_the_key_frees() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 2, 1, acquire(5_000));
    assert_eq!(cluster.answers(2, 1), vec![], "a waiter waits");
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    assert_eq!(cluster.answers(1, 2), vec![ClientReply::Released]);
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::Granted { token: Token(2), lease_ms: LEASE_MS }]);
}

#[test]
fn a_waiter_times_out_at_its_deadline() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 2, 1, acquire(200));
    cluster.run_ms(190);
    assert_eq!(cluster.answers(2, 1), vec![]);
    // The deadline is the first instant the wait is over.
    cluster.run_ms(10);
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::TimedOut]);
    assert_eq!(cluster.token_of(NodeId(0)), Some(Token(1)));
}

/// A backward step of the leader's clock does not stretch a wait queued
/// before it: the deadline moves back with the clock, to within the tick
/// that hides part of the step (postmortem: swarm seed 39, where a 3.9 s
/// step made two waits end 3.9 s late and swallowed their retries).
#[test]
fn a_wait_queued_before_a_backward_clock_step_ends_after_its_wait() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 2, 1, acquire(500));
    cluster.run_ms(100);
    cluster.step_clock(NodeId(0), -400);
    cluster.run_ms(380);
    assert_eq!(cluster.answers(2, 1), vec![], "480 ms into a wait of 500 ms");
    cluster.run_ms(40);
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::TimedOut], "520 ms into a wait of 500 ms");
}

/// A wait queued after a backward step, before the next tick reads the
/// clock, is measured from its own reading and not moved back again.
#[test]
fn a_wait_queued_just_after_a_backward_clock_step_lasts_its_wait() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.run_ms(100);
    cluster.step_clock(NodeId(0), -400);
    cluster.request(NodeId(0), 2, 1, acquire(200));
    cluster.run_ms(190);
    assert_eq!(cluster.answers(2, 1), vec![]);
    cluster.run_ms(10);
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::TimedOut]);
}

/// `waiters-never-time-out`: the same wait is never told `TimedOut`; it
/// stays queued past its deadline and is granted, late, once the key frees.
#[test]
fn waiters_never_time_out_variant_leaves_an_expired_wait_unanswered() {
    let mut cluster = single(Variant::WaitersNeverTimeOut);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 2, 1, acquire(200));
    cluster.run_ms(800);
    assert_eq!(cluster.answers(2, 1), vec![], "no TimedOut, 600 ms past the deadline");
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::Granted { token: Token(2), lease_ms: LEASE_MS }]);
}

/// The client of a full queue, under `variant`, and what it is answered.
fn fourth_waiter_of_a_queue_of_two(variant: Variant) -> (Cluster, Vec<ClientReply>) {
    let mut cluster = single(variant);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    // wait_queue_max is 2 in the test cluster.
    cluster.request(NodeId(0), 2, 1, acquire(5_000));
    cluster.request(NodeId(0), 3, 1, acquire(5_000));
    cluster.request(NodeId(0), 4, 1, acquire(5_000));
    let answers = cluster.answers(4, 1);
    (cluster, answers)
}

/// The requests the node turned away for a full queue, as its outputs say.
fn turned_away(cluster: &Cluster) -> Vec<Holder> {
    let outputs = cluster.outputs_of(NodeId(0));
    outputs
        .filter_map(|output| if let Output::TurnedAway { holder, .. } = output { Some(*holder) } else { None })
        .collect()
}

/// `silent-unavailable`: the request a full queue turns away is not told so
/// (the history still learns it was turned away).
#[test]
fn silent_unavailable_variant_leaves_a_full_queue_unanswered() {
    let (cluster, answers) = fourth_waiter_of_a_queue_of_two(Variant::SilentUnavailable);
    assert_eq!(answers, vec![]);
    assert_eq!(turned_away(&cluster), vec![Holder { client: ClientId(4), request: RequestId(1) }]);
}

#[test]
fn the_wait_queue_is_bounded() {
    let (mut cluster, answers) = fourth_waiter_of_a_queue_of_two(Variant::Default);
    assert_eq!(cluster.answers(2, 1), vec![]);
    assert_eq!(cluster.answers(3, 1), vec![]);
    assert_eq!(answers, vec![ClientReply::Unavailable]);
    // The turn-away is told to the driver, for the history: backpressure, not a fault.
    assert_eq!(turned_away(&cluster), vec![Holder { client: ClientId(4), request: RequestId(1) }]);
    // First in, first served.
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::Granted { token: Token(2), lease_ms: LEASE_MS }]);
    assert_eq!(cluster.answers(3, 1), vec![]);
}

#[test]
fn a_newer_request_of_the_same_client_drops_its_abandoned_wait() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 2, 1, acquire(5_000));
    // c2 gave up waiting and asks again with its next request, a try-lock.
    cluster.request(NodeId(0), 2, 2, acquire(0));
    assert!(matches!(cluster.answers(2, 2)[..], [ClientReply::Busy { .. }]));
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.run_ms(100);
    assert_eq!(cluster.answers(2, 1), vec![], "the abandoned wait is not granted");
    assert_eq!(cluster.server(NodeId(0)).state().lock(&key()), None, "the key is free for whoever asks next");
    // A retry of the queued request itself keeps its place.
    cluster.request(NodeId(0), 3, 1, acquire(0));
    cluster.request(NodeId(0), 2, 3, acquire(5_000));
    cluster.request(NodeId(0), 2, 3, acquire(5_000));
    cluster.request(NodeId(0), 3, 2, ClientRequest::Release { key: key(), token: Token(2) });
    assert_eq!(cluster.answers(2, 3), vec![ClientReply::Granted { token: Token(3), lease_ms: LEASE_MS }]);
}

#[test]
fn an_abandoned_wait_gives_up_its_place_in_the_bounded_queue() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    // wait_queue_max is 2 in the test cluster: c2 and c3 fill it.
    cluster.request(NodeId(0), 2, 1, acquire(5_000));
    cluster.request(NodeId(0), 3, 1, acquire(5_000));
    // c2 gives up waiting and moves on to a try-lock, told Busy.
    cluster.request(NodeId(0), 2, 2, acquire(0));
    assert!(matches!(cluster.answers(2, 2)[..], [ClientReply::Busy { .. }]));
    // Its abandoned wait no longer holds a place: c4 queues instead of being turned away.
    cluster.request(NodeId(0), 4, 1, acquire(5_000));
    assert_eq!(cluster.answers(4, 1), vec![], "c4 waits in the place c2 gave up");
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.run_ms(100);
    assert_eq!(cluster.answers(3, 1), vec![ClientReply::Granted { token: Token(2), lease_ms: LEASE_MS }]);
    let abandoned = Holder { client: ClientId(2), request: RequestId(1) };
    let proposed = cluster
        .applied(NodeId(0))
        .iter()
        .any(|(command, _)| matches!(command, Command::Grant { holder, .. } if *holder == abandoned));
    assert!(!proposed, "no Grant is proposed for a wait its client abandoned");
}

#[test]
fn a_retry_with_the_same_request_id_gets_the_original_token() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.run_ms(100);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    let granted = ClientReply::Granted { token: Token(1), lease_ms: LEASE_MS };
    assert_eq!(cluster.answers(1, 1), vec![granted, granted]);
    assert_eq!(cluster.server(NodeId(0)).state().token_last(), Token(1), "no second token was issued");
}

#[test]
fn a_retry_while_the_grant_is_in_flight_proposes_no_second_grant() {
    let mut cluster = single(Variant::Default);
    cluster.send(NodeId(0), 1, 1, acquire(0));
    cluster.send(NodeId(0), 1, 1, acquire(0));
    cluster.settle();
    let grants =
        cluster.applied(NodeId(0)).iter().filter(|(command, _)| matches!(command, Command::Grant { .. })).count();
    assert_eq!(grants, 1);
    assert_eq!(cluster.answers(1, 1), vec![ClientReply::Granted { token: Token(1), lease_ms: LEASE_MS }]);
}

#[test]
fn a_second_client_is_not_granted_a_key_with_a_grant_in_flight() {
    let mut cluster = single(Variant::Default);
    cluster.send(NodeId(0), 1, 1, acquire(0));
    cluster.send(NodeId(0), 2, 1, acquire(0));
    cluster.settle();
    assert!(matches!(cluster.answers(2, 1)[..], [ClientReply::Busy { .. }]));
    let rejected =
        cluster.applied(NodeId(0)).iter().filter(|(_, result)| *result == ApplyResult::GrantRejected).count();
    assert_eq!(rejected, 0, "GrantRejected stays defensive");
}

/// A Grant and the Release of its token applied in one batch: the lock is
/// gone when the answer would leave, so the safe server says NotHeld.
fn grant_then_release_in_one_batch(variant: Variant) -> Vec<ClientReply> {
    let mut cluster = single(variant);
    cluster.send(NodeId(0), 1, 1, acquire(0));
    // Tokens are deterministic: the Grant will get token 1.
    cluster.send(NodeId(0), 2, 1, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.settle();
    assert_eq!(cluster.token_of(NodeId(0)), None);
    cluster.answers(1, 1)
}

#[test]
fn granted_is_suppressed_for_a_lock_that_is_already_gone() {
    assert_eq!(grant_then_release_in_one_batch(Variant::Default), vec![ClientReply::NotHeld]);
}

#[test]
fn grant_after_expired_wait_variant_says_granted_for_a_gone_lock() {
    assert_eq!(
        grant_then_release_in_one_batch(Variant::GrantAfterExpiredWait),
        vec![ClientReply::Granted { token: Token(1), lease_ms: LEASE_MS }]
    );
}

#[test]
fn release_is_owner_safe() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 2, 1, ClientRequest::Release { key: key(), token: Token(7) });
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::NotHeld]);
    assert_eq!(cluster.token_of(NodeId(0)), Some(Token(1)));
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    assert_eq!(cluster.answers(1, 2), vec![ClientReply::Released]);
    assert_eq!(cluster.token_of(NodeId(0)), None);
}

/// A proposal made cut off is lost: its client is redirected when the
/// leader falls, and never told an outcome by it.
#[test]
fn a_deposed_leader_redirects_its_lost_proposals_and_never_answers_them() {
    let (mut cluster, old) = three(Variant::Default);
    cluster.isolate(old);
    cluster.send(old, 1, 1, acquire(0));
    cluster.settle();
    assert!(cluster.run_until(5_000, |cluster| cluster.leader().is_some_and(|leader| leader != old)));
    cluster.heal();
    cluster.run_ms(1_000);
    assert_ne!(cluster.role(old), Role::Leader);
    assert_only_redirected(&cluster.answers(1, 1), "the lost proposal has no outcome to tell");
    assert_eq!(cluster.token_of(old), None, "the uncommitted Grant was overwritten");
}

/// A leader is cut off after its Release reached both followers but before it
/// learned the commit. Its successor commits the Release with its no-op; the
/// old leader applies it as a follower and must not answer: it no longer leads
/// the term it proposed in. It redirected the client when it fell (the
/// client's resend finds the lock gone at the successor).
#[test]
fn a_deposed_leader_redirects_a_release_its_successor_committed() {
    let (mut cluster, old) = three(Variant::Default);
    cluster.request(old, 1, 1, acquire(0));
    let [ClientReply::Granted { token, .. }] = cluster.answers(1, 1)[..] else {
        panic!("expected one Granted, got {:?}", cluster.answers(1, 1));
    };
    let release_index = LogIndex(cluster.server(old).raft.last_index().0 + 1);
    cluster.send(old, 1, 2, ClientRequest::Release { key: key(), token });
    let followers = [other_than(old), NodeId(3 - old.0 - other_than(old).0)];
    let both_hold_it =
        |cluster: &Cluster| followers.iter().all(|f| cluster.server(*f).raft.last_index() >= release_index);
    cluster.settle_until(both_hold_it);
    assert!(both_hold_it(&cluster), "the Release reached both followers");
    assert!(cluster.server(old).raft.commit_index() < release_index, "the old leader has not learned the commit");
    cluster.isolate(old);
    assert!(cluster.run_until(5_000, |cluster| cluster.leader().is_some_and(|leader| leader != old)));
    cluster.heal();
    cluster.run_ms(1_000);
    assert_ne!(cluster.role(old), Role::Leader);
    let released = |(command, result): &(Command, ApplyResult)| {
        matches!(command, Command::Release { .. }) && *result == ApplyResult::Released
    };
    assert!(cluster.applied(old).iter().any(released), "the old leader applied the committed Release");
    let [(from, ClientReply::NotLeader { .. })] = cluster.replies(1, 2)[..] else {
        panic!("expected one NotLeader and no outcome, got {:?}", cluster.replies(1, 2));
    };
    assert_eq!(from, old, "only a node leading the proposal's term answers it, and it has fallen");
}

/// A leader stalls (a GC pause) with the answers to its Grant's confirmation
/// round queued, and its clock is stepped back during the stall by more than
/// the stall lasted. Meanwhile a successor took office and the lock expired.
/// The clock now reads earlier than when the round was asked: it cannot say
/// how long the node stalled, so the leader asks again (and, deposed, never
/// gets the answer: it redirects the client) instead of telling the client
/// Granted for a gone lock.
#[test]
fn a_leader_whose_clock_went_back_during_a_stall_asks_again() {
    let (mut cluster, old) = three(Variant::Default);
    cluster.send(old, 1, 1, acquire(0));
    let confirming = |cluster: &Cluster| {
        let server = cluster.server(old);
        let grant_round = server.reads.values().any(|round| matches!(round.purpose, ReadPurpose::Grant { .. }));
        grant_round && !server.has_ready()
    };
    cluster.settle_until(confirming);
    assert!(confirming(&cluster), "the Grant applied and its confirmation round went out");
    let asked_ms = cluster.now_ms(old);
    cluster.pause(old);
    let successor_expired_it = |cluster: &Cluster| {
        (0..3)
            .map(NodeId)
            .any(|node| node != old && cluster.server(node).is_serving_leader() && cluster.token_of(node).is_none())
    };
    assert!(cluster.run_until(5_000, successor_expired_it), "a successor took office and expired the lock");
    let stalled_ms = cluster.now_ms(old) - asked_ms;
    cluster.step_clock(old, -i64::try_from(stalled_ms + TICK_MS).expect("a short stall"));
    cluster.resume(old);
    cluster.run_ms(500);
    assert_only_redirected(&cluster.answers(1, 1), "no Granted for the expired lock");
    assert_ne!(cluster.role(old), Role::Leader);
}

/// A leader that loses office has proposed nothing for its waiters, so it
/// sends them to the new leader at once instead of leaving them to time out,
/// and keeps no lease timer or office of its own.
#[test]
fn a_deposed_leader_redirects_its_waiters_and_drops_its_timers() {
    let (mut cluster, old) = three(Variant::Default);
    cluster.request(old, 1, 1, acquire(0));
    cluster.request(old, 2, 1, acquire(60_000));
    assert_eq!(cluster.answers(2, 1), vec![], "a waiter waits");
    assert!(cluster.server(old).lease_deadline_local_ms(&key()).is_some());
    cluster.isolate(old);
    assert!(cluster.run_until(5_000, |cluster| cluster.role(old) != Role::Leader), "check-quorum deposes it");
    let [ClientReply::NotLeader { .. }] = cluster.answers(2, 1)[..] else {
        panic!("expected one NotLeader, got {:?}", cluster.answers(2, 1));
    };
    assert!(!cluster.server(old).is_serving_leader());
    assert_eq!(cluster.server(old).lease_deadline_local_ms(&key()), None, "only the leader keeps lease timers");
}

/// A leader deposed with a proposal of its term in flight cannot learn its
/// outcome, so it redirects the client at once (`NotLeader`) instead of
/// leaving it to time out (an `answered` violation after a heal, seed 41702
/// of 200,000). The resend to the next leader finds the one outcome: the
/// same request is granted once, with one token everywhere.
#[test]
fn a_deposed_leader_redirects_the_clients_of_its_proposals() {
    let (mut cluster, old) = three(Variant::Default);
    cluster.hold_entries();
    cluster.request(old, 1, 1, acquire(0));
    assert_eq!(cluster.answers(1, 1), vec![], "the Grant is proposed and not committed");
    cluster.isolate(old);
    assert!(cluster.run_until(5_000, |cluster| cluster.role(old) != Role::Leader), "check-quorum deposes it");
    assert_only_redirected(&cluster.answers(1, 1), "the Grant is in flight");
    cluster.heal();
    cluster.release_entries();
    let leader = cluster.elect();
    cluster.request(leader, 1, 1, acquire(0));
    let [_, ClientReply::Granted { token, .. }] = cluster.answers(1, 1)[..] else {
        panic!("expected the resend granted, got {:?}", cluster.answers(1, 1));
    };
    cluster.run_ms(200);
    for node in 0..3 {
        assert_eq!(cluster.token_of(NodeId(node)), Some(token), "one lock, on n{node} too");
    }
}

/// Under `GrantAfterExpiredWait` the deposed leader keeps its proposals:
/// the naive server it models answers whenever its Grant applies.
#[test]
fn grant_after_expired_wait_keeps_a_deposed_leaders_proposals() {
    let (mut cluster, old) = three(Variant::GrantAfterExpiredWait);
    cluster.hold_entries();
    cluster.request(old, 1, 1, acquire(0));
    cluster.isolate(old);
    assert!(cluster.run_until(5_000, |cluster| cluster.role(old) != Role::Leader), "check-quorum deposes it");
    assert_eq!(cluster.answers(1, 1), vec![], "no redirect: it still means to answer");
}

/// The leader stalls `stall_ms` with the answers to its Grant's confirmation
/// round queued, then takes them while cut off from the cluster: whatever it
/// answers now comes from that one round, since a new round cannot complete.
fn grant_answers_after_a_stalled_confirmation(stall_ms: u64) -> Vec<ClientReply> {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.send(leader, 1, 1, acquire(0));
    let confirming = |cluster: &Cluster| {
        let server = cluster.server(leader);
        let grant_round = server.reads.values().any(|round| matches!(round.purpose, ReadPurpose::Grant { .. }));
        grant_round && !server.has_ready()
    };
    cluster.settle_until(confirming);
    assert!(confirming(&cluster), "the Grant applied and its confirmation round went out");
    cluster.pause(leader);
    cluster.run_ms(stall_ms);
    cluster.isolate(leader);
    cluster.resume(leader);
    cluster.answers(1, 1)
}

/// Half the minimum election timeout (10 ticks of 10 ms): followers refuse
/// other candidates that long after hearing from the leader.
const GRANT_FRESH_MS: u64 = 50;

#[test]
fn a_grant_confirmed_within_half_the_election_timeout_is_answered() {
    assert_eq!(
        grant_answers_after_a_stalled_confirmation(GRANT_FRESH_MS - 2 * TICK_MS),
        vec![ClientReply::Granted { token: Token(1), lease_ms: LEASE_MS }]
    );
}

#[test]
fn a_grant_confirmation_older_than_half_the_election_timeout_is_asked_again() {
    assert_eq!(grant_answers_after_a_stalled_confirmation(GRANT_FRESH_MS + 2 * TICK_MS), vec![]);
}

#[test]
fn another_request_of_the_same_client_is_not_a_retry_of_its_grant_in_flight() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.send(leader, 1, 1, acquire(0));
    // Request 2 of the same client arrives before request 1's Grant applied.
    cluster.send(leader, 1, 2, acquire(0));
    cluster.settle();
    assert_eq!(cluster.answers(1, 1), vec![ClientReply::Granted { token: Token(1), lease_ms: LEASE_MS }]);
    let [ClientReply::Busy { .. }] = cluster.answers(1, 2)[..] else {
        panic!("expected Busy for request 2, got {:?}", cluster.answers(1, 2));
    };
    let grants = cluster.applied(leader).into_iter().filter(|(command, _)| matches!(command, Command::Grant { .. }));
    assert_eq!(grants.count(), 1, "no second Grant was proposed");
}

#[test]
fn grants_confirmed_by_concurrent_rounds_are_all_answered() {
    // Each confirmation round has its own context, so rounds out at the same
    // time cannot be mistaken for one another.
    let (mut cluster, leader) = three(Variant::Default);
    let other = ClientRequest::Acquire { key: other_key(), lease_ms: LEASE_MS, wait_ms: 0 };
    cluster.send(leader, 1, 1, acquire(0));
    cluster.send(leader, 2, 1, other);
    cluster.settle();
    assert_eq!(cluster.answers(1, 1), vec![ClientReply::Granted { token: Token(1), lease_ms: LEASE_MS }]);
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::Granted { token: Token(2), lease_ms: LEASE_MS }]);
}

#[test]
fn the_keys_with_waiters_are_bounded() {
    let keys_max = crate::service::WAITING_KEYS_MAX;
    let mut cluster = single(Variant::Default);
    let acquire_key = |n: usize, wait_ms: u64| ClientRequest::Acquire {
        key: Key::new(format!("invoice/{n}")),
        lease_ms: LEASE_MS,
        wait_ms,
    };
    for n in 0..=keys_max {
        cluster.request(NodeId(0), 1, n as u64 + 1, acquire_key(n, 0));
    }
    // One waiting client per key: a client's newer request would drop its older wait.
    let waiter = |n: usize| 100 + n as u32;
    for n in 0..keys_max {
        cluster.request(NodeId(0), waiter(n), 1, acquire_key(n, 5_000));
    }
    assert_eq!(cluster.answers(waiter(keys_max - 1), 1), vec![], "the last key that may have waiters");
    cluster.request(NodeId(0), 3, 1, acquire_key(keys_max, 5_000));
    assert_eq!(cluster.answers(3, 1), vec![ClientReply::Unavailable], "one key too many");
    cluster.request(NodeId(0), 4, 1, acquire_key(0, 5_000));
    assert_eq!(cluster.answers(4, 1), vec![], "a key that already has waiters still queues");
}

/// A retry of a Grant whose lock has since been released and granted to
/// another client: the retry learns its lock is gone (`NotHeld`), not that
/// the key is busy, which would say it never held it.
#[test]
fn a_retry_of_an_ended_grant_is_not_held_even_while_another_holds_the_key() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    assert_eq!(cluster.answers(1, 1), vec![ClientReply::Granted { token: Token(1), lease_ms: LEASE_MS }]);
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.request(NodeId(0), 2, 1, acquire(0));
    assert_eq!(cluster.token_of(NodeId(0)), Some(Token(2)));
    cluster.request(NodeId(0), 1, 1, acquire(0));
    assert_eq!(cluster.answers(1, 1)[1..], [ClientReply::NotHeld]);
}

/// A newcomer does not overtake a queue whose head could not be proposed.
/// With the leader's uncommitted log full (two entries at most here) as a
/// Release applies, the head's Grant is refused (`Unavailable`) and the rest
/// of the queue still waits on a free key; a try-lock that arrives once a
/// commit has made room, before the next apply serves the queue, is not
/// granted ahead of it (it is told to retry).
#[test]
fn a_newcomer_does_not_overtake_waiters_whose_head_could_not_be_proposed() {
    let narrow = |raft: &mut crate::raft::Config| {
        raft.entries_per_message_max = 1;
        raft.inflight_max = 1;
    };
    let mut config = ServiceConfig::standard(Variant::Default);
    config.wait_queue_max = 2;
    let mut cluster = Cluster::with_raft(3, config, narrow);
    let leader = cluster.elect();
    let follower = other_than(leader);
    let try_lock = |name: &str| ClientRequest::Acquire { key: Key::new(name), lease_ms: LEASE_MS, wait_ms: 0 };
    cluster.request(leader, 1, 1, acquire(0));
    cluster.request(leader, 2, 1, acquire(5_000));
    cluster.request(leader, 3, 1, acquire(5_000));
    // c1's Release and a grant of another key, both held uncommitted.
    cluster.hold_entries();
    cluster.send(leader, 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.settle();
    cluster.send(leader, 4, 1, try_lock("other/1"));
    cluster.settle();
    // The Release reaches a follower, whose answer commits it; before the
    // leader applies it, a third grant fills the uncommitted log again.
    let held: Vec<Message> = std::mem::take(&mut cluster.held_entries).into_iter().collect();
    cluster.step_into(follower, held);
    let answers = cluster.take_ready(follower);
    cluster.step_into(leader, answers);
    cluster.send(leader, 5, 1, try_lock("other/2"));
    // The leader applies the Release: c2's Grant cannot be proposed.
    let sent = cluster.take_ready(leader);
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::Unavailable], "the head's Grant was refused");
    // A commit makes room; the newcomer arrives before the next apply.
    cluster.step_into(follower, sent);
    let answers = cluster.take_ready(follower);
    cluster.step_into(leader, answers);
    cluster.send(leader, 6, 1, acquire(0));
    cluster.entries_pass_through = None;
    cluster.inbox.clear();
    cluster.tick();
    cluster.run_ms(200);
    // Its Busy is proposed while the key is free, so the state machine finds
    // no lock to decline against and the client is told to retry.
    assert_eq!(cluster.answers(6, 1), vec![ClientReply::Unavailable], "the newcomer is not granted ahead of the queue");
}
