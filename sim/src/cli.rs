//! The `fencesim` command line (CLI.md): hunt, replay, run, variants, bench.
//!
//! Every input error is one line on stderr and exit code 2; a violated
//! property is exit code 1; anything else is 0.

use crate::model::Model;
use crate::run::{run_plan, run_seed, Outcome};
use crate::scenario::Scenario;
use crate::{faults, hunt, trace};
use clap::{Args, Parser, Subcommand};
use fencelock::Variant;
use std::ops::Range;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "fencesim", version, about = "Deterministic simulation testbed for a fenced distributed lock service")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run many seeds and report every violation with a line to replay it.
    Hunt(HuntArgs),
    /// Run one seed, optionally printing its whole trace.
    Replay(ReplayArgs),
    /// Run a scenario file; its `expect` decides the exit code.
    Run(RunArgs),
    /// List the protocol variants (and score the checker against them).
    Variants(VariantsArgs),
    /// Measure simulation speed.
    Bench(BenchArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Protocol variant (see `fencesim variants`).
    #[arg(long, default_value = "default")]
    pub variant: String,
    /// Model file (TOML); missing keys take the standard model's values.
    #[arg(long)]
    pub model: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct HuntArgs {
    /// Half-open seed range `A..B`.
    #[arg(long, default_value = "0..1000")]
    pub seeds: String,
    /// Worker threads (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Write one scenario file per failing seed into this directory.
    #[arg(long)]
    pub save: Option<PathBuf>,
    /// Run every seed twice and compare trace hashes.
    #[arg(long)]
    pub check_determinism: bool,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    #[arg(long)]
    pub seed: u64,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print the event trace, one event per line.
    #[arg(long)]
    pub trace: bool,
    /// Print the fault schedule drawn from the seed.
    #[arg(long)]
    pub faults: bool,
    /// Run this fault schedule (JSON, as written by --save-faults) instead of the seed's.
    #[arg(long)]
    pub fault_file: Option<PathBuf>,
    /// Write the fault schedule of this run as JSON.
    #[arg(long)]
    pub save_faults: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario file (TOML).
    pub file: PathBuf,
    #[arg(long)]
    pub trace: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct VariantsArgs {
    /// Run each unsafe variant until its first violation (the mutation score).
    #[arg(long)]
    pub score: bool,
    /// Most seeds tried per variant with --score.
    #[arg(long, default_value_t = 1000)]
    pub seeds: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Seeds of the default hunt to time.
    #[arg(long, default_value_t = 20)]
    pub seeds: u64,
    #[arg(long)]
    pub json: bool,
}

/// `println!` for the command line's output: a closed pipe
/// (`fencesim replay --trace | head`) ends the program quietly instead of
/// panicking.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::write_line(format_args!($($arg)*))
    };
}

/// Writes one line to stdout; exits quietly when stdout is gone.
pub fn write_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if writeln!(std::io::stdout().lock(), "{line}").is_err() {
        std::process::exit(0);
    }
}

/// An input error: one line for stderr, exit code 2.
#[derive(Debug)]
pub struct InputError(pub String);

impl From<String> for InputError {
    fn from(message: String) -> InputError {
        InputError(message)
    }
}

pub fn main_with(args: Vec<String>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => return clap_error(error),
    };
    match execute(cli) {
        Ok(code) => code,
        Err(InputError(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// clap's help and version go to stdout with code 0; its errors become one line and code 2.
fn clap_error(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            ExitCode::SUCCESS
        }
        _ => {
            let rendered = error.render().to_string();
            let line = rendered.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid arguments");
            eprintln!("{}", line.trim());
            ExitCode::from(2)
        }
    }
}

fn execute(cli: Cli) -> Result<ExitCode, InputError> {
    match cli.command {
        Command::Hunt(args) => hunt::hunt(&args),
        Command::Replay(args) => replay(&args),
        Command::Run(args) => run_file(&args),
        Command::Variants(args) => hunt::variants(&args),
        Command::Bench(args) => crate::bench::bench(&args),
    }
}

/// Builds the model from `--model` and `--variant`.
pub fn load_model(args: &ModelArgs) -> Result<Model, InputError> {
    let variant: Variant = args.variant.parse()?;
    let mut model = match &args.model {
        Some(path) => {
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| InputError(format!("cannot read model file {origin}: {e}")))?;
            Model::from_toml(&text, &origin)?
        }
        None => crate::hunt::declared_model(variant),
    };
    model.variant = variant;
    Ok(model)
}

/// Parses `A..B` (half-open, non-empty).
pub fn parse_seeds(text: &str) -> Result<Range<u64>, InputError> {
    let malformed = || InputError(format!("--seeds must be a range A..B of seeds, got `{text}`"));
    let (a, b) = text.split_once("..").ok_or_else(malformed)?;
    let start: u64 = a.trim().parse().map_err(|_| malformed())?;
    let end: u64 = b.trim().parse().map_err(|_| malformed())?;
    if start >= end {
        return Err(InputError(format!("--seeds {text} is empty: A..B needs A < B")));
    }
    Ok(start..end)
}

/// The one line that replays a failure.
pub fn replay_line(seed: u64, model_args: &ModelArgs) -> String {
    let mut line = format!("fencesim replay --seed {seed} --variant {}", model_args.variant);
    if let Some(path) = &model_args.model {
        line.push_str(&format!(" --model {}", path.display()));
    }
    line
}

fn replay(args: &ReplayArgs) -> Result<ExitCode, InputError> {
    let model = load_model(&args.model)?;
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
    if args.json {
        crate::outln!("{}", serde_json::to_string(&outcome).expect("an outcome always serializes"));
    } else {
        if args.faults {
            crate::outln!("{}", faults::describe(&outcome.plan).trim_end());
        }
        print_outcome(&outcome, args.trace);
    }
    Ok(exit_for(outcome.ok))
}

fn run_file(args: &RunArgs) -> Result<ExitCode, InputError> {
    let origin = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| InputError(format!("cannot read scenario file {origin}: {e}")))?;
    let scenario = Scenario::parse(&text, &origin)?;
    let outcome = run_seed(scenario.file.seed, &scenario.model);
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
        for event in outcome.history.events() {
            crate::outln!("{}", trace::line(event));
        }
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

pub fn exit_for(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
