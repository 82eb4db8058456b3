//! `replay` (one seed, or an edited fault schedule) and `run FILE` (a
//! scenario file whose `expect` decides the exit code).

use crate::cli::args::{exit_for, load_model, InputError, ReplayArgs, RunArgs};
use crate::cli::view::TraceView;
use crate::faults;
use crate::run::log::Record;
use crate::run::scenario::Scenario;
use crate::run::seed::{run_plan, run_plan_told, Outcome};
use crate::run::timeline;
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
    if args.json && !limits.swarm && view.is_none() {
        crate::outln!("{}", serde_json::to_string(&outcome).expect("an outcome always serializes"));
    } else if args.json {
        let mut value = serde_json::to_value(&outcome).expect("an outcome always serializes");
        if limits.swarm {
            value["swarm"] = serde_json::to_value(&model).expect("a model always serializes");
        }
        if let Some(view) = &view {
            value["trace"] = json_trace(view.keep(told, &outcome.history));
        }
        crate::outln!("{value}");
    } else {
        if limits.swarm {
            crate::outln!("swarm: {}", faults::swarm::describe(&model));
        }
        if args.faults {
            crate::outln!("{}", faults::describe(&outcome.plan).trim_end());
        }
        print_outcome(&outcome, view.as_ref().map(|view| (view, told)));
    }
    Ok(exit_for(outcome.ok))
}

pub fn run_file(args: &RunArgs) -> Result<ExitCode, InputError> {
    let origin = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| InputError(format!("cannot read scenario file {origin}: {e}")))?;
    let scenario = Scenario::parse(&text, &origin)?;
    let view = TraceView::from_args(args.trace, &args.view, &scenario.model)?;
    if let Some(path) = &args.timeline {
        timeline::check_path(path)?;
    }
    let (outcome, told) = match &view {
        Some(view) => scenario.run_told(&view.log),
        None => (scenario.run(), Vec::new()),
    };
    if let Some(path) = &args.timeline {
        timeline::write(&outcome, Some(scenario.file.name.as_str()), path)?;
    }
    let matched = scenario.matches(&outcome);
    if args.json {
        let mut value = serde_json::to_value(&outcome).expect("an outcome always serializes");
        value["expect"] = scenario.file.expect.clone().into();
        value["matched"] = matched.into();
        if let Some(view) = &view {
            value["trace"] = json_trace(view.keep(told, &outcome.history));
        }
        crate::outln!("{value}");
    } else {
        print_outcome(&outcome, view.as_ref().map(|view| (view, told)));
        let missing = scenario.missing_behaviours(&outcome);
        if !missing.is_empty() {
            crate::outln!("missing behaviours: {}", missing.join(", "));
        }
        crate::outln!(
            "scenario {}: expect {} — {}",
            scenario.file.name,
            scenario.file.expect,
            if matched { "matched" } else { "NOT matched" }
        );
    }
    Ok(exit_for(matched))
}

/// The kept events as the JSON output's `trace` array.
fn json_trace(records: Vec<Record>) -> serde_json::Value {
    serde_json::to_value(records).expect("records always serialize")
}

/// The trace (when asked for: the view and the events told), then the
/// violations, the summary and the trace hash, which every view keeps.
fn print_outcome(outcome: &Outcome, trace: Option<(&TraceView, Vec<Record>)>) {
    if let Some((view, told)) = trace {
        view.print(told, &outcome.history);
    }
    for violation in &outcome.violations {
        crate::outln!("VIOLATION {violation}");
    }
    crate::outln!(
        "seed {} variant {}: {} — {} grants, {} writes accepted, {} stale writes rejected, {} elections, {} lease exposures, {} messages, {} simulated ms",
        outcome.seed,
        outcome.variant,
        if outcome.ok { "ok" } else { "FAILED" },
        outcome.grants,
        outcome.writes_accepted,
        outcome.stale_writes_rejected,
        outcome.elections,
        outcome.lease_exposures,
        outcome.messages,
        outcome.sim_ms
    );
    crate::outln!("trace-hash: {}", outcome.trace_hash);
}
