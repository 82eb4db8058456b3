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

/// The chance that a family the model enables is on in one seed.
const FAMILY_ON: f64 = 0.5;

/// Fractions of a limit are drawn in steps of 1/`FRACTION_STEPS`.
const FRACTION_STEPS: u32 = 1_000;

/// A seed that compacts often does so every this many applied entries, at least…
const SNAPSHOT_OFTEN_MIN: u64 = 8;
/// …and at most.
const SNAPSHOT_OFTEN_MAX: u64 = 64;
/// Rates are kept to five decimals, so a drawn model reads well in a file.
const RATE_STEPS: f64 = 100_000.0;

/// The model this seed runs: `model` itself, or with `swarm`, what the seed draws.
pub fn resolve(model: &Model, seed: u64) -> Model {
    if model.swarm {
        draw(model, seed)
    } else {
        model.clone()
    }
}

/// The configuration seed `seed` draws within `model`'s limits (`swarm` is
/// off in the result, and every key swarm leaves alone is `model`'s).
pub fn draw(model: &Model, seed: u64) -> Model {
    let mut rng = crate::streams::swarm(seed);
    let mut drawn = model.clone();
    drawn.swarm = false;
    drawn.nodes = cluster_size(&mut rng, model.nodes);
    drawn.entries_per_message_max = if rng.gen_bool(0.5) { 1 } else { model.entries_per_message_max };
    drawn.inflight_max = if rng.gen_bool(0.5) { 1 } else { model.inflight_max };
    drawn.partitions = family(&mut rng, model.partitions);
    drawn.crashes = family(&mut rng, model.crashes);
    // Churn strikes by crashing: without crashes it is off, and says so.
    drawn.leader_churn = family(&mut rng, model.leader_churn) && drawn.crashes;
    drawn.restores = family(&mut rng, model.restores);
    drawn.pauses = family(&mut rng, model.pauses);
    drawn.clock_steps = family(&mut rng, model.clock_steps);
    drawn.resource_crashes = family(&mut rng, model.resource_crashes);
    drawn.corruption = family(&mut rng, model.corruption);
    drawn.drift_beyond_bound = family(&mut rng, model.drift_beyond_bound);
    drawn.loss_rate = if family(&mut rng, true) { rate(&mut rng, model.loss_rate) } else { skip(&mut rng, 0.0) };
    drawn.dup_rate = if family(&mut rng, true) { rate(&mut rng, model.dup_rate) } else { skip(&mut rng, 0.0) };
    // A pause too short to matter is no pause: at least 50 ms (or the limit).
    let pause = scaled(&mut rng, model.pause_ms_max);
    drawn.pause_ms_max = pause.max(model.pause_ms_max.min(50));
    drawn.drift_ppm_max = scaled(&mut rng, model.drift_ppm_max);
    // Drawn last: a family added later leaves every earlier draw in place.
    drawn.resource_restores = family(&mut rng, model.resource_restores);
    // Drawn after it, so the draws above stay what they were before the
    // family existed. Absent in the model (the standard model), it is drawn like a
    // family the model enables; only an explicit `false` keeps it off.
    drawn.ack_crashes = Some(family(&mut rng, model.ack_crashes != Some(false)) && drawn.crashes);
    // Drawn last of all. Half the seeds compact the log every 8 to 64
    // applied entries (never above the model's bound), so a follower back
    // from a crash, pause or partition catches up through a snapshot, which
    // at core's 256 few runs ever need (scripts/mutant-hunt.sh).
    let compact_often = rng.gen_bool(0.5);
    let often = SNAPSHOT_OFTEN_MIN + scaled(&mut rng, SNAPSHOT_OFTEN_MAX - SNAPSHOT_OFTEN_MIN);
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
    drawn.renew_strikes = Some(family(&mut rng, model.renew_strikes != Some(false) && model.partitions));
    drawn.ack_amnesia = Some(family(&mut rng, model.ack_amnesia != Some(false) && (model.crashes || model.restores)));
    // Added after them, so drawn after them: a leader paused as it frees a
    // key a client waits for, when the model allows pauses.
    drawn.grant_strikes = Some(family(&mut rng, model.grant_strikes != Some(false) && model.pauses));
    // And after it: an election split around a voter crashed after its vote.
    drawn.vote_strikes = Some(family(&mut rng, model.vote_strikes != Some(false) && model.crashes) && drawn.crashes);
    // And after it: the resource crashed just after a takeover write.
    drawn.fence_strikes = Some(family(&mut rng, model.fence_strikes != Some(false) && model.resource_crashes));
    debug_assert!(drawn.validate().is_ok(), "a swarm draw of a valid model is valid");
    drawn
}

/// The keys swarm draws, one `key=value` each, as `replay` prints them first.
pub fn describe(drawn: &Model) -> String {
    format!(
        "nodes={} entries_per_message_max={} inflight_max={} partitions={} crashes={} leader_churn={} restores={} \
         pauses={} clock_steps={} resource_crashes={} resource_restores={} corruption={} drift_beyond_bound={} loss_rate={} dup_rate={} \
         pause_ms_max={} drift_ppm_max={} ack_crashes={} snapshot_entries={} renew_strikes={} ack_amnesia={} grant_strikes={} vote_strikes={} fence_strikes={}",
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

/// Whether a family is on: the model's switch and the seed's coin (always tossed).
fn family(rng: &mut ChaCha8Rng, enabled: bool) -> bool {
    let coin = rng.gen_bool(FAMILY_ON);
    enabled && coin
}

/// A fraction of `limit` in steps of 1/1000, rounded down.
fn scaled(rng: &mut ChaCha8Rng, limit: u64) -> u64 {
    let steps = rng.gen_range(0..=FRACTION_STEPS);
    let value = u128::from(limit) * u128::from(steps) / u128::from(FRACTION_STEPS);
    u64::try_from(value).expect("a fraction of a u64 fits")
}

/// A fraction of a per-packet rate, rounded down to five decimals and never above it.
fn rate(rng: &mut ChaCha8Rng, limit: f64) -> f64 {
    let steps = rng.gen_range(0..=FRACTION_STEPS);
    let value = (limit * f64::from(steps) / f64::from(FRACTION_STEPS) * RATE_STEPS).floor() / RATE_STEPS;
    value.clamp(0.0, limit)
}

/// Draws what [`rate`] would have, so an off family leaves the later draws in place.
fn skip(rng: &mut ChaCha8Rng, value: f64) -> f64 {
    let _ = rng.gen_range(0..=FRACTION_STEPS);
    value
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
    fn resolve_draws_only_with_swarm_on() {
        assert_eq!(resolve(&Model::default(), 3), Model::default());
        assert_eq!(resolve(&swarm_model(), 3), draw(&swarm_model(), 3));
        let drawn = resolve(&swarm_model(), 3);
        assert_eq!(resolve(&drawn, 3), drawn, "a drawn model is not drawn again");
    }
}
