//! `Busy` and `TimedOut` only from confirmed leadership and committed state.

use super::*;

fn busy_or_timed_out(answers: &[ClientReply]) -> bool {
    answers.iter().any(|reply| matches!(reply, ClientReply::Busy { .. } | ClientReply::TimedOut))
}

/// c1 holds the key at `old`, c2 waits 300 ms for it; `old` stalls until a
/// successor has taken office, and its clock runs past c2's deadline.
fn stalled_leader_with_a_waiter() -> (Cluster, NodeId) {
    let (mut cluster, old) = three(Variant::Default);
    cluster.request(old, 1, 1, acquire(0));
    cluster.request(old, 2, 1, acquire(300));
    assert_eq!(cluster.answers(2, 1), vec![], "a waiter waits");
    cluster.pause(old);
    let successor = |cluster: &Cluster| (0..3).map(NodeId).any(|n| n != old && cluster.server(n).is_serving_leader());
    assert!(cluster.run_until(5_000, successor), "a successor took office");
    (cluster, old)
}

/// The stalled leader resumes and ticks before it reads what waited for it:
/// c2's deadline has passed on its clock. Its retry may wait at the
/// successor meanwhile, so a `TimedOut` from the deposed queue would tell
/// c2 it never got a lock it may be granted there.
#[test]
fn a_stalled_leader_does_not_time_out_its_waiters_before_it_knows_it_still_leads() {
    let (mut cluster, old) = stalled_leader_with_a_waiter();
    cluster.tick_alone(old);
    cluster.resume(old);
    cluster.run_ms(100);
    assert_ne!(cluster.role(old), Role::Leader);
    assert!(!busy_or_timed_out(&cluster.answers(2, 1)), "answers: {:?}", cluster.answers(2, 1));
    assert!(matches!(cluster.answers(2, 1)[..], [ClientReply::NotLeader { .. }]), "sent to the successor");
}

/// The successor released c1's lock; the stalled leader, not knowing, must
/// not tell a try-lock `Busy` from its stale table.
#[test]
fn a_stalled_leader_does_not_answer_busy_from_its_stale_table() {
    let (mut cluster, old) = stalled_leader_with_a_waiter();
    let successor = (0..3).map(NodeId).find(|n| *n != old && cluster.server(*n).is_serving_leader()).expect("one");
    cluster.request(successor, 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    assert_eq!(cluster.answers(1, 2), vec![ClientReply::Released]);
    cluster.send(old, 3, 1, acquire(0));
    cluster.resume(old);
    cluster.run_ms(100);
    assert!(!busy_or_timed_out(&cluster.answers(3, 1)), "answers: {:?}", cluster.answers(3, 1));
}

/// A leader cut off from the cluster proposes c1's Grant, which never
/// commits; c2's try-lock must not be told `Busy` by it.
#[test]
fn a_grant_in_flight_makes_no_busy_until_it_applies() {
    let (mut cluster, old) = three(Variant::Default);
    cluster.isolate(old);
    cluster.send(old, 1, 1, acquire(0));
    cluster.send(old, 2, 1, acquire(0));
    // A resend while its check is out is the same request, not a second check.
    cluster.send(old, 2, 1, acquire(0));
    cluster.settle();
    assert_eq!(cluster.answers(2, 1), vec![], "no answer before the Grant applies");
    assert!(cluster.run_until(5_000, |cluster| cluster.role(old) != Role::Leader), "check-quorum deposes it");
    assert!(!busy_or_timed_out(&cluster.answers(2, 1)), "answers: {:?}", cluster.answers(2, 1));
    assert!(
        matches!(cluster.answers(2, 1)[..], [ClientReply::NotLeader { .. }]),
        "the check never settled, so its client is sent on when the node leaves office: {:?}",
        cluster.answers(2, 1)
    );
    assert_eq!(cluster.token_of(old), None);
}

/// A resend of c2's wait overtaken by its `TimedOut` arrives after the key
/// freed: served afresh it would be granted to a client that has moved on.
#[test]
fn a_late_copy_of_a_timed_out_wait_is_answered_again_not_granted() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 2, 1, acquire(200));
    cluster.run_ms(200);
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::TimedOut]);
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.request(NodeId(0), 2, 1, acquire(200));
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::TimedOut, ClientReply::TimedOut]);
    assert_eq!(cluster.token_of(NodeId(0)), None, "the key stays free");
    // Once a newer request of c2 was answered, a copy of the older one gets nothing at all.
    cluster.request(NodeId(0), 3, 1, acquire(0));
    cluster.request(NodeId(0), 2, 2, acquire(0));
    assert!(matches!(cluster.answers(2, 2)[..], [ClientReply::Busy { .. }]));
    cluster.request(NodeId(0), 2, 1, acquire(200));
    cluster.run_ms(400);
    assert_eq!(cluster.answers(2, 1).len(), 2, "not queued, so never timed out again");
    cluster.request(NodeId(0), 2, 1, acquire(0));
    assert_eq!(cluster.answers(2, 1).len(), 2, "not judged again as a try-lock");
}

/// c1 and c2 are told `Busy` while c3 holds the key; c3 releases; a late
/// copy of c1's try-lock gets its `Busy` again. Answering one client must
/// not make the node forget another's answer.
#[test]
fn each_client_keeps_its_last_answer_while_the_table_has_room() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 3, 1, acquire(0));
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 2, 1, acquire(0));
    cluster.request(NodeId(0), 3, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.request(NodeId(0), 1, 1, acquire(0));
    let answers = cluster.answers(1, 1);
    assert!(matches!(answers[..], [ClientReply::Busy { .. }, ClientReply::Busy { .. }]), "{answers:?}");
    assert_eq!(cluster.token_of(NodeId(0)), None, "the key stays free");
}

/// The table of last answers is bounded: past `ANSWERED_MAX` clients the
/// oldest is forgotten, and a late copy of its request is served afresh
/// (the price of bounded memory; a copy that late is rare).
#[test]
fn the_table_of_last_answers_forgets_the_oldest_client_beyond_its_bound() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 0, 1, acquire(0));
    let clients = super::super::ANSWERED_MAX as u32 + 1;
    for client in 1..=clients {
        cluster.request(NodeId(0), client, 1, acquire(0));
    }
    cluster.request(NodeId(0), 0, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.request(NodeId(0), 1, 1, acquire(0));
    assert!(matches!(cluster.answers(1, 1)[1..], [ClientReply::Granted { .. }]), "{:?}", cluster.answers(1, 1));
    cluster.request(NodeId(0), clients, 1, acquire(0));
    assert!(matches!(cluster.answers(clients, 1)[1..], [ClientReply::Busy { .. }]), "the newest is remembered");
}

fn acquire_other(wait_ms: u64) -> ClientRequest {
    ClientRequest::Acquire { key: other_key(), lease_ms: LEASE_MS, wait_ms }
}

fn inflight_grant(cluster: &Cluster, leader: NodeId, key: &Key) -> LogIndex {
    cluster.server(leader).inflight_grant_index(key).expect("a Grant is in flight for the key")
}

/// c1's Grant is proposed but its append is slow; c2's try-lock finds the
/// key promised. The check's read round comes back (heartbeats pass) with
/// the log committed only below the Grant, so `Busy` waits until the Grant
/// applies: a Grant lost with the term would never have held the key. A
/// resend of c2's try-lock meanwhile is the same check, not a second one.
#[test]
fn a_check_confirmed_before_the_grant_in_flight_commits_waits_for_it() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.hold_entries();
    cluster.request(leader, 1, 1, acquire(0));
    let grant = inflight_grant(&cluster, leader, &key());
    cluster.request(leader, 2, 1, acquire(0));
    assert!(cluster.server(leader).reads.is_empty(), "the check's round came back");
    assert_eq!(cluster.server(leader).checks_parked.len(), 1, "and the check waits for the Grant");
    assert!(cluster.server(leader).applied_index() < grant);
    cluster.request(leader, 2, 1, acquire(0));
    assert_eq!(cluster.answers(2, 1), vec![], "no answer before the Grant applies");
    assert_eq!(cluster.server(leader).checks_parked.len(), 1, "the resend joined the parked check");
    cluster.release_entries();
    assert!(matches!(cluster.answers(1, 1)[..], [ClientReply::Granted { .. }]));
    assert!(matches!(cluster.answers(2, 1)[..], [ClientReply::Busy { .. }]), "{:?}", cluster.answers(2, 1));
}

/// Two Grants in flight, another key's first: c2's check on B-1042 waits
/// for B-1042's Grant, not for the earlier one.
#[test]
fn a_check_waits_for_the_grant_of_its_own_key() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.hold_entries();
    cluster.request(leader, 3, 1, acquire_other(0));
    cluster.request(leader, 1, 1, acquire(0));
    let (first, grant) = (inflight_grant(&cluster, leader, &other_key()), inflight_grant(&cluster, leader, &key()));
    assert!(first < grant);
    cluster.request(leader, 2, 1, acquire(0));
    cluster.deliver_entries_through(first);
    assert!(matches!(cluster.answers(3, 1)[..], [ClientReply::Granted { .. }]), "B-1043's Grant applied");
    assert_eq!(cluster.answers(2, 1), vec![], "B-1042's Grant is still in flight");
    cluster.release_entries();
    assert!(matches!(cluster.answers(2, 1)[..], [ClientReply::Busy { .. }]), "{:?}", cluster.answers(2, 1));
}

/// c2 has two checks out: request 1 on B-1042 (parked behind c1's Grant in
/// flight) and request 2 on B-1043 (held by c3, answered at once). The
/// older check settles last; it must not replace the newer answer, or a
/// late copy of request 2 would be served afresh once B-1043 is free and
/// granted to a client that was told `Busy`.
#[test]
fn an_older_check_settling_last_does_not_replace_the_newer_answer() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.request(leader, 3, 1, acquire_other(0));
    let Some(ClientReply::Granted { token, .. }) = cluster.answers(3, 1).first().copied() else {
        panic!("c3 holds B-1043: {:?}", cluster.answers(3, 1));
    };
    cluster.hold_entries();
    cluster.request(leader, 1, 1, acquire(0));
    cluster.request(leader, 2, 1, acquire(0));
    cluster.request(leader, 2, 2, acquire_other(0));
    assert!(matches!(cluster.answers(2, 2)[..], [ClientReply::Busy { .. }]), "{:?}", cluster.answers(2, 2));
    cluster.release_entries();
    assert!(matches!(cluster.answers(2, 1)[..], [ClientReply::Busy { .. }]), "{:?}", cluster.answers(2, 1));
    cluster.request(leader, 3, 2, ClientRequest::Release { key: other_key(), token });
    assert_eq!(cluster.answers(3, 2), vec![ClientReply::Released]);
    cluster.request(leader, 2, 2, acquire_other(0));
    assert!(
        matches!(cluster.answers(2, 2)[..], [ClientReply::Busy { .. }, ClientReply::Busy { .. }]),
        "the late copy is answered as before: {:?}",
        cluster.answers(2, 2)
    );
    assert_eq!(cluster.server(leader).state().lock(&other_key()), None, "B-1043 stays free");
}
