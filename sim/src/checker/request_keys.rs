//! The key each client request named, for the lease checker: a `Granted`
//! or `Renewed` answer names only the request, and may come at any time
//! (a late answer, a retry), so every request's key is kept for the run.
//!
//! Kept per client as runs of consecutive request ids naming one key: a
//! client's ids count up by one per request, and its renewals follow its
//! acquire on the same key, so a lock held for many renewals is one run (a
//! map of every request was the lease checker's largest part: a million
//! bytes in a 4-hour run). A client's requests between its acquires (its
//! releases, its writes) end a run, so a long run still makes a run a
//! lock; all but a client's newest runs are packed, a few bytes a run
//! (`packed.rs`'s LEB128 numbers). It answers as that map would: the key of
//! the latest insert of an id.

use super::packed::{put, take, take_u32};
use fencelock::{ClientId, RequestId};
use std::collections::BTreeMap;

/// The runs a packed block holds; a client keeps up to twice as many open.
const BLOCK_RUNS: usize = 64;

/// Request ids that name one key, `first..=first + span`: 16 bytes a run
/// (the last id as an offset; a run of 2^32 requests would take years of
/// renewals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RequestRun {
    first: u64,
    span: u32,
    key: u32,
}

// The open runs are held by every client: keep them this small.
const _: () = assert!(std::mem::size_of::<RequestRun>() == 16);

impl RequestRun {
    fn new(first: u64, last: u64, key: u32) -> RequestRun {
        let span = u32::try_from(last - first).expect("a run of fewer than 2^32 requests");
        RequestRun { first, span, key }
    }

    fn last(&self) -> u64 {
        self.first + u64::from(self.span)
    }

    fn set_last(&mut self, last: u64) {
        *self = RequestRun::new(self.first, last, self.key);
    }

    fn set_first(&mut self, first: u64) {
        *self = RequestRun::new(first, self.last(), self.key);
    }
}

/// One client's runs, sorted by first id, none overlapping.
#[derive(Debug, Default)]
struct ClientRuns {
    /// The older runs, packed in blocks of `BLOCK_RUNS` by their first id;
    /// every one is below every open run.
    sealed: BTreeMap<u64, Box<[u8]>>,
    /// The newest runs.
    open: Vec<RequestRun>,
}

impl ClientRuns {
    fn get(&self, id: u64) -> Option<u32> {
        let run = if self.open.first().is_some_and(|run| run.first <= id) {
            let after = self.open.partition_point(|run| run.first <= id);
            self.open[after - 1]
        } else {
            let (_, block) = self.sealed.range(..=id).next_back()?;
            unpack(block).take_while(|run| run.first <= id).last()?
        };
        (run.last() >= id).then_some(run.key)
    }

    fn insert(&mut self, id: u64, key: u32) {
        if self.open.first().is_none_or(|run| run.first > id) {
            // Below the open runs: nothing to do if a packed run says so
            // already; else the run that may hold `id`, or that it may join,
            // is made open again (rare: a request older than a client's
            // newest runs named with another key).
            if self.get(id) == Some(key) {
                return;
            }
            while self.open.first().is_none_or(|run| run.first > id) {
                let Some((_, block)) = self.sealed.pop_last() else { break };
                let mut runs: Vec<RequestRun> = unpack(&block).collect();
                runs.append(&mut self.open);
                self.open = runs;
            }
        }
        insert_run(&mut self.open, id, key);
        while self.open.len() >= 2 * BLOCK_RUNS {
            let newer = self.open.split_off(BLOCK_RUNS);
            let older = std::mem::replace(&mut self.open, newer);
            self.sealed.insert(older[0].first, pack(&older));
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.sealed.values().map(|block| unpack(block).count()).sum::<usize>() + self.open.len()
    }
}

/// Records that `id` named `key` in `runs`, sorted and holding the run
/// that may hold `id` or that it may join.
fn insert_run(runs: &mut Vec<RequestRun>, id: u64, key: u32) {
    // The first run starting after `id`; the one before it may hold it.
    let after = runs.partition_point(|run| run.first <= id);
    if let Some(held) = after.checked_sub(1).filter(|&i| runs[i].last() >= id) {
        let run = runs[held];
        if run.key == key {
            return;
        }
        // Named again with another key: the run is cut around it.
        let pieces = [
            (run.first < id).then(|| RequestRun::new(run.first, id - 1, run.key)),
            Some(RequestRun::new(id, id, key)),
            (id < run.last()).then(|| RequestRun::new(id + 1, run.last(), run.key)),
        ];
        runs.splice(held..=held, pieces.into_iter().flatten());
        return;
    }
    let joins_before =
        after.checked_sub(1).filter(|&i| runs[i].key == key && runs[i].last().checked_add(1) == Some(id));
    let joins_after =
        Some(after).filter(|&i| i < runs.len() && runs[i].key == key && id.checked_add(1) == Some(runs[i].first));
    match (joins_before, joins_after) {
        (Some(before), Some(next)) => {
            let last = runs[next].last();
            runs[before].set_last(last);
            runs.remove(next);
        }
        (Some(before), None) => runs[before].set_last(id),
        (None, Some(next)) => runs[next].set_first(id),
        (None, None) => runs.insert(after, RequestRun::new(id, id, key)),
    }
}

/// Runs as LEB128 numbers: each run's first id past the run before's end,
/// its span, its key.
fn pack(runs: &[RequestRun]) -> Box<[u8]> {
    let mut bytes = Vec::with_capacity(runs.len() * 4);
    let mut next = 0;
    for run in runs {
        put(&mut bytes, run.first - next);
        put(&mut bytes, u64::from(run.span));
        put(&mut bytes, u64::from(run.key));
        next = run.last() + 1;
    }
    bytes.into_boxed_slice()
}

fn unpack(bytes: &[u8]) -> impl Iterator<Item = RequestRun> + '_ {
    let (mut at, mut next) = (0, 0);
    std::iter::from_fn(move || {
        if at == bytes.len() {
            return None;
        }
        let first = next + take(bytes, &mut at);
        let run = RequestRun { first, span: take_u32(bytes, &mut at), key: take_u32(bytes, &mut at) };
        next = run.last() + 1;
        Some(run)
    })
}

#[derive(Debug, Default)]
pub(super) struct RequestKeys {
    runs: BTreeMap<ClientId, ClientRuns>,
}

impl RequestKeys {
    pub fn insert(&mut self, client: ClientId, request: RequestId, key: u32) {
        self.runs.entry(client).or_default().insert(request.0, key);
    }

    pub fn get(&self, client: ClientId, request: RequestId) -> Option<u32> {
        self.runs.get(&client)?.get(request.0)
    }

    #[cfg(test)]
    fn run_count(&self) -> usize {
        self.runs.values().map(ClientRuns::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::{RequestKeys, BLOCK_RUNS};
    use fencelock::{ClientId, RequestId};
    use std::collections::BTreeMap;

    /// Inserts `count` requests drawn from ids `0..ids`, keys `0..keys`, two
    /// clients, checking after every `every`th and the last that the runs
    /// answer as a map does (probing `0..probes` ids).
    fn answers_as_a_map(count: usize, ids: u64, keys: u64, probes: u64, every: usize) -> RequestKeys {
        let mut runs = RequestKeys::default();
        let mut map = BTreeMap::new();
        // A small generator, so the inserts jump about.
        let mut x: u64 = 7;
        for i in 0..count {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (client, id, key) = (ClientId((x >> 60) as u32 % 2), (x >> 20) % ids, ((x >> 50) % keys) as u32);
            runs.insert(client, RequestId(id), key);
            map.insert((client, id), key);
            if i % every != 0 && i + 1 != count {
                continue;
            }
            for probe in 0..probes {
                for c in 0..2 {
                    let got = runs.get(ClientId(c), RequestId(probe));
                    assert_eq!(got, map.get(&(ClientId(c), probe)).copied(), "c{c} r{probe}");
                }
            }
        }
        runs
    }

    /// The runs answer as a map of every request would, whatever the order
    /// of the inserts, and a client's renewals of one key cost one run.
    #[test]
    fn request_keys_answer_as_a_map_and_a_held_lock_is_one_run() {
        answers_as_a_map(2_000, 40, 3, 42, 1);
        // An acquire and 10,000 renewals of one key, then the next lock's: two runs.
        let mut held = RequestKeys::default();
        for id in 0..=10_000 {
            held.insert(ClientId(1), RequestId(id), 4);
        }
        held.insert(ClientId(1), RequestId(10_002), 5);
        assert_eq!(held.run_count(), 2);
        assert_eq!(held.get(ClientId(1), RequestId(10_001)), None);
        assert_eq!(held.get(ClientId(1), RequestId(5_000)), Some(4));
    }

    /// With many runs, most packed, inserts anywhere (into packed runs,
    /// joining, cutting) still answer as a map.
    #[test]
    fn packed_runs_answer_as_a_map() {
        let runs = answers_as_a_map(6_000, 3_000, 7, 3_002, 50);
        assert!(runs.run_count() > 4 * BLOCK_RUNS, "{} runs", runs.run_count());
        assert!(runs.runs.values().all(|client| !client.sealed.is_empty()));
    }

    /// A lock's requests separated by requests of no key (releases,
    /// writes): a run a lock, all but the newest packed.
    #[test]
    fn a_long_run_of_locks_is_packed() {
        let mut keys = RequestKeys::default();
        for lock in 0..10_000u64 {
            for renewal in 0..3 {
                keys.insert(ClientId(1), RequestId(lock * 5 + renewal), (lock % 4) as u32);
            }
        }
        let client = &keys.runs[&ClientId(1)];
        assert_eq!(keys.run_count(), 10_000);
        assert!(client.open.len() < 2 * BLOCK_RUNS);
        let packed: usize = client.sealed.values().map(|block| block.len()).sum();
        assert!(packed <= 4 * 10_000, "{packed} bytes");
        assert_eq!(keys.get(ClientId(1), RequestId(7)), Some(1));
        assert_eq!(keys.get(ClientId(1), RequestId(8)), None);
        assert_eq!(keys.get(ClientId(1), RequestId(49_997)), Some(3));
    }
}
