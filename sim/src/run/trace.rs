//! The trace: one readable line per history event, and the trace hash.
//!
//! The hash is FNV-1a (64 bit) over each event's postcard encoding, so it is
//! the same on every machine and in debug and release builds.

use crate::history::Event;
use std::fmt::Write as _;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The trace hash of a history.
pub fn hash(events: &[Event]) -> u64 {
    let mut hasher = Hasher::default();
    for event in events {
        hasher.observe(event);
    }
    hasher.finish()
}

/// The trace hash, taken event by event as a run records them.
pub struct Hasher {
    hash: u64,
}

impl Default for Hasher {
    fn default() -> Hasher {
        Hasher { hash: FNV_OFFSET }
    }
}

impl Hasher {
    pub fn observe(&mut self, event: &Event) {
        self.hash = postcard::serialize_with_flavor(event, Fnv(self.hash)).expect("events always encode");
    }

    /// The hash of the events so far.
    pub fn finish(&self) -> u64 {
        self.hash
    }
}

/// postcard's output hashed as it is written, byte by byte, instead of
/// written out and read again.
struct Fnv(u64);

impl Fnv {
    #[inline]
    fn byte(&mut self, byte: u8) {
        self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
    }
}

impl postcard::ser_flavors::Flavor for Fnv {
    type Output = u64;

    #[inline]
    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        self.byte(byte);
        Ok(())
    }

    #[inline]
    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        bytes.iter().for_each(|&byte| self.byte(byte));
        Ok(())
    }

    fn finalize(self) -> postcard::Result<u64> {
        Ok(self.0)
    }
}

pub fn hash_hex(hash: u64) -> String {
    format!("{hash:016x}")
}

/// `12.345s  n2      became Leader in t7` — time, who, what.
pub fn line(event: &Event) -> String {
    let mut out = String::new();
    let (who, what) = event.kind.describe();
    let _ = write!(out, "{:>7}.{:03}ms  {:<4}  {}", event.at_us / 1_000, event.at_us % 1_000, who, what);
    out
}

#[cfg(test)]
mod tests {
    use super::{hash, FNV_OFFSET, FNV_PRIME};
    use crate::history::{Actor, Event, EventKind};
    use fencelock::NodeId;

    /// The hash, as the module's doc defines it: FNV-1a over each event's
    /// postcard bytes, written out first.
    fn by_definition(events: &[Event]) -> u64 {
        let bytes = events.iter().flat_map(|event| postcard::to_allocvec(event).expect("events encode"));
        bytes.fold(FNV_OFFSET, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME))
    }

    #[test]
    fn the_hash_is_fnv_1a_over_each_events_postcard_bytes() {
        let events: Vec<Event> = (0..40)
            .map(|seq| {
                let actor = Actor::Server(NodeId((seq % 3) as u8));
                let kind = if seq % 2 == 0 { EventKind::Paused { actor } } else { EventKind::Resumed { actor } };
                Event { seq, at_us: seq * 1_234_567, kind }
            })
            .collect();
        assert_eq!(hash(&events), by_definition(&events));
        assert_eq!(hash(&[]), FNV_OFFSET);
        assert_ne!(hash(&events[..1]), hash(&events[1..2]));
    }
}
