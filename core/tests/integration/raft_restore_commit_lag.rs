//! A restored node leaves recovery only once the leader has committed an entry of its own term (a fresh leader's commit index can lag what is committed).

use crate::raft_harness::{with_variant, Cluster};
use fencelock::raft::{MessageBody, Role};
use fencelock::{NodeId, Variant};

#[test]
fn restored_node_must_not_leave_recovery_before_the_leader_commits_in_its_term() {
    let (a, b, c, d, r) = (NodeId(0), NodeId(1), NodeId(2), NodeId(3), NodeId(4));
    let mut cluster = Cluster::new(5, 41, with_variant(Variant::Default));
    cluster.campaign(a);
    assert_eq!(cluster.role(a), Role::Leader);
    cluster.propose(a);
    cluster.run_ticks(3);
    let backup = cluster.disks[4].clone();
    // B and D are cut off; entry E is stored by A, C and R and committed (and applied) by A.
    cluster.partition(&[b, d]);
    let e_index = cluster.propose(a).expect("A leads");
    assert!(cluster.deliver_until(|cluster| cluster.applied[0] >= e_index), "A applied E");
    // A tells C of the commit at once; that append is lost.
    cluster.take(|message| message.from == a && message.to == c);
    cluster.deliver_all();
    assert!(cluster.node(c).commit_index() < e_index, "C holds E but has not heard it committed");
    // B and D time out on their side and drop their leader.
    for _ in 0..40 {
        cluster.tick(b);
        cluster.tick(d);
    }
    cluster.queue.clear();
    // A crashes; R is restored from a backup that lacks E.
    cluster.crash(a);
    cluster.crash(r);
    cluster.disks[4] = backup;
    cluster.disks[4].restored_from_backup = true;
    cluster.restart(r);
    assert!(cluster.node(r).is_recovering());
    cluster.heal();
    // C (holding E) wins term 2 with B and D.
    for _ in 0..40 {
        cluster.tick(c);
        if cluster.role(c) != Role::Follower {
            break;
        }
    }
    assert!(cluster.deliver_until(|cl| cl.role(c) == Role::Leader));
    cluster.queue.clear();
    // Only C's heartbeat reaches R (C's appends carrying E are lost).
    cluster.tick(c);
    cluster.tick(c);
    let messages: Vec<_> = cluster.queue.drain(..).collect();
    for message in messages {
        if message.to == r && matches!(&message.body, MessageBody::Append { entries, .. } if entries.is_empty()) {
            cluster.deliver(message);
        }
    }
    let r_lacks_e = cluster.disks[4].entry(e_index).is_none();
    assert!(r_lacks_e);
    // The rule says: R must still be recovering, it does not hold E.
    let left_recovery = !cluster.node(r).is_recovering();
    // Now C crashes too; B, D and R elect a leader without E.
    cluster.crash(c);
    cluster.queue.clear();
    cluster.run_ticks(200);
    if let Some(leader) = cluster.leader() {
        cluster.propose(leader);
        cluster.run_ticks(5);
    }
    assert!(
        !left_recovery && cluster.violations.is_empty(),
        "left recovery without E: {left_recovery}; violations: {:?}",
        cluster.violations
    );
}
