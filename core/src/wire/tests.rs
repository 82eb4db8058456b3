//! The frame codec (moved from the simulator with its tests) and the stream framing.

use super::*;
use crate::raft::{Entry, Message, MessageBody, Payload};
use crate::{LogIndex, NodeId, Term};

fn sample() -> Message {
    let entries =
        (1..=3).map(|i| Entry { term: Term(7), index: LogIndex(40 + i), payload: Payload::Noop }).collect::<Vec<_>>();
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
fn a_frame_is_postcards_bytes_then_their_checksum() {
    // What the encoder's output takes as a push (a one-byte varint) and as
    // a copy (a ten-byte varint, a string, a four-byte varint in a message).
    fn frame_of<T: Serialize>(value: &T) {
        let frame = encode(value);
        let body = postcard::to_stdvec(value).expect("postcard encodes it");
        assert_eq!(frame[..body.len()], body[..]);
        assert_eq!(frame[body.len()..], crc32fast::hash(&body).to_le_bytes());
    }
    frame_of(&sample());
    frame_of(&Message { term: Term(300_000), ..sample() });
    frame_of(&(1u8, u64::MAX, "a key longer than a varint", [7u32; 3]));
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
fn malformed_frames_are_refused() {
    assert_eq!(decode::<Message>(&[]), Err(WireError::Malformed));
    assert_eq!(decode::<Message>(&[1, 2, 3]), Err(WireError::Malformed));
    // A valid frame of another type: the checksum passes, the body does not parse or has leftovers.
    let other = encode(&(7u8, 5u8));
    assert_eq!(decode::<Message>(&other), Err(WireError::Malformed));
    let long = encode(&vec![7u8; 100]);
    assert_eq!(decode::<u8>(&long), Err(WireError::Malformed));
}

#[test]
fn a_stream_is_cut_into_frames_whatever_the_split() {
    let messages = [sample(), sample(), sample()];
    let stream: Vec<u8> = messages.iter().flat_map(|m| encode_prefixed(m).expect("a small frame")).collect::<Vec<_>>();
    for chunk in [1, 2, 3, 5, 7, 64, stream.len()] {
        let mut decoder = StreamDecoder::new();
        let mut got = Vec::new();
        for piece in stream.chunks(chunk) {
            got.extend(decoder.push::<Message>(piece).expect("a clean stream"));
        }
        assert_eq!(got, messages, "chunks of {chunk} bytes");
    }
}

#[test]
fn an_oversized_or_tiny_length_is_refused_before_buffering() {
    let mut decoder = StreamDecoder::new();
    let too_long = u32::try_from(FRAME_LEN_MAX + 1).expect("fits u32").to_le_bytes();
    assert_eq!(decoder.push::<Message>(&too_long), Err(WireError::Length { len: FRAME_LEN_MAX as u64 + 1 }));
    let mut decoder = StreamDecoder::new();
    assert_eq!(decoder.push::<Message>(&[2, 0, 0, 0]), Err(WireError::Length { len: 2 }));
    assert_eq!(frame_len(u32::MAX.to_le_bytes()), Err(WireError::Length { len: u64::from(u32::MAX) }));
    assert_eq!(frame_len(100u32.to_le_bytes()), Ok(100));
}

#[test]
fn a_damaged_stream_frame_is_an_error_not_a_value() {
    let mut bytes = encode_prefixed(&sample()).expect("a small frame");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x10;
    let mut decoder = StreamDecoder::new();
    assert_eq!(decoder.push::<Message>(&bytes), Err(WireError::Checksum));
}

#[test]
fn a_frame_too_long_to_send_is_refused_at_the_sender() {
    let huge = vec![0u8; FRAME_LEN_MAX];
    assert!(matches!(encode_prefixed(&huge), Err(WireError::Length { .. })));
}
