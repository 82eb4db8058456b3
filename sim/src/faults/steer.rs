//! Steered swarm (`hunt --swarm --steer`): the hunt counts which coverage
//! probes each seed reached and which of swarm's coins it tossed heads, and
//! weights the next seeds' coins toward the draws whose seeds reached the
//! rarest probes. FoundationDB marks rare paths and reports the ones a
//! campaign missed; TigerBeetle tunes its swarm until each is hit; this
//! tunes it as it goes.
//!
//! Seeds run in rounds of [`ROUND_SEEDS`]. A round's weights are a pure
//! function of the rounds before it (their seeds' heads and probes, folded
//! in seed order), never of thread timing, so a steered hunt reproduces
//! from its range, shard and model, and every seed's record carries the
//! weights it drew with (`swarm_bias`), so a failure replays alone.
//!
//! The rule, per coin: the round aims at the rarest probes reached so far
//! (those below one seed in a hundred, else the three least reached). For
//! each aim, the chance a seed that reached it had the coin heads (each side
//! a rate with half a seed of prior, so a coin tossed unevenly so far does
//! not count as a pull), pulled back toward a fair coin until the aim has
//! about [`TRUST_SEEDS`] seeds of evidence; the coin's next chance of heads
//! is the fair half plus the aims' mean pull, kept within
//! [`CHANCE_MIN`]..=[`CHANCE_MAX`] thousandths so no configuration is ever
//! starved. Only `+`, `*` and `/` on `f64`: the same on every machine.
//! A probe no seed has reached yet says nothing about any coin and is left out.

use crate::faults::swarm::{Bias, Coin, Heads};
use fencelock::{Probe, ProbeSet};

/// Seeds per round: the weights change between rounds, never inside one.
pub const ROUND_SEEDS: u64 = 25;

/// The least chance of heads a steered coin gets, in thousandths…
pub const CHANCE_MIN: u16 = 200;
/// …and the most.
pub const CHANCE_MAX: u16 = 800;

/// A probe reached in fewer seeds than this is rare however few seeds ran.
const RARE_SEEDS_MIN: u64 = 3;
/// With no probe below one seed in a hundred, the round aims at this many of the least reached.
const RAREST: usize = 3;
/// Seeds of evidence at which a coin moves halfway to what they suggest:
/// a probe two seeds reached moves the coins a little, one twenty reached far.
const TRUST_SEEDS: f64 = 10.0;

const PROBES: usize = Probe::ALL.len();
const COINS: usize = Coin::ALL.len();

/// What a steered hunt has seen: per probe, the seeds that reached it, and
/// per coin, the seeds that tossed it heads and which probes those reached.
#[derive(Clone, Debug)]
pub struct Steer {
    seeds: u64,
    reached: [u64; PROBES],
    heads: [u64; COINS],
    reached_heads: Box<[[u64; PROBES]; COINS]>,
}

impl Default for Steer {
    fn default() -> Steer {
        Steer { seeds: 0, reached: [0; PROBES], heads: [0; COINS], reached_heads: Box::new([[0; PROBES]; COINS]) }
    }
}

impl Steer {
    /// Folds in one seed: the coins it tossed heads and the probes it reached.
    pub fn observe(&mut self, heads: Heads, probes: ProbeSet) {
        self.seeds += 1;
        let reached: Vec<usize> = probes.iter().map(|probe| probe as usize).collect();
        for &p in &reached {
            self.reached[p] += 1;
        }
        for (c, coin) in Coin::ALL.iter().enumerate() {
            if heads.contains(*coin) {
                self.heads[c] += 1;
                for &p in &reached {
                    self.reached_heads[c][p] += 1;
                }
            }
        }
    }

    /// Seeds folded in so far.
    pub fn seeds(&self) -> u64 {
        self.seeds
    }

    /// The probes the next round aims at: those reached, but in fewer
    /// than one seed in a hundred (at least [`RARE_SEEDS_MIN`]); when none
    /// is that rare, the [`RAREST`] reached least.
    fn aims(&self) -> Vec<usize> {
        let rare_below = RARE_SEEDS_MIN.max(self.seeds / 100);
        let mut reached: Vec<usize> = (0..PROBES).filter(|&p| self.reached[p] > 0).collect();
        reached.sort_by_key(|&p| (self.reached[p], p));
        let rare: Vec<usize> = reached.iter().copied().filter(|&p| self.reached[p] < rare_below).collect();
        if rare.is_empty() {
            reached.truncate(RAREST);
            reached
        } else {
            rare
        }
    }

    /// The chances the next round tosses its coins with (all fair before any seed).
    pub fn bias(&self) -> Bias {
        let mut bias = Bias::default();
        let aims = self.aims();
        if self.seeds == 0 || aims.is_empty() {
            return bias;
        }
        for (c, coin) in Coin::ALL.iter().enumerate() {
            let heads_seeds = self.heads[c] as f64;
            let tails_seeds = (self.seeds - self.heads[c]) as f64;
            let mut pulls = 0.0;
            for &p in &aims {
                let reached = self.reached[p] as f64;
                let on_heads = self.reached_heads[c][p] as f64;
                let with_heads = (on_heads + 0.5) / (heads_seeds + 1.0);
                let with_tails = (reached - on_heads + 0.5) / (tails_seeds + 1.0);
                let trust = reached / (reached + TRUST_SEEDS);
                pulls += (with_heads / (with_heads + with_tails) - 0.5) * trust;
            }
            let share = 0.5 + pulls / aims.len() as f64;
            // Rounded to a whole thousandth, from a value in 0..=1.
            let permille = (share * 1_000.0 + 0.5) as u16;
            bias.set(*coin, permille.clamp(CHANCE_MIN, CHANCE_MAX));
        }
        bias
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::swarm::{self, FAIR};
    use crate::model::Model;

    fn swarm_model() -> Model {
        Model { swarm: true, ..Model::default() }
    }

    #[test]
    fn every_coin_is_listed_once_in_declaration_order() {
        // A coin's weight and its heads bit are indexed by `coin as usize`.
        for (i, coin) in Coin::ALL.iter().enumerate() {
            assert_eq!(*coin as usize, i, "{}", coin.name());
        }
        let names: std::collections::BTreeSet<&str> = Coin::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), Coin::ALL.len(), "names are distinct");
    }

    #[test]
    fn before_any_seed_every_coin_is_fair() {
        assert!(Steer::default().bias().is_fair());
    }

    #[test]
    fn a_rare_probe_reached_only_with_a_coin_heads_pulls_that_coin_up() {
        let mut steer = Steer::default();
        let mut rare_seeds = 0;
        for seed in 0..2_000 {
            let (drawn, heads) = swarm::draw_tossed(&swarm_model(), seed);
            let mut probes: ProbeSet = [Probe::StaleWriteRejected].into_iter().collect();
            // A situation only seeds with crashes and pauses both on reach, below one seed in a hundred.
            if drawn.crashes && drawn.pauses && seed % 30 == 0 {
                probes.insert(Probe::TwoCandidatesOneTerm);
                rare_seeds += 1;
            }
            steer.observe(heads, probes);
        }
        assert!((10..20).contains(&rare_seeds), "the test's rare probe is reached, rarely: {rare_seeds}");
        let bias = steer.bias();
        assert!(bias.get(Coin::Crashes) > 700, "crashes {}", bias.get(Coin::Crashes));
        assert!(bias.get(Coin::Pauses) > 700, "pauses {}", bias.get(Coin::Pauses));
        // A coin the rare probe does not depend on stays near fair.
        let loss = bias.get(Coin::Loss);
        assert!((350..=650).contains(&loss), "loss {loss}");
        assert!(Coin::ALL.iter().all(|c| (CHANCE_MIN..=CHANCE_MAX).contains(&bias.get(*c))), "{bias}");
    }

    #[test]
    fn probes_every_seed_reaches_leave_the_coins_fair() {
        let mut steer = Steer::default();
        for seed in 0..100 {
            let (_, heads) = swarm::draw_tossed(&swarm_model(), seed);
            steer.observe(heads, [Probe::StaleWriteRejected, Probe::ClusterRestored].into_iter().collect());
        }
        let bias = steer.bias();
        for coin in Coin::ALL {
            let chance = bias.get(coin);
            assert!(chance.abs_diff(FAIR) <= 20, "{}: {chance}", coin.name());
        }
    }

    #[test]
    fn a_biased_coin_falls_heads_about_as_often_as_it_says() {
        let mut bias = Bias::default();
        bias.set(Coin::Crashes, 800);
        bias.set(Coin::Pauses, 200);
        bias.set(Coin::Partitions, 1_000);
        bias.set(Coin::Corruption, 0);
        bias.set(Coin::LongPauses, 900);
        let model = Model { swarm_bias: Some(bias), ..swarm_model() };
        let draws: Vec<Model> = (0..1_000).map(|seed| swarm::draw(&model, seed)).collect();
        let crashes = draws.iter().filter(|m| m.crashes).count();
        let pauses = draws.iter().filter(|m| m.pauses).count();
        assert!((750..=850).contains(&crashes), "crashes on in {crashes} of 1000");
        assert!((150..=250).contains(&pauses), "pauses on in {pauses} of 1000");
        assert!(draws.iter().all(|m| m.partitions && !m.corruption), "1000 and 0 are certain");
        let long = draws.iter().filter(|m| m.pause_ms_max > Model::default().pause_ms_max / 2).count();
        assert!((860..=940).contains(&long), "pauses drawn in the upper half of the limit in {long} of 1000");
        assert!(draws.iter().all(|m| m.swarm_bias.is_none() && !m.swarm), "a drawn model is plain");
    }

    #[test]
    fn fair_weights_draw_exactly_what_plain_swarm_draws() {
        let fair = Model { swarm_bias: Some(Bias::default()), ..swarm_model() };
        for seed in 0..300 {
            assert_eq!(swarm::draw(&fair, seed), swarm::draw(&swarm_model(), seed), "seed {seed}");
        }
    }

    #[test]
    fn weights_read_back_as_written_and_a_typo_is_named() {
        let mut bias = Bias::default();
        bias.set(Coin::Crashes, 700);
        bias.set(Coin::FenceStrikes, 250);
        assert_eq!(bias.to_string(), "crashes:700,fence_strikes:250");
        assert_eq!(bias.to_string().parse::<Bias>(), Ok(bias));
        assert_eq!("".parse::<Bias>(), Ok(Bias::default()));
        let typo = "crashs:700".parse::<Bias>().unwrap_err();
        assert!(typo.starts_with("unknown swarm coin `crashs`; did you mean `crashes`?"), "{typo}");
        assert!("crashes:1001".parse::<Bias>().unwrap_err().contains("0..=1000"));
        assert!("crashes".parse::<Bias>().unwrap_err().contains("coin:permille"));
    }

    #[test]
    fn a_model_takes_the_weights_from_set_and_only_with_swarm() {
        let model = swarm_model().with_settings(&["swarm_bias=crashes:700,pauses:300".to_string()]).unwrap();
        assert_eq!(model.swarm_bias.map(|b| b.get(Coin::Crashes)), Some(700));
        let plain = Model::default().with_settings(&["swarm_bias=crashes:700".to_string()]).unwrap_err();
        assert!(plain.contains("needs `swarm = true`"), "{plain}");
        let typo = swarm_model().with_settings(&["swarm_bias=crashs:700".to_string()]).unwrap_err();
        assert!(typo.contains("did you mean `crashes`"), "{typo}");
    }
}
