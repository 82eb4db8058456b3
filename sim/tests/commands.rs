//! What the commands do with accepted input: `fencesim model` and `--set`,
//! `--seeds N|A..B` up to the last seed, `run` of many files, replay's JSON,
//! the replay line, and counts in words.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn fencesim(args: &[&str]) -> Output {
    // No `fencesim` on the PATH: the replay line must not assume one.
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).env("PATH", "").output().expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[track_caller]
fn ok(args: &[&str]) -> String {
    let output = fencesim(args);
    assert!(output.status.code().is_some_and(|c| c < 2), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    stdout(&output)
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("commands");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}

fn trace_hash(text: &str) -> String {
    text.lines().find_map(|l| l.strip_prefix("trace-hash: ")).expect("a trace hash").to_string()
}

/// A short run, so each test stays quick in a debug build.
const SHORT: [&str; 4] = ["--set", "safety_ms=3000", "--set", "liveness_ms=0"];

#[test]
fn the_printed_model_is_the_standard_model_and_documents_every_key() {
    let text = ok(&["model"]);
    for key in ["nodes", "pause_ms_max", "fault_rate", "election_ms_max", "# jobs_max = 20"] {
        assert!(text.contains(key), "`fencesim model` names {key}");
    }
    assert!(text.contains("# valid: 1..=9, odd\nnodes = 5"), "a key's range stands above it:\n{text}");
    // A key absent by default shows a value worth writing, not its minimum.
    for example in
        ["# drift_ppm_real_max = 500", "# stall_ms_max = 5999", "# snapshot_entries = 256", "# ack_crashes = true"]
    {
        assert!(text.contains(&format!("# absent by default\n{example}\n")), "{example}:\n{text}");
    }
    let path = scratch("standard.toml");
    std::fs::write(&path, &text).expect("write the model");
    let with_file =
        ok(&["replay", "--seed", "3", "--model", path.to_str().unwrap(), SHORT[0], SHORT[1], SHORT[2], SHORT[3]]);
    let without = ok(&["replay", "--seed", "3", SHORT[0], SHORT[1], SHORT[2], SHORT[3]]);
    assert_eq!(trace_hash(&with_file), trace_hash(&without), "the printed model runs as the standard one");
}

#[test]
fn set_overrides_the_model_file_like_a_key_in_it() {
    let file = scratch("three-nodes.toml");
    std::fs::write(&file, "nodes = 3\nsafety_ms = 3000\nliveness_ms = 0\nclients = 2\n").unwrap();
    let from_file = ok(&["replay", "--seed", "5", "--model", file.to_str().unwrap()]);
    let base = scratch("five-nodes.toml");
    std::fs::write(&base, "nodes = 5\nsafety_ms = 3000\nliveness_ms = 0\nclients = 3\n").unwrap();
    let from_set =
        ok(&["replay", "--seed", "5", "--model", base.to_str().unwrap(), "--set", "nodes=3", "--set", "clients=2"]);
    assert_eq!(trace_hash(&from_file), trace_hash(&from_set));
}

#[test]
fn the_last_seeds_of_u64_run_and_end() {
    let json = ok(&[
        "hunt",
        "--seeds",
        "18446744073709551613..18446744073709551615",
        "--json",
        SHORT[0],
        SHORT[1],
        SHORT[2],
        SHORT[3],
    ]);
    let json: Value = serde_json::from_str(&json).expect("hunt --json");
    assert_eq!(json["seeds_run"], 2);
    let json = ok(&[
        "hunt",
        "--seeds",
        "18446744073709551614..18446744073709551615",
        "--json",
        "--jobs",
        "3",
        SHORT[0],
        SHORT[1],
        SHORT[2],
        SHORT[3],
    ]);
    assert_eq!(serde_json::from_str::<Value>(&json).unwrap()["seeds_run"], 1);
    let last = ok(&["replay", "--seed", "18446744073709551615", SHORT[0], SHORT[1], SHORT[2], SHORT[3]]);
    assert!(last.contains("seed 18446744073709551615 variant default"), "{last}");
}

#[test]
fn a_seed_count_is_the_range_from_zero() {
    let count = ok(&["hunt", "--seeds", "3", "--json", SHORT[0], SHORT[1], SHORT[2], SHORT[3]]);
    let range = ok(&["hunt", "--seeds", "0..3", "--json", SHORT[0], SHORT[1], SHORT[2], SHORT[3]]);
    let [count, range] = [count, range].map(|text| serde_json::from_str::<Value>(&text).unwrap());
    assert_eq!(count["seeds_run"], 3);
    assert_eq!(count["messages"], range["messages"]);
}

#[test]
fn the_replay_line_runs_as_printed_from_a_clone() {
    let text = ok(&["hunt", "--variant", "sink-unfenced", "--seeds", "9..10", "--set", "keys=1"]);
    let line = text.lines().find_map(|l| l.strip_prefix("  replay: ")).expect("a replay line");
    // A build under target/ without `fencesim` on the PATH: the line names its profile
    // (a target directory of another name, CARGO_TARGET_DIR: the binary's path).
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_fencesim"));
    let profile = bin.parent().unwrap();
    let cargo_run = match (profile.parent().is_some_and(|dir| dir.ends_with("target")), profile.ends_with("release")) {
        (true, true) => "cargo run --release -p fencesim --".to_string(),
        (true, false) => "cargo run -p fencesim --".to_string(),
        (false, _) => bin.display().to_string(),
    };
    assert_eq!(line, format!("{cargo_run} replay --seed 9 --variant sink-unfenced --set keys=1"));
    assert!(text.contains("1 seed of variant sink-unfenced, 1 failing"), "{text}");
    // With the binary on the PATH, the line is its name.
    let bin = scratch("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("fencesim");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_fencesim"), &link).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["hunt", "--variant", "sink-unfenced", "--seeds", "9..10", "--set", "keys=1"])
        .env("PATH", &bin)
        .output()
        .unwrap();
    assert!(stdout(&output).contains("  replay: fencesim replay --seed 9 --variant sink-unfenced --set keys=1"));
}

#[test]
fn replay_json_carries_the_trace_and_the_faults() {
    let text = ok(&["replay", "--seed", "1", "--json", "--trace", "--faults", SHORT[0], SHORT[1], SHORT[2], SHORT[3]]);
    let json: Value = serde_json::from_str(&text).expect("one JSON object");
    let plain = ok(&["replay", "--seed", "1", "--trace", SHORT[0], SHORT[1], SHORT[2], SHORT[3]]);
    // The JSON trace is the printed trace's events (not the checker's lines told among them), as records.
    let trace = json["trace"].as_array().unwrap();
    let printed: Vec<&str> = plain
        .lines()
        .filter(|l| l.trim_start().split_once("ms  ").is_some_and(|(t, _)| t.parse::<f64>().is_ok()))
        .filter(|l| l.split_whitespace().nth(1) != Some("chk"))
        .collect();
    assert_eq!(trace.len(), printed.len(), "one record per printed event");
    for (record, line) in trace.iter().zip(&printed) {
        assert!(line.contains(record["message"].as_str().unwrap()), "{record} vs {line}");
    }
    assert!(json["faults"].is_array(), "the fault schedule, as --save-faults writes it");
    let without = serde_json::from_str::<Value>(&ok(&[
        "replay", "--seed", "1", "--json", SHORT[0], SHORT[1], SHORT[2], SHORT[3],
    ]))
    .unwrap();
    assert!(without.get("trace").is_none() && without.get("faults").is_none());
}

#[test]
fn run_takes_files_and_directories_and_says_what_it_found() {
    let dir = scratch("scenarios");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let short = "[model]\nsafety_ms = 8000\nliveness_ms = 0\n";
    let pass = format!("name = \"quiet\"\nseed = 1\nexpect = \"pass\"\npostmortem = \"Nothing to see.\"\n{short}");
    std::fs::write(dir.join("a-pass.toml"), pass).unwrap();
    let wrong =
        "name = \"wrong\"\nseed = 9\nvariant = \"sink-unfenced\"\nexpect = \"lease-exclusion\"\n[model]\nkeys = 1\n";
    let wrong_path = scratch("wrong.toml");
    std::fs::write(&wrong_path, wrong).unwrap();
    let output = fencesim(&["run", dir.to_str().unwrap(), wrong_path.to_str().unwrap(), "--postmortem"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "scenario quiet: expect pass — matched");
    assert_eq!(lines[1], "  Nothing to see.");
    assert!(
        lines[2].starts_with("scenario wrong: expect lease-exclusion — NOT matched; found fenced-write at "),
        "{text}"
    );
    assert_eq!(lines[3], "  (no postmortem)");
    assert_eq!(lines[4], "run: 2 scenarios, 1 matched");
}

#[test]
fn counts_of_one_are_singular() {
    let text = ok(&[
        "replay",
        "--seed",
        "1",
        "--set",
        "nodes=1",
        "--set",
        "clients=1",
        "--set",
        "keys=1",
        SHORT[0],
        SHORT[1],
        SHORT[2],
        SHORT[3],
    ]);
    let last = text.lines().rev().nth(1).unwrap();
    assert!(last.contains(" 1 election,"), "{last}");
    assert!(!last.contains(" 1 elections") && !last.contains(" 1 grants"), "{last}");
}

#[test]
fn a_hunt_tells_a_linearizable_failure_in_one_line_and_replay_shows_its_table() {
    let text = ok(&["hunt", "--variant", "released-before-commit", "--seeds", "1..2"]);
    let fails: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL seed 1: linearizable")).collect();
    assert!(!fails.is_empty(), "{text}");
    for line in &fails {
        assert!(line.ends_with("; replay shows them"), "{line}");
    }
    assert!(!text.contains("client  request"), "no table in a hunt:\n{text}");
    let replayed = ok(&["replay", "--seed", "1", "--variant", "released-before-commit"]);
    assert!(replayed.contains("VIOLATION linearizable") && replayed.contains("client  request"), "{replayed}");
}

/// Twenty-four workers on one key keep it busy without a pause: seed 0's
/// key has a segment whose linearizability search reaches its bound. The
/// run is "ok", and says which key it did not judge; seed 1's is judged.
#[test]
fn a_key_left_undecided_is_said_by_replay_and_hunt() {
    let crowded = ["--set", "keys=1", "--set", "clients=24"];
    let replayed = ok(&[&["replay", "--seed", "0"][..], &crowded].concat());
    let line = replayed.lines().find(|l| l.starts_with("UNDECIDED ")).expect("an UNDECIDED line");
    let named = "UNDECIDED linearizable: invoice/B-1042 not judged: a search over a segment of its ";
    assert!(line.starts_with(named), "{line}");
    assert!(replayed.contains("seed 0 variant default: ok"), "{replayed}");
    let json: Value =
        serde_json::from_str(&ok(&[&["replay", "--seed", "0", "--json"][..], &crowded].concat())).unwrap();
    assert_eq!(json["undecided"][0]["key"], "invoice/B-1042");
    let hunt = ok(&[&["hunt", "--seeds", "0..2"][..], &crowded].concat());
    assert!(hunt.contains("\nlinearizable: 1 of 2 keys in 1 seed not judged"), "{hunt}");
    assert!(hunt.contains("  the first is seed 0, its key named (UNDECIDED line): "), "{hunt}");
    let quiet = ok(&[&["replay", "--seed", "1"][..], &crowded].concat());
    assert!(!quiet.contains("UNDECIDED"), "{quiet}");
}
