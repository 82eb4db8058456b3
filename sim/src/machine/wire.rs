//! The simulated network's side of the wire format.
//!
//! The format itself (postcard bytes under a CRC-32, and the `Envelope`
//! every message travels in) lives in `fencelock::wire`, shared with the
//! real node so both worlds speak the same bytes. What stays here is the
//! corruption fault, which draws from the simulation's RNG.

pub use fencelock::wire::{decode, encode, WireError};
use rand::Rng;

/// Flips one random bit of `bytes` (the network's corruption fault).
pub fn corrupt(bytes: &mut [u8], rng: &mut impl Rng) {
    if bytes.is_empty() {
        return;
    }
    let bit = rng.gen_range(0..bytes.len() * 8);
    bytes[bit / 8] ^= 1 << (bit % 8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::raft::{Entry, Message, MessageBody, Payload};
    use fencelock::{LogIndex, NodeId, Term};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn sample() -> Message {
        let entries = (1..=3)
            .map(|i| Entry { term: Term(7), index: LogIndex(40 + i), payload: Payload::Noop })
            .collect::<Vec<_>>();
        Message {
            from: NodeId(2),
            to: NodeId(4),
            term: Term(7),
            body: MessageBody::Append {
                prev_index: LogIndex(40),
                prev_term: Term(6),
                entries,
                commit: LogIndex(39),
                read_ctx: 0xDEAD_BEEF,
            },
        }
    }

    #[test]
    fn corrupt_flips_exactly_one_bit() {
        let bytes = encode(&sample());
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for _ in 0..200 {
            let mut damaged = bytes.clone();
            corrupt(&mut damaged, &mut rng);
            let flipped: u32 = bytes.iter().zip(&damaged).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert_eq!(flipped, 1);
            assert!(decode::<Message>(&damaged).is_err());
        }
    }
}
