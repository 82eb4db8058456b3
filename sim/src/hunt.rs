//! Sweeps of many seeds: `hunt`, and the checker's mutation score in
//! `variants --score`. Seeds run in parallel on `--jobs` threads, each seed on
//! its own fresh thread; results are reported in seed order, so the output
//! does not depend on thread timing.

use crate::checker::Violation;
use crate::cli::{exit_for, load_model, parse_seeds, replay_line, HuntArgs, InputError, VariantsArgs};
use crate::model::Model;
use crate::run::run_seed;
use crate::scenario::for_failure;
use fencelock::{Variant, VARIANTS};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::ops::Range;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

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
    let outcome = run_seed(seed, model);
    let mut violations = outcome.violations.clone();
    if twice {
        let again = run_seed(seed, model);
        if again.trace_hash != outcome.trace_hash {
            violations.push(Violation {
                property: "determinism",
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

fn default_jobs() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn progress_bar(len: u64) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds  {per_sec}  {msg}  eta {eta}")
            .expect("a valid progress template"),
    );
    Some(bar)
}

#[derive(Serialize)]
struct HuntJson {
    seeds_run: u64,
    variant: String,
    violations: Vec<HuntViolationJson>,
    sim_ms: u64,
    wall_ms: u64,
    messages: u64,
}

#[derive(Serialize)]
struct HuntViolationJson {
    seed: u64,
    property: &'static str,
    detail: String,
    replay: String,
}

pub fn hunt(args: &HuntArgs) -> Result<ExitCode, InputError> {
    let model = load_model(&args.model)?;
    let seeds = parse_seeds(&args.seeds)?;
    let jobs = args.jobs.unwrap_or_else(default_jobs);
    if jobs == 0 {
        return Err(InputError("--jobs must be at least 1".into()));
    }
    if let Some(dir) = &args.save {
        std::fs::create_dir_all(dir).map_err(|e| InputError(format!("cannot create {}: {e}", dir.display())))?;
    }
    quiet_panics();
    let started = Instant::now();
    let bar = if args.json { None } else { progress_bar(seeds.end - seeds.start) };
    let results = sweep(seeds.clone(), &model, jobs, args.check_determinism, bar.as_ref());
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let wall_ms = started.elapsed().as_millis() as u64;
    let failures: Vec<&SeedResult> = results.iter().filter(|r| !r.violations.is_empty()).collect();
    if let Some(dir) = &args.save {
        for failure in &failures {
            let property = failure.violations[0].property;
            let path = dir.join(format!("{:04}-{property}.toml", failure.seed));
            let text = failure.scenario.as_deref().expect("a failure has a scenario");
            std::fs::write(&path, text).map_err(|e| InputError(format!("cannot write {}: {e}", path.display())))?;
        }
    }
    let sim_ms: u64 = results.iter().map(|r| r.sim_ms).sum();
    let messages: u64 = results.iter().map(|r| r.messages).sum();
    if args.json {
        let json = HuntJson {
            seeds_run: results.len() as u64,
            variant: model.variant.name().to_string(),
            violations: failures
                .iter()
                .flat_map(|f| {
                    f.violations.iter().map(|v| HuntViolationJson {
                        seed: f.seed,
                        property: v.property,
                        detail: v.detail.clone(),
                        replay: replay_line(f.seed, &args.model),
                    })
                })
                .collect(),
            sim_ms,
            wall_ms,
            messages,
        };
        crate::outln!("{}", serde_json::to_string(&json).expect("hunt json serializes"));
    } else {
        for failure in &failures {
            for violation in &failure.violations {
                crate::outln!("FAIL seed {}: {violation}", failure.seed);
            }
            crate::outln!("  replay: {}", replay_line(failure.seed, &args.model));
        }
        let wall_s = (wall_ms as f64 / 1_000.0).max(0.001);
        crate::outln!(
            "hunt: {} seeds of variant {}, {} failing; {:.1} seeds/s, {:.0} simulated s in {:.1} s wall ({:.0}x real time), {} messages",
            results.len(),
            model.variant.name(),
            failures.len(),
            results.len() as f64 / wall_s,
            sim_ms as f64 / 1_000.0,
            wall_s,
            sim_ms as f64 / 1_000.0 / wall_s,
            messages
        );
    }
    Ok(exit_for(failures.is_empty()))
}

#[derive(Serialize)]
struct VariantJson {
    name: &'static str,
    safe: bool,
    breaks: Option<&'static str>,
    about: &'static str,
}

#[derive(Serialize)]
struct ScoreJson {
    name: &'static str,
    breaks: Option<&'static str>,
    detected: bool,
    seeds_to_detection: Option<u64>,
    seed: Option<u64>,
    property: Option<&'static str>,
}

pub fn variants(args: &VariantsArgs) -> Result<ExitCode, InputError> {
    if !args.score {
        if args.json {
            let list: Vec<VariantJson> = VARIANTS
                .iter()
                .map(|v| VariantJson { name: v.name, safe: v.variant.is_safe(), breaks: v.breaks, about: v.about })
                .collect();
            crate::outln!("{}", serde_json::to_string(&list).expect("variants serialize"));
        } else {
            for v in VARIANTS {
                crate::outln!("{:<32} {:<18} {}", v.name, v.breaks.unwrap_or("(safe)"), v.about);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.seeds == 0 {
        return Err(InputError("--seeds must be at least 1".into()));
    }
    quiet_panics();
    let jobs = default_jobs();
    let mut rows = Vec::new();
    for info in VARIANTS.iter().filter(|v| !v.variant.is_safe()) {
        let row = score_one(info.variant, args.seeds, jobs);
        if !args.json {
            match (row.seed, row.property) {
                (Some(seed), Some(property)) => crate::outln!(
                    "{:<32} breaks {:<18} found {:<18} after {:>4} seeds (seed {seed})",
                    info.name,
                    info.breaks.unwrap_or("-"),
                    property,
                    row.seeds_to_detection.unwrap_or(0)
                ),
                _ => crate::outln!(
                    "{:<32} breaks {:<18} NOT DETECTED in {} seeds",
                    info.name,
                    info.breaks.unwrap_or("-"),
                    args.seeds
                ),
            }
        }
        rows.push(row);
    }
    if args.json {
        crate::outln!("{}", serde_json::to_string(&rows).expect("scores serialize"));
    } else {
        crate::outln!("{}", score_summary(&rows, args.seeds));
    }
    Ok(exit_for(rows.iter().all(|r| r.detected)))
}

/// One line over a score table: how many variants were caught, and the
/// median and worst seeds to detection (an undetected variant counts as
/// beyond every seed tried).
fn score_summary(rows: &[ScoreJson], seeds_max: u64) -> String {
    let detected = rows.iter().filter(|r| r.detected).count();
    let mut seeds: Vec<u64> = rows.iter().map(|r| r.seeds_to_detection.unwrap_or(u64::MAX)).collect();
    seeds.sort_unstable();
    let show = |n: u64| if n == u64::MAX { format!(">{seeds_max}") } else { n.to_string() };
    let median = match seeds.len() {
        0 => "-".to_string(),
        len if !len.is_multiple_of(2) => show(seeds[len / 2]),
        len if seeds[len / 2] == u64::MAX => show(u64::MAX),
        len => {
            let twice = seeds[len / 2 - 1] + seeds[len / 2];
            if twice.is_multiple_of(2) {
                (twice / 2).to_string()
            } else {
                format!("{}.5", twice / 2)
            }
        }
    };
    let max = seeds.last().map_or("-".to_string(), |n| show(*n));
    format!(
        "score: {detected} of {} unsafe variants detected within {seeds_max} seeds; seeds to detection: median {median}, max {max}",
        rows.len()
    )
}

/// The model a variant runs on when no `--model` is given: the standard
/// model with the keys the variant declares (`VariantInfo::model`).
pub fn declared_model(variant: Variant) -> Model {
    let info = variant.info();
    let mut model = Model::from_toml(info.model, info.name).expect("a variant's declared model is valid");
    model.variant = variant;
    model
}

/// Seeds of `variant` on its declared model until one violates the property
/// the variant is expected to break (`breaks`); other violations on the way
/// (symptoms of the same flaw) do not count as detection.
fn score_one(variant: Variant, seeds_max: u64, jobs: usize) -> ScoreJson {
    let info = variant.info();
    let model = declared_model(variant);
    let mut start = 0;
    while start < seeds_max {
        let end = (start + jobs as u64 * 2).min(seeds_max);
        let results = sweep(start..end, &model, jobs, false, None);
        let hit = |r: &&SeedResult| r.violations.iter().any(|v| Some(v.property) == info.breaks);
        if let Some(first) = results.iter().find(hit) {
            return ScoreJson {
                name: info.name,
                breaks: info.breaks,
                detected: true,
                seeds_to_detection: Some(first.seed + 1),
                seed: Some(first.seed),
                property: info.breaks,
            };
        }
        start = end;
    }
    ScoreJson {
        name: info.name,
        breaks: info.breaks,
        detected: false,
        seeds_to_detection: None,
        seed: None,
        property: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seeds_to_detection: Option<u64>) -> ScoreJson {
        let detected = seeds_to_detection.is_some();
        let property = detected.then_some("fenced-write");
        let seed = seeds_to_detection.map(|n| n - 1);
        ScoreJson { name: "x", breaks: Some("fenced-write"), detected, seeds_to_detection, seed, property }
    }

    #[test]
    fn the_score_summary_counts_undetected_variants_as_beyond_every_seed() {
        let odd = [row(Some(9)), row(Some(1)), row(Some(4))];
        assert!(score_summary(&odd, 100)
            .ends_with("3 of 3 unsafe variants detected within 100 seeds; seeds to detection: median 4, max 9"));
        let even = [row(Some(10)), row(Some(17)), row(Some(1)), row(Some(2))];
        assert!(score_summary(&even, 100).ends_with("median 6, max 17"), "{}", score_summary(&even, 100));
        let half = [row(Some(10)), row(Some(3))];
        assert!(score_summary(&half, 100).ends_with("median 6.5, max 10"));
        let missed = [row(Some(10)), row(None), row(None)];
        assert!(score_summary(&missed, 100).contains("1 of 3"));
        assert!(score_summary(&missed, 100).ends_with("median >100, max >100"));
    }
}
