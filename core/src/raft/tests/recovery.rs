//! Restores at the level of one node (ARCHITECTURE.md, "Restores"): when its
//! answers are flagged `recovering`, and when a node restored from a stale
//! backup has caught up.

use crate::lock::LockState;
use crate::raft::{Config, DurableState, Entry, HardState, Message, MessageBody, Payload, RaftNode, Snapshot};
use crate::types::{LogIndex, NodeId, Term, Token};

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

/// Answers the term probes a restored node sent at start, from nodes 1 and 2
/// at `term`; returns the probes it had sent.
fn survey(node: &mut RaftNode, term: u64) -> Vec<Message> {
    let probes: Vec<Message> = node
        .ready()
        .messages
        .into_iter()
        .filter(|message| matches!(message.body, MessageBody::TermProbe { .. }))
        .collect();
    for probe in &probes {
        let MessageBody::TermProbe { incarnation } = probe.body else { unreachable!() };
        let body = MessageBody::TermProbeResponse { incarnation, recovering: false };
        node.step(Message { from: probe.to, to: NodeId(0), term: Term(term), body });
    }
    probes
}

/// (term, recovering) of every append refusal the node has ready; panics on an acknowledgement.
fn refusals(node: &mut RaftNode) -> Vec<(Term, bool)> {
    let ready = node.ready();
    let answers = ready.messages.into_iter().chain(ready.messages_after_persist);
    answers
        .filter_map(|message| match message.body {
            MessageBody::AppendResponse { success: false, match_index: LogIndex(0), recovering, .. } => {
                Some((message.term, recovering))
            }
            MessageBody::AppendResponse { .. } => panic!("acknowledged {message:?}"),
            _ => None,
        })
        .collect()
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
    survey(&mut node, 2);
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

/// A restored node first asks its peers for their terms, and stores and
/// acknowledges nothing until enough of them (here both others of three)
/// answered: a leader of an older term, waking from a pause, could otherwise
/// use the forgetful node to commit over an entry it helped commit in a later
/// term (swarm seed 694).
#[test]
fn a_restored_node_acknowledges_nothing_until_it_has_surveyed_the_terms() {
    let mut node = node_from_disk(1, &[(1, 1)], true);
    let ready = node.ready();
    let probed: Vec<NodeId> = ready.messages.iter().map(|message| message.to).collect();
    assert_eq!(probed, vec![NodeId(1), NodeId(2)], "a probe to each peer at start");
    let MessageBody::TermProbe { incarnation } = ready.messages[0].body else { panic!("{:?}", ready.messages) };
    // The stale leader of term 1 appends: refused, stored nothing, the
    // refusal flagged so that leader forgets what earlier lives acknowledged.
    node.step(append(1, (1, 1), &[(2, 1)], 2));
    assert_eq!(refusals(&mut node), vec![(Term(1), true)]);
    assert_eq!(node.last_index(), LogIndex(1));
    // A recovering peer's answer and an answer to another life do not count.
    let answer = |from: u8, term: u64, incarnation: u64, recovering: bool| Message {
        from: NodeId(from),
        to: NodeId(0),
        term: Term(term),
        body: MessageBody::TermProbeResponse { incarnation, recovering },
    };
    node.step(answer(2, 3, incarnation, true));
    node.step(answer(2, 3, incarnation ^ 1, false));
    assert_eq!(node.soft_state().term, Term(1), "neither answer was taken");
    // Its timer asks again the peers it has not heard.
    node.step(answer(1, 1, incarnation, false));
    for _ in 0..node.config().election_ticks_max {
        node.tick();
    }
    let again: Vec<NodeId> = node.ready().messages.iter().map(|message| message.to).collect();
    assert!(!again.is_empty() && again.iter().all(|&to| to == NodeId(2)), "{again:?}");
    node.step(append(1, (1, 1), &[(2, 1)], 2));
    assert_eq!(refusals(&mut node), vec![(Term(1), true)], "one of two answers is not enough");
    assert_eq!(node.last_index(), LogIndex(1));
    // Node 2 is in term 3: the node adopts it and the old leader is refused.
    node.step(answer(2, 3, incarnation, false));
    assert_eq!(node.soft_state().term, Term(3));
    assert!(node.is_recovering(), "surveyed, still to catch up with a leader");
    node.step(append(1, (1, 1), &[(2, 1)], 2));
    assert_eq!(refusals(&mut node), vec![(Term(3), true)], "refused for its older term");
    assert_eq!(node.last_index(), LogIndex(1));
}

/// A probe is answered with the answerer's own term, whatever the asker's:
/// a leader is neither deposed by a probe of a later term nor does it refuse
/// one of an earlier term.
#[test]
fn a_term_probe_is_answered_with_the_answerers_term_and_changes_nothing() {
    let mut node = node_from_disk(4, &[(1, 4)], false);
    for asker_term in [2, 9] {
        let body = MessageBody::TermProbe { incarnation: 77 };
        node.step(Message { from: NodeId(2), to: NodeId(0), term: Term(asker_term), body });
        let messages = node.ready().messages;
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert_eq!(messages[0].term, Term(4));
        assert_eq!(messages[0].body, MessageBody::TermProbeResponse { incarnation: 77, recovering: false });
        assert_eq!(node.soft_state().term, Term(4));
        assert_eq!(node.hard_state().vote, None);
    }
}

/// A snapshot is refused like an append while the survey lasts: a stale
/// leader could otherwise install its log in the forgetful node and count
/// the acknowledgement towards a commit over a later term.
#[test]
fn a_restored_node_installs_no_snapshot_until_it_has_surveyed_the_terms() {
    let mut node = node_from_disk(1, &[(1, 1)], true);
    let _probes = node.ready();
    let snapshot = Snapshot { index: LogIndex(5), term: Term(1), state: LockState::new(Token(0)) };
    let body = MessageBody::InstallSnapshot { snapshot };
    node.step(Message { from: NodeId(1), to: NodeId(0), term: Term(1), body });
    let ready = node.ready();
    let answers: Vec<Message> = ready.messages.into_iter().chain(ready.messages_after_persist).collect();
    assert!(answers.is_empty(), "answered a snapshot while surveying: {answers:?}");
    assert!(ready.snapshot.is_none(), "handed a snapshot to install");
    assert_eq!(node.last_index(), LogIndex(1), "the snapshot was installed");
}

/// A probe answer from node `from` to node 0's life `incarnation`, at `term`.
fn probe_answer(from: u8, term: u64, incarnation: u64) -> Message {
    let body = MessageBody::TermProbeResponse { incarnation, recovering: false };
    Message { from: NodeId(from), to: NodeId(0), term: Term(term), body }
}

/// Of five, a restored node must hear `n - q + 1` = 3 peers: every majority
/// that holds it (3 of 5) then meets them in one other node. Two are not
/// enough, and it need not wait for all four.
#[test]
fn a_restored_node_of_five_surveys_three_peers() {
    let voters = (0..5).map(NodeId).collect();
    let durable = DurableState {
        hard_state: HardState { term: Term(1), vote: None, commit: LogIndex(0) },
        snapshot: None,
        entries: vec![noop(1, 1)],
        restored_from_backup: true,
    };
    let mut node = RaftNode::new(Config::standard(NodeId(0), voters), durable, 7).expect("valid config");
    let probes = node.ready().messages;
    assert_eq!(probes.len(), 4, "a probe to each of the four peers: {probes:?}");
    let MessageBody::TermProbe { incarnation } = probes[0].body else { panic!("{probes:?}") };
    node.step(probe_answer(3, 1, incarnation));
    node.step(probe_answer(4, 1, incarnation));
    node.step(append(1, (1, 1), &[(2, 1)], 0));
    assert_eq!(refusals(&mut node), vec![(Term(1), true)], "two of the three answers needed");
    assert_eq!(node.last_index(), LogIndex(1));
    node.step(probe_answer(2, 1, incarnation));
    node.step(append(1, (1, 1), &[(2, 1)], 0));
    assert_eq!(node.last_index(), LogIndex(2), "surveyed with three answers: the append is stored");
}

/// A probe answer at the node's own term changes nothing: the leader it
/// learned from a later term's append stays its leader (and its election
/// timer runs on).
#[test]
fn a_probe_answer_of_our_own_term_keeps_the_leader() {
    let mut node = node_from_disk(1, &[(1, 1)], true);
    let MessageBody::TermProbe { incarnation } = node.ready().messages[0].body else { panic!() };
    node.step(append(2, (1, 1), &[(2, 2)], 0));
    assert_eq!(refusals(&mut node), vec![(Term(2), true)]);
    assert_eq!(node.soft_state().leader, Some(NodeId(1)), "learned from the append of term 2");
    node.step(probe_answer(2, 2, incarnation));
    assert_eq!(node.soft_state().term, Term(2));
    assert_eq!(node.soft_state().leader, Some(NodeId(1)), "an answer of the same term forgot the leader");
}
