//! `shrink`: a failing seed (or scenario file, or edited fault plan) reduced
//! to the smallest run that still violates the same property, written as a
//! scenario file that carries its own fault plan and workload.

use crate::cli::args::{load_model, shell_path, wrote_scenario_line, InputError, ShrinkArgs};
use crate::faults::{self, FaultEvent};
use crate::model::Model;
use crate::run::scenario::{exhibited, Scenario};
use crate::run::sweep::{quiet_panics, SeedResult};
use crate::shrink::{self, text, Case, Options, Report};
use crate::signals;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// What to shrink, where it came from.
struct Start {
    property: Option<String>,
    case: Case,
    name: String,
    exhibits: Vec<String>,
}

pub fn shrink(args: &ShrinkArgs) -> Result<ExitCode, InputError> {
    let start = load_start(args)?;
    if let Some(path) = &args.timeline {
        crate::run::timeline::check_path(path)?;
    }
    if args.robustness_seeds > 10_000 {
        return Err(InputError("--robustness-seeds must be at most 10000".into()));
    }
    signals::catch(true);
    quiet_panics();
    let options = Options {
        property: start.property.clone(),
        budget: Duration::from_secs(args.budget_s),
        robustness_seeds: args.robustness_seeds,
        probes: args.probes,
    };
    let report = shrink::shrink(start.case, &options)?;
    let kept: Vec<String> = {
        let shown = exhibited(&report.outcome);
        start.exhibits.into_iter().filter(|b| shown.contains(&b.as_str())).collect()
    };
    let scenario = text::scenario_toml(&report, &start.name, kept);
    if let Some(path) = &args.out {
        std::fs::write(path, &scenario).map_err(|e| InputError(format!("cannot write {}: {e}", path.display())))?;
    }
    if let Some(path) = &args.timeline {
        crate::run::timeline::write(&report.outcome, Some(start.name.as_str()), path)?;
    }
    if args.json {
        crate::outln!("{}", report_json(&report, args.out.as_deref()));
    } else {
        print_report(&report, args.out.as_deref());
        if let Some(path) = &args.timeline {
            crate::outln!("wrote {}", shell_path(path));
        }
        if args.out.is_none() {
            crate::outln!("{}", scenario.trim_end());
        }
    }
    if report.interrupted {
        return Ok(ExitCode::from(signals::exit_code()));
    }
    Ok(ExitCode::SUCCESS)
}

fn load_start(args: &ShrinkArgs) -> Result<Start, InputError> {
    if let Some(path) = &args.file {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| InputError(format!("cannot read scenario file {origin}: {e}")))?;
        let scenario = Scenario::parse(&text, &origin)?;
        let seed = scenario.file.seed;
        let plan = scenario.file.faults.clone().unwrap_or_else(|| faults::plan(&scenario.model, seed));
        // A scenario that expects a property keeps that one.
        let expected = (scenario.file.expect != "pass").then(|| scenario.file.expect.clone());
        return Ok(Start {
            property: args.property.clone().or(expected),
            case: Case { seed, model: scenario.model, plan },
            name: scenario.file.name,
            exhibits: scenario.file.exhibits,
        });
    }
    let seed = args.seed.ok_or_else(|| InputError("shrink needs --seed S or a scenario FILE".into()))?;
    // A swarm seed shrinks the model it draws (and the scenario records that one).
    let model = faults::swarm::resolve(&load_model(&args.model)?, seed);
    let plan = match &args.fault_file {
        Some(path) => load_plan(path, &model)?,
        None => faults::plan(&model, seed),
    };
    let name = format!("{}-seed-{seed}", model.variant.name());
    Ok(Start { property: args.property.clone(), case: Case { seed, model, plan }, name, exhibits: Vec::new() })
}

/// A fault file (JSON), checked against the model: bad input is one line.
pub fn load_plan(path: &Path, model: &Model) -> Result<Vec<FaultEvent>, InputError> {
    let origin = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| InputError(format!("cannot read fault file {origin}: {e}")))?;
    let plan = serde_json::from_str::<Vec<FaultEvent>>(&text)
        .map_err(|e| InputError(format!("{origin}: {}", crate::model::one_line(&e.to_string()))))?;
    faults::validate(&plan, model).map_err(|e| InputError(format!("{origin}: {e}")))?;
    Ok(plan)
}

pub fn report_json(report: &Report, out: Option<&Path>) -> serde_json::Value {
    json!({
        "faults_before": report.before.faults,
        "faults_after": report.after.faults,
        "trace_lines_before": report.before.trace_lines,
        "trace_lines_after": report.after.trace_lines,
        "sim_ms_before": report.before.sim_ms,
        "sim_ms_after": report.after.sim_ms,
        "runs": report.runs,
        "wall_ms": report.wall_ms,
        "robust": report.robustness.as_ref().map(|r| r.robust()),
        "out": out.map(|p| p.display().to_string()),
        "property": report.property,
        "seed": report.case.seed,
        "variant": report.case.model.variant.name(),
        "robust_failing": report.robustness.as_ref().map(|r| r.failing),
        "robust_seeds": report.robustness.as_ref().map(|r| r.seeds),
        "needed": report.needed,
        "minimal": report.minimal,
        "violation": report.violation,
        "interrupted": report.interrupted,
        "repaired": report.repaired,
    })
}

/// Before → after, the proof for each remaining fault, and the line to replay.
pub fn print_report(report: &Report, out: Option<&Path>) {
    let (b, a) = (&report.before, &report.after);
    crate::outln!(
        "shrink seed {} variant {}, keeping {}{}",
        report.case.seed,
        report.case.model.variant.name(),
        report.property,
        if report.interrupted { " — INTERRUPTED, best so far" } else { "" }
    );
    crate::outln!("  fault events   {:>7} -> {}", b.faults, a.faults);
    crate::outln!("  trace lines    {:>7} -> {}", b.trace_lines, a.trace_lines);
    crate::outln!("  simulated ms   {:>7} -> {}", b.sim_ms, a.sim_ms);
    crate::outln!(
        "  runs {}, wall {:.1} s{}",
        report.runs,
        report.wall_ms as f64 / 1_000.0,
        if report.repaired {
            "; the minimal case was fragile: given back time and workload for robustness"
        } else {
            ""
        }
    );
    match &report.robustness {
        Some(r) => crate::outln!("  {}", r.label()),
        None => crate::outln!("  robustness not measured (interrupted)"),
    }
    for needed in &report.needed {
        crate::outln!(
            "  needed: {:>6} ms {} — without it the run {} (trace-hash {})",
            needed.at_ms,
            needed.fault,
            needed.without,
            needed.trace_hash
        );
    }
    crate::outln!("VIOLATION {}", report.violation);
    if let Some(path) = out {
        crate::outln!("{}", wrote_scenario_line(path));
    }
}

/// `hunt --shrink`: the path a shrunk failure is saved at.
pub fn saved_path(dir: &Path, seed: u64, property: &str) -> PathBuf {
    dir.join(format!("{seed:04}-{property}.toml"))
}

/// One failure of a hunt, shrunk (`hunt --shrink`).
pub struct Shrunk {
    pub seed: u64,
    /// The shrunk scenario file's text.
    pub scenario: String,
    pub json: serde_json::Value,
    /// `64 -> 1 faults, 2282 -> 121 trace lines, …` for the hunt's text output.
    pub line: String,
}

/// Most wall time one failure of a hunt gets.
const HUNT_SHRINK_BUDGET_S_MAX: u64 = 50;

/// Shrinks each failure of a hunt in seed order, from the scenario the hunt
/// recorded (so a swarm seed's drawn model), within `budget_s` for all;
/// failures left when the budget or Ctrl-C ends it are not shrunk.
pub fn shrink_failures(failures: &[&SeedResult], budget_s: u64) -> Vec<Shrunk> {
    signals::catch(true);
    let started = Instant::now();
    let mut shrunk = Vec::new();
    for failure in failures {
        let left_s = budget_s.saturating_sub(started.elapsed().as_secs());
        if left_s == 0 || signals::interrupted() {
            break;
        }
        let text = failure.scenario.as_deref().expect("a failure has a scenario");
        let Ok(scenario) = Scenario::parse(text, "hunt") else { continue };
        let case =
            Case { seed: failure.seed, plan: faults::plan(&scenario.model, failure.seed), model: scenario.model };
        let options = Options {
            property: Some(scenario.file.expect.clone()),
            budget: Duration::from_secs(left_s.min(HUNT_SHRINK_BUDGET_S_MAX)),
            robustness_seeds: ROBUSTNESS_SEEDS_HUNT,
            probes: PROBES_HUNT,
        };
        let Ok(report) = shrink::shrink(case, &options) else { continue };
        let (b, a) = (&report.before, &report.after);
        let line = format!(
            "{} -> {} faults, {} -> {} trace lines, {} -> {} ms in {} runs; {}",
            b.faults,
            a.faults,
            b.trace_lines,
            a.trace_lines,
            b.sim_ms,
            a.sim_ms,
            report.runs,
            report.robustness.as_ref().map_or("robustness not measured".to_string(), |r| r.label())
        );
        shrunk.push(Shrunk {
            seed: failure.seed,
            scenario: text::scenario_toml(&report, &scenario.file.name, Vec::new()),
            json: report_json(&report, None),
            line,
        });
    }
    shrunk
}

/// `hunt --shrink` measures robustness like `shrink`'s defaults.
const ROBUSTNESS_SEEDS_HUNT: u64 = 20;
const PROBES_HUNT: u64 = 8;
