//! `replay` (one seed, or an edited fault schedule) and `run FILE` (a
//! scenario file whose `expect` decides the exit code).

use crate::cli::args::{exit_for, load_model, InputError, ReplayArgs, RunArgs};
use crate::faults;
use crate::run::scenario::Scenario;
use crate::run::seed::{run_plan, Outcome};
use crate::run::{explain, timeline};
use std::process::ExitCode;

pub fn replay(args: &ReplayArgs) -> Result<ExitCode, InputError> {
    let limits = load_model(&args.model)?;
    if let Some(path) = &args.timeline {
        timeline::check_path(path)?;
    }
    // A swarm seed runs, and checks a fault file against, the model it draws.
    let model = faults::swarm::resolve(&limits, args.seed);
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
    let outcome = run_plan(args.seed, &model, plan);
    if let Some(path) = &args.timeline {
        timeline::write(&outcome, None, path)?;
    }
    if args.json {
        if limits.swarm {
            let mut value = serde_json::to_value(&outcome).expect("an outcome always serializes");
            value["swarm"] = serde_json::to_value(&model).expect("a model always serializes");
            crate::outln!("{value}");
        } else {
            crate::outln!("{}", serde_json::to_string(&outcome).expect("an outcome always serializes"));
        }
    } else {
        if limits.swarm {
            crate::outln!("swarm: {}", faults::swarm::describe(&model));
        }
        if args.faults {
            crate::outln!("{}", explain::fault_lines(&outcome).trim_end());
        }
        print_outcome(&outcome, args.trace);
    }
    Ok(exit_for(outcome.ok))
}

pub fn run_file(args: &RunArgs) -> Result<ExitCode, InputError> {
    let origin = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| InputError(format!("cannot read scenario file {origin}: {e}")))?;
    let scenario = Scenario::parse(&text, &origin)?;
    if let Some(path) = &args.timeline {
        timeline::check_path(path)?;
    }
    let outcome = scenario.run();
    if let Some(path) = &args.timeline {
        timeline::write(&outcome, Some(scenario.file.name.as_str()), path)?;
    }
    let matched = scenario.matches(&outcome);
    if args.json {
        let mut value = serde_json::to_value(&outcome).expect("an outcome always serializes");
        value["expect"] = scenario.file.expect.clone().into();
        value["matched"] = matched.into();
        crate::outln!("{value}");
    } else {
        print_outcome(&outcome, args.trace);
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

fn print_outcome(outcome: &Outcome, with_trace: bool) {
    if with_trace {
        for line in explain::trace_lines(outcome) {
            crate::outln!("{line}");
        }
    }
    for violation in &outcome.violations {
        crate::outln!("VIOLATION {violation}");
    }
    for exposure in &outcome.exposures {
        crate::outln!("EXPOSURE {exposure}");
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
