//! A set of log indices kept as maximal runs of consecutive indices, each
//! run with a value its lowest index came with. Indices are applied in
//! order, so a node's applies (or a cluster's first applies) stay a few runs
//! however long the run: a run's worth of memory, not a log's worth.

use fencelock::LogIndex;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub(crate) struct IndexRuns<V = ()> {
    /// Each run's first index, with its last index and its first index's value.
    runs: BTreeMap<LogIndex, (LogIndex, V)>,
}

impl<V> Default for IndexRuns<V> {
    fn default() -> Self {
        IndexRuns { runs: BTreeMap::new() }
    }
}

impl<V: Copy> IndexRuns<V> {
    /// Adds `index` with `value`; false (and the value it had kept) if it was there.
    pub fn insert(&mut self, index: LogIndex, value: V) -> bool {
        let below = self.runs.range(..=index).next_back().map(|(first, (last, v))| (*first, *last, *v));
        if below.is_some_and(|(_, last, _)| last >= index) {
            return false;
        }
        let next = LogIndex(index.0 + 1);
        let joins_below = below.filter(|(_, last, _)| last.0 + 1 == index.0);
        let above = self.runs.remove(&next).map(|(last, _)| last);
        match joins_below {
            // The run below grows up to this index, and takes the run above in.
            Some((first, _, first_value)) => self.runs.insert(first, (above.unwrap_or(index), first_value)),
            // A run starts here, the run above joined to it.
            None => self.runs.insert(index, (above.unwrap_or(index), value)),
        };
        true
    }

    pub fn contains(&self, index: LogIndex) -> bool {
        self.runs.range(..=index).next_back().is_some_and(|(_, (last, _))| *last >= index)
    }

    /// For an index not in the set: the first index above it that is, and
    /// the value of the run it starts.
    pub fn first_above(&self, index: LogIndex) -> Option<(LogIndex, V)> {
        debug_assert!(!self.contains(index));
        self.runs.range(LogIndex(index.0 + 1)..).next().map(|(first, (_, v))| (*first, *v))
    }

    pub fn clear(&mut self) {
        self.runs.clear();
    }

    #[cfg(test)]
    fn runs(&self) -> Vec<(u64, u64)> {
        self.runs.iter().map(|(first, (last, _))| (first.0, last.0)).collect()
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
