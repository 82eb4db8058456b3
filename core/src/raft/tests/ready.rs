//! What a `Ready` says to its driver.

use crate::lock::LockState;
use crate::raft::{Entry, HardState, Message, MessageBody, Payload, ReadState, Ready, Snapshot};
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
