//! What one segment of a key's operations leaves to the next.
//!
//! A key's history is judged in segments (`ops.rs` cuts them): a segment
//! ends where every operation sent so far is settled and the next is sent
//! after the last answer. No operation of a later segment can then take
//! effect before an answered one of an earlier segment, so a linearization
//! of the whole is one of each segment in turn — except for operations never
//! answered, which may take effect at any later time, or never.
//!
//! The search of a segment therefore collects every node at which all its
//! answered operations are placed (`search::search_from`), and the next
//! segment starts from each of them: a state of the specification, and the
//! unanswered operations still unplaced. This is exact, not an
//! approximation, and stays small because such nodes are normalized:
//!
//! - The next segment's operations are all sent at or after its first send
//!   `t`, and every answer it waits for comes later still, so a state's
//!   `now_us` below `t` is as good as `t` (every later step takes the
//!   maximum with a send at or after `t`), and an unanswered operation
//!   carried over may as well have been sent at `t`.
//! - Unanswered operations with the same effect are one class with a count
//!   (`Pending`): an acquire with a lease, a renewal of a token to an
//!   earliest end, a release or revoke of a token. A renewal or removal of a
//!   token below the highest one a client was told can never take effect
//!   again (a lock with a told token holds the highest one; an unknown lock
//!   may end by itself anyway), so it is dropped. A segment of `n`
//!   operations can use at most `n + 1` copies of a class (two copies placed
//!   with nothing between them act as one), so only that many are copied
//!   into its list.
//! - A node is dropped when another has the same state, an earlier or equal
//!   `now_us`, and at least as many of every class still to place: whatever
//!   follows the first may follow the second.

use super::ops::{Call, Op};
use super::search::{required, End, Start};
use super::spec::State;
use fencelock::Token;
use std::collections::BTreeMap;

/// The most nodes a segment may leave to the next; past it the key is unknown.
pub(crate) const NODES_MAX: usize = 4_096;

/// A class of unanswered operations with the same effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Pending {
    Acquire { lease_ms: u64 },
    Renew { token: Token, lease_end_min_us: u64 },
    Remove { token: Token },
}

impl Pending {
    /// The class of `op`, if it is an unanswered operation that may still take effect later.
    pub fn of(op: &Op) -> Option<Pending> {
        Pending::by_effect(op).filter(|_| op.resp_us == u64::MAX)
    }

    /// The class of an unanswered operation's effect, whatever its interval.
    pub fn by_effect(op: &Op) -> Option<Pending> {
        if required(op) {
            return None;
        }
        match op.call {
            Call::Acquire { lease_ms, .. } => Some(Pending::Acquire { lease_ms }),
            Call::Renew { token } => Some(Pending::Renew { token, lease_end_min_us: op.lease_end_min_us }),
            Call::Release { token } | Call::Revoke { token } => Some(Pending::Remove { token }),
            Call::Restore => None,
        }
    }

    /// Whether an operation of this class may still change a key whose
    /// highest told token is `token_last`.
    fn alive(&self, token_last: Option<Token>) -> bool {
        match self {
            Pending::Acquire { .. } => true,
            Pending::Renew { token, .. } | Pending::Remove { token } => token_last.is_none_or(|last| *token >= last),
        }
    }
}

/// A node a segment ends at: a normalized state and how many of each class are still unplaced.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    state: State,
    pending: BTreeMap<Pending, u64>,
}

impl Node {
    /// Whether whatever may follow `other` may follow `self`.
    fn covers(&self, other: &Node) -> bool {
        let mut state = self.state;
        state.now_us = other.state.now_us;
        state == other.state
            && self.state.now_us <= other.state.now_us
            && other.pending.iter().all(|(class, n)| self.pending.get(class).is_some_and(|m| m >= n))
    }
}

/// The nodes one segment of a key leaves to the next, with an operation of
/// each class to copy (its client and request name it in a window's table).
#[derive(Clone, Debug)]
pub(crate) struct Carry {
    nodes: Vec<Node>,
    examples: BTreeMap<Pending, Op>,
}

impl Carry {
    /// Before a key's first segment: one state, nothing pending.
    pub fn start(state: State) -> Carry {
        Carry { nodes: vec![Node { state, pending: BTreeMap::new() }], examples: BTreeMap::new() }
    }

    /// What is known after a segment that was not decided: any lock, any
    /// token, and every class ever pending still pending as often as it ever
    /// was (more than can be true: a later segment judged from it can show a
    /// violation, never pass one).
    pub fn anything(&self, at_us: u64, ops: &[Op]) -> Carry {
        let mut pending = self.most(u64::MAX);
        for class in ops.iter().filter_map(Pending::of) {
            *pending.entry(class).or_insert(0) += 1;
        }
        let node = Node { state: State::unknown(at_us), pending };
        Carry { nodes: vec![node], examples: self.examples_with(ops) }
    }

    /// The examples, with one for each class of `ops` that has none yet.
    fn examples_with(&self, ops: &[Op]) -> BTreeMap<Pending, Op> {
        let mut examples = self.examples.clone();
        for op in ops {
            if let Some(class) = Pending::of(op) {
                examples.entry(class).or_insert_with(|| op.clone());
            }
        }
        examples
    }

    /// For each class, the most any node has still to place, at most `cap`.
    fn most(&self, cap: u64) -> BTreeMap<Pending, u64> {
        let mut most: BTreeMap<Pending, u64> = BTreeMap::new();
        for node in &self.nodes {
            for (class, n) in &node.pending {
                let m = most.entry(*class).or_insert(0);
                *m = (*m).max((*n).min(cap));
            }
        }
        most
    }

    /// The operations a segment whose first send is at `t_us` starts with
    /// (copies of the carried classes, at most `uses` of each, sent at
    /// `t_us`) and its starts: each node, with the copies it no longer has
    /// placed already.
    pub fn copies(&self, t_us: u64, uses: u64) -> (Vec<Op>, Vec<Start>) {
        // Each class gets as many copies as any node has still to place, at most `uses`.
        let most = self.most(uses);
        let mut ops = Vec::new();
        let mut first: BTreeMap<Pending, usize> = BTreeMap::new();
        for (class, n) in &most {
            first.insert(*class, ops.len());
            let example = &self.examples[class];
            let lease_end_min_us = match class {
                Pending::Renew { lease_end_min_us, .. } => *lease_end_min_us,
                _ => 0,
            };
            let copy = Op {
                answer: None,
                inv_us: t_us,
                resp_us: u64::MAX,
                lease_end_min_us,
                queue_excuse: false,
                clock_excuse: false,
                ..example.clone()
            };
            ops.extend(std::iter::repeat_n(copy, *n as usize));
        }
        let starts = self
            .nodes
            .iter()
            .map(|node| {
                // The node's copies are the last of each class: the first ones count as placed.
                let placed = most
                    .iter()
                    .flat_map(|(class, n)| {
                        let has = node.pending.get(class).copied().unwrap_or(0).min(uses);
                        first[class]..first[class] + (n - has) as usize
                    })
                    .collect();
                Start { placed, state: node.state }
            })
            .collect();
        (ops, starts)
    }

    /// What a segment leaves to the next, whose first send is at `next_us`:
    /// the segment's list (`copies` carried copies first, then its own
    /// operations) and the nodes its search ended at. `None` if there are
    /// more than [`NODES_MAX`].
    pub fn after(&self, list: &[Op], copies: usize, uses: u64, ends: &[End], next_us: u64) -> Option<Carry> {
        let mut examples = self.examples_with(&list[copies..]);
        let copied = self.most(uses);
        let mut nodes: Vec<Node> = Vec::new();
        for end in ends {
            let node = self.node_after(list, &copied, uses, end, next_us);
            if nodes.iter().any(|kept| kept.covers(&node)) {
                continue;
            }
            nodes.retain(|kept| !node.covers(kept));
            nodes.push(node);
            if nodes.len() > NODES_MAX {
                return None;
            }
        }
        examples.retain(|class, _| nodes.iter().any(|node| node.pending.contains_key(class)));
        Some(Carry { nodes, examples })
    }

    /// One end of the search, normalized (see the module's text).
    /// `copied`: how many copies of each class the list starts with.
    fn node_after(&self, list: &[Op], copied: &BTreeMap<Pending, u64>, uses: u64, end: &End, next_us: u64) -> Node {
        let mut state = end.state;
        state.now_us = state.now_us.max(next_us);
        let mut pending: BTreeMap<Pending, u64> = BTreeMap::new();
        // The carried classes, in the order `copies` laid them out: the
        // copies left unplaced, and those the start had beyond the copies.
        let had = &self.nodes[end.start].pending;
        let mut start = 0;
        for (class, n) in copied {
            let n = *n as usize;
            let unplaced = (start..start + n).filter(|i| !end.placed[*i]).count() as u64;
            start += n;
            let uncopied = had.get(class).map_or(0, |n| n.saturating_sub(uses));
            *pending.entry(*class).or_insert(0) += unplaced + uncopied;
        }
        for (i, op) in list.iter().enumerate().skip(start) {
            if !end.placed[i] {
                if let Some(class) = Pending::of(op) {
                    *pending.entry(class).or_insert(0) += 1;
                }
            }
        }
        pending.retain(|class, n| *n > 0 && class.alive(state.token_last));
        Node { state, pending }
    }
}
