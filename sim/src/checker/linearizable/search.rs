//! The search for a linearization of one key's operations: Wing & Gong's
//! depth-first search with Lowe's memoization, the way Porcupine runs it.
//!
//! A node of the search is the set of operations placed so far and the
//! specification's state after them. From a node, any operation not yet
//! placed whose first send is no later than the earliest answer among the
//! required operations not yet placed may go next (one that started later
//! cannot precede that answer). A (set, state) pair seen before is never
//! explored again: whatever it leads to was already tried. The search
//! succeeds when every required operation is placed: every answered one and
//! every restore. An unanswered operation is placed only with its effect;
//! leaving it out is the "no effect" case.
//!
//! Both the operations per key and the nodes explored are bounded; hitting a
//! bound is an `Unknown` outcome, counted by the caller, never a pass.
//!
//! The memo keeps a 128-bit fingerprint of each (set, state) pair, not the
//! pair: the set has a bit per operation, so a key of 2,000 operations made
//! every entry a 256-byte allocation and the memo of one heavy seed the
//! largest thing a hunt ever held (8.7 MB of a 10 MB peak). Two pairs
//! sharing a fingerprint (odds about n²/2^129 for n entries, below 10^-26
//! within the step limit) would prune a branch never explored.
//!
//! The memo holds at most [`MEMO_MAX`] fingerprints, in two generations of
//! half that (two tables of about 1 MB): when the young one fills, the old
//! one is dropped. Forgetting a node costs steps, never a result: the memo
//! only prunes, and the step limit still ends the search. Unbounded, the
//! memo of the heaviest key met set a hunt's peak (3.3 of a 3.9 MB heap
//! peak over 6,000 seeds) and grew with the seeds run. Every search of
//! `hunt --seeds 0..20000` takes the same steps with the cap; the heaviest
//! of `hunt --swarm --seeds 0..2000` 147,910 instead of 121,284 (emptying a
//! single full table instead cost it the step limit).

use super::ops::{Call, Op};
use super::spec::{self, State};
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

/// The search's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub ops_per_key_max: usize,
    pub steps_max: u64,
    /// The most fingerprints the memo holds at once.
    pub memo_max: usize,
}

impl Limits {
    pub const STANDARD: Limits = Limits { ops_per_key_max: 4_096, steps_max: 200_000, memo_max: MEMO_MAX };
}

/// The most fingerprints the memo holds: two generations of 57,344, 7/8 of
/// a 65,536-slot table, the load at which the standard `HashSet` doubles it.
pub(crate) const MEMO_MAX: usize = 114_688;

/// A set of fingerprints that never holds more than `max`, in two
/// generations of `max / 2`: when the young one fills, the old one is
/// dropped and the young one takes its place. Below `max / 2` it is an
/// exact set; past that it always remembers the latest `max / 2` or more.
struct Memo {
    young: HashSet<u128>,
    old: HashSet<u128>,
    half: usize,
}

impl Memo {
    fn new(max: usize) -> Memo {
        Memo { young: HashSet::new(), old: HashSet::new(), half: (max / 2).max(1) }
    }

    /// Whether `fingerprint` is new; it is remembered either way.
    fn insert(&mut self, fingerprint: u128) -> bool {
        if self.old.contains(&fingerprint) || self.young.contains(&fingerprint) {
            return false;
        }
        if self.young.len() >= self.half {
            std::mem::swap(&mut self.young, &mut self.old);
            self.young.clear();
        }
        self.young.insert(fingerprint)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    Linearizable,
    NoLinearization,
    /// A limit was hit first; the history is neither passed nor failed.
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Search {
    pub found: Found,
    /// Search nodes explored.
    pub steps: u64,
}

/// Whether the search must place `op` (an answered operation or a restore).
pub(crate) fn required(op: &Op) -> bool {
    op.answered() || op.call == Call::Restore
}

/// Fixed-size set of operation indices.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }

    fn has(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }

    fn with(&self, i: usize) -> Bits {
        let mut bits = self.clone();
        bits.0[i / 64] |= 1 << (i % 64);
        bits
    }
}

/// The memo's key for a node: two 64-bit SipHashes with fixed keys
/// (`DefaultHasher::new`), told apart by a leading byte.
fn fingerprint(bits: &Bits, state: &State) -> u128 {
    let half = |salt: u8| {
        let mut hasher = DefaultHasher::new();
        salt.hash(&mut hasher);
        bits.hash(&mut hasher);
        state.hash(&mut hasher);
        hasher.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

/// Searches for a linearization of `ops` (sorted by first send) from `initial`.
pub(crate) fn search(ops: &[Op], initial: State, limits: Limits) -> Search {
    if ops.len() > limits.ops_per_key_max {
        return Search { found: Found::Unknown, steps: 0 };
    }
    assert!(ops.windows(2).all(|w| w[0].inv_us <= w[1].inv_us), "operations sorted by first send");
    let required_total = ops.iter().filter(|op| required(op)).count();
    // Membership only, never iterated: the order of the search does not depend on it.
    let mut seen = Memo::new(limits.memo_max);
    let mut stack = vec![(Bits::new(ops.len()), initial, 0usize)];
    let mut steps = 0u64;
    let mut nexts = Vec::new();
    let mut children = Vec::new();
    while let Some((bits, state, placed)) = stack.pop() {
        steps += 1;
        if placed == required_total {
            return Search { found: Found::Linearizable, steps };
        }
        if steps > limits.steps_max {
            return Search { found: Found::Unknown, steps };
        }
        let bound_us = ops
            .iter()
            .enumerate()
            .filter(|(i, op)| !bits.has(*i) && required(op))
            .map(|(_, op)| op.resp_us)
            .min()
            .expect("a required operation is left");
        children.clear();
        // Required operations first, then the effects of unanswered ones:
        // a clean history then linearizes without backtracking.
        for pass_required in [true, false] {
            for (i, op) in ops.iter().enumerate() {
                if op.inv_us > bound_us {
                    break;
                }
                if bits.has(i) || required(op) != pass_required {
                    continue;
                }
                nexts.clear();
                spec::step(&state, op, i as u32, bound_us, &mut nexts);
                for next in nexts.drain(..) {
                    let next_bits = bits.with(i);
                    if seen.insert(fingerprint(&next_bits, &next)) {
                        children.push((next_bits, next, placed + usize::from(pass_required)));
                    }
                }
            }
        }
        stack.extend(children.drain(..).rev());
    }
    Search { found: Found::NoLinearization, steps }
}

#[cfg(test)]
mod tests {
    use super::Memo;

    #[test]
    fn the_memo_never_holds_more_than_its_max_and_answers_like_a_set_below_it() {
        let mut memo = Memo::new(16);
        for fingerprint in 0..16 {
            assert!(memo.insert(fingerprint), "new");
            assert!(!memo.insert(fingerprint), "seen");
        }
        for fingerprint in 16..1_000 {
            assert!(memo.insert(fingerprint));
            assert!(memo.len() <= 16);
        }
        assert!(memo.insert(0), "forgotten once the memo filled");
    }
}
