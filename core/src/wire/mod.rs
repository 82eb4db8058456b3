//! The wire format, one for both worlds: the simulator's network and a real
//! node's TCP streams carry the same frames.
//!
//! A frame is the postcard encoding of the value followed by a little-endian
//! CRC-32 of that encoding. Serializing for real exercises the codec on every
//! message, and the checksum lets a receiver drop a corrupted frame instead of
//! acting on it: CRC-32 detects every single-bit error, so a flipped bit is
//! never decoded as a valid message.
//!
//! A stream (TCP) has no message boundaries, so on a stream each frame goes
//! behind a little-endian `u32` length ([`encode_prefixed`], [`StreamDecoder`]).
//! The length is checked against [`FRAME_LEN_MAX`] before any byte of the
//! frame is buffered: a peer that sends garbage costs at most one bounded
//! buffer, and every error here means "close this connection", never a panic.
//! This stays sans-IO like the rest of the crate: the caller reads and writes
//! the bytes; this module only cuts and checks them.

pub mod envelope;

pub use envelope::Envelope;

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;

/// Bytes of the checksum trailer.
const CHECKSUM_LEN: usize = 4;

/// Bytes of a stream frame's length prefix.
pub const PREFIX_LEN: usize = 4;

/// The longest frame a stream accepts (checksum included). A snapshot of a
/// full lock table (`SESSIONS_MAX` sessions and their locks) is well under a
/// megabyte; 16 MiB leaves room and still bounds what one connection may
/// make a process buffer.
pub const FRAME_LEN_MAX: usize = 16 << 20;

/// Initial capacity of an encoded frame; most messages fit, larger ones grow.
const FRAME_CAPACITY_HINT: usize = 128;

/// Why a frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The checksum does not match the body: the frame was damaged in flight.
    Checksum,
    /// Too short for a trailer, or the body is not a valid encoding of the type.
    Malformed,
    /// A stream announced a frame longer than [`FRAME_LEN_MAX`] (or too short
    /// to hold a checksum): the stream is out of step or not ours.
    Length { len: u64 },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Checksum => f.write_str("checksum mismatch"),
            WireError::Malformed => f.write_str("malformed frame"),
            WireError::Length { len } => {
                write!(f, "frame length {len} outside {CHECKSUM_LEN}..={FRAME_LEN_MAX}")
            }
        }
    }
}

impl std::error::Error for WireError {}

/// Encodes `value` as a frame: postcard bytes, then their CRC-32.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Room for a typical message and its trailer up front: growing a vector
    // byte by byte was a visible share of the run time.
    let mut bytes = postcard::serialize_with_flavor(value, Bytes(Vec::with_capacity(FRAME_CAPACITY_HINT)))
        .expect("postcard encodes every message type");
    let checksum = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    bytes
}

/// postcard's output: a vector that takes a one-byte piece as a push.
/// postcard hands over every integer as a slice of one to ten bytes (its
/// varint), most of them one byte (a term, a small index, a tag), and
/// `Vec::extend` copied each with a call to `memcpy`: about half a million
/// calls per ten seeds of a hunt. Pushing every short piece byte by byte
/// instead cost more than the calls it saved; one byte is the case to take.
struct Bytes(Vec<u8>);

impl postcard::ser_flavors::Flavor for Bytes {
    type Output = Vec<u8>;

    #[inline]
    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        self.0.push(byte);
        Ok(())
    }

    #[inline]
    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        match bytes {
            [byte] => self.0.push(*byte),
            _ => self.0.extend_from_slice(bytes),
        }
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Vec<u8>> {
        Ok(self.0)
    }
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

/// Encodes `value` for a stream: the frame's length as a little-endian
/// `u32`, then the frame. Fails (instead of sending what no receiver would
/// accept) when the frame is longer than [`FRAME_LEN_MAX`].
pub fn encode_prefixed<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    let frame = encode(value);
    let len = u32::try_from(frame.len()).map_err(|_| WireError::Length { len: frame.len() as u64 })?;
    check_frame_len(len)?;
    let mut bytes = Vec::with_capacity(PREFIX_LEN + frame.len());
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(&frame);
    Ok(bytes)
}

/// Reads a length prefix: the length of the frame that follows, if a
/// receiver may accept it.
pub fn frame_len(prefix: [u8; PREFIX_LEN]) -> Result<usize, WireError> {
    let len = u32::from_le_bytes(prefix);
    check_frame_len(len)?;
    Ok(len as usize)
}

fn check_frame_len(len: u32) -> Result<(), WireError> {
    let ok = (CHECKSUM_LEN..=FRAME_LEN_MAX).contains(&(len as usize));
    if ok {
        Ok(())
    } else {
        Err(WireError::Length { len: u64::from(len) })
    }
}

/// Cuts a byte stream into frames as bytes arrive, in any split. Holds at
/// most one prefix and one frame of at most [`FRAME_LEN_MAX`] bytes.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    buffer: Vec<u8>,
    /// The length of the frame being read, once its prefix is complete.
    expected: Option<usize>,
}

impl StreamDecoder {
    pub fn new() -> StreamDecoder {
        StreamDecoder::default()
    }

    /// Takes `bytes` from the stream and returns every value they complete,
    /// in order. After an error the decoder is out of step with the stream:
    /// the caller closes the connection.
    pub fn push<T: DeserializeOwned>(&mut self, mut bytes: &[u8]) -> Result<Vec<T>, WireError> {
        let mut values = Vec::new();
        while !bytes.is_empty() {
            let want = match self.expected {
                None => PREFIX_LEN - self.buffer.len(),
                Some(len) => len - self.buffer.len(),
            };
            let take = want.min(bytes.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if take < want {
                break;
            }
            match self.expected {
                None => {
                    let prefix: [u8; PREFIX_LEN] = self.buffer[..].try_into().expect("a whole prefix");
                    self.expected = Some(frame_len(prefix)?);
                    self.buffer.clear();
                }
                Some(_) => {
                    values.push(decode(&self.buffer)?);
                    self.expected = None;
                    self.buffer.clear();
                }
            }
            assert!(self.buffer.len() <= FRAME_LEN_MAX, "the buffer holds at most one frame");
        }
        Ok(values)
    }
}

#[cfg(test)]
mod tests;
