//! `hunt`: many seeds of one model, one replay line per failure.

use crate::cli::args::{exit_for, load_model, parse_seeds, replay_line, HuntArgs, InputError};
use crate::cli::shrink::shrink_failures;
use crate::run::sweep::{default_jobs, quiet_panics, sweep, SeedResult};
use fencelock::Property;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

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
    /// With --shrink: one `shrink --json` object per failure shrunk in time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shrunk: Vec<serde_json::Value>,
}

#[derive(Serialize)]
struct HuntViolationJson {
    seed: u64,
    property: Property,
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
    let shrunk = if args.shrink { shrink_failures(&failures, args.shrink_budget_s) } else { Vec::new() };
    let shrunk_of = |seed: u64| shrunk.iter().find(|s| s.seed == seed);
    if let Some(dir) = &args.save {
        for failure in &failures {
            let property = failure.violations[0].property;
            let path = dir.join(format!("{:04}-{property}.toml", failure.seed));
            let recorded = failure.scenario.as_deref().expect("a failure has a scenario");
            // With --shrink, the shrunk scenario where the shrink finished in time.
            let text = shrunk_of(failure.seed).map_or(recorded, |s| s.scenario.as_str());
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
            shrunk: shrunk.iter().map(|s| s.json.clone()).collect(),
        };
        crate::outln!("{}", serde_json::to_string(&json).expect("hunt json serializes"));
    } else {
        for failure in &failures {
            for violation in &failure.violations {
                crate::outln!("FAIL seed {}: {violation}", failure.seed);
            }
            crate::outln!("  replay: {}", replay_line(failure.seed, &args.model));
            if let Some(s) = shrunk_of(failure.seed) {
                crate::outln!("  shrunk: {}", s.line);
            }
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
