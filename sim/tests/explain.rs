//! The command line around the model keys of stalls and drift, and what
//! explains a run: findings in place in the trace, exposures in JSON and in
//! `hunt`, stalls in `--faults`.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fencesim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().expect("the binary runs")
}

fn stdout(args: &[&str]) -> String {
    let output = fencesim(args);
    assert!(output.status.code().is_some_and(|c| c < 2), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8")
}

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("explain-tests");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("scratch file");
    path
}

fn seed_file(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("seeds").join(name).display().to_string()
}

#[track_caller]
fn assert_input_error(args: &[&str], needle: &str) {
    let output = fencesim(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?} should exit 2; stderr: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?} should print exactly one line, got: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: stderr should name `{needle}`, got: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
}

#[track_caller]
fn assert_model_refused(name: &str, text: &str, needle: &str) {
    let model = scratch(name, text);
    assert_input_error(&["hunt", "--seeds", "0..2", "--model", model.to_str().unwrap()], needle);
}

#[test]
fn a_drift_bound_that_would_stop_a_clock_is_refused() {
    // Accepted before, then 54 of 100 seeds panicked: "a local clock must move forward (rate_ppm -1900000)".
    assert_model_refused(
        "beyond-100000.toml",
        "drift_ppm_max = 100000\ndrift_beyond_bound = true\n",
        "`drift_ppm_max` must be at most 25000 with `drift_beyond_bound = true`",
    );
    assert_model_refused("real-too-far.toml", "drift_ppm_real_max = 500001\n", "drift_ppm_real_max");
}

#[test]
fn stall_keys_are_range_checked() {
    assert_model_refused("stall-zero.toml", "stall_ms_max = 0\n", "stall_ms_max");
    assert_model_refused("stall-long.toml", "stall_ms_max = 3600001\n", "stall_ms_max");
    // A value of the wrong type is a TOML error: its line and a caret follow the first line.
    let model = scratch("stalls-word.toml", "stalls = \"no\"\n");
    let output = fencesim(&["hunt", "--seeds", "0..2", "--model", model.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.lines().next().is_some_and(|l| l.contains("invalid type") && l.contains("stalls-word.toml")),
        "{stderr}"
    );
}

#[test]
fn a_fault_file_clock_that_would_stop_is_refused() {
    let plan = r#"[{"at_ms": 0, "fault": {"ClockRate": {"actor": {"Server": 0}, "ppm": -1900000}}}]"#;
    let file = scratch("stopped-clock.json", plan);
    assert_input_error(
        &["replay", "--seed", "1", "--fault-file", file.to_str().unwrap()],
        "a clock rate must be within",
    );
}

#[test]
fn a_high_real_drift_runs() {
    let model = scratch("real-3000.toml", "drift_ppm_real_max = 3000\nsafety_ms = 8000\nliveness_ms = 2000\n");
    let output = fencesim(&["hunt", "--seeds", "0..2", "--model", model.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.code().is_some_and(|c| c < 2), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(!text.contains("panic"), "{text}");
    assert!(text.contains("hunt: 2 seeds"), "{text}");
}

#[test]
fn a_violation_is_told_in_place_and_at_the_end_and_the_hash_ignores_both() {
    let file = seed_file("0000-sink-unfenced.toml");
    let traced = stdout(&["run", &file, "--trace"]);
    let lines: Vec<&str> = traced.lines().collect();
    let in_place = lines.iter().position(|l| l.contains("chk   VIOLATION fenced-write at 2065ms")).expect("in place");
    assert!(lines[in_place - 1].trim_start().starts_with("2065."), "right after its instant's events");
    assert!(lines.iter().any(|l| l.starts_with("VIOLATION fenced-write at 2065ms")), "and at the end");
    let plain = stdout(&["run", &file]);
    assert_eq!(
        traced.lines().find(|l| l.starts_with("trace-hash")),
        plain.lines().find(|l| l.starts_with("trace-hash"))
    );
    // The worker's stall before its stale write is a stall, not a pause,
    // told by what it waits for.
    let stall = "c1    stalls between its lease check and its write until a write on invoice/B-1043 under a token \
                 above tok44 is accepted (at most 2000ms)";
    assert!(traced.contains(stall), "{traced}");
}

#[test]
fn exposures_are_explained_in_the_trace_in_json_and_by_hunt() {
    let traced = stdout(&["replay", "--seed", "2", "--trace"]);
    let line = traced.lines().find(|l| l.contains("chk   EXPOSURE")).expect("an EXPOSURE line in the trace");
    assert!(line.contains("both believed they held invoice/B-1042") && line.contains("clock stepped"), "{line}");
    let json: serde_json::Value = serde_json::from_str(&stdout(&["replay", "--seed", "2", "--json"])).unwrap();
    let exposure = &json["exposures"][0];
    assert_eq!(json["exposures"].as_array().unwrap().len() as u64, json["lease_exposures"].as_u64().unwrap());
    assert_eq!(exposure["beliefs"].as_array().map(Vec::len), Some(2));
    assert_eq!(exposure["causes"][0]["cause"], "step", "{exposure}");
    assert!(exposure["causes"][0]["actor"].as_str().is_some_and(|a| a.starts_with('n')), "{exposure}");

    let hunt: serde_json::Value = serde_json::from_str(&stdout(&["hunt", "--seeds", "2..3", "--json"])).unwrap();
    assert_eq!(hunt["exposures"][0]["seed"], 2);
    assert_eq!(hunt["exposures"][0]["at_us"], exposure["at_us"]);
    assert!(hunt["exposures"][0]["replay"].as_str().unwrap().ends_with("--trace"));
    let text = stdout(&["hunt", "--seeds", "2..3"]);
    assert!(text.contains("the first is seed 2"), "{text}");
}

#[test]
fn faults_list_the_workers_stalls_with_the_schedule() {
    let text = stdout(&["replay", "--seed", "2", "--faults"]);
    let stalls: Vec<&str> = text.lines().filter(|l| l.contains("ms  stall c")).collect();
    assert!(!stalls.is_empty(), "{text}");
    let calm = scratch("no-stalls.toml", "stalls = false\n");
    let text = stdout(&["replay", "--seed", "2", "--faults", "--model", calm.to_str().unwrap()]);
    assert!(!text.contains("ms  stall c"), "{text}");
}
