//! A node's disk: a store held outside the node, so it outlives a kill.
//!
//! madsim's file system keeps unsynced writes across a kill and has no power
//! failure (MADSIM.md, "Disk"), so the disk is modelled here. A [`Disk`] has a
//! durable image and a queue of pending writes. `fsync` makes a prefix of the
//! pending writes durable after a modelled latency; a crash drops the pending
//! writes, optionally keeping a torn prefix; a backup is a copy of the durable
//! image. Writes are operations on an [`Image`], so the same disk serves a Raft
//! server ([`NodeImage`]) and the protected resource.

use fencelock::raft::{DurableState, Entry, HardState, Snapshot};
use fencelock::resource::{LockFloor, ResourceState, Write};
use fencelock::{LogIndex, Variant};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Pending writes a disk accepts before the writer must fsync; a writer that
/// never syncs is a bug, and this turns it into a loud failure.
pub const PENDING_MAX: usize = 1_000_000;

/// The state a disk holds, changed only by applying its operations in order.
pub trait Image: Clone {
    type Op: Clone;
    fn apply(&mut self, op: &Self::Op);
}

/// A durable image plus the writes not yet made durable.
#[derive(Clone, Debug)]
pub struct Disk<I: Image> {
    durable: I,
    pending: Vec<I::Op>,
    fsync_us: u64,
    /// While the disk stalls, the latency of every fsync instead of `fsync_us` (0: not stalled).
    stall_us: u64,
    /// Writes ever accepted, and writes ever made durable or dropped: positions
    /// in the write stream, so overlapping fsyncs each sync exactly their prefix.
    written_total: u64,
    settled_total: u64,
}

impl<I: Image> Disk<I> {
    pub fn new(image: I, fsync_us: u64) -> Disk<I> {
        Disk { durable: image, pending: Vec::new(), fsync_us, stall_us: 0, written_total: 0, settled_total: 0 }
    }

    /// Queues a write; it becomes durable only through a sync.
    pub fn write(&mut self, op: I::Op) {
        assert!(self.pending.len() < PENDING_MAX, "disk: {PENDING_MAX} writes pending without an fsync");
        self.pending.push(op);
        self.written_total += 1;
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The writes not yet durable, oldest first.
    pub fn pending(&self) -> &[I::Op] {
        &self.pending
    }

    /// Makes the first `upto` pending writes durable, in order.
    pub fn sync(&mut self, upto: usize) {
        assert!(upto <= self.pending.len(), "disk: sync of {upto} writes, only {} pending", self.pending.len());
        for op in self.pending.drain(..upto) {
            self.durable.apply(&op);
        }
        self.settled_total += upto as u64;
        assert_eq!(self.settled_total + self.pending.len() as u64, self.written_total);
    }

    /// Power loss: the pending writes are lost, except a torn prefix of
    /// `torn_keep` of them that reached the platter before the power went.
    pub fn crash(&mut self, torn_keep: usize) {
        let keep = torn_keep.min(self.pending.len());
        self.sync(keep);
        self.settled_total += self.pending.len() as u64;
        self.pending.clear();
    }

    pub fn durable(&self) -> &I {
        &self.durable
    }

    /// A copy of the durable part (what a backup tool would read).
    pub fn backup(&self) -> I {
        self.durable.clone()
    }

    /// Replaces the durable image with `image` and drops the pending writes.
    pub fn restore(&mut self, image: I) {
        self.durable = image;
        self.settled_total += self.pending.len() as u64;
        self.pending.clear();
    }

    /// The latency of an fsync started now.
    pub fn fsync_us(&self) -> u64 {
        if self.stall_us > 0 {
            self.stall_us
        } else {
            self.fsync_us
        }
    }

    /// A slow or dying disk: fsyncs started from now take `stall_us` (0 ends the stall).
    pub fn set_stall_us(&mut self, stall_us: u64) {
        self.stall_us = stall_us;
    }

    /// Position just past the last accepted write.
    fn written_mark(&self) -> u64 {
        self.written_total
    }

    /// Syncs every write before `mark` that is still pending.
    fn sync_to_mark(&mut self, mark: u64) {
        let upto = mark.saturating_sub(self.settled_total);
        let upto = usize::try_from(upto).expect("pending writes fit in usize").min(self.pending.len());
        self.sync(upto);
    }
}

/// A disk shared between its node's tasks and the world, which outlives the node.
pub type SharedDisk<I> = Arc<Mutex<Disk<I>>>;

/// Makes every write accepted so far durable, after the disk's fsync latency.
///
/// If the node is killed during the sleep, this task is dropped and nothing
/// becomes durable: that is the crash semantics. A crash or restore of the
/// disk during the sleep has already settled the writes, so they are not
/// synced twice. A latency of 0 syncs at once, without sleeping.
pub async fn fsync<I: Image>(disk: &SharedDisk<I>) {
    let (mark, fsync_us) = {
        let d = disk.lock().expect("disk lock");
        (d.written_mark(), d.fsync_us())
    };
    if fsync_us > 0 {
        crate::machine::clock::sleep(Duration::from_micros(fsync_us)).await;
    }
    disk.lock().expect("disk lock").sync_to_mark(mark);
}

/// The protected resource's durable image: its state plus the variant that
/// decides how replayed writes are judged.
#[derive(Clone, Debug, Default)]
pub struct ResourceImage {
    pub state: ResourceState,
    pub variant: Variant,
}

/// One write to a [`ResourceImage`].
#[derive(Clone, Debug, PartialEq)]
pub enum ResourceOp {
    /// A client's write, judged again as it was judged in memory.
    Write(Write),
    /// The floors read after restore `restore`: writes are served again.
    Floor { restore: u64, floor: LockFloor },
}

impl Image for ResourceImage {
    type Op = ResourceOp;

    fn apply(&mut self, op: &ResourceOp) {
        match op {
            ResourceOp::Write(write) => {
                self.state.write(write, self.variant);
            }
            ResourceOp::Floor { restore, floor } => {
                self.state.raise_floor(*restore, floor);
            }
        }
    }
}

/// What a Raft server keeps on disk.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeImage {
    pub hard_state: HardState,
    pub snapshot: Option<Snapshot>,
    /// Entries after the snapshot, contiguous, in index order.
    pub entries: Vec<Entry>,
    pub restored_from_backup: bool,
}

/// One write to a [`NodeImage`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum NodeOp {
    HardState(HardState),
    /// Appends entries, first truncating the log from `entries[0].index` (a
    /// follower overwriting a conflicting suffix).
    Append(Vec<Entry>),
    /// Installs a snapshot received from the leader: entries up to its index
    /// go; the suffix after it stays only if the log agrees at the snapshot's
    /// index and term, otherwise the whole log goes.
    Snapshot(Snapshot),
    /// Local compaction: drops the entries the snapshot covers.
    Compact(Snapshot),
    /// The node has relearned what its restored disk forgot (it left
    /// recovery and its vote for the current leader is durable).
    Recovered,
}

impl NodeImage {
    /// What the node recovers when it starts from this image.
    pub fn to_durable(&self) -> DurableState {
        DurableState {
            hard_state: self.hard_state,
            snapshot: self.snapshot.clone(),
            entries: self.entries.clone(),
            restored_from_backup: self.restored_from_backup,
        }
    }

    /// Index of the last entry, or of the snapshot when the log is empty.
    pub fn last_index(&self) -> LogIndex {
        match (self.entries.last(), &self.snapshot) {
            (Some(entry), _) => entry.index,
            (None, Some(snapshot)) => snapshot.index,
            (None, None) => LogIndex(0),
        }
    }

    fn snapshot_index(&self) -> LogIndex {
        self.snapshot.as_ref().map_or(LogIndex(0), |s| s.index)
    }

    fn append(&mut self, entries: &[Entry]) {
        let Some(first) = entries.first() else { return };
        for pair in entries.windows(2) {
            assert_eq!(pair[1].index.0, pair[0].index.0 + 1, "disk: appended entries are not contiguous");
        }
        assert!(
            first.index > self.snapshot_index(),
            "disk: append at {} overwrites the snapshot at {}",
            first.index,
            self.snapshot_index()
        );
        let keep = self.entries.partition_point(|e| e.index < first.index);
        self.entries.truncate(keep);
        assert_eq!(
            first.index.0,
            self.last_index().0 + 1,
            "disk: append at {} leaves a gap after {}",
            first.index,
            self.last_index()
        );
        self.entries.extend_from_slice(entries);
    }

    fn install(&mut self, snapshot: &Snapshot, keep_matching_suffix: bool) {
        assert!(
            snapshot.index >= self.snapshot_index(),
            "disk: snapshot at {} is older than the one at {}",
            snapshot.index,
            self.snapshot_index()
        );
        let agrees = self.entries.iter().any(|e| e.index == snapshot.index && e.term == snapshot.term);
        if keep_matching_suffix && !agrees {
            self.entries.clear();
        } else {
            self.entries.retain(|e| e.index > snapshot.index);
        }
        self.snapshot = Some(snapshot.clone());
    }
}

impl Image for NodeImage {
    type Op = NodeOp;

    fn apply(&mut self, op: &NodeOp) {
        match op {
            NodeOp::HardState(hard_state) => self.hard_state = *hard_state,
            NodeOp::Append(entries) => self.append(entries),
            NodeOp::Snapshot(snapshot) => self.install(snapshot, true),
            NodeOp::Compact(snapshot) => self.install(snapshot, false),
            NodeOp::Recovered => self.restored_from_backup = false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::raft::Payload;
    use fencelock::{LockState, NodeId, Term, Token};

    fn entries(from: u64, to: u64, term: u64) -> Vec<Entry> {
        (from..=to).map(|i| Entry { term: Term(term), index: LogIndex(i), payload: Payload::Noop }).collect()
    }

    fn snapshot(index: u64, term: u64) -> Snapshot {
        Snapshot { index: LogIndex(index), term: Term(term), state: LockState::new(Token(40)) }
    }

    fn indexes(image: &NodeImage) -> Vec<u64> {
        image.entries.iter().map(|e| e.index.0).collect()
    }

    #[test]
    fn a_crash_loses_unsynced_writes() {
        let mut disk = Disk::new(NodeImage::default(), 0);
        disk.write(NodeOp::Append(entries(1, 3, 1)));
        disk.sync(1);
        disk.write(NodeOp::Append(entries(4, 5, 1)));
        disk.write(NodeOp::HardState(HardState { term: Term(2), vote: Some(NodeId(1)), commit: LogIndex(3) }));
        assert_eq!(disk.pending_len(), 2);
        disk.crash(0);
        assert_eq!(disk.pending_len(), 0);
        assert_eq!(indexes(disk.durable()), vec![1, 2, 3]);
        assert_eq!(disk.durable().hard_state, HardState::default());
    }

    #[test]
    fn a_torn_crash_keeps_a_prefix() {
        let mut disk = Disk::new(NodeImage::default(), 0);
        disk.write(NodeOp::Append(entries(1, 2, 1)));
        disk.write(NodeOp::Append(entries(3, 3, 1)));
        disk.write(NodeOp::Append(entries(4, 4, 1)));
        disk.crash(2);
        assert_eq!(indexes(disk.durable()), vec![1, 2, 3]);
        // A torn prefix longer than the queue keeps everything.
        disk.write(NodeOp::Append(entries(4, 4, 1)));
        disk.crash(10);
        assert_eq!(indexes(disk.durable()), vec![1, 2, 3, 4]);
    }

    #[test]
    fn backup_is_the_durable_part_and_restore_drops_pending() {
        let mut disk = Disk::new(NodeImage::default(), 0);
        disk.write(NodeOp::Append(entries(1, 2, 1)));
        disk.sync(1);
        disk.write(NodeOp::Append(entries(3, 4, 1)));
        let backup = disk.backup();
        assert_eq!(indexes(&backup), vec![1, 2]);
        disk.sync(1);
        assert_eq!(indexes(disk.durable()), vec![1, 2, 3, 4]);
        disk.write(NodeOp::Append(entries(5, 5, 1)));
        let mut stale = backup;
        stale.restored_from_backup = true;
        disk.restore(stale);
        assert_eq!(disk.pending_len(), 0);
        assert_eq!(indexes(disk.durable()), vec![1, 2]);
        assert!(disk.durable().to_durable().restored_from_backup);
    }

    #[test]
    fn append_truncates_a_conflicting_suffix() {
        let mut image = NodeImage::default();
        image.apply(&NodeOp::Append(entries(1, 5, 1)));
        image.apply(&NodeOp::Append(entries(3, 4, 2)));
        assert_eq!(indexes(&image), vec![1, 2, 3, 4]);
        assert_eq!(image.entries[2].term, Term(2));
        assert_eq!(image.last_index(), LogIndex(4));
    }

    #[test]
    #[should_panic(expected = "gap")]
    fn append_with_a_gap_is_refused() {
        let mut image = NodeImage::default();
        image.apply(&NodeOp::Append(entries(1, 2, 1)));
        image.apply(&NodeOp::Append(entries(4, 4, 1)));
    }

    #[test]
    fn compaction_and_snapshots() {
        let mut image = NodeImage::default();
        image.apply(&NodeOp::Append(entries(1, 6, 1)));
        image.apply(&NodeOp::Compact(snapshot(3, 1)));
        assert_eq!(indexes(&image), vec![4, 5, 6]);
        // A leader's snapshot that agrees at its index keeps the suffix.
        image.apply(&NodeOp::Snapshot(snapshot(4, 1)));
        assert_eq!(indexes(&image), vec![5, 6]);
        // One that disagrees drops the whole log.
        image.apply(&NodeOp::Snapshot(snapshot(5, 3)));
        assert!(image.entries.is_empty());
        assert_eq!(image.last_index(), LogIndex(5));
        // A snapshot past the last entry drops everything too, and appends continue after it.
        image.apply(&NodeOp::Append(entries(6, 7, 3)));
        image.apply(&NodeOp::Snapshot(snapshot(9, 3)));
        assert!(image.entries.is_empty());
        image.apply(&NodeOp::Append(entries(10, 10, 3)));
        let durable = image.to_durable();
        assert_eq!(durable.snapshot.map(|s| s.index), Some(LogIndex(9)));
        assert_eq!(durable.entries.len(), 1);
    }

    fn run<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
        std::thread::spawn(move || {
            let rt = madsim::runtime::Runtime::with_seed_and_config(5, madsim::Config::default());
            rt.block_on(f())
        })
        .join()
        .expect("simulation thread");
    }

    #[test]
    fn fsync_takes_its_latency_and_a_kill_mid_fsync_keeps_nothing() {
        run(|| async {
            let disk: SharedDisk<NodeImage> = Arc::new(Mutex::new(Disk::new(NodeImage::default(), 5_000)));

            // A completed fsync makes the writes durable only after the latency.
            disk.lock().unwrap().write(NodeOp::Append(entries(1, 2, 1)));
            let start = madsim::time::Instant::now();
            fsync(&disk).await;
            assert!(start.elapsed() >= Duration::from_micros(5_000));
            assert_eq!(indexes(disk.lock().unwrap().durable()), vec![1, 2]);

            // A node killed during its fsync: nothing becomes durable.
            let handle = madsim::runtime::Handle::current();
            let node_disk = disk.clone();
            let node = handle
                .create_node()
                .name("n0")
                .init(move || {
                    let disk = node_disk.clone();
                    async move {
                        disk.lock().unwrap().write(NodeOp::Append(entries(3, 3, 1)));
                        fsync(&disk).await;
                        std::future::pending::<()>().await
                    }
                })
                .build();
            madsim::time::sleep(Duration::from_millis(2)).await;
            assert_eq!(disk.lock().unwrap().pending_len(), 1, "the node wrote and is inside its fsync");
            handle.kill(node.id());
            madsim::time::sleep(Duration::from_millis(20)).await;
            // Long past the latency, the killed fsync never synced.
            assert_eq!(disk.lock().unwrap().pending_len(), 1);
            disk.lock().unwrap().crash(0);
            assert_eq!(indexes(disk.lock().unwrap().durable()), vec![1, 2]);
            assert_eq!(disk.lock().unwrap().pending_len(), 0);
        });
    }

    #[test]
    fn overlapping_fsyncs_each_sync_their_own_prefix() {
        run(|| async {
            let disk: SharedDisk<NodeImage> = Arc::new(Mutex::new(Disk::new(NodeImage::default(), 10_000)));
            disk.lock().unwrap().write(NodeOp::Append(entries(1, 1, 1)));
            let first = disk.clone();
            let task = madsim::task::spawn(async move { fsync(&first).await });
            madsim::time::sleep(Duration::from_millis(4)).await;
            disk.lock().unwrap().write(NodeOp::Append(entries(2, 2, 1)));
            task.await.unwrap();
            // The first fsync covered only the write made before it started.
            assert_eq!(indexes(disk.lock().unwrap().durable()), vec![1]);
            assert_eq!(disk.lock().unwrap().pending_len(), 1);
            fsync(&disk).await;
            assert_eq!(indexes(disk.lock().unwrap().durable()), vec![1, 2]);
        });
    }
}
