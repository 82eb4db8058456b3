//! Pre-vote at the level of one node: a pre-vote is for a term nobody has
//! entered yet, so neither asking nor answering one may move a term.

use crate::raft::{Config, DurableState, Message, MessageBody, RaftNode, Role};
use crate::types::{LogIndex, NodeId, Term};

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

/// A pre-candidate that fell behind asks with an older term: the answer is a
/// refusal carrying our term, from which it learns the term it missed and
/// stops asking for a future that is already past.
#[test]
fn a_pre_vote_of_an_older_term_is_refused_with_our_term() {
    let config = Config::standard(NodeId(0), vec![NodeId(0), NodeId(1), NodeId(2)]);
    let hard_state = crate::raft::HardState { term: Term(5), vote: None, commit: LogIndex(0) };
    let mut node = RaftNode::new(config, DurableState { hard_state, ..DurableState::default() }, 7).expect("valid");
    node.step(from_peer(Term(3), MessageBody::PreVote { last_index: LogIndex(0), last_term: Term(0) }));
    assert_eq!(node.soft_state().term, Term(5));
    let answers: Vec<(NodeId, Term, MessageBody)> =
        node.ready().messages.into_iter().map(|message| (message.to, message.term, message.body)).collect();
    assert_eq!(answers, vec![(NodeId(1), Term(5), MessageBody::PreVoteResponse { granted: false })]);
}
