//! The data dir against the simulator's disk model: what survives a reopen,
//! a torn or corrupt record, another cluster's dir, compaction, a crash
//! before sync, and a backup's restore. The property test at the end drives
//! the files and `fencesim`'s `Disk<NodeImage>` with the same random writes,
//! syncs and crashes, and requires them to agree after every reopen.

use fencelock::raft::{DurableState, Entry, HardState, Payload, Snapshot};
use fencelock::{ClientId, Command, Holder, Key, LockState, LogIndex, NodeId, RequestId, Term, Token};
use fencelock_node::storage::{Storage, StorageError, StorageLimits, WAL_FILE, WAL_TMP_FILE};
use fencesim::machine::disk::{Disk, Image, NodeImage, NodeOp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fs;
use std::path::{Path, PathBuf};

const CLUSTER: &str = "test-cluster";
const NODE: NodeId = NodeId(1);

fn entries(from: u64, to: u64, term: u64) -> Vec<Entry> {
    (from..=to).map(|i| Entry { term: Term(term), index: LogIndex(i), payload: Payload::Noop }).collect()
}

fn snapshot(index: u64, term: u64) -> Snapshot {
    Snapshot { index: LogIndex(index), term: Term(term), state: LockState::new(Token(40)) }
}

fn hard_state(term: u64, vote: Option<u8>, commit: u64) -> HardState {
    HardState { term: Term(term), vote: vote.map(NodeId), commit: LogIndex(commit) }
}

fn open(dir: &Path) -> (Storage, DurableState) {
    Storage::open(dir, CLUSTER, NODE).unwrap_or_else(|error| panic!("open: {error}"))
}

fn indexes(durable: &DurableState) -> Vec<u64> {
    durable.entries.iter().map(|e| e.index.0).collect()
}

/// `DurableState` has no `PartialEq`: compare it field by field.
fn assert_same(found: &DurableState, expected: &DurableState, context: &str) {
    assert_eq!(found.hard_state, expected.hard_state, "{context}: hard state");
    assert_eq!(found.snapshot, expected.snapshot, "{context}: snapshot");
    assert_eq!(found.entries, expected.entries, "{context}: entries");
    assert_eq!(found.restored_from_backup, expected.restored_from_backup, "{context}: restored flag");
}

fn wal(dir: &Path) -> PathBuf {
    dir.join(WAL_FILE)
}

fn file_bytes(dir: &Path) -> u64 {
    fs::metadata(wal(dir)).unwrap().len()
}

#[test]
fn every_write_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut storage, durable) = open(dir.path());
    assert_same(&durable, &DurableState::default(), "a new dir");
    storage.append(&entries(1, 6, 1));
    storage.set_hard_state(hard_state(2, Some(0), 4));
    storage.compact(&snapshot(3, 1));
    storage.sync().unwrap();
    storage.install_snapshot(&snapshot(5, 1));
    storage.append(&entries(7, 8, 2));
    storage.sync().unwrap();
    let expected = storage.durable().clone();
    assert_eq!(indexes(&expected), vec![6, 7, 8]);
    assert_eq!(expected.snapshot, Some(snapshot(5, 1)));
    drop(storage);
    let (storage, durable) = open(dir.path());
    assert_same(&durable, &expected, "after reopen");
    assert_same(storage.durable(), &expected, "durable() after reopen");
}

#[test]
fn a_conflicting_append_truncates_the_suffix() {
    let dir = tempfile::tempdir().unwrap();
    let (mut storage, _) = open(dir.path());
    storage.append(&entries(1, 5, 1));
    storage.sync().unwrap();
    storage.append(&entries(3, 4, 2));
    storage.sync().unwrap();
    drop(storage);
    let (_, durable) = open(dir.path());
    assert_eq!(indexes(&durable), vec![1, 2, 3, 4]);
    assert_eq!(durable.entries[1].term, Term(1));
    assert_eq!(durable.entries[2].term, Term(2));
}

#[test]
#[should_panic(expected = "gap")]
fn an_append_with_a_gap_fails_at_its_caller() {
    let dir = tempfile::tempdir().unwrap();
    let (mut storage, _) = open(dir.path());
    storage.append(&entries(1, 2, 1));
    storage.append(&entries(4, 4, 1));
}

#[test]
fn unsynced_writes_are_lost_in_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (mut storage, _) = open(dir.path());
    storage.append(&entries(1, 3, 1));
    storage.sync().unwrap();
    let bytes_synced = fs::read(wal(dir.path())).unwrap();
    storage.append(&entries(4, 5, 1));
    storage.set_hard_state(hard_state(2, Some(1), 3));
    storage.compact(&snapshot(2, 1));
    assert_eq!(indexes(storage.durable()), vec![1, 2, 3], "durable() is as of the last sync");
    assert_eq!(storage.stats().ops_pending, 3);
    // The crash: the process ends without a sync.
    drop(storage);
    assert_eq!(fs::read(wal(dir.path())).unwrap(), bytes_synced, "nothing unsynced reached the file");
    let (_, durable) = open(dir.path());
    assert_eq!(indexes(&durable), vec![1, 2, 3]);
    assert_eq!(durable.hard_state, HardState::default());
}

/// A dir with three synced writes. Returns where the last one starts in the
/// file and the image before it.
fn three_writes(dir: &Path) -> (u64, DurableState) {
    let (mut storage, _) = open(dir);
    storage.append(&entries(1, 3, 1));
    storage.sync().unwrap();
    storage.set_hard_state(hard_state(1, Some(1), 2));
    storage.sync().unwrap();
    let before_last = storage.durable().clone();
    let last_start = file_bytes(dir);
    storage.append(&entries(4, 5, 1));
    storage.sync().unwrap();
    (last_start, before_last)
}

#[test]
fn a_torn_last_record_is_cut_at_every_length() {
    let dir = tempfile::tempdir().unwrap();
    let (last_start, before_last) = three_writes(dir.path());
    let whole = fs::read(wal(dir.path())).unwrap();
    assert!(whole.len() as u64 > last_start + 8);
    for cut in last_start..whole.len() as u64 {
        let case = tempfile::tempdir().unwrap();
        fs::write(wal(case.path()), &whole[..cut as usize]).unwrap();
        let (_, durable) = open(case.path());
        assert_same(&durable, &before_last, &format!("torn at byte {cut}"));
        assert_eq!(file_bytes(case.path()), last_start, "torn at byte {cut}: the tail is cut from the file");
        // The cut dir opens cleanly and takes new writes after the cut.
        let (mut storage, durable) = open(case.path());
        assert_same(&durable, &before_last, "reopened after the cut");
        storage.append(&entries(4, 4, 2));
        storage.sync().unwrap();
        drop(storage);
        assert_eq!(indexes(&open(case.path()).1), vec![1, 2, 3, 4]);
    }
}

#[test]
fn a_flipped_bit_in_the_last_record_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (last_start, before_last) = three_writes(dir.path());
    let whole = fs::read(wal(dir.path())).unwrap();
    for bit in last_start * 8..whole.len() as u64 * 8 {
        let case = tempfile::tempdir().unwrap();
        let mut bytes = whole.clone();
        bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
        fs::write(wal(case.path()), &bytes).unwrap();
        let (_, durable) = open(case.path());
        assert_same(&durable, &before_last, &format!("bit {bit} flipped"));
        assert_eq!(file_bytes(case.path()), last_start, "bit {bit} flipped: the tail is cut");
        assert_same(&open(case.path()).1, &before_last, "reopened after the cut");
    }
}

#[test]
fn a_flipped_bit_before_the_last_record_is_an_error_that_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (last_start, _) = three_writes(dir.path());
    let whole = fs::read(wal(dir.path())).unwrap();
    // Every bit before the last record: the header and the two records after it.
    for bit in 0..last_start * 8 {
        let mut bytes = whole.clone();
        bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
        fs::write(wal(dir.path()), &bytes).unwrap();
        let error = match Storage::open(dir.path(), CLUSTER, NODE) {
            Err(error) => error,
            Ok((_, durable)) => panic!("bit {bit} flipped, yet it opened with {durable:?}"),
        };
        let line = error.to_string();
        assert!(matches!(error, StorageError::Corrupt { .. }), "bit {bit}: {line}");
        assert!(line.contains(&wal(dir.path()).display().to_string()), "the error names the file: {line}");
        assert_eq!(fs::read(wal(dir.path())).unwrap(), bytes, "bit {bit}: the file is unchanged");
    }
}

#[test]
fn another_cluster_or_node_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let before = fs::read(wal(dir.path())).unwrap();
    let other_cluster = Storage::open(dir.path(), "prod-eu", NODE).err().expect("another cluster").to_string();
    assert!(
        other_cluster.contains("cluster `test-cluster` node n1") && other_cluster.contains("cluster `prod-eu` node n1"),
        "{other_cluster}"
    );
    let other_node = Storage::open(dir.path(), CLUSTER, NodeId(2)).err().expect("another node").to_string();
    assert!(other_node.contains("node n1") && other_node.contains("node n2"), "{other_node}");
    assert_eq!(fs::read(wal(dir.path())).unwrap(), before);
}

#[test]
fn a_dir_with_other_files_or_a_bad_cluster_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let error = Storage::open(dir.path(), CLUSTER, NODE).err().expect("a foreign dir").to_string();
    assert!(error.contains("notes.txt") && error.contains("not a fencelock data dir"), "{error}");
    let empty = tempfile::tempdir().unwrap();
    for bad in ["", "has space", &"x".repeat(65)] {
        let error = Storage::open(empty.path(), bad, NODE).err().expect("a bad cluster id");
        assert!(matches!(error, StorageError::InvalidClusterId { .. }), "{error}");
    }
    // A missing dir, nested, is created.
    let nested = empty.path().join("a/b");
    drop(open(&nested));
    assert!(wal(&nested).exists());
}

#[test]
fn compaction_keeps_the_image_and_shrinks_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut storage, _) = open(dir.path());
    for i in 1..=200 {
        storage.append(&entries(i, i, 1));
        storage.set_hard_state(hard_state(1, Some(1), i));
        storage.sync().unwrap();
    }
    let grown = file_bytes(dir.path());
    assert_eq!(storage.stats().rewrites_total, 0);
    storage.compact(&snapshot(190, 1));
    storage.sync().unwrap();
    assert_eq!(indexes(storage.durable()), (191..=200).collect::<Vec<_>>());
    let compacted = file_bytes(dir.path());
    assert!(compacted * 10 < grown, "{compacted} bytes after compaction, {grown} before");
    assert_eq!(storage.stats().rewrites_total, 1);
    assert_eq!(storage.stats().wal_bytes, compacted);
    // Writes after the rewrite go to the new file.
    storage.append(&entries(201, 201, 2));
    storage.sync().unwrap();
    let expected = storage.durable().clone();
    drop(storage);
    assert_same(&open(dir.path()).1, &expected, "reopened after compaction");
    assert!(!dir.path().join(WAL_TMP_FILE).exists());
}

#[test]
fn growth_alone_rewrites_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let limits = StorageLimits { growth_bytes_max: 300, growth_records_max: 1_000 };
    let (mut storage, _) = Storage::open_with(dir.path(), CLUSTER, NODE, limits).unwrap();
    for term in 1..=200 {
        storage.set_hard_state(hard_state(term, None, 0));
        storage.sync().unwrap();
        assert!(storage.stats().wal_bytes < 400, "the log stays bounded: {:?}", storage.stats());
    }
    assert!(storage.stats().rewrites_total >= 5, "{:?}", storage.stats());
    drop(storage);
    assert_eq!(open(dir.path()).1.hard_state, hard_state(200, None, 0));
}

#[test]
fn a_leftover_rewrite_is_ignored_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut expected) = three_writes(dir.path());
    expected.entries.extend(entries(4, 5, 1));
    // A crash during a rewrite leaves a half-written temporary file beside the whole log.
    let tmp = dir.path().join(WAL_TMP_FILE);
    fs::write(&tmp, b"half a log").unwrap();
    assert_same(&open(dir.path()).1, &expected, "the old log is whole");
    assert!(!tmp.exists());
}

#[test]
fn a_backup_restores_marked_as_stale_until_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let backup = tempfile::tempdir().unwrap();
    let (mut storage, _) = open(dir.path());
    storage.append(&entries(1, 3, 1));
    storage.set_hard_state(hard_state(1, Some(1), 2));
    storage.sync().unwrap();
    storage.append(&entries(4, 4, 1));
    // The backup holds what is durable, not what is buffered.
    storage.backup_to(backup.path()).unwrap();
    let at_backup = storage.durable().clone();
    storage.sync().unwrap();
    storage.set_hard_state(hard_state(5, Some(2), 4));
    storage.sync().unwrap();
    drop(storage);

    // Another node may not take this node's backup.
    let error = Storage::restore_from(backup.path(), dir.path(), CLUSTER, NodeId(2)).err().expect("another node");
    assert!(matches!(error, StorageError::Identity { .. }), "{error}");

    let (restored, durable) = Storage::restore_from(backup.path(), dir.path(), CLUSTER, NODE).unwrap();
    assert!(durable.restored_from_backup);
    assert_eq!(indexes(&durable), vec![1, 2, 3]);
    assert_eq!(durable.hard_state, at_backup.hard_state);
    drop(restored);
    // The flag is durable, and lasts until the node says it has recovered.
    let (mut reopened, durable) = open(dir.path());
    assert!(durable.restored_from_backup);
    reopened.mark_recovered();
    reopened.sync().unwrap();
    drop(reopened);
    assert!(!open(dir.path()).1.restored_from_backup);
    // A backup never lands on another node's backup.
    let other = tempfile::tempdir().unwrap();
    drop(Storage::open(other.path(), CLUSTER, NodeId(2)).unwrap());
    let error = open(dir.path()).0.backup_to(other.path()).expect_err("another node's backup");
    assert!(matches!(error, StorageError::Identity { .. }), "{error}");
    // The backup itself is a data dir of the same node, unmarked.
    let (_, from_backup) = open(backup.path());
    assert_same(&from_backup, &at_backup, "the backup opened as a data dir");
}

// The property test: the files against the simulator's disk.

/// One random write that the image `written` (durable plus pending) accepts.
fn random_op(rng: &mut ChaCha8Rng, written: &NodeImage) -> NodeOp {
    let snapshot_index = written.snapshot.as_ref().map_or(0, |s| s.index.0);
    let last = written.last_index().0;
    match rng.gen_range(0..10) {
        0..=4 => {
            let first = rng.gen_range(snapshot_index + 1..=last + 1);
            let count = rng.gen_range(1..=4);
            let term = rng.gen_range(1..=4);
            NodeOp::Append((first..first + count).map(|index| random_entry(rng, index, term)).collect())
        }
        5 | 6 => {
            let vote = rng.gen_bool(0.5).then(|| rng.gen_range(0..3));
            NodeOp::HardState(hard_state(rng.gen_range(0..6), vote, rng.gen_range(0..=last)))
        }
        7 => {
            let index = rng.gen_range(snapshot_index..=last + 2);
            let agreeing = written.entries.iter().find(|e| e.index.0 == index).map(|e| e.term.0);
            let term = match agreeing {
                Some(term) if rng.gen_bool(0.5) => term,
                _ => rng.gen_range(1..=4),
            };
            NodeOp::Snapshot(snapshot(index, term))
        }
        8 => NodeOp::Compact(snapshot(rng.gen_range(snapshot_index..=last), 1)),
        _ => NodeOp::Recovered,
    }
}

fn random_entry(rng: &mut ChaCha8Rng, index: u64, term: u64) -> Entry {
    let payload = if rng.gen_bool(0.5) {
        Payload::Noop
    } else {
        let key = Key::new("k".repeat(rng.gen_range(1..40)));
        let holder = Holder { client: ClientId(rng.gen_range(0..9)), request: RequestId(index) };
        Payload::Command(Command::Grant { key, lease_ms: 2_000, holder })
    };
    Entry { term: Term(term), index: LogIndex(index), payload }
}

fn write_op(storage: &mut Storage, op: &NodeOp) {
    match op {
        NodeOp::HardState(hard_state) => storage.set_hard_state(*hard_state),
        NodeOp::Append(entries) => storage.append(entries),
        NodeOp::Snapshot(snapshot) => storage.install_snapshot(snapshot),
        NodeOp::Compact(snapshot) => storage.compact(snapshot),
        NodeOp::Recovered => storage.mark_recovered(),
    }
}

/// A power loss with the pending writes half on the platter: `storage` (just
/// reopened, so holding none of them) writes and syncs them one by one, then
/// the file is cut inside the record of write `kept`, as a write interrupted
/// mid-way would leave it. Returns how many writes survive: all of them if a
/// rewrite replaced the file on the way.
fn torn_crash(rng: &mut ChaCha8Rng, storage: &mut Storage, ops: &[NodeOp], dir: &Path) -> usize {
    let rewrites_before = storage.stats().rewrites_total;
    let mut ends = vec![storage.stats().wal_bytes];
    for op in ops {
        write_op(storage, op);
        storage.sync().unwrap();
        ends.push(storage.stats().wal_bytes);
    }
    if storage.stats().rewrites_total != rewrites_before || ops.is_empty() {
        return ops.len();
    }
    let kept = rng.gen_range(0..ops.len());
    let cut = rng.gen_range(ends[kept]..ends[kept + 1]);
    fs::OpenOptions::new().write(true).open(wal(dir)).unwrap().set_len(cut).unwrap();
    kept
}

/// What one sequence went through, so the test can require that the runs
/// together still exercise every path.
#[derive(Default)]
struct Exhibits {
    crashes: u64,
    torn_crashes: u64,
    rewrites: u64,
}

fn check_sequence(seed: u64, exhibits: &mut Exhibits) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let limits =
        StorageLimits { growth_bytes_max: rng.gen_range(100..4_000), growth_records_max: rng.gen_range(2..40) };
    let reopen = |context: &str| {
        Storage::open_with(dir.path(), CLUSTER, NODE, limits).unwrap_or_else(|e| panic!("seed {seed}, {context}: {e}"))
    };
    let (mut storage, _) = reopen("create");
    let mut disk = Disk::new(NodeImage::default(), 0);
    let mut written = NodeImage::default();
    let mut pending: Vec<NodeOp> = Vec::new();
    let steps_max = 80;
    for step in 0..steps_max {
        let context = format!("seed {seed} step {step}");
        match rng.gen_range(0..20) {
            0..=13 => {
                let op = random_op(&mut rng, &written);
                written.apply(&op);
                write_op(&mut storage, &op);
                disk.write(op.clone());
                pending.push(op);
            }
            14..=16 => {
                storage.sync().unwrap();
                disk.sync(disk.pending_len());
                pending.clear();
                assert_same(storage.durable(), &disk.durable().to_durable(), &context);
            }
            kind => {
                // A crash: the storage is dropped without a sync.
                exhibits.rewrites += storage.stats().rewrites_total;
                drop(storage);
                if kind == 19 {
                    let (mut replaying, _) = reopen(&context);
                    let kept = torn_crash(&mut rng, &mut replaying, &pending, dir.path());
                    exhibits.torn_crashes += u64::from(kept < pending.len());
                    exhibits.rewrites += replaying.stats().rewrites_total;
                    disk.crash(kept);
                } else {
                    disk.crash(0);
                }
                exhibits.crashes += 1;
                pending.clear();
                let (reopened, durable) = reopen(&context);
                assert_same(&durable, &disk.durable().to_durable(), &format!("{context}, after a crash"));
                storage = reopened;
                written = disk.durable().clone();
            }
        }
    }
    exhibits.rewrites += storage.stats().rewrites_total;
    drop(storage);
    disk.crash(0);
    assert_same(&reopen("the end").1, &disk.durable().to_durable(), &format!("seed {seed}, the end"));
}

/// Threads the sequences are spread over: a sequence mostly waits for its
/// fsyncs, and the disk takes several at once.
const SEQUENCE_THREADS: u64 = 4;

#[test]
fn random_writes_syncs_and_crashes_match_the_simulated_disk() {
    let exhibits: Vec<Exhibits> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..SEQUENCE_THREADS)
            .map(|thread| {
                scope.spawn(move || {
                    let mut exhibits = Exhibits::default();
                    for seed in (thread..300).step_by(SEQUENCE_THREADS as usize) {
                        check_sequence(seed, &mut exhibits);
                    }
                    exhibits
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    let sum = |field: fn(&Exhibits) -> u64| exhibits.iter().map(field).sum::<u64>();
    let (crashes, torn_crashes, rewrites) = (sum(|e| e.crashes), sum(|e| e.torn_crashes), sum(|e| e.rewrites));
    println!("{crashes} crashes, {torn_crashes} of them torn, {rewrites} rewrites");
    assert!(crashes >= 1_000 && torn_crashes >= 200 && rewrites >= 500, "{crashes} {torn_crashes} {rewrites}");
}
