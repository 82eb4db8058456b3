//! JSON-lines histories of real processes, in the simulator's vocabulary.
//!
//! The simulator's `history::EventKind` cannot be reused here: it lives in
//! `fencesim`, which depends on madsim, and it refers to the simulator's
//! fault types. So this is node's own serde enum with the same variant and
//! field names, for the kinds a real process can observe (a server's role
//! changes, replies and applied commands; a client's requests, answers and
//! beliefs; a restore of the resource and its floor read). A line is `{"seq":…,"at_us":…,"local_us":…,"kind":{…}}`:
//! `at_us` is CLOCK_MONOTONIC (`std::time::Instant`, shared by every process
//! on the machine, so lines of several processes merge into one true order)
//! and `local_us` is the writer's own clock, which an admin request may skew.
//!
//! A history is bounded ([`EVENTS_MAX`]); past it the writer stops and says
//! so once, rather than filling the disk.

use fencelock::raft::Role;
use fencelock::resource::{WritePath, WriteVerdict};
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ApplyResult, ClientId, Command, Holder, Key, LogIndex, NodeId, RequestId, Term, Token};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// Lines one process writes at most (about a gigabyte).
pub const EVENTS_MAX: u64 = 5_000_000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum EventKind {
    Restarted {
        actor: String,
    },
    Role {
        node: NodeId,
        role: Role,
        term: Term,
        leader: Option<NodeId>,
    },
    Applied {
        node: NodeId,
        index: LogIndex,
        term: Term,
        command: Command,
        result: ApplyResult,
    },
    AppliedNoop {
        node: NodeId,
        index: LogIndex,
        term: Term,
    },
    SnapshotInstalled {
        node: NodeId,
        index: LogIndex,
        token_last: Token,
        locks: Vec<(Key, Token)>,
    },
    Replied {
        node: NodeId,
        client: ClientId,
        request: RequestId,
        reply: ClientReply,
    },
    ExpireProposed {
        node: NodeId,
        key: Key,
        token: Token,
    },
    GhostReleaseProposed {
        node: NodeId,
        key: Key,
        token: Token,
        holder: Holder,
    },
    TurnedAway {
        node: NodeId,
        key: Key,
        holder: Holder,
    },
    Requested {
        client: ClientId,
        request: RequestId,
        to: NodeId,
        body: ClientRequest,
    },
    Answered {
        client: ClientId,
        request: RequestId,
        from: NodeId,
        reply: ClientReply,
    },
    BeliefStart {
        client: ClientId,
        key: Key,
        token: Token,
        until_local_us: u64,
    },
    BeliefEnd {
        client: ClientId,
        key: Key,
        token: Token,
    },
    /// The client gave up on a request without a final answer.
    GaveUp {
        client: ClientId,
        request: RequestId,
        why: GiveUp,
    },
    /// A worker sent a write under `token` to the protected resource …
    WriteSent {
        client: ClientId,
        request: RequestId,
        key: Key,
        token: Token,
        path: WritePath,
    },
    /// … and the resource judged it.
    WriteDone {
        client: ClientId,
        request: RequestId,
        key: Key,
        token: Token,
        path: WritePath,
        verdict: WriteVerdict,
    },
    /// A worker stops itself (SIGSTOP) between its lease check and its
    /// write for `ms`; whoever started it sends SIGCONT.
    Stalled {
        client: ClientId,
        ms: u64,
    },
    /// The writer's local clock took a new mapping: from this line's
    /// `at_us` it reads `local_us`, running at `1 + rate_ppm / 1e6`.
    Clock {
        local_us: u64,
        rate_ppm: i64,
    },
    /// The operator restored the resource from its backup taken at
    /// `backup_at_us` (CLOCK_MONOTONIC); `restore` counts its restores from 1.
    ResourceRestored {
        restore: u64,
        backup_at_us: u64,
    },
    /// The restored resource's owner asked server `to` for the floor (read `read`).
    FloorAsked {
        restore: u64,
        read: u64,
        to: NodeId,
    },
    /// The restored resource raised its floors from the read `read` that
    /// `from` answered, durably: it serves writes again. `held` are the keys
    /// held at the read with their tokens.
    FloorRaised {
        restore: u64,
        read: u64,
        from: NodeId,
        token_last: Token,
        held: Vec<(Key, Token)>,
    },
}

/// Why a client gave up on a request (the simulator's `GiveUp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GiveUp {
    /// Its attempts ran out without a final answer.
    Retries,
    /// It walked away by choice before the answer.
    WalkedAway,
}

#[derive(Serialize)]
struct Line<'a> {
    seq: u64,
    at_us: u64,
    local_us: u64,
    kind: &'a EventKind,
}

/// Appends events to one file; every failure is logged once and ends the history, never the process.
pub struct HistoryWriter {
    out: Option<std::io::BufWriter<std::fs::File>>,
    seq: u64,
    /// Push every line to the file as it is recorded (a worker that may be
    /// killed at any instant loses none of what it did).
    each: bool,
}

impl HistoryWriter {
    /// A writer that writes nothing.
    pub fn none() -> HistoryWriter {
        HistoryWriter { out: None, seq: 0, each: false }
    }

    /// A writer appending to `dir/name.jsonl`, or one that writes nothing.
    pub fn open(dir: Option<&Path>, name: &str) -> Result<HistoryWriter, String> {
        let Some(dir) = dir else { return Ok(HistoryWriter { out: None, seq: 0, each: false }) };
        std::fs::create_dir_all(dir).map_err(|e| format!("history directory {}: {e}", dir.display()))?;
        let path = dir.join(format!("{name}.jsonl"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("history file {}: {e}", path.display()))?;
        Ok(HistoryWriter { out: Some(std::io::BufWriter::new(file)), seq: 0, each: false })
    }

    /// This writer, pushing each line to the file as it is recorded.
    pub fn flushing_each_line(mut self) -> HistoryWriter {
        self.each = true;
        self
    }

    pub fn record(&mut self, at_us: u64, local_us: u64, kind: EventKind) {
        let Some(out) = self.out.as_mut() else { return };
        if self.seq >= EVENTS_MAX {
            tracing::warn!("history reached {EVENTS_MAX} events; no more are written");
            self.out = None;
            return;
        }
        let line = Line { seq: self.seq, at_us, local_us, kind: &kind };
        self.seq += 1;
        let written =
            serde_json::to_writer(&mut *out, &line).map_err(std::io::Error::from).and_then(|()| out.write_all(b"\n"));
        if let Err(e) = written {
            tracing::warn!("history write failed ({e}); no more are written");
            self.out = None;
        } else if self.each {
            self.flush();
        }
    }

    /// Pushes buffered lines to the file (not fsync'd: a history is a trace, not state).
    pub fn flush(&mut self) {
        if let Some(out) = self.out.as_mut() {
            if let Err(e) = out.flush() {
                tracing::warn!("history flush failed ({e}); no more are written");
                self.out = None;
            }
        }
    }
}
