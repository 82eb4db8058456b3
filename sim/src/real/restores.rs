//! The operator's backups and restores in a real run: of the protected
//! resource, by `fencelock-node resource backup|restore` processes, and of
//! one server, from a copy of its own data directory.
//!
//! - `BackupResource`: a consistent backup of the database (`VACUUM INTO`,
//!   or PostgreSQL's backup tables), by a tool process.
//! - `RestoreResource`: a tool process puts the backup back, marked
//!   restored, in one transaction (every worker is then answered
//!   `Unavailable`), reads the floor from the lock service and raises it.
//!   The tool records `ResourceRestored`, `FloorAsked` and `FloorRaised` in
//!   `history/resource.jsonl`, with the instant the runner recorded the
//!   backup at, so the checker pairs the two as in a simulated run.
//! - `CrashResource` until `RestartResource`: an outage. A tool process
//!   (`fencelock-node resource hold`) holds the database's write lock, so
//!   every write waits, until the runner kills it by its PID. Each write of
//!   the protocol's resource is a synced transaction, so the simulator's
//!   crash loses nothing a real database would keep; what a real run shows
//!   is the writes that wait through the outage.
//! - `BackupNode`: a copy of the server's data directory, taken while it
//!   runs (a log file read while it is appended to is a prefix of it: a
//!   state a crash could leave, torn last record and all).
//! - `RestoreNode`: the server is killed, restarted with `serve
//!   --restore-from` on the copy (its log marked restored from a stale
//!   backup: it rejoins through recovery), and `NodeRestored` is recorded.
//! - `BackupCluster`: a copy of every server's data directory.
//! - `RestoreCluster`: every server is killed, `fencelock-node cluster
//!   restore` writes one snapshot of the most advanced copy's committed
//!   state to every data directory (a fresh term, the token counter raised
//!   into the new restore epoch unless the variant is `restore-naive`),
//!   `ClusterRestored` is recorded with the token floor the tool reports,
//!   and every server starts again. Per-server backups are of the cluster
//!   generation before it and are dropped, as in the simulator.
//!
//! The simulator never lets a majority of servers recover from stale
//! backups at once (`world/restores.rs`, `may_restore`); a real run cannot
//! see when a restored server has left recovery, so it counts a server as
//! recovering for [`RECOVERING_US`] after its restore and restarts a server
//! as it is, as the simulator does, when a restore would make a majority.

use super::{now_us, Runner};
use crate::actor::Actor;
use crate::history::EventKind;
use fencelock::{NodeId, Token};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The label of the run's resource backup (a later backup replaces it, as the simulator keeps the last).
const BACKUP_LABEL: &str = "fencesim";
/// How long a restore waits for a backup still being taken.
const BACKUP_WAIT_US: u64 = 5_000_000;
/// How long an outage's tool may take to hold the resource's write lock (it opens the database first).
const HOLD_WAIT_US: u64 = 5_000_000;
/// How long a server restored from a backup counts as recovering.
const RECOVERING_US: u64 = 3_000_000;
/// The shortest floor read a restore tool is given, near the run's end.
const FLOOR_WAIT_MS_MIN: u64 = 1_000;
/// How long a whole-cluster restore's tool may take (it reads and writes a few small files).
const CLUSTER_RESTORE_WAIT_US: u64 = 20_000_000;

/// The operator's tool processes of a run, each killed by its PID at the end.
#[derive(Default)]
pub(super) struct Tools {
    running: Vec<Tool>,
    /// The tool holding the resource's write lock: the resource is down until it is killed.
    holding: Option<Child>,
    /// Every tool started, for the report.
    pub started: u64,
}

struct Tool {
    child: Child,
    backup: bool,
}

impl Tools {
    fn start(&mut self, exe: &Path, args: &[String], log: &Path, backup: bool) -> Result<(), String> {
        let child = super::procs::spawn_logged(exe, args, log)?;
        self.running.push(Tool { child, backup });
        self.started += 1;
        Ok(())
    }

    /// Tools that ended since the last look and failed, with how.
    pub(super) fn failed(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        self.running.retain_mut(|tool| match tool.child.try_wait() {
            Ok(Some(status)) => {
                if !status.success() {
                    failed.push(status.to_string());
                }
                false
            }
            Ok(None) => true,
            Err(_) => false,
        });
        failed
    }

    /// Waits (at most [`BACKUP_WAIT_US`]) for the backups still being taken.
    fn wait_backups(&mut self) {
        let deadline = now_us() + BACKUP_WAIT_US;
        while self.running.iter_mut().any(|tool| tool.backup && matches!(tool.child.try_wait(), Ok(None))) {
            if now_us() > deadline {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Ends the outage of the resource, if one lasts: the holding tool is
    /// killed by its PID. Whether it was still holding.
    fn end_hold(&mut self) -> bool {
        let Some(mut child) = self.holding.take() else { return false };
        let holding = matches!(child.try_wait(), Ok(None));
        let _ = child.kill();
        let _ = child.wait();
        holding
    }

    /// Kills every tool still running and reaps it; how many were still running.
    pub(super) fn kill_all(&mut self) -> usize {
        let mut killed = usize::from(self.end_hold());
        for mut tool in self.running.drain(..) {
            killed += usize::from(matches!(tool.child.try_wait(), Ok(None)));
            let _ = tool.child.kill();
            let _ = tool.child.wait();
        }
        killed
    }
}

impl Drop for Tools {
    fn drop(&mut self) {
        self.kill_all();
    }
}

impl Runner<'_> {
    /// The resource goes down: `fencelock-node resource hold` takes its
    /// write lock and keeps it until [`Runner::restart_resource`] kills it.
    pub(super) fn crash_resource(&mut self) -> Result<(), String> {
        if self.tools.holding.is_some() {
            return Ok(());
        }
        let ready = self.control.join("resource-held");
        let _ = std::fs::remove_file(&ready);
        let args = vec![
            "resource".to_string(),
            "hold".to_string(),
            "--config".to_string(),
            self.config.display().to_string(),
            "--resource".to_string(),
            self.resource.clone(),
            format!("--ready={}", ready.display()),
        ];
        let log = self.procs.log_of(Actor::Resource);
        let mut child = super::procs::spawn_logged(&self.options.node_bin, &args, &log)?;
        self.tools.started += 1;
        // The outage starts when the lock is held, not when the tool starts.
        let deadline = now_us() + HOLD_WAIT_US;
        while !ready.exists() {
            if !matches!(child.try_wait(), Ok(None)) || now_us() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("the resource's outage did not start: its tool failed ({})", log.display()));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.tools.holding = Some(child);
        self.record(EventKind::Crashed { actor: Actor::Resource });
        Ok(())
    }

    /// The resource comes back: the holding tool is killed, and every waiting write goes on.
    pub(super) fn restart_resource(&mut self) {
        if self.tools.end_hold() {
            self.record(EventKind::Restarted { actor: Actor::Resource });
        }
    }

    /// `fencelock-node resource backup`, in the background.
    pub(super) fn back_up_resource(&mut self, fault_at_us: u64) -> Result<(), String> {
        let args = self.resource_args("backup");
        let log = self.procs.log_of(Actor::Resource);
        self.tools.start(&self.options.node_bin, &args, &log, true)?;
        self.resource_backup_at_us = Some(fault_at_us);
        Ok(())
    }

    /// `fencelock-node resource restore` from the last backup, in the
    /// background: nothing without a backup, as in the simulator.
    pub(super) fn restore_resource(&mut self) -> Result<(), String> {
        let Some(backup_at_us) = self.resource_backup_at_us else { return Ok(()) };
        self.tools.wait_backups();
        self.resource_restores += 1;
        let end_us = self.t0_us + (self.model.safety_ms + self.model.liveness_ms) * 1_000;
        let wait_ms = (end_us.saturating_sub(now_us()) / 1_000).max(FLOOR_WAIT_MS_MIN);
        let mut args = self.resource_args("restore");
        args.extend([
            format!("--restore={}", self.resource_restores),
            format!("--backup-at-us={backup_at_us}"),
            format!("--wait-ms={wait_ms}"),
        ]);
        let log = self.procs.log_of(Actor::Resource);
        self.tools.start(&self.options.node_bin, &args, &log, false)
    }

    fn resource_args(&self, action: &str) -> Vec<String> {
        vec![
            "resource".to_string(),
            action.to_string(),
            "--config".to_string(),
            self.config.display().to_string(),
            "--resource".to_string(),
            self.resource.clone(),
            "--label".to_string(),
            BACKUP_LABEL.to_string(),
        ]
    }

    /// A copy of `node`'s data directory, taken as it runs.
    pub(super) fn back_up_node(&mut self, node: NodeId, fault_at_us: u64) -> Result<(), String> {
        let data = self.data_dir(node);
        if !data.is_dir() {
            return Ok(());
        }
        let backup = self.node_backup_dir(node);
        copy_files(&data, &backup)?;
        self.node_backups.insert(node, fault_at_us);
        Ok(())
    }

    /// `node` killed (if it runs) and restarted from its backup; restarted
    /// as it is without a backup, or when a majority would be recovering.
    pub(super) fn restore_node(&mut self, node: NodeId) -> Result<(), String> {
        let now = now_us();
        self.recovering.retain(|_, restored_at| now < *restored_at + RECOVERING_US);
        let recovering_others = self.recovering.keys().filter(|n| **n != node).count();
        let majority = usize::from(self.model.nodes) / 2 + 1;
        let Some(&backup_at_us) = self.node_backups.get(&node).filter(|_| recovering_others + 1 < majority) else {
            return self.restart(node);
        };
        self.crash(node);
        if !self.down.remove(&node) {
            return Ok(());
        }
        self.recovering.insert(node, now);
        self.record(EventKind::NodeRestored { node, backup_at_us });
        self.record(EventKind::Restarted { actor: Actor::Server(node) });
        let backup = self.node_backup_dir(node);
        self.start_server_from(node, Some(&backup))?;
        self.after_restart(node);
        Ok(())
    }

    /// A copy of every server's data directory, taken as they run.
    pub(super) fn back_up_cluster(&mut self, fault_at_us: u64) -> Result<(), String> {
        for n in 0..self.model.nodes {
            let node = NodeId(n);
            let data = self.data_dir(node);
            if data.is_dir() {
                copy_files(&data, &self.cluster_backup_dir().join(format!("node-{n}")))?;
            }
        }
        self.cluster_backup_at_us = Some(fault_at_us);
        Ok(())
    }

    /// Every server killed, the cluster restored from its backup by
    /// `fencelock-node cluster restore`, and every server started again;
    /// nothing without a backup, as in the simulator.
    pub(super) fn restore_cluster(&mut self) -> Result<(), String> {
        let Some(backup_at_us) = self.cluster_backup_at_us else { return Ok(()) };
        for n in 0..self.model.nodes {
            self.crash(NodeId(n));
        }
        let epoch = self.cluster_restores + 1;
        let args = vec![
            "cluster".to_string(),
            "restore".to_string(),
            "--config".to_string(),
            self.config.display().to_string(),
            format!("--from={}", self.cluster_backup_dir().display()),
            format!("--epoch={epoch}"),
            "--json".to_string(),
        ];
        match run_tool(&self.options.node_bin, &args) {
            Ok(token_floor) => {
                self.cluster_restores = epoch;
                self.node_backups.clear();
                self.recovering.clear();
                self.record(EventKind::ClusterRestored { epoch, backup_at_us, token_floor });
            }
            // A restore that cannot be done is the run's error, not a verdict on the protocol.
            Err(why) => return Err(format!("the whole-cluster restore failed: {why}")),
        }
        let down: Vec<NodeId> = self.down.iter().copied().collect();
        for node in down {
            self.restart(node)?;
        }
        Ok(())
    }

    fn cluster_backup_dir(&self) -> PathBuf {
        self.options.dir.join("backups").join("cluster")
    }

    fn data_dir(&self, node: NodeId) -> PathBuf {
        self.options.dir.join(format!("node-{}", node.0))
    }

    fn node_backup_dir(&self, node: NodeId) -> PathBuf {
        self.options.dir.join("backups").join(format!("node-{}", node.0))
    }
}

/// Copies every file of `from` into `to` (made afresh), each synced.
fn copy_files(from: &Path, to: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).map_err(|e| format!("{}: cannot create: {e}", to.display()))?;
    let entries = std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))?;
    for entry in entries.filter_map(Result::ok) {
        let source = entry.path();
        if !source.is_file() {
            continue;
        }
        let target = to.join(entry.file_name());
        match std::fs::copy(&source, &target) {
            Ok(_) => {}
            // A rewrite's temporary file renamed away while the copy looked: nothing lost.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{} to {}: {e}", source.display(), target.display())),
        }
        std::fs::File::open(&target)
            .and_then(|f| f.sync_all())
            .map_err(|e| format!("{}: cannot sync: {e}", target.display()))?;
    }
    Ok(())
}

/// Runs `exe args…` to its end (at most [`CLUSTER_RESTORE_WAIT_US`]) and
/// reads the token floor from the JSON line it prints.
fn run_tool(exe: &Path, args: &[String]) -> Result<Token, String> {
    let mut child = Command::new(exe)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let deadline = now_us() + CLUSTER_RESTORE_WAIT_US;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if now_us() < deadline => std::thread::sleep(std::time::Duration::from_millis(1)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("no end within 20 s".to_string());
            }
        }
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("{}: {}", output.status, stderr.lines().last().unwrap_or("no output")));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let told: serde_json::Value = serde_json::from_str(stdout.trim()).map_err(|e| format!("{e}: {stdout}"))?;
    told.get("token_floor")
        .and_then(serde_json::Value::as_u64)
        .map(Token)
        .ok_or_else(|| format!("no token_floor in {stdout}"))
}
