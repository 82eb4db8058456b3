//! A map packed: the records a violation may name at any later time, kept
//! whole for the run (every token's first issue, a client's clock mappings),
//! or the newest of them (the tellers of the newest tokens, the first entry
//! of each log index some server may still apply).
//!
//! Their keys come nearly in order (the service hands tokens out one after
//! another; operations are numbered as they are sent) and their fields are
//! small numbers or close to the record's before (a key or client number, an
//! instant), so the records are kept as blocks of `BLOCK_RECORDS`, each a byte
//! string of LEB128 differences: ten-odd bytes a record where a map entry took
//! seventy or more. Only the newest records are kept unpacked, until they
//! fill a block. A map that needs only the newest records (a repeated
//! token's first teller, the first entries) drops whole blocks below a
//! bound as it goes.

use super::index_runs::Step;
use std::collections::BTreeMap;
use std::ops::Bound;

/// A record a [`PackedMap`] can hold: written as numbers, each as a
/// difference from the record before it in the block where that is small.
pub(crate) trait Pack: Copy + Default {
    fn pack(&self, before: &Self, bytes: &mut Vec<u8>);
    fn unpack(before: &Self, bytes: &[u8], at: &mut usize) -> Self;
}

/// The records a block packs.
const BLOCK_RECORDS: usize = 64;

#[derive(Debug)]
pub(crate) struct PackedMap<K, V> {
    /// Packed blocks by their lowest key, in key order: every key of a
    /// block is below the next block's lowest and below every open record.
    sealed: BTreeMap<K, Box<[u8]>>,
    /// The highest key in a packed block.
    sealed_max: Option<K>,
    /// The newest records, fewer than a block, in key order: one buffer
    /// for the map's whole life, where a tree would allocate and free its
    /// nodes with every block.
    open: Vec<(K, V)>,
    /// Records held.
    len: usize,
}

impl<K, V> Default for PackedMap<K, V> {
    fn default() -> Self {
        PackedMap { sealed: BTreeMap::new(), sealed_max: None, open: Vec::new(), len: 0 }
    }
}

impl<K: Step, V: Pack> PackedMap<K, V> {
    pub fn get(&self, key: K) -> Option<V> {
        if let Some(place) = self.open_place(key) {
            return Some(self.open[place].1);
        }
        if self.sealed_max.is_none_or(|max| key > max) {
            return None;
        }
        let (_, block) = self.sealed.range(..=key).next_back()?;
        unpack::<K, V>(block).find(|(k, _)| *k == key).map(|(_, value)| value)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Records `value` under `key`; false (and the first kept) if it had one.
    pub fn insert(&mut self, key: K, value: V) -> bool {
        if self.get(key).is_some() {
            return false;
        }
        self.len += 1;
        match self.sealed_max {
            // Below a packed key (a late answer, a faulty service's lower
            // token): it joins the block whose range it falls in.
            Some(max) if key < max => {
                let first = match self.sealed.range(..=key).next_back() {
                    Some((first, _)) => *first,
                    None => *self.sealed.keys().next().expect("a packed key has a block"),
                };
                let block = self.sealed.remove(&first).expect("the block just found");
                let mut records: Vec<(K, V)> = unpack(&block).collect();
                let place = records.partition_point(|(k, _)| *k < key);
                records.insert(place, (key, value));
                // A block that late records have doubled is split, so each
                // late insert costs one block of bounded size.
                if records.len() > 2 * BLOCK_RECORDS {
                    let upper = records.split_off(records.len() / 2);
                    self.sealed.insert(upper[0].0, pack(upper));
                }
                self.sealed.insert(records[0].0, pack(records));
            }
            _ => {
                let place = self.open.partition_point(|(k, _)| *k < key);
                self.open.insert(place, (key, value));
                if self.open.len() >= BLOCK_RECORDS {
                    self.sealed_max = self.open.last().map(|(key, _)| *key);
                    self.sealed.insert(self.open[0].0, pack(self.open.iter().copied()));
                    self.open.clear();
                }
            }
        }
        true
    }

    /// Records `value` under `key`, in place of the one it had, if any.
    pub fn set(&mut self, key: K, value: V) {
        if let Some(place) = self.open_place(key) {
            self.open[place].1 = value;
            return;
        }
        if self.insert(key, value) {
            return;
        }
        // In a packed block: the block is packed again with the new record.
        let (first, block) = self.sealed.range(..=key).next_back().expect("a packed key has its block");
        let repacked = pack(unpack::<K, V>(block).map(|(k, v)| (k, if k == key { value } else { v })));
        let first = *first;
        self.sealed.insert(first, repacked);
    }

    /// The lowest key at or above `from`.
    pub fn first_from(&self, from: K) -> Option<K> {
        if self.sealed_max.is_some_and(|max| from <= max) {
            // The block whose range `from` falls in, else the next block's lowest.
            let within = self.sealed.range(..=from).next_back();
            let found = within.and_then(|(_, block)| unpack::<K, V>(block).map(|(k, _)| k).find(|k| *k >= from));
            let next = || self.sealed.range((Bound::Excluded(from), Bound::Unbounded)).next().map(|(k, _)| *k);
            if let Some(key) = found.or_else(next) {
                return Some(key);
            }
        }
        let place = self.open.partition_point(|(k, _)| *k < from);
        self.open.get(place).map(|(key, _)| *key)
    }

    /// Where `key` is among the open records, if it is.
    fn open_place(&self, key: K) -> Option<usize> {
        self.open.binary_search_by_key(&key, |(k, _)| *k).ok()
    }

    /// Forgets the packed blocks whose keys are all below `bound`: what a
    /// map of the newest records drops as it goes. The unpacked records and
    /// the block `bound` falls in stay.
    pub fn forget_below(&mut self, bound: K) {
        while let Some((&first, _)) = self.sealed.first_key_value() {
            // A block's keys are below the next block's lowest, the last block's at most `sealed_max`.
            let next = self.sealed.range((Bound::Excluded(first), Bound::Unbounded)).next().map(|(key, _)| *key);
            let all_below = match next {
                Some(next) => next <= bound,
                None => self.sealed_max.is_some_and(|max| max < bound),
            };
            if !all_below {
                return;
            }
            let block = self.sealed.remove(&first).expect("the first block");
            self.len -= unpack::<K, V>(&block).count();
            if self.sealed.is_empty() {
                self.sealed_max = None;
            }
        }
    }

    /// Every record, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (K, V)> + '_ {
        let packed = self.sealed.values().flat_map(|block| unpack(block));
        packed.chain(self.open.iter().map(|(key, value)| (*key, *value)))
    }

    /// The records kept unpacked and the bytes of the packed ones: the map's memory.
    #[cfg(test)]
    pub fn held(&self) -> (usize, usize) {
        (self.open.len(), self.sealed.values().map(|block| block.len()).sum())
    }

    /// The most records a packed block holds.
    #[cfg(test)]
    fn largest_block(&self) -> usize {
        self.sealed.values().map(|block| unpack::<K, V>(block).count()).max().unwrap_or(0)
    }
}

/// A packed list: records numbered in the order told.
impl<V: Pack> PackedMap<u64, V> {
    /// Appends `value` under the number after the highest held (0 for the first).
    pub fn push(&mut self, value: V) {
        let last = self.open.last().map(|(number, _)| *number).or(self.sealed_max);
        let appended = self.insert(last.map_or(0, |number| number + 1), value);
        assert!(appended, "a number above every one held is free");
    }
}

/// The records' block, allocated at its length: packed in a buffer kept for
/// the thread, as a block packed in a buffer of its own would leave the
/// buffer's spare end, or the buffer, as a hole beside the kept block.
fn pack<K: Step, V: Pack>(records: impl IntoIterator<Item = (K, V)>) -> Box<[u8]> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    SCRATCH.with_borrow_mut(|bytes| {
        bytes.clear();
        let (mut key_last, mut value_last) = (0, V::default());
        for (key, value) in records {
            put(bytes, key.number() - key_last);
            value.pack(&value_last, bytes);
            (key_last, value_last) = (key.number(), value);
        }
        Box::from(&bytes[..])
    })
}

fn unpack<K: Step, V: Pack>(bytes: &[u8]) -> impl Iterator<Item = (K, V)> + use<'_, K, V> {
    let mut at = 0;
    let (mut key_last, mut value_last) = (0, V::default());
    std::iter::from_fn(move || {
        if at == bytes.len() {
            return None;
        }
        let key = key_last + take(bytes, &mut at);
        let value = V::unpack(&value_last, bytes, &mut at);
        (key_last, value_last) = (key, value);
        Some((K::at(key), value))
    })
}

/// A set: keys alone.
impl Pack for () {
    fn pack(&self, _before: &Self, _bytes: &mut Vec<u8>) {}
    fn unpack(_before: &Self, _bytes: &[u8], _at: &mut usize) -> Self {}
}

/// A server: one byte.
impl Pack for fencelock::NodeId {
    fn pack(&self, _before: &Self, bytes: &mut Vec<u8>) {
        put(bytes, u64::from(self.0));
    }
    fn unpack(_before: &Self, bytes: &[u8], at: &mut usize) -> Self {
        fencelock::NodeId(u8::try_from(take(bytes, at)).expect("a packed node"))
    }
}

/// A client: a small number.
impl Pack for fencelock::ClientId {
    fn pack(&self, _before: &Self, bytes: &mut Vec<u8>) {
        put(bytes, u64::from(self.0));
    }
    fn unpack(_before: &Self, bytes: &[u8], at: &mut usize) -> Self {
        fencelock::ClientId(take_u32(bytes, at))
    }
}

/// A flag: one byte.
impl Pack for bool {
    fn pack(&self, _before: &Self, bytes: &mut Vec<u8>) {
        put(bytes, u64::from(*self));
    }
    fn unpack(_before: &Self, bytes: &[u8], at: &mut usize) -> Self {
        take(bytes, at) == 1
    }
}

/// A place in the history (an event's `seq`), close to the one before.
impl Pack for u64 {
    fn pack(&self, before: &Self, bytes: &mut Vec<u8>) {
        put_change(bytes, *self, *before);
    }
    fn unpack(before: &Self, bytes: &[u8], at: &mut usize) -> Self {
        take_change(bytes, at, *before)
    }
}

/// Appends `value` in LEB128.
pub(crate) fn put(bytes: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        bytes.push((value as u8) | 0x80);
        value >>= 7;
    }
    bytes.push(value as u8);
}

/// Reads a LEB128 number at `at`, and moves past it.
pub(crate) fn take(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0;
    let mut shift = 0;
    loop {
        let byte = bytes[*at];
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return value;
        }
        shift += 7;
    }
}

/// Appends `value - before` (which may be negative) in LEB128, zigzagged.
pub(crate) fn put_change(bytes: &mut Vec<u8>, value: u64, before: u64) {
    let change = value.wrapping_sub(before) as i64;
    put(bytes, ((change << 1) ^ (change >> 63)) as u64);
}

/// Reads what `put_change` wrote: the value, given the one before.
pub(crate) fn take_change(bytes: &[u8], at: &mut usize, before: u64) -> u64 {
    let zigzag = take(bytes, at);
    let change = ((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64);
    before.wrapping_add(change as u64)
}

/// A number packed small, that must fit `u32` again.
pub(crate) fn take_u32(bytes: &[u8], at: &mut usize) -> u32 {
    u32::try_from(take(bytes, at)).expect("a packed u32")
}

#[cfg(test)]
mod tests {
    use super::{put, put_change, take, take_change, take_u32, Pack, PackedMap, BLOCK_RECORDS};
    use fencelock::Token;
    use std::collections::BTreeMap;

    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    struct Record {
        small: u32,
        large: u64,
        at_us: u64,
    }

    impl Pack for Record {
        fn pack(&self, before: &Self, bytes: &mut Vec<u8>) {
            put(bytes, u64::from(self.small));
            put(bytes, self.large);
            put_change(bytes, self.at_us, before.at_us);
        }
        fn unpack(before: &Self, bytes: &[u8], at: &mut usize) -> Self {
            Record { small: take_u32(bytes, at), large: take(bytes, at), at_us: take_change(bytes, at, before.at_us) }
        }
    }

    fn record(n: u64) -> Record {
        // Instants mostly rising, sometimes back; a large field now and then.
        let at_us = 1_000_000 + n * 123_457 - (n % 3) * 200_000;
        Record { small: (n % 7) as u32, large: if n.is_multiple_of(13) { u64::MAX - n } else { n * 3 }, at_us }
    }

    #[test]
    fn every_record_is_found_again_in_order_and_out_of_order() {
        let (mut map, mut every) = (PackedMap::default(), BTreeMap::new());
        // Mostly in order, some keys skipped, then keys below the packed
        // ones (below the first, inside a block, between blocks) and repeats.
        let keys = (1..2_000).filter(|t| t % 11 != 0).chain([0, 55, 33, 1_100, 1_999, 5, 77, u64::MAX]);
        for (n, key) in keys.enumerate() {
            let first = !every.contains_key(&key);
            let value = record(n as u64 * 7 % 1_013);
            assert_eq!(map.insert(Token(key), value), first, "key {key}");
            every.entry(key).or_insert(value);
        }
        for key in (0..2_100).chain([u64::MAX]) {
            assert_eq!(map.get(Token(key)), every.get(&key).copied(), "key {key}");
            let from = every.range(key..).next().map(|(k, _)| Token(*k));
            assert_eq!(map.first_from(Token(key)), from, "from {key}");
        }
        let all: Vec<(Token, Record)> = every.iter().map(|(k, v)| (Token(*k), *v)).collect();
        assert_eq!(map.iter().collect::<Vec<_>>(), all);
        assert_eq!(map.len(), every.len());
        // Records set anew: packed, unpacked and new ones.
        for key in [0, 1_000, 1_999, 5, 3_000, u64::MAX] {
            let value = record(key % 97 + 1);
            map.set(Token(key), value);
            every.insert(key, value);
        }
        let all: Vec<(Token, Record)> = every.iter().map(|(k, v)| (Token(*k), *v)).collect();
        assert_eq!(map.iter().collect::<Vec<_>>(), all);
        assert_eq!(map.len(), every.len());
    }

    #[test]
    fn late_records_split_their_block_and_are_all_found() {
        let mut map = PackedMap::default();
        // Every tenth key first, sealed in blocks; then the nine between each
        // pair come late, all into the first blocks' ranges.
        for n in 0..200 {
            map.insert(Token(n * 10), record(n));
        }
        for n in 0..2_000 {
            if n % 10 != 0 {
                map.insert(Token(n), record(n));
            }
        }
        for n in 0..2_000 {
            let value = if n % 10 == 0 { record(n / 10) } else { record(n) };
            assert_eq!(map.get(Token(n)), Some(value), "key {n}");
        }
        assert_eq!(map.len(), 2_000);
        assert!(map.largest_block() <= 2 * BLOCK_RECORDS, "a block of {} records", map.largest_block());
    }

    #[test]
    fn forgetting_drops_only_whole_blocks_below_the_bound() {
        let mut map = PackedMap::default();
        for n in 0..1_000 {
            map.insert(Token(n), record(n));
        }
        map.forget_below(Token(500));
        // The block 500 falls in (448..512) stays, with every record from it on.
        assert_eq!(map.get(Token(447)), None);
        assert_eq!(map.get(Token(448)), Some(record(448)));
        assert_eq!(map.len(), 1_000 - 448);
        assert_eq!(map.iter().map(|(k, _)| k.0).collect::<Vec<_>>(), (448..1_000).collect::<Vec<_>>());
        // A late record below the kept blocks still joins one, and is found.
        assert!(map.insert(Token(3), record(3)));
        assert_eq!(map.get(Token(3)), Some(record(3)));
        // Past every packed key: only the unpacked records are left, and new ones pack as before.
        map.forget_below(Token(u64::MAX));
        assert_eq!(map.len(), 1_000 % BLOCK_RECORDS);
        assert_eq!(map.held().1, 0);
        for n in 1_000..1_200 {
            map.insert(Token(n), record(n));
        }
        assert_eq!(map.len(), 1_000 % BLOCK_RECORDS + 200);
        assert_eq!(map.get(Token(1_100)), Some(record(1_100)));
        assert_eq!(map.first_from(Token(0)), Some(Token(1_000 - 1_000 % BLOCK_RECORDS as u64)));
    }

    #[test]
    fn a_list_numbers_its_records_in_the_order_told_even_after_forgetting() {
        let mut list = PackedMap::default();
        (0..150).for_each(|n| list.push(record(n)));
        assert_eq!(list.iter().map(|(n, _)| n).collect::<Vec<u64>>(), (0..150).collect::<Vec<_>>());
        list.forget_below(u64::MAX);
        list.push(record(150));
        assert_eq!(list.get(150), Some(record(150)));
        assert_eq!(list.len(), 150 % BLOCK_RECORDS + 1);
    }

    #[test]
    fn a_long_run_of_records_is_packed_to_a_few_bytes_each() {
        let mut map = PackedMap::default();
        let count = 100_000;
        for n in 0..count {
            map.insert(Token(41 + n), Record { large: n % 1_000, ..record(n) });
        }
        let (open, packed_bytes) = map.held();
        assert!(open < BLOCK_RECORDS, "{open} records unpacked");
        // Within 10 bytes a record (a map entry of it took about 50).
        assert!(packed_bytes <= 10 * count as usize, "{packed_bytes} bytes for {count} records");
        assert_eq!(map.get(Token(41 + 12_345)), Some(Record { large: 345, ..record(12_345) }));
    }
}
