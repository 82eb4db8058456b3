//! Swarm testing through the command line: a swarm failure is replayed and
//! pinned like any other, and the drawn configuration is printed first.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fencesim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn trace_hash(output: &Output) -> String {
    let text = stdout(output);
    text.lines().find_map(|l| l.strip_prefix("trace-hash: ")).expect("a trace hash").to_string()
}

#[test]
fn a_swarm_failure_saved_by_hunt_replays_to_the_same_verdict() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("swarm-save");
    let _ = std::fs::remove_dir_all(&dir);
    let hunt = fencesim(&[
        "hunt",
        "--variant",
        "sink-unfenced",
        "--seeds",
        "0..6",
        "--jobs",
        "1",
        "--swarm",
        "--save",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(hunt.status.code(), Some(1), "sink-unfenced fails under swarm: {}", stdout(&hunt));
    assert!(stdout(&hunt).contains("--variant sink-unfenced --swarm"), "the replay line keeps --swarm");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let file = files.first().expect("hunt --save wrote a scenario file");
    let seed: String = file.file_name().unwrap().to_str().unwrap().chars().take(4).collect();
    let seed = seed.trim_start_matches('0');
    let seed = if seed.is_empty() { "0" } else { seed };

    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains("swarm = false"), "the file records the drawn model, not the draw:\n{text}");
    let run = fencesim(&["run", file.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(0), "the saved file matches its expect: {}", stdout(&run));
    let replay = fencesim(&["replay", "--seed", seed, "--variant", "sink-unfenced", "--swarm"]);
    assert_eq!(replay.status.code(), Some(1));
    assert!(stdout(&replay).starts_with("swarm: nodes="), "replay prints the drawn configuration first");
    assert_eq!(trace_hash(&run), trace_hash(&replay), "the file reproduces the swarm run byte for byte");
}

#[test]
fn a_swarm_key_in_a_model_file_draws_like_the_flag() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("swarm-key");
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("swarm.toml");
    std::fs::write(&model, "swarm = true\n").unwrap();
    let by_key = fencesim(&["replay", "--seed", "5", "--model", model.to_str().unwrap()]);
    let by_flag = fencesim(&["replay", "--seed", "5", "--swarm"]);
    assert_eq!(stdout(&by_key), stdout(&by_flag));
    let plain = fencesim(&["replay", "--seed", "5"]);
    assert!(!stdout(&plain).starts_with("swarm:"));
    assert_ne!(trace_hash(&plain), trace_hash(&by_flag));
}

#[test]
fn a_fault_rate_out_of_range_is_bad_input() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("swarm-key");
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("no-faults.toml");
    std::fs::write(&model, "fault_rate = 0.0\n").unwrap();
    let output = fencesim(&["replay", "--seed", "1", "--swarm", "--model", model.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("fault_rate"), "{stderr}");
}
