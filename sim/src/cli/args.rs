//! The command line's arguments (CLI.md) and its input errors: what every
//! command below reads, and the one-line errors it answers bad input with.

use crate::faults::swarm::Bias;
use crate::model::{parse_variant, Model};
use clap::{Args, Parser, Subcommand};
use fencelock::Variant;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "fencesim", version = crate::cli::records::LONG_VERSION, about = "Deterministic simulation testbed for a fenced distributed lock service")]
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
    /// Run scenario files (or directories of them); each `expect` decides the exit code.
    Run(RunArgs),
    /// List the protocol variants (and score the checker against them).
    Variants(VariantsArgs),
    /// Measure simulation speed.
    Bench(BenchArgs),
    /// Shrink a failing seed or scenario to the smallest run that still fails.
    Shrink(ShrinkArgs),
    /// Fold the seed records of many hunts (shards) into one summary.
    Merge(MergeArgs),
    /// Print the standard model as a commented TOML file: every key, its default, range and meaning.
    Model,
    /// Sweep model keys over a grid of cells: rates, exposures and availability per cell.
    Explore(ExploreArgs),
    /// Run the lock service as real processes under the seed's fault schedule, judged by the same checker.
    Real(RealArgs),
}

#[derive(Args, Debug)]
pub struct RealArgs {
    /// The seed that draws the fault schedule and the workers' draws (not the OS's scheduling).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Length of the safety phase (faults on), real seconds (default 30, or
    /// the scenario's); the liveness phase (model key `liveness_ms`) follows, healed.
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Take the seed, variant, model and fault schedule from this scenario
    /// file (as `run` does; `seeds/` holds them).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["seed", "variant", "model", "settings"])]
    pub scenario: Option<PathBuf>,
    /// Servers (default: the model's `nodes`).
    #[arg(long)]
    pub nodes: Option<u8>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// The protected resource: `postgres://…`, or `sqlite:PATH` (default: SQLite in the run's directory).
    #[arg(long, value_name = "URL")]
    pub resource: Option<String>,
    /// The run's directory: cluster file, data, histories and logs (default: a new one under the temp directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The `fencelock-node` executable (default: the one next to this program, built by
    /// `cargo build --release -p fencelock-node`).
    #[arg(long, value_name = "PATH")]
    pub node_bin: Option<PathBuf>,
    /// Print the event trace, one event per line.
    #[arg(long)]
    pub trace: bool,
    #[command(flatten)]
    pub view: TraceArgs,
    /// Write a picture of the run: `FILE.html` (zoomable page) or `FILE.svg`.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Append the run's record (one JSON line, as `hunt --records` writes) to FILE.
    #[arg(long, value_name = "FILE")]
    pub records: Option<PathBuf>,
    /// Print one JSON object on stdout: the outcome, the faults played and skipped.
    #[arg(long)]
    pub json: bool,
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
    /// Set one model key after the model file, as in a model file (`--set nodes=3`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
}

#[derive(Args, Debug)]
pub struct HuntArgs {
    /// Seeds: `N` (0..N) or the half-open range `A..B`.
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
    /// When stderr is not a terminal (a log file, a pod): a progress line on
    /// stderr every this many wall seconds (0: none).
    #[arg(long, default_value_t = 60, value_name = "S")]
    pub progress_s: u64,
    /// After the summary, the table of coverage probes: seeds that reached
    /// each, never-reached first, and why each matters.
    #[arg(long)]
    pub coverage: bool,
    /// With --swarm: steer the draws toward what is rarely reached. Seeds run
    /// in rounds of 25; each round weights swarm's coins toward the draws
    /// whose seeds reached the rarest coverage probes so far. Reproducible
    /// from the range, shard and model; each failure's replay line carries its weights.
    #[arg(long)]
    pub steer: bool,
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
    /// Print one JSON object on stdout instead of the text.
    #[arg(long)]
    pub json: bool,
    /// After the summary, the table of coverage probes (as `hunt --coverage`).
    #[arg(long)]
    pub coverage: bool,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The seed to run (as a hunt's replay line gives it); it draws the
    /// fault schedule, the workload and the timing.
    #[arg(long)]
    pub seed: u64,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print the event trace, one event per line.
    #[arg(long)]
    pub trace: bool,
    #[command(flatten)]
    pub view: TraceArgs,
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
    /// Print one JSON object on stdout: the outcome, with the trace (--trace)
    /// and the fault schedule (--faults) when asked for.
    #[arg(long)]
    pub json: bool,
}

/// What a trace shows (`replay`, `run`); each of these implies `--trace`.
#[derive(Args, Debug, Clone, Default)]
pub struct TraceArgs {
    /// Keep the lines that involve this actor (`n0`, `c1`, `db`, `sim`); repeatable.
    #[arg(long = "actor", value_name = "NAME")]
    pub actors: Vec<String>,
    /// Keep the lines about this lock key (`invoice/B-1042` or `B-1042`) and
    /// the key-less lines of the actors that acted on it.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// Keep the lines from this simulated millisecond on.
    #[arg(long, value_name = "MS")]
    pub from: Option<u64>,
    /// Keep the lines up to this simulated millisecond.
    #[arg(long, value_name = "MS")]
    pub to: Option<u64>,
    /// `tracing` filter directives (EnvFilter syntax, e.g. `fencelock::raft=debug`)
    /// added to the trace's default `fencesim=info`; else the FENCESIM_LOG variable.
    #[arg(long, value_name = "FILTER")]
    pub log: Option<String>,
    /// Show the protocol's decisions (why a vote was refused, a grant deferred,
    /// an expire proposed, an append rejected) among the trace's lines.
    #[arg(long)]
    pub why: bool,
}

#[derive(Args, Debug)]
pub struct ShrinkArgs {
    /// Scenario file to shrink (instead of --seed).
    #[arg(conflicts_with_all = ["seed", "fault_file"])]
    pub file: Option<PathBuf>,
    /// The failing seed to shrink, with --variant, --model and --set as the
    /// hunt that found it (instead of FILE).
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
    /// Print one JSON object on stdout instead of the report: before and
    /// after, the faults still needed, robustness.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Scenario files (TOML), or directories of them (`*.toml`).
    #[arg(required = true, value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    /// Print the event trace, one event per line.
    #[arg(long)]
    pub trace: bool,
    #[command(flatten)]
    pub view: TraceArgs,
    /// Print each scenario's postmortem after its verdict line.
    #[arg(long)]
    pub postmortem: bool,
    /// Write a picture of the run: `FILE.html` (zoomable page) or `FILE.svg` (one scenario only).
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Print one JSON object per scenario on stdout, one per line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct VariantsArgs {
    /// Run each unsafe variant until its first violation (the mutation score).
    #[arg(long)]
    pub score: bool,
    /// Seeds tried per variant with --score: `N` (0..N) or `A..B`.
    #[arg(long, default_value = "1000")]
    pub seeds: String,
    /// With --score: swarm testing on the standard model instead of each variant's declared model.
    #[arg(long)]
    pub swarm: bool,
    /// With --score --swarm: steered swarm, as `hunt --steer` runs it.
    #[arg(long)]
    pub steer: bool,
    /// Print JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Seeds of the default hunt to time: `N` (0..N) or `A..B`.
    #[arg(long, default_value = "20")]
    pub seeds: String,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Internal: one long run of this many simulated minutes in this
    /// process, its peak memory, wall time and messages as JSON (bench
    /// starts itself again with it for each long run).
    #[arg(long, hide = true, conflicts_with_all = ["seeds", "json"])]
    pub long_run_minutes: Option<u64>,
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
    let variant: Variant = parse_variant(&args.variant)?;
    let mut model = match &args.model {
        Some(path) => {
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| InputError(format!("cannot read model file {origin}: {e}")))?;
            if looks_like_a_scenario(&text) {
                return Err(InputError(format!(
                    "{origin}: this looks like a scenario file (it has `seed` and `expect`), not a model: `{} run {}`",
                    invocation(),
                    shell_path(path)
                )));
            }
            Model::from_toml(&text, &origin)?
        }
        // Swarm draws the cluster size and batching a variant would declare.
        None if args.swarm => Model::default(),
        None => Model::declared(variant),
    };
    model.variant = variant;
    model.swarm |= args.swarm;
    Ok(model.with_settings(&args.settings)?)
}

/// A scenario file (`run FILE`) given as a model: it sets `seed` and
/// `expect`, which no model has.
fn looks_like_a_scenario(text: &str) -> bool {
    text.parse::<toml::Table>().is_ok_and(|table| table.contains_key("seed") && table.contains_key("expect"))
}

/// Parses `--seeds`: `N` is `0..N`, `A..B` the half-open range; never empty.
/// Seed `u64::MAX` is beyond every half-open range (`replay --seed` runs it).
pub fn parse_seeds(text: &str) -> Result<Range<u64>, InputError> {
    let malformed = || InputError(format!("--seeds must be a count N (seeds 0..N) or a range A..B, got `{text}`"));
    let (start, end) = match text.split_once("..") {
        Some((a, b)) => (a.trim().parse().map_err(|_| malformed())?, b.trim().parse().map_err(|_| malformed())?),
        None => (0, text.trim().parse().map_err(|_| malformed())?),
    };
    if start >= end {
        return Err(InputError(format!("--seeds {text} is empty: N needs N >= 1, A..B needs A < B")));
    }
    Ok(start..end)
}

/// `--steer` weights swarm's coins: without `--swarm` it is an input error.
pub fn check_steer(steer: bool, swarm: bool) -> Result<(), InputError> {
    if steer && !swarm {
        return Err(InputError("--steer steers swarm's draws: add --swarm".into()));
    }
    Ok(())
}

/// The one line that replays a failure, as it runs when pasted.
pub fn replay_line(seed: u64, model_args: &ModelArgs) -> String {
    replay_line_drawn(seed, model_args, None)
}

/// [`replay_line`] of a seed whose swarm coins were weighted (a steered
/// hunt's): the weights follow as `--set swarm_bias=...`, so it replays alone.
pub fn replay_line_drawn(seed: u64, model_args: &ModelArgs, swarm_bias: Option<&Bias>) -> String {
    let mut line = replay_line_of(seed, model_args);
    if let Some(bias) = swarm_bias {
        line.push_str(&format!(" --set swarm_bias={bias}"));
    }
    line
}

fn replay_line_of(seed: u64, model_args: &ModelArgs) -> String {
    let mut line = format!("{} replay --seed {seed} --variant {}", invocation(), model_args.variant);
    if let Some(path) = &model_args.model {
        line.push_str(&format!(" --model {}", shell_path(path)));
    }
    if model_args.swarm {
        line.push_str(" --swarm");
    }
    for setting in &model_args.settings {
        let (name, value) = setting.split_once('=').unwrap_or((setting, ""));
        line.push_str(&format!(" --set {}={}", name.trim(), value.trim()));
    }
    line
}

/// A file a printed line names, as it works pasted from any directory: its
/// absolute path (relative to where this command ran), quoted for a POSIX
/// shell when it holds anything but plain path characters.
pub fn shell_path(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let text = absolute.display().to_string();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:=@%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// `wrote FILE — replay: <invocation> run FILE --trace`: the line that
/// tells where a scenario file went and how to run it.
pub fn wrote_scenario_line(path: &Path) -> String {
    let file = shell_path(path);
    format!("wrote {file} — replay: {} run {file} --trace", invocation())
}

/// How a line to paste runs this program: `fencesim` when that name on the
/// PATH is this very file (`cargo install --path sim`); else, for a build in
/// a Cargo target directory, `cargo run` of the same profile, which works
/// anywhere in the clone; else this file's path.
pub fn invocation() -> &'static str {
    static INVOCATION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    INVOCATION.get_or_init(|| {
        let Some(exe) = std::env::current_exe().ok().and_then(|p| p.canonicalize().ok()) else {
            return "fencesim".to_string();
        };
        let on_path = std::env::var_os("PATH").is_some_and(|paths| {
            std::env::split_paths(&paths).any(|dir| dir.join("fencesim").canonicalize().is_ok_and(|p| p == exe))
        });
        if on_path {
            return "fencesim".to_string();
        }
        let name =
            |p: Option<&std::path::Path>| p.and_then(|p| p.file_name()).and_then(|n| n.to_str()).map(str::to_owned);
        let profile = name(exe.parent());
        let in_target = name(exe.parent().and_then(|p| p.parent())).as_deref() == Some("target");
        match profile.as_deref() {
            Some("release") if in_target => "cargo run --release -p fencesim --".to_string(),
            Some("debug") if in_target => "cargo run -p fencesim --".to_string(),
            _ => exe.display().to_string(),
        }
    })
}

pub fn exit_for(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_seeds;

    #[test]
    fn seeds_are_a_count_or_a_range_up_to_the_last_seed() {
        assert_eq!(parse_seeds("5").unwrap(), 0..5);
        assert_eq!(parse_seeds("3..7").unwrap(), 3..7);
        assert_eq!(parse_seeds("18446744073709551615").unwrap(), 0..u64::MAX);
        let last = parse_seeds("18446744073709551614..18446744073709551615").unwrap();
        assert_eq!(last.collect::<Vec<_>>(), vec![u64::MAX - 1], "the last range holds one seed and ends");
        for empty in ["0", "4..4", "5..2"] {
            assert!(parse_seeds(empty).unwrap_err().0.contains("is empty"), "{empty}");
        }
        for bad in ["", "x", "1..", "..3", "-1..2", "18446744073709551616"] {
            assert!(parse_seeds(bad).is_err(), "{bad}");
        }
    }
}
