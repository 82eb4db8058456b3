//! Ghost locks: the client is gone before its Granted answer reaches it.

use super::*;
use crate::types::Holder;

fn ghost_releases(cluster: &Cluster, node: NodeId) -> Vec<Output> {
    cluster.outputs_of(node).filter(|output| matches!(output, Output::GhostReleaseProposed { .. })).cloned().collect()
}

fn ghost(token: u64) -> Output {
    Output::GhostReleaseProposed {
        key: key(),
        token: Token(token),
        holder: Holder { client: ClientId(1), request: RequestId(1) },
    }
}

#[test]
fn cancel_while_the_grant_is_in_flight_releases_it_right_after_apply() {
    let mut cluster = single(Variant::Default);
    cluster.send(NodeId(0), 1, 1, acquire(0));
    cluster.send(NodeId(0), 1, 1, ClientRequest::Cancel);
    cluster.settle();
    assert_eq!(cluster.answers(1, 1), vec![], "a cancelled request is not answered Granted");
    assert_eq!(ghost_releases(&cluster, NodeId(0)), vec![ghost(1)]);
    assert_eq!(cluster.token_of(NodeId(0)), None);
}

#[test]
fn cancel_after_the_grant_releases_the_lock() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 1, 1, ClientRequest::Cancel);
    assert_eq!(ghost_releases(&cluster, NodeId(0)), vec![ghost(1)]);
    assert_eq!(cluster.token_of(NodeId(0)), None);
}

#[test]
fn cancel_of_a_waiter_leaves_the_queue() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 2, 1, acquire(0));
    cluster.request(NodeId(0), 1, 1, acquire(5_000));
    cluster.request(NodeId(0), 1, 1, ClientRequest::Cancel);
    cluster.request(NodeId(0), 2, 2, ClientRequest::Release { key: key(), token: Token(1) });
    assert_eq!(cluster.answers(1, 1), vec![]);
    assert_eq!(cluster.token_of(NodeId(0)), None, "nobody was granted after the cancel");
}

#[test]
fn a_bounced_granted_releases_the_ghost() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.request(leader, 1, 1, acquire(0));
    let granted = ClientReply::Granted { token: Token(1), lease_ms: LEASE_MS };
    assert_eq!(cluster.answers(1, 1), vec![granted]);
    cluster.bounce(leader, 1, 1, granted);
    assert_eq!(ghost_releases(&cluster, leader), vec![ghost(1)]);
    cluster.run_ms(100);
    for node in 0..3 {
        assert_eq!(cluster.token_of(NodeId(node)), None);
    }
}

#[test]
fn a_bounce_of_a_stale_token_releases_nothing() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.bounce(NodeId(0), 1, 1, ClientReply::Granted { token: Token(9), lease_ms: LEASE_MS });
    cluster.bounce(NodeId(0), 1, 1, ClientReply::Busy { remaining_ms: 5 });
    assert_eq!(ghost_releases(&cluster, NodeId(0)), vec![]);
    assert_eq!(cluster.token_of(NodeId(0)), Some(Token(1)));
}

#[test]
fn cancelling_a_pending_release_leaves_no_ghost_entry() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    for request in 2..50u64 {
        cluster.send(NodeId(0), 1, request, ClientRequest::Release { key: key(), token: Token(1) });
        cluster.send(NodeId(0), 1, request, ClientRequest::Cancel);
        cluster.settle();
    }
    assert_eq!(cluster.server(NodeId(0)).ghosts.len(), 0, "ghosts of cancelled releases are never removed");
}

/// Only the cancelled waiter leaves: the one behind it is granted when the key frees.
#[test]
fn cancel_of_a_waiter_keeps_the_others_waiting() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 2, 1, acquire(0));
    cluster.request(NodeId(0), 1, 1, acquire(5_000));
    cluster.request(NodeId(0), 3, 1, acquire(5_000));
    cluster.request(NodeId(0), 1, 1, ClientRequest::Cancel);
    cluster.request(NodeId(0), 2, 2, ClientRequest::Release { key: key(), token: Token(1) });
    assert_eq!(cluster.answers(1, 1), vec![]);
    assert_eq!(cluster.answers(3, 1), vec![ClientReply::Granted { token: Token(2), lease_ms: LEASE_MS }]);
}
