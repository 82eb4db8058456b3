//! The command line's arguments (CLI.md) and its input errors: what every
//! command below reads, and the one-line errors it answers bad input with.

use crate::model::Model;
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
    /// Shrink a failing seed or scenario to the smallest run that still fails.
    Shrink(ShrinkArgs),
    /// Fold the seed records of many hunts (shards) into one summary.
    Merge(MergeArgs),
    /// Sweep model keys over a grid of cells: rates, exposures and availability per cell.
    Explore(ExploreArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Protocol variant (see `fencesim variants`).
    #[arg(long, default_value = "default")]
    pub variant: String,
    /// Model file (TOML); missing keys take the standard model's values.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Swarm testing: each seed draws which fault families are on, how hard,
    /// the cluster size and batching, within the model's limits (model key `swarm`).
    #[arg(long)]
    pub swarm: bool,
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
    /// Shrink every failure found (with --save, the shrunk scenarios are written).
    #[arg(long)]
    pub shrink: bool,
    /// With --shrink: wall seconds for all shrinks together (each gets at most 50).
    #[arg(long, default_value_t = 300)]
    pub shrink_budget_s: u64,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Run only this shard's seeds: `I/N` (seed s when s mod N = I), or
    /// `auto/N` with I from JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID.
    #[arg(long)]
    pub shard: Option<String>,
    /// Append one JSON line per seed to this file; seeds already in it are skipped (resume).
    #[arg(long)]
    pub records: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ExploreArgs {
    /// Sweep file (TOML): `[sweep]` seeds and model, `[model]` keys, `[axes]`.
    pub file: PathBuf,
    /// Worker threads (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Write one CSV row per cell.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Print one JSON object on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write one SVG chart per figure into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Append one JSON line per seed to this file; seeds already in it are skipped (resume).
    #[arg(long, value_name = "FILE.jsonl")]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Record files or directories of them (`*.jsonl`); `-` reads stdin.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Merge records of different models, versions or formats.
    #[arg(long)]
    pub allow_mixed: bool,
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
    /// Write a picture of the run: `FILE.html` (zoomable page) or `FILE.svg`.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ShrinkArgs {
    /// Scenario file to shrink (instead of --seed).
    #[arg(conflicts_with_all = ["seed", "fault_file"])]
    pub file: Option<PathBuf>,
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Start from this fault schedule (JSON, as `replay --save-faults` writes) instead of the seed's.
    #[arg(long)]
    pub fault_file: Option<PathBuf>,
    /// The property that must stay violated (default: the first violation's).
    #[arg(long)]
    pub property: Option<String>,
    /// Write the shrunk scenario file here (default: print it).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write a picture of the shrunk run: `FILE.html` or `FILE.svg`.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Other seeds the shrunk plan is tried under (robustness).
    #[arg(long, default_value_t = 20)]
    pub robustness_seeds: u64,
    /// Wall seconds for the reduction (robustness runs come after).
    #[arg(long, default_value_t = 50)]
    pub budget_s: u64,
    /// Probe seeds: a minimal case failing in fewer than 3 in 4 of them gets
    /// back time and workload until it does, within 400 trace lines (0: never).
    #[arg(long, default_value_t = 8)]
    pub probes: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario file (TOML).
    pub file: PathBuf,
    #[arg(long)]
    pub trace: bool,
    /// Write a picture of the run: `FILE.html` (zoomable page) or `FILE.svg`.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
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
    /// With --score: swarm testing on the standard model instead of each variant's declared model.
    #[arg(long)]
    pub swarm: bool,
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

/// An input error: one line for stderr, exit code 2.
#[derive(Debug)]
pub struct InputError(pub String);

impl From<String> for InputError {
    fn from(message: String) -> InputError {
        InputError(message)
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
        // Swarm draws the cluster size and batching a variant would declare.
        None if args.swarm => Model::default(),
        None => Model::declared(variant),
    };
    model.variant = variant;
    model.swarm |= args.swarm;
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
    if model_args.swarm {
        line.push_str(" --swarm");
    }
    line
}

pub fn exit_for(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
