//! The log file as a whole: its header, replaying it into an image on open,
//! and writing a fresh file that replaces the old one atomically.

use super::error::{io, StorageError};
use super::image::{self, Op};
use super::record::{self, Bad, RECORD_BYTES_MAX};
use fencelock::raft::DurableState;
use fencelock::NodeId;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// The log's name inside a data dir.
pub const WAL_FILE: &str = "raft.wal";
/// A fresh log being written; renamed over [`WAL_FILE`] once it is durable.
pub const WAL_TMP_FILE: &str = "raft.wal.tmp";
/// A log file larger than this is refused on open: it is read whole into
/// memory, and rewrites keep a healthy one far smaller.
pub const WAL_FILE_BYTES_MAX: u64 = 4 << 30;

const MAGIC: [u8; 8] = *b"FENCEWAL";
/// The layout of records and ops this build writes and reads.
const FORMAT: u32 = 1;

/// The first record of every log: whose log it is. Keeping it inside the log
/// (rather than in a file beside it) means a rewrite, a backup and a restore
/// move identity and data together in one atomic rename.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    magic: [u8; 8],
    format: u32,
    pub cluster_id: String,
    pub node: NodeId,
}

impl Header {
    pub fn new(cluster_id: &str, node: NodeId) -> Header {
        Header { magic: MAGIC, format: FORMAT, cluster_id: cluster_id.to_string(), node }
    }

    /// Refuses the log of another cluster or node, naming both.
    pub fn check(&self, path: &Path, cluster_id: &str, node: NodeId) -> Result<(), StorageError> {
        if self.cluster_id == cluster_id && self.node == node {
            return Ok(());
        }
        Err(StorageError::Identity {
            path: path.to_path_buf(),
            found_cluster_id: self.cluster_id.clone(),
            found_node: self.node,
            cluster_id: cluster_id.to_string(),
            node,
        })
    }
}

/// What a log file holds.
pub struct Replay {
    pub header: Header,
    pub image: DurableState,
    /// Bytes up to the end of the last good record.
    pub valid_bytes: u64,
    /// Records after the header, up to `valid_bytes`.
    pub records: u64,
    /// A torn tail that starts at `valid_bytes`, and what was wrong with it.
    pub torn: Option<Bad>,
}

/// Reads a whole log file, refusing one above [`WAL_FILE_BYTES_MAX`].
pub fn read_file(path: &Path) -> Result<Vec<u8>, StorageError> {
    let bytes_total = fs::metadata(path).map_err(io(path, "stat"))?.len();
    if bytes_total > WAL_FILE_BYTES_MAX {
        let reason = format!("{bytes_total} bytes, above the {WAL_FILE_BYTES_MAX} a log may hold");
        return Err(StorageError::Corrupt { path: path.to_path_buf(), offset: 0, reason });
    }
    fs::read(path).map_err(io(path, "read"))
}

/// Reads only the header of `bytes`.
pub fn read_header(path: &Path, bytes: &[u8]) -> Result<(Header, usize), StorageError> {
    let corrupt = |reason: String| StorageError::Corrupt { path: path.to_path_buf(), offset: 0, reason };
    // A log is created whole by a rename, so even a torn header is corruption, not a torn tail.
    let (header, next) = record::read::<Header>(bytes, 0).map_err(|bad| corrupt(format!("bad header: {bad}")))?;
    if header.magic != MAGIC {
        return Err(corrupt("not a fencelock log (wrong magic)".to_string()));
    }
    if header.format != FORMAT {
        return Err(corrupt(format!("log format {}, this build reads {FORMAT}", header.format)));
    }
    Ok((header, next))
}

/// Replays the log in `bytes` (read from `path`) for `cluster_id`'s node
/// `node`. Changes nothing on disk: the caller cuts a torn tail.
///
/// A bad record is a torn tail only if no whole record starts anywhere after
/// it: a crash can cut short only the last write, so a good record behind a
/// bad one means the disk lost or changed data that was durable, and
/// replaying around it would hand Raft a log with a hole. Every byte offset
/// after the bad record is tried, since its length may be the damaged part.
/// The one false alarm this allows is a torn record whose payload happens to
/// contain a whole record (a client would have to craft a lock key for it):
/// then the dir is refused, which errs toward keeping data.
pub fn replay(path: &Path, bytes: &[u8], cluster_id: &str, node: NodeId) -> Result<Replay, StorageError> {
    let (header, mut offset) = read_header(path, bytes)?;
    header.check(path, cluster_id, node)?;
    let mut image = DurableState::default();
    let mut records = 0;
    let mut torn = None;
    // Each record is at least 9 bytes long, so the loop ends within the file.
    while offset < bytes.len() {
        match record::read::<Op>(bytes, offset) {
            Ok((op, next)) => {
                if let Err(reason) = image::apply(&mut image, &op) {
                    let reason = format!("record {} does not follow the ones before: {reason}", records + 1);
                    return Err(StorageError::Corrupt { path: path.to_path_buf(), offset: offset as u64, reason });
                }
                records += 1;
                offset = next;
            }
            Err(bad) => {
                if let Some(good) = record::find_valid::<Op>(bytes, offset + 1) {
                    let reason = format!("{bad}, yet a whole record follows at byte {good}");
                    return Err(StorageError::Corrupt { path: path.to_path_buf(), offset: offset as u64, reason });
                }
                torn = Some(bad);
                break;
            }
        }
    }
    Ok(Replay { header, image, valid_bytes: offset as u64, records, torn })
}

/// Appends the records of `op` to `out`; returns how many. An append too big
/// for one record is split in halves, which the image applies the same way
/// (the second half starts right after the first, so it truncates nothing).
pub fn encode_op(op: &Op, out: &mut Vec<u8>) -> u64 {
    encode_op_within(op, out, RECORD_BYTES_MAX)
}

fn encode_op_within(op: &Op, out: &mut Vec<u8>, payload_bytes_max: usize) -> u64 {
    let start = out.len();
    let payload_bytes = record::encode(op, out);
    if payload_bytes <= payload_bytes_max {
        return 1;
    }
    out.truncate(start);
    match op {
        Op::Append(entries) if entries.len() > 1 => {
            let (first, second) = entries.split_at(entries.len() / 2);
            encode_op_within(&Op::Append(first.to_vec()), out, payload_bytes_max)
                + encode_op_within(&Op::Append(second.to_vec()), out, payload_bytes_max)
        }
        _ => panic!("storage: one write of {payload_bytes} bytes is above the record limit of {payload_bytes_max}"),
    }
}

/// Writes a fresh log holding `image` into `dir`, replacing any log there.
/// Returns its size in bytes and records after the header.
///
/// The new file is written beside the old one, made durable, renamed over
/// it, and the rename made durable by an fsync of the dir: a crash at any
/// point leaves either the old file or the new one, whole (a leftover
/// temporary file is removed on the next open).
pub fn write_whole(dir: &Path, header: &Header, image: &DurableState) -> Result<(u64, u64), StorageError> {
    let mut bytes = Vec::new();
    record::encode(header, &mut bytes);
    let records = image::ops_of(image).iter().map(|op| encode_op(op, &mut bytes)).sum();
    let tmp_path = dir.join(WAL_TMP_FILE);
    let mut file =
        OpenOptions::new().write(true).create(true).truncate(true).open(&tmp_path).map_err(io(&tmp_path, "create"))?;
    file.write_all(&bytes).map_err(io(&tmp_path, "write"))?;
    file.sync_all().map_err(io(&tmp_path, "fsync"))?;
    drop(file);
    let wal_path = dir.join(WAL_FILE);
    fs::rename(&tmp_path, &wal_path).map_err(io(&wal_path, "rename"))?;
    sync_dir(dir)?;
    Ok((bytes.len() as u64, records))
}

/// Makes the dir's entries (a created or renamed file) durable.
pub fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir, "fsync dir"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::raft::{Entry, Payload};
    use fencelock::{LogIndex, Term};

    #[test]
    fn an_append_above_the_record_limit_is_split_and_replays_the_same() {
        let entries: Vec<Entry> =
            (1..=100).map(|i| Entry { term: Term(1), index: LogIndex(i), payload: Payload::Noop }).collect();
        let mut bytes = Vec::new();
        let records = encode_op_within(&Op::Append(entries.clone()), &mut bytes, 64);
        assert!(records >= 4, "{records} records");
        let mut image = DurableState::default();
        let mut offset = 0;
        for _ in 0..records {
            let (op, next) = record::read::<Op>(&bytes, offset).expect("a whole record");
            assert!(matches!(&op, Op::Append(part) if part.len() <= 32));
            image::apply(&mut image, &op).expect("the halves follow each other");
            offset = next;
        }
        assert_eq!(offset, bytes.len());
        assert_eq!(image.entries, entries);
    }
}
