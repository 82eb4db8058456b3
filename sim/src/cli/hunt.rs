//! `hunt`: many seeds of one model, one replay line per failure.
//!
//! A hunt can run all night: each seed's result is folded into the summary
//! (and its record written) as it finishes and then dropped, so memory stays
//! flat whatever the seed count. What it keeps beyond counts is bounded: the
//! first `EXAMPLES_JSON_MAX` violations and exposures for `--json` (the rest
//! counted), the first `SHRINK_HELD_MAX` failures for `--shrink`, and the
//! seeds resumed from `--records` as a compressed bitmap; a failure is printed as soon as every seed
//! before it is done (seed order). Ctrl-C ends it after the seeds in flight
//! with the summary so far (exit 130); a closed stdout ends it at the next
//! line it prints, with the exit code of what it found. `--shard` and
//! `--records` split a campaign across machines and resume a killed shard.

use crate::checker::Exposure;
use crate::cli::args::{
    check_steer, exit_for, load_model, parse_seeds, replay_line, replay_line_drawn, wrote_scenario_line, HuntArgs,
    InputError, ModelArgs,
};
use crate::cli::coverage::stdout_has_color;
use crate::cli::output::{try_write_line, JsonText};
use crate::cli::records::{Origin, Place, Record, RecordFile};
use crate::cli::shard::{parse_shard, Shard};
use crate::cli::shrink::{saved_path, shrink_failures};
use crate::cli::summary::{Examples, SeedFacts, Summary};
use crate::faults::steer::{Steer, ROUND_SEEDS};
use crate::faults::swarm::Bias;
use crate::plural;
use crate::run::sweep::{default_jobs, quiet_panics, sweep_each, sweep_steered, Flow, SeedResult, Sweep};
use crate::signals::{self, INTERRUPTED};
use fencelock::{ProbeSet, Property};
use indicatif::{ProgressBar, ProgressState, ProgressStyle};
use roaring::RoaringTreemap;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write as _};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Violations and lease exposures `hunt --json` lists one by one, each; the
/// summary counts them all, and `violations_left_out` and
/// `exposures_left_out` count those not listed.
pub const EXAMPLES_JSON_MAX: usize = 1_000;

/// Failures `--shrink` holds until the hunt ends (each with its scenario
/// text); later ones are told as found, unshrunk. The shrink budget runs
/// out long before this many are shrunk.
const SHRINK_HELD_MAX: usize = 100;

/// With stderr not a terminal (a night run to a file, a pod's log), where a
/// bar would print nothing until the end: one line every `every` instead.
struct Heartbeat {
    every: Duration,
    started: Instant,
    last: Instant,
    /// Seeds this process runs (resumed ones excluded).
    todo: u64,
}

impl Heartbeat {
    fn new(every_s: u64, todo: u64) -> Option<Heartbeat> {
        if every_s == 0 || std::io::stderr().is_terminal() {
            return None;
        }
        let now = Instant::now();
        Some(Heartbeat { every: Duration::from_secs(every_s), started: now, last: now, todo })
    }

    /// After each seed: a line when `every` has passed since the last one.
    fn beat(&mut self, ran: u64, failing: u64) {
        if self.last.elapsed() < self.every {
            return;
        }
        self.last = Instant::now();
        let rate = ran as f64 / self.started.elapsed().as_secs_f64().max(0.001);
        let left_s = (self.todo.saturating_sub(ran) as f64 / rate.max(1e-9)).round() as u64;
        let line = format!(
            "hunt: {ran} of {} run, {failing} failing, {rate:.1} seeds/s, about {} left",
            plural(self.todo, "seed"),
            clock_duration(left_s)
        );
        // A closed stderr is no reason to stop the hunt.
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

/// `1h 02m 03s`, `2m 03s`, `3s`.
fn clock_duration(s: u64) -> String {
    match (s / 3_600, s / 60 % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, min, sec) => format!("{min}m {sec:02}s"),
        (h, min, sec) => format!("{h}h {min:02}m {sec:02}s"),
    }
}

fn progress_bar(len: u64) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(len);
    bar.set_style(progress_style(len));
    Some(bar)
}

/// The bar and its text fit in 80 columns: the text takes what the seed
/// count needs (`pos/len seeds`, the rate, `N failures`, the ETA) and the
/// bar the rest, so it never wraps on a standard terminal.
fn progress_style(len: u64) -> ProgressStyle {
    ProgressStyle::with_template(&progress_template(len)).expect("a valid progress template").with_key(
        "rate",
        |state: &ProgressState, out: &mut dyn std::fmt::Write| {
            let rate = state.per_sec();
            let _ = if rate < 10.0 { write!(out, "{rate:.1}/s") } else { write!(out, "{rate:.0}/s") };
        },
    )
}

/// The widest text beside the bar, with `len`'s digits in both counts.
const PROGRESS_TEXT_WIDEST: &str = "/ seeds  99999/s  99999 failures  eta 59m";

fn progress_template(len: u64) -> String {
    let text = 2 * len.to_string().len() + PROGRESS_TEXT_WIDEST.len();
    let bar = COLUMNS.saturating_sub(text + 2).clamp(10, 40);
    format!("{{bar:{bar}}} {{pos}}/{{len}} seeds  {{rate}}  {{msg}}  eta {{eta}}")
}

/// The width the progress line stays within.
const COLUMNS: usize = 80;

#[derive(Serialize)]
struct HuntJson<'a> {
    variant: String,
    /// The first violations (up to `EXAMPLES_JSON_MAX`), in seed order.
    violations: Vec<HuntViolationJson>,
    /// Violations past the first `EXAMPLES_JSON_MAX` (counted in `by_property`).
    violations_left_out: u64,
    /// The first lease exposures (up to `EXAMPLES_JSON_MAX`), in seed order.
    exposures: ExposuresJson<'a>,
    /// Lease exposures of the seeds run past those listed.
    exposures_left_out: u64,
    /// `seeds_run`, `sim_ms` and `messages` (as always), and the counts per
    /// property and of lease exposures.
    #[serde(flatten)]
    summary: Summary,
    wall_ms: u64,
    /// With --shrink: one `shrink --json` object per failure shrunk in time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shrunk: Vec<serde_json::Value>,
    interrupted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<String>,
    /// Seeds found in the records file and not run again (counted in the summary).
    seeds_resumed: u64,
    /// With --steer: the rounds run and the weights the next round would draw with.
    #[serde(skip_serializing_if = "Option::is_none")]
    steer: Option<SteerJson>,
}

#[derive(Serialize)]
struct SteerJson {
    rounds: u64,
    round_seeds: u64,
    swarm_bias: String,
}

/// One lease exposure of one seed, explained (`replay` shows it in the trace).
#[derive(Serialize)]
struct HuntExposureJson<'a> {
    seed: u64,
    detail: String,
    #[serde(flatten)]
    exposure: &'a Exposure,
    replay: String,
}

/// A lease exposure kept for `--json`. Its sentence and replay line are
/// written as the JSON is, one example at a time: a thousand examples held
/// as text cost about 0.9 MB, most of a long hunt's growth.
struct KeptExposure {
    seed: u64,
    exposure: Exposure,
    /// A steered seed's weights, for its replay line.
    drawn: Option<Bias>,
}

/// The kept exposures as `--json` lists them.
struct ExposuresJson<'a> {
    kept: &'a [KeptExposure],
    model: &'a ModelArgs,
}

impl Serialize for ExposuresJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.kept.iter().map(|kept| HuntExposureJson {
            seed: kept.seed,
            detail: kept.exposure.to_string(),
            exposure: &kept.exposure,
            replay: format!("{} --trace", replay_line_drawn(kept.seed, self.model, kept.drawn.as_ref())),
        }))
    }
}

#[derive(Serialize)]
struct HuntViolationJson {
    seed: u64,
    property: Property,
    detail: String,
    replay: String,
}

/// What a hunt keeps while seeds stream by: counts, and only what its
/// output still needs (the JSON violations, the failures to shrink).
struct Hunt<'a> {
    args: &'a HuntArgs,
    origin: Origin,
    variant: String,
    summary: Summary,
    records: Option<RecordFile>,
    bar: Option<ProgressBar>,
    violations_json: Examples<HuntViolationJson>,
    exposures_json: Examples<KeptExposure>,
    /// The first seed with a lease exposure and its replay line: the summary points at it.
    exposure_seed: Option<(u64, String)>,
    /// The first seed with a key `linearizable` could not decide, and its replay line.
    undecided_seed: Option<(u64, String)>,
    /// With --steer: the probes of each seed resumed from the records file,
    /// folded into the steering in their round (16 bytes and a map node a seed).
    resumed_probes: Option<BTreeMap<u64, ProbeSet>>,
    /// With --shrink: failures wait for the shrinks (and print after them).
    to_shrink: Vec<SeedResult>,
    seeds_resumed: u64,
    /// Seeds run by this process, and their simulated time: the speed counts these alone.
    ran: u64,
    ran_sim_ms: u64,
    heartbeat: Option<Heartbeat>,
    /// `I/N` with --shard, written into each record so `merge` can tell a missing shard.
    shard_text: Option<String>,
    /// Stdout was closed: nothing more is printed.
    stdout_closed: bool,
    /// A write that failed (records file, --save): the hunt stops and reports it.
    error: Option<String>,
}

impl Hunt<'_> {
    fn say(&mut self, line: std::fmt::Arguments<'_>) {
        if self.stdout_closed {
            return;
        }
        let written = match &self.bar {
            Some(bar) => bar.suspend(|| try_write_line(line)),
            None => try_write_line(line),
        };
        self.stdout_closed = !written;
    }

    /// A seed already in the records file: counted, and its failure told.
    fn resumed(&mut self, place: &Place, record: &Record) {
        self.seeds_resumed += 1;
        let facts = record.facts();
        if let Some(resumed) = &mut self.resumed_probes {
            resumed.insert(record.seed, facts.probes.unwrap_or_default());
        }
        self.summary.add(facts);
        let args = self.args;
        let replay = || record.replay.clone().unwrap_or_else(|| replay_line(record.seed, &args.model));
        if record.lease_exposures > 0 && self.exposure_seed.is_none() {
            self.exposure_seed = Some((record.seed, replay()));
        }
        if record.properties.is_empty() {
            return;
        }
        let replay = replay();
        if self.args.json {
            let json = record.properties.iter().map(|&property| HuntViolationJson {
                seed: record.seed,
                property,
                detail: format!("recorded at {place}"),
                replay: replay.clone(),
            });
            self.violations_json.extend(json);
            return;
        }
        let properties: Vec<&str> = record.properties.iter().map(|p| p.id()).collect();
        self.say(format_args!("FAIL seed {}: {} (recorded at {place})", record.seed, properties.join(", ")));
        self.say(format_args!("  replay: {replay}"));
    }

    /// The line that replays a seed this hunt ran: a steered seed's carries
    /// the weights its round drew with (any other `swarm_bias` came from the
    /// hunt's own `--set` or model, which the line already names).
    fn replay_of(&self, result: &SeedResult) -> String {
        replay_line_drawn(result.seed, &self.args.model, self.drawn(result).as_ref())
    }

    /// The weights a steered seed's round drew with (`None` unless steered).
    fn drawn(&self, result: &SeedResult) -> Option<Bias> {
        result.swarm_bias.filter(|_| self.args.steer)
    }

    fn finished(&mut self, result: SeedResult) -> Flow {
        let replay = self.replay_of(&result);
        if let Some(records) = &mut self.records {
            let mut record = Record::of(&result, &self.origin, &self.variant, replay.clone());
            record.shard.clone_from(&self.shard_text);
            if let Err(error) = records.append(&record) {
                self.error = Some(error);
                return Flow::Stop;
            }
        }
        let properties: Vec<Property> = result.violations.iter().map(|v| v.property).collect();
        let facts = SeedFacts {
            properties: &properties,
            sim_ms: result.sim_ms,
            messages: result.messages,
            lease_exposures: result.lease_exposures,
            availability: Some(result.figures.phases),
            probes: Some(result.probes),
        };
        self.summary.add(facts);
        self.ran += 1;
        self.ran_sim_ms += result.sim_ms;
        if let Some(heartbeat) = &mut self.heartbeat {
            heartbeat.beat(self.ran, self.summary.failing_seeds);
        }
        self.exposures(&result, &replay);
        self.summary.linearizable.add(&result.linearizable);
        if result.linearizable.unknown > 0 {
            self.undecided_seed.get_or_insert_with(|| (result.seed, replay.clone()));
        }
        if let Some(bar) = &self.bar {
            bar.set_message(plural(self.summary.failing_seeds, "failure"));
            bar.inc(1);
        }
        if result.violations.is_empty() {
            return Flow::Continue;
        }
        if let Err(error) = self.save(&result, None) {
            self.error = Some(error);
            return Flow::Stop;
        }
        if self.args.json {
            let json = result.violations.iter().map(|v| HuntViolationJson {
                seed: result.seed,
                property: v.property,
                detail: v.detail.clone(),
                replay: replay.clone(),
            });
            self.violations_json.extend(json);
        }
        if self.args.shrink && self.to_shrink.len() < SHRINK_HELD_MAX {
            self.to_shrink.push(result);
        } else if !self.args.json {
            self.tell(&result, None);
        }
        if self.stdout_closed {
            Flow::Stop
        } else {
            Flow::Continue
        }
    }

    /// Keeps what the summary and `--json` say of the seed's lease exposures.
    fn exposures(&mut self, result: &SeedResult, replay: &str) {
        if result.exposures.is_empty() {
            return;
        }
        self.exposure_seed.get_or_insert_with(|| (result.seed, replay.to_string()));
        if !self.args.json {
            return;
        }
        let drawn = self.drawn(result);
        let kept = result.exposures.iter().map(|exposure| KeptExposure {
            seed: result.seed,
            exposure: exposure.clone(),
            drawn,
        });
        self.exposures_json.extend(kept);
    }

    /// With --save: the seed's scenario file (the shrunk one once shrunk).
    fn save(&self, failure: &SeedResult, shrunk: Option<&str>) -> Result<(), String> {
        let Some(dir) = &self.args.save else { return Ok(()) };
        let path = saved_path(dir, failure.seed, failure.violations[0].property.id());
        let recorded = failure.scenario.as_deref().expect("a failure has a scenario");
        std::fs::write(&path, shrunk.unwrap_or(recorded)).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    fn tell(&mut self, failure: &SeedResult, shrunk_line: Option<&str>) {
        // One line per violation: a detail over many lines (the linearizable
        // window's table) would flood a hunt; `replay` prints it whole.
        for violation in &failure.violations {
            self.say(format_args!("FAIL seed {}: {}", failure.seed, violation.one_line()));
        }
        let replay = self.replay_of(failure);
        self.say(format_args!("  replay: {replay}"));
        if let Some(line) = shrunk_line {
            self.say(format_args!("  shrunk: {line}"));
        }
        if let Some(dir) = &self.args.save {
            let path = saved_path(dir, failure.seed, failure.violations[0].property.id());
            self.say(format_args!("  {}", wrote_scenario_line(&path)));
        }
    }
}

pub fn hunt(args: &HuntArgs) -> Result<ExitCode, InputError> {
    let model = load_model(&args.model)?;
    let seeds = parse_seeds(&args.seeds)?;
    let jobs = args.jobs.unwrap_or_else(default_jobs);
    if jobs == 0 {
        return Err(InputError("--jobs must be at least 1".into()));
    }
    let shard = match &args.shard {
        Some(text) => parse_shard(text, |name| std::env::var(name).ok())?,
        None => Shard::WHOLE,
    };
    check_steer(args.steer, model.swarm)?;
    if args.steer && model.swarm_bias.is_some() {
        return Err(InputError("--steer sets swarm_bias for each round: leave it out of the model".into()));
    }
    if let Some(dir) = &args.save {
        std::fs::create_dir_all(dir).map_err(|e| InputError(format!("cannot create {}: {e}", dir.display())))?;
    }
    quiet_panics();
    let started = Instant::now();
    let mut hunt = Hunt {
        args,
        origin: if args.steer { Origin::steered(&model) } else { Origin::here(&model) },
        variant: model.variant.name().to_string(),
        summary: Summary::default(),
        records: None,
        bar: None,
        violations_json: Examples::new(EXAMPLES_JSON_MAX),
        exposures_json: Examples::new(EXAMPLES_JSON_MAX),
        exposure_seed: None,
        undecided_seed: None,
        resumed_probes: args.steer.then(BTreeMap::new),
        to_shrink: Vec::new(),
        seeds_resumed: 0,
        ran: 0,
        ran_sim_ms: 0,
        heartbeat: None,
        shard_text: args.shard.as_ref().map(|_| format!("{}/{}", shard.index, shard.count)),
        stdout_closed: false,
        error: None,
    };
    // Seeds found in the records file: a compressed bitmap, at most a bit
    // per seed of the range (a few KB for a million), not a tree node each.
    let mut done = RoaringTreemap::new();
    if let Some(path) = &args.records {
        let records = RecordFile::open(path, |place, record| {
            if record.origin() != hunt.origin || record.variant != hunt.variant {
                return Err(InputError(format!(
                    "{place}: a record of {} (variant {}); this hunt writes {} (variant {}): use another records file",
                    record.origin(),
                    record.variant,
                    hunt.origin,
                    hunt.variant
                )));
            }
            // Seeds of another range or shard stay in the file, untouched.
            if seeds.contains(&record.seed) && shard.contains(record.seed) && done.insert(record.seed) {
                hunt.resumed(&place, &record);
            }
            Ok(())
        })?;
        hunt.records = Some(records);
    }
    signals::catch(true);
    let todo = shard.count_in(&seeds) - done.len();
    hunt.bar = if args.json { None } else { progress_bar(todo) };
    hunt.heartbeat = Heartbeat::new(args.progress_s, todo);
    let how = Sweep { jobs, twice: args.check_determinism, stop: &INTERRUPTED };
    let mut steer = Steer::default();
    if args.steer {
        // Rounds count every seed of the shard, resumed ones too, so a
        // resumed hunt weights each round as the uninterrupted one did.
        let mut resumed = hunt.resumed_probes.take().unwrap_or_default();
        let all = seeds.clone().filter(move |seed| shard.contains(*seed));
        // Every seed in the records file is in `resumed`, with its probes.
        let known = |seed: u64| resumed.remove(&seed);
        sweep_steered(all, &model, how, &mut steer, known, |result| hunt.finished(result));
    } else {
        let pending = seeds.clone().filter(move |seed| shard.contains(*seed) && !done.contains(*seed));
        sweep_each(pending, &model, how, |result| hunt.finished(result));
    }
    let steer_json = args.steer.then(|| SteerJson {
        rounds: steer.seeds().div_ceil(ROUND_SEEDS),
        round_seeds: ROUND_SEEDS,
        swarm_bias: steer.bias().to_string(),
    });
    if let Some(bar) = hunt.bar.take() {
        bar.finish_and_clear();
    }
    if let Some(error) = hunt.error.take() {
        return Err(InputError(error));
    }
    let found = exit_for(hunt.summary.failing_seeds == 0);
    if hunt.stdout_closed {
        return Ok(found);
    }
    let interrupted = signals::interrupted();
    let failures: Vec<SeedResult> = std::mem::take(&mut hunt.to_shrink);
    let shrunk = if args.shrink && !interrupted {
        shrink_failures(&failures.iter().collect::<Vec<_>>(), args.shrink_budget_s)
    } else {
        Vec::new()
    };
    for failure in &failures {
        let shrunk = shrunk.iter().find(|s| s.seed == failure.seed);
        if let Some(s) = shrunk {
            hunt.save(failure, Some(&s.scenario)).map_err(InputError)?;
        }
        if !args.json {
            hunt.tell(failure, shrunk.map(|s| s.line.as_str()));
        }
    }
    let wall_ms = started.elapsed().as_millis() as u64;
    let shard_text = hunt.shard_text.clone();
    if args.json {
        let kept_exposures = std::mem::take(&mut hunt.exposures_json.kept);
        let json = HuntJson {
            variant: hunt.variant.clone(),
            violations_left_out: hunt.violations_json.left_out,
            violations: std::mem::take(&mut hunt.violations_json.kept),
            exposures_left_out: hunt.exposures_json.left_out,
            exposures: ExposuresJson { kept: &kept_exposures, model: &args.model },
            summary: hunt.summary.clone(),
            wall_ms,
            shrunk: shrunk.iter().map(|s| s.json.clone()).collect(),
            interrupted,
            shard: shard_text,
            seeds_resumed: hunt.seeds_resumed,
            steer: steer_json,
        };
        let text = JsonText(&json);
        hunt.say(format_args!("{text}"));
    } else {
        for line in hunt.summary.detail_lines() {
            hunt.say(format_args!("{line}"));
        }
        if let Some((seed, replay)) = hunt.exposure_seed.take() {
            let line = Summary::exposure_line(seed, &replay);
            hunt.say(format_args!("{line}"));
        }
        let undecided = hunt.undecided_seed.take();
        for line in hunt.summary.undecided_lines(undecided.as_ref().map(|(seed, replay)| (*seed, replay.as_str()))) {
            hunt.say(format_args!("{line}"));
        }
        if let Some(line) = hunt.summary.coverage_line() {
            hunt.say(format_args!("{line}"));
        }
        if let Some(steer) = &steer_json {
            let bias = if steer.swarm_bias.is_empty() { "every coin fair" } else { &steer.swarm_bias };
            hunt.say(format_args!(
                "steered: {} of {} seeds; the next would draw with {bias}",
                plural(steer.rounds, "round"),
                steer.round_seeds
            ));
        }
        if let Some(text) = &shard_text {
            hunt.say(format_args!(
                "shard {text}: seeds s of {} with s mod {} = {}",
                args.seeds, shard.count, shard.index
            ));
        }
        if let Some(path) = &args.records {
            let resumed = hunt.seeds_resumed;
            let resumed = plural(resumed, "seed");
            hunt.say(format_args!("records: {} ({resumed} resumed from it, not run again)", path.display()));
        }
        if interrupted {
            let run = plural(hunt.summary.seeds_run, "seed");
            hunt.say(format_args!("interrupted: the summary covers the {run} finished"));
        }
        let last = hunt.summary.last_line(&hunt.variant, wall_ms, (hunt.ran, hunt.ran_sim_ms));
        hunt.say(format_args!("{last}"));
        if args.coverage {
            for line in hunt.summary.coverage.table(stdout_has_color()) {
                hunt.say(format_args!("{line}"));
            }
        }
    }
    if interrupted {
        return Ok(ExitCode::from(signals::exit_code()));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::{progress_template, COLUMNS, PROGRESS_TEXT_WIDEST};

    #[test]
    fn the_progress_line_fits_80_columns() {
        for len in [1, 200, 1_000_000, 1_000_000_000_000] {
            let template = progress_template(len);
            let bar: usize = template["{bar:".len()..template.find('}').unwrap()].parse().unwrap();
            let line = bar + 1 + 2 * len.to_string().len() + PROGRESS_TEXT_WIDEST.len();
            assert!(line <= COLUMNS, "{len} seeds: {line} columns");
        }
    }
}
