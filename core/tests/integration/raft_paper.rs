//! The Raft paper's rules, case by case, as etcd-io/raft (`raft_paper_test.go`,
//! `raft_test.go`) and tikv/raft-rs (`test_raft_paper.rs`, `test_raft.rs`)
//! check them, written for our API: one node driven by hand-made messages,
//! or a small cluster of `RaftNode`s over the test harness's network.
//!
//! Most cases switch pre-vote and check-quorum off to check the paper's bare
//! rules (`paper`), as those suites do. Where our design differs on purpose
//! the case says so and checks our rule:
//! - a new leader appends a no-op of its term, so its first commit is that
//!   entry and a follower brought in sync holds it too;
//! - a leader's own entry counts toward commit only once it is durable
//!   (after `advance`), and votes and acknowledgements go out only after
//!   the hard state and entries they promise are persisted;
//! - with check-quorum, a node that heard from a leader within the minimum
//!   election timeout ignores vote requests (leader stickiness); without it,
//!   a higher term always wins, as in etcd;
//! - a rejected append carries a hint (index and term) for fast backoff;
//! - a stale append gets an answer of the receiver's term, so a deposed
//!   leader learns it and steps down.

use crate::raft_harness::{command, disk, ids, Cluster, Disk};
use fencelock::raft::{Config, Entry, Message, MessageBody, Payload, RaftNode, Role};
use fencelock::{LogIndex, NodeId, Term, Variant};

/// A log, or entries, as (index, term) pairs.
type Log = &'static [(u64, u64)];

/// The paper's bare rules: no pre-vote, no check-quorum.
fn paper(config: &mut Config) {
    config.pre_vote = false;
    config.check_quorum = false;
}

fn start(id: u8, count: u8, disk: Disk, configure: impl Fn(&mut Config)) -> RaftNode {
    let mut config = Config::standard(NodeId(id), ids(count));
    configure(&mut config);
    RaftNode::new(config, disk.durable(), 7).expect("valid config")
}

/// Hands out a Ready as a driver would (everything persisted and applied)
/// and returns every message it holds, those that wait for persistence last.
fn out(node: &mut RaftNode) -> Vec<Message> {
    let mut messages = Vec::new();
    while node.has_ready() {
        let ready = node.ready();
        let applied = ready.committed_entries.last().map_or(node.applied_index(), |entry| entry.index);
        messages.extend(ready.messages);
        messages.extend(ready.messages_after_persist);
        node.advance(applied);
    }
    messages
}

fn msg(from: u8, to: u8, term: u64, body: MessageBody) -> Message {
    Message { from: NodeId(from), to: NodeId(to), term: Term(term), body }
}

fn vote_answer(from: u8, to: u8, term: u64, granted: bool) -> Message {
    msg(from, to, term, MessageBody::RequestVoteResponse { granted })
}

fn ack(from: u8, to: u8, term: u64, match_index: u64) -> Message {
    msg(
        from,
        to,
        term,
        MessageBody::AppendResponse {
            success: true,
            match_index: LogIndex(match_index),
            hint_index: LogIndex(0),
            hint_term: Term(0),
            read_ctx: 0,
            recovering: false,
            incarnation: u64::from(from),
        },
    )
}

fn append(from: u8, to: u8, term: u64, prev: (u64, u64), entries: &[(u64, u64)], commit: u64) -> Message {
    let entries = entries
        .iter()
        .map(|&(index, term)| Entry {
            term: Term(term),
            index: LogIndex(index),
            // The payload `raft_harness::disk` gives the same (index, term).
            payload: Payload::Command(command(1000 + index * 100 + term)),
        })
        .collect();
    msg(
        from,
        to,
        term,
        MessageBody::Append {
            prev_index: LogIndex(prev.0),
            prev_term: Term(prev.1),
            entries,
            commit: LogIndex(commit),
            read_ctx: 0,
        },
    )
}

/// Ticks until the node leaves its role (a campaign starts or restarts).
fn time_out(node: &mut RaftNode) -> u32 {
    let (role, term) = (node.soft_state().role, node.soft_state().term);
    let ticks_max = node.config().election_ticks_max * 2;
    for ticks in 1..=ticks_max {
        node.tick();
        let soft = node.soft_state();
        if soft.role != role || soft.term != term {
            return ticks;
        }
    }
    panic!("no campaign within {ticks_max} ticks");
}

/// Node 0 of `count`, elected with the votes of nodes 1.. (paper rules).
fn leader_of(count: u8, disk: Disk, configure: impl Fn(&mut Config)) -> RaftNode {
    let mut node = start(0, count, disk, |config| {
        paper(config);
        configure(config);
    });
    time_out(&mut node);
    out(&mut node);
    let term = node.soft_state().term.0;
    for peer in 1..count {
        if node.soft_state().role == Role::Candidate {
            node.step(vote_answer(peer, 0, term, true));
        }
    }
    assert_eq!(node.soft_state().role, Role::Leader);
    out(&mut node);
    node
}

/// Ticks `id` alone until its term moves (it campaigns again), then lets the network settle.
fn campaign_again(cluster: &mut Cluster, id: NodeId) {
    let term = cluster.node(id).soft_state().term;
    for _ in 0..cluster.configs[id.0 as usize].election_ticks_max * 2 {
        cluster.tick(id);
        if cluster.node(id).soft_state().term != term {
            break;
        }
    }
    cluster.deliver_all();
    cluster.check();
}

fn appends(messages: &[Message]) -> Vec<(NodeId, LogIndex, usize, LogIndex)> {
    messages
        .iter()
        .filter_map(|message| match &message.body {
            MessageBody::Append { prev_index, entries, commit, .. } => {
                Some((message.to, *prev_index, entries.len(), *commit))
            }
            _ => None,
        })
        .collect()
}

/// etcd TestFollowerUpdateTermFromMessage, TestCandidateUpdateTermFromMessage,
/// TestLeaderUpdateTermFromMessage: whatever its role, a node that sees a
/// higher term adopts it and becomes a follower.
#[test]
fn a_higher_term_in_a_message_makes_any_node_a_follower_of_that_term() {
    for role in [Role::Follower, Role::Candidate, Role::Leader] {
        let mut node = match role {
            Role::Leader => leader_of(3, Disk::default(), |_| {}),
            _ => start(0, 3, Disk::default(), paper),
        };
        if role == Role::Candidate {
            time_out(&mut node);
        }
        assert_eq!(node.soft_state().role, role);
        let term = node.soft_state().term.0 + 5;
        node.step(append(2, 0, term, (0, 0), &[], 0));
        let soft = node.soft_state();
        assert_eq!((soft.role, soft.term, soft.leader), (Role::Follower, Term(term), Some(NodeId(2))), "{role:?}");
        // A vote request of a higher term also moves the term, with no leader known.
        node.step(msg(1, 0, term + 1, MessageBody::RequestVote { last_index: LogIndex(9), last_term: Term(9) }));
        let soft = node.soft_state();
        assert_eq!((soft.role, soft.term), (Role::Follower, Term(term + 1)), "{role:?}");
        assert_eq!(node.hard_state().vote, Some(NodeId(1)));
    }
}

/// Ours: with check-quorum, a follower within its leader's lease ignores a
/// vote request of a higher term and keeps its term.
#[test]
fn with_check_quorum_a_vote_request_within_the_lease_does_not_move_the_term() {
    let mut node = start(0, 3, Disk::default(), |config| config.pre_vote = false);
    node.step(append(2, 0, 4, (0, 0), &[], 0));
    node.step(msg(1, 0, 9, MessageBody::RequestVote { last_index: LogIndex(9), last_term: Term(9) }));
    assert_eq!(node.soft_state().term, Term(4));
    assert!(out(&mut node).iter().all(|message| !matches!(message.body, MessageBody::RequestVoteResponse { .. })));
}

/// etcd TestRejectStaleTermMessage, TestStepIgnoreOldTermMsg: a message of a
/// lower term changes nothing. Ours: an append gets an answer of our term.
#[test]
fn a_message_of_a_lower_term_is_ignored() {
    let mut node = start(0, 3, disk(2, None, &[(1, 1)]), paper);
    out(&mut node);
    let before = (node.hard_state(), node.last_index(), node.soft_state());
    node.step(append(1, 0, 1, (1, 1), &[(2, 1)], 2));
    node.step(msg(1, 0, 1, MessageBody::RequestVote { last_index: LogIndex(5), last_term: Term(1) }));
    node.step(vote_answer(1, 0, 1, true));
    assert_eq!((node.hard_state(), node.last_index(), node.soft_state()), before);
    let answers = out(&mut node);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].term, Term(2));
    assert!(matches!(answers[0].body, MessageBody::AppendResponse { success: false, .. }));
}

/// etcd TestStartAsFollower.
#[test]
fn a_node_starts_as_a_follower_with_no_leader() {
    let node = start(0, 3, disk(3, Some(1), &[(1, 2)]), paper);
    let soft = node.soft_state();
    assert_eq!((soft.role, soft.term, soft.leader), (Role::Follower, Term(3), None));
    assert_eq!(node.hard_state().vote, Some(NodeId(1)));
}

/// etcd TestLeaderBcastBeat: every heartbeat interval the leader sends each
/// follower an empty append carrying its commit.
#[test]
fn a_leader_sends_a_heartbeat_every_heartbeat_interval() {
    let mut node = leader_of(3, Disk::default(), |_| {});
    let heartbeat_ticks = node.config().heartbeat_ticks;
    for _ in 1..heartbeat_ticks {
        node.tick();
        assert!(out(&mut node).is_empty());
    }
    node.tick();
    let sent = appends(&out(&mut node));
    let commit = node.commit_index();
    assert_eq!(sent, vec![(NodeId(1), LogIndex(0), 0, commit), (NodeId(2), LogIndex(0), 0, commit)]);
}

/// etcd TestFollowerStartElection, TestCandidateStartNewElection: on its
/// election timeout a follower or candidate moves to the next term, votes
/// for itself and asks every other node for its vote, after persisting both.
#[test]
fn on_its_election_timeout_a_node_campaigns_in_the_next_term() {
    let mut node = start(0, 3, disk(1, None, &[(1, 1)]), paper);
    for expected_term in [2, 3] {
        time_out(&mut node);
        assert_eq!(node.soft_state().role, Role::Candidate);
        let ready = node.ready();
        let hard_state = ready.hard_state.expect("term and vote to persist");
        assert_eq!((hard_state.term, hard_state.vote), (Term(expected_term), Some(NodeId(0))));
        assert!(ready.messages.is_empty(), "vote requests wait for the vote to be durable");
        let requests: Vec<(NodeId, Term)> =
            ready.messages_after_persist.iter().map(|message| (message.to, message.term)).collect();
        assert_eq!(requests, vec![(NodeId(1), Term(expected_term)), (NodeId(2), Term(expected_term))]);
        node.advance(node.applied_index());
    }
}

/// Ours: with pre-vote, the timeout first asks for pre-votes for the next
/// term, changing neither the term nor the vote, and sends them at once.
#[test]
fn with_pre_vote_a_timeout_asks_first_without_changing_term_or_vote() {
    let mut node = start(0, 3, disk(1, None, &[(1, 1)]), |_| {});
    time_out(&mut node);
    assert_eq!(node.soft_state().role, Role::PreCandidate);
    let ready = node.ready();
    assert_eq!(ready.hard_state, None);
    assert!(ready.messages_after_persist.is_empty());
    assert!(ready.messages.iter().all(|message| message.term == Term(2)
        && matches!(message.body, MessageBody::PreVote { last_index: LogIndex(1), last_term: Term(1) })));
    assert_eq!(ready.messages.len(), 2);
}

/// etcd TestLeaderElectionInOneRoundRPC: a candidate wins with a majority,
/// loses to a majority of rejections, and otherwise waits.
#[test]
fn an_election_is_decided_in_one_round_of_votes() {
    let cases: &[(u8, &[u8], &[u8], Role)] = &[
        (1, &[], &[], Role::Leader),
        (3, &[1], &[], Role::Leader),
        (3, &[1, 2], &[], Role::Leader),
        (3, &[], &[], Role::Candidate),
        (3, &[], &[1], Role::Candidate),
        (3, &[], &[1, 2], Role::Follower),
        (5, &[1, 2], &[], Role::Leader),
        (5, &[1], &[], Role::Candidate),
        (5, &[1], &[2], Role::Candidate),
        (5, &[], &[1, 2, 3], Role::Follower),
        (5, &[1], &[2, 3, 4], Role::Follower),
    ];
    for &(count, granted, rejected, expected) in cases {
        let mut node = start(0, count, Disk::default(), paper);
        time_out(&mut node);
        out(&mut node);
        let term = node.soft_state().term.0;
        for &peer in granted {
            node.step(vote_answer(peer, 0, term, true));
        }
        for &peer in rejected {
            node.step(vote_answer(peer, 0, term, false));
        }
        assert_eq!(node.soft_state().role, expected, "{count} nodes, granted by {granted:?}, rejected by {rejected:?}");
        assert_eq!(node.soft_state().term, Term(1));
    }
}

/// etcd TestFollowerVote: at most one vote per term, first come first served;
/// asking again gets the same answer.
#[test]
fn a_follower_votes_for_at_most_one_candidate_per_term() {
    let cases: &[(Option<u8>, u8, bool)] = &[
        (None, 1, true),
        (None, 2, true),
        (Some(1), 1, true),
        (Some(2), 2, true),
        (Some(1), 2, false),
        (Some(2), 1, false),
    ];
    for &(vote, candidate, granted) in cases {
        let mut node = start(0, 3, disk(1, vote, &[]), paper);
        node.step(msg(candidate, 0, 1, MessageBody::RequestVote { last_index: LogIndex(0), last_term: Term(0) }));
        let ready = node.ready();
        assert!(ready.messages.is_empty(), "a vote goes out only once it is durable");
        let answers: Vec<&MessageBody> = ready.messages_after_persist.iter().map(|message| &message.body).collect();
        assert_eq!(
            answers,
            vec![&MessageBody::RequestVoteResponse { granted }],
            "vote {vote:?}, candidate {candidate}"
        );
        let vote_after = if granted { Some(NodeId(candidate)) } else { vote.map(NodeId) };
        assert_eq!(node.hard_state().vote, vote_after);
    }
}

/// etcd TestCandidateFallback: a candidate that hears an append of its term
/// or a later one has lost and follows its sender.
#[test]
fn a_candidate_follows_a_leader_of_its_term_or_a_later_one() {
    for extra in [0, 1] {
        let mut node = start(0, 3, Disk::default(), paper);
        time_out(&mut node);
        let term = node.soft_state().term.0 + extra;
        node.step(append(2, 0, term, (0, 0), &[], 0));
        let soft = node.soft_state();
        assert_eq!((soft.role, soft.term, soft.leader), (Role::Follower, Term(term), Some(NodeId(2))));
    }
}

/// etcd TestFollowerElectionTimeoutRandomized, TestCandidateElectionTimeoutRandomized:
/// the timeout is drawn anew over the whole range `[election_ticks_min, election_ticks_max)`.
#[test]
fn election_timeouts_are_randomized_over_their_whole_range() {
    let config = Config::standard(NodeId(0), ids(3));
    let range = config.election_ticks_min..config.election_ticks_max;
    let mut as_follower = std::collections::BTreeSet::new();
    let mut as_candidate = std::collections::BTreeSet::new();
    for seed in 0..300 {
        let mut config = config.clone();
        paper(&mut config);
        let mut node = RaftNode::new(config, Default::default(), seed).expect("valid");
        as_follower.insert(time_out(&mut node));
        as_candidate.insert(time_out(&mut node));
    }
    assert_eq!(as_follower.into_iter().collect::<Vec<_>>(), range.clone().collect::<Vec<_>>());
    assert_eq!(as_candidate.into_iter().collect::<Vec<_>>(), range.collect::<Vec<_>>());
}

/// etcd TestFollowersElectionTimeoutNonconflict: among 5 nodes started
/// together, usually only one times out first. With 10 possible timeouts
/// two tie for the first about 23% of the time.
#[test]
fn randomized_timeouts_rarely_fire_together() {
    let runs = 1000;
    let mut ties = 0;
    for run in 0..runs {
        let mut nodes: Vec<RaftNode> = (0..5u8)
            .map(|id| {
                let mut config = Config::standard(NodeId(id), ids(5));
                paper(&mut config);
                RaftNode::new(config, Default::default(), run * 5 + u64::from(id)).expect("valid")
            })
            .collect();
        for _ in 0..Config::standard(NodeId(0), ids(5)).election_ticks_max {
            nodes.iter_mut().for_each(RaftNode::tick);
            let campaigning = nodes.iter().filter(|node| node.soft_state().role != Role::Follower).count();
            if campaigning > 0 {
                ties += usize::from(campaigning > 1);
                break;
            }
        }
    }
    assert!(ties * 10 <= runs as usize * 3, "{ties} ties in {runs} runs");
}

/// etcd TestLeaderStartReplication: a proposal goes into the leader's log
/// (to persist) and to every follower in one append after the last entry.
#[test]
fn a_leader_sends_a_proposal_to_every_follower() {
    let mut node = leader_of(3, Disk::default(), |_| {});
    // A new leader probes each follower with its no-op; once both answered it streams.
    let (last, term) = (node.last_index(), node.soft_state().term);
    node.step(ack(1, 0, term.0, last.0));
    node.step(ack(2, 0, term.0, last.0));
    out(&mut node);
    let (index, term) = node.propose(command(1)).expect("leader");
    assert_eq!((index, term), (LogIndex(last.0 + 1), node.soft_state().term));
    let ready = node.ready();
    assert_eq!(ready.entries.iter().map(|entry| entry.index).collect::<Vec<_>>(), vec![index]);
    let sent = appends(&ready.messages);
    let commit = node.commit_index();
    assert_eq!(sent, vec![(NodeId(1), last, 1, commit), (NodeId(2), last, 1, commit)]);
}

/// etcd TestLeaderCommitEntry: once a majority stored an entry the leader
/// commits it, hands it out to apply, and tells the followers at once
/// (etcd and raft-rs do; we used to wait for the next heartbeat).
#[test]
fn a_leader_commits_on_a_majority_and_tells_the_followers_at_once() {
    let mut node = leader_of(3, Disk::default(), |_| {});
    let term = node.soft_state().term.0;
    let (index, _) = node.propose(command(1)).expect("leader");
    out(&mut node);
    node.step(ack(1, 0, term, index.0));
    assert_eq!(node.commit_index(), index);
    let ready = node.ready();
    assert_eq!(ready.committed_entries.last().map(|entry| entry.index), Some(index));
    let told: Vec<(NodeId, LogIndex)> =
        appends(&ready.messages).iter().map(|&(to, _, _, commit)| (to, commit)).collect();
    assert_eq!(told, vec![(NodeId(1), index), (NodeId(2), index)]);
}

/// etcd TestLeaderAcknowledgeCommit: the leader commits exactly when the
/// acknowledgements and its own durable copy make a majority.
#[test]
fn a_leader_commits_when_its_copy_and_the_acknowledgements_make_a_majority() {
    let cases: &[(u8, &[u8], bool)] = &[
        (1, &[], true),
        (3, &[], false),
        (3, &[1], true),
        (3, &[1, 2], true),
        (5, &[], false),
        (5, &[1], false),
        (5, &[1, 2], true),
        (5, &[1, 2, 3], true),
    ];
    for &(count, acks, committed) in cases {
        let mut node = leader_of(count, Disk::default(), |_| {});
        let term = node.soft_state().term.0;
        let (index, _) = node.propose(command(1)).expect("leader");
        out(&mut node);
        for &peer in acks {
            node.step(ack(peer, 0, term, index.0));
        }
        assert_eq!(node.commit_index() == index, committed, "{count} nodes, acknowledged by {acks:?}");
    }
}

/// Ours: the leader's own entry counts only once it is durable.
#[test]
fn a_leaders_own_entry_counts_only_once_persisted() {
    let mut node = leader_of(3, Disk::default(), |_| {});
    let term = node.soft_state().term.0;
    let (index, _) = node.propose(command(1)).expect("leader");
    node.step(ack(1, 0, term, index.0 - 1));
    let ready = node.ready();
    assert_eq!(ready.entries.last().map(|entry| entry.index), Some(index));
    node.step(ack(1, 0, term, index.0));
    assert!(node.commit_index() < index, "one follower's copy is not a majority of durable copies");
    node.advance(node.applied_index());
    assert_eq!(node.commit_index(), index);
}

/// etcd TestLeaderCommitPrecedingEntries: committing an entry of the
/// leader's term commits every entry before it, from any term.
#[test]
fn committing_an_entry_commits_every_entry_before_it() {
    let mut node = leader_of(3, disk(2, None, &[(1, 1), (2, 2)]), |_| {});
    let term = node.soft_state().term.0;
    let (index, _) = node.propose(command(1)).expect("leader");
    assert_eq!(index, LogIndex(4), "after the old entries and the no-op of term 3");
    out(&mut node);
    node.step(ack(1, 0, term, index.0));
    let ready = node.ready();
    let applied: Vec<(LogIndex, Term)> =
        ready.committed_entries.iter().map(|entry| (entry.index, entry.term)).collect();
    assert_eq!(applied, vec![(LogIndex(1), Term(1)), (LogIndex(2), Term(2)), (LogIndex(3), Term(3)), (index, Term(3))]);
}

/// etcd TestFollowerCommitEntry: a follower commits what its leader says is
/// committed, as far as the append it just matched reaches.
#[test]
fn a_follower_commits_what_its_leader_committed_as_far_as_it_matches() {
    let cases: &[(Log, u64, u64)] =
        &[(&[(1, 1)], 1, 1), (&[(1, 1), (2, 1)], 2, 2), (&[(1, 1), (2, 1)], 1, 1), (&[(1, 1), (2, 1)], 5, 2)];
    for &(entries, commit, expected) in cases {
        let mut node = start(0, 3, Disk::default(), paper);
        node.step(append(1, 0, 1, (0, 0), entries, commit));
        assert_eq!(node.commit_index(), LogIndex(expected), "{entries:?} commit {commit}");
        let ready = node.ready();
        assert_eq!(ready.committed_entries.last().map(|entry| entry.index), Some(LogIndex(expected)));
    }
}

/// etcd TestFollowerCheckMsgApp: a follower accepts an append only if it
/// holds the entry before it; a rejection carries a hint for the leader's backoff.
#[test]
fn a_follower_rejects_an_append_whose_previous_entry_it_lacks() {
    let cases: &[((u64, u64), bool)] =
        &[((0, 0), true), ((1, 1), true), ((2, 2), true), ((1, 2), false), ((3, 2), false), ((3, 3), false)];
    for &(prev, accepted) in cases {
        let mut node = start(0, 3, disk(2, None, &[(1, 1), (2, 2)]), paper);
        out(&mut node);
        node.step(append(1, 0, 2, prev, &[], 0));
        let answers = out(&mut node);
        let [answer] = &answers[..] else { panic!("one answer, got {answers:?}") };
        let MessageBody::AppendResponse { success, match_index, hint_index, .. } = answer.body else {
            panic!("an append answer, got {answer:?}")
        };
        assert_eq!(success, accepted, "prev {prev:?}");
        assert_eq!(match_index, LogIndex(prev.0));
        if !accepted {
            // The follower's last index at or below the rejected one whose term is not above it.
            assert!(hint_index <= LogIndex(prev.0).min(LogIndex(2)), "prev {prev:?}: hint {hint_index}");
        }
    }
}

/// etcd TestFollowerAppendEntries: a follower keeps what matches, drops a
/// conflicting suffix and appends the rest; entries it already holds are not
/// written again.
#[test]
fn a_follower_replaces_a_conflicting_suffix_and_keeps_the_rest() {
    let cases: &[((u64, u64), Log, Log, Log)] = &[
        ((2, 2), &[(3, 3)], &[(1, 1), (2, 2), (3, 3)], &[(3, 3)]),
        ((1, 1), &[(2, 3), (3, 4)], &[(1, 1), (2, 3), (3, 4)], &[(2, 3), (3, 4)]),
        ((0, 0), &[(1, 1)], &[(1, 1), (2, 2)], &[]),
        ((0, 0), &[(1, 3)], &[(1, 3)], &[(1, 3)]),
    ];
    for &(prev, entries, log, written) in cases {
        let mut node = start(0, 3, disk(2, None, &[(1, 1), (2, 2)]), paper);
        out(&mut node);
        node.step(append(1, 0, 3, prev, entries, 0));
        let ready = node.ready();
        let held: Vec<(u64, u64)> =
            (1..=node.last_index().0).map(|index| (index, node.entry_term(LogIndex(index)).expect("held").0)).collect();
        assert_eq!(held, log, "prev {prev:?}, entries {entries:?}");
        let persisted: Vec<(u64, u64)> = ready.entries.iter().map(|entry| (entry.index.0, entry.term.0)).collect();
        assert_eq!(persisted, written, "prev {prev:?}, entries {entries:?}");
    }
}

/// etcd TestLeaderSyncFollowerLog (Raft paper figure 7): whatever a
/// follower's log looks like (missing entries, extra entries, both), the
/// leader of term 8 makes it equal to its own. Ours: the leader's no-op of
/// term 8 ends both logs.
#[test]
fn figure_7_every_follower_log_is_brought_in_line_with_the_leaders() {
    let leader: &[u64] = &[1, 1, 1, 4, 4, 5, 5, 6, 6, 6];
    let followers: &[(&str, &[u64])] = &[
        ("a", &[1, 1, 1, 4, 4, 5, 5, 6, 6]),
        ("b", &[1, 1, 1, 4]),
        ("c", &[1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 6]),
        ("d", &[1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 7, 7]),
        ("e", &[1, 1, 1, 4, 4, 4, 4]),
        ("f", &[1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3]),
    ];
    let log =
        |terms: &[u64]| -> Vec<(u64, u64)> { terms.iter().enumerate().map(|(i, &t)| (i as u64 + 1, t)).collect() };
    for &(name, follower) in followers {
        // Node 2 holds the leader's log and gives it the second vote.
        let disks = vec![disk(7, None, &log(leader)), disk(7, None, &log(follower)), disk(7, None, &log(leader))];
        let mut cluster = Cluster::from_disks(disks, 7, |_| {});
        cluster.campaign(NodeId(0));
        assert_eq!(cluster.role(NodeId(0)), Role::Leader, "({name})");
        assert_eq!(cluster.node(NodeId(0)).soft_state().term, Term(8));
        cluster.run_ticks(5);
        let terms = |disk: &Disk| disk.entries.iter().map(|entry| (entry.index.0, entry.term.0)).collect::<Vec<_>>();
        let mut expected = log(leader);
        expected.push((11, 8));
        assert_eq!(terms(&cluster.disks[1]), expected, "follower ({name})");
        assert_eq!(cluster.disks[1].entries, cluster.disks[0].entries, "follower ({name})");
        assert!(cluster.violations.is_empty(), "({name}) {:?}", cluster.violations);
    }
}

/// etcd TestVoteRequest: a vote request carries the candidate's last index and term.
#[test]
fn a_vote_request_carries_the_candidates_last_index_and_term() {
    let mut node = start(0, 3, disk(3, None, &[(1, 1), (2, 3)]), paper);
    time_out(&mut node);
    for message in out(&mut node) {
        assert_eq!(message.term, Term(4));
        assert_eq!(message.body, MessageBody::RequestVote { last_index: LogIndex(2), last_term: Term(3) });
    }
}

/// etcd TestVoter: a vote goes only to a candidate whose log is at least as
/// up to date: a later last term, or the same last term and at least as long.
#[test]
fn a_vote_goes_only_to_a_candidate_at_least_as_up_to_date() {
    let cases: &[(Log, (u64, u64), bool)] = &[
        (&[(1, 1)], (1, 1), true),
        (&[(1, 1)], (2, 1), true),
        (&[(1, 1), (2, 1)], (1, 1), false),
        (&[(1, 1)], (1, 2), true),
        (&[(1, 1)], (3, 2), true),
        (&[(1, 1), (2, 1)], (1, 2), true),
        (&[(1, 2)], (1, 1), false),
        (&[(1, 2)], (3, 1), false),
    ];
    for &(log, (last_index, last_term), granted) in cases {
        let mut node = start(0, 3, disk(3, None, log), paper);
        out(&mut node);
        let body = MessageBody::RequestVote { last_index: LogIndex(last_index), last_term: Term(last_term) };
        node.step(msg(1, 0, 3, body));
        let answers: Vec<MessageBody> = out(&mut node).into_iter().map(|message| message.body).collect();
        assert_eq!(
            answers,
            vec![MessageBody::RequestVoteResponse { granted }],
            "log {log:?}, candidate {last_index}/{last_term}"
        );
    }
}

/// etcd TestLeaderOnlyCommitsLogFromCurrentTerm (Raft paper figure 8): a
/// leader never commits an entry of an earlier term by counting copies, only
/// through an entry of its own term. `Variant::CommitOldTermByCount` does,
/// and this case catches it.
#[test]
fn figure_8_a_leader_commits_by_counting_only_entries_of_its_term() {
    for variant in [Variant::Default, Variant::CommitOldTermByCount] {
        let mut node = leader_of(3, disk(2, None, &[(1, 1), (2, 2)]), |config| config.variant = variant);
        let term = node.soft_state().term.0;
        assert_eq!(term, 3);
        node.step(ack(1, 0, term, 2));
        match variant {
            Variant::Default => assert_eq!(node.commit_index(), LogIndex(0), "index 2 is of term 2"),
            _ => assert_eq!(node.commit_index(), LogIndex(2), "the unsafe variant commits it by count"),
        }
        node.step(ack(1, 0, term, 3));
        assert_eq!(node.commit_index(), LogIndex(3), "the no-op of term 3 commits, and index 2 with it");
    }
}

/// etcd TestDuelingCandidates (paper rules): two candidates of one term;
/// one wins, the other cannot (its log lacks the winner's no-op), but its
/// next campaign of a higher term makes everybody move to that term, and a
/// later election settles on a node holding every committed entry.
#[test]
fn dueling_candidates_settle_on_one_leader() {
    let (a, b, c) = (NodeId(0), NodeId(1), NodeId(2));
    let mut cluster = Cluster::new(3, 22, paper);
    cluster.blocked.insert((a, c));
    cluster.blocked.insert((c, a));
    cluster.campaign(a);
    cluster.campaign(c);
    assert_eq!(cluster.role(a), Role::Leader);
    assert_eq!(cluster.role(c), Role::Candidate, "b voted for a in term 1");
    cluster.heal();
    campaign_again(&mut cluster, c);
    for id in [a, b, c] {
        assert_eq!(cluster.role(id), Role::Follower, "{id}");
        assert_eq!(cluster.node(id).soft_state().term, Term(2), "{id}");
    }
    cluster.run_ticks(60);
    let leader = cluster.leader().expect("a leader");
    assert_ne!(leader, c, "c lacks a's no-op");
    cluster.settle(100);
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

/// etcd TestDuelingPreCandidates. Ours by default: with pre-vote and
/// check-quorum the loser of the duel never raises its term and the leader stays.
#[test]
fn with_pre_vote_a_dueling_candidate_leaves_the_leader_alone() {
    let (a, b, c) = (NodeId(0), NodeId(1), NodeId(2));
    let mut cluster = Cluster::new(3, 23, |_| {});
    cluster.blocked.insert((a, c));
    cluster.blocked.insert((c, a));
    cluster.campaign(a);
    cluster.campaign(c);
    assert_eq!(cluster.role(a), Role::Leader);
    // b's refusal told c the current term; c raised nothing.
    assert_eq!(cluster.role(c), Role::Follower, "c's pre-vote failed");
    assert_eq!(cluster.node(c).soft_state().term, Term(1));
    cluster.heal();
    cluster.run_ticks(30);
    assert_eq!(cluster.leader(), Some(a));
    for id in [a, b, c] {
        assert_eq!(cluster.node(id).soft_state().term, Term(1), "{id}");
    }
}

/// etcd TestSingleNodeCandidate, TestSingleNodeCommit: one node elects
/// itself at its first timeout and commits on its own durable copy.
#[test]
fn a_single_node_elects_itself_and_commits_alone() {
    let mut cluster = Cluster::new(1, 24, |_| {});
    cluster.campaign(NodeId(0));
    assert_eq!(cluster.role(NodeId(0)), Role::Leader);
    cluster.propose(NodeId(0));
    cluster.propose(NodeId(0));
    assert_eq!(cluster.node(NodeId(0)).commit_index(), LogIndex(3), "the no-op and two commands");
    assert_eq!(cluster.applied[0], LogIndex(3));
}

/// etcd TestOldMessages: an append of a deposed leader's term changes
/// nothing at the current leader, and the logs stay in agreement.
#[test]
fn an_append_from_a_deposed_leader_changes_nothing() {
    let (a, b) = (NodeId(0), NodeId(1));
    let mut cluster = Cluster::new(3, 25, paper);
    cluster.campaign(a);
    cluster.campaign(b);
    cluster.campaign(a);
    assert_eq!(cluster.role(a), Role::Leader);
    assert_eq!(cluster.node(a).soft_state().term, Term(3));
    let last = cluster.node(a).last_index().0;
    let entries_before = cluster.disks[0].entries.clone();
    // b's append of term 2, one entry after a's last.
    cluster.deliver(append(b.0, a.0, 2, (last, 1), &[(last + 1, 2)], last));
    assert_eq!(cluster.disks[0].entries, entries_before);
    assert_eq!(cluster.role(a), Role::Leader);
    cluster.propose(a);
    cluster.run_ticks(3);
    assert_eq!(cluster.disks[1].entries, cluster.disks[0].entries);
    assert_eq!(cluster.disks[2].entries, cluster.disks[0].entries);
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

/// etcd TestLeaderStepdownWhenQuorumLost, TestLeaderStepdownWhenQuorumActive:
/// with check-quorum, a leader that heard from no majority within an election
/// timeout steps down (keeping its term); one that did stays.
#[test]
fn with_check_quorum_a_leader_steps_down_only_when_it_lost_its_majority() {
    for answered in [false, true] {
        let mut node = leader_of(3, Disk::default(), |config| config.check_quorum = true);
        let term = node.soft_state().term;
        let ticks = node.config().election_ticks_min * 2 + 1;
        for _ in 0..ticks {
            node.tick();
            out(&mut node);
            if answered && node.soft_state().role == Role::Leader {
                node.step(ack(1, 0, term.0, node.last_index().0));
            }
        }
        let expected = if answered { Role::Leader } else { Role::Follower };
        assert_eq!(node.soft_state().role, expected, "answered: {answered}");
        assert_eq!(node.soft_state().term, term);
    }
}

/// etcd TestLeaderSupersedingWithCheckQuorum: with check-quorum, a node that
/// still heard from the leader recently refuses to take part in an election;
/// once its lease ran out, the election goes ahead.
#[test]
fn with_check_quorum_an_election_waits_for_the_leaders_lease_to_run_out() {
    let (a, b, c) = (NodeId(0), NodeId(1), NodeId(2));
    let mut cluster = Cluster::new(3, 26, |config| config.pre_vote = false);
    cluster.campaign(a);
    assert_eq!(cluster.role(a), Role::Leader);
    cluster.isolate(a);
    cluster.campaign(c);
    assert_eq!(cluster.role(c), Role::Candidate, "b ignored the request within its lease");
    assert_eq!(cluster.node(b).soft_state().term, Term(1));
    for _ in 0..cluster.configs[1].election_ticks_min {
        cluster.tick(b);
        cluster.queue.clear();
        if cluster.role(b) != Role::Follower {
            break;
        }
    }
    campaign_again(&mut cluster, c);
    assert_eq!(cluster.leader(), Some(c));
}

/// Ours (as etcd's inLease): without check-quorum nobody ignores a vote
/// request for the leader's sake, since the leader would never learn that it
/// lost its majority. Fails if the lease applies regardless of config.
#[test]
fn without_check_quorum_a_higher_term_is_heard_at_once() {
    let (a, b, c) = (NodeId(0), NodeId(1), NodeId(2));
    let mut cluster = Cluster::new(3, 27, paper);
    cluster.campaign(a);
    assert_eq!(cluster.role(a), Role::Leader);
    cluster.run_ticks(2);
    cluster.blocked.insert((a, c));
    cluster.blocked.insert((c, a));
    cluster.campaign(c);
    assert_eq!(cluster.leader(), Some(c), "b voted for c within a's lease");
    assert_eq!(cluster.node(b).soft_state().term, Term(2));
}

/// etcd TestFreeStuckCandidateWithCheckQuorum: a node cut off without
/// pre-vote raises its term; when it comes back, the leader learns the
/// higher term from its answer and steps down, and a node with the longer
/// log wins the next election.
#[test]
fn a_stuck_candidate_with_a_higher_term_comes_back_without_winning() {
    let (a, c) = (NodeId(0), NodeId(2));
    let mut cluster = Cluster::new(3, 28, |config| config.pre_vote = false);
    cluster.campaign(a);
    cluster.isolate(c);
    cluster.propose(a);
    cluster.run_ticks(3);
    for _ in 0..3 {
        campaign_again(&mut cluster, c);
    }
    let stuck_term = cluster.node(c).soft_state().term;
    assert!(stuck_term > Term(3));
    cluster.heal();
    cluster.run_ticks(80);
    let leader = cluster.leader().expect("a leader");
    assert_ne!(leader, c, "c lacks a committed entry");
    assert!(cluster.node(leader).soft_state().term > stuck_term);
    cluster.settle(100);
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

/// etcd TestPreVoteWithSplitVote: after the leader is cut off, both other
/// nodes pass pre-vote and split the vote; randomized timeouts then elect one.
#[test]
fn with_pre_vote_a_split_vote_is_followed_by_one_leader() {
    let a = NodeId(0);
    let mut cluster = Cluster::new(3, 29, |_| {});
    cluster.campaign(a);
    cluster.isolate(a);
    cluster.run_ticks(200);
    let leader = cluster.up().into_iter().find(|&id| id != a && cluster.role(id) == Role::Leader);
    assert!(leader.is_some(), "one of the other two leads");
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}
