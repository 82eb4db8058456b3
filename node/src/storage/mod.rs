//! A node's durable Raft state in files: what the simulator's disk
//! (`sim/src/machine/disk.rs`) models, made real.
//!
//! A data dir holds one log file ([`WAL_FILE`]). Its first record names the
//! cluster and node it belongs to; every later record is one write of the
//! simulator's disk model (append, hard state, snapshot, compact, recovered),
//! and replaying them in order gives the [`DurableState`] the node restarts
//! from (the rules are in `image.rs`). Writes are buffered in memory until
//! [`Storage::sync`], which appends them and fsyncs: as in the simulator, a
//! crash loses every write since the last completed sync, and may leave a
//! torn last record, which the next open cuts off. A bad record with a good
//! one after it is not a crash's doing, so opening refuses the dir and
//! changes nothing: an operator restores the node instead.
//!
//! The log is rewritten whole (the current image as a handful of records) on
//! every compaction and whenever it has grown past [`StorageLimits`] since the
//! last rewrite, so replay time and disk use stay bounded. A rewrite goes to a
//! new file that is renamed over the old one, so a crash leaves one whole log.
//!
//! Driving it, as `sim/src/nodes/server.rs` drives the simulated disk: for
//! each `Ready`, call [`Storage::install_snapshot`], then [`Storage::append`],
//! then [`Storage::set_hard_state`]; call [`Storage::sync`] before sending
//! `messages_after_persist` whenever a snapshot, entries, or a new term or
//! vote were written (a commit index alone may wait for the next sync, since
//! it is recomputed after a crash). Pass `Output::Compacted` to
//! [`Storage::compact`], and call [`Storage::mark_recovered`] after a sync once
//! the node has left recovery while `durable().restored_from_backup` is set.
//!
//! Choices against the first sketch, and why: the cluster and node ids live
//! in the log's first record, not in a `cluster.toml` beside it, so a
//! rewrite, a backup or a restore moves identity and data in one atomic
//! rename; the checksum covers the length as well as the payload, so zeros
//! past the end of a file are never a record; a backup is the durable image
//! written as a fresh log rather than a byte copy, which is the same state,
//! compact and whole by construction.
//!
//! Storage uses blocking `std::fs` calls: the driver waits for them the way a
//! simulated server awaits its fsync, and nothing else runs on its loop in
//! between that could use the time. Two processes opening the same dir are
//! not prevented (`File::lock` needs Rust 1.89; the workspace supports 1.80):
//! the deployment gives each node its own dir.

mod error;
mod image;
mod log_file;
mod record;

pub use error::StorageError;
pub use log_file::{WAL_FILE, WAL_FILE_BYTES_MAX, WAL_TMP_FILE};
pub use record::RECORD_BYTES_MAX;

use error::io;
use fencelock::raft::{DurableState, Entry, HardState, Snapshot};
use fencelock::NodeId;
use image::Op;
use log_file::Header;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Writes accepted without a sync; a driver that never syncs is a bug, and
/// this turns it into a loud failure, as the simulator's `PENDING_MAX` does.
pub const OPS_PENDING_MAX: usize = 1_000_000;
/// Bytes of buffered records accepted without a sync.
pub const BYTES_PENDING_MAX: usize = 1 << 30;
/// A cluster id is a short name an operator types.
pub const CLUSTER_ID_BYTES_MAX: usize = 64;
/// Enough of a log's start to hold its header, whose cluster id is bounded.
const HEADER_READ_BYTES: u64 = 4_096;

/// When the log is rewritten besides on compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageLimits {
    /// Rewrite once the log has grown this many bytes since its last rewrite.
    pub growth_bytes_max: u64,
    /// Rewrite once this many records were appended since the last rewrite.
    pub growth_records_max: u64,
}

impl StorageLimits {
    /// Compaction (every 256 applied entries in the standard Raft config)
    /// usually rewrites first; these bound the log between compactions, for
    /// writes that never lead to one, such as the hard states of a long run
    /// of failed elections.
    pub fn standard() -> StorageLimits {
        StorageLimits { growth_bytes_max: 64 << 20, growth_records_max: 65_536 }
    }
}

/// Counters for status pages and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StorageStats {
    /// Size of the log file as of the last sync.
    pub wal_bytes: u64,
    /// Records in the log after its header.
    pub wal_records: u64,
    pub rewrites_total: u64,
    /// Writes buffered for the next sync.
    pub ops_pending: usize,
}

/// One node's data dir, open for writing.
pub struct Storage {
    dir: PathBuf,
    wal_path: PathBuf,
    header: Header,
    limits: StorageLimits,
    /// Opened for appending; reopened after every rewrite, which replaces the file.
    file: File,
    /// The image as of the last sync.
    durable: DurableState,
    /// The image with the buffered writes applied: each write is checked
    /// against it when it is made, so an impossible one fails at its caller.
    written: DurableState,
    pending_ops: Vec<Op>,
    pending_bytes: Vec<u8>,
    pending_records: u64,
    rewrite_due: bool,
    wal_bytes: u64,
    wal_records: u64,
    /// Size of the log as of its last rewrite (or open), to measure growth.
    base_bytes: u64,
    base_records: u64,
    rewrites_total: u64,
    /// Set by the first failed write or fsync; see [`StorageError::Poisoned`].
    poisoned: Option<String>,
}

impl Storage {
    /// Opens (or creates, if the dir is empty/missing) node `node`'s data dir for cluster `cluster_id`;
    /// returns the storage and what it holds durably.
    pub fn open(dir: &Path, cluster_id: &str, node: NodeId) -> Result<(Storage, DurableState), StorageError> {
        Storage::open_with(dir, cluster_id, node, StorageLimits::standard())
    }

    /// [`Storage::open`] with other rewrite limits.
    pub fn open_with(
        dir: &Path,
        cluster_id: &str,
        node: NodeId,
        limits: StorageLimits,
    ) -> Result<(Storage, DurableState), StorageError> {
        check_cluster_id(dir, cluster_id)?;
        prepare_dir(dir)?;
        let wal_path = dir.join(WAL_FILE);
        let header = Header::new(cluster_id, node);
        if !exists(&wal_path)? {
            refuse_foreign(dir)?;
            log_file::write_whole(dir, &header, &DurableState::default())?;
            tracing::info!(dir = %dir.display(), cluster_id, %node, "created a data dir");
        }
        let bytes = log_file::read_file(&wal_path)?;
        let replay = log_file::replay(&wal_path, &bytes, cluster_id, node)?;
        drop(bytes);
        if let Some(bad) = replay.torn {
            cut_tail(&wal_path, replay.valid_bytes)?;
            tracing::warn!(
                path = %wal_path.display(),
                offset = replay.valid_bytes,
                reason = %bad,
                "cut a torn record off the end of the log (a write interrupted by a crash)"
            );
        }
        let file = OpenOptions::new().append(true).open(&wal_path).map_err(io(&wal_path, "open"))?;
        let storage = Storage {
            dir: dir.to_path_buf(),
            wal_path,
            header,
            limits,
            file,
            durable: replay.image.clone(),
            written: replay.image.clone(),
            pending_ops: Vec::new(),
            pending_bytes: Vec::new(),
            pending_records: 0,
            rewrite_due: false,
            wal_bytes: replay.valid_bytes,
            wal_records: replay.records,
            base_bytes: replay.valid_bytes,
            base_records: replay.records,
            rewrites_total: 0,
            poisoned: None,
        };
        Ok((storage, replay.image))
    }

    /// Replaces node `node`'s data dir `dir` with the backup in `backup` (a
    /// dir written by [`Storage::backup_to`] or a copy of a data dir), marked
    /// durably as restored from a stale backup, and opens it. The backup is
    /// only read. A backup of another cluster or node is refused, and so is a
    /// `dir` that holds another cluster's or node's log.
    pub fn restore_from(
        backup: &Path,
        dir: &Path,
        cluster_id: &str,
        node: NodeId,
    ) -> Result<(Storage, DurableState), StorageError> {
        check_cluster_id(dir, cluster_id)?;
        let backup_path = backup.join(WAL_FILE);
        let bytes = log_file::read_file(&backup_path)?;
        let replay = log_file::replay(&backup_path, &bytes, cluster_id, node)?;
        if let Some(bad) = replay.torn {
            tracing::warn!(
                path = %backup_path.display(),
                offset = replay.valid_bytes,
                reason = %bad,
                "the backup ends in a torn record; restoring the records before it"
            );
        }
        prepare_dir(dir)?;
        check_replaceable(dir, cluster_id, node)?;
        let mut image = replay.image;
        image.restored_from_backup = true;
        log_file::write_whole(dir, &replay.header, &image)?;
        tracing::warn!(dir = %dir.display(), backup = %backup.display(), "restored the data dir from a backup");
        Storage::open(dir, cluster_id, node)
    }

    /// The durable image of node `node`'s data dir `dir` (or of a copy of
    /// one), read without changing anything: a torn last record is left out,
    /// as [`Storage::open`] would cut it.
    pub fn read_image(dir: &Path, cluster_id: &str, node: NodeId) -> Result<DurableState, StorageError> {
        let path = dir.join(WAL_FILE);
        let bytes = log_file::read_file(&path)?;
        Ok(log_file::replay(&path, &bytes, cluster_id, node)?.image)
    }

    /// Replaces node `node`'s data dir `dir` with `image`, whole and durably:
    /// a whole-cluster restore writes one snapshot to every member, with the
    /// server stopped. A dir that holds another cluster's or node's log is refused.
    pub fn write_image(dir: &Path, cluster_id: &str, node: NodeId, image: &DurableState) -> Result<(), StorageError> {
        check_cluster_id(dir, cluster_id)?;
        prepare_dir(dir)?;
        check_replaceable(dir, cluster_id, node)?;
        log_file::write_whole(dir, &Header::new(cluster_id, node), image)?;
        Ok(())
    }

    /// Writes the durable image (as of the last sync) into `dest` as a data
    /// dir of its own, replacing an earlier backup of this node there. It
    /// holds the same state as a copy of the files, rewritten compactly and whole.
    pub fn backup_to(&self, dest: &Path) -> Result<(), StorageError> {
        prepare_dir(dest)?;
        check_replaceable(dest, &self.header.cluster_id, self.header.node)?;
        log_file::write_whole(dest, &self.header, &self.durable)?;
        Ok(())
    }

    /// Appends entries, first truncating the log from `entries[0].index`. Buffered until sync.
    pub fn append(&mut self, entries: &[Entry]) {
        if !entries.is_empty() {
            self.push(Op::Append(entries.to_vec()));
        }
    }

    pub fn set_hard_state(&mut self, hard_state: HardState) {
        self.push(Op::HardState(hard_state));
    }

    /// A snapshot from the leader (`Ready::snapshot`).
    pub fn install_snapshot(&mut self, snapshot: &Snapshot) {
        self.push(Op::Snapshot(snapshot.clone()));
    }

    /// Local compaction (`Output::Compacted`): the next sync also rewrites the log.
    pub fn compact(&mut self, snapshot: &Snapshot) {
        self.push(Op::Compact(snapshot.clone()));
        self.rewrite_due = true;
    }

    /// Clears `restored_from_backup`, once the node has left recovery and the
    /// vote that ended it is durable.
    pub fn mark_recovered(&mut self) {
        self.push(Op::Recovered);
    }

    /// Writes the buffered records and fsyncs them; rewrites the log if it is
    /// due. After an error every later call fails too (see [`StorageError::Poisoned`]).
    pub fn sync(&mut self) -> Result<(), StorageError> {
        if let Some(cause) = &self.poisoned {
            return Err(StorageError::Poisoned { path: self.wal_path.clone(), cause: cause.clone() });
        }
        if self.pending_ops.is_empty() && !self.rewrite_due {
            return Ok(());
        }
        let result = self.write_pending().and_then(|()| self.rewrite_if_due());
        if let Err(error) = &result {
            self.poisoned = Some(error.to_string());
        }
        result
    }

    /// The image as of the last sync.
    pub fn durable(&self) -> &DurableState {
        &self.durable
    }

    pub fn stats(&self) -> StorageStats {
        StorageStats {
            wal_bytes: self.wal_bytes,
            wal_records: self.wal_records,
            rewrites_total: self.rewrites_total,
            ops_pending: self.pending_ops.len(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn push(&mut self, op: Op) {
        assert!(self.pending_ops.len() < OPS_PENDING_MAX, "storage: {OPS_PENDING_MAX} writes pending without a sync");
        // A write that cannot follow the log is the driver's bug: fail here,
        // before it reaches the file and makes the dir unopenable.
        if let Err(reason) = image::apply(&mut self.written, &op) {
            panic!("storage {}: {reason}", self.wal_path.display());
        }
        self.pending_records += log_file::encode_op(&op, &mut self.pending_bytes);
        assert!(
            self.pending_bytes.len() <= BYTES_PENDING_MAX,
            "storage: {} bytes pending without a sync",
            self.pending_bytes.len()
        );
        self.pending_ops.push(op);
    }

    fn write_pending(&mut self) -> Result<(), StorageError> {
        if !self.pending_bytes.is_empty() {
            self.file.write_all(&self.pending_bytes).map_err(io(&self.wal_path, "write"))?;
            // fdatasync: the data and the file size, which is all a replay reads.
            self.file.sync_data().map_err(io(&self.wal_path, "fsync"))?;
            self.wal_bytes += self.pending_bytes.len() as u64;
            self.wal_records += self.pending_records;
        }
        self.pending_bytes.clear();
        self.pending_records = 0;
        for op in self.pending_ops.drain(..) {
            image::apply(&mut self.durable, &op).expect("a write was checked against the same image when it was made");
        }
        debug_assert!(image::same(&self.durable, &self.written));
        Ok(())
    }

    fn rewrite_if_due(&mut self) -> Result<(), StorageError> {
        let grown_bytes = self.wal_bytes - self.base_bytes;
        let grown_records = self.wal_records - self.base_records;
        if !self.rewrite_due
            && grown_bytes <= self.limits.growth_bytes_max
            && grown_records <= self.limits.growth_records_max
        {
            return Ok(());
        }
        let (bytes, records) = log_file::write_whole(&self.dir, &self.header, &self.durable)?;
        self.file = OpenOptions::new().append(true).open(&self.wal_path).map_err(io(&self.wal_path, "open"))?;
        tracing::debug!(path = %self.wal_path.display(), from_bytes = self.wal_bytes, to_bytes = bytes, "rewrote the log");
        self.wal_bytes = bytes;
        self.wal_records = records;
        self.base_bytes = bytes;
        self.base_records = records;
        self.rewrites_total += 1;
        self.rewrite_due = false;
        Ok(())
    }
}

fn check_cluster_id(dir: &Path, cluster_id: &str) -> Result<(), StorageError> {
    let reason = if cluster_id.is_empty() {
        "it is empty".to_string()
    } else if cluster_id.len() > CLUSTER_ID_BYTES_MAX {
        format!("it is longer than {CLUSTER_ID_BYTES_MAX} bytes")
    } else if cluster_id.chars().any(|c| c.is_control() || c.is_whitespace()) {
        "it holds whitespace or control characters".to_string()
    } else {
        return Ok(());
    };
    Err(StorageError::InvalidClusterId { path: dir.to_path_buf(), cluster_id: cluster_id.to_string(), reason })
}

/// Creates `dir` if it is missing (durably, with its entry in the parent) and
/// removes a temporary log a crash left behind.
fn prepare_dir(dir: &Path) -> Result<(), StorageError> {
    if !exists(dir)? {
        fs::create_dir_all(dir).map_err(io(dir, "create dir"))?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            log_file::sync_dir(parent)?;
        }
    }
    let tmp_path = dir.join(WAL_TMP_FILE);
    if exists(&tmp_path)? {
        // An unfinished rewrite or creation: the log beside it (if any) is the whole one.
        fs::remove_file(&tmp_path).map_err(io(&tmp_path, "remove"))?;
        tracing::warn!(path = %tmp_path.display(), "removed a log rewrite a crash interrupted");
    }
    Ok(())
}

/// Before a log is written whole into `dir` over what is there: refuses a
/// dir holding another cluster's or node's log, or files but no log.
fn check_replaceable(dir: &Path, cluster_id: &str, node: NodeId) -> Result<(), StorageError> {
    let wal_path = dir.join(WAL_FILE);
    if !exists(&wal_path)? {
        return refuse_foreign(dir);
    }
    let mut start = Vec::new();
    let file = File::open(&wal_path).map_err(io(&wal_path, "open"))?;
    // The header is small (the cluster id is bounded); the rest need not be read.
    file.take(HEADER_READ_BYTES).read_to_end(&mut start).map_err(io(&wal_path, "read"))?;
    // Only a readable header can say the log is another node's; an
    // unreadable one is what restores are for, so it may be replaced.
    match log_file::read_header(&wal_path, &start) {
        Ok((header, _)) => header.check(&wal_path, cluster_id, node),
        Err(_) => Ok(()),
    }
}

/// Refuses to create a log in a dir that already holds something else.
fn refuse_foreign(dir: &Path) -> Result<(), StorageError> {
    let mut entries = fs::read_dir(dir).map_err(io(dir, "list"))?;
    match entries.next() {
        None => Ok(()),
        Some(entry) => {
            let entry = entry.map_err(io(dir, "list"))?;
            Err(StorageError::Foreign {
                path: dir.to_path_buf(),
                entry: entry.file_name().to_string_lossy().into_owned(),
            })
        }
    }
}

fn cut_tail(wal_path: &Path, valid_bytes: u64) -> Result<(), StorageError> {
    let file = OpenOptions::new().write(true).open(wal_path).map_err(io(wal_path, "open"))?;
    file.set_len(valid_bytes).map_err(io(wal_path, "truncate"))?;
    file.sync_all().map_err(io(wal_path, "fsync"))
}

fn exists(path: &Path) -> Result<bool, StorageError> {
    path.try_exists().map_err(io(path, "stat"))
}
