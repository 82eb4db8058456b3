//! A queue kept in key order: what the net holds for one receiver, by
//! (delivery instant, send order), and the instants its timers are set for.
//!
//! Every message goes into an inbox and out of it again, and the receiver
//! always takes the earliest. A `BTreeMap` did that for a few per cent of
//! a run's instructions (an insert, a search and a node rebalanced on each
//! removal). The keys come in nearly in order (latency varies a little, and
//! a FIFO link never goes back), so a ring buffer in key order takes a key
//! at or near its back and hands out its front. A key that belongs earlier
//! (reordering, a held link, the instants of timers, each earlier than the
//! last) goes in after a binary search, and the ring moves its shorter side.

use std::collections::VecDeque;

#[derive(Debug)]
pub(super) struct SortedQueue<K, V> {
    items: VecDeque<(K, V)>,
}

impl<K, V> Default for SortedQueue<K, V> {
    fn default() -> SortedQueue<K, V> {
        SortedQueue { items: VecDeque::new() }
    }
}

impl<K: Ord + Copy, V> SortedQueue<K, V> {
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// Puts `value` at `key`, returning what was there (as a map does).
    pub(super) fn insert(&mut self, key: K, value: V) -> Option<V> {
        if self.items.back().is_none_or(|(last, _)| *last < key) {
            self.items.push_back((key, value));
            return None;
        }
        let at = self.items.partition_point(|(k, _)| *k < key);
        match self.items.get_mut(at) {
            Some((k, v)) if *k == key => Some(std::mem::replace(v, value)),
            _ => {
                self.items.insert(at, (key, value));
                None
            }
        }
    }

    /// The earliest key.
    pub(super) fn first_key(&self) -> Option<K> {
        self.items.front().map(|(k, _)| *k)
    }

    /// Takes the earliest entry out if `due` says its key is due.
    pub(super) fn pop_first_if(&mut self, due: impl FnOnce(K) -> bool) -> Option<(K, V)> {
        if due(self.first_key()?) {
            self.items.pop_front()
        } else {
            None
        }
    }

    pub(super) fn clear(&mut self) {
        self.items.clear();
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (K, &V)> {
        self.items.iter().map(|(k, v)| (*k, v))
    }

    /// Keeps the entries `keep` says yes to, in order.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(K, &V) -> bool) {
        self.items.retain(|(k, v)| keep(*k, v));
    }

    /// Takes out the entries `take` says yes to, in order (asking once of each).
    pub(super) fn take_where(&mut self, mut take: impl FnMut(K, &V) -> bool) -> Vec<(K, V)> {
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(self.items.len());
        for (key, value) in std::mem::take(&mut self.items) {
            if take(key, &value) {
                taken.push((key, value));
            } else {
                kept.push_back((key, value));
            }
        }
        self.items = kept;
        taken
    }

    /// Splits off the entries at `key` and after, as `BTreeMap::split_off`.
    pub(super) fn split_off(&mut self, key: K) -> SortedQueue<K, V> {
        let at = self.items.partition_point(|(k, _)| *k < key);
        SortedQueue { items: self.items.split_off(at) }
    }

    /// Adds every entry of `other`.
    pub(super) fn extend(&mut self, other: impl IntoIterator<Item = (K, V)>) {
        for (key, value) in other {
            self.insert(key, value);
        }
    }
}

impl<K, V> IntoIterator for SortedQueue<K, V> {
    type Item = (K, V);
    type IntoIter = std::collections::vec_deque::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::SortedQueue;
    use std::collections::BTreeMap;

    fn same(queue: &SortedQueue<(u64, u64), u32>, map: &BTreeMap<(u64, u64), u32>) {
        assert!(queue.iter().map(|(k, v)| (k, *v)).eq(map.iter().map(|(k, v)| (*k, *v))));
        assert_eq!(queue.len(), map.len());
        assert_eq!(queue.first_key(), map.keys().next().copied());
    }

    /// The queue answers as a `BTreeMap` would through inserts (mostly at
    /// the back, some before, some on a key it holds), removals of the
    /// earliest, splits, merges and filters.
    #[test]
    fn a_sorted_queue_is_an_ordered_map() {
        let mut queue = SortedQueue::default();
        let mut map = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut now = 0;
        for step in 0..5_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            now += x % 3;
            let key = (now + (x >> 8) % 40, (x >> 16) % 8);
            match (x >> 24) % 16 {
                0..=8 => assert_eq!(queue.insert(key, step), map.insert(key, step)),
                9..=12 => {
                    let due = |k: (u64, u64)| k.0 <= now;
                    let expected = map.first_entry().filter(|e| due(*e.key())).map(|e| e.remove_entry());
                    assert_eq!(queue.pop_first_if(due), expected);
                }
                13 => {
                    let at = (now + 10, 0);
                    let (mut tail, mut map_tail) = (queue.split_off(at), map.split_off(&at));
                    same(&tail, &map_tail);
                    same(&queue, &map);
                    if step % 2 == 0 {
                        queue.extend(tail);
                        map.append(&mut map_tail);
                    } else {
                        tail.extend(std::mem::take(&mut queue));
                        queue = tail;
                        map_tail.append(&mut map);
                        map = map_tail;
                    }
                }
                14 => {
                    let odd = |k: (u64, u64), v: &u32| (k.1 + u64::from(*v)) % 5 == 1;
                    let taken = queue.take_where(odd);
                    let mut expected = Vec::new();
                    map.retain(|k, v| {
                        let take = odd(*k, v);
                        if take {
                            expected.push((*k, *v));
                        }
                        !take
                    });
                    assert_eq!(taken, expected);
                }
                _ => {
                    queue.retain(|k, _| k.1 != x % 8);
                    map.retain(|k, _| k.1 != x % 8);
                }
            }
            same(&queue, &map);
        }
        assert_ne!(queue.len(), 0);
        queue.clear();
        assert_eq!(queue.len(), 0);
    }
}
