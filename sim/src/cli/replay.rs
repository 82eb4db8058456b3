//! `replay` (one seed, or an edited fault schedule) and `run FILE|DIR…`
//! (scenario files whose `expect` decides the exit code).

use crate::cli::args::{exit_for, load_model, shell_path, InputError, ReplayArgs, RunArgs};
use crate::cli::view::TraceView;
use crate::faults;
use crate::plural;
use crate::run::log::Record;
use crate::run::scenario::{expectation_met, Scenario};
use crate::run::seed::{run_plan, run_plan_told, Outcome};
use crate::run::{explain, timeline};
use std::path::PathBuf;
use std::process::ExitCode;

pub fn replay(args: &ReplayArgs) -> Result<ExitCode, InputError> {
    let limits = load_model(&args.model)?;
    if let Some(path) = &args.timeline {
        timeline::check_path(path)?;
    }
    // A swarm seed runs, and checks a fault file against, the model it draws.
    let model = faults::swarm::resolve(&limits, args.seed);
    let view = TraceView::from_args(args.trace, &args.view, &model)?;
    let plan = match &args.fault_file {
        Some(path) => {
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| InputError(format!("cannot read fault file {origin}: {e}")))?;
            let plan = serde_json::from_str::<Vec<faults::FaultEvent>>(&text)
                .map_err(|e| InputError(format!("{origin}: {e}")))?;
            faults::validate(&plan, &model).map_err(|e| InputError(format!("{origin}: {e}")))?;
            plan
        }
        None => faults::plan(&model, args.seed),
    };
    if let Some(path) = &args.save_faults {
        let text = serde_json::to_string_pretty(&plan).expect("a plan always serializes");
        std::fs::write(path, text).map_err(|e| InputError(format!("cannot write {}: {e}", path.display())))?;
    }
    let (outcome, told) = match &view {
        Some(view) => run_plan_told(args.seed, &model, plan, &view.log),
        None => (run_plan(args.seed, &model, plan), Vec::new()),
    };
    if let Some(path) = &args.timeline {
        timeline::write(&outcome, None, path)?;
    }
    if args.json {
        let mut value = outcome_json(&outcome, view.as_ref().map(|view| (view, told)), args.faults);
        if limits.swarm {
            value["swarm"] = serde_json::to_value(&model).expect("a model always serializes");
        }
        crate::outln!("{value}");
    } else {
        if limits.swarm {
            crate::outln!("swarm: {}", faults::swarm::describe(&model));
        }
        if args.faults {
            crate::outln!("{}", explain::fault_lines(&outcome).trim_end());
        }
        print_outcome(&outcome, view.as_ref().map(|view| (view, told)));
        if let Some(path) = &args.timeline {
            crate::outln!("wrote {}", shell_path(path));
        }
    }
    Ok(exit_for(outcome.ok))
}

/// `run FILE|DIR…`: every scenario is read and checked before the first
/// runs, so a bad file is an input error and nothing runs.
pub fn run_files(args: &RunArgs) -> Result<ExitCode, InputError> {
    let paths = scenario_paths(&args.files)?;
    let scenarios = paths
        .iter()
        .map(|path| {
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| InputError(format!("cannot read scenario file {origin}: {e}")))?;
            let scenario = Scenario::parse(&text, &origin)?;
            let view = TraceView::from_args(args.trace, &args.view, &scenario.model)?;
            Ok((scenario, view))
        })
        .collect::<Result<Vec<(Scenario, Option<TraceView>)>, InputError>>()?;
    if let Some(path) = &args.timeline {
        if scenarios.len() > 1 {
            return Err(InputError(format!("--timeline draws one scenario; got {}", scenarios.len())));
        }
        timeline::check_path(path)?;
    }
    let one = scenarios.len() == 1;
    let mut matched_all = 0;
    for (scenario, view) in &scenarios {
        let matched = run_one(scenario, view.as_ref(), args, one)?;
        matched_all += u64::from(matched);
    }
    if !one && !args.json {
        let total = scenarios.len() as u64;
        crate::outln!("run: {}, {matched_all} matched", plural(total, "scenario"));
    }
    Ok(exit_for(matched_all == scenarios.len() as u64))
}

/// The scenario files named: files as given, directories' `*.toml` in name order.
fn scenario_paths(args: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut paths = Vec::new();
    for path in args {
        if !path.is_dir() {
            paths.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path)
            .map_err(|e| InputError(format!("cannot read directory {}: {e}", path.display())))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
            .collect();
        if found.is_empty() {
            return Err(InputError(format!("{}: no scenario files (*.toml) in it", path.display())));
        }
        found.sort();
        paths.extend(found);
    }
    Ok(paths)
}

/// Runs one scenario and prints it: the whole outcome when it is the only
/// one (or with --trace), else its verdict line. Returns whether it matched.
fn run_one(scenario: &Scenario, view: Option<&TraceView>, args: &RunArgs, alone: bool) -> Result<bool, InputError> {
    let (outcome, told) = match view {
        Some(view) => scenario.run_told(&view.log),
        None => (scenario.run(), Vec::new()),
    };
    if let Some(path) = &args.timeline {
        timeline::write(&outcome, Some(scenario.file.name.as_str()), path)?;
    }
    let matched = scenario.matches(&outcome);
    if args.json {
        let mut value = outcome_json(&outcome, view.map(|view| (view, told)), false);
        value["name"] = scenario.file.name.clone().into();
        value["expect"] = scenario.file.expect.clone().into();
        value["matched"] = matched.into();
        if !matched {
            value["found"] = found(&outcome).into();
        }
        crate::outln!("{value}");
        return Ok(matched);
    }
    if alone || view.is_some() {
        print_outcome(&outcome, view.map(|view| (view, told)));
    }
    let missing = scenario.missing_behaviours(&outcome);
    if !missing.is_empty() {
        crate::outln!("missing behaviours: {}", missing.join(", "));
    }
    let verdict = if matched {
        "matched".to_string()
    } else if expectation_met(&scenario.file.expect, &outcome) {
        "NOT matched (a behaviour is missing)".to_string()
    } else {
        format!("NOT matched; found {}", found(&outcome))
    };
    crate::outln!("scenario {}: expect {} — {verdict}", scenario.file.name, scenario.file.expect);
    if args.postmortem {
        match &scenario.file.postmortem {
            Some(text) => {
                for line in text.trim().lines() {
                    crate::outln!("  {line}");
                }
            }
            None => crate::outln!("  (no postmortem)"),
        }
    }
    if let Some(path) = &args.timeline {
        crate::outln!("wrote {}", shell_path(path));
    }
    Ok(matched)
}

/// What a run found, for a scenario whose `expect` it missed: each property
/// violated, at its first instant, or that it found none.
fn found(outcome: &Outcome) -> String {
    let mut first: Vec<(String, u64)> = Vec::new();
    for violation in &outcome.violations {
        let property = violation.property.to_string();
        if !first.iter().any(|(p, _)| *p == property) {
            first.push((property, violation.at_us));
        }
    }
    if first.is_empty() {
        return "no violation".to_string();
    }
    first.iter().map(|(property, at_us)| format!("{property} at {}ms", at_us / 1_000)).collect::<Vec<_>>().join(", ")
}

/// `replay --json`'s object; with a trace, the kept events as `"trace"`
/// (records: time, actor, message, fields), with `faults`, the fault
/// schedule as `"faults"` (the fault file format).
pub(crate) fn outcome_json(
    outcome: &Outcome,
    trace: Option<(&TraceView, Vec<Record>)>,
    with_faults: bool,
) -> serde_json::Value {
    let mut value = serde_json::to_value(outcome).expect("an outcome always serializes");
    if let Some((view, told)) = trace {
        value["trace"] = serde_json::to_value(view.keep(told, &outcome.history)).expect("records always serialize");
    }
    if with_faults {
        value["faults"] = serde_json::to_value(&outcome.plan).expect("a plan always serializes");
    }
    value
}

/// The trace (when asked for: the view and the events told, with the
/// checker's findings in place), then the violations, the exposures and the
/// keys `linearizable` could not decide: what `replay` and `real` print
/// before their summary lines.
pub(crate) fn print_findings(outcome: &Outcome, trace: Option<(&TraceView, Vec<Record>)>) {
    if let Some((view, told)) = trace {
        view.print(told, outcome);
    }
    for violation in &outcome.violations {
        crate::outln!("VIOLATION {violation}");
    }
    for exposure in &outcome.exposures {
        crate::outln!("EXPOSURE {exposure}");
    }
    for undecided in &outcome.undecided {
        crate::outln!("UNDECIDED {undecided}");
    }
}

/// `print_findings`, then the summary and the trace hash, which every view keeps.
fn print_outcome(outcome: &Outcome, trace: Option<(&TraceView, Vec<Record>)>) {
    print_findings(outcome, trace);
    crate::outln!(
        "seed {} variant {}: {} — {}, {} accepted, {} rejected, {}, {}, {}, {} simulated ms",
        outcome.seed,
        outcome.variant,
        if outcome.ok { "ok" } else { "FAILED" },
        plural(outcome.grants, "grant"),
        plural(outcome.writes_accepted, "write"),
        plural(outcome.stale_writes_rejected, "stale write"),
        plural(outcome.elections, "election"),
        plural(outcome.lease_exposures, "lease exposure"),
        plural(outcome.messages, "message"),
        outcome.sim_ms
    );
    crate::outln!("trace-hash: {}", outcome.trace_hash);
}
