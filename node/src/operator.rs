//! The operator's backups and restores of the protected resource, as
//! processes of their own (`fencelock-node resource backup|restore`): what
//! `fencesim real` runs for the simulator's `BackupResource` and
//! `RestoreResource`.
//!
//! A restore is the simulator's restored resource (`sim/src/nodes/resource.rs`)
//! told by an operator's tool: the backup's rows go back, marked restored, so
//! every writer is answered `Unavailable`; then the tool reads the floor from
//! the lock service and raises it, and the writers are served again. The
//! tool records `ResourceRestored`, each `FloorAsked` and `FloorRaised` in
//! the cluster's history (`resource.jsonl`), so a real run's checker sees
//! the restore where the simulator's would.
//!
//! `ResourceRestored` is recorded before the restore's transaction begins:
//! a write committed in between is then judged as kept by the restore
//! although it went back with it, the side on which the checker can only
//! be stricter about what still fences, never blind to a stale write.

use crate::client::{FloorOptions, FloorReader};
use crate::clock::true_us;
use crate::config::Cluster;
use crate::history::{EventKind, HistoryWriter};
use crate::resource::{RaisedFloor, SqlResource};

/// The history file of the resource's restores (`resource.jsonl`).
pub const HISTORY_NAME: &str = "resource";

/// Takes a consistent backup of the resource at `url` under `label`; the file it wrote, if any.
pub async fn backup(cluster: &Cluster, url: &str, label: &str) -> Result<Option<std::path::PathBuf>, String> {
    let mut db = open(cluster, url).await?;
    let backup = db.backup(label).await.map_err(|e| format!("backup {label}: {e}"))?;
    Ok(backup.path)
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

/// Restores the resource from its backup and raises its floor from the lock
/// service; the floor raised, or `None` when the image awaits none (under
/// `resource-restore-naive`, or a newer restore's tool raised it first).
pub async fn restore(cluster: &Cluster, options: &RestoreOptions) -> Result<Option<RaisedFloor>, String> {
    let mut db = open(cluster, &options.url).await?;
    let backup = db.backup_named(&options.label).map_err(|e| e.to_string())?;
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
