//! A leader at the level of one node, driven by hand-made answers from its
//! followers (two, in most of these tests): how it fills their windows,
//! when it commits and answers read-index rounds, and when it sends a lost
//! snapshot again.

use crate::lock::LockState;
use crate::raft::{Config, DurableState, Entry, HardState, Message, MessageBody, Payload, RaftNode, ReadState, Role};
use crate::types::{Key, LogIndex, NodeId, Term, Token};
use crate::variant::Variant;
use crate::Command;

const TICKS_MAX: u32 = 1_000;
/// More Readys in a row than any step of these tests produces.
const READYS_MAX: usize = 1_000;
const FOLLOWER_A: NodeId = NodeId(1);
const FOLLOWER_B: NodeId = NodeId(2);

/// Node 0 of three, elected leader of term 1 with the votes of node 1; its
/// no-op (index 1) is persisted but not yet acknowledged by anyone.
fn leader(configure: impl FnOnce(&mut Config)) -> RaftNode {
    let mut config = Config::standard(NodeId(0), vec![NodeId(0), FOLLOWER_A, FOLLOWER_B]);
    configure(&mut config);
    elect(RaftNode::new(config, DurableState::default(), 7).expect("valid config"))
}

/// Ticks the node into a campaign and has node 1 grant its pre-vote and
/// vote; persists the Ready of the new leader.
fn elect(mut node: RaftNode) -> RaftNode {
    for _ in 0..TICKS_MAX {
        if node.soft_state().role == Role::PreCandidate {
            break;
        }
        node.tick();
    }
    let term = node.soft_state().term.0 + 1;
    node.step(from(FOLLOWER_A, term, MessageBody::PreVoteResponse { granted: true }));
    node.step(from(FOLLOWER_A, term, MessageBody::RequestVoteResponse { granted: true }));
    assert_eq!(node.soft_state().role, Role::Leader);
    drain(&mut node);
    node
}

fn from(peer: NodeId, term: u64, body: MessageBody) -> Message {
    Message { from: peer, to: NodeId(0), term: Term(term), body }
}

/// A follower's successful answer to the append numbered `read_ctx`.
fn ack(peer: NodeId, term: u64, match_index: u64, read_ctx: u64) -> Message {
    let body = MessageBody::AppendResponse {
        success: true,
        match_index: LogIndex(match_index),
        hint_index: LogIndex(0),
        hint_term: Term(0),
        read_ctx,
        recovering: false,
        incarnation: 0,
    };
    from(peer, term, body)
}

/// What the node sent and confirmed while a model driver persisted and
/// applied every Ready it had.
#[derive(Default)]
struct Drained {
    messages: Vec<Message>,
    read_states: Vec<ReadState>,
}

impl Drained {
    /// The `read_ctx` of the last append sent to `peer`.
    fn read_ctx_to(&self, peer: NodeId) -> u64 {
        self.messages
            .iter()
            .rev()
            .find_map(|message| match message.body {
                MessageBody::Append { read_ctx, .. } if message.to == peer => Some(read_ctx),
                _ => None,
            })
            .expect("an append was sent to the peer")
    }

    /// The indexes of the entries sent to `peer`, in order.
    fn entries_to(&self, peer: NodeId) -> Vec<u64> {
        let appends = self.messages.iter().filter(|message| message.to == peer);
        appends
            .flat_map(|message| match &message.body {
                MessageBody::Append { entries, .. } => entries.iter().map(|entry| entry.index.0).collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    fn snapshots_to(&self, peer: NodeId) -> usize {
        let snapshots =
            self.messages.iter().filter(|message| matches!(message.body, MessageBody::InstallSnapshot { .. }));
        snapshots.filter(|message| message.to == peer).count()
    }
}

/// Takes Readys until the node has none left. A node whose Ready never
/// runs dry is a bug to report, not a test to hang on.
fn drain(node: &mut RaftNode) -> Drained {
    let mut drained = Drained::default();
    for _ in 0..READYS_MAX {
        if !node.has_ready() {
            return drained;
        }
        let ready = node.ready();
        let applied = ready.committed_entries.last().map_or(node.applied_index(), |entry| entry.index);
        drained.messages.extend(ready.messages);
        drained.messages.extend(ready.messages_after_persist);
        drained.read_states.extend(ready.read_states);
        node.advance(applied);
    }
    panic!("the node still has a Ready after {READYS_MAX}");
}

fn propose(node: &mut RaftNode, token: u64) {
    node.propose(Command::Expire { key: Key::new("k"), token: Token(token) }).expect("the leader takes proposals");
}

/// Node 0 of `voters`, elected leader with the pre-votes and votes of
/// nodes 1 up to a majority; its no-op (index 1) is persisted, not yet
/// acknowledged.
fn leader_of(voters: u8) -> RaftNode {
    let config = Config::standard(NodeId(0), (0..voters).map(NodeId).collect());
    let mut node = RaftNode::new(config, DurableState::default(), 7).expect("valid config");
    for _ in 0..TICKS_MAX {
        if node.soft_state().role == Role::PreCandidate {
            break;
        }
        node.tick();
    }
    let term = node.soft_state().term.0 + 1;
    let majority = voters / 2;
    for body in [MessageBody::PreVoteResponse { granted: true }, MessageBody::RequestVoteResponse { granted: true }] {
        for peer in 1..=majority {
            node.step(from(NodeId(peer), term, body.clone()));
        }
    }
    assert_eq!(node.soft_state().role, Role::Leader);
    drain(&mut node);
    node
}

/// An entry commits once a majority stores it, the leader's own persisted
/// log counted: in clusters of four and five (sorted on the stack) and of
/// ten and eleven (beyond the stack, in a vector), one acknowledgement
/// short of a majority commits nothing, and out of order the lower
/// acknowledgements bound what commits (even sizes tell a descending sort
/// from an ascending one).
#[test]
fn an_entry_commits_once_a_majority_stores_it_in_any_cluster_size() {
    for voters in [4u8, 5, 10, 11] {
        let mut node = leader_of(voters);
        let term = node.soft_state().term.0;
        let majority = u64::from(voters / 2 + 1);
        for token in 2..=3 {
            propose(&mut node, token);
        }
        drain(&mut node);
        // Followers store 3, 2, 1, 3, 2, 1, ...: the leader holds all three.
        let stored = |peer: u8| 3 - (u64::from(peer) - 1) % 3;
        for peer in 1..voters {
            node.step(ack(NodeId(peer), term, stored(peer), 0));
            // How many store at least `index`: the leader and the peers heard so far.
            let at_least = |index: u64| 1 + (1..=peer).filter(|&p| stored(p) >= index).count() as u64;
            let expected = (1..=3).rev().find(|&index| at_least(index) >= majority).unwrap_or(0);
            assert_eq!(node.commit_index(), LogIndex(expected), "{voters} voters, {peer} acks");
        }
    }
}

/// Each broadcast sends a follower everything its window allows. A late
/// snapshot answer frees slots and sends one append; the next proposal's
/// broadcast must fill the rest, or entries wait for the follower's next
/// answer.
#[test]
fn a_broadcast_fills_each_followers_window() {
    let mut node = leader(|config| config.entries_per_message_max = 1);
    node.step(ack(FOLLOWER_A, 1, 1, 0));
    assert_eq!(node.commit_index(), LogIndex(1));
    drain(&mut node);
    // Not persisted by the leader, so nothing commits: entries 2..=5 fill
    // the window of four, 6 and 7 wait.
    for token in 2..=7 {
        propose(&mut node, token);
    }
    node.step(from(FOLLOWER_A, 1, MessageBody::InstallSnapshotResponse { index: LogIndex(5) }));
    propose(&mut node, 8);
    // One Ready, not advanced: persisting would commit and send the rest anyway.
    let sent = Drained { messages: node.ready().messages, ..Drained::default() };
    assert_eq!(sent.entries_to(FOLLOWER_A), (2..=8).collect::<Vec<u64>>());
}

/// A leader answers a read only once an entry of its own term is committed:
/// before, its commit index may lag entries earlier leaders committed, and
/// a read at it could miss a write that was already acknowledged.
#[test]
fn a_read_is_answered_only_once_the_leaders_own_term_is_committed() {
    let mut node = leader(|_| {});
    node.read_index(42).expect("leader");
    let heartbeat = drain(&mut node).read_ctx_to(FOLLOWER_A);
    // A majority heard the leader after the read began, but its no-op is not committed.
    node.step(ack(FOLLOWER_A, 1, 0, heartbeat));
    assert_eq!(drain(&mut node).read_states, Vec::new());
    node.step(ack(FOLLOWER_A, 1, 1, heartbeat));
    assert_eq!(drain(&mut node).read_states, vec![ReadState { ctx: 42, commit: LogIndex(1) }]);
}

/// Only an answer to an append sent after a read began confirms it: an
/// answer to an earlier one may predate a newer leader.
#[test]
fn an_answer_to_an_append_sent_before_a_read_does_not_confirm_it() {
    let mut node = leader(|_| {});
    node.step(ack(FOLLOWER_A, 1, 1, 0));
    assert_eq!(node.commit_index(), LogIndex(1));
    let before = drain(&mut node).read_ctx_to(FOLLOWER_B);
    node.read_index(43).expect("leader");
    let after = drain(&mut node).read_ctx_to(FOLLOWER_B);
    node.step(ack(FOLLOWER_B, 1, 0, before));
    assert_eq!(drain(&mut node).read_states, Vec::new(), "answers the append before the read");
    node.step(ack(FOLLOWER_B, 1, 0, after));
    assert_eq!(drain(&mut node).read_states, vec![ReadState { ctx: 43, commit: LogIndex(1) }]);
}

/// A round still pending when its leader steps down is dropped: its caller
/// sees the role change and gives up on it. Kept, it would be answered in a later term by answers that
/// never confirmed it.
#[test]
fn a_read_pending_when_the_leader_steps_down_is_never_answered() {
    let mut node = leader(|_| {});
    node.step(ack(FOLLOWER_A, 1, 1, 0));
    node.read_index(44).expect("leader");
    drain(&mut node);
    // A node of term 2 answers: this leader steps down, then wins term 3.
    node.step(ack(FOLLOWER_B, 2, 0, 0));
    assert_eq!(node.soft_state().role, Role::Follower);
    for _ in 0..TICKS_MAX {
        if node.soft_state().role == Role::PreCandidate {
            break;
        }
        node.tick();
    }
    node.step(from(FOLLOWER_A, 3, MessageBody::PreVoteResponse { granted: true }));
    node.step(from(FOLLOWER_A, 3, MessageBody::RequestVoteResponse { granted: true }));
    assert_eq!(node.soft_state().role, Role::Leader);
    let noop = drain(&mut node).read_ctx_to(FOLLOWER_A);
    node.step(ack(FOLLOWER_A, 3, 2, noop));
    assert_eq!(node.commit_index(), LogIndex(2));
    assert_eq!(drain(&mut node).read_states, Vec::new());
}

/// A leader of term 1 (without check-quorum, so it keeps leading while only
/// ticking) that compacted its log at 3 and holds entry 4: follower B, which
/// answered nothing but a heartbeat, is sent the snapshot and awaited.
fn leader_waiting_on_a_snapshot() -> RaftNode {
    let mut node = leader(|config| config.check_quorum = false);
    for token in 2..=3 {
        propose(&mut node, token);
    }
    drain(&mut node);
    node.step(ack(FOLLOWER_A, 1, 3, 0));
    assert_eq!(node.commit_index(), LogIndex(3));
    drain(&mut node);
    node.compact(LogIndex(3), LockState::new(Token(0)));
    propose(&mut node, 4);
    drain(&mut node);
    node.step(ack(FOLLOWER_B, 1, 0, 0));
    assert_eq!(drain(&mut node).snapshots_to(FOLLOWER_B), 1);
    node
}

/// A snapshot that got no answer is sent again after two election timeouts,
/// not before: a follower installing a large snapshot is not flooded with
/// copies of it.
#[test]
fn an_unanswered_snapshot_is_sent_again_after_two_election_timeouts() {
    let mut node = leader_waiting_on_a_snapshot();
    let wait_ticks_max = node.config().election_ticks_min * 2;
    let heartbeat_ticks = node.config().heartbeat_ticks;
    let mut ticks = 0;
    while ticks < TICKS_MAX {
        node.tick();
        ticks += 1;
        if drain(&mut node).snapshots_to(FOLLOWER_B) > 0 {
            break;
        }
    }
    assert!(ticks > wait_ticks_max - heartbeat_ticks && ticks <= wait_ticks_max, "sent again after {ticks} ticks");
}

/// The wait for a snapshot ends with an answer at or past it (the follower
/// installed it, or held its entries already), not with one below it (a
/// heartbeat answered before the snapshot arrived): probing past a snapshot
/// the follower lacks only earns rejections.
#[test]
fn the_snapshot_wait_ends_with_an_answer_at_or_past_the_snapshot() {
    let mut node = leader_waiting_on_a_snapshot();
    node.step(ack(FOLLOWER_B, 1, 0, 0));
    assert_eq!(probes_to(&drain(&mut node), FOLLOWER_B), Vec::<u64>::new(), "an answer below the snapshot");
    node.step(ack(FOLLOWER_B, 1, 3, 0));
    assert_eq!(probes_to(&drain(&mut node), FOLLOWER_B), vec![3], "an answer at the snapshot");
}

/// Node 0 of three, its disk holding entries 1..=5 of term 1, elected leader
/// of term 2 with node 1's votes; its no-op (index 6) is persisted, and each
/// follower has one probe at previous index 5 in flight.
fn leader_of_a_log() -> RaftNode {
    let entries =
        (1..=5).map(|index| Entry { term: Term(1), index: LogIndex(index), payload: Payload::Noop }).collect();
    let hard_state = HardState { term: Term(1), vote: None, commit: LogIndex(0) };
    let durable = DurableState { hard_state, entries, ..DurableState::default() };
    let config = Config::standard(NodeId(0), vec![NodeId(0), FOLLOWER_A, FOLLOWER_B]);
    elect(RaftNode::new(config, durable, 7).expect("valid config"))
}

/// A follower's rejection of the append after `rejected`, with its hint.
fn rejection(peer: NodeId, term: u64, rejected: u64, hint: (u64, u64), flag: Option<u64>) -> Message {
    let body = MessageBody::AppendResponse {
        success: false,
        match_index: LogIndex(rejected),
        hint_index: LogIndex(hint.0),
        hint_term: Term(hint.1),
        read_ctx: 0,
        recovering: flag.is_some(),
        incarnation: flag.unwrap_or(0),
    };
    from(peer, term, body)
}

/// The previous index of every append sent to `peer`, in order.
fn probes_to(drained: &Drained, peer: NodeId) -> Vec<u64> {
    let appends = drained.messages.iter().filter(|message| message.to == peer);
    appends
        .filter_map(|message| match message.body {
            MessageBody::Append { prev_index, .. } => Some(prev_index.0),
            _ => None,
        })
        .collect()
}

/// A hint without a term says the follower's log starts after a snapshot
/// at the hint's index: the leader probes right after that index, instead of
/// searching its own log for a term 0 and starting over from the beginning.
#[test]
fn a_hint_without_a_term_is_probed_right_after_its_index() {
    let mut node = leader_of_a_log();
    node.step(rejection(FOLLOWER_B, 2, 5, (3, 0), None));
    assert_eq!(probes_to(&drain(&mut node), FOLLOWER_B), vec![3]);
}

/// The first flagged answer of a new life resets what the leader knows of
/// that follower, then counts as any answer: a rejection among them makes
/// the leader probe again at once, not wait for the follower's next answer.
#[test]
fn a_flagged_rejection_of_a_new_life_is_probed_at_once() {
    let mut node = leader_of_a_log();
    node.step(rejection(FOLLOWER_B, 2, 5, (3, 1), Some(9)));
    assert_eq!(probes_to(&drain(&mut node), FOLLOWER_B), vec![3]);
}

/// A probe whose answer moves nothing (a heartbeat's, at the known match)
/// keeps probing where it was: only an acknowledgement that moves the match
/// shows where the logs agree and starts streaming appends.
#[test]
fn a_probe_answered_without_progress_keeps_probing() {
    let mut node = leader_of_a_log();
    node.step(ack(FOLLOWER_B, 2, 0, 0));
    assert_eq!(probes_to(&drain(&mut node), FOLLOWER_B), vec![5]);
}

/// An answer the leader does not count for replication (an unflagged one
/// after the follower flagged a newer life) was still sent after it heard
/// the append it answers: it confirms the reads begun before that append.
#[test]
fn an_answer_not_counted_for_replication_still_confirms_a_read() {
    let mut node = leader(|_| {});
    node.step(ack(FOLLOWER_A, 1, 1, 0));
    let flagged = MessageBody::AppendResponse {
        success: true,
        match_index: LogIndex(0),
        hint_index: LogIndex(0),
        hint_term: Term(0),
        read_ctx: drain(&mut node).read_ctx_to(FOLLOWER_B),
        recovering: true,
        incarnation: 9,
    };
    node.step(from(FOLLOWER_B, 1, flagged));
    node.read_index(46).expect("leader");
    let heartbeat = drain(&mut node).read_ctx_to(FOLLOWER_B);
    node.step(ack(FOLLOWER_B, 1, 0, heartbeat));
    assert_eq!(drain(&mut node).read_states, vec![ReadState { ctx: 46, commit: LogIndex(1) }]);
}

/// The empty appends (heartbeats and checks) sent to `peer`, as
/// (previous index, commit) pairs.
fn empty_appends_to(drained: &Drained, peer: NodeId) -> Vec<(u64, u64)> {
    let to_peer = drained.messages.iter().filter(|message| message.to == peer);
    to_peer
        .filter_map(|message| match &message.body {
            MessageBody::Append { prev_index, entries, commit, .. } if entries.is_empty() => {
                Some((prev_index.0, commit.0))
            }
            _ => None,
        })
        .collect()
}

/// While appends are in flight, an answer that moves nothing makes the
/// leader check for lost appends with an empty one at the follower's next
/// index, but once per heartbeat interval: the check's own answer moves
/// nothing either while later appends are in flight, and answering it
/// again made a busy leader trade about twenty empty appends per entry
/// with each follower.
#[test]
fn a_busy_leader_checks_for_lost_appends_once_per_heartbeat() {
    let mut node = leader(|_| {});
    node.step(ack(FOLLOWER_A, 1, 1, 0));
    drain(&mut node);
    propose(&mut node, 2);
    drain(&mut node);
    // A's answer to an earlier heartbeat: entry 2 is in flight, unacknowledged.
    node.step(ack(FOLLOWER_A, 1, 1, 0));
    assert_eq!(empty_appends_to(&drain(&mut node), FOLLOWER_A), vec![(2, 1)], "one check, at entry 2");
    for token in 3..=6 {
        propose(&mut node, token);
        drain(&mut node);
        node.step(ack(FOLLOWER_A, 1, 1, 0));
        assert_eq!(empty_appends_to(&drain(&mut node), FOLLOWER_A), vec![], "no second check before a heartbeat");
    }
    let heartbeat_ticks = Config::standard(NodeId(0), vec![NodeId(0), FOLLOWER_A, FOLLOWER_B]).heartbeat_ticks;
    let mut ticked = Drained::default();
    for _ in 0..heartbeat_ticks {
        node.tick();
        ticked.messages.extend(drain(&mut node).messages);
    }
    assert_eq!(empty_appends_to(&ticked, FOLLOWER_A), vec![(1, 1)], "the heartbeat, at A's match");
    node.step(ack(FOLLOWER_A, 1, 1, 0));
    assert_eq!(empty_appends_to(&drain(&mut node), FOLLOWER_A), vec![(6, 1)], "the next interval's check");
}

/// `loss-check-every-answer` checks after every answer that moves nothing:
/// each check's own answer sends the next while appends are in flight.
#[test]
fn the_loss_check_every_answer_variant_checks_after_every_answer() {
    let mut node = leader(|config| config.variant = Variant::LossCheckEveryAnswer);
    node.step(ack(FOLLOWER_A, 1, 1, 0));
    drain(&mut node);
    for token in 2..=5 {
        propose(&mut node, token);
        drain(&mut node);
        node.step(ack(FOLLOWER_A, 1, 1, 0));
        assert_eq!(empty_appends_to(&drain(&mut node), FOLLOWER_A), vec![(token, 1)], "a check at entry {token}");
    }
}

/// A follower whose append was in flight when its entry committed learns
/// the commit as soon as it acknowledges the entry, not at the next
/// heartbeat: the commit's broadcast reached it at its old match, which
/// tells it nothing new.
#[test]
fn a_follower_that_acknowledges_after_the_commit_is_told_it_at_once() {
    let mut node = leader(|_| {});
    node.step(ack(FOLLOWER_A, 1, 1, 0));
    node.step(ack(FOLLOWER_B, 1, 1, 0));
    drain(&mut node);
    propose(&mut node, 2);
    drain(&mut node);
    node.step(ack(FOLLOWER_A, 1, 2, 0));
    assert_eq!(node.commit_index(), LogIndex(2));
    let broadcast = drain(&mut node);
    assert_eq!(empty_appends_to(&broadcast, FOLLOWER_B), vec![(1, 2)], "B gets the commit at its match, 1");
    node.step(ack(FOLLOWER_B, 1, 2, 0));
    assert_eq!(empty_appends_to(&drain(&mut node), FOLLOWER_B), vec![(2, 2)], "told at its new match");
    // Told: a repeated answer sends nothing more.
    node.step(ack(FOLLOWER_B, 1, 2, 0));
    assert_eq!(empty_appends_to(&drain(&mut node), FOLLOWER_B), vec![]);
}
