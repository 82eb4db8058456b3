//! `merge`: the summary `hunt` would have printed, over the union of seed
//! record files (shards of one campaign, a resumed shard, concatenations).
//! Records must share one origin (format, version, commit, model) unless
//! `--allow-mixed`; a seed recorded twice must have one trace hash, or it
//! is a determinism failure across machines, reported with both records.
//!
//! A merge runs in constant memory over any number of records: the seeds
//! seen are a compressed bitmap per model (at most a bit per seed of the
//! range), the failures listed are the `EXAMPLES_JSON_MAX` lowest seeds (the
//! rest counted), and a seed seen again is settled by a second pass over the
//! files, a window of `REPEATS_PER_PASS` seeds at a time, which finds the
//! records again on disk instead of keeping every trace hash. Stdin is
//! copied as it is read into an unnamed temporary file (gone when the merge
//! ends, however it ends), and read again from there like any file.

use crate::cli::args::{exit_for, InputError, MergeArgs};
use crate::cli::hunt::EXAMPLES_JSON_MAX;
use crate::cli::output::try_write_line;
use crate::cli::records::{read_records, Origin, Place, Record};
use crate::cli::shard::SHARDS_MAX;
use crate::cli::summary::{Examples, Summary};
use crate::plural;
use fencelock::Property;
use roaring::RoaringTreemap;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Seeds seen again settled per pass over the files (a few hundred KB).
const REPEATS_PER_PASS: u64 = 4_096;

/// One seed as first seen: enough to spot a second record that disagrees.
struct Seen {
    trace_hash: String,
    failed: bool,
    place: Place,
}

/// A seed recorded twice with different trace hashes.
#[derive(Serialize)]
struct Conflict {
    seed: u64,
    first_place: String,
    first: Option<serde_json::Value>,
    second_place: String,
    second: serde_json::Value,
}

#[derive(Serialize)]
struct FailureJson {
    seed: u64,
    property: Property,
    detail: String,
    replay: Option<String>,
}

#[derive(Serialize)]
struct MergeJson {
    variant: String,
    violations: Vec<FailureJson>,
    /// Violations of the failing seeds past the lowest `EXAMPLES_JSON_MAX` (counted in `by_property`).
    violations_left_out: u64,
    #[serde(flatten)]
    summary: Summary,
    /// The seeds' own wall times, summed (one thread's time for all of them).
    wall_ms: u64,
    files: usize,
    records: u64,
    /// Records of a seed already seen with the same trace hash (not counted twice).
    duplicates: u64,
    determinism: Vec<Conflict>,
    /// Conflicting seeds past the first `EXAMPLES_JSON_MAX`.
    determinism_left_out: u64,
    merge_ms: u64,
}

struct Merge {
    first: Option<(Origin, String, Place)>,
    variants: Vec<String>,
    /// Per model hash, the seeds counted.
    seen: BTreeMap<String, RoaringTreemap>,
    /// Per model hash, the seeds recorded more than once (the second pass settles them).
    repeated: BTreeMap<String, RoaringTreemap>,
    /// The copy of stdin, when `-` is among the sources.
    stdin: Option<std::fs::File>,
    summary: Summary,
    wall_ms: u64,
    records: u64,
    duplicates: u64,
    /// The failing records of the lowest seeds, by (seed, order read).
    failures: BTreeMap<(u64, u64), Record>,
    failures_left_out: u64,
    violations_left_out: u64,
    conflicts: Examples<Conflict>,
    /// The lowest seed with a lease exposure, and its replay line when the
    /// record keeps one (records of older versions keep it only on failures).
    first_exposure: Option<(u64, Option<String>)>,
    /// The lowest seed with a key `linearizable` could not decide, and its replay line.
    first_undecided: Option<(u64, Option<String>)>,
    /// For each shard count N in the records (`hunt --shard I/N`), the indices I seen.
    shards: BTreeMap<u64, BTreeSet<u64>>,
}

impl Merge {
    fn add(&mut self, place: Place, record: Record, allow_mixed: bool) -> Result<(), InputError> {
        self.records += 1;
        let origin = record.origin();
        match &self.first {
            None => self.first = Some((origin.clone(), record.variant.clone(), place.clone())),
            Some((first, variant, first_place)) if !allow_mixed && (*first != origin || *variant != record.variant) => {
                return Err(InputError(format!(
                    "{place}: a record of {origin} (variant {}), but {first_place} is of {first} (variant {variant}): \
                     records of different models or versions (--allow-mixed merges them)",
                    record.variant
                )));
            }
            Some(_) => {}
        }
        if let Some((index, count)) = record.shard.as_deref().and_then(parse_shard_text) {
            self.shards.entry(count).or_default().insert(index);
        }
        if !self.variants.contains(&record.variant) {
            self.variants.push(record.variant.clone());
        }
        let failed = !record.properties.is_empty();
        let seen = self.seen.entry(record.model_hash.clone()).or_default();
        if !seen.insert(record.seed) {
            self.repeated.entry(record.model_hash.clone()).or_default().insert(record.seed);
            return Ok(());
        }
        self.summary.add(record.facts());
        self.wall_ms += record.wall_ms;
        if record.lease_exposures > 0 && self.first_exposure.as_ref().is_none_or(|(seed, _)| record.seed < *seed) {
            self.first_exposure = Some((record.seed, record.replay.clone()));
        }
        if record.undecided > 0 {
            self.summary.linearizable.unknown += record.undecided;
            self.summary.linearizable.unknown_seeds += 1;
            if self.first_undecided.as_ref().is_none_or(|(seed, _)| record.seed < *seed) {
                self.first_undecided = Some((record.seed, record.replay.clone()));
            }
        }
        if failed {
            self.failures.insert((record.seed, self.records), record);
            if self.failures.len() > EXAMPLES_JSON_MAX {
                let (_, highest) = self.failures.pop_last().expect("more than the limit");
                self.failures_left_out += 1;
                self.violations_left_out += highest.properties.len() as u64;
            }
        }
        Ok(())
    }

    /// A later record of a seed whose first record was `first`: a duplicate,
    /// or with another trace hash a determinism failure.
    fn again(&mut self, first: &Seen, place: &Place, seed: u64, trace_hash: &str, second: Option<&Record>) {
        if first.trace_hash == trace_hash {
            self.duplicates += 1;
            return;
        }
        if !first.failed {
            self.summary.failing_seeds += 1;
        }
        let count = self.summary.by_property.entry(Property::Determinism).or_default();
        count.seeds += 1;
        count.violations += 1;
        if self.conflicts.kept.len() >= EXAMPLES_JSON_MAX {
            self.conflicts.left_out += 1;
            return;
        }
        let second = match second {
            Some(record) => serde_json::to_value(record).expect("a record serializes"),
            None => serde_json::Value::Null,
        };
        self.conflicts.push(Conflict {
            seed,
            first_place: first.place.to_string(),
            first: line_at(&first.place, self.stdin.as_ref()),
            second_place: place.to_string(),
            second,
        });
    }

    /// The second pass: every seed recorded more than once, a window at a
    /// time, its records found again in the files (stdin's in its copy).
    fn settle_repeats(&mut self, files: &[PathBuf]) -> Result<(), InputError> {
        let repeated = std::mem::take(&mut self.repeated);
        // Windows of seeds drawn from the bitmaps as they go, never all at once.
        let windows = repeated.iter().flat_map(|(model, seeds)| {
            let mut seeds = seeds.iter().peekable();
            std::iter::from_fn(move || {
                seeds.peek()?;
                let window: Vec<(String, u64)> =
                    seeds.by_ref().take(REPEATS_PER_PASS as usize).map(|seed| (model.clone(), seed)).collect();
                Some(window)
            })
        });
        for window in windows {
            let wanted: std::collections::BTreeSet<&(String, u64)> = window.iter().collect();
            let mut firsts: BTreeMap<(String, u64), Seen> = BTreeMap::new();
            let mut each = |merge: &mut Merge,
                            place: Place,
                            model_hash: &str,
                            seed: u64,
                            trace_hash: &str,
                            failed: bool,
                            record: Option<&Record>| {
                let key = (model_hash.to_string(), seed);
                if !wanted.contains(&key) {
                    return;
                }
                match firsts.get(&key) {
                    Some(first) => merge.again(first, &place, seed, trace_hash, record),
                    None => {
                        firsts.insert(key, Seen { trace_hash: trace_hash.to_string(), failed, place });
                    }
                }
            };
            let stdin = self.stdin.take();
            for file in files {
                read_source(file, stdin.as_ref(), |place, record| {
                    let failed = !record.properties.is_empty();
                    each(self, place, &record.model_hash, record.seed, &record.trace_hash, failed, Some(&record));
                    Ok(())
                })?;
            }
            self.stdin = stdin;
        }
        Ok(())
    }
}

/// The record at `place`, read again from its file (stdin's from its copy).
fn line_at(place: &Place, stdin: Option<&std::fs::File>) -> Option<serde_json::Value> {
    let file = match stdin.filter(|_| place.source == "-") {
        Some(copy) => from_start(copy).ok()?,
        None => std::fs::File::open(&place.source).ok()?,
    };
    let line = std::io::BufReader::new(file).lines().nth(place.line - 1)?.ok()?;
    serde_json::from_str(&line).ok()
}

/// The files named: a directory stands for its `*.jsonl` files, by name.
fn sources(paths: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut files = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" || !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let cannot = |e: std::io::Error| InputError(format!("cannot read directory {}: {e}", path.display()));
        let mut inside: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(cannot)?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(cannot)?;
        inside.retain(|p| p.extension().is_some_and(|e| e == "jsonl") && p.is_file());
        inside.sort();
        files.extend(inside);
    }
    Ok(files)
}

/// Stdin copied to an unnamed temporary file, so it can be read more than once.
fn copy_stdin() -> Result<std::fs::File, InputError> {
    let mut copy =
        tempfile::tempfile().map_err(|e| InputError(format!("cannot make a temporary file for stdin: {e}")))?;
    std::io::copy(&mut std::io::stdin().lock(), &mut copy)
        .map_err(|e| InputError(format!("cannot read stdin: {e}")))?;
    Ok(copy)
}

/// A reader of the copy from its start (it shares the copy's offset: one reader at a time).
fn from_start(copy: &std::fs::File) -> std::io::Result<std::fs::File> {
    use std::io::{Seek, SeekFrom};
    let mut reader = copy.try_clone()?;
    reader.seek(SeekFrom::Start(0))?;
    Ok(reader)
}

fn read_source(
    path: &Path,
    stdin: Option<&std::fs::File>,
    each: impl FnMut(Place, Record) -> Result<(), InputError>,
) -> Result<(), InputError> {
    let end = if path.as_os_str() == "-" {
        let copy = stdin.expect("stdin is copied before the sources are read");
        let reader = from_start(copy).map_err(|e| InputError(format!("cannot read the copy of stdin: {e}")))?;
        read_records("-", reader, each)?
    } else {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| InputError(format!("cannot read {name}: {e}")))?;
        read_records(&name, file, each)?
    };
    if let Some(line) = end.torn_line {
        eprintln!("note: {}:{line}: an unfinished last line (a shard killed mid-write) was skipped", path.display());
    }
    Ok(())
}

pub fn merge(args: &MergeArgs) -> Result<ExitCode, InputError> {
    let started = Instant::now();
    let files = sources(&args.files)?;
    let mut merge = Merge {
        first: None,
        variants: Vec::new(),
        seen: BTreeMap::new(),
        repeated: BTreeMap::new(),
        stdin: if files.iter().any(|f| f.as_os_str() == "-") { Some(copy_stdin()?) } else { None },
        summary: Summary::default(),
        wall_ms: 0,
        records: 0,
        duplicates: 0,
        failures: BTreeMap::new(),
        failures_left_out: 0,
        violations_left_out: 0,
        conflicts: Examples::new(EXAMPLES_JSON_MAX),
        first_exposure: None,
        first_undecided: None,
        shards: BTreeMap::new(),
    };
    for file in &files {
        let stdin = merge.stdin.take();
        read_source(file, stdin.as_ref(), |place, record| merge.add(place, record, args.allow_mixed))?;
        merge.stdin = stdin;
    }
    if !merge.repeated.is_empty() {
        merge.settle_repeats(&files)?;
    }
    let mut warnings = missing_shards(&merge.shards);
    if let Some((origin, ..)) = merge.first.as_ref().filter(|(origin, ..)| origin.dirty) {
        warnings.push(format!(
            "the records come from a build with uncommitted changes (commit {}): shards built from different \
             edits of it cannot be told apart",
            origin.commit
        ));
    }
    for warning in warnings {
        let _ = writeln!(std::io::stderr(), "warning: {warning}");
    }
    let variant = if merge.variants.len() == 1 { merge.variants[0].clone() } else { "mixed".to_string() };
    let found = exit_for(merge.summary.failing_seeds == 0);
    if args.json {
        let violations = merge
            .failures
            .values()
            .flat_map(|r| {
                r.properties.iter().map(|&property| FailureJson {
                    seed: r.seed,
                    property,
                    detail: "recorded".to_string(),
                    replay: r.replay.clone(),
                })
            })
            .collect();
        let json = MergeJson {
            variant,
            violations,
            violations_left_out: merge.violations_left_out,
            summary: merge.summary,
            wall_ms: merge.wall_ms,
            files: files.len(),
            records: merge.records,
            duplicates: merge.duplicates,
            determinism: merge.conflicts.kept,
            determinism_left_out: merge.conflicts.left_out,
            merge_ms: started.elapsed().as_millis() as u64,
        };
        try_write_line(format_args!("{}", serde_json::to_string(&json).expect("merge json serializes")));
        return Ok(found);
    }
    let mut lines = Vec::new();
    // A failure reads as the hunt printed it: one line per violation with
    // its detail (records of older versions keep only the ids), then the replay line.
    for record in merge.failures.values() {
        if record.violations.is_empty() {
            let properties: Vec<&str> = record.properties.iter().map(|p| p.id()).collect();
            lines.push(format!("FAIL seed {}: {}", record.seed, properties.join(", ")));
        }
        for violation in &record.violations {
            lines.push(format!("FAIL seed {}: {violation}", record.seed));
        }
        if let Some(replay) = &record.replay {
            lines.push(format!("  replay: {replay}"));
        }
    }
    if merge.failures_left_out > 0 {
        lines.push(format!(
            "… and {} more failing {} past seed {} not listed here ({}; their records hold them)",
            merge.failures_left_out,
            if merge.failures_left_out == 1 { "seed" } else { "seeds" },
            merge.failures.keys().next_back().map_or(0, |(seed, _)| *seed),
            plural(merge.violations_left_out, "violation")
        ));
    }
    for conflict in &merge.conflicts.kept {
        lines.push(format!(
            "FAIL seed {}: determinism: two records with different trace hashes ({} and {})",
            conflict.seed, conflict.first_place, conflict.second_place
        ));
        let first = conflict.first.as_ref().map_or("(not kept: read from stdin)".to_string(), |v| v.to_string());
        lines.push(format!("  {}: {first}", conflict.first_place));
        lines.push(format!("  {}: {}", conflict.second_place, conflict.second));
    }
    if merge.conflicts.left_out > 0 {
        lines.push(format!("… and {} more seeds with conflicting records", merge.conflicts.left_out));
    }
    lines.extend(merge.summary.detail_lines());
    if let Some((seed, Some(replay))) = &merge.first_exposure {
        lines.push(Summary::exposure_line(*seed, replay));
    }
    let undecided = merge.first_undecided.as_ref().and_then(|(seed, replay)| Some((*seed, replay.as_deref()?)));
    lines.extend(merge.summary.undecided_lines(undecided));
    lines.extend(merge.summary.coverage_line());
    lines.push(format!(
        "merge: {} from {}, {}, in {} ms; the wall time below is the seeds' own, summed",
        plural(merge.records, "record"),
        plural(files.len() as u64, "file"),
        plural(merge.duplicates, "duplicate"),
        started.elapsed().as_millis()
    ));
    let summary = &merge.summary;
    lines.push(summary.last_line(&variant, merge.wall_ms, (summary.seeds_run, summary.sim_ms)));
    if args.coverage {
        lines.extend(merge.summary.coverage.table(crate::cli::coverage::stdout_has_color()));
    }
    for line in lines {
        if !try_write_line(format_args!("{line}")) {
            break;
        }
    }
    Ok(found)
}

/// `I/N` as a record writes it; anything else is ignored (readers ignore what they do not know).
fn parse_shard_text(text: &str) -> Option<(u64, u64)> {
    let (index, count) = text.split_once('/')?;
    let (index, count) = (index.parse().ok()?, count.parse().ok()?);
    (index < count && count <= SHARDS_MAX).then_some((index, count))
}

/// The shards of each count N with no record among those merged: a campaign
/// whose shard died before writing, or a file left out of the merge.
fn missing_shards(shards: &BTreeMap<u64, BTreeSet<u64>>) -> Vec<String> {
    const NAMED_MAX: usize = 20;
    shards
        .iter()
        .filter_map(|(&count, seen)| {
            let missing: Vec<u64> = (0..count).filter(|index| !seen.contains(index)).collect();
            if missing.is_empty() {
                return None;
            }
            let mut named: Vec<String> =
                missing.iter().take(NAMED_MAX).map(|index| format!("{index}/{count}")).collect();
            if missing.len() > NAMED_MAX {
                named.push(format!("and {} more", missing.len() - NAMED_MAX));
            }
            Some(format!(
                "no records of {} of {count} shards: {} (the summary covers the {} merged)",
                missing.len(),
                named.join(", "),
                seen.len()
            ))
        })
        .collect()
}
