//! What the `linearizable` check costs and how far its search goes, over a
//! range of seeds of the standard model: operations per key (p50, p99, max),
//! the most search nodes one key needed, keys that came back unknown, and the
//! wall time of the whole checker (every family, this one included) next to
//! the run's own.
//!
//! `cargo run --release --example linearizable_cost -- 0..2000 2` (seeds, threads).

use fencesim::checker::{check, CheckConfig};
use fencesim::model::Model;
use fencesim::run::seed::run_seed;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let range = args.get(1).map_or("0..200", String::as_str);
    let (a, b) = range.split_once("..").expect("seeds as A..B");
    let (start, end): (u64, u64) = (a.parse().expect("A"), b.parse().expect("B"));
    let threads: usize = args.get(2).map_or(2, |t| t.parse().expect("threads"));
    let model = Model::default();
    let next = AtomicU64::new(start);
    let totals = Mutex::new((Vec::new(), 0u64, 0u64, 0u64, 0u64, Duration::ZERO, Duration::ZERO));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= end {
                    return;
                }
                let started = Instant::now();
                let outcome = run_seed(seed, &model);
                let run_wall = started.elapsed();
                let config = CheckConfig { run_end_us: outcome.sim_ms * 1_000, ..CheckConfig::for_model(&model) };
                let checked = Instant::now();
                let _ = check(&outcome.history, config);
                let check_wall = checked.elapsed();
                let c = &outcome.counters;
                let failing = outcome.violations.iter().any(|v| v.property == fencelock::Property::Linearizable);
                let mut t = totals.lock().unwrap();
                t.0.extend(c.linearizable_ops_per_key.iter().copied());
                t.1 = t.1.max(c.linearizable_steps_max);
                t.2 += c.linearizable_undecided.len() as u64;
                t.3 += c.linearizable_keys;
                t.4 += u64::from(failing);
                t.5 += run_wall;
                t.6 += check_wall;
            });
        }
    });
    let (mut ops, steps_max, unknown, keys, failing, run_wall, check_wall) = totals.into_inner().unwrap();
    ops.sort_unstable();
    let pct = |p: usize| ops.get((ops.len() * p / 100).min(ops.len().saturating_sub(1))).copied().unwrap_or(0);
    println!(
        "seeds {range}: {keys} keys, ops per key p50 {} p99 {} max {}; worst search {steps_max} nodes; {unknown} unknown; \
         {failing} seeds failing linearizable; whole check {:.1} ms per seed of {:.1} ms per run",
        pct(50),
        pct(99),
        ops.last().copied().unwrap_or(0),
        check_wall.as_secs_f64() * 1e3 / (end - start) as f64,
        run_wall.as_secs_f64() * 1e3 / (end - start) as f64,
    );
}
