//! A worker's stall until another overtakes it (`StallUntilOvertaken`
//! before a write), played as the simulator plays it: the runner follows
//! the histories as they grow and ends the stall once the overtaking shows,
//! and `after_ms` more, or at `ms_max` at the latest. A fixed stop of the
//! longest length made the overtaking a matter of the machine's speed: on a
//! loaded machine the others had not written yet when it ended.
//!
//! As in the simulator, only what happens from the stall on counts (the
//! stalled worker's `Stalled` line dates it). What shows the overtaking is
//! what the simulator reads: for `Write`, a
//! write on the key under a higher token accepted by the resource (a
//! worker's `WriteDone`, the resource's answer as that worker recorded it);
//! for `Grant`, a grant of the key under a higher token applied at any
//! server (a server's `Applied`).

use super::merge::Tail;
use crate::actor::Actor;
use crate::faults::Overtake;
use crate::history::EventKind;
use fencelock::resource::WriteVerdict;
use fencelock::{ApplyResult, ClientId, Command, Key, Token};
use std::path::Path;

/// A stopped worker's stall, and the histories that can end it.
pub struct OvertakeWatch {
    /// The stopped worker.
    pub actor: Actor,
    key: Key,
    /// The token it stopped holding.
    token: Token,
    on: Overtake,
    /// How long the stall lasts past the overtaking.
    pub after_ms: u64,
    /// When it ends in any case (CLOCK_MONOTONIC µs).
    pub deadline_us: u64,
    /// When it began: events before it do not count.
    since_us: u64,
    tails: Vec<Tail>,
}

/// What a stopped worker's note says (`stopped-N`, written by the worker).
#[derive(Debug, PartialEq)]
pub struct StopNote {
    pub ms: u64,
    /// The number of the run's armed stall it took (`armed N`); `None` for
    /// one the workload drew (`drawn`).
    pub armed: Option<u64>,
    /// The key and token it holds, where the note names them.
    pub held: Option<(Key, Token)>,
}

impl StopNote {
    /// Reads a note: its length in ms; then `armed N` or `drawn`, the
    /// token's number and the key, each on a line of its own. A note of the
    /// length alone is a drawn stall's of a worker that names nothing more.
    pub fn parse(text: &str) -> StopNote {
        let mut lines = text.lines();
        let ms = lines.next().and_then(|ms| ms.trim().parse().ok()).unwrap_or(0);
        let armed = lines.next().and_then(|how| how.trim().strip_prefix("armed ")?.parse().ok());
        let token = lines.next().and_then(|token| token.trim().parse().ok()).map(Token);
        let key = lines.next().map(Key::new);
        StopNote { ms, armed, held: key.zip(token) }
    }
}

/// When `client` last stalled, by its history in `dir` (its `Stalled`
/// line, written before it stopped itself); `None` if none shows.
pub fn stalled_at(dir: &Path, client: ClientId) -> Option<u64> {
    let mut since = None;
    Tail::new(dir.join(format!("client-{}.jsonl", client.0))).gained("\"Stalled\"", |at_us, _| since = Some(at_us));
    since
}

impl OvertakeWatch {
    /// Watches for `client`, stopped holding `key` under `token` from
    /// `since_us` to `deadline_us`, to be overtaken `on` a grant or a write:
    /// the servers' histories in `dir` for a grant, the other workers' for
    /// a write.
    pub fn new(
        dir: &Path,
        (nodes, clients): (u8, u32),
        client: ClientId,
        (key, token): (Key, Token),
        (on, after_ms): (Overtake, u64),
        (since_us, deadline_us): (u64, u64),
    ) -> OvertakeWatch {
        let tails = match on {
            Overtake::Grant => (0..nodes).map(|n| Tail::new(dir.join(format!("node-{n}.jsonl")))).collect(),
            Overtake::Write => (0..clients)
                .filter(|c| *c != client.0)
                .map(|c| Tail::new(dir.join(format!("client-{c}.jsonl"))))
                .collect(),
        };
        OvertakeWatch { actor: Actor::Client(client), key, token, on, after_ms, deadline_us, since_us, tails }
    }

    /// Reads what the histories gained; true once one shows the overtaking.
    pub fn overtaken(&mut self) -> bool {
        let (key, token, on, since_us) = (&self.key, self.token, self.on, self.since_us);
        let mut seen = false;
        let needle = match on {
            Overtake::Grant => "\"Applied\"",
            Overtake::Write => "\"WriteDone\"",
        };
        for tail in &mut self.tails {
            tail.gained(needle, |at_us, kind| seen |= at_us >= since_us && overtakes(&kind, key, token, on));
        }
        seen
    }
}

/// Whether `kind` shows `key` taken or written under a token above `token`.
fn overtakes(kind: &EventKind, key: &Key, token: Token, on: Overtake) -> bool {
    match (on, kind) {
        (
            Overtake::Grant,
            EventKind::Applied {
                command: Command::Grant { key: granted, .. },
                result: ApplyResult::Granted { token: higher },
                ..
            },
        ) => granted == key && *higher > token,
        (
            Overtake::Write,
            EventKind::WriteDone { key: written, token: higher, verdict: WriteVerdict::Accepted, .. },
        ) => written == key && *higher > token,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::resource::WritePath;
    use fencelock::{LogIndex, NodeId, RequestId, Term};

    #[test]
    fn a_note_names_the_stall_and_what_it_holds() {
        let note = StopNote::parse("3000\narmed 2\n4294967301\ninvoice/B 1042\n");
        let held = Some((Key::new("invoice/B 1042"), Token(4_294_967_301)));
        assert_eq!(note, StopNote { ms: 3_000, armed: Some(2), held });
        assert_eq!(StopNote::parse("250"), StopNote { ms: 250, armed: None, held: None });
        assert_eq!(StopNote::parse("250\ndrawn\n7\nk").armed, None);
    }

    /// A watch in a new directory for client 0, stopped holding `k` under
    /// tok5 from 5 µs on.
    fn watching(on: Overtake) -> (tempfile::TempDir, OvertakeWatch) {
        let dir = tempfile::tempdir().expect("a directory");
        let held = (Key::new("k"), Token(5));
        let watch = OvertakeWatch::new(dir.path(), (3, 3), ClientId(0), held, (on, 0), (5, u64::MAX));
        (dir, watch)
    }

    fn line(kind: &EventKind) -> String {
        line_at(5, kind)
    }

    fn line_at(at_us: u64, kind: &EventKind) -> String {
        format!("{}\n", serde_json::json!({ "seq": 1, "at_us": at_us, "local_us": at_us, "kind": kind }))
    }

    fn write_done(client: u32, key: &str, token: u64, verdict: WriteVerdict) -> EventKind {
        EventKind::WriteDone {
            client: ClientId(client),
            request: RequestId(1),
            key: Key::new(key),
            token: Token(token),
            path: WritePath::Status,
            verdict,
        }
    }

    #[test]
    fn a_write_overtakes_once_it_is_accepted_above_the_token_on_the_key() {
        let (dir, mut watch) = watching(Overtake::Write);
        assert!(!watch.overtaken(), "no history yet");
        let other = dir.path().join("client-1.jsonl");
        // Not yet: a rejected write, another key, a lower token, one from
        // before the stall, the stopped worker's own file.
        let mut text = line(&write_done(1, "k", 6, WriteVerdict::Unavailable));
        text += &line_at(4, &write_done(1, "k", 6, WriteVerdict::Accepted));
        text += &line(&write_done(1, "other", 9, WriteVerdict::Accepted));
        text += &line(&write_done(1, "k", 4, WriteVerdict::Accepted));
        std::fs::write(&other, &text).expect("written");
        std::fs::write(dir.path().join("client-0.jsonl"), line(&write_done(0, "k", 7, WriteVerdict::Accepted)))
            .expect("written");
        assert!(!watch.overtaken());
        // Half a line is read when it ends.
        let accepted = line(&write_done(1, "k", 6, WriteVerdict::Accepted));
        let (start, end) = accepted.split_at(20);
        std::fs::write(&other, text.clone() + start).expect("written");
        assert!(!watch.overtaken());
        std::fs::write(&other, text + start + end).expect("written");
        assert!(watch.overtaken());
    }

    #[test]
    fn a_stall_is_dated_by_the_workers_last_stalled_line() {
        let dir = tempfile::tempdir().expect("a directory");
        assert_eq!(stalled_at(dir.path(), ClientId(1)), None);
        let stalled = |ms| EventKind::Stalled { client: ClientId(1), ms };
        let text = line_at(7, &stalled(100)) + &line_at(9, &write_done(1, "k", 6, WriteVerdict::Accepted));
        std::fs::write(dir.path().join("client-1.jsonl"), text + &line_at(12, &stalled(200))).expect("written");
        assert_eq!(stalled_at(dir.path(), ClientId(1)), Some(12));
    }

    #[test]
    fn a_grant_overtakes_once_a_server_applies_it_above_the_token() {
        let (dir, mut watch) = watching(Overtake::Grant);
        let grant = |token| EventKind::Applied {
            node: NodeId(2),
            index: LogIndex(9),
            term: Term(2),
            command: Command::Grant {
                key: Key::new("k"),
                lease_ms: 500,
                holder: fencelock::Holder { client: ClientId(1), request: RequestId(3) },
            },
            result: ApplyResult::Granted { token: Token(token) },
        };
        std::fs::write(dir.path().join("node-2.jsonl"), line(&grant(5))).expect("written");
        assert!(!watch.overtaken(), "its own grant, applied again");
        std::fs::write(dir.path().join("node-2.jsonl"), line(&grant(5)) + &line(&grant(6))).expect("written");
        assert!(watch.overtaken());
    }
}
