//! The framing of one record in the log file, and reading records back.
//!
//! A record is `length (u32 LE) · payload · CRC-32 (u32 LE)`, where the
//! payload is the postcard encoding of one value and the checksum covers the
//! length and the payload. Covering the length too means a run of zeros (what
//! a file system may show past the last synced write after a power loss) is
//! never a valid record: its length is 0, and a record is never empty.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The largest payload written or accepted. A length above it is read as
/// corruption rather than trusted, so a flipped bit cannot make the reader
/// skip or allocate gigabytes. Large appends are split to fit (see
/// `Storage::append`); a single entry or snapshot above it is a bug upstream.
pub const RECORD_BYTES_MAX: usize = 64 << 20;

/// Why no record could be read at an offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// The file ends inside the record (a write cut short).
    Short,
    /// The length is 0 or above [`RECORD_BYTES_MAX`].
    Length(u32),
    Checksum,
    /// The checksum matched but the payload is not one value of the expected type.
    Decode,
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bad::Short => write!(f, "the file ends inside the record"),
            Bad::Length(length) => write!(f, "length {length} is outside 1..={RECORD_BYTES_MAX}"),
            Bad::Checksum => write!(f, "checksum mismatch"),
            Bad::Decode => write!(f, "the payload does not decode"),
        }
    }
}

/// Appends the record of `value` to `out`; returns the payload's size.
pub fn encode<T: Serialize>(value: &T, out: &mut Vec<u8>) -> usize {
    let payload = postcard::to_stdvec(value).expect("postcard encodes every storage value");
    let length = u32::try_from(payload.len()).expect("a payload under 4 GiB");
    let start = out.len();
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(&payload);
    let checksum = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&checksum.to_le_bytes());
    payload.len()
}

/// Reads the record at `offset` of `bytes` as a `T`; returns it and the
/// offset just past it.
pub fn read<T: DeserializeOwned>(bytes: &[u8], offset: usize) -> Result<(T, usize), Bad> {
    let (payload, next) = frame(bytes, offset)?;
    // `take_from_bytes`, not `from_bytes`: trailing bytes in a payload are corruption too.
    match postcard::take_from_bytes::<T>(payload) {
        Ok((value, [])) => Ok((value, next)),
        _ => Err(Bad::Decode),
    }
}

/// The first offset in `from..bytes.len()` where a whole `T` record starts.
/// Scans every byte offset, because after a bad record its length cannot be
/// trusted to say where the next one begins.
pub fn find_valid<T: DeserializeOwned>(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len()).find(|&offset| read::<T>(bytes, offset).is_ok())
}

fn frame(bytes: &[u8], offset: usize) -> Result<(&[u8], usize), Bad> {
    let rest = bytes.get(offset..).unwrap_or_default();
    let Some(length_bytes) = rest.get(..4) else { return Err(Bad::Short) };
    let length = u32::from_le_bytes(length_bytes.try_into().expect("four bytes"));
    let payload_bytes = usize::try_from(length).unwrap_or(usize::MAX);
    if payload_bytes == 0 || payload_bytes > RECORD_BYTES_MAX {
        return Err(Bad::Length(length));
    }
    let Some(record) = rest.get(..4 + payload_bytes + 4) else { return Err(Bad::Short) };
    let (covered, checksum_bytes) = record.split_at(4 + payload_bytes);
    let checksum = u32::from_le_bytes(checksum_bytes.try_into().expect("four bytes"));
    if crc32fast::hash(covered) != checksum {
        return Err(Bad::Checksum);
    }
    Ok((&covered[4..], offset + record.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_every_damage_is_named() {
        let mut bytes = Vec::new();
        encode(&"hello".to_string(), &mut bytes);
        encode(&7u64, &mut bytes);
        let (first, next) = read::<String>(&bytes, 0).unwrap();
        assert_eq!((first.as_str(), next), ("hello", 14));
        assert_eq!(read::<u64>(&bytes, next).unwrap(), (7, bytes.len()));
        assert_eq!(read::<u64>(&bytes[..bytes.len() - 1], next), Err(Bad::Short));
        assert_eq!(read::<u64>(&[0; 12], 0), Err(Bad::Length(0)));
        let mut flipped = bytes.clone();
        flipped[5] ^= 1;
        assert_eq!(read::<String>(&flipped, 0), Err(Bad::Checksum));
        // A whole record of another type does not decode.
        assert_eq!(read::<(u64, u64)>(&bytes, next), Err(Bad::Decode));
        assert_eq!(find_valid::<u64>(&flipped, 1), Some(next));
        assert_eq!(find_valid::<u64>(&flipped[..bytes.len() - 1], 1), None);
    }
}
