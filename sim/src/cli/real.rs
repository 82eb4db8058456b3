//! `real`: one run of the lock service as real processes (`crate::real`),
//! printed like `replay` prints a simulated one: the trace when asked for,
//! the violations and exposures, a summary line, `--json`, `--records`,
//! `--timeline`. Ctrl-C ends the run early and still stops every process.

use crate::cli::args::{exit_for, invocation, load_model, shell_path, InputError, RealArgs};
use crate::cli::records::{model_hash, Record, Verdict, COMMIT, DIRTY, FORMAT, VERSION};
use crate::cli::replay::{outcome_json, print_findings};
use crate::cli::view::TraceView;
use crate::history::History;
use crate::plural;
use crate::real::{self, RealOptions, RealRun};
use crate::run::scenario::Scenario;
use crate::run::timeline;
use crate::signals;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// The longest safety phase a real run takes (an hour).
const SECONDS_MAX: u64 = 3_600;
/// The safety phase unless told.
const SECONDS_DEFAULT: u64 = 30;

pub fn real(args: &RealArgs) -> Result<ExitCode, InputError> {
    let (seed, mut model, plan) = match &args.scenario {
        Some(path) => {
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| InputError(format!("cannot read scenario file {origin}: {e}")))?;
            let scenario = Scenario::parse(&text, &origin).map_err(InputError)?;
            (scenario.file.seed, scenario.model, scenario.file.faults)
        }
        None => (args.seed, load_model(&args.model)?, None),
    };
    if model.swarm {
        return Err(InputError(
            "real runs take one model; --swarm draws a model per seed (run `replay --swarm` to see which)".into(),
        ));
    }
    if let Err(why) = model.variant.runs_real() {
        return Err(InputError(format!("variant `{}` cannot run as real processes: {why}", model.variant)));
    }
    let safety_ms = match (args.seconds, &args.scenario) {
        (Some(seconds), _) if !(1..=SECONDS_MAX).contains(&seconds) => {
            return Err(InputError(format!("--seconds must be in 1..={SECONDS_MAX}, got {seconds}")));
        }
        (Some(seconds), _) => seconds * 1_000,
        (None, Some(_)) => model.safety_ms.max(1_000),
        (None, None) => SECONDS_DEFAULT * 1_000,
    };
    if let Some(nodes) = args.nodes {
        if !(1..=9).contains(&nodes) {
            return Err(InputError(format!("--nodes must be in 1..=9 (a real cluster's size), got {nodes}")));
        }
        model.nodes = nodes;
    }
    model.safety_ms = safety_ms;
    model.validate().map_err(InputError)?;
    refuse_simulated_keys(&mut model).map_err(InputError)?;
    if let Some(url) = &args.resource {
        let postgres = url.starts_with("postgres://") || url.starts_with("postgresql://");
        if !postgres && !url.starts_with("sqlite:") {
            return Err(InputError(format!("--resource must be postgres://… or sqlite:PATH, got {url:?}")));
        }
    }
    if let Some(path) = &args.timeline {
        timeline::check_path(path)?;
    }
    let view = TraceView::from_args(args.trace, &args.view, &model)?;
    let node_bin = node_bin(args.node_bin.as_ref())?;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("fencesim-real-{seed}-{}", std::process::id())),
    };
    if dir.join("cluster.toml").exists() {
        return Err(InputError(format!("{} already holds a run; name a new directory", shell_path(&dir))));
    }
    // Every signal only sets the flag: the run stops its processes before it exits.
    signals::catch(false);
    let stop = signals::INTERRUPTED.clone();
    let options = RealOptions {
        seed,
        model: model.clone(),
        resource: args.resource.clone(),
        dir: dir.clone(),
        node_bin,
        plan,
        stop,
    };
    // Every refusal (an unreachable database) comes before the header.
    let prepared = real::prepare(&options).map_err(InputError)?;
    if !args.json {
        crate::outln!(
            "real run: seed {seed} variant {}, {} and {}, {} ms of faults then {} ms healed, in {}",
            model.variant,
            plural(model.nodes, "server"),
            plural(model.clients, "worker"),
            model.safety_ms,
            model.liveness_ms,
            shell_path(&dir)
        );
    }
    let run = prepared.run().map_err(InputError)?;
    let told = view.as_ref().map(|view| tell(&run.outcome.history, view));
    if let Some(path) = &args.timeline {
        let outcome = &run.outcome;
        let title = format!(
            "real processes · seed {} · variant {} · {} · {}.{:03} s of real time",
            outcome.seed,
            outcome.variant,
            timeline::verdict(outcome),
            outcome.sim_ms / 1_000,
            outcome.sim_ms % 1_000
        );
        timeline::write_titled(outcome, &title, path)?;
    }
    if let Some(path) = &args.records {
        append_record(path, &run, &model, &replay_line(seed, &model, args))?;
    }
    if args.json {
        let mut value = outcome_json(&run.outcome, view.as_ref().zip(told), true);
        value["real"] = serde_json::json!({
            "dir": options.dir.display().to_string(),
            "processes": run.processes,
            "interrupted": run.interrupted,
            "skipped": serde_json::to_value(&run.skipped).expect("a plan always serializes"),
        });
        crate::outln!("{value}");
    } else {
        print_real(&run, view.as_ref().zip(told));
        crate::outln!("{}", faults_line(&run));
        crate::outln!(
            "processes: {} started, {} stopped by PID at the end; histories and logs in {}",
            run.processes,
            run.stopped_at_end,
            shell_path(&options.dir)
        );
        crate::outln!(
            "the same fault schedule again (model {}; the OS schedules the rest anew): {}",
            model_hash(&model),
            replay_line(seed, &model, args)
        );
        if run.interrupted {
            crate::outln!("interrupted: the run ended early; the properties judged after the heal were not");
        }
        if let Some(path) = &args.timeline {
            crate::outln!("wrote {}", shell_path(path));
        }
    }
    if run.interrupted {
        return Ok(ExitCode::from(signals::exit_code()));
    }
    Ok(exit_for(run.outcome.ok))
}

/// The faults played and those a real run cannot play, by kind.
fn faults_line(run: &RealRun) -> String {
    let mut skipped: BTreeMap<&'static str, u64> = BTreeMap::new();
    for event in &run.skipped {
        *skipped.entry(real::unplayable(&event.fault).unwrap_or("?")).or_default() += 1;
    }
    let mut line = format!("faults: {} played", run.played.len());
    if !skipped.is_empty() {
        let why: Vec<String> = skipped.iter().map(|(why, n)| format!("{n} ({why})")).collect();
        line.push_str(&format!(", skipped {}", why.join("; ")));
    }
    line
}

/// The merged history told to `tracing` again, for the trace filters.
fn tell(history: &History, view: &TraceView) -> Vec<crate::run::log::Record> {
    let (dispatch, told) = view.log.dispatch();
    tracing::dispatcher::with_default(&dispatch, || {
        let mut again = History::new();
        for event in history.events() {
            again.record(event.at_us, event.kind.clone());
        }
    });
    told.take()
}

/// `fencelock-node`: as given, else next to this program, else on the PATH.
fn node_bin(given: Option<&PathBuf>) -> Result<PathBuf, InputError> {
    if let Some(path) = given {
        return if path.is_file() {
            Ok(path.clone())
        } else {
            Err(InputError(format!("--node-bin {}: no such file", path.display())))
        };
    }
    let beside = std::env::current_exe().ok().and_then(|exe| exe.parent().map(|dir| dir.join("fencelock-node")));
    if let Some(path) = beside.filter(|p| p.is_file()) {
        return Ok(path);
    }
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join("fencelock-node")).find(|p| p.is_file()));
    on_path.ok_or_else(|| {
        InputError(
            "fencelock-node not found next to fencesim or on the PATH: build it with \
             `cargo build --release -p fencelock-node`, or name it with --node-bin"
                .to_string(),
        )
    })
}

/// The trace (when asked for), the violations and exposures, and the summary of a real run.
fn print_real(run: &RealRun, trace: Option<(&TraceView, Vec<crate::run::log::Record>)>) {
    let outcome = &run.outcome;
    print_findings(outcome, trace);
    crate::outln!(
        "real run seed {} variant {}: {} — {}, {} accepted, {} rejected, {}, {}, {} real ms",
        outcome.seed,
        outcome.variant,
        if outcome.ok { "ok" } else { "FAILED" },
        plural(outcome.grants, "grant"),
        plural(outcome.writes_accepted, "write"),
        plural(outcome.stale_writes_rejected, "stale write"),
        plural(outcome.elections, "election"),
        plural(outcome.lease_exposures, "lease exposure"),
        outcome.sim_ms
    );
}

/// The line that runs this real run again (the same fault schedule; not the same OS schedule).
fn replay_line(seed: u64, model: &crate::model::Model, args: &RealArgs) -> String {
    let mut line = match &args.scenario {
        Some(path) => format!("{} real --scenario {}", invocation(), shell_path(path)),
        None => format!("{} real --seed {seed} --variant {}", invocation(), model.variant),
    };
    if let Some(path) = &args.model.model {
        line.push_str(&format!(" --model {}", shell_path(path)));
    }
    for setting in &args.model.settings {
        line.push_str(&format!(" --set {setting}"));
    }
    line.push_str(&format!(" --seconds {}", model.safety_ms / 1_000));
    if let Some(nodes) = args.nodes {
        line.push_str(&format!(" --nodes {nodes}"));
    }
    line
}

fn append_record(path: &PathBuf, run: &RealRun, model: &crate::model::Model, replay: &str) -> Result<(), InputError> {
    let outcome = &run.outcome;
    let record = Record {
        format: FORMAT,
        fencesim: VERSION.to_string(),
        commit: COMMIT.to_string(),
        dirty: DIRTY,
        model_hash: model_hash(model),
        shard: None,
        variant: outcome.variant.clone(),
        seed: outcome.seed,
        verdict: if outcome.ok { Verdict::Pass } else { Verdict::Fail },
        properties: outcome.violations.iter().map(|v| v.property).collect(),
        trace_hash: outcome.trace_hash.clone(),
        sim_ms: outcome.sim_ms,
        wall_ms: outcome.sim_ms,
        messages: outcome.messages,
        lease_exposures: outcome.lease_exposures,
        violations: outcome.violations.iter().map(|v| v.one_line()).collect(),
        replay: Some(replay.to_string()),
        figures: None,
        availability: Some(outcome.counters.phases),
        // Real servers keep their probes off: a real run reports no coverage.
        probes: None,
        swarm_bias: None,
        undecided: outcome.undecided.len() as u64,
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| InputError(format!("cannot open {}: {e}", path.display())))?;
    file.write_all(record.to_line().as_bytes()).map_err(|e| InputError(format!("cannot write {}: {e}", path.display())))
}

/// Refuses the keys that set the simulated workers' pace and disks: a real
/// run has fencelock-node's workers and real disks. `server_fsync_ms` at
/// the variant's declared value is left out instead (`loss-check-every-answer`
/// declares slow disks, and real disks are slower than loopback); a declared
/// pace is refused by name, as the real workers do not run it.
fn refuse_simulated_keys(model: &mut crate::model::Model) -> Result<(), String> {
    let declared = crate::model::Model::declared(model.variant);
    if model.server_fsync_ms == declared.server_fsync_ms {
        model.server_fsync_ms = None;
    }
    let keys = [
        ("think_ms_max", model.think_ms_max, declared.think_ms_max),
        ("work_ms_max", model.work_ms_max, declared.work_ms_max),
        ("server_fsync_ms", model.server_fsync_ms, None),
    ];
    match keys.into_iter().find(|(_, value, _)| value.is_some()) {
        None => Ok(()),
        Some((key, value, declared_value)) if value == declared_value => Err(format!(
            "variant `{}` declares `{key}` (workers back to back), which fencelock-node's workers do not run; \
             `fencelock-node bench` is such a load on real processes, or give --model a model of your own",
            model.variant
        )),
        Some((key, ..)) => Err(format!(
            "model key `{key}` sets the simulator's workers or disks; a real run has fencelock-node's workers and real disks"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::refuse_simulated_keys;
    use crate::model::Model;
    use fencelock::Variant;

    #[test]
    fn a_declared_fsync_is_left_out_and_a_declared_pace_is_refused_by_name() {
        let mut declared = Model::declared(Variant::LossCheckEveryAnswer);
        assert_eq!(declared.server_fsync_ms, Some(16));
        let error = refuse_simulated_keys(&mut declared).expect_err("real workers do not ask back to back");
        assert!(error.starts_with("variant `loss-check-every-answer` declares `think_ms_max`"), "{error}");
        assert_eq!(declared.server_fsync_ms, None, "real disks are the slow disks it declares");
        let mut paced =
            Model { think_ms_max: None, work_ms_max: None, ..Model::declared(Variant::LossCheckEveryAnswer) };
        assert_eq!(refuse_simulated_keys(&mut paced), Ok(()));
        let mut set = Model { server_fsync_ms: Some(8), ..Model::default() };
        let error = refuse_simulated_keys(&mut set).expect_err("a simulated disk");
        assert!(error.starts_with("model key `server_fsync_ms` sets the simulator's"), "{error}");
        assert_eq!(refuse_simulated_keys(&mut Model::default()), Ok(()));
    }
}
