//! Ack amnesia at run time ([`crate::faults::Fault::AckAmnesia`], planned
//! in `faults/amnesia.rs`). An episode starts by cutting a minority of the
//! leader's followers off from the other servers, so from then on every
//! entry the leader commits is acknowledged by each connected follower and
//! by none of the minority; it either backs up every server's disk (restore
//! mode) or makes every fsync of the connected followers take `fsync_ms`
//! (crash mode). Once the cut has settled (50 ms, for what was already on
//! the wire to the minority), the first time the leader applies an entry the
//! supervisor strikes, in the instant of that apply: one connected follower forgets what
//! it acknowledged (restored from the episode's backup; or crashed, its
//! unsynced writes lost, and restarted 5-50 ms later), the leader's cable is
//! pulled for `down_ms` (its packets on the wire are lost too), the slowed
//! disks are normal again and the minority is reconnected. The forgetful
//! follower and the minority then make a majority that lacks a committed
//! entry unless the protocol kept it: a follower acknowledges only what is
//! durable, so the crash loses nothing it acknowledged (`ack-before-durable`
//! loses it), and a restored node does not vote until it has caught up
//! (`amnesia-rejoin` votes at once and elects a leader that overwrites what
//! the old leader applied).
//!
//! One episode at a time. An episode whose leader stops leading, or that
//! sees no apply in `for_ms`, ends by reconnecting the minority and
//! restoring the disks' speed. A planned heal ends the cut (and the pulled
//! cable) early; a whole-cluster restore ends the episode (its backups
//! belong to the generation before); a planned disk stall of a slowed
//! follower is overridden when the episode ends. The restore follows the
//! operator's rule: never a majority of servers recovering from backups at
//! once. Which followers are cut off, which one forgets and how long a
//! crashed one is down come from the family's own stream, in the order of
//! the run's events. Every step is in the history.

use super::churn::Cluster;
use crate::faults::{ChurnEvent, Fault};
use crate::machine::disk::NodeImage;
use crate::machine::net::Addr;
use fencelock::{NodeId, Term};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// How long after the cut the entries the leader applies count: what was on
/// the wire to the minority when it was cut still arrives.
const SETTLE_US: u64 = 50_000;

/// A crashed follower is back this long after its strike, at least…
const BACK_MS_MIN: u64 = 5;
/// …and at most: in time to vote in the election the pulled cable starts.
const BACK_MS_MAX: u64 = 50;

struct Episode {
    until_us: u64,
    down_ms: u64,
    leader: NodeId,
    term: Term,
    cut: Vec<NodeId>,
    /// Restore mode: every server's durable disk at the start, in node order.
    backups: Vec<NodeImage>,
    /// Crash mode: the followers whose fsyncs were slowed.
    slowed: Vec<NodeId>,
    started_us: u64,
    /// The leader's apply count once the cut has settled.
    applies_seen: Option<u64>,
}

pub(super) struct Amnesia {
    rng: ChaCha8Rng,
    episode: Option<Episode>,
    /// The leader whose cable a strike pulled, and the instant it is plugged back in.
    unplugged: Option<(NodeId, u64)>,
    /// A follower a strike crashed, and the instant it is restarted.
    crashed: Option<(NodeId, u64)>,
}

impl Amnesia {
    pub(super) fn new(seed: u64) -> Amnesia {
        Amnesia { rng: crate::streams::ack_amnesia(seed), episode: None, unplugged: None, crashed: None }
    }

    /// Whether the family looks at every role and apply as it is recorded (an episode is on).
    pub(super) fn listens(&self) -> bool {
        self.episode.is_some()
    }

    /// The next instant the family must act whatever is recorded: the
    /// episode's end, the cut's settling (the leader's apply count is
    /// taken then), the leader plugged back in, the follower restarted.
    pub(super) fn next_wake_us(&self, now_us: u64) -> Option<u64> {
        let episode = self.episode.as_ref().map(|episode| {
            let settled_us = episode.started_us + SETTLE_US;
            if episode.applies_seen.is_none() && settled_us > now_us {
                settled_us.min(episode.until_us)
            } else {
                episode.until_us
            }
        });
        let back = self.unplugged.map(|(_, at_us)| at_us);
        let restart = self.crashed.map(|(_, at_us)| at_us);
        [episode, back, restart].into_iter().flatten().min()
    }

    /// Starts an episode under the current leader, if there is one and
    /// nothing of an earlier episode is still on.
    pub(super) fn start(&mut self, now_us: u64, fault: &Fault, cluster: &mut impl Cluster) {
        let Fault::AckAmnesia { for_ms, down_ms, fsync_ms } = *fault else {
            unreachable!("an ack-amnesia episode starts from its fault")
        };
        if self.episode.is_some() || self.unplugged.is_some() || self.crashed.is_some() {
            return;
        }
        let Some((leader, term)) = cluster.live_leaders().into_iter().max_by_key(|(_, term)| *term) else {
            return;
        };
        let servers: Vec<NodeId> = servers(cluster).collect();
        let followers: Vec<NodeId> = servers.iter().copied().filter(|n| *n != leader).collect();
        let mut cut: Vec<NodeId> = followers.choose_multiple(&mut self.rng, (servers.len() - 1) / 2).copied().collect();
        cut.sort_unstable();
        let (backups, slowed) = if fsync_ms == 0 {
            (servers.iter().map(|node| cluster.back_up(*node)).collect(), Vec::new())
        } else {
            let slowed: Vec<NodeId> = followers.iter().copied().filter(|n| !cut.contains(n)).collect();
            for node in &slowed {
                cluster.set_fsync_us(*node, fsync_ms * 1_000);
            }
            (Vec::new(), slowed)
        };
        cluster.cut_off(&addrs(&cut));
        cluster.note(ChurnEvent::AmnesiaArmed { leader, term, cut: cut.clone(), fsync_ms });
        self.episode = Some(Episode {
            until_us: now_us + for_ms * 1_000,
            down_ms,
            leader,
            term,
            cut,
            backups,
            slowed,
            started_us: now_us,
            applies_seen: None,
        });
    }

    /// Brings back what a strike took away when its time is up, and plays the episode.
    pub(super) fn step(&mut self, now_us: u64, cluster: &mut impl Cluster) {
        if let Some((node, _)) = self.unplugged.filter(|(_, at_us)| *at_us <= now_us) {
            self.unplugged = None;
            cluster.plug(node);
            cluster.note(ChurnEvent::PluggedBack { node });
        }
        if let Some((node, _)) = self.crashed.filter(|(_, at_us)| *at_us <= now_us) {
            self.crashed = None;
            cluster.restart(node);
        }
        let Some(episode) = self.episode.as_mut() else {
            return;
        };
        if now_us >= episode.until_us || !cluster.leads(episode.leader, episode.term) {
            let episode = self.episode.take().expect("checked above");
            end(&episode, cluster);
            return;
        }
        if now_us < episode.started_us + SETTLE_US {
            return;
        }
        let applies = cluster.applies(episode.leader);
        let Some(seen) = episode.applies_seen else {
            episode.applies_seen = Some(applies);
            return;
        };
        if applies > seen {
            let episode = self.episode.take().expect("checked above");
            self.strike(&episode, now_us, cluster);
            end(&episode, cluster);
        }
    }

    /// Makes a connected follower forget what it acknowledged and pulls the leader's cable.
    fn strike(&mut self, episode: &Episode, now_us: u64, cluster: &mut impl Cluster) {
        let connected: Vec<NodeId> = servers(cluster)
            .filter(|n| *n != episode.leader && !episode.cut.contains(n) && cluster.is_up(*n))
            .collect();
        let Some(node) = connected.choose(&mut self.rng).copied() else {
            return;
        };
        let crashed = !episode.slowed.is_empty();
        let back_ms = if crashed { self.rng.gen_range(BACK_MS_MIN..=BACK_MS_MAX) } else { 0 };
        let backup_ms = (now_us - episode.started_us) / 1_000;
        if crashed {
            cluster.crash(node, false);
            self.crashed = Some((node, now_us + back_ms * 1_000));
        } else {
            let image = episode.backups[usize::from(node.0)].clone();
            if !cluster.restore_from_backup(node, episode.started_us, image) {
                return;
            }
        }
        let (leader, term, down_ms) = (episode.leader, episode.term, episode.down_ms);
        cluster.note(ChurnEvent::AmnesiaStruck { node, leader, term, crashed, backup_ms, back_ms, down_ms });
        cluster.unplug(leader);
        self.unplugged = Some((leader, now_us + down_ms * 1_000));
    }

    /// A heal of the network reconnects the minority and plugs the leader
    /// back in; a whole-cluster restore makes the episode's backups stale
    /// for the new generation. Either ends the episode at the supervisor's next step. A
    /// planned crash, restart or restore of the crashed follower takes it over.
    pub(super) fn yield_to(&mut self, fault: &Fault) {
        if matches!(fault, Fault::Heal | Fault::RestoreCluster) {
            if let Some(episode) = self.episode.as_mut() {
                episode.until_us = 0;
            }
        }
        match fault {
            Fault::Heal => self.unplugged = None,
            Fault::RestoreCluster => self.crashed = None,
            Fault::Crash { node, .. } | Fault::Restart { node } | Fault::RestoreNode { node }
                if self.crashed.is_some_and(|(crashed, _)| crashed == *node) =>
            {
                self.crashed = None;
            }
            _ => {}
        }
    }
}

/// Ends an episode: the slowed disks are normal again and the minority is reconnected.
fn end(episode: &Episode, cluster: &mut impl Cluster) {
    for node in &episode.slowed {
        cluster.set_fsync_us(*node, 0);
    }
    let side = addrs(&episode.cut);
    cluster.reconnect(&side);
    cluster.note(ChurnEvent::Reconnected { addrs: side });
}

fn servers(cluster: &impl Cluster) -> impl Iterator<Item = NodeId> {
    (0..cluster.nodes()).map(|n| NodeId(u8::try_from(n).expect("nodes fit")))
}

fn addrs(nodes: &[NodeId]) -> Vec<Addr> {
    nodes.iter().map(|node| Addr::Server(*node)).collect()
}
