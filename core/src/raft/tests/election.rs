//! Elections at the level of one node: a pre-vote is for a term nobody has
//! entered yet, so neither asking nor answering one may move a term; who may
//! be heard at all; how (pre-)votes are counted; when the election timer is
//! drawn; and how a refused vote is told.

use crate::raft::{Config, DurableState, HardState, Message, MessageBody, RaftNode, Role};
use crate::types::{LogIndex, NodeId, Term};
use crate::variant::Variant;
use std::sync::{Arc, Mutex};

const TICKS_MAX: u32 = 1_000;

/// Node 0 of three, fresh: term 0, no vote, no leader (so not in a leader's lease).
fn fresh_node() -> RaftNode {
    let config = Config::standard(NodeId(0), vec![NodeId(0), NodeId(1), NodeId(2)]);
    assert!(config.pre_vote, "the standard config uses pre-vote");
    RaftNode::new(config, DurableState::default(), 7).expect("valid config")
}

fn from_peer(term: Term, body: MessageBody) -> Message {
    Message { from: NodeId(1), to: NodeId(0), term, body }
}

#[test]
fn answering_a_pre_vote_leaves_the_term_and_vote_alone() {
    let mut node = fresh_node();
    node.step(from_peer(Term(1), MessageBody::PreVote { last_index: LogIndex(0), last_term: Term(0) }));
    assert_eq!(node.soft_state().term, Term(0), "a pre-vote does not move the receiver's term");
    assert_eq!(node.hard_state().vote, None);
    let ready = node.ready();
    let answers: Vec<(NodeId, Term, MessageBody)> =
        ready.messages.into_iter().map(|message| (message.to, message.term, message.body)).collect();
    assert_eq!(answers, vec![(NodeId(1), Term(1), MessageBody::PreVoteResponse { granted: true })]);
}

#[test]
fn a_granted_pre_vote_answer_makes_a_candidate_not_a_follower_of_the_future_term() {
    let mut node = fresh_node();
    for _ in 0..TICKS_MAX {
        if node.soft_state().role == Role::PreCandidate {
            break;
        }
        node.tick();
    }
    assert_eq!(node.soft_state().role, Role::PreCandidate);
    assert_eq!(node.soft_state().term, Term(0), "pre-vote asks without entering term 1");
    node.step(from_peer(Term(1), MessageBody::PreVoteResponse { granted: true }));
    // Its own vote and this one are a majority of three: the real election starts.
    assert_eq!(node.soft_state().role, Role::Candidate);
    assert_eq!(node.soft_state().term, Term(1));
    assert_eq!(node.hard_state().vote, Some(NodeId(0)));
}

/// A campaign called for runs the timer out at once: a pre-vote to every
/// peer, no term or vote moved, and a fresh timeout drawn (so the node does
/// not campaign again on its old timer a tick later).
#[test]
fn a_campaign_asks_every_peer_for_a_pre_vote_at_once() {
    let mut node = fresh_node();
    node.campaign();
    assert_eq!(node.soft_state().role, Role::PreCandidate);
    assert_eq!((node.soft_state().term, node.hard_state().vote), (Term(0), None));
    let asked: Vec<(NodeId, Term, MessageBody)> =
        node.ready().messages.into_iter().map(|message| (message.to, message.term, message.body)).collect();
    let pre_vote = MessageBody::PreVote { last_index: LogIndex(0), last_term: Term(0) };
    assert_eq!(asked, vec![(NodeId(1), Term(1), pre_vote.clone()), (NodeId(2), Term(1), pre_vote)]);
}

/// A leader has no election timer to run out: a campaign leaves it leading
/// in its term. A lone voter wins its own campaign at once.
#[test]
fn a_leader_told_to_campaign_keeps_leading() {
    let config = Config::standard(NodeId(0), vec![NodeId(0)]);
    let mut node = RaftNode::new(config, DurableState::default(), 7).expect("valid config");
    node.campaign();
    assert_eq!((node.soft_state().role, node.soft_state().term), (Role::Leader, Term(1)));
    node.campaign();
    assert_eq!((node.soft_state().role, node.soft_state().term), (Role::Leader, Term(1)));
}

/// A pre-candidate that fell behind asks with an older term: the answer is a
/// refusal carrying our term, from which it learns the term it missed and
/// stops asking for a future that is already past.
#[test]
fn a_pre_vote_of_an_older_term_is_refused_with_our_term() {
    let config = Config::standard(NodeId(0), vec![NodeId(0), NodeId(1), NodeId(2)]);
    let hard_state = HardState { term: Term(5), vote: None, commit: LogIndex(0) };
    let mut node = RaftNode::new(config, DurableState { hard_state, ..DurableState::default() }, 7).expect("valid");
    node.step(from_peer(Term(3), MessageBody::PreVote { last_index: LogIndex(0), last_term: Term(0) }));
    assert_eq!(node.soft_state().term, Term(5));
    let answers: Vec<(NodeId, Term, MessageBody)> =
        node.ready().messages.into_iter().map(|message| (message.to, message.term, message.body)).collect();
    assert_eq!(answers, vec![(NodeId(1), Term(5), MessageBody::PreVoteResponse { granted: false })]);
}

/// Node 0 of three, started from a disk at `term` with `vote`, with the timer seed `rng_seed`.
fn node_at(term: u64, vote: Option<NodeId>, variant: Variant, rng_seed: u64) -> RaftNode {
    let config = Config { variant, ..Config::standard(NodeId(0), vec![NodeId(0), NodeId(1), NodeId(2)]) };
    let hard_state = HardState { term: Term(term), vote, commit: LogIndex(0) };
    RaftNode::new(config, DurableState { hard_state, ..DurableState::default() }, rng_seed).expect("valid config")
}

/// An empty append (a heartbeat) at the very start of the log.
fn heartbeat(read_ctx: u64) -> MessageBody {
    MessageBody::Append {
        prev_index: LogIndex(0),
        prev_term: Term(0),
        entries: Vec::new(),
        commit: LogIndex(0),
        read_ctx,
    }
}

fn tick_until_pre_candidate(node: &mut RaftNode) {
    for _ in 0..TICKS_MAX {
        if node.soft_state().role == Role::PreCandidate {
            return;
        }
        node.tick();
    }
    panic!("no campaign within {TICKS_MAX} ticks");
}

/// Ticks until the node campaigns; returns how many ticks that took.
fn ticks_until_campaign(node: &mut RaftNode) -> u32 {
    for ticks in 0..TICKS_MAX {
        if node.soft_state().role != Role::Follower {
            return ticks;
        }
        node.tick();
    }
    panic!("no campaign within {TICKS_MAX} ticks");
}

/// Only the voters other than this node are heard. Without the guard a
/// message from outside the configuration (or one forged with our own id)
/// would move our term and make its sender our leader.
#[test]
fn messages_from_a_non_voter_or_from_itself_are_ignored() {
    for from in [NodeId(9), NodeId(0)] {
        let mut node = fresh_node();
        node.step(Message { from, to: NodeId(0), term: Term(3), body: heartbeat(1) });
        assert_eq!(node.soft_state().term, Term(0), "an append from {from} moved the term");
        assert_eq!(node.soft_state().leader, None, "an append from {from} installed a leader");
        assert!(!node.has_ready(), "an append from {from} was answered");
    }
}

/// A granted pre-vote answer carries the term the pre-vote asked for. One of
/// an earlier round (term 1, while this round asks for term 2) is a leftover
/// of a campaign that already moved on: counted, it would start an election
/// on grants given for another one.
#[test]
fn a_granted_pre_vote_answer_of_an_earlier_round_is_not_counted() {
    let mut node = node_at(1, None, Variant::Default, 7);
    tick_until_pre_candidate(&mut node);
    assert_eq!(node.soft_state().term, Term(1), "this round asks for term 2");
    node.step(from_peer(Term(1), MessageBody::PreVoteResponse { granted: true }));
    assert_eq!(node.soft_state().role, Role::PreCandidate, "a grant for term 1 does not count for term 2");
    node.step(from_peer(Term(2), MessageBody::PreVoteResponse { granted: true }));
    assert_eq!(node.soft_state().role, Role::Candidate, "a grant for term 2 does");
}

/// A refusal carries the refuser's own term, not the one the pre-vote asked
/// for, so it counts whatever its term: a pre-candidate refused by a
/// majority goes back to following. Without it, a node that cannot win stays
/// a pre-candidate until its timer asks again.
#[test]
fn a_pre_candidate_refused_by_a_majority_steps_down() {
    let mut node = fresh_node();
    tick_until_pre_candidate(&mut node);
    node.step(from_peer(Term(0), MessageBody::PreVoteResponse { granted: false }));
    assert_eq!(node.soft_state().role, Role::PreCandidate, "one refusal of three is not a majority");
    let refusal = MessageBody::PreVoteResponse { granted: false };
    node.step(Message { from: NodeId(2), to: NodeId(0), term: Term(0), body: refusal });
    assert_eq!(node.soft_state().role, Role::Follower);
    assert_eq!(node.soft_state().term, Term(0), "a pre-vote never moves the term");
}

/// The pre-vote answers node 0 sends: (to, term, granted).
fn pre_vote_answers(node: &mut RaftNode) -> Vec<(NodeId, Term, bool)> {
    let ready = node.ready();
    let messages = ready.messages.into_iter().chain(ready.messages_after_persist);
    messages
        .filter_map(|message| match message.body {
            MessageBody::PreVoteResponse { granted } => Some((message.to, message.term, granted)),
            _ => None,
        })
        .collect()
}

/// Candidate stickiness. Node 0 votes for node 1 in term 1; node 2's
/// pre-vote for term 2 arrives a moment later. Granted, node 2 could enter
/// term 2 just as node 1 takes office in term 1, and depose it with the
/// answer to its first append (a second leader after a heal, seed 63941 of
/// 200,000). So it is refused until the minimum election timeout has passed
/// since the vote; node 1 itself, whose campaign node 0 backs, may ask
/// for its next term at once.
#[test]
fn a_node_that_just_voted_refuses_pre_votes_for_a_later_term_for_the_minimum_timeout() {
    let mut node = fresh_node();
    let request = MessageBody::RequestVote { last_index: LogIndex(0), last_term: Term(0) };
    node.step(from_peer(Term(1), request));
    assert_eq!(node.hard_state().vote, Some(NodeId(1)));
    node.ready();
    let pre_vote = MessageBody::PreVote { last_index: LogIndex(0), last_term: Term(0) };
    let from_node_2 = Message { from: NodeId(2), to: NodeId(0), term: Term(2), body: pre_vote.clone() };
    node.step(from_node_2.clone());
    assert_eq!(pre_vote_answers(&mut node), vec![(NodeId(2), Term(1), false)], "refused, with our term");
    node.step(from_peer(Term(2), pre_vote));
    assert_eq!(pre_vote_answers(&mut node), vec![(NodeId(1), Term(2), true)], "the backed candidate may ask again");
    let ticks_min = Config::standard(NodeId(0), vec![NodeId(0)]).election_ticks_min;
    for _ in 0..ticks_min {
        node.tick();
    }
    node.ready();
    node.step(from_node_2);
    assert_eq!(pre_vote_answers(&mut node), vec![(NodeId(2), Term(2), true)], "the race is over: granted");
    assert_eq!((node.soft_state().term, node.hard_state().vote), (Term(1), Some(NodeId(1))));
}

/// A candidate backs its own campaign: it refuses another node's pre-vote
/// for the next term while its own election may still be won.
#[test]
fn a_candidate_refuses_pre_votes_for_a_later_term_while_its_campaign_runs() {
    let mut node = fresh_node();
    tick_until_pre_candidate(&mut node);
    node.step(from_peer(Term(1), MessageBody::PreVoteResponse { granted: true }));
    assert_eq!((node.soft_state().role, node.soft_state().term), (Role::Candidate, Term(1)));
    node.ready();
    let pre_vote = MessageBody::PreVote { last_index: LogIndex(0), last_term: Term(0) };
    node.step(Message { from: NodeId(2), to: NodeId(0), term: Term(2), body: pre_vote });
    assert_eq!(pre_vote_answers(&mut node), vec![(NodeId(2), Term(1), false)]);
}

/// `Variant::VoteTwice` is a follower that forgets whom it voted for in its
/// term: it must grant a second candidate of that term, or the variant
/// stops showing the double vote it exists to show.
#[test]
fn under_vote_twice_a_follower_votes_again_in_its_term() {
    let request = MessageBody::RequestVote { last_index: LogIndex(0), last_term: Term(0) };
    let ask = Message { from: NodeId(2), to: NodeId(0), term: Term(1), body: request };
    let answers = |variant: Variant| {
        let mut node = node_at(1, Some(NodeId(1)), variant, 7);
        assert_eq!(node.soft_state().role, Role::Follower);
        node.step(ask.clone());
        let ready = node.ready();
        ready.messages_after_persist.into_iter().map(|message| (message.to, message.body)).collect::<Vec<_>>()
    };
    let granted = |granted: bool| vec![(NodeId(2), MessageBody::RequestVoteResponse { granted })];
    assert_eq!(answers(Variant::VoteTwice), granted(true), "the variant votes twice in term 1");
    assert_eq!(answers(Variant::Default), granted(false), "a correct node votes once per term");
}

/// The election timeout is drawn once per role change. Following the leader
/// of a new term is one change, whether the term moves with its append or
/// was known before: drawing twice for it would give the node another
/// timeout than its seed and its role changes say (and move every schedule).
#[test]
fn following_a_new_terms_leader_draws_the_election_timeout_once() {
    for rng_seed in 0..16 {
        let mut term_moves = node_at(0, None, Variant::Default, rng_seed);
        term_moves.step(from_peer(Term(1), heartbeat(1)));
        let mut term_known = node_at(1, None, Variant::Default, rng_seed);
        term_known.step(from_peer(Term(1), heartbeat(1)));
        assert_eq!(term_moves.soft_state(), term_known.soft_state());
        assert_eq!(ticks_until_campaign(&mut term_moves), ticks_until_campaign(&mut term_known), "seed {rng_seed}");
    }
}

/// A follower keeps the timeout it drew when it began to follow: its
/// leader's later appends restart the count, not the draw.
#[test]
fn appends_from_the_followed_leader_keep_the_election_timeout() {
    for rng_seed in 0..16 {
        let mut once = node_at(1, None, Variant::Default, rng_seed);
        once.step(from_peer(Term(1), heartbeat(1)));
        let mut often = node_at(1, None, Variant::Default, rng_seed);
        for read_ctx in 1..=5 {
            often.step(from_peer(Term(1), heartbeat(read_ctx)));
        }
        assert_eq!(ticks_until_campaign(&mut once), ticks_until_campaign(&mut often), "seed {rng_seed}");
    }
}

/// A refused vote is told at DEBUG with its reason (`fencesim replay --why`
/// shows it); a granted one is not told as refused. Told wrong, a person
/// reading a trace looks for the wrong cause of a failed election.
#[test]
fn a_refused_vote_is_told_with_its_reason() {
    let mut granting = fresh_node();
    let pre_vote = from_peer(Term(1), MessageBody::PreVote { last_index: LogIndex(0), last_term: Term(0) });
    let told_granting = told(|| granting.step(pre_vote));
    assert_eq!(told_granting, Vec::<String>::new(), "a granted pre-vote is not told as refused");
    let mut voted = node_at(1, Some(NodeId(1)), Variant::Default, 7);
    let request = MessageBody::RequestVote { last_index: LogIndex(0), last_term: Term(0) };
    let told_voted = told(|| voted.step(Message { from: NodeId(2), to: NodeId(0), term: Term(1), body: request }));
    assert_eq!(told_voted, vec!["vote refused: already voted or following a leader in this term".to_string()]);
}

/// The messages of the events told while `act` runs on this thread.
fn told(act: impl FnOnce()) -> Vec<String> {
    let told = Told::default();
    tracing::subscriber::with_default(told.clone(), act);
    let messages = told.0.lock().expect("no test panicked while holding it");
    messages.clone()
}

/// A `tracing` subscriber that keeps the message of every event.
#[derive(Clone, Default)]
struct Told(Arc<Mutex<Vec<String>>>);

impl tracing::Subscriber for Told {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = MessageField(String::new());
        event.record(&mut message);
        self.0.lock().expect("no test panicked while holding it").push(message.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

struct MessageField(String);

impl tracing::field::Visit for MessageField {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}
