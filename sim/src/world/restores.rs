//! The operator's backups and restores: one server from a stale backup of
//! its own disk (amnesia), the whole cluster from one snapshot
//! (ARCHITECTURE.md, "Restores"), and the protected resource from its last
//! backup (docs/SPEC.md, "The restore floor and why it is safe"). What the
//! disks become is decided here; the supervisor stops and starts the
//! processes around it.

use crate::machine::disk::{NodeImage, ResourceImage, SharedDisk};
use fencelock::raft::{committed_state, HardState, Snapshot};
use fencelock::{LockState, LogIndex, NodeId, Term, Token, Variant};
use std::collections::BTreeMap;

/// A whole-cluster backup: the state machine as of a committed index.
#[derive(Clone)]
struct ClusterBackup {
    at_us: u64,
    index: LogIndex,
    term: Term,
    state: LockState,
}

/// What the operator keeps outside the cluster.
#[derive(Default)]
pub(super) struct Backups {
    nodes: BTreeMap<NodeId, (u64, NodeImage)>,
    cluster: Option<ClusterBackup>,
    /// Whole-cluster restores so far; the operator keeps this count outside the backups.
    epoch: u32,
    /// The resource's last backup and when it was taken.
    resource: Option<(u64, ResourceImage)>,
    /// The resource's restores so far.
    resource_restores: u64,
}

/// A whole-cluster restore, ready to be written to every disk.
pub(super) struct ClusterRestore {
    pub image: NodeImage,
    pub epoch: u32,
    pub backup_at_us: u64,
    pub token_floor: Token,
}

impl Backups {
    pub(super) fn back_up_node(&mut self, node: NodeId, at_us: u64, image: NodeImage) {
        self.nodes.insert(node, (at_us, image));
    }

    pub(super) fn back_up_resource(&mut self, at_us: u64, image: ResourceImage) {
        self.resource = Some((at_us, image));
    }

    /// Whether the resource was backed up.
    pub(super) fn resource_backed_up(&self) -> bool {
        self.resource.is_some()
    }

    /// The resource's last backup, marked as restored by the next restore
    /// number (it answers no write until it has read its floors), with the
    /// instant it was taken; `None` before the first backup.
    pub(super) fn resource_restore(&mut self) -> Option<(u64, u64, ResourceImage)> {
        let (at_us, mut image) = self.resource.clone()?;
        self.resource_restores += 1;
        image.state.restored(self.resource_restores, image.variant);
        Some((self.resource_restores, at_us, image))
    }

    /// `etcdctl snapshot save`: the committed state of the most advanced server.
    pub(super) fn back_up_cluster(
        &mut self,
        disks: &[SharedDisk<NodeImage>],
        at_us: u64,
        floor: Token,
        variant: Variant,
    ) {
        self.cluster = disks
            .iter()
            .map(|disk| {
                let disk = disk.lock().expect("disk lock");
                let image = disk.durable();
                committed_state(image.snapshot.as_ref(), &image.entries, image.hard_state.commit, floor, variant)
            })
            .max_by_key(|(index, _, _)| *index)
            .map(|(index, term, state)| ClusterBackup { at_us, index, term, state });
    }

    /// The backup to restore `node` from, marked as restored, with the
    /// instant it was taken; `None` when the operator must restart the node
    /// as it is. Protocol-aware recovery needs a majority that kept its
    /// disks: the operator never has a majority of nodes recovering from
    /// stale backups at once (they could not elect the leader they recover
    /// from).
    pub(super) fn node_restore(&self, node: NodeId, disks: &[SharedDisk<NodeImage>]) -> Option<(u64, NodeImage)> {
        let (at_us, image) = self.nodes.get(&node).cloned().filter(|_| may_restore(node, disks))?;
        Some((at_us, NodeImage { restored_from_backup: true, ..image }))
    }

    /// `etcdctl snapshot restore` on every member: one snapshot, a fresh
    /// term above every earlier one, and the token floor raised into a new
    /// restore epoch so no token is ever issued twice (ARCHITECTURE.md,
    /// "Tokens across restores"). Per-node backups belong to the cluster
    /// generation before the restore and are dropped: restoring one into the
    /// new generation would be an operator's error.
    pub(super) fn cluster_restore(&mut self, variant: Variant) -> Option<ClusterRestore> {
        let backup = self.cluster.clone()?;
        self.epoch += 1;
        let epoch_base = Token::epoch_base(self.epoch);
        let mut state = backup.state.clone();
        // The one place `restore-naive` changes: the counter stays as backed up.
        if variant != Variant::RestoreNaive {
            state.raise_token_floor(epoch_base);
        }
        let token_floor = state.token_last();
        self.nodes.clear();
        let term = Term(backup.term.0.max(epoch_base.0));
        let image = NodeImage {
            hard_state: HardState { term, vote: None, commit: backup.index },
            snapshot: Some(Snapshot { index: backup.index, term: backup.term, state }),
            entries: Vec::new(),
            restored_from_backup: false,
        };
        Some(ClusterRestore { image, epoch: self.epoch, backup_at_us: backup.at_us, token_floor })
    }
}

/// Whether the operator may restore `node` from a stale backup: never a
/// majority of nodes recovering from backups at once (they could not elect
/// the leader they recover from).
pub(super) fn may_restore(node: NodeId, disks: &[SharedDisk<NodeImage>]) -> bool {
    let recovering_others = (0..disks.len())
        .filter(|&n| n != usize::from(node.0))
        .filter(|&n| disks[n].lock().expect("disk lock").durable().restored_from_backup)
        .count();
    let majority = disks.len() / 2 + 1;
    recovering_others + 1 < majority
}
