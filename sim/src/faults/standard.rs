//! The standard model's fault families, each drawn an episode at a time
//! (`schedule.rs`): the network's cuts, the servers' outages and disks,
//! pauses, clock steps and drifts, the resource's crashes and restores, and
//! the two drawn whole at the start (initial clock rates, cluster restores).

use super::schedule::{Episodes, Sink};
use super::{family_rng, Family, Fault, Outage, Planner, MAJORITY_DOWN_MS_MAX};
use crate::actor::Actor;
use crate::model::Model;
use fencelock::NodeId;
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// How long before its crash a node restored from a backup took that backup.
const BACKUP_AHEAD_MS: (u64, u64) = (2_000, 8_000);

impl Planner<'_> {
    /// Drift within the real range for every clock; with `drift_beyond_bound`,
    /// one or two actors drift 3-20 times the assumed bound. Returns those actors.
    pub(super) fn initial_rates(&self, sink: &mut Sink, seed: u64) -> Vec<Actor> {
        let rng = &mut family_rng(seed, Family::Drift);
        let actors = self.clocked_actors();
        let beyond: Vec<Actor> = if self.model.drift_beyond_bound && !actors.is_empty() {
            let count = rng.gen_range(1..=2).min(actors.len());
            actors.choose_multiple(rng, count).copied().collect()
        } else {
            Vec::new()
        };
        for actor in actors {
            let ppm = self.rate(rng, beyond.contains(&actor));
            sink.push(0, 0, Fault::ClockRate { actor, ppm });
        }
        beyond
    }

    /// At most a couple of whole-cluster restores: one in about 30% of runs.
    pub(super) fn cluster_restores(&self, sink: &mut Sink, seed: u64) {
        let rng = &mut family_rng(seed, Family::ClusterRestores);
        let safety_ms = self.model.safety_ms;
        let count = if rng.gen_bool(0.3) { 1 + u32::from(rng.gen_bool(0.15)) } else { 0 };
        let mut t = super::WARMUP_MS + 1_000;
        for _ in 0..count {
            let lead_ms = rng.gen_range(2_000..=10_000);
            let room = safety_ms.saturating_sub(t + lead_ms);
            if room == 0 {
                return;
            }
            let backup_at = t + rng.gen_range(0..room);
            sink.push(backup_at, 0, Fault::BackupCluster);
            sink.push(backup_at + lead_ms, 0, Fault::RestoreCluster);
            t = backup_at + lead_ms + 1;
        }
    }
}

/// Partitions, one-way cuts, leader isolation and cut-off clients, one at
/// a time (a heal ends them all), each healed within 0.5-8 s. The family's
/// stream draws every episode's timing first and then, past them, every
/// episode's fault: `contents` is that stream already past the timings.
#[derive(Clone)]
pub(super) struct Network {
    timings: Episodes,
    contents: ChaCha8Rng,
}

impl Network {
    pub(super) fn new(model: &Model, seed: u64) -> Network {
        let timings = Episodes::new(family_rng(seed, Family::Network), (1_000, 5_000), model);
        let safety_ms = model.safety_ms;
        let contents = timings.clone().into_rng_past(|rng, t| network_lasted(rng, t, safety_ms));
        Network { timings, contents }
    }

    pub(super) fn horizon_ms(&self) -> u64 {
        self.timings.horizon_ms()
    }

    pub(super) fn draw(&mut self, planner: &Planner, sink: &mut Sink) {
        let safety_ms = planner.model.safety_ms;
        let mut drawn = None;
        self.timings.next(|rng, t| {
            let lasted = network_lasted(rng, t, safety_ms)?;
            drawn = Some((t, lasted));
            Some(lasted)
        });
        let Some((t, lasted)) = drawn else { return };
        let Some(fault) = planner.network_fault(&mut self.contents) else { return };
        sink.push(t, 0, fault);
        sink.push(t + lasted, 0, Fault::Heal);
    }
}

/// How long a network episode starting at `t` lasts; None when it would run past the safety phase.
fn network_lasted(rng: &mut ChaCha8Rng, t: u64, safety_ms: u64) -> Option<u64> {
    let lasted = rng.gen_range(500..=8_000);
    (t + lasted < safety_ms).then_some(lasted)
}

/// Server outages: a crash and a restart 0.2-5 s later, or (with restores)
/// a backup, a crash at least 2 s later and a restore from that backup.
/// A node is never down twice at once, and a majority is down at most briefly.
/// With crashes, disks also stall and fail (`disks.rs`, its own stream),
/// around the outages of this family's stream: a disk episode is drawn once
/// every outage that could overlap it is.
#[derive(Clone)]
pub(super) struct Outages {
    own: Episodes,
    disks: Option<Episodes>,
    nodes: u8,
    restore_chance: f64,
    /// The outages that may still overlap an episode to come (`disk`: drawn by the disks).
    down: Vec<Outage>,
}

/// A list of the family's events, in the whole-plan draw's order: the
/// disks' stalls, then this stream's outages, then the disks' outages.
const RANK_STALLS: u8 = 0;
const RANK_OUTAGES: u8 = 1;
const RANK_DISK_OUTAGES: u8 = 2;

impl Outages {
    pub(super) fn new(model: &Model, seed: u64) -> Outages {
        let restore_chance = match (model.crashes, model.restores) {
            (true, true) => 0.25,
            (false, true) => 1.0,
            _ => 0.0,
        };
        // Restores alone are rarer than crashes.
        let gap_ms = if model.crashes { (2_500, 7_500) } else { (8_000, 20_000) };
        let own = Episodes::new(family_rng(seed, Family::Outages), gap_ms, model);
        let disks = model.crashes.then(|| Episodes::new(family_rng(seed, Family::Disks), (3_000, 9_000), model));
        Outages { own, disks, nodes: model.nodes, restore_chance, down: Vec::new() }
    }

    pub(super) fn horizon_ms(&self) -> u64 {
        // An outage's backup comes up to `BACKUP_AHEAD_MS` before its episode.
        let own = self.own.start_ms().map_or(u64::MAX, |t| t.saturating_sub(BACKUP_AHEAD_MS.1));
        own.min(self.disks.as_ref().map_or(u64::MAX, Episodes::horizon_ms))
    }

    /// A disk episode once every outage of this stream that could overlap
    /// it is drawn, otherwise the stream's next outage.
    pub(super) fn draw(&mut self, sink: &mut Sink) {
        let own_ms = self.own.horizon_ms();
        match self.disks.as_ref().and_then(Episodes::start_ms) {
            Some(disk_ms) if own_ms >= disk_ms.saturating_add(super::disks::DISK_EPISODE_MS_MAX) => {
                self.draw_disk(sink)
            }
            _ => self.draw_own(sink),
        }
        // No episode to come starts before this, and an outage that ended by then overlaps none.
        let passed_ms = self.own.horizon_ms().min(self.disks.as_ref().map_or(u64::MAX, Episodes::horizon_ms));
        self.down.retain(|o| o.up_at > passed_ms);
    }

    fn draw_own(&mut self, sink: &mut Sink) {
        let (nodes, safety_ms, restore_chance) = (self.nodes, self.own.safety_ms(), self.restore_chance);
        let minority = usize::from(nodes.saturating_sub(1) / 2);
        let down = &mut self.down;
        self.own.next(|rng, t| {
            let node = NodeId(rng.gen_range(0..nodes));
            let mut lasted = rng.gen_range(200..=5_000);
            let torn = rng.gen_bool(0.3);
            let restore = rng.gen_bool(restore_chance);
            let backup_ahead_ms = rng.gen_range(BACKUP_AHEAD_MS.0..=BACKUP_AHEAD_MS.1);
            let majority_blip = rng.gen_bool(0.3);
            let overlaps = |o: &Outage, lasted: u64| o.crash_at < t + lasted && t < o.up_at;
            let own = || down.iter().filter(|o| !o.disk);
            if own().any(|o| o.node == node && overlaps(o, lasted)) {
                return None;
            }
            if own().filter(|o| overlaps(o, lasted)).count() + 1 > minority {
                if !majority_blip {
                    return None;
                }
                lasted = lasted.min(MAJORITY_DOWN_MS_MAX);
            }
            if t + lasted >= safety_ms {
                return None;
            }
            let backup_at = (restore && t >= backup_ahead_ms).then(|| t - backup_ahead_ms);
            let outage = Outage { node, torn, backup_at, crash_at: t, up_at: t + lasted, disk: false };
            push_outage(sink, RANK_OUTAGES, &outage);
            down.push(outage);
            Some(lasted)
        });
    }

    fn draw_disk(&mut self, sink: &mut Sink) {
        let disks = self.disks.as_mut().expect("a disk episode to draw");
        let before = self.down.len();
        let mut stalls = Vec::new();
        super::disks::disk_episode(disks, self.nodes, &mut stalls, &mut self.down);
        for stall in stalls {
            sink.push(stall.at_ms, RANK_STALLS, Fault::DiskStall { node: stall.node, fsync_ms: stall.fsync_ms });
        }
        for outage in &self.down[before..] {
            push_outage(sink, RANK_DISK_OUTAGES, outage);
        }
    }
}

/// An outage's events: its backup (if it comes back from one), its crash, its return.
fn push_outage(sink: &mut Sink, rank: u8, outage: &Outage) {
    let node = outage.node;
    if let Some(backup_at) = outage.backup_at {
        sink.push(backup_at, rank, Fault::BackupNode { node });
    }
    sink.push(outage.crash_at, rank, Fault::Crash { node, torn: outage.torn });
    let back = if outage.backup_at.is_some() { Fault::RestoreNode { node } } else { Fault::Restart { node } };
    sink.push(outage.up_at, rank, back);
}

/// Stop-the-world stalls of servers and workers, up to `pause_ms_max`, ending inside the safety phase.
#[derive(Clone)]
pub(super) struct Pauses {
    episodes: Episodes,
    actors: Vec<Actor>,
    pause_ms_max: u64,
}

impl Pauses {
    pub(super) fn new(model: &Model, seed: u64) -> Option<Pauses> {
        let actors = Planner { model }.clocked_actors();
        if !model.pauses || model.pause_ms_max == 0 || actors.is_empty() {
            return None;
        }
        let episodes = Episodes::new(family_rng(seed, Family::Pauses), (2_000, 8_000), model);
        Some(Pauses { episodes, actors, pause_ms_max: model.pause_ms_max })
    }

    pub(super) fn horizon_ms(&self) -> u64 {
        self.episodes.horizon_ms()
    }

    pub(super) fn draw(&mut self, sink: &mut Sink) {
        let (actors, pause_ms_max, safety_ms) = (&self.actors, self.pause_ms_max, self.episodes.safety_ms());
        self.episodes.next(|rng, t| {
            let actor = *actors.choose(rng).expect("actors");
            let ms = rng.gen_range(pause_ms_max.min(50)..=pause_ms_max).min(safety_ms - t);
            if ms > 0 {
                sink.push(t, 0, Fault::Pause { actor, ms });
            }
            // Pauses of different actors may overlap.
            Some(0)
        });
    }
}

/// Clock steps forward and backward, and drift changes that keep each
/// clock in its class (within the bound, or beyond it). The family's
/// stream draws every step first and then, past them, every drift change:
/// `rates` starts where `steps` will end.
#[derive(Clone)]
pub(super) struct Clocks {
    steps: Episodes,
    rates: Episodes,
    actors: Vec<Actor>,
    /// The clocks drifting beyond the bound (`initial_rates`).
    beyond: Vec<Actor>,
    step_ms_max: i64,
}

impl Clocks {
    pub(super) fn new(model: &Model, seed: u64, beyond: Vec<Actor>) -> Option<Clocks> {
        let actors = Planner { model }.clocked_actors();
        if !model.clock_steps || actors.is_empty() {
            return None;
        }
        let step_ms_max = i64::try_from(model.lease_ms.max(100)).expect("validated lease") * 2;
        let steps = Episodes::new(family_rng(seed, Family::Clocks), (3_000, 9_000), model);
        let past_steps = steps.clone().into_rng_past(|rng, _| {
            clock_step(rng, &actors, step_ms_max);
            Some(0)
        });
        let rates = Episodes::new(past_steps, (6_000, 14_000), model);
        Some(Clocks { steps, rates, actors, beyond, step_ms_max })
    }

    pub(super) fn horizon_ms(&self) -> u64 {
        self.steps.horizon_ms().min(self.rates.horizon_ms())
    }

    /// The earlier of the next step and the next drift change (steps first:
    /// the whole-plan draw pushed every step before any drift change).
    pub(super) fn draw(&mut self, planner: &Planner, sink: &mut Sink) {
        let (actors, beyond, step_ms_max) = (&self.actors, &self.beyond, self.step_ms_max);
        if self.steps.horizon_ms() <= self.rates.horizon_ms() {
            self.steps.next(|rng, t| {
                sink.push(t, 0, clock_step(rng, actors, step_ms_max));
                Some(0)
            });
        } else {
            self.rates.next(|rng, t| {
                let actor = *actors.choose(rng).expect("actors");
                let ppm = planner.rate(rng, beyond.contains(&actor));
                sink.push(t, 1, Fault::ClockRate { actor, ppm });
                Some(0)
            });
        }
    }
}

fn clock_step(rng: &mut ChaCha8Rng, actors: &[Actor], step_ms_max: i64) -> Fault {
    let actor = *actors.choose(rng).expect("actors");
    let delta_ms = rng.gen_range(10..=step_ms_max) * if rng.gen_bool(0.5) { 1 } else { -1 };
    Fault::ClockStep { actor, delta_ms }
}

/// The protected resource crashes every 2-8 s and restarts 0.1-1.5 s
/// later: a database process comes back quickly, and a restart matters
/// when it falls between a new holder's write and a stalled old holder's
/// (what a highest token kept only in memory forgets).
#[derive(Clone)]
pub(super) struct ResourceCrashes {
    episodes: Episodes,
}

impl ResourceCrashes {
    pub(super) fn new(model: &Model, seed: u64) -> ResourceCrashes {
        ResourceCrashes { episodes: Episodes::new(family_rng(seed, Family::Resource), (2_000, 8_000), model) }
    }

    pub(super) fn horizon_ms(&self) -> u64 {
        self.episodes.horizon_ms()
    }

    pub(super) fn draw(&mut self, sink: &mut Sink) {
        let safety_ms = self.episodes.safety_ms();
        self.episodes.next(|rng, t| {
            let lasted = rng.gen_range(100..=1_500);
            if t + lasted >= safety_ms {
                return None;
            }
            sink.push(t, 0, Fault::CrashResource);
            sink.push(t + lasted, 0, Fault::RestartResource);
            Some(lasted)
        });
    }
}

/// The operator's backups of the resource and its restores: episodes
/// 3-10 s apart, each a backup and, 0.5-5 s later, a restore from it
/// (what was written in between goes back, highest tokens included). In
/// 20% of episodes a second restore from the same backup follows, taken
/// before the first restore: half of them 1-30 ms after it, while the
/// first restore's floor is still being read, half 0.2-3 s after. A
/// stalled worker's lease runs out and a new holder writes inside such a
/// span often, which is what a restore must not let the stale one undo.
#[derive(Clone)]
pub(super) struct ResourceRestores {
    episodes: Episodes,
}

impl ResourceRestores {
    pub(super) fn new(model: &Model, seed: u64) -> ResourceRestores {
        ResourceRestores { episodes: Episodes::new(family_rng(seed, Family::ResourceRestores), (3_000, 10_000), model) }
    }

    pub(super) fn horizon_ms(&self) -> u64 {
        self.episodes.horizon_ms()
    }

    pub(super) fn draw(&mut self, sink: &mut Sink) {
        let safety_ms = self.episodes.safety_ms();
        self.episodes.next(|rng, t| {
            let restore_ms = rng.gen_range(500..=5_000);
            let again_ms = match (rng.gen_bool(0.2), rng.gen_bool(0.5)) {
                (false, _) => None,
                (true, true) => Some(rng.gen_range(1..=30)),
                (true, false) => Some(rng.gen_range(200..=3_000)),
            };
            let lasted = restore_ms + again_ms.unwrap_or(0);
            if t + lasted >= safety_ms {
                return None;
            }
            sink.push(t, 0, Fault::BackupResource);
            sink.push(t + restore_ms, 0, Fault::RestoreResource);
            if let Some(again_ms) = again_ms {
                sink.push(t + restore_ms + again_ms, 0, Fault::RestoreResource);
            }
            Some(lasted)
        });
    }
}
