//! The B-1042 story end to end on real processes: a 3-node cluster issues the
//! tokens, and the shop database (SQLite in the test's directory, PostgreSQL
//! when `FENCELOCK_POSTGRES_URL` is set) fences the writes.
//!
//! Worker A acquires `invoice/B-1042` with a short lease and writes under its
//! token. A pauses past its lease; the cluster expires it, worker B acquires
//! with a higher token and writes. A wakes and sends its late writes, on the
//! status path and on the ledger path: the database rejects both as stale.
//! Then the same with the database restarted between B's write and A's, and
//! with the database restored from a backup taken before B's write: it
//! refuses every write until its floor is read from the cluster and raised,
//! then rejects A and accepts B.
//!
//! Every test is bounded (`TEST_TIMEOUT`) and every process is killed by PID
//! when it ends (`TestCluster`'s Drop). Timings are printed, not asserted.

use crate::common;
use crate::support;

use common::{bounded, TestCluster};
use fencelock::resource::{Fence, Write, WritePath, WriteVerdict};
use fencelock::{ClientId, Key, RequestId};
use fencelock_node::client::{ClientOptions, FloorOptions, FloorReader, Grant, LockClient};
use fencelock_node::resource::{RaisedFloor, SqlResource};
use std::time::{Duration, Instant};

/// A's lease: short, so that the story takes about a second.
const LEASE_A_MS: u64 = 600;
/// How far past its lease A sleeps.
const PAUSE_PAST_LEASE_MS: u64 = 200;
/// B is healthy: its lease outlasts the story, so B still holds the lock when
/// the restored database reads its floor.
const LEASE_B_MS: u64 = 60_000;
/// How long B waits in the key's queue; the cluster expires A's lease well before.
const WAIT_B_MS: u64 = 10_000;

/// What happens to the database between B's write and A's late one.
#[derive(Clone, Copy, Debug)]
enum Between {
    Nothing,
    /// SQLite: the file reopened. PostgreSQL: a new connection (a restart of
    /// the server would move it to a new port under scripts/postgres.sh; the
    /// connection is what a restarted application sees anyway).
    Restart,
    /// Restored from the backup taken before B's write; the floor is read from the cluster.
    Restore,
}

fn invoice() -> Key {
    Key::new("invoice/B-1042")
}

/// A worker: its lock client, its grant and its own write request ids.
struct Worker {
    name: &'static str,
    lock: LockClient,
    grant: Option<Grant>,
    write_last: u64,
}

impl Worker {
    fn new(cluster: &TestCluster, name: &'static str, id: u32) -> Worker {
        let lock = LockClient::new(&cluster.cluster, &ClientOptions::standard(ClientId(id)));
        Worker { name, lock, grant: None, write_last: 0 }
    }

    async fn acquire(&mut self, lease_ms: u64, wait_ms: u64) -> Grant {
        let grant = self.lock.acquire(&invoice(), lease_ms, wait_ms).await;
        let grant = grant.unwrap_or_else(|e| panic!("{} acquires {}: {e}", self.name, invoice()));
        self.grant = Some(grant.clone());
        grant
    }

    /// A new write under the worker's grant (it does not look at its lease: a paused process cannot).
    fn write(&mut self, path: WritePath, value: &str) -> Write {
        let grant = self.grant.as_ref().expect("a worker writes after its acquire");
        self.write_last += 1;
        Write {
            key: grant.key.clone(),
            token: grant.token,
            holder: grant.holder,
            request: RequestId(self.write_last),
            path,
            value: value.to_string(),
        }
    }
}

async fn send(db: &mut SqlResource, write: &Write) -> WriteVerdict {
    db.write(write).await.unwrap_or_else(|e| panic!("write {write:?}: {e}"))
}

async fn story(url: &str, between: Between) {
    let start = Instant::now();
    let cluster = TestCluster::up(3);
    let mut db = SqlResource::open(url).await.expect("open the resource");
    let mut a = Worker::new(&cluster, "A", 1);
    let mut b = Worker::new(&cluster, "B", 2);

    // A holds the invoice and writes under its token.
    let grant_a = a.acquire(LEASE_A_MS, 0).await;
    assert_eq!(send(&mut db, &a.write(WritePath::Status, "open")).await, WriteVerdict::Accepted);
    let nightly = db.backup("nightly").await.expect("backup");

    // A pauses past its lease: here a client that stops renewing and sleeps.
    // A real worker process stopped with SIGSTOP is part 2's job.
    tokio::time::sleep(Duration::from_millis(LEASE_A_MS + PAUSE_PAST_LEASE_MS)).await;
    assert_eq!(a.lock.belief(&invoice()), None, "A's own lease belief has ended; a paused A does not look");

    // The cluster expires A's lease; B acquires with a higher token and writes.
    let grant_b = b.acquire(LEASE_B_MS, WAIT_B_MS).await;
    assert!(grant_b.token > grant_a.token, "B's token {} is above A's {}", grant_b.token, grant_a.token);
    assert_eq!(send(&mut db, &b.write(WritePath::Status, "checked")).await, WriteVerdict::Accepted);

    let mut a_late = vec![a.write(WritePath::Status, "paid"), a.write(WritePath::Ledger, "paid")];
    match between {
        Between::Nothing => {}
        Between::Restart => {
            drop(db);
            db = SqlResource::open(url).await.expect("reopen the resource");
        }
        Between::Restore => {
            db.restore(&nightly, 1).await.expect("restore");
            assert_eq!(db.awaiting_floor().await.expect("awaiting floor"), Some(1));
            // Until the floor is raised the database judges nothing: both are told to come back.
            let early_a = a_late[0].clone();
            let early_b = b.write(WritePath::Ledger, "checked");
            assert_eq!(send(&mut db, &early_a).await, WriteVerdict::Unavailable, "A before the floor");
            assert_eq!(send(&mut db, &early_b).await, WriteVerdict::Unavailable, "B before the floor");

            let mut reader = FloorReader::new(&cluster.cluster, FloorOptions::standard(100));
            let raised = db.raise_floor_from(&mut reader).await.expect("the floor is read and raised");
            let Some(RaisedFloor { restore, floor, .. }) = raised else { panic!("the restored image awaited a floor") };
            assert_eq!(restore, 1);
            assert!(floor.token_last >= grant_b.token, "the read is after B's grant: {floor:?}");
            assert_eq!(floor.held, vec![(invoice(), Fence { token: grant_b.token, holder: grant_b.holder })]);
            assert_eq!(db.awaiting_floor().await.expect("awaiting floor"), None);
            assert_eq!(db.raise_floor_from(&mut reader).await.expect("nothing to raise"), None);
            // B's refused write, sent again (a refused write was not remembered).
            assert_eq!(send(&mut db, &early_b).await, WriteVerdict::Accepted, "B after the floor");
        }
    }

    // A wakes and sends its late writes with its old token, on both paths
    // (A's first late write already went once to the restored database, unjudged).
    let stale = WriteVerdict::RejectedStale { highest: grant_b.token };
    for late in a_late.drain(..) {
        assert_eq!(send(&mut db, &late).await, stale, "A's late {} write after {between:?}", late.path);
    }

    let state = db.state().await.expect("state");
    assert_eq!(state.fence(&invoice()), Some(Fence { token: grant_b.token, holder: grant_b.holder }));
    assert_ne!(state.value(&invoice()), "paid", "A's late status never landed");
    assert!(state.ledger(&invoice()).iter().all(|(_, line)| line != "paid"), "A's late ledger line never landed");

    // B, the holder, is not locked out, and lets the lock go.
    assert_eq!(send(&mut db, &b.write(WritePath::Ledger, "shipped")).await, WriteVerdict::Accepted);
    b.lock.release(&invoice()).await.expect("B releases");
    println!(
        "B-1042 story, {between:?}, {}: tokens {} then {}, {} ms",
        url.split(':').next().unwrap_or("?"),
        grant_a.token,
        grant_b.token,
        start.elapsed().as_millis()
    );
}

fn sqlite(between: Between) {
    common::start_background();
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("shop.db").display());
    bounded(story(&url, between));
}

fn postgres(between: Between) {
    common::start_background();
    bounded(async {
        let Some(base) = support::postgres_url() else { return };
        let schema = format!("b1042_story_{between:?}").to_lowercase();
        story(&support::fresh_postgres_url(&base, &schema).await, between).await;
    });
}

#[test]
fn sqlite_rejects_the_late_write_of_the_paused_holder() {
    sqlite(Between::Nothing);
}

#[test]
fn sqlite_rejects_the_late_write_after_a_restart() {
    sqlite(Between::Restart);
}

#[test]
fn sqlite_restored_from_a_backup_waits_for_the_cluster_floor() {
    sqlite(Between::Restore);
}

#[test]
fn postgres_rejects_the_late_write_of_the_paused_holder() {
    postgres(Between::Nothing);
}

#[test]
fn postgres_rejects_the_late_write_after_a_restart() {
    postgres(Between::Restart);
}

#[test]
fn postgres_restored_from_a_backup_waits_for_the_cluster_floor() {
    postgres(Between::Restore);
}
