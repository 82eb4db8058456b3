//! Real processes on 127.0.0.1 under load: four clients take, write under
//! and release keys of a 3-node cluster as fast as it answers, and every key's
//! tokens strictly increase in the order of the writes. In a whole run of the
//! binary the load starts with the real runs, in the background, beside
//! them and the B-1042 stories but beside no test that drives a cluster and
//! times it (it holds `common::serial`'s lock); the test takes its result.
//! Its throughput is printed (run with `--nocapture`), never asserted; the
//! Raft messages the servers sent per committed entry are printed and bounded.

use crate::common;

use common::{bounded, Report, TestCluster};
use fencelock::{ClientId, Key, Token};
use fencelock_node::client::{ClientOptions, LockClient, LockError};
use fencelock_node::cluster::Replication;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Cycles per client in `concurrent_clients_get_increasing_tokens` (the
/// target; 4 x 1000 took 6.5 s with a debug build). FENCELOCK_CYCLES overrides it.
const CYCLES_DEFAULT: usize = 1_000;
const CLIENTS: usize = 4;
const KEYS: usize = 3;
/// A lease far longer than a cycle (about a millisecond): the test is about
/// token order, not lease timing. With 2 s, one stall of the machine's disk
/// or scheduler longer than that (seen once in CI) let a holder's lease run
/// out before its release, which the service rightly refused.
const LEASE_MS: u64 = 20_000;
/// How long an acquire waits in the key's queue: shorter than the lease, so
/// a grant is still believed when it arrives (the belief counts from the send).
const WAIT_MS: u64 = 10_000;

/// The most Raft messages per committed entry the whole cluster may send
/// during the load. An entry costs an append to each of the two followers
/// and their answers, and the commit told to each (by the next append, or
/// by a heartbeat and its answer); the load measures 10 to 12, heartbeats
/// and checks for lost appends included. A leader that checked every
/// follower with appends in flight for lost ones on every answer sent 80 to
/// 110. A count, not a timing: it holds on a slow machine as on a fast one.
const RAFT_MESSAGES_PER_ENTRY_MAX: f64 = 20.0;
/// Entries the load must commit for the bound to apply. Heartbeats come with
/// time, not entries (about a hundred messages a second on three servers):
/// a tenth of a message per entry under the default load's 8,000 entries,
/// but enough to pass the bound alone under a few `FENCELOCK_CYCLES`.
const BOUNDED_FROM_ENTRIES: u64 = 1_000;

/// The "resource": tokens written per key, in the order the writes happened.
type Writes = Arc<Mutex<BTreeMap<Key, Vec<Token>>>>;

/// The load's report, once (`common::done_once`).
static LOAD: OnceLock<Report> = OnceLock::new();

/// Plays the load, unless a test already took it (a whole run's background).
pub fn play() {
    common::done_once(&LOAD, load);
}

#[test]
fn concurrent_clients_get_increasing_tokens() {
    println!("{}", common::report_once(&LOAD, load, "the load"));
}

/// The load: every client's cycles, checked; its throughput as a line.
fn load() -> String {
    let _serial = common::serial();
    let cycles = std::env::var("FENCELOCK_CYCLES").ok().and_then(|c| c.parse().ok()).unwrap_or(CYCLES_DEFAULT);
    bounded(async {
        let cluster = TestCluster::up(3);
        let writes: Writes = Arc::default();
        let replication_before = Replication::read(&cluster.cluster).await.expect("the servers' statuses");
        let start = Instant::now();
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let config = cluster.cluster.clone();
                let writes = writes.clone();
                tokio::spawn(async move {
                    let mut client = LockClient::new(&config, &ClientOptions::standard(ClientId(c as u32 + 1)));
                    for i in 0..cycles {
                        let key = Key::new(format!("key-{}", (c + i) % KEYS));
                        let grant = loop {
                            match client.acquire(&key, LEASE_MS, WAIT_MS).await {
                                Ok(grant) => break grant,
                                Err(LockError::Busy { .. } | LockError::WaitTimedOut) => continue,
                                Err(e) => panic!("client {c} cycle {i}: {e}"),
                            }
                        };
                        // The write: fenced by the token, checked at the "resource".
                        assert_eq!(client.belief(&key), Some(grant.token), "a fresh grant is believed");
                        {
                            let mut writes = writes.lock().expect("writes");
                            let tokens = writes.entry(key.clone()).or_default();
                            if let Some(last) = tokens.last() {
                                assert!(grant.token > *last, "{key}: token {} after {}", grant.token, last);
                            }
                            tokens.push(grant.token);
                        }
                        client.release(&key).await.unwrap_or_else(|e| panic!("client {c} release {i}: {e}"));
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("a client finished");
        }
        let elapsed = start.elapsed();
        let total: usize = writes.lock().expect("writes").values().map(Vec::len).sum();
        assert_eq!(total, CLIENTS * cycles);
        let replication = Replication::read(&cluster.cluster).await.expect("the servers' statuses");
        let per_entry = replication.per_entry_since(&replication_before).expect("the load committed entries");
        let entries = replication.committed - replication_before.committed;
        assert!(
            entries < BOUNDED_FROM_ENTRIES || per_entry <= RAFT_MESSAGES_PER_ENTRY_MAX,
            "{per_entry:.1} Raft messages per committed entry, more than {RAFT_MESSAGES_PER_ENTRY_MAX}: \
             the servers replicate with far more messages than an entry needs"
        );
        format!(
            "{CLIENTS} clients x {cycles} acquire/write/release cycles on {KEYS} keys: {:.2} s ({:.0} cycles/s), \
             {per_entry:.1} Raft messages per committed entry",
            elapsed.as_secs_f64(),
            total as f64 / elapsed.as_secs_f64()
        )
    })
}
