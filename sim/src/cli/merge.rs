//! `merge`: the summary `hunt` would have printed, over the union of seed
//! record files (shards of one campaign, a resumed shard, concatenations).
//! Records must share one origin (format, version, commit, model) unless
//! `--allow-mixed`; a seed recorded twice must have one trace hash, or it
//! is a determinism failure across machines, reported with both records.

use crate::cli::args::{exit_for, InputError, MergeArgs};
use crate::cli::output::try_write_line;
use crate::cli::records::{read_records, Origin, Place, Record};
use crate::cli::summary::Summary;
use crate::plural;
use fencelock::Property;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

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
    #[serde(flatten)]
    summary: Summary,
    /// The seeds' own wall times, summed (one thread's time for all of them).
    wall_ms: u64,
    files: usize,
    records: u64,
    /// Records of a seed already seen with the same trace hash (not counted twice).
    duplicates: u64,
    determinism: Vec<Conflict>,
    merge_ms: u64,
}

#[derive(Default)]
struct Merge {
    first: Option<(Origin, String, Place)>,
    variants: Vec<String>,
    seen: BTreeMap<(String, u64), Seen>,
    summary: Summary,
    wall_ms: u64,
    records: u64,
    duplicates: u64,
    failures: Vec<Record>,
    conflicts: Vec<Conflict>,
    /// The lowest seed with a lease exposure, and its replay line when the
    /// record keeps one (records of older versions keep it only on failures).
    first_exposure: Option<(u64, Option<String>)>,
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
        if !self.variants.contains(&record.variant) {
            self.variants.push(record.variant.clone());
        }
        let key = (record.model_hash.clone(), record.seed);
        if let Some(seen) = self.seen.get(&key) {
            if seen.trace_hash == record.trace_hash {
                self.duplicates += 1;
                return Ok(());
            }
            if !seen.failed {
                self.summary.failing_seeds += 1;
            }
            let count = self.summary.by_property.entry(Property::Determinism).or_default();
            count.seeds += 1;
            count.violations += 1;
            self.conflicts.push(Conflict {
                seed: record.seed,
                first_place: seen.place.to_string(),
                first: line_at(&seen.place),
                second_place: place.to_string(),
                second: serde_json::to_value(&record).expect("a record serializes"),
            });
            return Ok(());
        }
        self.summary.add(record.facts());
        self.wall_ms += record.wall_ms;
        if record.lease_exposures > 0 && self.first_exposure.as_ref().is_none_or(|(seed, _)| record.seed < *seed) {
            self.first_exposure = Some((record.seed, record.replay.clone()));
        }
        let failed = !record.properties.is_empty();
        self.seen.insert(key, Seen { trace_hash: record.trace_hash.clone(), failed, place });
        if failed {
            self.failures.push(record);
        }
        Ok(())
    }
}

/// The record at `place`, read again from its file (not from stdin).
fn line_at(place: &Place) -> Option<serde_json::Value> {
    if place.source == "-" {
        return None;
    }
    let file = std::fs::File::open(&place.source).ok()?;
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

fn read_source(path: &Path, each: impl FnMut(Place, Record) -> Result<(), InputError>) -> Result<(), InputError> {
    let end = if path.as_os_str() == "-" {
        read_records("-", std::io::stdin().lock(), each)?
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
    let mut merge = Merge::default();
    for file in &files {
        read_source(file, |place, record| merge.add(place, record, args.allow_mixed))?;
    }
    merge.failures.sort_by_key(|r| r.seed);
    let variant = if merge.variants.len() == 1 { merge.variants[0].clone() } else { "mixed".to_string() };
    let found = exit_for(merge.summary.failing_seeds == 0);
    if args.json {
        let violations = merge
            .failures
            .iter()
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
            summary: merge.summary,
            wall_ms: merge.wall_ms,
            files: files.len(),
            records: merge.records,
            duplicates: merge.duplicates,
            determinism: merge.conflicts,
            merge_ms: started.elapsed().as_millis() as u64,
        };
        try_write_line(format_args!("{}", serde_json::to_string(&json).expect("merge json serializes")));
        return Ok(found);
    }
    let mut lines = Vec::new();
    // A failure reads as the hunt printed it: one line per violation with
    // its detail (records of older versions keep only the ids), then the replay line.
    for record in &merge.failures {
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
    for conflict in &merge.conflicts {
        lines.push(format!(
            "FAIL seed {}: determinism: two records with different trace hashes ({} and {})",
            conflict.seed, conflict.first_place, conflict.second_place
        ));
        let first = conflict.first.as_ref().map_or("(not kept: read from stdin)".to_string(), |v| v.to_string());
        lines.push(format!("  {}: {first}", conflict.first_place));
        lines.push(format!("  {}: {}", conflict.second_place, conflict.second));
    }
    lines.extend(merge.summary.detail_lines());
    if let Some((seed, Some(replay))) = &merge.first_exposure {
        lines.push(Summary::exposure_line(*seed, replay));
    }
    lines.push(format!(
        "merge: {} from {}, {}, in {} ms; the wall time below is the seeds' own, summed",
        plural(merge.records, "record"),
        plural(files.len() as u64, "file"),
        plural(merge.duplicates, "duplicate"),
        started.elapsed().as_millis()
    ));
    lines.push(merge.summary.last_line(&variant, merge.wall_ms));
    for line in lines {
        if !try_write_line(format_args!("{line}")) {
            break;
        }
    }
    Ok(found)
}
