//! Floor reads on real processes: a `FloorReader` asks a server over TCP
//! (`Envelope::FloorRead`), gets its `FloorReply` back on the same
//! connection, and follows redirects and silences until a leader answers
//! with its lock table and token counter; with no server up it gives up
//! within its attempts. Every process is killed by PID when a test ends.

use crate::common;

use common::{bounded, serial, TestCluster};
use fencelock::resource::Fence;
use fencelock::{ClientId, Key};
use fencelock_node::client::{ClientOptions, FloorError, FloorOptions, FloorReader, LockClient};
use fencelock_node::cluster;
use std::time::Instant;

/// Longer than the test: the lock is still held at every read.
const LEASE_MS: u64 = 60_000;

#[test]
fn a_floor_read_is_sent_on_from_a_follower_to_the_leader() {
    let _serial = serial();
    bounded(async {
        let cluster = TestCluster::up(3);
        let key = Key::new("invoice/B-1042");
        let mut client = LockClient::new(&cluster.cluster, &ClientOptions::standard(ClientId(1)));
        let grant = client.acquire(&key, LEASE_MS, 0).await.expect("the lock is free");
        let leader = cluster::serving_leader(&cluster.cluster).await.expect("a serving leader");
        let follower = cluster.cluster.nodes.iter().map(|n| n.id).find(|id| *id != leader.node).expect("a follower");

        let options = FloorOptions { first: follower, ..FloorOptions::standard(7) };
        let mut reader = FloorReader::new(&cluster.cluster, options);
        let start = Instant::now();
        let floor = reader.read_floor().await.expect("a floor");
        println!("floor read from follower {} in {} ms: {floor:?}", follower.0, start.elapsed().as_millis());
        assert_eq!(floor.token_last, grant.token, "the grant is the last token issued");
        assert_eq!(floor.held, vec![(key.clone(), Fence { token: grant.token, holder: grant.holder })]);

        // A second read on the same reader (new read ids, kept connections) sees a later grant.
        client.release(&key).await.expect("release");
        let other = Key::new("invoice/B-1043");
        let grant = client.acquire(&other, LEASE_MS, 0).await.expect("the lock is free");
        let floor = reader.read_floor().await.expect("a second floor");
        assert_eq!(floor.token_last, grant.token);
        assert_eq!(
            floor.held,
            vec![(other, Fence { token: grant.token, holder: grant.holder })],
            "B-1042 was released"
        );
    });
}

#[test]
fn a_floor_read_outlasts_its_leader_and_gives_up_on_a_dead_cluster() {
    let _serial = serial();
    bounded(async {
        let cluster = TestCluster::up(3);
        let key = Key::new("invoice/B-1042");
        let mut client = LockClient::new(&cluster.cluster, &ClientOptions::standard(ClientId(1)));
        let grant = client.acquire(&key, LEASE_MS, 0).await.expect("the lock is free");
        let leader = cluster::serving_leader(&cluster.cluster).await.expect("a serving leader");
        cluster.kill9(leader.node);

        // Asked first, the dead leader refuses the connection; the others
        // know no leader until one is elected, and then the new one answers.
        let options = FloorOptions { first: leader.node, ..FloorOptions::standard(7) };
        let mut reader = FloorReader::new(&cluster.cluster, options);
        let start = Instant::now();
        let floor = reader.read_floor().await.expect("a floor from the new leader");
        println!("floor read across a failover in {} ms", start.elapsed().as_millis());
        assert!(floor.token_last >= grant.token, "a new leader's counter is not below an issued token");
        assert_eq!(floor.held, vec![(key, Fence { token: grant.token, holder: grant.holder })], "the lock survives");

        for node in cluster.cluster.nodes.iter().map(|n| n.id).filter(|id| *id != leader.node) {
            cluster.kill9(node);
        }
        let options = FloorOptions { read_timeout_ms: 200, ..FloorOptions::standard(8) };
        let mut reader = FloorReader::new(&cluster.cluster, options);
        assert!(matches!(reader.read_floor().await, Err(FloorError::GaveUp { .. })), "no server is up");
        let options = FloorOptions { attempts_max: 3, ..FloorOptions::standard(9) };
        let mut reader = FloorReader::new(&cluster.cluster, options);
        assert_eq!(reader.read_floor().await, Err(FloorError::GaveUp { attempts: 3 }));
    });
}
