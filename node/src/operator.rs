//! The operator's backups and restores, as processes of their own: of the
//! protected resource (`fencelock-node resource backup|restore`) and of the
//! whole cluster (`fencelock-node cluster restore`), what `fencesim real`
//! runs for the simulator's `BackupResource`, `RestoreResource` and
//! `RestoreCluster`; and an outage of the resource (`resource hold`, its
//! write lock held until the tool is killed), what it runs for
//! `CrashResource` until `RestartResource`.
//!
//! A restore is the simulator's restored resource (`sim/src/nodes/resource.rs`)
//! told by an operator's tool: the backup's rows go back, marked restored, so
//! every writer is answered `Unavailable`; then the tool reads the floor from
//! the lock service and raises it, and the writers are served again. The
//! tool records `ResourceRestored`, each `FloorAsked` and `FloorRaised` in
//! the cluster's history (`resource.jsonl`), so a real run's checker sees
//! the restore where the simulator's would.
//!
//! `ResourceRestored` is recorded before the restore's transaction begins,
//! never after a write the restored image served: a write committed in
//! between is placed after the restore although it went back with it.
//! Under the default protocol that changes no verdict, as the floor fences
//! every token issued before it on either side (docs/NODE.md, "Where real
//! runs and the simulator differ").

use crate::client::{FloorOptions, FloorReader};
use crate::clock::true_us;
use crate::config::Cluster;
use crate::history::{EventKind, HistoryWriter};
use crate::resource::{RaisedFloor, SqlResource};
use crate::storage::Storage;
use fencelock::raft::{DurableState, HardState, Snapshot};
use fencelock::{LockState, LogIndex, Term, Token, Variant};
use serde::Serialize;
use std::path::Path;

/// The history file of the resource's restores (`resource.jsonl`).
pub const HISTORY_NAME: &str = "resource";

/// Takes a consistent backup of the resource at `url` under `label`; the file it wrote, if any.
pub async fn backup(cluster: &Cluster, url: &str, label: &str) -> Result<Option<std::path::PathBuf>, String> {
    let mut db = open(cluster, url).await?;
    let backup = db.backup(label).await.map_err(|e| format!("backup {label}: {e}"))?;
    Ok(backup.path)
}

/// Holds the resource's write lock until this process is killed: every
/// writer waits meanwhile, as for a database that went down and came back.
pub async fn hold(cluster: &Cluster, url: &str, ready: Option<&Path>) -> Result<(), String> {
    let mut db = open(cluster, url).await?;
    db.hold_writes().await.map_err(|e| format!("hold: {e}"))?;
    println!("holding the resource's writes until killed");
    if let Some(ready) = ready {
        std::fs::write(ready, "held\n").map_err(|e| format!("{}: {e}", ready.display()))?;
    }
    std::future::pending::<()>().await;
    Ok(())
}

/// What one restore asks for.
#[derive(Clone, Debug)]
pub struct RestoreOptions {
    pub url: String,
    pub label: String,
    /// This restore's number, from 1.
    pub restore: u64,
    /// When the backup was taken (CLOCK_MONOTONIC µs), for the history.
    pub backup_at_us: u64,
    /// How long the floor read may take in all.
    pub wait_ms: u64,
}

/// Why a restore of the resource did not happen or did not finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// No backup was taken under the label: nothing was changed.
    NoBackup(String),
    Failed(String),
}

impl From<String> for RestoreError {
    fn from(error: String) -> RestoreError {
        RestoreError::Failed(error)
    }
}

impl std::fmt::Display for RestoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestoreError::NoBackup(label) => write!(f, "no backup labelled {label:?} to restore"),
            RestoreError::Failed(error) => f.write_str(error),
        }
    }
}

/// Restores the resource from its backup and raises its floor from the lock
/// service; the floor raised, or `None` when the image awaits none (under
/// `resource-restore-naive`, or a newer restore's tool raised it first).
pub async fn restore(cluster: &Cluster, options: &RestoreOptions) -> Result<Option<RaisedFloor>, RestoreError> {
    let mut db = open(cluster, &options.url).await?;
    let backup = db.backup_named(&options.label).map_err(|e| e.to_string())?;
    if !db.has_backup(&backup).await.map_err(|e| format!("backup {}: {e}", options.label))? {
        return Err(RestoreError::NoBackup(options.label.clone()));
    }
    let mut history = HistoryWriter::open(cluster.history.as_deref(), HISTORY_NAME)?.flushing_each_line();
    let now_us = true_us();
    let restored = EventKind::ResourceRestored { restore: options.restore, backup_at_us: options.backup_at_us };
    history.record(now_us, now_us, restored);
    db.restore(&backup, options.restore).await.map_err(|e| format!("restore from {}: {e}", options.label))?;
    // Read ids name their asker: two tools of overlapping restores never share one.
    let asker = u32::try_from(options.restore).unwrap_or(u32::MAX);
    let floor_options = FloorOptions { read_timeout_ms: options.wait_ms, ..FloorOptions::standard(asker) };
    let mut reader = FloorReader::new(cluster, floor_options).with_history(history);
    let raised = db.raise_floor_from(&mut reader).await.map_err(|e| format!("restore {}: {e}", options.restore))?;
    if let Some(raised) = &raised {
        let held = raised.floor.held.iter().map(|(key, fence)| (key.clone(), fence.token)).collect();
        reader.record(EventKind::FloorRaised {
            restore: raised.restore,
            read: raised.read,
            from: raised.from,
            token_last: raised.floor.token_last,
            held,
        });
    }
    Ok(raised)
}

async fn open(cluster: &Cluster, url: &str) -> Result<SqlResource, String> {
    SqlResource::open_variant(url, cluster.variant).await.map_err(|e| format!("resource {url}: {e}"))
}

/// What a whole-cluster restore wrote to every member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterRestored {
    /// Whole-cluster restores so far, from 1 (the operator keeps the count).
    pub epoch: u32,
    /// The committed index and term of the backup's state machine.
    pub index: LogIndex,
    pub term: Term,
    /// The token counter the restored cluster issues above.
    pub token_floor: Token,
}

/// `etcdctl snapshot restore` on every member, with every server stopped:
/// the committed state of the most advanced of the backups in `backup`
/// (one copy of each member's data dir, `backup/node-N`), one snapshot of
/// it with a fresh term above every earlier one, and the token counter
/// raised into restore epoch `epoch` so no token is ever issued twice
/// (ARCHITECTURE.md, "Tokens across restores"); the simulator's
/// `world/restores.rs`, made real.
pub fn restore_cluster(cluster: &Cluster, backup: &Path, epoch: u32) -> Result<ClusterRestored, String> {
    let mut best: Option<(LogIndex, Term, LockState)> = None;
    for node in &cluster.nodes {
        let dir = backup.join(format!("node-{}", node.id.0));
        if !dir.is_dir() {
            continue;
        }
        let image = Storage::read_image(&dir, &cluster.cluster_id, node.id).map_err(|e| e.to_string())?;
        let committed = image.committed_state(Token(0), cluster.variant);
        let ahead = match &best {
            Some((index, _, _)) => committed.0 > *index,
            None => true,
        };
        if ahead {
            best = Some(committed);
        }
    }
    let (index, backup_term, mut state) = best.ok_or_else(|| format!("{}: no backup of any node", backup.display()))?;
    let epoch_base = Token::epoch_base(epoch);
    // The one place `restore-naive` changes here: the counter stays as backed up.
    if cluster.variant != Variant::RestoreNaive {
        state.raise_token_floor(epoch_base);
    }
    let token_floor = state.token_last();
    let term = Term(backup_term.0.max(epoch_base.0));
    let image = DurableState {
        hard_state: HardState { term, vote: None, commit: index },
        snapshot: Some(Snapshot { index, term: backup_term, state }),
        entries: Vec::new(),
        restored_from_backup: false,
    };
    for node in &cluster.nodes {
        Storage::write_image(&node.data_dir, &cluster.cluster_id, node.id, &image).map_err(|e| e.to_string())?;
    }
    Ok(ClusterRestored { epoch, index, term: backup_term, token_floor })
}
