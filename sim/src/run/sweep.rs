//! Sweeps of many seeds, for `hunt`, `variants --score`, `bench` and the
//! tests. Seeds run in parallel on `jobs` threads, each seed on its own fresh
//! thread; results come back in seed order, so nothing depends on thread
//! timing.

use crate::checker::{Property, Violation};
use crate::model::Model;
use crate::run::scenario::for_failure;
use crate::run::seed::run_seed;
use indicatif::ProgressBar;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What a sweep keeps of one seed (the history is dropped at once).
#[derive(Clone, Debug)]
pub struct SeedResult {
    pub seed: u64,
    pub violations: Vec<Violation>,
    pub trace_hash: String,
    pub sim_ms: u64,
    pub messages: u64,
    /// The scenario file text for a failing seed.
    pub scenario: Option<String>,
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
    let next = AtomicU64::new(seeds.start);
    let results = Mutex::new(Vec::with_capacity((seeds.end - seeds.start).min(1 << 20) as usize));
    let failures = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= seeds.end {
                    break;
                }
                let result = one_seed(seed, model, twice);
                if !result.violations.is_empty() {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(bar) = progress {
                    bar.set_message(format!("{} failures", failures.load(Ordering::Relaxed)));
                    bar.inc(1);
                }
                results.lock().expect("results lock").push(result);
            });
        }
    });
    let mut results = results.into_inner().expect("results lock");
    results.sort_by_key(|r| r.seed);
    results
}

fn one_seed(seed: u64, model: &Model, twice: bool) -> SeedResult {
    // A swarm seed's scenario file records the model it drew, not the draw.
    let model = &crate::faults::swarm::resolve(model, seed);
    let outcome = run_seed(seed, model);
    let mut violations = outcome.violations.clone();
    if twice {
        let again = run_seed(seed, model);
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
        scenario,
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
