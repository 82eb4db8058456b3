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
    buffer: Vec<u8>,
}

impl Default for Hasher {
    fn default() -> Hasher {
        Hasher { hash: FNV_OFFSET, buffer: Vec::with_capacity(256) }
    }
}

impl Hasher {
    pub fn observe(&mut self, event: &Event) {
        let bytes = postcard::to_extend(event, std::mem::take(&mut self.buffer)).expect("events always encode");
        for &byte in &bytes {
            self.hash ^= u64::from(byte);
            self.hash = self.hash.wrapping_mul(FNV_PRIME);
        }
        self.buffer = bytes;
        self.buffer.clear();
    }

    /// The hash of the events so far.
    pub fn finish(&self) -> u64 {
        self.hash
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
