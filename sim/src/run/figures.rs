//! The availability figures of one run, read from its history in one place
//! (for `explore`, CLI.md "Explore"): how long acquires took from their
//! first send to `Granted` (true time), and the longest stretch in which a
//! key had no committed holder while some client was waiting for it.
//!
//! "Committed holder" is the lock table as the first server to apply each
//! entry changed it (as the timeline draws it); "waiting" is an `Acquire`
//! from its first send until a final answer (anything but `NotLeader` and
//! `Unavailable`, which the client retries), the client giving up, or the
//! client crashing. A stretch still open when the history ends is closed
//! at its last event.

use crate::checker::index_runs::IndexRuns;
use crate::checker::packed::PackedMap;
pub use crate::checker::PhaseAvailability;
use crate::history::{Actor, Event, EventKind};
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ApplyResult, ClientId, Command, Key, LogIndex, RequestId, Token};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Latencies kept per seed: a histogram of values rounded to three
/// significant digits (percentiles within 0.5%), so a seed's record stays
/// a few hundred bytes whatever its number of grants.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Histogram(pub BTreeMap<u64, u64>);

impl Histogram {
    pub fn add(&mut self, value: u64) {
        *self.0.entry(round3(value)).or_default() += 1;
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (&value, &count) in &other.0 {
            *self.0.entry(value).or_default() += count;
        }
    }

    pub fn count(&self) -> u64 {
        self.0.values().sum()
    }

    /// The nearest-rank percentile (`permille` of 1000), `None` when empty.
    pub fn percentile(&self, permille: u64) -> Option<u64> {
        nearest_rank(permille, self.count(), self.0.iter().map(|(&value, &n)| (value, n)))
    }
}

/// Significant decimal digits a [`Sketch`] keeps: a value is known within
/// 1 part in 2^10 (0.1%), and values below 2,048 exactly.
pub const SKETCH_DIGITS: u8 = 3;

/// Streaming quantiles over any number of values in fixed memory: an HDR
/// histogram (the `hdrhistogram` crate) of three significant digits, whose
/// buckets grow with the largest value's magnitude, never with the count
/// (about 8 KB per power of two above 2,048). A percentile is the
/// nearest-rank one over the values as the sketch keeps them: exact below
/// 2,048, within 0.1% (1 part in 1,024) of the true one above.
#[derive(Clone, Debug)]
pub struct Sketch(hdrhistogram::Histogram<u64>);

impl Default for Sketch {
    fn default() -> Sketch {
        Sketch(hdrhistogram::Histogram::new(SKETCH_DIGITS).expect("three significant digits are valid"))
    }
}

impl PartialEq for Sketch {
    fn eq(&self, other: &Sketch) -> bool {
        self.0 == other.0
    }
}

impl Eq for Sketch {}

impl Sketch {
    pub fn add_n(&mut self, value: u64, count: u64) {
        // `record_n` grows the buckets to the value (`saturating_record_n`
        // would clamp it to the current top); it fails only past u64's range.
        self.0.record_n(value, count).expect("an auto-resizing histogram takes any u64");
    }

    /// The sketch's counters: they follow the largest value's magnitude, never the count.
    pub fn buckets(&self) -> usize {
        self.0.distinct_values()
    }

    pub fn merge(&mut self, other: &Sketch) {
        self.0.add(&other.0).expect("an auto-resizing histogram takes any other");
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The largest value added (exact to the sketch's digits).
    pub fn max(&self) -> u64 {
        if self.count() == 0 {
            0
        } else {
            self.0.max()
        }
    }

    /// The nearest-rank percentile (`permille` of 1000), `None` when empty;
    /// the rank in integers, as [`Histogram::percentile`] takes it.
    pub fn percentile(&self, permille: u64) -> Option<u64> {
        let buckets =
            self.0.iter_recorded().map(|b| (self.0.highest_equivalent(b.value_iterated_to()), b.count_at_value()));
        nearest_rank(permille, self.count(), buckets)
    }
}

/// The nearest-rank percentile (`permille` of 1000) of `count` values given
/// as `(value, how many)` in ascending order; `None` when there are none.
fn nearest_rank(permille: u64, count: u64, buckets: impl Iterator<Item = (u64, u64)>) -> Option<u64> {
    assert!(permille <= 1_000, "a percentile is at most 1000 permille");
    if count == 0 {
        return None;
    }
    let rank = (count * permille).div_ceil(1_000).max(1);
    let mut seen = 0;
    for (value, n) in buckets {
        seen += n;
        if seen >= rank {
            return Some(value);
        }
    }
    unreachable!("the rank is at most the count")
}

/// Values as [`Histogram`] keeps them (three significant digits), counted
/// in fixed places: values under 1,000 in a table of their own, and each
/// decade above in 900 places (100 to 999 times its power of ten), a
/// decade's table made at its first value. Its size follows the largest
/// value's magnitude, never the count: an hour-long run's acquires kept
/// as a map grew with each new rounded value, to 48 KB in four hours.
#[derive(Debug, Default)]
struct Rounded {
    decades: Vec<Vec<u32>>,
}

impl Rounded {
    fn add(&mut self, value: u64) {
        let (decade, place) = Rounded::place(round3(value));
        if self.decades.len() <= decade {
            self.decades.resize_with(decade + 1, Vec::new);
        }
        let counts = &mut self.decades[decade];
        if counts.is_empty() {
            counts.resize(if decade == 0 { 1_000 } else { 900 }, 0);
        }
        counts[place] = counts[place].checked_add(1).expect("fewer than 2^32 values in one place");
    }

    /// A rounded value's decade and place there.
    fn place(rounded: u64) -> (usize, usize) {
        let (decade, scale) = decade(rounded);
        let place = if decade == 0 { rounded } else { rounded / scale - 100 };
        (decade, usize::try_from(place).expect("a place is under 1,000"))
    }

    fn histogram(&self) -> Histogram {
        let mut histogram = Histogram::default();
        for (scale, counts) in std::iter::successors(Some(1u64), |scale| scale.checked_mul(10)).zip(&self.decades) {
            let first = if scale == 1 { 0 } else { 100 };
            for (place, &count) in (first..).zip(counts).filter(|(_, &count)| count > 0) {
                histogram.0.insert(place * scale, u64::from(count));
            }
        }
        histogram
    }
}

/// `value` rounded to three significant digits (half up).
pub fn round3(value: u64) -> u64 {
    let (_, scale) = decade(value);
    (value + scale / 2) / scale * scale
}

/// The decade of `value` above its first three digits and its power of
/// ten: (0, 1) below 1,000, (1, 10) below 10,000, and so on.
fn decade(value: u64) -> (usize, u64) {
    let (mut decade, mut scale) = (0, 1);
    while value / scale >= 1_000 {
        decade += 1;
        scale *= 10;
    }
    (decade, scale)
}

/// What `explore` keeps of one seed besides its violations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedFigures {
    /// Grants applied (first apply of each), as the checker counts them.
    pub grants: u64,
    /// Writes the resource refused for a stale token.
    pub stale_writes_rejected: u64,
    /// Acquire latency, first send to `Granted`, microseconds of true time.
    pub acquire_us: Histogram,
    /// The longest stretch any key had no committed holder while a client waited for it.
    pub unheld_waiting_us_max: u64,
    /// Requests answered and grants made, during the faults and after the heal.
    #[serde(default)]
    pub phases: PhaseAvailability,
}

#[derive(Default)]
struct KeyState {
    holder: Option<Token>,
    waiting: BTreeSet<(ClientId, RequestId)>,
    /// Since when the key has been unheld with a waiter.
    stretch_from_us: Option<u64>,
}

/// The indices some server applied a command at, this epoch: the indices
/// applied at all (commands and no-ops) as runs, less those only a no-op
/// was applied at so far. The commands' indices alone were cut into a run
/// per election by each new leader's no-op, a run's memory growing with
/// the run's length; all indices stay a few runs, and the no-ops are packed.
#[derive(Default)]
struct CommandIndices {
    applied: IndexRuns,
    /// Each index first applied as a no-op: true while no command was applied there.
    noops: PackedMap<LogIndex, bool>,
}

impl CommandIndices {
    /// Records a command applied at `index`; true if none was applied there before.
    fn insert_command(&mut self, index: LogIndex) -> bool {
        if self.applied.insert(index, ()) {
            return true;
        }
        if self.noops.get(index) == Some(true) {
            self.noops.set(index, false);
            return true;
        }
        false
    }

    fn insert_noop(&mut self, index: LogIndex) {
        if self.applied.insert(index, ()) {
            self.noops.insert(index, true);
        }
    }

    fn clear(&mut self) {
        *self = CommandIndices::default();
    }
}

/// Acquires and stretches, read from a history as it is recorded.
#[derive(Default)]
pub struct Availability {
    /// Open acquires: first send and key.
    acquires: BTreeMap<(ClientId, RequestId), (u64, Key)>,
    keys: BTreeMap<Key, KeyState>,
    applied: CommandIndices,
    acquire_us: Rounded,
    unheld_waiting_us_max: u64,
}

impl Availability {
    pub fn observe(&mut self, event: &Event) {
        let at = event.at_us;
        match &event.kind {
            // A retry (same request id) keeps the first send's time.
            EventKind::Requested { client, request, body: ClientRequest::Acquire { key, .. }, .. }
                if !self.acquires.contains_key(&(*client, *request)) =>
            {
                self.acquires.insert((*client, *request), (at, key.clone()));
                self.key(key).waiting.insert((*client, *request));
                self.settle(key, at, false);
            }
            EventKind::Answered { client, request, reply, .. } => match reply {
                ClientReply::NotLeader { .. } | ClientReply::Unavailable => {}
                ClientReply::Granted { .. } => self.close(*client, *request, at, true),
                _ => self.close(*client, *request, at, false),
            },
            EventKind::GaveUp { client, request, .. } => self.close(*client, *request, at, false),
            EventKind::Crashed { actor: Actor::Client(client) } => {
                let open: Vec<RequestId> =
                    self.acquires.keys().filter(|(c, _)| c == client).map(|(_, request)| *request).collect();
                for request in open {
                    self.close(*client, request, at, false);
                }
            }
            EventKind::ClusterRestored { .. } => {
                // The table is the backup's now; the entries are numbered anew.
                self.applied.clear();
                let keys: Vec<Key> = self.keys.keys().cloned().collect();
                for key in keys {
                    self.key(&key).holder = None;
                    self.settle(&key, at, false);
                }
            }
            EventKind::Applied { index, command, result, .. } if self.applied.insert_command(*index) => {
                self.applied_once(command, result, at);
            }
            EventKind::AppliedNoop { index, .. } => self.applied.insert_noop(*index),
            _ => {}
        }
    }

    /// The acquire latencies and the longest unheld stretch, the stretches
    /// still open closed at `end_us` (the history's last event).
    pub fn finish(mut self, end_us: u64) -> (Histogram, u64) {
        let keys: Vec<Key> = self.keys.keys().cloned().collect();
        for key in keys {
            self.settle(&key, end_us, true);
        }
        (self.acquire_us.histogram(), self.unheld_waiting_us_max)
    }

    fn key(&mut self, key: &Key) -> &mut KeyState {
        self.keys.entry(key.clone()).or_default()
    }

    fn close(&mut self, client: ClientId, request: RequestId, at_us: u64, granted: bool) {
        let Some((sent_us, key)) = self.acquires.remove(&(client, request)) else { return };
        if granted {
            self.acquire_us.add(at_us - sent_us);
        }
        self.key(&key).waiting.remove(&(client, request));
        self.settle(&key, at_us, false);
    }

    fn applied_once(&mut self, command: &Command, result: &ApplyResult, at_us: u64) {
        let key = command.key().clone();
        let state = self.key(&key);
        match (command, result) {
            (Command::Grant { .. }, ApplyResult::Granted { token }) => state.holder = Some(*token),
            (Command::Release { token, .. }, ApplyResult::Released)
            | (Command::Expire { token, .. }, ApplyResult::Expired { existed: true })
                if state.holder == Some(*token) =>
            {
                state.holder = None;
            }
            _ => {}
        }
        self.settle(&key, at_us, false);
    }

    /// Opens or closes the key's stretch after a change at `at_us`; `end`
    /// closes it whatever the state (the history's end).
    fn settle(&mut self, key: &Key, at_us: u64, end: bool) {
        let state = self.keys.get_mut(key).expect("a settled key is known");
        let starved = !end && state.holder.is_none() && !state.waiting.is_empty();
        match (state.stretch_from_us, starved) {
            (None, true) => state.stretch_from_us = Some(at_us),
            (Some(from_us), false) => {
                state.stretch_from_us = None;
                self.unheld_waiting_us_max = self.unheld_waiting_us_max.max(at_us - from_us);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{round3, Availability, CommandIndices, Histogram, Rounded};
    use crate::history::{EventKind, History};
    use fencelock::service::{ClientReply, ClientRequest};
    use fencelock::{ApplyResult, ClientId, Command, Holder, Key, LogIndex, NodeId, RequestId, Term, Token};

    /// The fixed places give the histogram a map of the rounded values gives.
    #[test]
    fn rounded_places_count_as_a_map_of_rounded_values() {
        let mut rounded = Rounded::default();
        let mut map = Histogram::default();
        let values =
            (0..3_000u64).map(|i| i * i * 7 + i % 13).chain([0, 999, 1_000, 999_500, 123_456_789, u64::MAX / 2]);
        for value in values {
            rounded.add(value);
            map.add(value);
        }
        assert_eq!(rounded.histogram(), map);
        assert!(rounded.decades.iter().map(Vec::len).sum::<usize>() < 20_000);
    }

    #[test]
    fn three_significant_digits_and_nearest_rank() {
        assert_eq!((round3(999), round3(1_004), round3(1_005), round3(123_456)), (999, 1_000, 1_010, 123_000));
        let mut h = Histogram::default();
        for v in 1..=100 {
            h.add(v);
        }
        assert_eq!((h.percentile(500), h.percentile(990), h.percentile(1_000)), (Some(50), Some(99), Some(100)));
        assert_eq!(Histogram::default().percentile(500), None);
    }

    /// A leader's no-op between commands costs no run, and a command at an
    /// index only a no-op was applied at is still that index's first command.
    #[test]
    fn command_indices_keep_a_command_after_a_noop_and_few_runs() {
        let mut indices = CommandIndices::default();
        for i in 1..=10_000 {
            if i % 3 == 0 {
                indices.insert_noop(LogIndex(i));
            } else {
                assert!(indices.insert_command(LogIndex(i)), "{i} is new");
            }
        }
        assert_eq!(indices.applied.runs_len(), 1);
        assert!(!indices.insert_command(LogIndex(5)), "a command was applied at 5");
        assert!(indices.insert_command(LogIndex(6)), "only a no-op was applied at 6");
        assert!(!indices.insert_command(LogIndex(6)), "now a command was");
        indices.insert_noop(LogIndex(7));
        assert!(!indices.insert_command(LogIndex(7)));
        let (open, packed) = indices.noops.held();
        assert!(open < 64 && packed <= 3 * 3_334, "{open} open, {packed} bytes");
    }

    #[test]
    fn a_key_unheld_while_a_client_waits_is_a_stretch() {
        let key = Key::new("k");
        let (a, b) = (ClientId(0), ClientId(1));
        let acquire = ClientRequest::Acquire { key: key.clone(), lease_ms: 1_000, wait_ms: 2_000 };
        let grant = |client, request| Command::Grant {
            key: key.clone(),
            lease_ms: 1_000,
            holder: Holder { client, request: RequestId(request) },
        };
        let mut h = History::new();
        let request =
            |client, r| EventKind::Requested { client, request: RequestId(r), to: NodeId(0), body: acquire.clone() };
        let applied = |index, command, result| EventKind::Applied {
            node: NodeId(0),
            index: LogIndex(index),
            term: Term(1),
            command,
            result,
        };
        let granted = |client, r, token| EventKind::Answered {
            client,
            request: RequestId(r),
            from: NodeId(0),
            reply: ClientReply::Granted { token: Token(token), lease_ms: 1_000 },
        };
        h.record(1_000, request(a, 1));
        h.record(3_000, applied(1, grant(a, 1), ApplyResult::Granted { token: Token(41) }));
        h.record(4_000, granted(a, 1, 41));
        h.record(10_000, request(b, 2));
        // A retry of the same request does not restart the clock.
        h.record(12_000, request(b, 2));
        h.record(
            20_000,
            applied(2, Command::Expire { key: key.clone(), token: Token(41) }, ApplyResult::Expired { existed: true }),
        );
        // A second server applying the same entry changes nothing.
        h.record(
            21_000,
            applied(2, Command::Expire { key: key.clone(), token: Token(41) }, ApplyResult::Expired { existed: true }),
        );
        h.record(70_000, applied(3, grant(b, 2), ApplyResult::Granted { token: Token(42) }));
        h.record(75_000, granted(b, 2, 42));
        let mut reader = Availability::default();
        for event in h.events() {
            reader.observe(event);
        }
        let (latency, longest_us) = reader.finish(h.events().last().map_or(0, |e| e.at_us));
        assert_eq!(longest_us, 50_000, "from the expiry (20 ms) to the next grant (70 ms)");
        assert_eq!(latency.0.into_iter().collect::<Vec<_>>(), vec![(3_000, 1), (65_000, 1)]);
    }
}
