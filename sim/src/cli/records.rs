//! Seed records (`hunt --records FILE.jsonl`, CLI.md): one JSON line per
//! seed, appended as the seed finishes and written with one `write` each,
//! so a killed shard loses at most the seed in flight and a torn last line
//! at worst. `merge` folds records of many shards into one summary;
//! concatenating record files is a valid merge input.

use crate::cli::args::InputError;
use crate::cli::summary::SeedFacts;
use crate::model::Model;
use crate::run::figures::{PhaseAvailability, SeedFigures};
use crate::run::sweep::SeedResult;
use crate::run::trace;
use fencelock::Property;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// The record format; a reader refuses other formats unless mixing is allowed.
pub const FORMAT: u32 = 1;
/// This binary's version and commit (`build.rs`; `unknown` without git).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const COMMIT: &str = env!("FENCESIM_COMMIT");
/// Whether this binary's sources had uncommitted changes (`build.rs`).
pub const DIRTY: bool = matches!(env!("FENCESIM_TREE").as_bytes(), b"dirty");
/// `--version`: the version, the commit, and whether the sources differed from it.
pub const LONG_VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("FENCESIM_COMMIT"), ", ", env!("FENCESIM_TREE"), " tree)");
/// Longest record line read (a record is a few hundred bytes).
pub const LINE_BYTES_MAX: usize = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    Fail,
}

/// One seed's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub format: u32,
    pub fencesim: String,
    pub commit: String,
    /// Built from sources with uncommitted changes (absent when not).
    #[serde(default, skip_serializing_if = "is_false")]
    pub dirty: bool,
    /// Hash of the whole model, variant included (`model_hash`).
    pub model_hash: String,
    pub variant: String,
    pub seed: u64,
    pub verdict: Verdict,
    /// The violated properties, one entry per violation.
    pub properties: Vec<Property>,
    pub trace_hash: String,
    pub sim_ms: u64,
    pub wall_ms: u64,
    pub messages: u64,
    pub lease_exposures: u64,
    /// The violations as a hunt prints them after `FAIL seed S: `, one
    /// line each (absent in records of older versions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
    /// The line that replays a failing seed, a seed with lease exposures, or one with keys not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<String>,
    /// `explore --out` records only: the seed's availability figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figures: Option<SeedFigures>,
    /// `I/N`: written by `hunt --shard I/N` (absent otherwise, and in records
    /// of older versions); `merge` names the shards it has no record of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Requests answered and grants made in each phase (absent in records
    /// of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability: Option<PhaseAvailability>,
    /// The coverage probes the seed reached, by name (absent in records of
    /// older versions; a name this version does not know is skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<Vec<String>>,
    /// A steered hunt's seed: the weights its swarm coins were tossed with
    /// (`swarm_bias`; absent when all fair, and in records of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swarm_bias: Option<String>,
    /// Keys `linearizable` could not decide (absent when none, and in
    /// records of older versions); the record then keeps its replay line.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub undecided: u64,
}

/// What records of one campaign share: merging others is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub format: u32,
    pub fencesim: String,
    pub commit: String,
    pub dirty: bool,
    pub model_hash: String,
}

fn is_false(value: &bool) -> bool {
    !value
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dirty = if self.dirty { ", with uncommitted changes" } else { "" };
        write!(
            f,
            "model {} of fencesim {} ({}{dirty}), format {}",
            self.model_hash, self.fencesim, self.commit, self.format
        )
    }
}

impl Origin {
    /// The origin of records this binary writes for `model`.
    pub fn here(model: &Model) -> Origin {
        Origin {
            format: FORMAT,
            fencesim: VERSION.into(),
            commit: COMMIT.into(),
            dirty: DIRTY,
            model_hash: model_hash(model),
        }
    }

    /// The origin of a steered hunt's records: the model's hash marked
    /// `+steer`, since its seeds draw other configurations than plain swarm's.
    pub fn steered(model: &Model) -> Origin {
        let mut origin = Origin::here(model);
        origin.model_hash.push_str("+steer");
        origin
    }
}

impl Record {
    pub fn of(result: &SeedResult, origin: &Origin, variant: &str, replay: String) -> Record {
        let failed = !result.violations.is_empty();
        Record {
            format: origin.format,
            fencesim: origin.fencesim.clone(),
            commit: origin.commit.clone(),
            dirty: origin.dirty,
            model_hash: origin.model_hash.clone(),
            variant: variant.to_string(),
            seed: result.seed,
            verdict: if failed { Verdict::Fail } else { Verdict::Pass },
            properties: result.violations.iter().map(|v| v.property).collect(),
            violations: result.violations.iter().map(|v| v.one_line()).collect(),
            trace_hash: result.trace_hash.clone(),
            sim_ms: result.sim_ms,
            wall_ms: result.wall_ms,
            messages: result.messages,
            lease_exposures: result.lease_exposures,
            replay: (failed || result.lease_exposures > 0 || result.linearizable.unknown > 0).then_some(replay),
            figures: None,
            shard: None,
            availability: Some(result.figures.phases),
            probes: Some(result.probes.iter().map(|probe| probe.name().to_string()).collect()),
            swarm_bias: result.swarm_bias.map(|bias| bias.to_string()),
            undecided: result.linearizable.unknown,
        }
    }

    pub fn origin(&self) -> Origin {
        Origin {
            format: self.format,
            fencesim: self.fencesim.clone(),
            commit: self.commit.clone(),
            dirty: self.dirty,
            model_hash: self.model_hash.clone(),
        }
    }

    pub fn facts(&self) -> SeedFacts<'_> {
        SeedFacts {
            properties: &self.properties,
            sim_ms: self.sim_ms,
            messages: self.messages,
            lease_exposures: self.lease_exposures,
            availability: self.availability,
            probes: self.probes.as_ref().map(|names| names.iter().filter_map(|name| name.parse().ok()).collect()),
        }
    }

    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("a record serializes");
        line.push('\n');
        line
    }
}

/// FNV-1a (64 bit) of the model's JSON (every key, `swarm` included, in the
/// struct's fixed field order) and its variant's name.
pub fn model_hash(model: &Model) -> String {
    let json = serde_json::to_string(model).expect("a model serializes");
    let text = format!("{json} variant={}", model.variant.name());
    let hash = text
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3));
    trace::hash_hex(hash)
}

/// Where a record was read: `FILE:LINE` in messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub source: String,
    pub line: usize,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.source, self.line)
    }
}

/// How a read ended.
#[derive(Debug, Default)]
pub struct ReadEnd {
    /// Bytes up to the end of the last complete line.
    pub complete_bytes: u64,
    /// The line number of a last line without its newline (a write cut short), skipped.
    pub torn_line: Option<usize>,
}

/// Reads every record of `reader`, in order. A malformed complete line is an
/// input error naming `source` and the line; an unterminated last line is
/// skipped and reported in the `ReadEnd`.
pub fn read_records(
    source: &str,
    reader: impl std::io::Read,
    mut each: impl FnMut(Place, Record) -> Result<(), InputError>,
) -> Result<ReadEnd, InputError> {
    let mut reader = BufReader::new(reader);
    let mut end = ReadEnd::default();
    let mut bytes = Vec::new();
    for line in 1.. {
        bytes.clear();
        let read = std::io::Read::take(&mut reader, LINE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut bytes)
            .map_err(|e| InputError(format!("cannot read {source}: {e}")))?;
        if read == 0 {
            break;
        }
        let place = Place { source: source.to_string(), line };
        if bytes.last() != Some(&b'\n') {
            if bytes.len() > LINE_BYTES_MAX {
                return Err(InputError(format!("{place}: a line longer than {LINE_BYTES_MAX} bytes")));
            }
            end.torn_line = Some(line);
            break;
        }
        end.complete_bytes += read as u64;
        let text = std::str::from_utf8(&bytes).map_err(|_| InputError(format!("{place}: not UTF-8")))?;
        if text.trim().is_empty() {
            continue;
        }
        let record: Record =
            serde_json::from_str(text).map_err(|e| InputError(format!("{place}: not a seed record: {e}")))?;
        each(place, record)?;
    }
    Ok(end)
}

/// A record file open for appending.
pub struct RecordFile {
    file: File,
    path: PathBuf,
}

impl RecordFile {
    /// Opens `path` for appending, creating it. Records already there are
    /// handed to `each` (a resumed hunt skips their seeds); a torn last line
    /// is cut off first so the next record starts on a line of its own.
    pub fn open(
        path: &Path,
        each: impl FnMut(Place, Record) -> Result<(), InputError>,
    ) -> Result<RecordFile, InputError> {
        let name = path.display().to_string();
        let cannot = |e: std::io::Error| InputError(format!("cannot open records file {name}: {e}"));
        let file = OpenOptions::new().read(true).append(true).create(true).open(path).map_err(cannot)?;
        let end = read_records(&name, &file, each)?;
        if end.torn_line.is_some() {
            file.set_len(end.complete_bytes).map_err(cannot)?;
        }
        Ok(RecordFile { file, path: path.to_path_buf() })
    }

    /// Appends one record with a single write: a kill leaves whole lines
    /// and at most one torn last line.
    pub fn append(&mut self, record: &Record) -> Result<(), String> {
        self.file
            .write_all(record.to_line().as_bytes())
            .map_err(|e| format!("cannot write records file {}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::{model_hash, read_records, Record, Verdict};
    use crate::model::Model;
    use fencelock::Property;

    fn record(seed: u64) -> Record {
        Record {
            format: 1,
            fencesim: "0.1.0".into(),
            commit: "abc".into(),
            dirty: false,
            shard: None,
            model_hash: model_hash(&Model::default()),
            variant: "default".into(),
            seed,
            verdict: Verdict::Fail,
            properties: vec![Property::FencedWrite],
            violations: vec!["fenced-write at 6491ms: a stale holder's write got through".into()],
            trace_hash: "0123456789abcdef".into(),
            sim_ms: 40_000,
            wall_ms: 12,
            messages: 100,
            lease_exposures: 0,
            replay: Some(format!("fencesim replay --seed {seed} --variant default")),
            figures: None,
            availability: None,
            probes: None,
            swarm_bias: None,
            undecided: 0,
        }
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_a_bad_line_named() {
        let text = format!("{}{}{{\"format\": 1, \"se", record(1).to_line(), record(2).to_line());
        let mut seeds = Vec::new();
        let end = read_records("r.jsonl", text.as_bytes(), |_, r| {
            seeds.push(r.seed);
            Ok(())
        })
        .unwrap();
        assert_eq!(seeds, vec![1, 2]);
        assert_eq!(end.torn_line, Some(3));
        assert_eq!(end.complete_bytes as usize, record(1).to_line().len() + record(2).to_line().len());
        let bad = format!("{}not json\n", record(1).to_line());
        let error = read_records("r.jsonl", bad.as_bytes(), |_, _| Ok(())).unwrap_err();
        assert!(error.0.starts_with("r.jsonl:2: not a seed record"), "{}", error.0);
    }

    #[test]
    fn the_model_hash_follows_every_key() {
        let standard = model_hash(&Model::default());
        assert_eq!(standard, model_hash(&Model::default()));
        assert_ne!(standard, model_hash(&Model { nodes: 3, ..Model::default() }));
        let unfenced = Model { variant: fencelock::Variant::SinkUnfenced, ..Model::default() };
        assert_ne!(standard, model_hash(&unfenced));
    }
}
