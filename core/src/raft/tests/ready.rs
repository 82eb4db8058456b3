//! What a `Ready` says to its driver, and what `advance` takes as done.

use crate::lock::LockState;
use crate::raft::{
    Config, DurableState, Entry, HardState, Message, MessageBody, Payload, RaftNode, ReadState, Ready, Snapshot,
};
use crate::types::{LogIndex, NodeId, Term, Token};

/// A driver that skips an "empty" Ready skips its work: a Ready holding any
/// one thing to persist, send, apply or answer is not empty, and one holding
/// nothing is.
#[test]
fn a_ready_is_empty_only_when_every_part_is() {
    assert!(Ready::default().is_empty());
    let entry = Entry { term: Term(1), index: LogIndex(1), payload: Payload::Noop };
    let message = Message {
        from: NodeId(0),
        to: NodeId(1),
        term: Term(1),
        body: MessageBody::InstallSnapshotResponse { index: LogIndex(0) },
    };
    let snapshot = Snapshot { index: LogIndex(1), term: Term(1), state: LockState::new(Token(0)) };
    let parts = [
        ("hard_state", Ready { hard_state: Some(HardState::default()), ..Ready::default() }),
        ("entries", Ready { entries: vec![entry.clone()], ..Ready::default() }),
        ("snapshot", Ready { snapshot: Some(snapshot), ..Ready::default() }),
        ("messages", Ready { messages: vec![message.clone()], ..Ready::default() }),
        ("messages_after_persist", Ready { messages_after_persist: vec![message], ..Ready::default() }),
        ("committed_entries", Ready { committed_entries: vec![entry], ..Ready::default() }),
        ("read_states", Ready { read_states: vec![ReadState { ctx: 1, commit: LogIndex(1) }], ..Ready::default() }),
    ];
    for (part, ready) in parts {
        assert!(!ready.is_empty(), "a Ready with only {part} is not empty");
    }
}

/// Entries replaced after they were handed out for persistence are not
/// durable when the driver reports that Ready done: what it persisted was the
/// old entry, and the new one comes in the next Ready. Counting it durable
/// would let this node, as a leader, count itself for an entry its disk lacks.
#[test]
fn entries_replaced_after_they_were_handed_out_do_not_count_as_persisted() {
    let config = Config::standard(NodeId(0), vec![NodeId(0), NodeId(1), NodeId(2)]);
    let mut node = RaftNode::new(config, DurableState::default(), 7).expect("valid config");
    let append = |term: u64| MessageBody::Append {
        prev_index: LogIndex(0),
        prev_term: Term(0),
        entries: vec![Entry { term: Term(term), index: LogIndex(1), payload: Payload::Noop }],
        commit: LogIndex(0),
        read_ctx: 1,
    };
    node.step(Message { from: NodeId(1), to: NodeId(0), term: Term(1), body: append(1) });
    assert_eq!(node.ready().entries.len(), 1);
    // Before that Ready is done, the leader of term 2 replaces index 1.
    node.step(Message { from: NodeId(2), to: NodeId(0), term: Term(2), body: append(2) });
    node.advance(LogIndex(0));
    assert_eq!(node.log.persisted, LogIndex(0), "the entry persisted was term 1's");
    assert_eq!(node.ready().entries.len(), 1, "term 2's entry is handed out again");
    node.advance(LogIndex(0));
    assert_eq!(node.log.persisted, LogIndex(1));
}

/// A follower's acknowledgements go out in the buffer its last Ready's were
/// sent from, once the driver gives it back; what the driver left unsent in
/// a buffer it gives back is dropped, never handed out again.
#[test]
fn recycled_message_buffers_carry_the_next_ready_and_nothing_left_in_them() {
    let config = Config::standard(NodeId(0), vec![NodeId(0), NodeId(1), NodeId(2)]);
    let mut node = RaftNode::new(config, DurableState::default(), 7).expect("valid config");
    let append = |index: u64| MessageBody::Append {
        prev_index: LogIndex(index - 1),
        prev_term: Term(u64::from(index > 1)),
        entries: vec![Entry { term: Term(1), index: LogIndex(index), payload: Payload::Noop }],
        commit: LogIndex(0),
        read_ctx: 1,
    };
    node.step(Message { from: NodeId(1), to: NodeId(0), term: Term(1), body: append(1) });
    let mut ready = node.ready();
    let acks: Vec<Message> = ready.messages_after_persist.drain(..).collect();
    assert_eq!(acks.len(), 1, "one acknowledgement, after the entry is persisted");
    let buffer = ready.messages_after_persist.as_ptr();
    node.advance(LogIndex(0));
    node.recycle(ready.messages, ready.messages_after_persist);
    node.step(Message { from: NodeId(1), to: NodeId(0), term: Term(1), body: append(2) });
    let mut ready = node.ready();
    assert_eq!(ready.messages_after_persist.len(), 1);
    assert_eq!(ready.messages_after_persist.as_ptr(), buffer, "the acknowledgement went into the recycled buffer");
    node.advance(LogIndex(0));
    // A buffer given back unsent: its message is not sent by a later Ready.
    ready.messages.push(acks[0].clone());
    node.recycle(ready.messages, ready.messages_after_persist);
    assert!(!node.has_ready(), "nothing left in a recycled buffer comes back");
    assert!(node.ready().messages.is_empty() && node.ready().messages_after_persist.is_empty());
}
