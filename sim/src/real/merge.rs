//! Real processes' histories, merged into one simulator history.
//!
//! Every server and worker, and the operator's restores of the resource,
//! write JSON lines (`fencelock-node`'s `history.rs`): `{"seq", "at_us",
//! "local_us", "kind"}`, where `at_us` is CLOCK_MONOTONIC, which every
//! process on the machine shares, and `kind` uses the simulator's event
//! names and fields. The runner's own events (faults, crashes, pauses, the
//! heal) are simulator events on the same clock. Merged on `at_us` (ties:
//! the runner first, then servers, then workers, then the resource's
//! restores, each in its own order) and shifted so that the run starts at
//! 0 (instants named in an event, like a restore's backup, with them), they
//! are a `History` the checker judges like a simulated one.

use crate::actor::Actor;
use crate::history::{EventKind, History};
use fencelock::raft::Role;
use fencelock::{ClientId, NodeId, Term};
use serde::Deserialize;
use serde_json::Value;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::Path;

/// One line of a process's history file.
#[derive(Deserialize)]
struct Line {
    at_us: u64,
    kind: Value,
}

/// An event on the shared monotonic clock, before the merge.
#[derive(Clone, Debug)]
pub struct Stamped {
    pub at_us: u64,
    pub kind: EventKind,
}

/// A history file's writer (`resource.jsonl`: the operator's restores of the resource).
pub fn actor_of_file(name: &str) -> Option<Actor> {
    let stem = name.strip_suffix(".jsonl")?;
    if stem == "resource" {
        return Some(Actor::Resource);
    }
    if let Some(n) = stem.strip_prefix("node-") {
        return n.parse().ok().map(|n| Actor::Server(NodeId(n)));
    }
    stem.strip_prefix("client-")?.parse().ok().map(|c| Actor::Client(ClientId(c)))
}

/// Reads one process's history file into events on the monotonic clock.
/// Lines of kinds the simulator records otherwise (a process's own
/// `Restarted`: the runner records its starts) are left out; a clock line
/// gets its actor and whether its rate is within `drift_ppm_max`. A line
/// that does not parse is an error naming the file and line: the histories
/// are the evidence, and a verdict over part of them would not be one.
pub fn read_file(path: &Path, actor: Actor, drift_ppm_max: u64) -> Result<Vec<Stamped>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let mut events = Vec::new();
    for (number, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), number + 1);
        let parsed: Line = serde_json::from_str(&line).map_err(|e| format!("{}: {e}", at()))?;
        if let Some(kind) = convert(parsed.kind, actor, drift_ppm_max).map_err(|e| format!("{}: {e}", at()))? {
            events.push(Stamped { at_us: parsed.at_us, kind });
        }
    }
    Ok(events)
}

fn convert(kind: Value, actor: Actor, drift_ppm_max: u64) -> Result<Option<EventKind>, String> {
    let Some((name, body)) = kind.as_object().and_then(|o| o.iter().next()) else {
        return Err("an event is an object naming its kind".to_string());
    };
    match name.as_str() {
        "Restarted" => Ok(None),
        "Clock" => {
            let field = |f: &str| body.get(f).cloned().ok_or_else(|| format!("Clock without `{f}`"));
            let local_us: u64 = serde_json::from_value(field("local_us")?).map_err(|e| e.to_string())?;
            let rate_ppm: i64 = serde_json::from_value(field("rate_ppm")?).map_err(|e| e.to_string())?;
            let within_bound = rate_ppm.unsigned_abs() <= drift_ppm_max;
            Ok(Some(EventKind::Clock { actor, local_us, rate_ppm, within_bound }))
        }
        _ => serde_json::from_value(kind).map(Some).map_err(|e| format!("not a simulator event: {e}")),
    }
}

/// Merges the runner's events and every process's on the monotonic clock
/// and shifts them to start at `t0_us`: local readings (clock mappings and
/// lease beliefs) shift with them, so a local clock that reads true time
/// still does. Told to `tracing` as recorded, like a simulated run's.
pub fn merge(sources: Vec<Vec<Stamped>>, t0_us: u64) -> History {
    let mut all: Vec<(u64, usize, usize, EventKind)> = Vec::new();
    for (source, events) in sources.into_iter().enumerate() {
        for (i, event) in events.into_iter().enumerate() {
            all.push((event.at_us, source, i, event.kind));
        }
    }
    all.sort_by_key(|(at_us, source, i, _)| (*at_us, *source, *i));
    let mut history = History::new();
    for (at_us, _, _, kind) in all {
        history.record(at_us.saturating_sub(t0_us), shift_local(kind, t0_us));
    }
    history
}

fn shift_local(kind: EventKind, t0_us: u64) -> EventKind {
    match kind {
        EventKind::Clock { actor, local_us, rate_ppm, within_bound } => {
            EventKind::Clock { actor, local_us: local_us.saturating_sub(t0_us), rate_ppm, within_bound }
        }
        EventKind::BeliefStart { client, key, token, until_local_us } => {
            EventKind::BeliefStart { client, key, token, until_local_us: until_local_us.saturating_sub(t0_us) }
        }
        // A restore names its backup by the instant the history has for it.
        EventKind::NodeRestored { node, backup_at_us } => {
            EventKind::NodeRestored { node, backup_at_us: backup_at_us.saturating_sub(t0_us) }
        }
        EventKind::ResourceRestored { restore, backup_at_us } => {
            EventKind::ResourceRestored { restore, backup_at_us: backup_at_us.saturating_sub(t0_us) }
        }
        EventKind::ClusterRestored { epoch, backup_at_us, token_floor } => {
            EventKind::ClusterRestored { epoch, backup_at_us: backup_at_us.saturating_sub(t0_us), token_floor }
        }
        other => other,
    }
}

/// A history file followed as it grows: the lines it gained since the last look.
pub struct Tail {
    path: std::path::PathBuf,
    /// Bytes read so far.
    offset: u64,
    /// The start of a line not yet ended.
    partial: String,
}

impl Tail {
    pub fn new(path: std::path::PathBuf) -> Tail {
        Tail { path, offset: 0, partial: String::new() }
    }

    /// Calls `each` with every whole line the file gained, with its instant
    /// (CLOCK_MONOTONIC µs) and its event's kind, where the line holds
    /// `needle` (a cheap look before the parse) and parses. A file not there
    /// yet has gained nothing.
    pub fn gained(&mut self, needle: &str, mut each: impl FnMut(u64, EventKind)) {
        let Ok(mut file) = std::fs::File::open(&self.path) else { return };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut grown = String::new();
        let Ok(read) = file.read_to_string(&mut grown) else { return };
        self.offset += read as u64;
        self.partial.push_str(&grown);
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            if !line.contains(needle) {
                continue;
            }
            let Ok(parsed) = serde_json::from_str::<Line>(&line) else { continue };
            if let Ok(kind) = serde_json::from_value::<EventKind>(parsed.kind) {
                each(parsed.at_us, kind);
            }
        }
    }
}

/// Follows the servers' history files as they grow, for the roles they
/// report: who leads now, for the faults that strike the leader.
pub struct RoleWatch {
    files: Vec<(NodeId, Tail)>,
    /// Each server's last reported role and term.
    roles: Vec<Option<(Role, Term)>>,
}

impl RoleWatch {
    pub fn new(dir: &Path, nodes: u8) -> RoleWatch {
        let files = (0..nodes).map(|n| (NodeId(n), Tail::new(dir.join(format!("node-{n}.jsonl"))))).collect();
        RoleWatch { files, roles: vec![None; usize::from(nodes)] }
    }

    /// Reads what the files gained and returns the leader of the highest
    /// term any server reported leading in, if it still says so.
    pub fn leader(&mut self) -> Option<NodeId> {
        for (node, tail) in &mut self.files {
            let role_of = &mut self.roles[usize::from(node.0)];
            tail.gained("\"Role\"", |_, kind| {
                if let EventKind::Role { role, term, .. } = kind {
                    *role_of = Some((role, term));
                }
            });
        }
        self.roles
            .iter()
            .enumerate()
            .filter_map(|(n, r)| r.filter(|(role, _)| *role == Role::Leader).map(|(_, term)| (term, n)))
            .max()
            .map(|(_, n)| NodeId(u8::try_from(n).expect("at most 255 nodes")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::{Key, Token};

    #[test]
    fn lines_of_every_process_merge_into_one_history_from_zero() {
        let dir = std::env::temp_dir().join(format!("fencesim-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("client-1.jsonl");
        let lines = [
            r#"{"seq":0,"at_us":1000500,"local_us":1000500,"kind":{"Restarted":{"actor":"client 1"}}}"#,
            r#"{"seq":1,"at_us":1000700,"local_us":1000700,"kind":{"Clock":{"local_us":1000700,"rate_ppm":900}}}"#,
            r#"{"seq":2,"at_us":1002000,"local_us":1002000,"kind":{"BeliefStart":{"client":1,"key":"k","token":4,"until_local_us":3000000}}}"#,
        ];
        std::fs::write(&path, lines.join("\n")).expect("write");
        let actor = actor_of_file("client-1.jsonl").expect("a worker's file");
        assert_eq!(actor, Actor::Client(ClientId(1)));
        let worker = read_file(&path, actor, 500).expect("parses");
        assert_eq!(worker.len(), 2, "the process's own Restarted is the runner's to record");
        let runner = vec![Stamped { at_us: 1_002_000, kind: EventKind::Healed }];
        let history = merge(vec![runner, worker], 1_000_000);
        let events = history.events();
        assert_eq!(events[0].at_us, 700);
        assert_eq!(
            events[0].kind,
            EventKind::Clock { actor, local_us: 700, rate_ppm: 900, within_bound: false },
            "a rate beyond the bound says so"
        );
        assert_eq!(events[1].kind, EventKind::Healed, "at one instant the runner's event comes first");
        assert_eq!(
            events[2].kind,
            EventKind::BeliefStart {
                client: ClientId(1),
                key: Key::new("k"),
                token: Token(4),
                until_local_us: 2_000_000
            }
        );
        std::fs::write(&path, "{\"seq\":0,\"at_us\":1,\"local_us\":1,\"kind\":{\"Nope\":{}}}\n").expect("write");
        let error = read_file(&path, actor, 500).expect_err("an unknown kind");
        assert!(error.contains("client-1.jsonl:1: not a simulator event"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_restore_names_its_backup_on_the_merged_clock() {
        assert_eq!(actor_of_file("resource.jsonl"), Some(Actor::Resource));
        let backup =
            Stamped { at_us: 1_250_000, kind: EventKind::Fault { fault: crate::faults::Fault::BackupResource } };
        let restored =
            Stamped { at_us: 1_900_000, kind: EventKind::ResourceRestored { restore: 1, backup_at_us: 1_250_000 } };
        let history = merge(vec![vec![backup], vec![restored]], 1_000_000);
        let events = history.events();
        assert_eq!(events[0].at_us, 250_000);
        assert_eq!(
            events[1].kind,
            EventKind::ResourceRestored { restore: 1, backup_at_us: 250_000 },
            "the backup's instant shifts with the history, so the checker pairs the two"
        );
    }
}
