//! The smallest window of a key's operations that has no linearization, and
//! its table for the violation's sentence.
//!
//! A window is the operations `i..j` (by first send) of one key. It is judged
//! on its own, more leniently than the whole history: it starts from an
//! unknown lock (unless `i` is the first operation), and every operation
//! outside it whose interval overlaps the window's span counts as unanswered
//! (it may have taken effect inside the window, or not). So a window without a
//! linearization proves the whole history has none.

use super::ops::{Call, Op};
use super::search::{required, search, Found, Limits};
use super::spec::State;
use fencelock::service::ClientReply;
use std::fmt::Write;

/// The operations the window `i..j` is judged with, and the state it starts
/// from: `first`'s for a window that starts at the first operation.
fn window(ops: &[Op], i: usize, j: usize, first: State) -> (Vec<Op>, State) {
    let start_us = ops[i].inv_us;
    let end_us = ops[i..j].iter().map(|op| if required(op) { op.resp_us } else { op.inv_us }).max().unwrap_or(start_us);
    let mut list = Vec::new();
    for (k, op) in ops.iter().enumerate() {
        if (i..j).contains(&k) {
            list.push(op.clone());
        } else if op.inv_us <= end_us && op.resp_us >= start_us {
            if op.call == Call::Restore {
                list.push(op.clone());
            } else {
                list.push(Op { answer: None, resp_us: u64::MAX, ..op.clone() });
            }
        }
    }
    let initial = if i == 0 { first } else { State::unknown(0) };
    (list, initial)
}

fn fails(ops: &[Op], i: usize, j: usize, first: State, limits: Limits) -> bool {
    let (list, initial) = window(ops, i, j, first);
    search(&list, initial, limits).found == Found::NoLinearization
}

/// The smallest window `i..j` without a linearization: the shortest failing
/// prefix, then the latest start that still fails. `None` if no window
/// could be shown to fail within the limits. `first` is the state before
/// the first operation (`State::unknown` when `ops` does not start at the
/// key's start).
pub(crate) fn smallest_window(ops: &[Op], first: State, limits: Limits) -> Option<(usize, usize)> {
    let j = (1..=ops.len()).find(|j| fails(ops, 0, *j, first, limits))?;
    let i = (0..j).rev().find(|i| fails(ops, *i, j, first, limits)).unwrap_or(0);
    Some((i, j))
}

/// The window as a small table, one operation per line.
pub(crate) fn table(ops: &[Op], i: usize, j: usize) -> String {
    let mut text = String::from(
        "  #  client  request        call                      answer                     sent ms  answered ms",
    );
    for (k, op) in ops.iter().enumerate().take(j).skip(i) {
        let answered = if op.resp_us == u64::MAX { "-".to_string() } else { ms(op.resp_us) };
        let _ = write!(
            text,
            "\n{k:>3}  {:<6}  {:<13}  {:<24}  {:<25}  {:>7}  {:>11}",
            op.client.to_string(),
            op.request.to_string(),
            call_text(&op.call),
            answer_text(op),
            ms(op.inv_us),
            answered
        );
    }
    text
}

fn ms(us: u64) -> String {
    format!("{}.{:03}", us / 1_000, us % 1_000)
}

fn call_text(call: &Call) -> String {
    match call {
        Call::Acquire { wait_ms: 0, .. } => "try-lock".to_string(),
        Call::Acquire { wait_ms, .. } => format!("acquire, wait {wait_ms} ms"),
        Call::Renew { token } => format!("renew {token}"),
        Call::Release { token } => format!("release {token}"),
        Call::Revoke { token } => format!("revoke {token}"),
        Call::Restore => "(cluster restore)".to_string(),
    }
}

fn answer_text(op: &Op) -> String {
    match op.answer {
        None if op.call == Call::Restore => String::new(),
        None if op.resp_us != u64::MAX => "(rolled back by restore)".to_string(),
        None => "(none)".to_string(),
        Some(ClientReply::Granted { token, lease_ms }) => format!("Granted {token}, {lease_ms} ms"),
        Some(ClientReply::Busy { remaining_ms }) => format!("Busy, {remaining_ms} ms left"),
        Some(ClientReply::Renewed { lease_ms }) => format!("Renewed, {lease_ms} ms"),
        Some(reply) => format!("{reply:?}"),
    }
}
