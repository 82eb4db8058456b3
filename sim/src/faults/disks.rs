//! The disk family of the fault plan: slow disks, dying disks and rack power
//! losses. Its own stream; each episode drawn once every outage it could
//! overlap is (`standard.rs`), so it never puts a node down twice and keeps
//! the outages' majority rule.
//!
//! Why: a crash only loses what was written and not yet synced, and with the
//! normal 1 ms fsync that window is rarely open when a crash comes. Real disks
//! stall for hundreds of milliseconds (etcd 15247: a leader stuck in fsync),
//! a dying disk stalls before it fails, and a power loss takes a rack's
//! servers (sharing its degraded storage) down at the same instant. Those are
//! the crashes that meet writes in flight, where sending before the fsync
//! (a vote, an acknowledgement) and syncing first differ.

use super::schedule::Episodes;
use super::{Outage, MAJORITY_DOWN_MS_MAX};
use fencelock::NodeId;
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// fsync latency of a stalled disk.
const STALL_FSYNC_MS: (u64, u64) = (50, 500);

/// A node's disk stalls (`fsync_ms > 0`) or recovers (`0`) at `at_ms`.
pub(super) struct Stall {
    pub(super) at_ms: u64,
    pub(super) node: NodeId,
    pub(super) fsync_ms: u64,
}

/// The longest a disk episode lasts: a dying disk's stall, crash and return.
pub(super) const DISK_EPISODE_MS_MAX: u64 = 4_000;

/// Episodes 3-9 s apart: a slow disk that recovers, a dying disk (a stall
/// ending in a crash mid-write; the node returns on a new disk), or a rack
/// power loss (a majority or all servers at once, some with stalled
/// storage, back within [`MAJORITY_DOWN_MS_MAX`], one by one). Draws the
/// next episode; `outages` holds every outage that may overlap it.
pub(super) fn disk_episode(episodes: &mut Episodes, nodes: u8, stalls: &mut Vec<Stall>, outages: &mut Vec<Outage>) {
    let servers: Vec<NodeId> = (0..nodes).map(NodeId).collect();
    let cluster = Cluster { nodes, safety_ms: episodes.safety_ms(), servers: &servers };
    episodes.next(|rng, t| match rng.gen_range(0..100) {
        0..30 => slow_disk(rng, t, &cluster, stalls),
        30..60 => dying_disk(rng, t, &cluster, stalls, outages),
        _ => rack_power_loss(rng, t, &cluster, stalls, outages),
    });
}

/// What every disk episode needs to know of the cluster.
struct Cluster<'a> {
    nodes: u8,
    safety_ms: u64,
    servers: &'a [NodeId],
}

fn overlaps(outage: &Outage, from: u64, to: u64) -> bool {
    outage.crash_at < to && from < outage.up_at
}

/// A disk slows down (fsync 20-300 ms) for 1-4 s and recovers.
fn slow_disk(rng: &mut ChaCha8Rng, t: u64, cluster: &Cluster, stalls: &mut Vec<Stall>) -> Option<u64> {
    let node = *cluster.servers.choose(rng)?;
    let fsync_ms = rng.gen_range(20..=300);
    let lasted = rng.gen_range(1_000..=4_000);
    if t + lasted >= cluster.safety_ms {
        return None;
    }
    stalls.push(Stall { at_ms: t, node, fsync_ms });
    stalls.push(Stall { at_ms: t + lasted, node, fsync_ms: 0 });
    Some(lasted)
}

/// A disk stalls, then its node crashes mid-write; it comes back on a new
/// disk. Never a node already down, never more than a minority at once.
fn dying_disk(
    rng: &mut ChaCha8Rng,
    t: u64,
    cluster: &Cluster,
    stalls: &mut Vec<Stall>,
    outages: &mut Vec<Outage>,
) -> Option<u64> {
    let minority = usize::from(cluster.nodes.saturating_sub(1) / 2);
    let node = *cluster.servers.choose(rng)?;
    let fsync_ms = rng.gen_range(STALL_FSYNC_MS.0..=STALL_FSYNC_MS.1);
    let crash_at = t + rng.gen_range(300..=2_000);
    let up_at = crash_at + rng.gen_range(200..=2_000);
    let torn = rng.gen_bool(0.3);
    assert!(up_at - t <= DISK_EPISODE_MS_MAX, "a dying disk's episode within the outages drawn ahead of it");
    if up_at >= cluster.safety_ms
        || outages.iter().any(|o| o.node == node && overlaps(o, t, up_at))
        || outages.iter().filter(|o| overlaps(o, crash_at, up_at)).count() + 1 > minority
    {
        return None;
    }
    stalls.push(Stall { at_ms: t, node, fsync_ms });
    // The failed disk is replaced: the node comes back on a healthy one.
    stalls.push(Stall { at_ms: up_at, node, fsync_ms: 0 });
    outages.push(Outage { node, torn, backup_at: None, crash_at, up_at, disk: true });
    Some(up_at - t)
}

/// A rack loses power: a majority or all servers crash at one instant, some
/// with stalled storage, and come back one by one. Only on a cluster
/// otherwise whole, so a majority is down no longer than the loss.
fn rack_power_loss(
    rng: &mut ChaCha8Rng,
    t: u64,
    cluster: &Cluster,
    stalls: &mut Vec<Stall>,
    outages: &mut Vec<Outage>,
) -> Option<u64> {
    let nodes = cluster.nodes;
    let count = rng.gen_range(usize::from(nodes / 2 + 1)..=usize::from(nodes));
    let mut lost: Vec<NodeId> = cluster.servers.choose_multiple(rng, count).copied().collect();
    lost.sort_unstable();
    let crash_at = t + rng.gen_range(200..=1_500);
    let plans: Vec<(NodeId, Option<u64>, u64, bool)> = lost
        .iter()
        .map(|&node| {
            let stalled = rng.gen_bool(0.7).then(|| rng.gen_range(STALL_FSYNC_MS.0..=STALL_FSYNC_MS.1));
            (node, stalled, crash_at + rng.gen_range(200..=MAJORITY_DOWN_MS_MAX), rng.gen_bool(0.3))
        })
        .collect();
    let last_up = plans.iter().map(|p| p.2).max()?;
    assert!(last_up - t <= DISK_EPISODE_MS_MAX, "a power loss's episode within the outages drawn ahead of it");
    if last_up >= cluster.safety_ms || outages.iter().any(|o| overlaps(o, t, last_up)) {
        return None;
    }
    for (node, stalled, up_at, torn) in plans {
        if let Some(fsync_ms) = stalled {
            stalls.push(Stall { at_ms: t, node, fsync_ms });
            stalls.push(Stall { at_ms: up_at, node, fsync_ms: 0 });
        }
        outages.push(Outage { node, torn, backup_at: None, crash_at, up_at, disk: true });
    }
    Some(last_up - t)
}
