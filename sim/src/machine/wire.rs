//! The wire format: every message crosses the simulated network as bytes.
//!
//! A frame is the postcard encoding of the value followed by a little-endian
//! CRC-32 of that encoding. Serializing for real exercises the codec on every
//! message, and the checksum lets a receiver drop a corrupted frame instead of
//! acting on it: CRC-32 detects every single-bit error, so a flipped bit is
//! never decoded as a valid message.

use rand::Rng;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;

/// Bytes of the checksum trailer.
const CHECKSUM_LEN: usize = 4;

/// Initial capacity of an encoded frame; most messages fit, larger ones grow.
const FRAME_CAPACITY_HINT: usize = 128;

/// Why a frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The checksum does not match the body: the frame was damaged in flight.
    Checksum,
    /// Too short for a trailer, or the body is not a valid encoding of the type.
    Malformed,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Checksum => f.write_str("checksum mismatch"),
            WireError::Malformed => f.write_str("malformed frame"),
        }
    }
}

impl std::error::Error for WireError {}

/// Encodes `value` as a frame: postcard bytes, then their CRC-32.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Room for a typical message and its trailer up front: growing a vector
    // byte by byte was a visible share of the run time.
    let mut bytes = postcard::to_extend(value, Vec::with_capacity(FRAME_CAPACITY_HINT))
        .expect("postcard encodes every message type");
    let checksum = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    bytes
}

/// Decodes a frame made by [`encode`], checking the checksum first.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, WireError> {
    if bytes.len() < CHECKSUM_LEN {
        return Err(WireError::Malformed);
    }
    let (body, trailer) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
    let expected = u32::from_le_bytes(trailer.try_into().expect("trailer is 4 bytes"));
    if crc32fast::hash(body) != expected {
        return Err(WireError::Checksum);
    }
    let (value, rest) = postcard::take_from_bytes::<T>(body).map_err(|_| WireError::Malformed)?;
    // A well-formed frame holds exactly one value; leftovers mean a different type or a bug.
    if !rest.is_empty() {
        return Err(WireError::Malformed);
    }
    Ok(value)
}

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
    fn round_trip() {
        let message = sample();
        let bytes = encode(&message);
        assert_eq!(decode::<Message>(&bytes), Ok(message));
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let bytes = encode(&sample());
        assert!(bytes.len() > 20, "the sample should be a real multi-field frame");
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode::<Message>(&damaged), Err(WireError::Checksum), "bit {bit} went unnoticed");
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

    #[test]
    fn malformed_frames_are_refused() {
        assert_eq!(decode::<Message>(&[]), Err(WireError::Malformed));
        assert_eq!(decode::<Message>(&[1, 2, 3]), Err(WireError::Malformed));
        // A valid frame of another type: the checksum passes, the body does not parse or has leftovers.
        let other = encode(&(7u8, 5u8));
        assert_eq!(decode::<Message>(&other), Err(WireError::Malformed));
        let long = encode(&vec![7u8; 100]);
        assert_eq!(decode::<u8>(&long), Err(WireError::Malformed));
    }
}
