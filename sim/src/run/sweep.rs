//! Sweeps of many seeds, for `hunt`, `variants --score`, `bench` and the
//! tests. Seeds run in parallel on `jobs` threads, each seed on its own fresh
//! thread; results come back in seed order, so nothing depends on thread
//! timing. [`sweep_each`] hands each result over as soon as the seeds before
//! it are done and keeps nothing, so a hunt of any length runs in flat memory.

use crate::checker::{Counters, Exposure, Property, Violation};
use crate::faults::steer::{Steer, ROUND_SEEDS};
use crate::faults::swarm::{self, Bias, Heads};
use crate::model::Model;
use crate::run::figures::{SeedFigures, Sketch};
use crate::run::scenario::for_failure;
use crate::run::seed::run_seed_streamed;
use fencelock::ProbeSet;
use indicatif::ProgressBar;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Instant;

/// What a sweep keeps of one seed (the history is dropped at once).
#[derive(Clone, Debug)]
pub struct SeedResult {
    pub seed: u64,
    pub violations: Vec<Violation>,
    pub trace_hash: String,
    pub sim_ms: u64,
    pub messages: u64,
    pub lease_exposures: u64,
    pub exposures: Vec<Exposure>,
    /// Wall time of the seed's runs, for reports only (never inside a run).
    pub wall_ms: u64,
    pub linearizable: LinearizableCost,
    /// The scenario file text for a failing seed.
    pub scenario: Option<String>,
    /// Availability and fencing figures (`explore`), from the history.
    pub figures: SeedFigures,
    /// The coverage probes the seed reached (`fencelock::probe`).
    pub probes: fencelock::ProbeSet,
    /// Which of swarm's coins the seed tossed heads (none without swarm).
    pub heads: Heads,
    /// The weights its swarm coins were tossed with, when not all fair (a steered hunt).
    pub swarm_bias: Option<Bias>,
}

/// What the `linearizable` search cost, on one seed or folded over many.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinearizableCost {
    /// Keys judged.
    pub keys: u64,
    /// Keys whose search hit a bound: neither passed nor failed.
    pub unknown: u64,
    /// Seeds with at least one such key.
    pub unknown_seeds: u64,
    /// The most search nodes one key's search explored.
    pub steps_max: u64,
    /// Client operations per key, as a sketch: fixed memory over any number
    /// of seeds, exact below 2,048 operations.
    pub ops_per_key: Sketch,
}

impl LinearizableCost {
    pub fn of(counters: &Counters) -> LinearizableCost {
        let mut ops_per_key = Sketch::default();
        for ops in &counters.linearizable_ops_per_key {
            ops_per_key.add_n(*ops, 1);
        }
        let unknown = counters.linearizable_undecided.len() as u64;
        LinearizableCost {
            keys: counters.linearizable_keys,
            unknown,
            unknown_seeds: u64::from(unknown > 0),
            steps_max: counters.linearizable_steps_max,
            ops_per_key,
        }
    }

    pub fn add(&mut self, other: &LinearizableCost) {
        self.keys += other.keys;
        self.unknown += other.unknown;
        self.unknown_seeds += other.unknown_seeds;
        self.steps_max = self.steps_max.max(other.steps_max);
        self.ops_per_key.merge(&other.ops_per_key);
    }

    /// The operations per key that `permille`/1000 of the keys do not exceed.
    pub fn ops_per_key_quantile(&self, permille: u64) -> u64 {
        self.ops_per_key.percentile(permille).unwrap_or(0)
    }
}

/// Runs `seeds` of `model` on `jobs` threads; with `twice`, every seed runs a
/// second time and a differing trace hash is a `determinism` violation.
pub fn sweep(
    seeds: Range<u64>,
    model: &Model,
    jobs: usize,
    twice: bool,
    progress: Option<&ProgressBar>,
) -> Vec<SeedResult> {
    let mut results = Vec::with_capacity((seeds.end - seeds.start).min(1 << 20) as usize);
    let mut failures = 0;
    let never = AtomicBool::new(false);
    sweep_each(seeds, model, Sweep { jobs, twice, stop: &never }, |result| {
        failures += u64::from(!result.violations.is_empty());
        if let Some(bar) = progress {
            bar.set_message(crate::plural(failures, "failure"));
            bar.inc(1);
        }
        results.push(result);
        Flow::Continue
    });
    results
}

/// How a [`sweep_each`] runs.
#[derive(Clone, Copy)]
pub struct Sweep<'a> {
    /// Worker threads (at least 1 is used).
    pub jobs: usize,
    /// Every seed runs twice; a differing trace hash is a `determinism` violation.
    pub twice: bool,
    /// Set from outside (Ctrl-C): no seed starts after it.
    pub stop: &'a AtomicBool,
}

/// What the receiver of a [`sweep_each`] result wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Start no more seeds; the seeds in flight are still handed over.
    Stop,
}

/// Runs `seeds`, in that order, on `how.jobs` threads and hands each result
/// to `on_result` on the calling thread, in the order of `seeds`, as soon as
/// it and every seed before it are done. Nothing is kept: memory holds only
/// the results that wait for an earlier seed still running. After `Stop` (or
/// `how.stop`), the seeds already started are finished and handed over, so
/// every seed handed over is a prefix of `seeds`.
pub fn sweep_each<I, F>(seeds: I, model: &Model, how: Sweep<'_>, mut on_result: F)
where
    I: Iterator<Item = u64> + Send,
    F: FnMut(SeedResult) -> Flow,
{
    let queue = Mutex::new(seeds.enumerate());
    let halt = AtomicBool::new(false);
    let (sender, receiver) = mpsc::channel::<(usize, SeedResult)>();
    std::thread::scope(|scope| {
        for _ in 0..how.jobs.max(1) {
            let sender = sender.clone();
            let (queue, halt) = (&queue, &halt);
            scope.spawn(move || loop {
                if halt.load(Ordering::Relaxed) || how.stop.load(Ordering::Relaxed) {
                    break;
                }
                let Some((index, seed)) = queue.lock().expect("seed queue lock").next() else { break };
                if sender.send((index, one_seed(seed, model, how.twice))).is_err() {
                    break;
                }
            });
        }
        drop(sender);
        // Results wait here only for an earlier seed still running: at most
        // about as many as finish while the slowest seed in flight runs.
        let mut waiting = BTreeMap::new();
        let mut index_next = 0;
        for (index, result) in receiver {
            waiting.insert(index, result);
            while let Some(result) = waiting.remove(&index_next) {
                index_next += 1;
                if on_result(result) == Flow::Stop {
                    halt.store(true, Ordering::Relaxed);
                }
            }
        }
        assert!(waiting.is_empty(), "every seed started was handed over");
    });
}

/// [`sweep_each`] of a steered swarm (`faults::steer`): `seeds` in rounds of
/// [`ROUND_SEEDS`], each round's coins weighted by what `steer` has seen of
/// the rounds before it, and each result folded into `steer` before the
/// next round starts. A seed `known` has probes for (a resumed record) is
/// not run again: its probes and the heads it tossed in its round are
/// folded in its place. Stops like [`sweep_each`], at a round's end at the latest.
pub fn sweep_steered<I, K, F>(
    seeds: I,
    model: &Model,
    how: Sweep<'_>,
    steer: &mut Steer,
    mut known: K,
    mut on_result: F,
) where
    I: Iterator<Item = u64>,
    K: FnMut(u64) -> Option<ProbeSet>,
    F: FnMut(SeedResult) -> Flow,
{
    let mut seeds = seeds.peekable();
    while seeds.peek().is_some() && !how.stop.load(Ordering::Relaxed) {
        let bias = steer.bias();
        let round_model = Model { swarm_bias: (!bias.is_fair()).then_some(bias), ..model.clone() };
        let mut to_run = Vec::new();
        for seed in seeds.by_ref().take(ROUND_SEEDS as usize) {
            match known(seed) {
                Some(probes) => steer.observe(swarm::draw_tossed(&round_model, seed).1, probes),
                None => to_run.push(seed),
            }
        }
        let mut flow = Flow::Continue;
        sweep_each(to_run.into_iter(), &round_model, how, |result| {
            steer.observe(result.heads, result.probes);
            if on_result(result) == Flow::Stop {
                flow = Flow::Stop;
            }
            flow
        });
        if flow == Flow::Stop {
            return;
        }
    }
}

fn one_seed(seed: u64, model: &Model, twice: bool) -> SeedResult {
    let swarm_bias = model.swarm_bias;
    // A swarm seed's scenario file records the model it drew, not the draw.
    let (model, heads) = swarm::resolve_tossed(model, seed);
    let model = &model;
    let started = Instant::now();
    let outcome = run_seed_streamed(seed, model);
    let mut violations = outcome.violations.clone();
    if twice {
        let again = run_seed_streamed(seed, model);
        if again.trace_hash != outcome.trace_hash {
            violations.push(Violation {
                property: Property::Determinism,
                at_us: 0,
                nodes: Vec::new(),
                clients: Vec::new(),
                tokens: Vec::new(),
                detail: format!(
                    "two runs of seed {seed} gave trace hashes {} and {}",
                    outcome.trace_hash, again.trace_hash
                ),
            });
        }
    }
    let figures = SeedFigures {
        grants: outcome.grants,
        stale_writes_rejected: outcome.stale_writes_rejected,
        acquire_us: outcome.acquire_us.clone(),
        unheld_waiting_us_max: outcome.unheld_waiting_us_max,
        phases: outcome.counters.phases,
    };
    let scenario = if violations.is_empty() {
        None
    } else {
        let mut failing = outcome.clone();
        failing.violations = violations.clone();
        Some(for_failure(&failing, model))
    };
    SeedResult {
        seed,
        violations,
        trace_hash: outcome.trace_hash,
        sim_ms: outcome.sim_ms,
        messages: outcome.messages,
        lease_exposures: outcome.lease_exposures,
        exposures: outcome.exposures,
        linearizable: LinearizableCost::of(&outcome.counters),
        wall_ms: started.elapsed().as_millis() as u64,
        scenario,
        figures,
        probes: outcome.probes,
        heads,
        swarm_bias,
    }
}

/// A panic inside a seed is reported as a `panic` violation with its
/// message; during a sweep the default hook's backtraces would drown the
/// summary, so seed threads panic quietly (replay the seed to see it all).
pub fn quiet_panics() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_seed = std::thread::current().name().is_some_and(|name| name.starts_with("seed-"));
        if !in_seed {
            default_hook(info);
        }
    }));
}

/// One job per core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
