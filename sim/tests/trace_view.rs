//! The trace's filters (`--actor`, `--key`, `--from`, `--to`), its told
//! events (`--why`, `--log`) and its JSON form, through the binary.
//!
//! Seed 2 of `sink-unfenced`, with the 20 ms heartbeat it was recorded
//! with, fails twice: c1 stalls holding tok41 of invoice/B-1042 and writes it
//! at 6759 ms, after c0 wrote tok48; the resource accepts it at 6763 ms.

use std::process::{Command, Output};

fn fencesim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().expect("the binary runs")
}

fn replay(extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["replay", "--seed", "2", "--variant", "sink-unfenced", "--set", "heartbeat_ms=20"];
    args.extend_from_slice(extra);
    let output = fencesim(&args);
    (output.status.code(), String::from_utf8(output.stdout).expect("utf-8 output"))
}

#[track_caller]
fn assert_input_error(extra: &[&str], needle: &str) {
    let mut args = vec!["replay", "--seed", "2", "--variant", "sink-unfenced", "--trace"];
    args.extend_from_slice(extra);
    let output = fencesim(&args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?} should exit 2; stderr: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?} should print one line, got: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: stderr should name `{needle}`, got: {stderr}");
    assert!(output.stdout.is_empty(), "{args:?} ran anyway");
}

/// The trace lines of an output: those with a time column.
fn trace_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|line| line.trim_start().split_once("ms  ").is_some_and(|(t, _)| t.parse::<f64>().is_ok()))
        // The checker's findings told in place (`chk`) are not events.
        .filter(|line| line.split_whitespace().nth(1) != Some("chk"))
        .collect()
}

/// The actor column of a trace line.
fn actor_of(line: &str) -> &str {
    line.split_whitespace().nth(1).expect("a trace line has an actor column")
}

#[test]
fn bad_filter_values_are_one_line_and_exit_2() {
    assert_input_error(&["--actor", "c9"], "--actor `c9`");
    assert_input_error(&["--actor", "s0"], "--actor `s0`");
    assert_input_error(&["--key", "invoice/B-9999"], "--key `invoice/B-9999`");
    assert_input_error(&["--from", "7000", "--to", "5000"], "--from 7000 is after --to 5000");
    assert_input_error(&["--from", "soon"], "--from");
    assert_input_error(&["--log", "fencelock=loud"], "fencelock=loud");
}

#[test]
fn a_filtered_trace_keeps_the_story_and_the_violation_on_one_screen() {
    let (full_code, full) = replay(&["--trace"]);
    let (code, filtered) = replay(&["--actor", "c1", "--key", "B-1042", "--to", "6800"]);
    assert_eq!((full_code, code), (Some(1), Some(1)), "the violation still decides the exit code");
    let (all, kept) = (trace_lines(&full), trace_lines(&filtered));
    assert!(all.len() > 1_000, "the whole trace: {} lines", all.len());
    assert!(kept.len() < 60, "one screen, got {} lines:\n{filtered}", kept.len());
    assert!(filtered.starts_with(&format!("trace: {} of {} lines kept by the filters\n", kept.len(), all.len())));
    // The story: the grant, the stall, the stale write the resource accepted.
    for needle in [
        "c1    r1 answered by n1: Granted { token: Token(41)",
        "c1    stalls",
        "c1    writes invoice/B-1042 with tok41 via Status",
        "db    Accepted: c1 r2147483649 invoice/B-1042 tok41 via Status",
    ] {
        assert!(filtered.contains(needle), "missing `{needle}`:\n{filtered}");
    }
    for line in &kept {
        assert!(!line.contains("B-1043"), "a line about another key: {line}");
        assert!(["c1", "n0", "n1", "n2", "n3", "n4", "db", "sim"].contains(&actor_of(line)), "{line}");
        let ms: f64 = line.trim_start().split("ms").next().unwrap().parse().unwrap();
        assert!(ms <= 6_800.0, "after --to: {line}");
    }
    // Every kept line is a line of the whole trace, in the same order.
    let mut rest = all.iter();
    assert!(kept.iter().all(|line| rest.any(|l| l == line)), "kept lines are the trace's own, in order");
    // The VIOLATION lines, the summary and the trace hash are always kept.
    let tail = |text: &str| {
        text.lines()
            .filter(|l| !trace_lines(text).contains(l))
            // A whole trace also tells the checker's findings in place (`chk`).
            .filter(|l| l.split_whitespace().nth(1) != Some("chk"))
            .skip_while(|l| l.starts_with("trace: "))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(tail(&filtered), tail(&full));
    assert!(filtered.contains("VIOLATION fenced-write at 6763ms"));
    assert!(filtered.contains("trace-hash: "));
}

#[test]
fn a_time_window_keeps_only_its_lines_and_implies_the_trace() {
    let (_, window) = replay(&["--from", "6759", "--to", "6764"]);
    let lines = trace_lines(&window);
    assert!(!lines.is_empty(), "{window}");
    for line in &lines {
        let ms: f64 = line.trim_start().split("ms").next().unwrap().parse().unwrap();
        assert!((6_759.0..=6_764.0).contains(&ms), "{line}");
    }
    let (_, none) = replay(&[]);
    assert!(trace_lines(&none).is_empty(), "no filter, no --trace: no trace");
}

#[test]
fn why_interleaves_the_protocols_decisions_and_changes_nothing_else() {
    let (_, plain) = replay(&["--trace"]);
    let (_, why) = replay(&["--why"]);
    let debug: Vec<&str> = why.lines().filter(|line| line.contains("  DEBUG fencelock::")).collect();
    assert!(debug.iter().any(|line| line.contains("vote refused")), "vote refusals are told");
    assert!(debug.iter().any(|line| line.contains("expire: the lease's deadline passed")), "expires are told");
    assert!(debug.iter().any(|line| line.contains("append rejected")), "rejected appends are told");
    assert!(debug.iter().all(|line| actor_of(line).starts_with('n')), "a server tells each decision");
    let without: Vec<&str> = why.lines().filter(|line| !line.contains("  DEBUG ")).collect();
    assert_eq!(without, plain.lines().collect::<Vec<_>>(), "without the debug lines, --why is --trace, hash included");
    // A filter of the user's own narrows the debug events to one module.
    let (_, raft) = replay(&["--log", "fencelock::raft=debug", "--from", "0", "--to", "2000"]);
    assert!(raft.contains("DEBUG fencelock::raft::"), "{raft}");
    assert!(!raft.contains("DEBUG fencelock::service::"), "{raft}");
}

#[test]
fn the_json_trace_is_the_told_events() {
    let (code, text) = replay(&["--trace"]);
    let (json_code, json) = replay(&["--trace", "--json"]);
    assert_eq!(code, json_code);
    let value: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
    let trace = value["trace"].as_array().expect("a trace array");
    let lines = trace_lines(&text);
    assert_eq!(trace.len(), lines.len(), "one record per trace line");
    let first = &trace[0];
    assert_eq!(first["seq"], 0);
    assert_eq!(first["at_us"], 0);
    assert_eq!(first["level"], "INFO");
    assert_eq!(first["target"], "fencesim::history");
    assert_eq!(first["actor"], "n0");
    let write = trace
        .iter()
        .find(|r| r["message"].as_str().is_some_and(|m| m.starts_with("writes invoice/B-1042 with tok41")))
        .expect("the stale write");
    assert_eq!(write["actor"], "c1");
    let fields = write["fields"].as_array().expect("fields");
    assert!(fields.contains(&serde_json::json!(["key", "invoice/B-1042"])), "{fields:?}");
    assert!(fields.contains(&serde_json::json!(["token", "tok41"])), "{fields:?}");
    let violations = value["violations"].as_array().expect("a violations array");
    assert_eq!(violations[0]["property"], "fenced-write", "the stale write is the first violation");
    assert_eq!(violations[0]["tokens"], serde_json::json!([41, 48]));
    // Filters apply to the JSON trace too.
    let (_, filtered) = replay(&["--json", "--actor", "c1", "--key", "B-1042", "--to", "6800"]);
    let filtered: serde_json::Value = serde_json::from_str(filtered.trim()).expect("one JSON object");
    let kept = filtered["trace"].as_array().expect("a trace array");
    assert!(!kept.is_empty() && kept.len() < 60, "{}", kept.len());
    assert_eq!(filtered["trace_hash"], value["trace_hash"]);
}
