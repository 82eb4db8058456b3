//! `Busy` and `TimedOut` only through the log, as a Decline the session keeps.

use super::*;
use crate::service::PendingKind;

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
/// c2 it never got a lock it may be granted there. Its Decline cannot
/// commit: c2 hears nothing from it and asks the successor.
#[test]
fn a_stalled_leader_does_not_time_out_its_waiters_before_it_knows_it_still_leads() {
    let (mut cluster, old) = stalled_leader_with_a_waiter();
    cluster.tick_alone(old);
    cluster.resume(old);
    cluster.run_ms(100);
    assert_ne!(cluster.role(old), Role::Leader);
    assert!(!busy_or_timed_out(&cluster.answers(2, 1)), "answers: {:?}", cluster.answers(2, 1));
    assert!(
        cluster.applied(old).iter().all(|(command, _)| !matches!(command, Command::Decline { .. })),
        "the deposed leader's Decline never applied"
    );
}

/// Seeds 94867 and 29867 of the 100,000-seed hunt: c2's wait timed out at
/// the leader, and the answer was lost. The leader stalls; c2 resends the
/// same request to the successor once the key is free. The successor must
/// answer `TimedOut` again from the session, not queue or grant it.
#[test]
fn a_wait_timed_out_at_one_leader_is_not_granted_by_the_next() {
    let (mut cluster, old) = three(Variant::Default);
    cluster.request(old, 1, 1, acquire(0));
    let token = cluster.token_of(old).expect("c1 holds the key");
    cluster.request(old, 2, 1, acquire(200));
    cluster.run_ms(300);
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::TimedOut], "the answer that gets lost");
    cluster.pause(old);
    let serving = |cluster: &Cluster| (0..3).map(NodeId).find(|n| *n != old && cluster.server(*n).is_serving_leader());
    assert!(cluster.run_until(5_000, |cluster| serving(cluster).is_some()), "a successor took office");
    let successor = serving(&cluster).expect("just checked");
    cluster.request(successor, 1, 2, ClientRequest::Release { key: key(), token });
    assert_eq!(cluster.answers(1, 2), vec![ClientReply::Released]);
    cluster.request(successor, 2, 1, acquire(200));
    cluster.run_ms(300);
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::TimedOut, ClientReply::TimedOut]);
    assert_eq!(cluster.token_of(successor), None, "the key stays free");
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
    // A resend while its Decline is in flight is the same request, not a second Decline.
    cluster.send(old, 2, 1, acquire(0));
    cluster.settle();
    let declines = |cluster: &Cluster| {
        let pending = cluster.server(old).pending.values();
        pending.filter(|pending| matches!(pending.kind, PendingKind::Decline { .. })).count()
    };
    assert_eq!(declines(&cluster), 1, "the resend is the same request, not a second Decline");
    assert_eq!(cluster.answers(2, 1), vec![], "no answer before the Grant applies");
    assert!(cluster.run_until(5_000, |cluster| cluster.role(old) != Role::Leader), "check-quorum deposes it");
    cluster.run_ms(100);
    assert_only_redirected(&cluster.answers(2, 1), "the Decline never committed: c2 asks again elsewhere");
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
    assert!(cluster.server(NodeId(0)).waiters.is_empty());
    cluster.request(NodeId(0), 2, 1, acquire(0));
    assert_eq!(cluster.answers(2, 1).len(), 2, "not judged again as a try-lock");
}

/// c1 and c2 are told `Busy` while c3 holds the key; c3 releases; a late
/// copy of c1's try-lock gets its `Busy` again (with no time left: the key
/// is free now). Answering one client must not make the state forget
/// another's answer.
#[test]
fn each_client_keeps_its_last_answer_in_its_session() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 3, 1, acquire(0));
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 2, 1, acquire(0));
    cluster.request(NodeId(0), 3, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.request(NodeId(0), 1, 1, acquire(0));
    let answers = cluster.answers(1, 1);
    assert!(matches!(answers[..], [ClientReply::Busy { .. }, ClientReply::Busy { remaining_ms: 0 }]), "{answers:?}");
    assert_eq!(cluster.token_of(NodeId(0)), None, "the key stays free");
}

/// A try-lock whose Decline applies after the key was released (the Release
/// was ahead of it in the log) records nothing: `Busy` there would be a
/// lie, so the client is told `Unavailable` and asks again.
#[test]
fn a_busy_that_meets_a_free_key_is_not_recorded() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.request(leader, 1, 1, acquire(0));
    let token = cluster.token_of(leader).expect("c1 holds the key");
    cluster.hold_entries();
    cluster.request(leader, 1, 2, ClientRequest::Release { key: key(), token });
    cluster.request(leader, 2, 1, acquire(0));
    cluster.release_entries();
    assert_eq!(cluster.answers(1, 2), vec![ClientReply::Released]);
    assert_eq!(cluster.answers(2, 1), vec![ClientReply::Unavailable]);
    cluster.request(leader, 2, 1, acquire(0));
    assert!(matches!(cluster.answers(2, 1)[1..], [ClientReply::Granted { .. }]), "{:?}", cluster.answers(2, 1));
}

fn acquire_other(wait_ms: u64) -> ClientRequest {
    ClientRequest::Acquire { key: other_key(), lease_ms: LEASE_MS, wait_ms }
}

fn inflight_grant(cluster: &Cluster, leader: NodeId, key: &Key) -> LogIndex {
    let server = cluster.server(leader);
    let grant = server
        .pending
        .iter()
        .find(|(_, pending)| matches!(&pending.kind, PendingKind::Acquire { key: k, .. } if k == key));
    *grant.expect("a Grant is in flight for the key").0
}

/// c1's Grant is proposed but its append is slow; c2's try-lock finds the
/// key promised. Its Decline goes behind the Grant in the log, so `Busy`
/// is told only once the Grant holds the key: a Grant lost with the term
/// would never have held it. A resend of c2's try-lock meanwhile is the
/// same request, not a second Decline.
#[test]
fn a_busy_behind_a_grant_in_flight_waits_for_it() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.hold_entries();
    cluster.request(leader, 1, 1, acquire(0));
    let grant = inflight_grant(&cluster, leader, &key());
    cluster.request(leader, 2, 1, acquire(0));
    assert!(cluster.server(leader).applied_index() < grant);
    cluster.request(leader, 2, 1, acquire(0));
    assert_eq!(cluster.answers(2, 1), vec![], "no answer before the Grant applies");
    assert_eq!(cluster.server(leader).pending.len(), 2, "one Grant, one Decline");
    cluster.release_entries();
    assert!(matches!(cluster.answers(1, 1)[..], [ClientReply::Granted { .. }]));
    assert!(matches!(cluster.answers(2, 1)[..], [ClientReply::Busy { .. }]), "{:?}", cluster.answers(2, 1));
}

/// Two Grants in flight, another key's first: c2's `Busy` on B-1042 waits
/// for B-1042's Grant.
#[test]
fn a_busy_waits_for_the_grant_of_its_own_key() {
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

/// c2 is told `Busy` on B-1042 (held by c1) and then, with a newer
/// request, on B-1043 (held by c3). Once B-1043 is free, a late copy of the
/// newer request gets its `Busy` again, and a late copy of the older one
/// nothing: neither is served afresh for a client that has moved on.
#[test]
fn late_copies_of_answered_try_locks_are_not_served_afresh() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.request(leader, 3, 1, acquire_other(0));
    let Some(ClientReply::Granted { token, .. }) = cluster.answers(3, 1).first().copied() else {
        panic!("c3 holds B-1043: {:?}", cluster.answers(3, 1));
    };
    cluster.request(leader, 1, 1, acquire(0));
    cluster.request(leader, 2, 1, acquire(0));
    cluster.request(leader, 2, 2, acquire_other(0));
    assert!(matches!(cluster.answers(2, 1)[..], [ClientReply::Busy { .. }]), "{:?}", cluster.answers(2, 1));
    assert!(matches!(cluster.answers(2, 2)[..], [ClientReply::Busy { .. }]), "{:?}", cluster.answers(2, 2));
    cluster.request(leader, 3, 2, ClientRequest::Release { key: other_key(), token });
    assert_eq!(cluster.answers(3, 2), vec![ClientReply::Released]);
    cluster.request(leader, 2, 2, acquire_other(0));
    cluster.request(leader, 2, 1, acquire_other(0));
    assert!(
        matches!(cluster.answers(2, 2)[..], [ClientReply::Busy { .. }, ClientReply::Busy { .. }]),
        "the late copy is answered as before: {:?}",
        cluster.answers(2, 2)
    );
    assert_eq!(cluster.answers(2, 1).len(), 1, "the older request gets nothing");
    assert_eq!(cluster.server(leader).state().lock(&other_key()), None, "B-1043 stays free");
}

/// A late copy of a request older than its client's last answered one is
/// dropped before it is judged: neither queued (it would stand in front of
/// newcomers until it timed out) nor proposed (a Grant or Decline the
/// session would only answer `Noop`, one log entry per stray copy).
#[test]
fn a_late_copy_of_an_older_request_is_neither_queued_nor_proposed() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 2, 2, acquire(0));
    assert!(matches!(cluster.answers(2, 2)[..], [ClientReply::Busy { .. }]), "{:?}", cluster.answers(2, 2));
    let entries = cluster.applied(NodeId(0)).len();
    cluster.request(NodeId(0), 2, 1, acquire(200));
    assert!(cluster.server(NodeId(0)).waiters.is_empty(), "the older wait was queued");
    cluster.run_ms(400);
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    assert_eq!(cluster.answers(1, 2), vec![ClientReply::Released]);
    let entries_free = cluster.applied(NodeId(0)).len();
    cluster.request(NodeId(0), 2, 1, acquire(0));
    cluster.run_ms(100);
    assert_eq!(cluster.answers(2, 1), vec![], "the older request gets nothing");
    let applied = cluster.applied(NodeId(0));
    assert_eq!(applied.len(), entries_free, "proposed for a free key: {:?}", &applied[entries_free..]);
    assert_eq!(entries_free, entries + 1, "only the Release was proposed in between: {:?}", &applied[entries..]);
}
