//! The lease checker's bad clocks, kept whole for the run and packed: every
//! clock step and every stretch of a clock beyond the drift bound, which an
//! overlap's window may reach back to at any later time.
//!
//! A long run steps clocks a few thousand times; as a `Vec<Cause>` of
//! 40-byte records, doubled as it grew, they were the lease checker's
//! largest part. Packed (`packed.rs`), in the order they were told, under
//! their running number, a step is a few bytes.

use super::lease_checker::Cause;
use super::packed::{put, put_change, take, take_change, Pack, PackedMap};
use crate::history::Actor;
use fencelock::{ClientId, NodeId};

/// A cause as packed: `kind` tells which, `actor` is [`actor_code`]'s.
#[derive(Clone, Copy, Debug, Default)]
struct Packed {
    kind: u8,
    actor: u64,
    begins_us: u64,
    /// A step's `delta_us`, a stretch's `rate_ppm`.
    value: i64,
    /// A closed stretch's end.
    to_us: u64,
}

const STEP: u8 = 0;
const BEYOND_CLOSED: u8 = 1;
const BEYOND_OPEN: u8 = 2;

impl Pack for Packed {
    fn pack(&self, before: &Self, bytes: &mut Vec<u8>) {
        put(bytes, u64::from(self.kind));
        put(bytes, self.actor);
        put_change(bytes, self.begins_us, before.begins_us);
        put_change(bytes, self.value as u64, 0);
        if self.kind == BEYOND_CLOSED {
            put_change(bytes, self.to_us, self.begins_us);
        }
    }

    fn unpack(before: &Self, bytes: &[u8], at: &mut usize) -> Self {
        let kind = u8::try_from(take(bytes, at)).expect("a packed cause's kind");
        let actor = take(bytes, at);
        let begins_us = take_change(bytes, at, before.begins_us);
        let value = take_change(bytes, at, 0) as i64;
        let to_us = if kind == BEYOND_CLOSED { take_change(bytes, at, begins_us) } else { 0 };
        Packed { kind, actor, begins_us, value, to_us }
    }
}

/// An actor as one number: its kind in the low bits, its id above.
fn actor_code(actor: Actor) -> u64 {
    match actor {
        Actor::Server(node) => u64::from(node.0) << 2,
        Actor::Client(client) => (u64::from(client.0) << 2) | 1,
        Actor::Resource => 2,
    }
}

fn actor_of(code: u64) -> Actor {
    match code & 3 {
        0 => Actor::Server(NodeId(u8::try_from(code >> 2).expect("a packed server"))),
        1 => Actor::Client(ClientId(u32::try_from(code >> 2).expect("a packed client"))),
        _ => Actor::Resource,
    }
}

#[derive(Debug, Default)]
pub(crate) struct BadClocks {
    causes: PackedMap<u64, Packed>,
}

impl BadClocks {
    /// Records a step or a stretch beyond the bound, after every one before.
    pub fn push(&mut self, cause: Cause) {
        let packed = match cause {
            Cause::Step { actor, at_us, delta_us } => {
                Packed { kind: STEP, actor: actor_code(actor), begins_us: at_us, value: delta_us, to_us: 0 }
            }
            Cause::BeyondBound { actor, rate_ppm, from_us, to_us } => Packed {
                kind: if to_us.is_some() { BEYOND_CLOSED } else { BEYOND_OPEN },
                actor: actor_code(actor),
                begins_us: from_us,
                value: rate_ppm,
                to_us: to_us.unwrap_or(0),
            },
            Cause::ClusterRestore { .. } => unreachable!("a restore is no clock's"),
        };
        self.causes.push(packed);
    }

    /// Every cause, in the order told.
    pub fn iter(&self) -> impl Iterator<Item = Cause> + '_ {
        self.causes.iter().map(|(_, p)| {
            let actor = actor_of(p.actor);
            match p.kind {
                STEP => Cause::Step { actor, at_us: p.begins_us, delta_us: p.value },
                kind => {
                    let to_us = (kind == BEYOND_CLOSED).then_some(p.to_us);
                    Cause::BeyondBound { actor, rate_ppm: p.value, from_us: p.begins_us, to_us }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cause comes back as told, in order, the extremes included.
    #[test]
    fn causes_come_back_as_told() {
        let mut told = Vec::new();
        for i in 0..300u64 {
            told.push(Cause::Step { actor: Actor::Server(NodeId((i % 5) as u8)), at_us: i * 1_000, delta_us: -7 });
            let to_us = (i % 3 != 0).then_some(i * 1_000 + 5);
            let actor = Actor::Client(ClientId(u32::MAX - i as u32));
            told.push(Cause::BeyondBound { actor, rate_ppm: 200_000, from_us: i * 1_000, to_us });
        }
        told.push(Cause::Step { actor: Actor::Resource, at_us: u64::MAX, delta_us: i64::MIN });
        told.push(Cause::Step { actor: Actor::Server(NodeId(u8::MAX)), at_us: 0, delta_us: i64::MAX });
        let mut clocks = BadClocks::default();
        told.iter().cloned().for_each(|cause| clocks.push(cause));
        let back: Vec<Cause> = clocks.iter().collect();
        assert_eq!(back, told);
    }
}
