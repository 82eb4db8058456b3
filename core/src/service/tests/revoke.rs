//! Revoke: an Expire by token, proposed at once; a late one is harmless.

use super::*;

fn revoke(token: u64) -> ClientRequest {
    ClientRequest::Revoke { key: key(), token: Token(token) }
}

#[test]
fn a_revoke_by_the_live_token_frees_the_key() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 1, 2, revoke(1));
    assert_eq!(cluster.answers(1, 2), vec![ClientReply::Released]);
    assert_eq!(cluster.token_of(NodeId(0)), None);
}

#[test]
fn a_late_revoke_after_a_regrant_leaves_the_new_lock_alone() {
    let mut cluster = single(Variant::Default);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.request(NodeId(0), 2, 1, acquire(0));
    assert_eq!(cluster.token_of(NodeId(0)), Some(Token(2)));
    // Client 1's revoke of its old token arrives late (a retry after a timeout).
    cluster.request(NodeId(0), 1, 3, revoke(1));
    assert_eq!(cluster.answers(1, 3), vec![ClientReply::NotHeld]);
    assert_eq!(cluster.token_of(NodeId(0)), Some(Token(2)), "the late Expire(1) did not remove lock 2");
}

#[test]
fn under_expire_ignores_token_a_late_revoke_deletes_the_new_lock() {
    let mut cluster = single(Variant::ExpireIgnoresToken);
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.request(NodeId(0), 2, 1, acquire(0));
    cluster.request(NodeId(0), 1, 3, revoke(1));
    assert_eq!(cluster.token_of(NodeId(0)), None, "the unsafe variant lets a stale Expire remove lock 2");
}
