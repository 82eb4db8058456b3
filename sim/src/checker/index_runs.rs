//! A set of log indices (or tokens) kept as maximal runs of consecutive
//! ones, each run with a value its lowest index came with. Indices are
//! applied in order, and the service hands out tokens in order, so a node's
//! applies (or a cluster's first applies, or the tokens it issued) stay a few
//! runs however long the run: a run's worth of memory, not a log's worth.

use fencelock::{LogIndex, Term, Token};
use std::collections::BTreeMap;

/// A place counted in steps of one: a log index or a token.
pub(crate) trait Step: Copy + Ord {
    fn number(self) -> u64;
    fn at(number: u64) -> Self;
}

impl Step for LogIndex {
    fn number(self) -> u64 {
        self.0
    }
    fn at(number: u64) -> Self {
        LogIndex(number)
    }
}

impl Step for Token {
    fn number(self) -> u64 {
        self.0
    }
    fn at(number: u64) -> Self {
        Token(number)
    }
}

impl Step for u64 {
    fn number(self) -> u64 {
        self
    }
    fn at(number: u64) -> Self {
        number
    }
}

impl Step for Term {
    fn number(self) -> u64 {
        self.0
    }
    fn at(number: u64) -> Self {
        Term(number)
    }
}

/// A set of tokens, as runs.
pub(crate) type TokenRuns = IndexRuns<(), Token>;

#[derive(Clone, Debug)]
pub(crate) struct IndexRuns<V = (), I = LogIndex> {
    /// Each run's first index, with its last index and its first index's value.
    runs: BTreeMap<I, (I, V)>,
}

impl<V, I> Default for IndexRuns<V, I> {
    fn default() -> Self {
        IndexRuns { runs: BTreeMap::new() }
    }
}

impl<V: Copy, I: Step> IndexRuns<V, I> {
    /// Adds `index` with `value`; false (and the value it had kept) if it was there.
    pub fn insert(&mut self, index: I, value: V) -> bool {
        let below = self.runs.range(..=index).next_back().map(|(first, (last, v))| (*first, *last, *v));
        if below.is_some_and(|(_, last, _)| last >= index) {
            return false;
        }
        let next = index.number().checked_add(1).map(I::at);
        let joins_below = below.filter(|(_, last, _)| last.number().checked_add(1) == Some(index.number()));
        let above = next.and_then(|next| self.runs.remove(&next)).map(|(last, _)| last);
        match joins_below {
            // The run below grows up to this index, and takes the run above in.
            Some((first, _, first_value)) => self.runs.insert(first, (above.unwrap_or(index), first_value)),
            // A run starts here, the run above joined to it.
            None => self.runs.insert(index, (above.unwrap_or(index), value)),
        };
        true
    }

    pub fn contains(&self, index: I) -> bool {
        self.runs.range(..=index).next_back().is_some_and(|(_, (last, _))| *last >= index)
    }

    /// For an index not in the set: the first index above it that is, and
    /// the value of the run it starts.
    pub fn first_above(&self, index: I) -> Option<(I, V)> {
        debug_assert!(!self.contains(index));
        let next = I::at(index.number().checked_add(1)?);
        self.runs.range(next..).next().map(|(first, (_, v))| (*first, *v))
    }

    pub fn clear(&mut self) {
        self.runs.clear();
    }

    /// How many runs the set is kept as: its memory.
    #[cfg(test)]
    pub fn runs_len(&self) -> usize {
        self.runs.len()
    }

    #[cfg(test)]
    fn runs(&self) -> Vec<(u64, u64)> {
        self.runs.iter().map(|(first, (last, _))| (first.number(), last.number())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::IndexRuns;
    use fencelock::LogIndex;

    #[test]
    fn index_runs_hold_what_was_inserted_as_few_runs() {
        let mut set = IndexRuns::default();
        // In order with a gap at 4 (a no-op), then the gap's neighbours out of order.
        for i in [1, 2, 3, 5, 6, 9, 7] {
            assert!(set.insert(LogIndex(i), ()), "{i} is new");
        }
        for i in [1, 3, 5, 6, 7, 9] {
            assert!(!set.insert(LogIndex(i), ()), "{i} was there");
        }
        assert_eq!(set.runs(), [(1, 3), (5, 7), (9, 9)]);
        assert!(set.insert(LogIndex(8), ()) && set.insert(LogIndex(4), ()));
        assert_eq!(set.runs(), [(1, 9)]);
    }
}
