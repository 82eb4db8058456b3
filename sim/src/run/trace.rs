//! The trace: one readable line per history event, and the trace hash.
//!
//! The hash is FNV-1a (64 bit) over each event's postcard encoding, so it is
//! the same on every machine and in debug and release builds.

use crate::history::{Actor, Event, EventKind};
use std::fmt::Write as _;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The trace hash of a history.
pub fn hash(events: &[Event]) -> u64 {
    let mut hash = FNV_OFFSET;
    let mut buffer = Vec::with_capacity(256);
    for event in events {
        buffer.clear();
        let bytes = postcard::to_extend(event, std::mem::take(&mut buffer)).expect("events always encode");
        for &byte in &bytes {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(FNV_PRIME);
        }
        buffer = bytes;
    }
    hash
}

pub fn hash_hex(hash: u64) -> String {
    format!("{hash:016x}")
}

/// `12.345s  n2      became Leader in t7` — time, who, what.
pub fn line(event: &Event) -> String {
    let mut out = String::new();
    let (who, what) = describe(&event.kind);
    let _ = write!(out, "{:>7}.{:03}ms  {:<4}  {}", event.at_us / 1_000, event.at_us % 1_000, who, what);
    out
}

fn actor(actor: Actor) -> String {
    actor.to_string()
}

fn describe(kind: &EventKind) -> (String, String) {
    use EventKind as K;
    match kind {
        K::Healed => ("sim".into(), "healed: faults off, liveness phase begins".into()),
        K::Fault { fault } => ("sim".into(), format!("fault: {fault}")),
        K::Churn(event) => ("sim".into(), format!("fault: {event}")),
        K::Crashed { actor: a } => (actor(*a), "crashed".into()),
        K::Restarted { actor: a } => (actor(*a), "restarted".into()),
        K::Paused { actor: a } => (actor(*a), "paused".into()),
        K::Resumed { actor: a } => (actor(*a), "resumed".into()),
        K::Stalled { client, ms } => {
            (client.to_string(), format!("stalls {ms}ms between its lease check and its write"))
        }
        K::NodeRestored { node, backup_at_us } => {
            (node.to_string(), format!("restored from its backup of {}ms", backup_at_us / 1_000))
        }
        K::ClusterRestored { epoch, backup_at_us, token_floor } => (
            "sim".into(),
            format!(
                "cluster restored (epoch {epoch}) from the backup of {}ms, token floor {token_floor}",
                backup_at_us / 1_000
            ),
        ),
        K::Clock { actor: a, local_us, rate_ppm, within_bound } => (
            actor(*a),
            format!(
                "clock {}.{:03}ms rate {rate_ppm:+}ppm{}",
                local_us / 1_000,
                local_us % 1_000,
                if *within_bound { "" } else { " (beyond bound)" }
            ),
        ),
        K::Role { node, role, term, leader } => (
            node.to_string(),
            format!("{role:?} in {term}{}", leader.map(|l| format!(", leader {l}")).unwrap_or_default()),
        ),
        K::Applied { node, index, term, command, result } => {
            (node.to_string(), format!("applied {index}/{term} {command:?} -> {result:?}"))
        }
        K::AppliedNoop { node, index, term } => (node.to_string(), format!("applied {index}/{term} no-op")),
        K::SnapshotInstalled { node, index, token_last, .. } => {
            (node.to_string(), format!("installed snapshot at {index}, token_last {token_last}"))
        }
        K::Replied { node, client, request, reply } => {
            (node.to_string(), format!("reply to {client} {request}: {reply:?}"))
        }
        K::ExpireProposed { node, key, token } => (node.to_string(), format!("proposes Expire({key}, {token})")),
        K::GhostReleaseProposed { node, key, token, holder } => {
            (node.to_string(), format!("proposes ghost Release({key}, {token}) of {holder}"))
        }
        K::Requested { client, request, to, body } => (client.to_string(), format!("{request} to {to}: {body:?}")),
        K::Answered { client, request, from, reply } => {
            (client.to_string(), format!("{request} answered by {from}: {reply:?}"))
        }
        K::BeliefStart { client, key, token, until_local_us } => (
            client.to_string(),
            format!("believes it holds {key} with {token} until local {}ms", until_local_us / 1_000),
        ),
        K::BeliefEnd { client, key, token } => (client.to_string(), format!("no longer believes in {key} {token}")),
        K::GaveUp { client, request } => (client.to_string(), format!("gives up on {request}")),
        K::WriteSent { client, request, key, token, path } => {
            (client.to_string(), format!("writes {key} with {token} via {path:?} ({request})"))
        }
        K::WriteDone { client, request, key, token, path, verdict } => {
            ("db".into(), format!("{verdict:?}: {client} {request} {key} {token} via {path:?}"))
        }
    }
}
