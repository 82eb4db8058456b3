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
//! The memo keeps a fingerprint of each (set, state) pair, not the pair:
//! the set has a bit per operation, so a key of 2,000 operations made every
//! entry a 256-byte allocation and the memo of one heavy seed the largest
//! thing a hunt ever held (8.7 MB of a 10 MB peak).
//!
//! The memo is a table of [`MEMO_SLOTS`] fingerprints (1 MiB), one per
//! thread, made once and lent to every search the thread runs: a hunt's
//! memory for it is the same after one seed as after a million. Its slots
//! come in buckets of eight; a new fingerprint goes to the front of its
//! bucket and the oldest one falls off the back. Forgetting a node costs
//! steps, never a result: the memo only prunes, and the step limit still
//! ends the search. Each search has its own epoch, written into the slots
//! it fills, so what an earlier search left is never found (and goes first
//! when a bucket is full): a search depends on its own operations alone,
//! whichever thread runs it and whatever it ran before. A memo made anew
//! per search instead grew with the heaviest key met so far, and a hunt's
//! peak with the seeds run (two jobs each holding a full one at once).
//!
//! A slot keeps 56 bits of a fingerprint and the bucket 14 more, so a new
//! node is taken for one already seen with odds under 2^-53 per lookup (8
//! slots compared): such a match would prune a branch never explored.

use super::carry::Pending;
use super::ops::{Call, Op};
use super::spec::{self, State};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// The search's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub ops_per_search_max: usize,
    pub steps_max: u64,
    /// The memo's size in fingerprints (rounded up to whole buckets).
    pub memo_slots: usize,
}

impl Limits {
    pub const STANDARD: Limits = Limits { ops_per_search_max: 4_096, steps_max: 200_000, memo_slots: MEMO_SLOTS };
}

/// The memo's fingerprints: 131,072 of 8 bytes, 1 MiB. Over
/// `hunt --seeds 0..20000` it leaves one key undecided, as the memo made
/// anew per search did (seed 11189's, 69 operations: about 700,000 steps
/// with a memo of 8 MiB, more than 50 million with this one); over
/// `--swarm` it too leaves one.
const MEMO_SLOTS: usize = 1 << 17;

thread_local! {
    /// The thread's memo, made on its first search of standard size.
    static MEMO: RefCell<Memo> = RefCell::new(Memo::new(MEMO_SLOTS));
}

/// A set of fingerprints of fixed size that forgets the oldest of a bucket
/// when it is full, and everything of earlier searches at once.
///
/// A slot holds the search's epoch in its top 8 bits and 56 bits of a
/// fingerprint below; the bucket is chosen by other bits of the
/// fingerprint. The empty slot is epoch 0, which no search uses; when the
/// epochs run out (every 255 searches) the table is emptied.
struct Memo {
    slots: Box<[u64]>,
    epoch: u8,
}

impl Memo {
    /// Slots per bucket: eight fingerprints, one 64-byte cache line.
    const WAYS: usize = 8;
    const TAG_BITS: u32 = 56;

    fn new(slots: usize) -> Memo {
        let slots = slots.next_multiple_of(Memo::WAYS).max(Memo::WAYS);
        Memo { slots: vec![0; slots].into_boxed_slice(), epoch: 0 }
    }

    /// Forgets every fingerprint: the next search's epoch.
    fn start(&mut self) {
        self.epoch = self.epoch.checked_add(1).unwrap_or_else(|| {
            self.slots.fill(0);
            1
        });
    }

    /// The first slot of `fingerprint`'s bucket, and the tag it is kept as.
    fn locate(&self, fingerprint: u128) -> (usize, u64) {
        let buckets = self.slots.len() / Memo::WAYS;
        let bucket = ((fingerprint >> 64) as usize % buckets) * Memo::WAYS;
        let tag = (u64::from(self.epoch) << Memo::TAG_BITS) | (fingerprint as u64 & ((1 << Memo::TAG_BITS) - 1));
        (bucket, tag)
    }

    /// Whether `fingerprint` is new in this search; it is remembered either way.
    fn insert(&mut self, fingerprint: u128) -> bool {
        let (bucket, tag) = self.locate(fingerprint);
        let ways = &mut self.slots[bucket..bucket + Memo::WAYS];
        if ways.contains(&tag) {
            return false;
        }
        ways.copy_within(..Memo::WAYS - 1, 1);
        ways[0] = tag;
        true
    }

    /// Whether `fingerprint` was remembered in this search (and not forgotten since).
    fn contains(&self, fingerprint: u128) -> bool {
        let (bucket, tag) = self.locate(fingerprint);
        self.slots[bucket..bucket + Memo::WAYS].contains(&tag)
    }

    /// Runs `f` with the thread's memo, or a memo of `slots` made for it
    /// when that is another size (a test's small one).
    fn with<R>(slots: usize, f: impl FnOnce(&mut Memo) -> R) -> R {
        if slots == MEMO_SLOTS {
            MEMO.with(|memo| {
                let mut memo = memo.borrow_mut();
                memo.start();
                f(&mut memo)
            })
        } else {
            let mut memo = Memo::new(slots);
            memo.start();
            f(&mut memo)
        }
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

    fn without(&self, i: usize) -> Bits {
        let mut bits = self.clone();
        bits.0[i / 64] &= !(1 << (i % 64));
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
    search_from(ops, &[Start { placed: Vec::new(), state: initial }], limits, false).0
}

/// A node the search starts from: a state, with some operations (carried
/// unanswered ones) already placed.
#[derive(Clone, Debug)]
pub(crate) struct Start {
    pub placed: Vec<usize>,
    pub state: State,
}

/// A node at which every required operation is placed: its state, and which
/// operations it placed.
#[derive(Clone, Debug)]
pub(crate) struct End {
    /// The start it was reached from (an index into the starts).
    pub start: usize,
    pub placed: Vec<bool>,
    pub state: State,
}

/// Searches from every one of `starts`. With `ends`, the search does not
/// stop at the first linearization: it goes on until it has every node at
/// which all required operations are placed (what a segment of a key leaves
/// to the next, `carry.rs`), and returns them (unexpanded: an unanswered
/// operation placed after them may as well be placed at the next segment's
/// start).
pub(crate) fn search_from(ops: &[Op], starts: &[Start], limits: Limits, ends: bool) -> (Search, Vec<End>) {
    if ops.len() > limits.ops_per_search_max {
        return (Search { found: Found::Unknown, steps: 0 }, Vec::new());
    }
    assert!(ops.windows(2).all(|w| w[0].inv_us <= w[1].inv_us), "operations sorted by first send");
    Memo::with(limits.memo_slots, |seen| explore(ops, starts, limits, ends, seen))
}

/// For each unanswered operation, the one before it in `ops` of the same
/// class (`carry::Pending`: the same effect, whoever sent it) that must take
/// effect by the same time. Of the two, only the earlier may be placed while
/// both are unplaced: it can take effect wherever the later one can, and at
/// a time no later.
fn same_class_before(ops: &[Op]) -> Vec<Option<usize>> {
    let mut last: BTreeMap<(Pending, u64), usize> = BTreeMap::new();
    ops.iter()
        .enumerate()
        .map(|(i, op)| Pending::by_effect(op).and_then(|class| last.insert((class, op.resp_us), i)))
        .collect()
}

/// The search itself, with a memo emptied for it.
fn explore(ops: &[Op], starts: &[Start], limits: Limits, collect: bool, seen: &mut Memo) -> (Search, Vec<End>) {
    let required_total = ops.iter().filter(|op| required(op)).count();
    let twin_before = same_class_before(ops);
    // Runs of copies of one class next to each other (what `carry.rs` lays
    // out first): placed from the front, so a run's placed ones are a prefix.
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for i in (1..ops.len()).filter(|i| twin_before[*i] == Some(i - 1)) {
        match runs.last_mut() {
            Some(run) if run.end == i => run.end = i + 1,
            _ => runs.push(i - 1..i + 1),
        }
    }
    // A node is as good as one seen already with an unanswered operation
    // fewer placed and the same state: whatever follows it may follow that
    // one (the operation may still take effect later, or never). Checked for
    // the operation just placed and for the last placed of each run.
    let dominated = |seen: &Memo, bits: &Bits, state: &State| {
        runs.iter().any(|run| {
            let placed = run.clone().take_while(|i| bits.has(*i)).count();
            placed > 0 && seen.contains(fingerprint(&bits.without(run.start + placed - 1), state))
        })
    };
    let mut stack: Vec<(Bits, State, usize, usize)> = starts
        .iter()
        .enumerate()
        .rev()
        .map(|(s, start)| {
            let bits = start.placed.iter().fold(Bits::new(ops.len()), |bits, i| bits.with(*i));
            (bits, start.state, start.placed.iter().filter(|i| required(&ops[**i])).count(), s)
        })
        .collect();
    let mut steps = 0u64;
    let mut nexts = Vec::new();
    let mut children = Vec::new();
    let mut ends = Vec::new();
    while let Some((bits, state, placed, start)) = stack.pop() {
        steps += 1;
        if placed == required_total {
            if !collect {
                return (Search { found: Found::Linearizable, steps }, ends);
            }
            ends.push(End { start, placed: (0..ops.len()).map(|i| bits.has(i)).collect(), state });
            continue;
        }
        if steps > limits.steps_max {
            return (Search { found: Found::Unknown, steps }, Vec::new());
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
                if twin_before[i].is_some_and(|j| !bits.has(j)) {
                    continue;
                }
                nexts.clear();
                spec::step(&state, op, bound_us, &mut nexts);
                for next in nexts.drain(..) {
                    if !pass_required && seen.contains(fingerprint(&bits, &next)) {
                        continue;
                    }
                    let next_bits = bits.with(i);
                    if dominated(seen, &next_bits, &next) {
                        continue;
                    }
                    if seen.insert(fingerprint(&next_bits, &next)) {
                        children.push((next_bits, next, placed + usize::from(pass_required), start));
                    }
                }
            }
        }
        stack.extend(children.drain(..).rev());
    }
    let found = if ends.is_empty() { Found::NoLinearization } else { Found::Linearizable };
    (Search { found, steps }, ends)
}

#[cfg(test)]
mod tests {
    use super::Memo;

    /// The `n`th fingerprint of bucket 0 of a two-bucket memo.
    fn in_bucket_0(n: u128) -> u128 {
        (n * 2) << 64 | n
    }

    #[test]
    fn the_memo_answers_like_a_set_until_a_bucket_overflows_then_forgets_its_oldest() {
        let mut memo = Memo::new(2 * Memo::WAYS);
        memo.start();
        for n in 0..Memo::WAYS as u128 {
            assert!(memo.insert(in_bucket_0(n)), "new");
            assert!(!memo.insert(in_bucket_0(n)), "seen");
        }
        assert!(memo.insert(in_bucket_0(99)), "one more in a full bucket");
        assert!(!memo.insert(in_bucket_0(1)), "the newer ones stay");
        assert!(memo.insert(in_bucket_0(0)), "the oldest fell off");
    }

    #[test]
    fn a_new_search_finds_nothing_of_the_last_even_when_the_epochs_run_out() {
        let mut memo = Memo::new(16);
        memo.start();
        assert!(memo.insert(7));
        memo.start();
        assert!(memo.insert(7), "forgotten by the next search");
        assert!(!memo.insert(7));
        memo.epoch = u8::MAX;
        memo.start();
        assert_eq!(memo.epoch, 1, "epoch 0 marks an empty slot");
        assert!(memo.insert(7), "the table was emptied, not only the epoch turned");
        assert!(memo.insert(0) && !memo.insert(0), "a zero fingerprint is not an empty slot");
    }
}
