//! What can go wrong opening or writing a data dir, each told in one line that
//! names the path, so an operator reading a log knows which file to look at.

use fencelock::NodeId;
use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub enum StorageError {
    /// A system call failed; `action` says which one ("fsync", "rename", ...).
    Io {
        path: PathBuf,
        action: &'static str,
        source: io::Error,
    },
    /// The file holds a bad record that is not its torn tail, or a header
    /// that is not ours. Nothing was changed on disk.
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// The data dir belongs to another cluster or another node.
    Identity {
        path: PathBuf,
        found_cluster_id: String,
        found_node: NodeId,
        cluster_id: String,
        node: NodeId,
    },
    /// The dir holds files but no log: refusing to write into what may be someone else's dir.
    Foreign {
        path: PathBuf,
        entry: String,
    },
    InvalidClusterId {
        path: PathBuf,
        cluster_id: String,
        reason: String,
    },
    /// An earlier write or fsync failed. What reached the disk is unknown
    /// (a failed fsync may have dropped dirty pages), so the storage refuses
    /// every later write; reopening the dir tells what is durable.
    Poisoned {
        path: PathBuf,
        cause: String,
    },
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::Io { path, action, source } => write!(f, "{action} {}: {source}", path.display()),
            StorageError::Corrupt { path, offset, reason } => {
                write!(f, "{} is corrupt at byte {offset}: {reason}", path.display())
            }
            StorageError::Identity { path, found_cluster_id, found_node, cluster_id, node } => write!(
                f,
                "{} belongs to cluster `{found_cluster_id}` node {found_node}, not cluster `{cluster_id}` node {node}",
                path.display()
            ),
            StorageError::Foreign { path, entry } => write!(
                f,
                "{} is not a fencelock data dir: it holds `{entry}` but no log (use an empty or new dir)",
                path.display()
            ),
            StorageError::InvalidClusterId { path, cluster_id, reason } => {
                write!(f, "cluster id `{cluster_id}` for {}: {reason}", path.display())
            }
            StorageError::Poisoned { path, cause } => {
                write!(f, "{} refuses writes after an earlier failure ({cause}); restart to reopen it", path.display())
            }
        }
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StorageError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Wraps an I/O error with the path and the action that failed.
pub fn io(path: impl Into<PathBuf>, action: &'static str) -> impl FnOnce(io::Error) -> StorageError {
    let path = path.into();
    move |source| StorageError::Io { path, action, source }
}
