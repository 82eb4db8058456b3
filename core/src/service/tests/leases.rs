//! Lease timers: expiry at the leader's local deadline after confirmation,
//! restart on a new leader, renew.

use super::*;
use crate::service::ReadPurpose;

fn renew(token: u64) -> ClientRequest {
    ClientRequest::Renew { key: key(), token: Token(token) }
}

#[test]
fn expiry_happens_at_the_local_deadline_and_not_before() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    let granted_at_ms = cluster.now_ms(NodeId(0));
    assert_eq!(cluster.server(NodeId(0)).lease_deadline_local_ms(&key()), Some(granted_at_ms + LEASE_MS));
    cluster.run_ms(LEASE_MS - TICK_MS);
    assert_eq!(cluster.expire_proposals(NodeId(0)), 0);
    assert_eq!(cluster.token_of(NodeId(0)), Some(Token(1)));
    cluster.run_ms(2 * TICK_MS);
    assert_eq!(cluster.expire_proposals(NodeId(0)), 1);
    assert_eq!(cluster.token_of(NodeId(0)), None);
    let expired = (Command::Expire { key: key(), token: Token(1) }, ApplyResult::Expired { existed: true });
    assert_eq!(cluster.applied(NodeId(0)).last(), Some(&expired));
}

#[test]
fn a_leader_cut_off_at_the_deadline_does_not_expire_until_confirmed() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.request(leader, 1, 1, acquire(0));
    cluster.run_ms(LEASE_MS - 30);
    cluster.isolate(leader);
    cluster.run_ms(60);
    assert_eq!(cluster.role(leader), Role::Leader, "still believes it leads (check-quorum has not fired)");
    assert_eq!(cluster.expire_proposals(leader), 0, "no expiry without a confirmation");
    cluster.heal();
    cluster.run_ms(500);
    assert_eq!(cluster.expire_proposals(leader), 1, "exactly one Expire once confirmed");
    for node in 0..3 {
        assert_eq!(cluster.token_of(NodeId(node)), None);
    }
}

#[test]
fn a_deposed_leader_never_expires_a_lease() {
    let (mut cluster, old) = three(Variant::Default);
    cluster.request(old, 1, 1, acquire(0));
    cluster.run_ms(100);
    cluster.isolate(old);
    cluster.run_ms(2 * LEASE_MS);
    assert_eq!(cluster.expire_proposals(old), 0);
    assert_ne!(cluster.role(old), Role::Leader, "check-quorum deposed it");
}

/// Acquires on the first leader, lets `held_ms` pass, then cuts the leader
/// off. Returns the cluster, the new leader, and the new leader's local time
/// when it had applied the Grant.
fn leader_change_mid_lease(variant: Variant, held_ms: u64) -> (Cluster, NodeId, u64) {
    let (mut cluster, old) = three(variant);
    cluster.request(old, 1, 1, acquire(0));
    // Heartbeats carry the commit to the followers within a few ticks.
    let granted_at_ms: Vec<u64> = (0..3).map(|n| cluster.now_ms(NodeId(n))).collect();
    cluster.run_ms(held_ms);
    cluster.isolate(old);
    assert!(cluster.run_until(5_000, |cluster| cluster.leader().is_some_and(|leader| leader != old)));
    let new = cluster.leader().expect("just elected");
    assert_eq!(cluster.token_of(new), Some(Token(1)));
    (cluster, new, granted_at_ms[usize::from(new.0)])
}

#[test]
fn a_new_leader_restarts_every_lease_with_a_full_lease() {
    let (mut cluster, new, granted_at_ms) = leader_change_mid_lease(Variant::Default, 600);
    let deadline_ms = cluster.server(new).lease_deadline_local_ms(&key()).expect("timer restarted");
    let office_ms = cluster.now_ms(new);
    assert!(deadline_ms + TICK_MS * 2 >= office_ms + LEASE_MS, "deadline {deadline_ms}, took office by {office_ms}");
    assert!(deadline_ms >= granted_at_ms + 600 + LEASE_MS);
    // Past the old deadline (apply + lease) the lock is still there.
    cluster.run_ms(granted_at_ms + LEASE_MS + 100 - cluster.now_ms(new));
    assert_eq!(cluster.expire_proposals(new), 0);
    assert_eq!(cluster.token_of(new), Some(Token(1)));
    // And a full lease after taking office it goes.
    cluster.run_ms(deadline_ms + 200 - cluster.now_ms(new));
    assert_eq!(cluster.expire_proposals(new), 1);
    assert_eq!(cluster.token_of(new), None);
}

#[test]
fn no_lease_restart_variant_expires_on_the_old_deadline() {
    let (mut cluster, new, granted_at_ms) = leader_change_mid_lease(Variant::NoLeaseRestartOnNewLeader, 600);
    let deadline_ms = cluster.server(new).lease_deadline_local_ms(&key()).expect("timer");
    assert!(deadline_ms <= granted_at_ms + LEASE_MS + 5 * TICK_MS, "deadline {deadline_ms} from the apply time");
    cluster.run_ms(granted_at_ms + LEASE_MS + 200 - cluster.now_ms(new));
    assert_eq!(cluster.expire_proposals(new), 1);
    assert_eq!(cluster.token_of(new), None);
}

#[test]
fn renew_extends_the_lease_for_the_holder_only() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.run_ms(800);
    cluster.request(NodeId(0), 1, 2, renew(1));
    assert_eq!(cluster.answers(1, 2), vec![ClientReply::Renewed { lease_ms: LEASE_MS }]);
    let renewed_at_ms = cluster.now_ms(NodeId(0));
    assert_eq!(cluster.server(NodeId(0)).lease_deadline_local_ms(&key()), Some(renewed_at_ms + LEASE_MS));
    cluster.request(NodeId(0), 2, 1, renew(9));
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::NotHeld]);
    cluster.request(NodeId(0), 1, 3, ClientRequest::Renew { key: Key::new("other"), token: Token(1) });
    assert_eq!(cluster.answers(1, 3), vec![ClientReply::NotHeld]);
    // The renewal moved the expiry: still held past the original deadline.
    cluster.run_ms(LEASE_MS - 100);
    assert_eq!(cluster.token_of(NodeId(0)), Some(Token(1)));
    cluster.run_ms(200);
    assert_eq!(cluster.token_of(NodeId(0)), None);
    cluster.request(NodeId(0), 1, 4, renew(1));
    assert_eq!(cluster.answers(1, 4), vec![ClientReply::NotHeld], "an expired lock cannot be renewed");
}

/// Renews at a leader that was just cut off (it still believes it leads).
fn renew_at_deposed_leader(variant: Variant) -> Vec<ClientReply> {
    let (mut cluster, old) = three(variant);
    cluster.request(old, 1, 1, acquire(0));
    cluster.run_ms(100);
    cluster.isolate(old);
    assert_eq!(cluster.role(old), Role::Leader);
    cluster.request(old, 1, 2, renew(1));
    cluster.run_ms(1_000);
    assert_ne!(cluster.role(old), Role::Leader);
    cluster.answers(1, 2)
}

/// Its confirmation round dies with its office: the client is redirected,
/// never told `Renewed`.
#[test]
fn a_renew_at_a_deposed_leader_is_redirected_not_acknowledged() {
    assert_only_redirected(&renew_at_deposed_leader(Variant::Default), "no Renewed from a deposed leader");
}

#[test]
fn renew_without_leadership_check_variant_acknowledges_at_a_deposed_leader() {
    assert_eq!(
        renew_at_deposed_leader(Variant::RenewWithoutLeadershipCheck),
        vec![ClientReply::Renewed { lease_ms: LEASE_MS }]
    );
}

/// A leader stalled while its successor granted a lock gets a renew of that
/// lock on resuming: its own table does not have the lock, but the lock is
/// live. Answering `NotHeld` from that table would tell the holder its lease
/// ended long before it could have; the answer waits for a leadership
/// confirmation, which a deposed leader never gets (it redirects the client).
fn renew_of_a_successors_grant_at_a_stalled_leader(variant: Variant) -> Vec<ClientReply> {
    let (mut cluster, old) = three(variant);
    cluster.pause(old);
    let successor =
        |cluster: &Cluster| (0..3).map(NodeId).find(|node| *node != old && cluster.server(*node).is_serving_leader());
    assert!(cluster.run_until(5_000, |cluster| successor(cluster).is_some()), "a successor is elected");
    let new = successor(&cluster).expect("just checked");
    cluster.request(new, 1, 1, acquire(0));
    let Some(ClientReply::Granted { token, .. }) = cluster.answers(1, 1).first().copied() else {
        panic!("the successor grants: {:?}", cluster.answers(1, 1));
    };
    assert!(cluster.server(old).is_serving_leader(), "the stalled leader still believes it leads");
    assert_eq!(cluster.token_of(old), None, "and has not heard of the grant");
    cluster.send(old, 1, 2, renew(token.0));
    cluster.resume(old);
    cluster.run_ms(1_000);
    assert!(!cluster.server(old).is_serving_leader());
    cluster.answers(1, 2)
}

#[test]
fn a_stalled_leader_does_not_answer_not_held_from_a_stale_table() {
    let answers = renew_of_a_successors_grant_at_a_stalled_leader(Variant::Default);
    assert_only_redirected(&answers, "no NotHeld from the stale table");
}

#[test]
fn renew_without_leadership_check_variant_answers_not_held_from_a_stale_table() {
    assert_eq!(
        renew_of_a_successors_grant_at_a_stalled_leader(Variant::RenewWithoutLeadershipCheck),
        vec![ClientReply::NotHeld]
    );
}

/// The confirmation round proves leadership; the deadline is checked again
/// when it comes back. Here the leader's clock is stepped back while the round
/// is out, so the deadline lies ahead again: no Expire until it passes anew.
#[test]
fn an_expiry_is_proposed_only_if_the_deadline_has_still_passed_when_confirmed() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.request(leader, 1, 1, acquire(0));
    let deadline_ms = cluster.server(leader).lease_deadline_local_ms(&key()).expect("timer");
    cluster.run_ms(deadline_ms - TICK_MS - cluster.now_ms(leader));
    let followers: Vec<NodeId> = (0..3).map(NodeId).filter(|node| *node != leader).collect();
    for follower in &followers {
        cluster.pause(*follower);
    }
    cluster.run_ms(2 * TICK_MS);
    assert!(cluster.now_ms(leader) >= deadline_ms);
    assert!(cluster.server(leader).reads.values().any(|round| round.purpose == ReadPurpose::Expiry), "round is out");
    cluster.step_clock(leader, -500);
    for follower in &followers {
        cluster.resume(*follower);
    }
    assert!(cluster.server(leader).reads.is_empty(), "the round came back");
    assert_eq!(cluster.expire_proposals(leader), 0, "the deadline is ahead again");
    assert_eq!(cluster.token_of(leader), Some(Token(1)));
    cluster.run_ms(deadline_ms + 100 - cluster.now_ms(leader));
    assert_eq!(cluster.expire_proposals(leader), 1, "expired once the deadline passed again");
}

#[test]
fn a_lease_expires_at_the_tick_its_deadline_is_reached() {
    // The deadline is the first instant the lease is over: due, confirmed and
    // proposed within that tick, not one tick later.
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    let deadline_ms = cluster.server(NodeId(0)).lease_deadline_local_ms(&key()).expect("timer");
    cluster.run_ms(LEASE_MS);
    assert_eq!(cluster.now_ms(NodeId(0)), deadline_ms);
    assert_eq!(cluster.expire_proposals(NodeId(0)), 1);
    assert_eq!(cluster.token_of(NodeId(0)), None);
}

#[test]
fn a_cut_off_leader_asks_for_expiry_confirmation_once_per_retry_interval() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.request(leader, 1, 1, acquire(0));
    cluster.run_ms(LEASE_MS - 40);
    cluster.isolate(leader);
    let rounds_out = |cluster: &Cluster| cluster.server(leader).reads.len();
    cluster.run_ms(30);
    assert_eq!(rounds_out(&cluster), 0, "nothing is due, nothing is asked");
    cluster.run_ms(30);
    assert_eq!(cluster.role(leader), Role::Leader, "check-quorum has not fired yet");
    assert_eq!(rounds_out(&cluster), 1, "one round for the due lease, not one per tick");
}

/// c1 holds tok1 and its lease ran out: the leader proposed its Expire, and
/// the append carrying it is held, so the Expire is not applied.
fn expire_in_flight(variant: Variant) -> (Cluster, NodeId) {
    let (mut cluster, leader) = three(variant);
    cluster.request(leader, 1, 1, acquire(0));
    cluster.hold_entries();
    assert!(cluster.run_until(2 * LEASE_MS, |cluster| cluster.expire_proposals(leader) == 1), "the Expire is proposed");
    assert_eq!(cluster.token_of(leader), Some(Token(1)), "and not applied");
    (cluster, leader)
}

/// c1's lease ran out and its Expire is proposed, but the append carrying
/// it is slow. A renew that arrives meanwhile must not be answered
/// `Renewed` (the Expire will apply and end the lock the client was told it
/// still holds), nor `NotHeld` (the Expire may yet be lost with this
/// leader, and the next one keep the lock): it is answered `Unavailable`
/// until the Expire applies, and the client's retry then hears `NotHeld`.
#[test]
fn a_renew_while_the_expire_of_its_token_is_in_flight_waits_for_the_expire() {
    let (mut cluster, leader) = expire_in_flight(Variant::Default);
    cluster.request(leader, 1, 2, renew(1));
    assert_eq!(cluster.answers(1, 2), vec![ClientReply::Unavailable], "neither Renewed nor NotHeld before it commits");
    cluster.release_entries();
    assert_eq!(cluster.token_of(leader), None);
    cluster.request(leader, 1, 2, renew(1));
    assert_eq!(cluster.answers(1, 2), vec![ClientReply::Unavailable, ClientReply::NotHeld], "the retry, once it has");
}

/// Under `renew-while-expiring` the same renew is confirmed.
#[test]
fn renew_while_expiring_variant_renews_while_the_expire_is_in_flight() {
    let (mut cluster, leader) = expire_in_flight(Variant::RenewWhileExpiring);
    cluster.request(leader, 1, 2, renew(1));
    assert!(matches!(cluster.answers(1, 2)[..], [ClientReply::Renewed { .. }]), "{:?}", cluster.answers(1, 2));
}

/// The leader applies c1's Grant and asks a read round; the answers come
/// back when its clock has moved `beyond_ms` past the freshness bound
/// (half the minimum election timeout) since the asking. Returns c1's
/// answers and how many more rounds were asked.
fn grant_confirmed_beyond_fresh(beyond_ms: u64) -> (Vec<ClientReply>, u64) {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.send(leader, 1, 1, acquire(0));
    let asked = |cluster: &Cluster| {
        cluster.server(leader).reads.values().any(|round| matches!(round.purpose, ReadPurpose::Grant { .. }))
    };
    cluster.settle_until(asked);
    assert!(asked(&cluster), "the Grant applied and its round was asked");
    let server = cluster.server(leader);
    let (fresh_ms, ctx_before) = (server.grant_confirmation_fresh_ms(), server.read_ctx_last);
    cluster.step_clock(leader, i64::try_from(fresh_ms + beyond_ms).expect("small"));
    cluster.settle();
    (cluster.answers(1, 1), cluster.server(leader).read_ctx_last - ctx_before)
}

/// A confirmation exactly `fresh_ms` old still answers the Grant; one
/// millisecond older proves nothing and a new round is asked.
#[test]
fn a_grant_confirmation_is_fresh_up_to_and_including_its_bound() {
    let (answers, more_rounds) = grant_confirmed_beyond_fresh(0);
    assert!(matches!(answers[..], [ClientReply::Granted { .. }]), "{answers:?}");
    assert_eq!(more_rounds, 0, "the first round was fresh enough");
    let (answers, more_rounds) = grant_confirmed_beyond_fresh(1);
    assert!(matches!(answers[..], [ClientReply::Granted { .. }]), "{answers:?}");
    assert_eq!(more_rounds, 1, "a stale round is asked again");
}

/// A campaign called for (the simulator's election storm) elects without
/// any node's timer running out: no tick passes here.
#[test]
fn a_server_told_to_campaign_leads_before_any_timer_runs_out() {
    let mut cluster = Cluster::new(3, Variant::Default);
    assert_eq!(cluster.leader(), None);
    cluster.campaign(NodeId(2));
    assert_eq!(cluster.leader(), Some(NodeId(2)));
}
