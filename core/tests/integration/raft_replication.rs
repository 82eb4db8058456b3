//! Replication: figure 8, conflict backoff, snapshots, restarts and the
//! persistence contract.

use crate::raft_harness::{disk, Cluster};
use fencelock::raft::{Config, DurableState, HardState, MessageBody, RaftNode, Role, Snapshot};
use fencelock::{LockState, LogIndex, NodeId, Probe, Term, Token, Variant};

const S1: NodeId = NodeId(0);
const S2: NodeId = NodeId(1);
const S3: NodeId = NodeId(2);
const S4: NodeId = NodeId(3);
const S5: NodeId = NodeId(4);

#[test]
fn figure_8_an_old_term_entry_is_committed_only_through_a_current_term_entry() {
    let violations = figure_8_overwrite(Variant::Default);
    assert!(violations.is_empty(), "the safe rule never commits the overwritten entry: {violations:?}");
    let violations = figure_8_overwrite(Variant::CommitOldTermByCount);
    assert!(
        violations.iter().any(|violation| violation.starts_with("apply-agreement")),
        "committing by count lets S5 overwrite a committed entry: {violations:?}"
    );
}

/// Raft paper figure 8, with one entry per append so the leader's old-term
/// entry reaches a majority before its own no-op does: S1 (term 4) gets index 2 (term 2) onto S2 and S3 but
/// crashes before its no-op spreads; S5 (last term 3) then wins and
/// overwrites index 2.
fn figure_8_overwrite(variant: Variant) -> Vec<String> {
    let mut cluster = figure_8_window(variant);
    // S1 crashes; its pending appends are lost with it.
    cluster.crash(S1);
    cluster.queue.clear();
    // S2 and S3 restart (so they do not wait out S1's lease); S4 and S5 come back.
    for id in [S2, S3, S4, S5] {
        cluster.crash(id);
        cluster.restart(id);
    }
    cluster.campaign(S5);
    cluster.campaign(S5);
    assert_eq!(cluster.role(S5), Role::Leader, "S5's last term 3 beats the term-2 entry");
    cluster.run_ticks(10);
    cluster.restart(S1);
    cluster.run_ticks(30);
    cluster.violations.clone()
}

/// Figure 8's window: S1 leads term 4 (probes on), S2 and S3 store its
/// index 2 of term 2 and S1 has heard both, and no node but S1 holds its
/// no-op at index 3.
fn figure_8_window(variant: Variant) -> Cluster {
    let disks = vec![
        disk(3, None, &[(1, 1), (2, 2)]),
        disk(3, None, &[(1, 1)]),
        disk(3, None, &[(1, 1)]),
        disk(3, None, &[(1, 1)]),
        disk(3, None, &[(1, 1), (2, 3)]),
    ];
    let mut cluster = Cluster::from_disks(disks, 8, |config: &mut Config| {
        config.entries_per_message_max = 1;
        config.variant = variant;
    });
    cluster.node_mut(S1).probes_on();
    cluster.crash(S4);
    cluster.crash(S5);
    let ticks_max = 40;
    for _ in 0..ticks_max {
        cluster.tick(S1);
        if cluster.role(S1) != Role::Follower {
            break;
        }
    }
    let stored_two = |cluster: &Cluster| {
        [S2, S3].iter().all(|&id| cluster.disks[id.0 as usize].entry(LogIndex(2)).is_some_and(|e| e.term == Term(2)))
            && !cluster.queue.iter().any(|message| {
                message.to == S1 && matches!(message.body, MessageBody::AppendResponse { success: true, .. })
            })
    };
    assert!(cluster.deliver_until(stored_two));
    assert_eq!(cluster.role(S1), Role::Leader);
    for id in [S2, S3] {
        assert!(cluster.disks[id.0 as usize].entry(LogIndex(3)).is_none(), "the no-op stayed on S1");
    }
    let s1_commit = cluster.node(S1).commit_index();
    match variant {
        Variant::Default => assert!(s1_commit < LogIndex(2), "an old-term entry is not committed by count"),
        _ => assert_eq!(s1_commit, LogIndex(2), "the unsafe variant commits it by count"),
    }
    cluster
}

/// The probe marks the window whatever the commit rule: a leader that loses
/// office there leaves an older term's entry on a majority, committed (by
/// count) or not, for a rival of a higher term to overwrite. A leader whose
/// own no-op reached the majority first leaves nothing of the kind.
#[test]
fn a_leader_losing_office_in_figure_8s_window_is_probed() {
    for variant in [Variant::Default, Variant::CommitOldTermByCount] {
        let mut cluster = figure_8_window(variant);
        cluster.queue.clear();
        cluster.isolate(S1);
        for _ in 0..100 {
            cluster.tick(S1);
            if cluster.role(S1) == Role::Follower {
                break;
            }
        }
        assert_eq!(cluster.role(S1), Role::Follower, "{variant:?}: check-quorum deposes the isolated leader");
        let probes = cluster.node_mut(S1).take_probes();
        assert!(
            probes.contains(Probe::Figure8LeaderLostOffice),
            "{variant:?}: {:?}",
            probes.iter().collect::<Vec<_>>()
        );
    }
    // Past the window: the no-op on the majority too, nothing older above the office's commit.
    let mut cluster = figure_8_window(Variant::Default);
    cluster.deliver_all();
    assert_eq!(cluster.node(S1).commit_index(), LogIndex(3), "the no-op committed, and index 2 through it");
    cluster.isolate(S1);
    for _ in 0..100 {
        cluster.tick(S1);
        if cluster.role(S1) != Role::Leader {
            break;
        }
    }
    assert_eq!(cluster.role(S1), Role::Follower, "check-quorum deposes the isolated leader");
    assert!(!cluster.node_mut(S1).take_probes().contains(Probe::Figure8LeaderLostOffice));
}

#[test]
fn fast_backoff_overwrites_a_divergent_follower_in_one_rejection() {
    let leader_log = [(1, 1), (2, 1), (3, 1), (4, 4), (5, 4), (6, 5), (7, 5), (8, 6), (9, 6), (10, 6)];
    let follower_log = [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2), (7, 3), (8, 3), (9, 3), (10, 3), (11, 3)];
    let disks = vec![disk(6, None, &leader_log), disk(6, None, &leader_log), disk(6, None, &follower_log)];
    let mut cluster = Cluster::from_disks(disks, 9, |_| {});
    cluster.campaign(S1);
    assert_eq!(cluster.role(S1), Role::Leader);
    cluster.run_ticks(3);
    assert!(cluster.rejections <= 2, "hint_index/hint_term skip whole terms: {} rejections", cluster.rejections);
    let leader_disk = &cluster.disks[0].entries;
    assert_eq!(&cluster.disks[2].entries, leader_disk, "the divergent suffix is overwritten");
    assert_eq!(cluster.node(S3).commit_index(), cluster.node(S1).commit_index());
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

#[test]
fn entries_per_message_and_inflight_are_bounded() {
    let mut cluster = Cluster::new(3, 10, |config: &mut Config| {
        config.entries_per_message_max = 3;
        config.inflight_max = 2;
    });
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    cluster.crash(NodeId((leader.0 + 1) % 3));
    for _ in 0..10 {
        cluster.propose(leader).expect("room for 10 proposals");
    }
    let appends: Vec<usize> = cluster
        .queue
        .iter()
        .filter_map(|message| match &message.body {
            MessageBody::Append { entries, .. } if !entries.is_empty() => Some(entries.len()),
            _ => None,
        })
        .collect();
    assert!(appends.iter().all(|&len| len <= 3), "{appends:?}");
    // Two live followers at most: inflight_max appends with entries each, plus one probe.
    assert!(appends.len() <= 2 * 2 + 2, "{} appends in flight", appends.len());
    cluster.run_ticks(20);
    let last = cluster.node(leader).last_index();
    assert_eq!(cluster.node(leader).commit_index(), last);
}

#[test]
fn a_follower_behind_the_compacted_log_gets_a_snapshot() {
    let mut cluster = Cluster::new(3, 11, |config: &mut Config| config.snapshot_threshold_entries = 5);
    cluster.auto_compact = true;
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    let lagging = NodeId((leader.0 + 1) % 3);
    cluster.crash(lagging);
    for _ in 0..30 {
        cluster.propose(leader);
        cluster.run_ticks(1);
    }
    assert!(cluster.node(leader).snapshot_index() > LogIndex(5), "the leader compacted its log");
    cluster.restart(lagging);
    cluster.run_ticks(20);
    assert!(cluster.snapshots_delivered >= 1);
    assert!(cluster.disks[lagging.0 as usize].snapshot.is_some(), "the snapshot was persisted");
    assert_eq!(cluster.applied[lagging.0 as usize], cluster.node(leader).commit_index());
    assert_eq!(cluster.node(lagging).applied_index(), cluster.node(leader).commit_index());
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

/// Once a follower acknowledges a snapshot, the leader knows where its log
/// starts: it counts the follower at the snapshot's index and sends the
/// entries after it at once, without waiting for a heartbeat or a timeout.
#[test]
fn a_snapshot_acknowledgement_resumes_appends_at_once() {
    let mut cluster = Cluster::new(3, 11, |config: &mut Config| config.snapshot_threshold_entries = 5);
    cluster.auto_compact = true;
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    let lagging = NodeId((leader.0 + 1) % 3);
    cluster.crash(lagging);
    for _ in 0..30 {
        cluster.propose(leader);
        cluster.run_ticks(1);
    }
    cluster.restart(lagging);
    let is_ack =
        |message: &fencelock::raft::Message| matches!(message.body, MessageBody::InstallSnapshotResponse { .. });
    let mut acks = Vec::new();
    for _ in 0..20 {
        cluster.tick(leader);
        cluster.deliver_until(|cluster| cluster.queue.iter().any(is_ack));
        acks = cluster.queue.iter().filter(|message| is_ack(message)).cloned().collect();
        cluster.queue.retain(|message| !is_ack(message));
        if !acks.is_empty() {
            break;
        }
    }
    let [ack] = &acks[..] else { panic!("expected one snapshot acknowledgement, got {acks:?}") };
    let snapshot_index = cluster.node(lagging).snapshot_index();
    assert_eq!(ack.body, MessageBody::InstallSnapshotResponse { index: snapshot_index });
    cluster.deliver_all();
    // An entry proposed while the snapshot was out, then the acknowledgement, and no tick.
    let last = cluster.propose(leader).expect("the leader accepts proposals");
    cluster.deliver(ack.clone());
    // The acknowledgement itself sends the entries after the snapshot: not
    // the next heartbeat, nor the commit broadcast that follows the proposal
    // (which would also reach the follower, later).
    let resumed = cluster.queue.iter().any(|message| {
        message.from == leader
            && message.to == lagging
            && matches!(&message.body, MessageBody::Append { prev_index, entries, .. }
                if *prev_index == snapshot_index && entries.last().map(|entry| entry.index) == Some(last))
    });
    assert!(resumed, "the ack sends the entries after the snapshot at once: {:?}", cluster.queue);
    cluster.deliver_all();
    assert_eq!(cluster.node(lagging).last_index(), last, "the entries after the snapshot followed the ack");
    assert_eq!(cluster.node(leader).commit_index(), last);
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

#[test]
fn a_cluster_restarted_from_its_disks_resumes() {
    let mut cluster = Cluster::new(3, 12, |_| {});
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    for _ in 0..10 {
        cluster.propose(leader);
    }
    cluster.run_ticks(5);
    let commit = cluster.node(leader).commit_index();
    let term = cluster.node(leader).soft_state().term;
    for id in cluster.up() {
        cluster.crash(id);
    }
    for id in crate::raft_harness::ids(3) {
        cluster.restart(id);
        assert!(cluster.node(id).soft_state().term >= term);
        assert_eq!(cluster.node(id).soft_state().role, Role::Follower);
    }
    // The committed entries were applied again from the disks, identically.
    assert!(cluster.applied.iter().filter(|&&applied| applied >= commit).count() >= 2);
    cluster.settle(200);
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

#[test]
fn restart_clamps_commit_to_the_log_and_accepts_a_snapshot_without_entries() {
    let config = Config::standard(S1, vec![S1, S2, S3]);
    let mut durable = disk(5, Some(1), &[(1, 1), (2, 2)]).durable();
    durable.hard_state.commit = LogIndex(9);
    let node = RaftNode::new(config.clone(), durable, 1).expect("valid");
    assert_eq!(node.commit_index(), LogIndex(2));
    assert_eq!(node.hard_state().vote, Some(S2));
    // A whole-cluster restore: one snapshot and a hard state, no entries.
    let snapshot = Snapshot { index: LogIndex(40), term: Term(3), state: LockState::new(Token(1_000)) };
    let durable = DurableState {
        hard_state: HardState { term: Term(0), vote: None, commit: LogIndex(0) },
        snapshot: Some(snapshot),
        entries: Vec::new(),
        restored_from_backup: false,
    };
    let mut node = RaftNode::new(config, durable, 1).expect("valid");
    assert_eq!(
        (node.commit_index(), node.last_index(), node.applied_index()),
        (LogIndex(40), LogIndex(40), LogIndex(40))
    );
    assert_eq!(node.soft_state().term, Term(3));
    let ready = node.ready();
    assert!(ready.committed_entries.is_empty() && ready.snapshot.is_none());
}

#[test]
fn entries_lost_before_they_were_durable_never_count_as_committed() {
    for variant in [Variant::Default, Variant::AckBeforeDurable] {
        let mut cluster = Cluster::new(3, 13, crate::raft_harness::with_variant(variant));
        cluster.run_ticks(40);
        let leader = cluster.leader().expect("leader");
        let followers: Vec<NodeId> = cluster.up().into_iter().filter(|&id| id != leader).collect();
        // Both followers crash at their next Ready, before it reaches the disk.
        cluster.crash_before_persist.extend(followers.iter().copied());
        let index = cluster.propose(leader).expect("leader");
        cluster.deliver_all();
        cluster.check_durability();
        match variant {
            Variant::Default => {
                assert!(cluster.node(leader).commit_index() < index, "no durable majority, no commit");
                assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
            }
            _ => assert!(
                cluster.violations.iter().any(|violation| violation.starts_with("commit-durability")),
                "acking before durable commits an entry a crash lost: {:?}",
                cluster.violations
            ),
        }
    }
}

/// `never-commit`: the leader drops what append answers acknowledge. It
/// still hears its followers, so check-quorum keeps it leading in its term,
/// but not even its own no-op commits, let alone a proposal.
#[test]
fn a_leader_that_drops_append_answers_never_commits_yet_keeps_leading() {
    for variant in [Variant::Default, Variant::NeverCommit] {
        let mut cluster = Cluster::new(3, 14, crate::raft_harness::with_variant(variant));
        cluster.run_ticks(40);
        let leader = cluster.leader().expect("leader");
        let term = cluster.node(leader).soft_state().term;
        let index = cluster.propose(leader).expect("leader");
        // Ten election timeouts at least: check-quorum runs once per minimum timeout.
        cluster.run_ticks(200);
        assert_eq!(cluster.leader(), Some(leader), "{variant}: one leader throughout");
        assert_eq!(cluster.node(leader).soft_state().term, term, "{variant}");
        let commit = cluster.node(leader).commit_index();
        match variant {
            Variant::Default => assert!(commit >= index, "commit {commit} reaches the proposal {index}"),
            _ => {
                assert_eq!(commit, LogIndex(0), "nothing commits");
                assert!(cluster.applied.iter().all(|&applied| applied == LogIndex(0)), "{:?}", cluster.applied);
            }
        }
        assert!(cluster.violations.is_empty(), "{variant}: {:?}", cluster.violations);
    }
}
