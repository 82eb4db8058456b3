//! `fencelock-node bench`: throughput and latency of a real local cluster.
//!
//! Starts a fresh cluster of child processes (fsync on: the storage syncs
//! every round that writes a term, vote or entries) in a temporary
//! directory, runs K clients in this process, each doing acquire → release
//! round trips on its own key for S seconds, and reports round trips per
//! second, the p50/p99 latency of one round trip, and the Raft messages the
//! servers sent per entry committed while the clients ran. The cluster is stopped
//! and its directory removed however the run ends (`ClusterGuard`).

use crate::client::{ClientOptions, LockClient};
use crate::cluster::{self, Replication, Started};
use crate::config::Cluster;
use fencelock::{ClientId, Key, NodeId};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Clients a bench runs at most (each holds a connection to every server).
pub const CLIENTS_MAX: usize = 200;
/// The longest bench.
pub const SECONDS_MAX: u64 = 600;
/// Latencies kept per client (a sample beyond is not recorded, only counted).
const SAMPLES_PER_CLIENT_MAX: usize = 1_000_000;
/// How long the cluster has to elect a leader.
const ELECTION_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub nodes: usize,
    pub clients: usize,
    pub seconds: f64,
    pub round_trips: u64,
    pub round_trips_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
    pub election_ms: u64,
    /// Raft messages the servers queued for their peers while the clients
    /// ran, per entry committed meanwhile (0 when none was): what
    /// replication costs.
    pub raft_messages_per_entry: f64,
}

impl BenchReport {
    pub fn line(&self) -> String {
        format!(
            "bench: {} nodes (fsync on), {} clients, {:.1} s: {} acquire→release round trips, {:.1}/s, p50 {:.2} ms, \
             p99 {:.2} ms, {} errors (leader elected in {} ms), {:.1} Raft messages per committed entry",
            self.nodes,
            self.clients,
            self.seconds,
            self.round_trips,
            self.round_trips_per_s,
            self.p50_ms,
            self.p99_ms,
            self.errors,
            self.election_ms,
            self.raft_messages_per_entry
        )
    }
}

/// Kills the cluster's processes and removes its directory when dropped.
struct ClusterGuard {
    dir: PathBuf,
    pids: Vec<(NodeId, i32)>,
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        cluster::stop(&self.pids, Duration::from_secs(3));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub async fn run(exe: &Path, nodes: usize, clients: usize, seconds: u64) -> Result<BenchReport, String> {
    let dir = std::env::temp_dir().join(format!("fencelock-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = cluster::write_cluster_file(&dir, nodes, false, false)?;
    let cluster = Cluster::load(&config)?;
    let mut guard = ClusterGuard { dir: dir.clone(), pids: Vec::new() };
    let mut started: Vec<Started> = Vec::new();
    let up = Instant::now();
    for node in &cluster.nodes {
        let s = cluster::spawn_node(exe, &config, node.id, &dir.join(format!("node-{}.log", node.id.0)))?;
        guard.pids.push((s.id, i32::try_from(s.pid).map_err(|e| e.to_string())?));
        started.push(s);
    }
    cluster::wait_for_leader(&cluster, &mut started, ELECTION_TIMEOUT).await?;
    let election_ms = up.elapsed().as_millis() as u64;
    let replication_before = Replication::read(&cluster).await?;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let begin = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|k| {
            let cluster = cluster.clone();
            tokio::spawn(async move { client_loop(&cluster, k, deadline).await })
        })
        .collect();
    let mut latencies_us = Vec::new();
    let mut errors = 0;
    let mut round_trips = 0;
    for task in tasks {
        let (samples, count, errs) = task.await.map_err(|e| format!("a bench client failed: {e}"))?;
        latencies_us.extend(samples);
        round_trips += count;
        errors += errs;
    }
    let elapsed = begin.elapsed().as_secs_f64();
    let replication = Replication::read(&cluster).await?;
    let raft_messages_per_entry = replication.per_entry_since(&replication_before).unwrap_or(0.0);
    drop(started);
    drop(guard);
    latencies_us.sort_unstable();
    let percentile = |p: f64| -> f64 {
        if latencies_us.is_empty() {
            return 0.0;
        }
        let i = ((latencies_us.len() as f64 - 1.0) * p).round() as usize;
        latencies_us[i] as f64 / 1_000.0
    };
    Ok(BenchReport {
        nodes,
        clients,
        seconds: elapsed,
        round_trips,
        round_trips_per_s: round_trips as f64 / elapsed,
        p50_ms: percentile(0.50),
        p99_ms: percentile(0.99),
        errors,
        election_ms,
        raft_messages_per_entry,
    })
}

/// One client: acquire → release on its own key until `deadline`.
async fn client_loop(cluster: &Cluster, k: usize, deadline: Instant) -> (Vec<u64>, u64, u64) {
    let id = ClientId(u32::try_from(k).expect("CLIENTS_MAX fits u32") + 1);
    let mut client = LockClient::new(cluster, &ClientOptions::standard(id));
    let key = Key::new(format!("bench-{k}"));
    let mut samples = Vec::new();
    let (mut count, mut errors) = (0, 0);
    while Instant::now() < deadline {
        let start = Instant::now();
        let ok = match client.acquire(&key, cluster.lease_ms, 0).await {
            Ok(_) => client.release(&key).await.is_ok(),
            Err(_) => false,
        };
        if !ok {
            errors += 1;
            continue;
        }
        count += 1;
        if samples.len() < SAMPLES_PER_CLIENT_MAX {
            samples.push(start.elapsed().as_micros() as u64);
        }
    }
    (samples, count, errors)
}
