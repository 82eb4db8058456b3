//! Swarm testing (Groce et al., ISSTA 2012; TigerBeetle's VOPR draws its
//! options per seed): each seed draws which fault families are on, how hard
//! they strike, the cluster's size and Raft's batching, within the model's
//! limits.
//!
//! Why: the standard model turns every family on in every seed, and most
//! bugs need a few faults that the others mask: a crash ends the stale
//! leader a renewal needed, a restore wipes the log a lost acknowledgement
//! diverged. Seeds that each draw a few families meet those few more often.
//!
//! The draw is a pure function of the model and the seed, from the seed's
//! own stream (`streams::swarm`), and its result is a plain [`Model`] with
//! `swarm = false`: the fault plan, the world, the checker and a saved
//! scenario file all see an ordinary model. The model's values are upper
//! limits: a family off in the model stays off, a rate, pause or drift bound
//! is drawn at most as high, the cluster is an odd size from 3 up to
//! `nodes`, and batching is either the model's or one entry, one append in
//! flight. Every coin and fraction is drawn whether or not the model lets it
//! matter, so switching one family off in the model does not reshuffle the
//! others' draws.

use crate::model::Model;
use fencelock::raft::SNAPSHOT_THRESHOLD_ENTRIES_STANDARD;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Fractions of a limit are drawn in steps of 1/`FRACTION_STEPS`.
const FRACTION_STEPS: u32 = 1_000;

/// A seed that compacts often does so every this many applied entries, at least…
const SNAPSHOT_OFTEN_MIN: u64 = 8;
/// …and at most.
const SNAPSHOT_OFTEN_MAX: u64 = 64;
/// A seed with short queues queues at most this many waiters per key.
const SHORT_QUEUE_MAX: u32 = 2;
/// Rates are kept to five decimals, so a drawn model reads well in a file.
const RATE_STEPS: f64 = 100_000.0;

/// The coins a swarm draw tosses, in the order it tosses them. Plain swarm
/// tosses each fairly; a steered hunt (`faults::steer`) weights them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Coin {
    /// One entry per append message (else the model's batch).
    SmallBatches,
    /// One append in flight per follower (else the model's window).
    OneInFlight,
    Partitions,
    Crashes,
    LeaderChurn,
    Restores,
    Pauses,
    ClockSteps,
    ResourceCrashes,
    Corruption,
    DriftBeyondBound,
    Loss,
    Dup,
    ResourceRestores,
    AckCrashes,
    /// Compact the log every 8 to 64 entries.
    CompactOften,
    RenewStrikes,
    AckAmnesia,
    GrantStrikes,
    VoteStrikes,
    FenceStrikes,
    /// The settings: each heads when its fraction is drawn in the upper
    /// half (a weighted one moves its draws into that half or out of it).
    HeavyLoss,
    HeavyDup,
    LongPauses,
    FastDrift,
    /// Compaction every 36 to 64 entries rather than 8 to 36.
    SparseCompaction,
    LateRenewals,
    /// A wait queue of one or two per key, which the workers fill.
    ShortQueues,
    Figure8Strikes,
}

impl Coin {
    pub const ALL: [Coin; 29] = [
        Coin::SmallBatches,
        Coin::OneInFlight,
        Coin::Partitions,
        Coin::Crashes,
        Coin::LeaderChurn,
        Coin::Restores,
        Coin::Pauses,
        Coin::ClockSteps,
        Coin::ResourceCrashes,
        Coin::Corruption,
        Coin::DriftBeyondBound,
        Coin::Loss,
        Coin::Dup,
        Coin::ResourceRestores,
        Coin::AckCrashes,
        Coin::CompactOften,
        Coin::RenewStrikes,
        Coin::AckAmnesia,
        Coin::GrantStrikes,
        Coin::VoteStrikes,
        Coin::FenceStrikes,
        Coin::HeavyLoss,
        Coin::HeavyDup,
        Coin::LongPauses,
        Coin::FastDrift,
        Coin::SparseCompaction,
        Coin::LateRenewals,
        Coin::ShortQueues,
        Coin::Figure8Strikes,
    ];

    /// Its name in `swarm_bias`: the model key it decides, where there is one.
    pub fn name(self) -> &'static str {
        match self {
            Coin::SmallBatches => "small_batches",
            Coin::OneInFlight => "one_inflight",
            Coin::Partitions => "partitions",
            Coin::Crashes => "crashes",
            Coin::LeaderChurn => "leader_churn",
            Coin::Restores => "restores",
            Coin::Pauses => "pauses",
            Coin::ClockSteps => "clock_steps",
            Coin::ResourceCrashes => "resource_crashes",
            Coin::Corruption => "corruption",
            Coin::DriftBeyondBound => "drift_beyond_bound",
            Coin::Loss => "loss",
            Coin::Dup => "dup",
            Coin::ResourceRestores => "resource_restores",
            Coin::AckCrashes => "ack_crashes",
            Coin::CompactOften => "compact_often",
            Coin::RenewStrikes => "renew_strikes",
            Coin::AckAmnesia => "ack_amnesia",
            Coin::GrantStrikes => "grant_strikes",
            Coin::VoteStrikes => "vote_strikes",
            Coin::FenceStrikes => "fence_strikes",
            Coin::HeavyLoss => "heavy_loss",
            Coin::HeavyDup => "heavy_dup",
            Coin::LongPauses => "long_pauses",
            Coin::FastDrift => "fast_drift",
            Coin::SparseCompaction => "sparse_compaction",
            Coin::LateRenewals => "late_renewals",
            Coin::ShortQueues => "short_queues",
            Coin::Figure8Strikes => "figure8_strikes",
        }
    }
}

/// A fair coin: heads in 500 of 1,000.
pub const FAIR: u16 = 500;

/// Each coin's chance of heads, in thousandths (model key `swarm_bias`,
/// written `crashes:700,pauses:300`; a coin not named is fair). Absent, every
/// coin is fair and a seed draws what plain swarm draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bias([u16; Coin::ALL.len()]);

impl Default for Bias {
    fn default() -> Bias {
        Bias([FAIR; Coin::ALL.len()])
    }
}

impl Bias {
    /// Heads in this many of 1,000 tosses.
    pub fn get(&self, coin: Coin) -> u16 {
        self.0[coin as usize]
    }

    pub fn set(&mut self, coin: Coin, permille: u16) {
        self.0[coin as usize] = permille.min(1_000);
    }

    pub fn is_fair(&self) -> bool {
        self.0.iter().all(|p| *p == FAIR)
    }
}

impl std::fmt::Display for Bias {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unfair = Coin::ALL.iter().filter(|coin| self.get(**coin) != FAIR);
        let parts: Vec<String> = unfair.map(|coin| format!("{}:{}", coin.name(), self.get(*coin))).collect();
        f.write_str(&parts.join(","))
    }
}

impl std::str::FromStr for Bias {
    type Err = String;

    fn from_str(text: &str) -> Result<Bias, String> {
        let mut bias = Bias::default();
        for part in text.split(',').map(str::trim).filter(|part| !part.is_empty()) {
            let (name, permille) =
                part.split_once(':').ok_or_else(|| format!("`{part}` is not coin:permille (crashes:700)"))?;
            let name = name.trim();
            let names = Coin::ALL.iter().map(|coin| coin.name());
            let coin = Coin::ALL.iter().find(|coin| coin.name() == name).ok_or_else(|| {
                let hint = crate::model::did_you_mean(name, names.clone()).map(|c| format!("did you mean `{c}`? "));
                let known: Vec<&str> = names.collect();
                format!("unknown swarm coin `{name}`; {}known: {}", hint.unwrap_or_default(), known.join(", "))
            })?;
            let permille: u16 = permille
                .trim()
                .parse()
                .ok()
                .filter(|p| *p <= 1_000)
                .ok_or_else(|| format!("`{part}`: the chance of heads is 0..=1000 thousandths"))?;
            bias.set(*coin, permille);
        }
        Ok(bias)
    }
}

impl Serialize for Bias {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Bias {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Bias, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Which coins of one draw came up heads, a bit per [`Coin`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Heads(u32);

impl Heads {
    pub fn contains(self, coin: Coin) -> bool {
        self.0 & (1 << coin as u32) != 0
    }

    fn insert(&mut self, coin: Coin) {
        self.0 |= 1 << coin as u32;
    }
}

/// A draw's stream and the chances it tosses its coins with.
struct Coins {
    rng: ChaCha8Rng,
    bias: Bias,
    heads: Heads,
}

impl Coins {
    /// One toss: a 64-bit draw below the coin's share of 2^64. A fair coin
    /// tosses exactly as `gen_bool(0.5)` does, so plain swarm draws what it
    /// always drew, and every coin takes one draw whatever its chance.
    fn toss(&mut self, coin: Coin) -> bool {
        let draw = u128::from(self.rng.gen::<u64>());
        let heads = draw * 1_000 < u128::from(self.bias.get(coin)) << 64;
        if heads {
            self.heads.insert(coin);
        }
        heads
    }

    /// Whether a family is on: the model's switch and the seed's coin (always tossed).
    fn family(&mut self, coin: Coin, enabled: bool) -> bool {
        let heads = self.toss(coin);
        enabled && heads
    }

    /// A fraction in steps of 1/1000, uniform on 0..=1000 when fair. A
    /// weight `w` maps the draw piecewise linearly so that it lands in the
    /// upper half (above 500) `w` times in 1000, uniform within each half;
    /// at 500 the map is the identity, so plain swarm draws what it always
    /// drew. Heads: the fraction landed above 500.
    fn fraction(&mut self, coin: Coin) -> u32 {
        let drawn = self.rng.gen_range(0..=FRACTION_STEPS);
        let upper = u32::from(self.bias.get(coin));
        let lower = FRACTION_STEPS - upper;
        let half = FRACTION_STEPS / 2;
        let steps = if drawn < lower {
            drawn * half / lower
        } else {
            // With no weight on the upper half, only the top step lands
            // here: it stays at the lower half's top.
            half + ((drawn - lower) * half).checked_div(upper).unwrap_or(0)
        };
        if steps > half {
            self.heads.insert(coin);
        }
        steps
    }

    /// The draw a fraction would have taken, for a family that is off, so
    /// the later draws stay in place.
    fn skip(&mut self) -> f64 {
        let _ = self.rng.gen_range(0..=FRACTION_STEPS);
        0.0
    }
}

/// The model this seed runs: `model` itself, or with `swarm`, what the seed draws.
pub fn resolve(model: &Model, seed: u64) -> Model {
    resolve_tossed(model, seed).0
}

/// [`resolve`], and which of the draw's coins came up heads (none without `swarm`).
pub fn resolve_tossed(model: &Model, seed: u64) -> (Model, Heads) {
    if model.swarm {
        draw_tossed(model, seed)
    } else {
        (model.clone(), Heads::default())
    }
}

/// The configuration seed `seed` draws within `model`'s limits (`swarm` is
/// off in the result, and every key swarm leaves alone is `model`'s).
pub fn draw(model: &Model, seed: u64) -> Model {
    draw_tossed(model, seed).0
}

/// [`draw`], and which coins came up heads. Each coin falls with the
/// chance `model.swarm_bias` gives it (a fair coin when absent).
pub fn draw_tossed(model: &Model, seed: u64) -> (Model, Heads) {
    let mut coins =
        Coins { rng: crate::streams::swarm(seed), bias: model.swarm_bias.unwrap_or_default(), heads: Heads::default() };
    let mut drawn = model.clone();
    drawn.swarm = false;
    drawn.swarm_bias = None;
    drawn.nodes = cluster_size(&mut coins.rng, model.nodes);
    drawn.entries_per_message_max = if coins.toss(Coin::SmallBatches) { 1 } else { model.entries_per_message_max };
    drawn.inflight_max = if coins.toss(Coin::OneInFlight) { 1 } else { model.inflight_max };
    drawn.partitions = coins.family(Coin::Partitions, model.partitions);
    drawn.crashes = coins.family(Coin::Crashes, model.crashes);
    // Churn strikes by crashing: without crashes it is off, and says so.
    drawn.leader_churn = coins.family(Coin::LeaderChurn, model.leader_churn) && drawn.crashes;
    drawn.restores = coins.family(Coin::Restores, model.restores);
    drawn.pauses = coins.family(Coin::Pauses, model.pauses);
    drawn.clock_steps = coins.family(Coin::ClockSteps, model.clock_steps);
    drawn.resource_crashes = coins.family(Coin::ResourceCrashes, model.resource_crashes);
    drawn.corruption = coins.family(Coin::Corruption, model.corruption);
    drawn.drift_beyond_bound = coins.family(Coin::DriftBeyondBound, model.drift_beyond_bound);
    drawn.loss_rate =
        if coins.toss(Coin::Loss) { rate(coins.fraction(Coin::HeavyLoss), model.loss_rate) } else { coins.skip() };
    drawn.dup_rate =
        if coins.toss(Coin::Dup) { rate(coins.fraction(Coin::HeavyDup), model.dup_rate) } else { coins.skip() };
    // A pause too short to matter is no pause: at least 50 ms (or the limit).
    let pause = scaled(coins.fraction(Coin::LongPauses), model.pause_ms_max);
    drawn.pause_ms_max = pause.max(model.pause_ms_max.min(50));
    drawn.drift_ppm_max = scaled(coins.fraction(Coin::FastDrift), model.drift_ppm_max);
    // Drawn last: a family added later leaves every earlier draw in place.
    drawn.resource_restores = coins.family(Coin::ResourceRestores, model.resource_restores);
    // Drawn after it, so the draws above stay what they were before the
    // family existed. Absent in the model (the standard model), it is drawn like a
    // family the model enables; only an explicit `false` keeps it off.
    drawn.ack_crashes = Some(coins.family(Coin::AckCrashes, model.ack_crashes != Some(false)) && drawn.crashes);
    // Drawn last of all. Half the seeds compact the log every 8 to 64
    // applied entries (never above the model's bound), so a follower back
    // from a crash, pause or partition catches up through a snapshot, which
    // at core's 256 few runs ever need (scripts/mutant-hunt.sh).
    let compact_often = coins.toss(Coin::CompactOften);
    let often =
        SNAPSHOT_OFTEN_MIN + scaled(coins.fraction(Coin::SparseCompaction), SNAPSHOT_OFTEN_MAX - SNAPSHOT_OFTEN_MIN);
    let limit = model.snapshot_entries.map_or(SNAPSHOT_THRESHOLD_ENTRIES_STANDARD, u64::from);
    drawn.snapshot_entries = if compact_often {
        Some(u32::try_from(often.min(limit)).expect("at most SNAPSHOT_OFTEN_MAX"))
    } else {
        model.snapshot_entries
    };
    // The reactive families added after it, drawn after every key above so
    // each seed's earlier draws stay what they were. Absent in the model,
    // each is drawn like a family the model enables when the model allows
    // the faults it strikes with (cuts and pauses; crashes or restores);
    // `false` keeps it off.
    drawn.renew_strikes =
        Some(coins.family(Coin::RenewStrikes, model.renew_strikes != Some(false) && model.partitions));
    drawn.ack_amnesia =
        Some(coins.family(Coin::AckAmnesia, model.ack_amnesia != Some(false) && (model.crashes || model.restores)));
    // Added after them, so drawn after them: a leader paused as it frees a
    // key a client waits for, when the model allows pauses.
    drawn.grant_strikes = Some(coins.family(Coin::GrantStrikes, model.grant_strikes != Some(false) && model.pauses));
    // And after it: an election split around a voter crashed after its vote.
    drawn.vote_strikes =
        Some(coins.family(Coin::VoteStrikes, model.vote_strikes != Some(false) && model.crashes) && drawn.crashes);
    // And after it: the resource crashed just after a takeover write.
    drawn.fence_strikes =
        Some(coins.family(Coin::FenceStrikes, model.fence_strikes != Some(false) && model.resource_crashes));
    // And after it: a holder's renewal held on the wire until its lease ends at the leader.
    drawn.late_renewals =
        Some(coins.family(Coin::LateRenewals, model.late_renewals != Some(false) && model.partitions));
    // And last: backpressure. Half the seeds queue one or two waiters per
    // key (never more than the model's), so the workers fill a queue and a
    // leader turns acquires away `Unavailable`, which the standard queue of
    // eight never does with four workers.
    let short_queues = coins.toss(Coin::ShortQueues);
    let queue = coins.rng.gen_range(1..=SHORT_QUEUE_MAX);
    drawn.wait_queue_max = if short_queues { Some(queue.min(model.wait_queue())) } else { model.wait_queue_max };
    // After it: Raft's figure 8 walked step by step, with cuts.
    drawn.figure8_strikes =
        Some(coins.family(Coin::Figure8Strikes, model.figure8_strikes != Some(false) && model.partitions));
    debug_assert!(drawn.validate().is_ok(), "a swarm draw of a valid model is valid");
    (drawn, coins.heads)
}

/// The keys swarm draws, one `key=value` each, as `replay` prints them first.
pub fn describe(drawn: &Model) -> String {
    format!(
        "nodes={} entries_per_message_max={} inflight_max={} partitions={} crashes={} leader_churn={} restores={} \
         pauses={} clock_steps={} resource_crashes={} resource_restores={} corruption={} drift_beyond_bound={} loss_rate={} dup_rate={} \
         pause_ms_max={} drift_ppm_max={} ack_crashes={} snapshot_entries={} renew_strikes={} ack_amnesia={} grant_strikes={} vote_strikes={} fence_strikes={} \
         late_renewals={} wait_queue_max={} figure8_strikes={}",
        drawn.nodes,
        drawn.entries_per_message_max,
        drawn.inflight_max,
        drawn.partitions,
        drawn.crashes,
        drawn.leader_churn,
        drawn.restores,
        drawn.pauses,
        drawn.clock_steps,
        drawn.resource_crashes,
        drawn.resource_restores,
        drawn.corruption,
        drawn.drift_beyond_bound,
        drawn.loss_rate,
        drawn.dup_rate,
        drawn.pause_ms_max,
        drawn.drift_ppm_max,
        drawn.ack_crashes.unwrap_or(false),
        drawn.snapshot_entries.map_or(SNAPSHOT_THRESHOLD_ENTRIES_STANDARD, u64::from),
        drawn.renew_strikes.unwrap_or(false),
        drawn.ack_amnesia.unwrap_or(false),
        drawn.grant_strikes.unwrap_or(false),
        drawn.vote_strikes.unwrap_or(false),
        drawn.fence_strikes.unwrap_or(false),
        drawn.late_renewals.unwrap_or(false),
        drawn.wait_queue(),
        drawn.figure8_strikes.unwrap_or(false),
    )
}

/// An odd cluster size from 3 up to `nodes` (a model of 1 stays 1).
fn cluster_size(rng: &mut ChaCha8Rng, nodes: u8) -> u8 {
    let sizes: Vec<u8> = (3..=nodes).step_by(2).collect();
    let pick = rng.gen_range(0..FRACTION_STEPS) as usize;
    if sizes.is_empty() {
        nodes
    } else {
        sizes[pick % sizes.len()]
    }
}

/// `steps`/1000 of `limit`, rounded down.
fn scaled(steps: u32, limit: u64) -> u64 {
    let value = u128::from(limit) * u128::from(steps) / u128::from(FRACTION_STEPS);
    u64::try_from(value).expect("a fraction of a u64 fits")
}

/// `steps`/1000 of a per-packet rate, rounded down to five decimals and never above it.
fn rate(steps: u32, limit: f64) -> f64 {
    let value = (limit * f64::from(steps) / f64::from(FRACTION_STEPS) * RATE_STEPS).floor() / RATE_STEPS;
    value.clamp(0.0, limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swarm_model() -> Model {
        Model { swarm: true, ..Model::default() }
    }

    #[test]
    fn a_seed_draws_the_same_configuration_every_time() {
        for seed in 0..200 {
            assert_eq!(draw(&swarm_model(), seed), draw(&swarm_model(), seed));
        }
        let distinct: std::collections::BTreeSet<String> =
            (0..200).map(|s| describe(&draw(&swarm_model(), s))).collect();
        assert!(distinct.len() > 190, "seeds draw different configurations: {} of 200", distinct.len());
    }

    #[test]
    fn a_draw_stays_within_the_models_limits() {
        let limits = Model {
            swarm: true,
            nodes: 7,
            loss_rate: 0.1234567,
            dup_rate: 0.05,
            pause_ms_max: 3_333,
            drift_ppm_max: 777,
            entries_per_message_max: 16,
            inflight_max: 8,
            ..Model::default()
        };
        let mut sizes = std::collections::BTreeSet::new();
        for seed in 0..2_000 {
            let drawn = draw(&limits, seed);
            assert!(!drawn.swarm, "a drawn model is plain");
            assert!(drawn.validate().is_ok(), "seed {seed}: {:?}", drawn.validate());
            assert!([3, 5, 7].contains(&drawn.nodes), "seed {seed}: {} nodes", drawn.nodes);
            sizes.insert(drawn.nodes);
            assert!((0.0..=limits.loss_rate).contains(&drawn.loss_rate), "seed {seed}: loss {}", drawn.loss_rate);
            assert!((0.0..=limits.dup_rate).contains(&drawn.dup_rate), "seed {seed}: dup {}", drawn.dup_rate);
            assert!((50..=limits.pause_ms_max).contains(&drawn.pause_ms_max), "seed {seed}");
            assert!(drawn.drift_ppm_max <= limits.drift_ppm_max, "seed {seed}");
            assert!([1, 16].contains(&drawn.entries_per_message_max), "seed {seed}");
            assert!([1, 8].contains(&drawn.inflight_max), "seed {seed}");
            assert!(drawn.snapshot_entries.is_none_or(|entries| (8..=64).contains(&entries)), "seed {seed}");
            assert_eq!((drawn.clients, drawn.keys, drawn.lease_ms), (4, 2, 2_000), "the workload is the model's");
            assert_eq!((drawn.safety_ms, drawn.liveness_ms, drawn.token_floor), (30_000, 10_000, 40));
        }
        assert_eq!(sizes.len(), 3, "every odd size from 3 to the model's is drawn");
    }

    #[test]
    fn about_half_the_seeds_compact_often_and_never_above_the_models_bound() {
        let often = (0..1_000).filter(|seed| draw(&swarm_model(), *seed).snapshot_entries.is_some()).count();
        assert!((400..=600).contains(&often), "{often} of 1000 seeds compact often");
        let tight = Model { snapshot_entries: Some(20), ..swarm_model() };
        for seed in 0..1_000 {
            let entries = draw(&tight, seed).snapshot_entries;
            assert!(entries.is_some_and(|entries| (8..=20).contains(&entries)), "seed {seed}: {entries:?}");
        }
    }

    #[test]
    fn about_half_the_seeds_queue_one_or_two_waiters_and_never_above_the_models_queue() {
        let queues: Vec<Option<u32>> = (0..1_000).map(|seed| draw(&swarm_model(), seed).wait_queue_max).collect();
        let short = queues.iter().filter(|queue| queue.is_some()).count();
        assert!((400..=600).contains(&short), "{short} of 1000 seeds queue few waiters");
        for size in [1, 2] {
            assert!(queues.contains(&Some(size)), "some seed queues {size}");
        }
        assert!(queues.iter().all(|queue| queue.is_none_or(|size| (1..=2).contains(&size))), "{queues:?}");
        let single = Model { wait_queue_max: Some(1), ..swarm_model() };
        for seed in 0..1_000 {
            assert_eq!(draw(&single, seed).wait_queue_max, Some(1), "seed {seed}");
        }
    }

    #[test]
    fn a_family_off_in_the_model_stays_off() {
        let quiet = Model {
            swarm: true,
            partitions: false,
            crashes: false,
            restores: false,
            clock_steps: false,
            corruption: false,
            pauses: false,
            resource_crashes: false,
            leader_churn: false,
            drift_beyond_bound: false,
            loss_rate: 0.0,
            dup_rate: 0.0,
            nodes: 3,
            ..Model::default()
        };
        for seed in 0..500 {
            let drawn = draw(&quiet, seed);
            assert_eq!(drawn, Model { swarm: false, ..draw(&quiet, seed) });
            let families = [
                drawn.partitions,
                drawn.crashes,
                drawn.restores,
                drawn.clock_steps,
                drawn.corruption,
                drawn.pauses,
                drawn.resource_crashes,
                drawn.leader_churn,
                drawn.drift_beyond_bound,
            ];
            assert!(families.iter().all(|on| !on), "seed {seed}: {}", describe(&drawn));
            assert_eq!((drawn.loss_rate, drawn.dup_rate, drawn.nodes), (0.0, 0.0, 3));
        }
        let one_node = Model { nodes: 1, ..quiet };
        assert!((0..50).all(|seed| draw(&one_node, seed).nodes == 1));
    }

    #[test]
    fn every_family_is_on_in_some_seeds_and_off_in_others() {
        let limits = Model { drift_beyond_bound: true, ..swarm_model() };
        let draws: Vec<Model> = (0..400).map(|seed| draw(&limits, seed)).collect();
        type Switch = (&'static str, fn(&Model) -> bool);
        let switches: [Switch; 10] = [
            ("partitions", |m| m.partitions),
            ("crashes", |m| m.crashes),
            ("restores", |m| m.restores),
            ("pauses", |m| m.pauses),
            ("clock_steps", |m| m.clock_steps),
            ("resource_crashes", |m| m.resource_crashes),
            ("corruption", |m| m.corruption),
            ("drift_beyond_bound", |m| m.drift_beyond_bound),
            ("loss", |m| m.loss_rate > 0.0),
            ("one entry per append", |m| m.entries_per_message_max == 1),
        ];
        for (name, on) in switches {
            let count = draws.iter().filter(|m| on(m)).count();
            assert!((120..=280).contains(&count), "{name} on in {count} of 400 seeds");
        }
        let churn = draws.iter().filter(|m| m.leader_churn).count();
        assert!((50..=150).contains(&churn), "leader churn (its coin and crashes) on in {churn} of 400 seeds");
        assert!(draws.iter().all(|m| m.crashes || !m.leader_churn), "no churn without crashes");
    }

    #[test]
    fn switching_a_family_off_leaves_the_other_draws_alone() {
        let no_restores = Model { restores: false, ..swarm_model() };
        for seed in 0..100 {
            let all = draw(&swarm_model(), seed);
            let fewer = draw(&no_restores, seed);
            assert_eq!(Model { restores: all.restores, ..fewer }, all);
        }
    }

    #[test]
    fn ack_crashes_are_drawn_though_the_standard_model_leaves_them_absent() {
        let draws: Vec<Model> = (0..400).map(|seed| draw(&swarm_model(), seed)).collect();
        assert!(draws.iter().all(|m| m.ack_crashes.is_some()), "a drawn model says whether they are on");
        let on = draws.iter().filter(|m| m.ack_crashes == Some(true)).count();
        assert!((50..=150).contains(&on), "ack crashes (their coin and crashes) on in {on} of 400 seeds");
        assert!(draws.iter().all(|m| m.crashes || m.ack_crashes == Some(false)), "none without crashes");
        let off = Model { ack_crashes: Some(false), ..swarm_model() };
        let forced = Model { ack_crashes: Some(true), ..swarm_model() };
        for seed in 0..400 {
            assert_eq!(draw(&off, seed).ack_crashes, Some(false), "seed {seed}: false keeps them off");
            assert_eq!(draw(&forced, seed), draws[seed as usize], "seed {seed}: true is what absent draws");
            // Drawn last: every other key is what it was before the family existed.
            assert_eq!(
                Model { ack_crashes: None, ..draw(&off, seed) },
                Model { ack_crashes: None, ..draws[seed as usize].clone() }
            );
        }
    }

    #[test]
    fn renew_strikes_and_ack_amnesia_are_drawn_last_though_the_standard_model_leaves_them_absent() {
        let draws: Vec<Model> = (0..400).map(|seed| draw(&swarm_model(), seed)).collect();
        type Key = (&'static str, fn(&Model) -> Option<bool>);
        let keys: [Key; 2] = [("renew_strikes", |m| m.renew_strikes), ("ack_amnesia", |m| m.ack_amnesia)];
        for (name, key) in keys {
            assert!(draws.iter().all(|m| key(m).is_some()), "{name}: a drawn model says whether it is on");
            let on = draws.iter().filter(|m| key(m) == Some(true)).count();
            assert!((140..=260).contains(&on), "{name} on in {on} of 400 seeds");
        }
        let off = Model { renew_strikes: Some(false), ack_amnesia: Some(false), ..swarm_model() };
        let forced = Model { renew_strikes: Some(true), ack_amnesia: Some(true), ..swarm_model() };
        let limited = Model { partitions: false, crashes: false, restores: false, ..swarm_model() };
        let absent = |m: Model| Model { renew_strikes: None, ack_amnesia: None, ..m };
        for seed in 0..400 {
            let drawn = &draws[seed as usize];
            let quiet = draw(&off, seed);
            assert_eq!((quiet.renew_strikes, quiet.ack_amnesia), (Some(false), Some(false)), "seed {seed}");
            assert_eq!(&draw(&forced, seed), drawn, "seed {seed}: true is what absent draws");
            let without = draw(&limited, seed);
            assert_eq!((without.renew_strikes, without.ack_amnesia), (Some(false), Some(false)), "seed {seed}");
            // Drawn last: every other key is what it was before the families existed.
            assert_eq!(absent(quiet), absent(drawn.clone()), "seed {seed}");
        }
    }

    #[test]
    fn grant_strikes_are_drawn_after_every_other_key_and_only_with_pauses() {
        let draws: Vec<Model> = (0..400).map(|seed| draw(&swarm_model(), seed)).collect();
        let on = draws.iter().filter(|m| m.grant_strikes == Some(true)).count();
        assert!((140..=260).contains(&on), "grant_strikes on in {on} of 400 seeds");
        let off = Model { grant_strikes: Some(false), ..swarm_model() };
        let forced = Model { grant_strikes: Some(true), ..swarm_model() };
        let no_pauses = Model { pauses: false, ..swarm_model() };
        for seed in 0..400 {
            let drawn = &draws[seed as usize];
            assert_eq!(draw(&off, seed).grant_strikes, Some(false), "seed {seed}: false keeps it off");
            assert_eq!(&draw(&forced, seed), drawn, "seed {seed}: true is what absent draws");
            assert_eq!(draw(&no_pauses, seed).grant_strikes, Some(false), "seed {seed}: it strikes by pausing");
            // Drawn last: every other key is what it was before the family existed.
            assert_eq!(
                Model { grant_strikes: None, ..draw(&off, seed) },
                Model { grant_strikes: None, ..drawn.clone() },
                "seed {seed}"
            );
        }
    }

    #[test]
    fn vote_strikes_are_drawn_after_every_other_key_and_only_with_crashes_drawn_on() {
        let draws: Vec<Model> = (0..400).map(|seed| draw(&swarm_model(), seed)).collect();
        let on = draws.iter().filter(|m| m.vote_strikes == Some(true)).count();
        // On with its own coin and the seed's crashes: about a quarter of the seeds.
        assert!((60..=140).contains(&on), "vote_strikes on in {on} of 400 seeds");
        assert!(draws.iter().all(|m| m.vote_strikes != Some(true) || m.crashes), "only with crashes drawn on");
        let off = Model { vote_strikes: Some(false), ..swarm_model() };
        let forced = Model { vote_strikes: Some(true), ..swarm_model() };
        for seed in 0..400 {
            let drawn = &draws[seed as usize];
            assert_eq!(draw(&off, seed).vote_strikes, Some(false), "seed {seed}: false keeps it off");
            assert_eq!(&draw(&forced, seed), drawn, "seed {seed}: true is what absent draws");
            // Drawn last: every other key is what it was before the family existed.
            assert_eq!(
                Model { vote_strikes: None, ..draw(&off, seed) },
                Model { vote_strikes: None, ..drawn.clone() },
                "seed {seed}"
            );
        }
    }

    #[test]
    fn fence_strikes_are_drawn_after_every_other_key_and_only_with_resource_crashes() {
        let draws: Vec<Model> = (0..400).map(|seed| draw(&swarm_model(), seed)).collect();
        let on = draws.iter().filter(|m| m.fence_strikes == Some(true)).count();
        assert!((140..=260).contains(&on), "fence_strikes on in {on} of 400 seeds");
        let off = Model { fence_strikes: Some(false), ..swarm_model() };
        let forced = Model { fence_strikes: Some(true), ..swarm_model() };
        let steady = Model { resource_crashes: false, ..swarm_model() };
        for seed in 0..400 {
            let drawn = &draws[seed as usize];
            assert_eq!(draw(&off, seed).fence_strikes, Some(false), "seed {seed}: false keeps it off");
            assert_eq!(&draw(&forced, seed), drawn, "seed {seed}: true is what absent draws");
            assert_eq!(draw(&steady, seed).fence_strikes, Some(false), "seed {seed}: it crashes the resource");
            // Drawn last: every other key is what it was before the family existed.
            assert_eq!(
                Model { fence_strikes: None, ..draw(&off, seed) },
                Model { fence_strikes: None, ..drawn.clone() },
                "seed {seed}"
            );
        }
    }

    #[test]
    fn late_renewals_are_drawn_after_every_other_key_and_only_with_partitions() {
        let draws: Vec<Model> = (0..400).map(|seed| draw(&swarm_model(), seed)).collect();
        let on = draws.iter().filter(|m| m.late_renewals == Some(true)).count();
        assert!((140..=260).contains(&on), "late_renewals on in {on} of 400 seeds");
        let off = Model { late_renewals: Some(false), ..swarm_model() };
        let forced = Model { late_renewals: Some(true), ..swarm_model() };
        let no_cuts = Model { partitions: false, ..swarm_model() };
        for seed in 0..400 {
            let drawn = &draws[seed as usize];
            assert_eq!(draw(&off, seed).late_renewals, Some(false), "seed {seed}: false keeps it off");
            assert_eq!(&draw(&forced, seed), drawn, "seed {seed}: true is what absent draws");
            assert_eq!(draw(&no_cuts, seed).late_renewals, Some(false), "seed {seed}: the network family's");
            // Drawn last: every other key is what it was before the family existed.
            assert_eq!(
                Model { late_renewals: None, ..draw(&off, seed) },
                Model { late_renewals: None, ..drawn.clone() },
                "seed {seed}"
            );
        }
    }

    #[test]
    fn figure8_strikes_are_drawn_after_every_other_key_and_only_with_partitions() {
        let draws: Vec<Model> = (0..400).map(|seed| draw(&swarm_model(), seed)).collect();
        let on = draws.iter().filter(|m| m.figure8_strikes == Some(true)).count();
        assert!((140..=260).contains(&on), "figure8_strikes on in {on} of 400 seeds");
        let off = Model { figure8_strikes: Some(false), ..swarm_model() };
        let forced = Model { figure8_strikes: Some(true), ..swarm_model() };
        let no_cuts = Model { partitions: false, ..swarm_model() };
        for seed in 0..400 {
            let drawn = &draws[seed as usize];
            assert_eq!(draw(&off, seed).figure8_strikes, Some(false), "seed {seed}: false keeps it off");
            assert_eq!(&draw(&forced, seed), drawn, "seed {seed}: true is what absent draws");
            assert_eq!(draw(&no_cuts, seed).figure8_strikes, Some(false), "seed {seed}: the network family's");
            // Drawn last: every other key is what it was before the family existed.
            assert_eq!(
                Model { figure8_strikes: None, ..draw(&off, seed) },
                Model { figure8_strikes: None, ..drawn.clone() },
                "seed {seed}"
            );
        }
    }

    #[test]
    fn resolve_draws_only_with_swarm_on() {
        assert_eq!(resolve(&Model::default(), 3), Model::default());
        assert_eq!(resolve(&swarm_model(), 3), draw(&swarm_model(), 3));
        let drawn = resolve(&swarm_model(), 3);
        assert_eq!(resolve(&drawn, 3), drawn, "a drawn model is not drawn again");
    }
}
