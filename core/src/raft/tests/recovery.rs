//! Restores at the level of one node (ARCHITECTURE.md, "Restores"): when its
//! answers are flagged `recovering`, and when a node restored from a stale
//! backup has caught up.

use crate::raft::{Config, DurableState, Entry, HardState, Message, MessageBody, Payload, RaftNode};
use crate::types::{LogIndex, NodeId, Term};

/// Node 0 of three, started from a disk at `term` holding `entries` as (index, term).
fn node_from_disk(term: u64, entries: &[(u64, u64)], restored_from_backup: bool) -> RaftNode {
    let config = Config::standard(NodeId(0), vec![NodeId(0), NodeId(1), NodeId(2)]);
    let durable = DurableState {
        hard_state: HardState { term: Term(term), vote: None, commit: LogIndex(0) },
        snapshot: None,
        entries: entries.iter().map(|&(index, term)| noop(index, term)).collect(),
        restored_from_backup,
    };
    RaftNode::new(config, durable, 7).expect("valid config")
}

fn noop(index: u64, term: u64) -> Entry {
    Entry { term: Term(term), index: LogIndex(index), payload: Payload::Noop }
}

/// An append from node 1 carrying `entries` after (`prev`, `prev_term`).
fn append(term: u64, prev: (u64, u64), entries: &[(u64, u64)], commit: u64) -> Message {
    let body = MessageBody::Append {
        prev_index: LogIndex(prev.0),
        prev_term: Term(prev.1),
        entries: entries.iter().map(|&(index, term)| noop(index, term)).collect(),
        commit: LogIndex(commit),
        read_ctx: 1,
    };
    Message { from: NodeId(1), to: NodeId(0), term: Term(term), body }
}

/// The `recovering` flag of every append answer the node has ready.
fn flags_of_answers(node: &mut RaftNode) -> Vec<bool> {
    let ready = node.ready();
    let answers = ready.messages.into_iter().chain(ready.messages_after_persist);
    answers
        .filter_map(|message| match message.body {
            MessageBody::AppendResponse { recovering, .. } => Some(recovering),
            _ => None,
        })
        .collect()
}

/// A node never restored flags its answers only in the term it started in
/// (it cannot know whether it recovered there before a crash); from the next
/// term on they are plain. A flagged answer makes the leader forget what the
/// node acknowledged before: flagging every answer would throw away, at each
/// new life the leader sees, acknowledgements that were true.
#[test]
fn answers_are_flagged_recovering_only_in_the_term_the_node_started_in() {
    let mut node = node_from_disk(2, &[], false);
    assert!(!node.is_recovering());
    node.step(append(2, (0, 0), &[], 0));
    assert_eq!(flags_of_answers(&mut node), vec![true], "the term it started in");
    node.step(append(3, (0, 0), &[], 0));
    assert_eq!(flags_of_answers(&mut node), vec![false], "a later term");
}

/// A restored node has caught up only once its commit reaches the leader's:
/// until then it may lack entries the leader committed, some of which it may
/// have acknowledged before the restore. Leaving recovery earlier would let
/// it vote again, for a candidate that lacks them.
#[test]
fn a_restored_node_recovers_only_once_its_commit_reaches_the_leaders() {
    let mut node = node_from_disk(2, &[(1, 1)], true);
    assert!(node.is_recovering());
    // The leader has committed 3 but sends only up to 2: the node commits 2,
    // an entry of the current term, and is still one behind.
    node.step(append(2, (1, 1), &[(2, 2)], 3));
    assert_eq!(node.commit_index(), LogIndex(2));
    assert!(node.is_recovering(), "commit 2 is behind the leader's 3");
    node.step(append(2, (2, 2), &[(3, 2)], 3));
    assert_eq!(node.commit_index(), LogIndex(3));
    assert!(!node.is_recovering(), "caught up with the leader of its restored term");
    assert_eq!(node.hard_state().vote, Some(NodeId(1)), "the term is closed to other candidates");
}
