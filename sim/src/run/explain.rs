//! What a person reads to understand a run besides its events: the checker's
//! findings (violations and lease exposures) placed in the trace at the
//! instant they happened, and the fault schedule together with the stalls
//! the workers drew at run time.
//!
//! Nothing here touches the history: the trace hash stays a hash of the
//! events alone, whatever is printed around them.

use crate::faults;
use crate::history::EventKind;
use crate::run::seed::Outcome;
use crate::run::trace;

/// The `who` column of the checker's lines in a trace.
const CHECKER: &str = "chk";

/// The trace of a run: one line per event, and each violation and lease
/// exposure as a line of its own right after the events of its instant.
pub fn trace_lines(outcome: &Outcome) -> Vec<String> {
    let events = outcome.history.events().iter().map(|event| (event.at_us, trace::line(event)));
    with_findings(events, findings(outcome))
}

/// Trace lines (time, line) with the `findings` (time, line, in time order)
/// placed among them, each right after the lines of its instant.
pub fn with_findings(lines: impl IntoIterator<Item = (u64, String)>, findings: Vec<(u64, String)>) -> Vec<String> {
    let mut marks = findings.into_iter().peekable();
    let mut out = Vec::new();
    for (at_us, line) in lines {
        while let Some((_, mark)) = marks.next_if(|(mark_us, _)| *mark_us < at_us) {
            out.push(mark);
        }
        out.push(line);
    }
    out.extend(marks.map(|(_, mark)| mark));
    out
}

/// The checker's findings as trace lines, in time order (a stable sort: at
/// one instant, violations before exposures, each in the checker's order).
pub fn findings(outcome: &Outcome) -> Vec<(u64, String)> {
    let violations = outcome.violations.iter().map(|v| (v.at_us, mark(v.at_us, &format!("VIOLATION {v}"))));
    let exposures = outcome.exposures.iter().map(|e| (e.at_us, mark(e.at_us, &format!("EXPOSURE {e}"))));
    let mut marks: Vec<(u64, String)> = violations.chain(exposures).collect();
    marks.sort_by_key(|(at_us, _)| *at_us);
    marks
}

/// A checker's line in the shape of an event's: time, who, what.
fn mark(at_us: u64, what: &str) -> String {
    format!("{:>7}.{:03}ms  {CHECKER:<4}  {what}", at_us / 1_000, at_us % 1_000)
}

/// `--faults`: the schedule, with each worker's stall between its lease
/// check and its write at its place (drawn at run time, so from the history).
pub fn fault_lines(outcome: &Outcome) -> String {
    let plan = outcome.plan.iter().map(|e| (e.at_ms, faults::describe(std::slice::from_ref(e))));
    let stalls = outcome.history.events().iter().filter_map(|event| match event.kind {
        EventKind::Stalled { client, ms } => {
            let at_ms = event.at_us / 1_000;
            Some((at_ms, format!("{at_ms:>8} ms  stall {client} for {ms} ms between its lease check and its write\n")))
        }
        _ => None,
    });
    let mut lines: Vec<(u64, String)> = plan.chain(stalls).collect();
    // Stable: at one millisecond the schedule's events come first, in its order.
    lines.sort_by_key(|(at_ms, _)| *at_ms);
    lines.into_iter().map(|(_, line)| line).collect()
}
