//! A local cluster as child processes: write its cluster file, start its
//! servers detached, find its leader, stop it by PID.
//!
//! A cluster directory holds `cluster.toml`, `pids` (one `ID PID` line per
//! server), `node-N.log` and each server's data directory `node-N/`.
//! `cluster up` on a directory that already has a cluster file restarts that
//! cluster from its disks (same ports, same data), which is how a whole
//! cluster is brought back after a crash.
//!
//! Stopping trusts a recorded PID only while `/proc/PID/cmdline` still names
//! `fencelock-node` and the process is not a zombie: a PID reused by another
//! program is never signalled.

use crate::client::admin;
use crate::config::{Cluster, NODES_MAX};
use crate::net::{AdminReply, AdminRequest, Status};
use fencelock::NodeId;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The cluster file's name in a cluster directory.
pub const CLUSTER_FILE: &str = "cluster.toml";
/// The PID file's name in a cluster directory.
pub const PIDS_FILE: &str = "pids";
/// How long `status` and the leader wait give one server to answer.
pub const STATUS_TIMEOUT: Duration = Duration::from_millis(500);
/// Between two looks for a leader.
const POLL_EVERY: Duration = Duration::from_millis(10);
/// Between two looks for a stopped process.
const STOP_POLL_EVERY: Duration = Duration::from_millis(20);

/// A started server.
pub struct Started {
    pub id: NodeId,
    pub pid: u32,
    pub child: Child,
    pub log: PathBuf,
}

/// Writes a new cluster file for `nodes` servers on free loopback ports.
pub fn write_cluster_file(dir: &Path, nodes: usize, admin: bool, history: bool) -> Result<PathBuf, String> {
    if nodes == 0 || nodes > NODES_MAX {
        return Err(format!("--nodes must be in 1..={NODES_MAX}, got {nodes}"));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let ports = free_ports(nodes)?;
    let cluster_id = format!("c-{:012x}", crate::clock::true_us() ^ (u64::from(std::process::id()) << 20));
    let mut text = format!("cluster_id = \"{cluster_id}\"\nadmin = {admin}\n");
    if history {
        text.push_str("history = \"history\"\n");
    }
    for (id, port) in ports.iter().enumerate() {
        text.push_str(&format!("\n[[node]]\nid = {id}\naddr = \"127.0.0.1:{port}\"\ndata_dir = \"node-{id}\"\n"));
    }
    let path = dir.join(CLUSTER_FILE);
    std::fs::write(&path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    Ok(path)
}

/// Where `cluster up` looks for its servers' ports: below the kernel's
/// ephemeral range where it starts at Linux's default, 32,768 (see
/// `/proc/sys/net/ipv4/ip_local_port_range`), so that no outgoing
/// connection (a client dialling another cluster) takes one between this
/// look and the server's bind; and below the ports `fencesim real` looks in
/// (from 20,000), so that a process running both (the node's tests) never
/// gives one port twice.
const PORTS: std::ops::Range<u16> = 10_000..20_000;

/// The ports this process has written into a cluster file. It never gives
/// one again: a cluster stopped and brought back from its file binds its
/// ports again, and a cluster written in between must not have taken them.
static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// `count` loopback ports free now and never given by this process before.
/// Processes start their search at different places (from their process id
/// and the clock), so two rarely look at the same port at once.
fn free_ports(count: usize) -> Result<Vec<u16>, String> {
    free_ports_from(count, u64::from(std::process::id()).wrapping_mul(7_919) ^ crate::clock::true_us())
}

/// [`free_ports`], its search starting `start` ports into [`PORTS`].
fn free_ports_from(count: usize, start: u64) -> Result<Vec<u16>, String> {
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    let span = u64::from(PORTS.end - PORTS.start);
    let candidates =
        (0..span).map(|step| PORTS.start + u16::try_from((start % span + step) % span).expect("below the span"));
    // A listener bound and dropped at once leaves the port free (no connection, no TIME_WAIT).
    let free =
        candidates.filter(|port| !given.contains(port) && TcpListener::bind((Ipv4Addr::LOCALHOST, *port)).is_ok());
    let ports: Vec<u16> = free.take(count).collect();
    if ports.len() < count {
        return Err(format!("cannot find {count} free loopback ports in {}..{}", PORTS.start, PORTS.end));
    }
    given.extend(&ports);
    Ok(ports)
}

/// Starts server `id` of the cluster file `config` in its own process
/// group (so a Ctrl-C at the terminal does not reach it), output in `log`.
pub fn spawn_node(exe: &Path, config: &Path, id: NodeId, log: &Path) -> Result<Started, String> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: cannot open: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
    let child = Command::new(exe)
        .arg("serve")
        .arg("--config")
        .arg(config)
        .arg("--id")
        .arg(id.0.to_string())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    Ok(Started { id, pid: child.id(), child, log: log.to_path_buf() })
}

/// Writes the PID file.
pub fn write_pids(dir: &Path, started: &[Started]) -> Result<(), String> {
    let text: String = started.iter().map(|s| format!("{} {}\n", s.id.0, s.pid)).collect();
    let path = dir.join(PIDS_FILE);
    std::fs::write(&path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// Reads the PID file: `(node, pid)` pairs.
pub fn read_pids(dir: &Path) -> Result<Vec<(NodeId, i32)>, String> {
    let path = dir.join(PIDS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(NODES_MAX)
        .map(|line| {
            let mut fields = line.split_whitespace();
            let id = fields.next().and_then(|f| f.parse::<u8>().ok());
            let pid = fields.next().and_then(|f| f.parse::<i32>().ok()).filter(|p| *p > 1);
            match (id, pid) {
                (Some(id), Some(pid)) => Ok((NodeId(id), pid)),
                _ => Err(format!("{}: bad line {line:?} (expected `ID PID`)", path.display())),
            }
        })
        .collect()
}

/// Whether `pid` is a live (not zombie) fencelock-node process.
pub fn is_our_live_process(pid: i32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    if !String::from_utf8_lossy(&cmdline).contains("fencelock-node") {
        return false;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the parenthesised command name, which may hold spaces.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    state.is_some_and(|s| s != "Z" && s != "X")
}

/// SIGTERM to each live recorded process, then SIGKILL to those still alive
/// after `grace`. Returns the PIDs that had to be killed.
pub fn stop(pids: &[(NodeId, i32)], grace: Duration) -> Vec<i32> {
    let live: Vec<i32> = pids.iter().map(|(_, pid)| *pid).filter(|pid| is_our_live_process(*pid)).collect();
    for pid in &live {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
    }
    let start = Instant::now();
    while start.elapsed() < grace && live.iter().any(|pid| is_our_live_process(*pid)) {
        std::thread::sleep(STOP_POLL_EVERY);
    }
    let stubborn: Vec<i32> = live.into_iter().filter(|pid| is_our_live_process(*pid)).collect();
    for pid in &stubborn {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    stubborn
}

/// Every server's status, or why it did not answer.
pub async fn statuses(cluster: &Cluster) -> Vec<Result<Status, String>> {
    let asks = cluster.nodes.iter().map(|node| async move {
        match admin(node.addr, AdminRequest::Status, STATUS_TIMEOUT).await? {
            AdminReply::Status(status) => Ok(status),
            other => Err(format!("{}: unexpected answer {other:?}", node.addr)),
        }
    });
    let mut out = Vec::with_capacity(cluster.nodes.len());
    for ask in asks {
        out.push(ask.await);
    }
    out
}

/// What replication has cost a cluster so far: the Raft messages its
/// servers have queued for their peers since each started (their statuses'
/// `raft_sent`), and the highest commit index any of them knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replication {
    pub raft_sent: u64,
    pub committed: u64,
}

/// Rounds of status requests [`Replication::read`] makes before it gives up
/// on a server: a busy machine may keep one past `STATUS_TIMEOUT` once.
const REPLICATION_READS: usize = 5;

impl Replication {
    /// Every server's count, each asked again (up to [`REPLICATION_READS`]
    /// rounds) until all have answered.
    pub async fn read(cluster: &Cluster) -> Result<Replication, String> {
        let mut answers: Vec<Option<Status>> = vec![None; cluster.nodes.len()];
        let mut last_error = String::new();
        for _ in 0..REPLICATION_READS {
            for (answer, asked) in answers.iter_mut().zip(statuses(cluster).await) {
                match asked {
                    Ok(status) if answer.is_none() => *answer = Some(status),
                    Ok(_) => {}
                    Err(error) => last_error = error,
                }
            }
            if answers.iter().all(Option::is_some) {
                let answered = answers.iter().flatten();
                let raft_sent = answered.clone().map(|status| status.raft_sent).sum();
                let committed = answered.map(|status| status.commit_index.0).max().unwrap_or(0);
                return Ok(Replication { raft_sent, committed });
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
        Err(format!("a server did not answer its status in {REPLICATION_READS} rounds: {last_error}"))
    }

    /// The Raft messages per entry committed since `before`; `None` when
    /// none was.
    pub fn per_entry_since(&self, before: &Replication) -> Option<f64> {
        let committed = self.committed.checked_sub(before.committed).filter(|entries| *entries > 0)?;
        Some(self.raft_sent.saturating_sub(before.raft_sent) as f64 / committed as f64)
    }
}

/// The serving leader, if one server says it is one.
pub async fn serving_leader(cluster: &Cluster) -> Option<Status> {
    statuses(cluster).await.into_iter().flatten().find(|s| s.serving && s.leader == Some(s.node))
}

/// Waits until a leader serves, at most `timeout`; fails early when a
/// started server exits (with the last line of its log).
pub async fn wait_for_leader(cluster: &Cluster, started: &mut [Started], timeout: Duration) -> Result<Status, String> {
    let start = Instant::now();
    loop {
        if let Some(leader) = serving_leader(cluster).await {
            return Ok(leader);
        }
        for s in started.iter_mut() {
            if let Ok(Some(exit)) = s.child.try_wait() {
                let last = std::fs::read_to_string(&s.log).unwrap_or_default();
                let last = last.lines().last().unwrap_or("").trim().to_string();
                return Err(format!("node {} exited ({exit}): {last}", s.id.0));
            }
        }
        if start.elapsed() > timeout {
            return Err(format!("no leader within {} ms", timeout.as_millis()));
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::{free_ports_from, PORTS};
    use std::net::{Ipv4Addr, TcpListener};

    /// Two searches from one place get different ports, both below the
    /// ephemeral range, and a port bound by another program is passed over.
    #[test]
    fn a_process_never_gives_a_port_twice_nor_one_in_use() {
        let start = 4_242;
        let busy = TcpListener::bind((Ipv4Addr::LOCALHOST, PORTS.start + start as u16 + 3));
        let first = free_ports_from(3, start).expect("free ports");
        let second = free_ports_from(3, start).expect("free ports");
        assert!(first.iter().chain(&second).all(|port| PORTS.contains(port)), "{first:?} {second:?}");
        assert!(first.iter().all(|port| !second.contains(port)), "{first:?} and {second:?}");
        if let Ok(busy) = busy {
            let port = busy.local_addr().expect("bound").port();
            assert!(!first.contains(&port) && !second.contains(&port), "{port} is in use: {first:?} {second:?}");
        }
    }
}
