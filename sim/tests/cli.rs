//! Bad input gets one clear line on stderr and exit code 2, never a panic
//! (a TOML error adds the file's line with a caret under the place).

use std::path::PathBuf;
use std::process::{Command, Output};

fn fencesim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().expect("the binary runs")
}

/// A scratch file under the target dir, named after the test.
fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-tests");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("scratch file");
    path
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

#[test]
fn unknown_model_key() {
    let model = scratch("unknown-key.toml", "nodes = 3\nflux_capacitor = true\n");
    let first = "unknown key `flux_capacitor`; `fencesim model` lists every key";
    assert_toml_error(&["replay", "--seed", "1", "--model", model.to_str().unwrap()], first, "| ^^^^^^^^^^^^^^");
}

/// A TOML error: exit 2, a first line `FILE:LINE:COL: message` naming
/// `needle`, then the file's line with a caret under the place (as the toml
/// crate points at it), never flattened.
#[track_caller]
fn assert_toml_error(args: &[&str], first_line: &str, caret_line: &str) {
    let output = fencesim(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?} should exit 2; stderr: {stderr}");
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    assert!(lines[0].contains(first_line), "{args:?}: first line should hold `{first_line}`, got: {stderr}");
    assert!(lines.iter().any(|l| l.ends_with(caret_line)), "{args:?}: a caret line `{caret_line}`, got: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
}

#[test]
fn wrong_type_in_model() {
    let model = scratch("wrong-type.toml", "nodes = \"five\"\n");
    let path = model.to_str().unwrap();
    let first = format!("{path}:1:9: invalid type: string \"five\", expected u8");
    assert_toml_error(&["replay", "--seed", "1", "--model", path], &first, "|         ^^^^^^");
}

#[test]
fn unknown_model_key_gets_a_did_you_mean() {
    let model = scratch("typo.toml", "nodes = 3\npause_ms = 3000\n");
    let path = model.to_str().unwrap();
    let first = format!("{path}:2:1: unknown key `pause_ms`; did you mean `pause_ms_max`?");
    assert_toml_error(&["replay", "--seed", "1", "--model", path], &first, "| ^^^^^^^^");
    let scenario = scratch("typo-scenario.toml", "name = \"x\"\nseed = 1\nexpct = \"pass\"\n");
    let path = scenario.to_str().unwrap();
    assert_toml_error(&["run", path], "unknown key `expct`; did you mean `expect`?", "| ^^^^^");
}

#[test]
fn pause_longer_than_a_day() {
    let model = scratch("long-pause.toml", "pause_ms_max = 100000000000\n");
    assert_input_error(
        &["hunt", "--seeds", "0..1", "--model", model.to_str().unwrap()],
        "`pause_ms_max` must be in 0..=86400000",
    );
}

#[test]
fn token_floor_inside_the_restore_epochs() {
    assert_input_error(
        &["replay", "--seed", "1", "--set", "token_floor=4294967296"],
        "`token_floor` must be in 0..=2147483648",
    );
}

#[test]
fn set_with_an_unknown_key_a_bad_value_or_no_equals() {
    assert_input_error(
        &["replay", "--seed", "1", "--set", "pause_ms=4"],
        "--set pause_ms=4: unknown key `pause_ms`; did you mean `pause_ms_max`?",
    );
    assert_input_error(
        &["hunt", "--seeds", "1", "--set", "nodes=true"],
        "--set nodes=true: invalid type: boolean `true`, expected u8",
    );
    assert_input_error(&["shrink", "--seed", "1", "--set", "nodes=4"], "model key `nodes` must be odd");
    assert_input_error(&["replay", "--seed", "1", "--set", "nodes"], "--set wants key=value, got `nodes`");
    assert_input_error(&["replay", "--seed", "1", "--set", "variant=sink-unfenced"], "use --variant");
}

#[test]
fn replay_without_its_seed_names_the_missing_argument() {
    assert_input_error(&["replay"], "the following required arguments were not provided: --seed <SEED>");
    assert_input_error(&["run"], "the following required arguments were not provided: <FILE|DIR>...");
}

#[test]
fn empty_and_malformed_seed_counts_on_every_command() {
    for command in ["hunt", "variants", "bench"] {
        let extra: &[&str] = if command == "variants" { &["--score"] } else { &[] };
        for (seeds, needle) in
            [("7..7", "7..7 is empty"), ("0", "--seeds 0 is empty"), ("x", "a count N (seeds 0..N) or a range A..B")]
        {
            let mut args = vec![command, "--seeds", seeds];
            args.extend_from_slice(extra);
            assert_input_error(&args, needle);
        }
    }
}

#[test]
fn a_long_run_of_bench_takes_two_minutes_to_a_day() {
    for minutes in ["0", "1", "1441"] {
        assert_input_error(&["bench", "--long-run-minutes", minutes], "a long run takes 2 to 1440 simulated minutes");
    }
    assert_input_error(&["bench", "--long-run-minutes", "x"], "invalid value 'x' for '--long-run-minutes");
}

/// What `bench` reads of each long run, measured in a process of its own.
#[test]
fn a_long_run_of_bench_reports_its_own_peak_in_one_json_object() {
    let output = fencesim(&["bench", "--long-run-minutes", "2"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let figures: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let peak_kib = figures["peak_kib"].as_u64().expect("peak_kib");
    if cfg!(target_os = "linux") {
        assert!((1_024..1_048_576).contains(&peak_kib), "a peak between 1 MiB and 1 GiB: {peak_kib} KiB");
    }
    assert!(figures["messages"].as_u64().expect("messages") > 1_000, "two simulated minutes send messages");
    assert!(figures["wall_s"].as_f64().expect("wall_s") > 0.0);
}

#[test]
fn run_with_a_directory_of_no_scenarios() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-tests").join("empty-dir");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    assert_input_error(&["run", dir.to_str().unwrap()], "no scenario files");
}

#[test]
fn run_with_a_timeline_of_two_scenarios() {
    let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/../seeds");
    assert_input_error(&["run", seeds, "--timeline", "x.svg"], "--timeline draws one scenario");
}

#[test]
fn even_node_count() {
    let model = scratch("even.toml", "nodes = 4\n");
    assert_input_error(&["hunt", "--seeds", "0..1", "--model", model.to_str().unwrap()], "nodes");
}

#[test]
fn raft_batching_keys_out_of_range() {
    let zero = scratch("no-entries.toml", "entries_per_message_max = 0\n");
    assert_input_error(&["replay", "--seed", "1", "--model", zero.to_str().unwrap()], "entries_per_message_max");
    let wide = scratch("wide-window.toml", "inflight_max = 100\n");
    assert_input_error(&["replay", "--seed", "1", "--model", wide.to_str().unwrap()], "inflight_max");
}

#[test]
fn fault_file_naming_a_server_the_model_lacks() {
    let plan = r#"[{"at_ms": 2000, "fault": {"ClockStep": {"actor": {"Server": 42}, "delta_ms": 5}}}]"#;
    let file = scratch("node-42.json", plan);
    assert_input_error(&["replay", "--seed", "1", "--fault-file", file.to_str().unwrap()], "event 0 (clock step n42");
}

#[test]
fn fault_file_event_past_the_safety_phase() {
    let plan = r#"[{"at_ms": 30000, "fault": "Heal"}]"#;
    let file = scratch("late-heal.json", plan);
    assert_input_error(
        &["replay", "--seed", "1", "--fault-file", file.to_str().unwrap()],
        "not inside the safety phase",
    );
}

#[test]
fn malformed_seed_range() {
    assert_input_error(&["hunt", "--seeds", "five..ten"], "--seeds");
}

#[test]
fn empty_seed_range() {
    assert_input_error(&["hunt", "--seeds", "5..2"], "5..2");
}

#[test]
fn unknown_variant() {
    assert_input_error(&["replay", "--seed", "1", "--variant", "yolo"], "yolo");
}

#[test]
fn missing_model_file() {
    assert_input_error(&["replay", "--seed", "1", "--model", "/nonexistent/model.toml"], "/nonexistent/model.toml");
}

#[test]
fn missing_scenario_file() {
    assert_input_error(&["run", "/nonexistent/scenario.toml"], "/nonexistent/scenario.toml");
}

#[test]
fn unparsable_scenario_file() {
    let file = scratch("garbage.toml", "name = \"x\"\nseed = [1, 2\n");
    let path = file.to_str().unwrap();
    assert_toml_error(&["run", path], &format!("{path}:3:1: invalid array"), "^");
}

#[test]
fn scenario_with_unknown_expectation() {
    let file = scratch("bad-expect.toml", "name = \"x\"\nseed = 1\nexpect = \"everything-fine\"\n");
    assert_input_error(&["run", file.to_str().unwrap()], "expect");
}

#[test]
fn missing_flag_value() {
    assert_input_error(&["replay", "--seed"], "--seed");
}

#[test]
fn unknown_flag() {
    assert_input_error(&["hunt", "--frobnicate"], "--frobnicate");
}

#[test]
fn variants_lists_default_first_as_json() {
    let output = fencesim(&["variants", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let list: serde_json::Value = serde_json::from_slice(&output.stdout).expect("variants --json is JSON");
    assert_eq!(list[0]["name"], "default");
    assert_eq!(list[0]["safe"], true);
    assert!(list.as_array().unwrap().len() >= 15);
}

#[test]
fn a_closed_pipe_ends_the_trace_quietly() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["replay", "--seed", "1", "--trace"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // `fencesim replay --trace | head -0`: the reader goes away at once.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("the binary ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "a closed pipe must not panic: {stderr}");
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn timeline_with_an_unknown_extension() {
    assert_input_error(&["replay", "--seed", "1", "--timeline", "run.png"], "must end in .html or .svg");
}

#[test]
fn timeline_into_a_missing_directory() {
    assert_input_error(&["replay", "--seed", "1", "--timeline", "/no/such/dir/run.svg"], "no directory /no/such/dir");
}

#[test]
fn timeline_onto_a_path_that_cannot_be_written() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-tests").join("a-directory.svg");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    assert_input_error(&["replay", "--seed", "1", "--timeline", dir.to_str().unwrap()], "cannot write");
}

#[test]
fn timeline_svg_is_the_same_for_the_same_run() {
    let model = scratch("timeline-model.toml", "safety_ms = 3000\nliveness_ms = 0\n");
    let [first, second] = ["timeline-1.svg", "timeline-2.svg"].map(|name| scratch(name, ""));
    for path in [&first, &second] {
        let args = ["replay", "--seed", "3", "--model", model.to_str().unwrap(), "--timeline", path.to_str().unwrap()];
        let output = fencesim(&args);
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let svg = std::fs::read(&first).expect("the timeline is written");
    assert!(svg.starts_with(b"<svg "), "an SVG document");
    assert_eq!(svg, std::fs::read(&second).expect("written twice"), "byte for byte the same");
}

#[test]
fn a_slip_gets_a_suggestion() {
    assert_input_error(&["hunt", "--seed", "5"], "unexpected argument '--seed' found; did you mean `--seeds`?");
    assert_input_error(
        &["hunt", "--seeds", "1", "--variant", "sink-unfence"],
        "did you mean `sink-unfenced`? (known: sink-unfenced, default,",
    );
    let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/../seeds/0000-sink-unfenced.toml");
    assert_input_error(&["replay", "--seed", "0", "--model", seeds], "this looks like a scenario file");
    assert_input_error(&["replay", "--seed", "0", "--model", seeds], " run /");
}

#[test]
fn replay_and_shrink_help_describe_seed_and_json() {
    for command in ["replay", "shrink"] {
        let output = fencesim(&[command, "--help"]);
        assert_eq!(output.status.code(), Some(0));
        let help = String::from_utf8_lossy(&output.stdout);
        let lines: Vec<&str> = help.lines().map(str::trim).collect();
        for flag in ["--seed <SEED>", "--json"] {
            let at = lines.iter().position(|l| l.starts_with(flag)).expect("the flag is listed");
            // clap puts a long description on the next line.
            let same_line = lines[at][flag.len()..].trim();
            let described = if same_line.is_empty() { lines[at + 1] } else { same_line };
            assert!(described.len() > 10 && !described.starts_with('-'), "{command} --help describes {flag}:\n{help}");
        }
    }
}

#[test]
fn a_sweep_file_is_checked_like_a_model_file() {
    let typo = scratch("sweep-typo.toml", "[sweep]\nseeds = 2\nseed_count = 3\n[axes]\nlease_ms = [500]\n");
    let path = typo.to_str().unwrap();
    let first = format!("{path}:3:1: unknown key `seed_count`; did you mean `seeds`?");
    assert_toml_error(&["explore", path], &first, "| ^^^^^^^^^^");
    let model = scratch("sweep-model-typo.toml", "[sweep]\nseeds = 2\n[model]\nnodez = 3\n[axes]\nlease_ms = [500]\n");
    assert_input_error(
        &["explore", model.to_str().unwrap()],
        "[model] key `nodez` is not a model key; did you mean `nodes`?",
    );
}

#[test]
fn real_refuses_what_it_cannot_run_before_starting_anything() {
    let cases: [(&[&str], &str); 8] = [
        (
            &["real", "--variant", "sink-max-in-memory"],
            "cannot run as real processes: it fakes the resource's durability",
        ),
        (&["real", "--variant", "client-clock-token"], "cannot run as real processes"),
        (&["real", "--swarm"], "real runs take one model"),
        (&["real", "--seconds", "0"], "--seconds must be in 1..=3600, got 0"),
        (&["real", "--resource", "mysql://x"], "--resource must be postgres://… or sqlite:PATH"),
        (
            &["real", "--node-bin", "/nonexistent/fencelock-node"],
            "--node-bin /nonexistent/fencelock-node: no such file",
        ),
        (&["real", "--set", "think_ms_max=0"], "model key `think_ms_max` sets the simulator's workers or disks"),
        (&["real", "--set", "server_fsync_ms=16"], "model key `server_fsync_ms` sets the simulator's workers"),
    ];
    for (args, needle) in cases {
        assert_input_error(args, needle);
    }
    let scenario = scratch("real-scenario-conflict.toml", "");
    let out = fencesim(&["real", "--scenario", scenario.to_str().expect("utf-8"), "--seed", "3"]);
    assert_eq!(out.status.code(), Some(2), "--scenario with --seed");
}
