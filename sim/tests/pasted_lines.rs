//! Every line the tool prints for a person to paste runs as printed: from
//! the clone's root (where a `cargo run` line must run) and from any other
//! directory, whatever directory the command that printed it ran in. Files
//! a printed line names are absolute paths.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The clone's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("sim/ is in the clone").to_path_buf()
}

/// A fresh scratch directory under the target dir, named after the test.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pasted-lines").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A directory whose only `fencesim` is this build: printed lines start
/// with `fencesim`, and a shell runs them as a person would.
fn path_with_fencesim(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_fencesim"), bin.join("fencesim")).unwrap();
    bin
}

/// `fencesim ARGS` run in `cwd` with `PATH` set to `path`.
fn fencesim_in(cwd: &Path, path: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(args)
        .current_dir(cwd)
        .env("PATH", path)
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `line` through `sh -c`, as pasted into a terminal in `cwd`.
#[track_caller]
fn run_pasted(line: &str, cwd: &Path, path: &Path) -> Output {
    let output = Command::new("/bin/sh").args(["-c", line]).current_dir(cwd).env("PATH", path).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.code().is_some_and(|c| c < 2), "`{line}` in {}: {stderr}", cwd.display());
    output
}

/// The text after `prefix` on the first line that has it.
#[track_caller]
fn after<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines().find_map(|l| l.trim_start().strip_prefix(prefix)).unwrap_or_else(|| panic!("`{prefix}` in {text}"))
}

/// How a line starts when `fencesim` is not installed: `cargo run` of the
/// build's profile for a build under `target/`, else the binary's path.
fn not_installed() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_fencesim"));
    let profile = bin.parent().expect("a profile directory");
    if !profile.parent().is_some_and(|dir| dir.ends_with("target")) {
        return bin.display().to_string();
    }
    if profile.ends_with("release") {
        "cargo run --release -p fencesim --".to_string()
    } else {
        "cargo run -p fencesim --".to_string()
    }
}

/// A hunt started outside the clone with a relative `--model`, and a shrink
/// with a relative `--out`: their lines name absolute paths and run from the
/// clone's root and from elsewhere; without `fencesim` installed the same
/// lines start with `cargo run`.
#[test]
fn lines_from_a_hunt_and_a_shrink_elsewhere_run_from_the_root_and_anywhere() {
    let dir = scratch("relative");
    let bin = path_with_fencesim(&dir);
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("m3.toml"), "keys = 1\n").unwrap();
    let model = elsewhere.join("m3.toml");
    let hunt = ["hunt", "--variant", "sink-unfenced", "--seeds", "9..10", "--model", "m3.toml"];
    let text = stdout(&fencesim_in(&elsewhere, &bin, &hunt));
    let replay = after(&text, "replay: ");
    assert_eq!(replay, format!("fencesim replay --seed 9 --variant sink-unfenced --model {}", model.display()));
    let shrink = [
        "shrink",
        "--seed",
        "9",
        "--variant",
        "sink-unfenced",
        "--model",
        "m3.toml",
        "--out",
        "shrunk.toml",
        "--budget-s",
        "5",
        "--robustness-seeds",
        "0",
        "--probes",
        "0",
    ];
    let text = stdout(&fencesim_in(&elsewhere, &bin, &shrink));
    let shrunk = elsewhere.join("shrunk.toml");
    let wrote = after(&text, "wrote ");
    assert_eq!(wrote, format!("{0} — replay: fencesim run {0} --trace", shrunk.display()));
    let run = wrote.split_once(" — replay: ").expect("a replay after the path").1;
    for cwd in [root(), dir.clone()] {
        let replayed = stdout(&run_pasted(replay, &cwd, &bin));
        assert!(replayed.contains("VIOLATION fenced-write"), "{replay} in {}: {replayed}", cwd.display());
        let ran = stdout(&run_pasted(run, &cwd, &bin));
        assert!(ran.contains("VIOLATION fenced-write"), "{run} in {}: {ran}", cwd.display());
    }
    // Not installed: the same lines, run through cargo (or by the binary's
    // path, for a build outside a `target/` directory, which runs as is).
    let empty = Path::new("");
    let text = stdout(&fencesim_in(&elsewhere, empty, &hunt));
    let replay_cargo = after(&text, "replay: ").to_string();
    assert_eq!(replay_cargo, format!("{} {}", not_installed(), replay.strip_prefix("fencesim ").unwrap()));
    let text = stdout(&fencesim_in(&elsewhere, empty, &shrink));
    assert_eq!(after(&text, "wrote "), wrote.replace("replay: fencesim ", &format!("replay: {} ", not_installed())));
    if !not_installed().starts_with("cargo ") {
        for cwd in [root(), dir.clone()] {
            let replayed = stdout(&run_pasted(&replay_cargo, &cwd, empty));
            assert!(replayed.contains("VIOLATION fenced-write"), "{replay_cargo}: {replayed}");
        }
    }
}

/// `hunt --save DIR` says where each scenario went and how to run it; the
/// line runs as printed from the clone's root and from elsewhere.
#[test]
fn hunt_save_says_what_it_wrote() {
    let dir = scratch("save");
    let bin = path_with_fencesim(&dir);
    let hunt = ["hunt", "--variant", "sink-unfenced", "--seeds", "9..10", "--set", "keys=1", "--save", "saved"];
    let text = stdout(&fencesim_in(&dir, &bin, &hunt));
    let saved = dir.join("saved").join("0009-fenced-write.toml");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[1].starts_with("  replay: "), "{text}");
    assert_eq!(lines[2], format!("  wrote {0} — replay: fencesim run {0} --trace", saved.display()), "{text}");
    let run = lines[2].split_once(" — replay: ").unwrap().1;
    for cwd in [root(), dir.join("bin")] {
        let ran = stdout(&run_pasted(run, &cwd, &bin));
        assert!(ran.contains("scenario fenced-write-seed-9: expect fenced-write — matched"), "{ran}");
    }
}

/// `--timeline FILE` says `wrote FILE` (absolute) as the last line of
/// `replay` and `run`.
#[test]
fn a_timeline_says_where_it_went() {
    let dir = scratch("timeline");
    let bin = path_with_fencesim(&dir);
    let short = ["--set", "safety_ms=3000", "--set", "liveness_ms=0"];
    let replay = [&["replay", "--seed", "3", "--timeline", "r.svg"][..], &short].concat();
    let text = stdout(&fencesim_in(&dir, &bin, &replay));
    assert_eq!(text.lines().last(), Some(format!("wrote {}", dir.join("r.svg").display()).as_str()), "{text}");
    assert!(dir.join("r.svg").is_file());
    let scenario = dir.join("s.toml");
    std::fs::write(
        &scenario,
        "name = \"s\"\nseed = 3\nexpect = \"pass\"\n[model]\nsafety_ms = 3000\nliveness_ms = 0\n",
    )
    .unwrap();
    let text = stdout(&fencesim_in(&dir, &bin, &["run", "s.toml", "--timeline", "s.html"]));
    assert_eq!(text.lines().last(), Some(format!("wrote {}", dir.join("s.html").display()).as_str()), "{text}");
    assert!(dir.join("s.html").is_file());
    // JSON output stays one value: the file is named by the flag alone.
    let json = [&replay[..], &["--json"]].concat();
    let text = stdout(&fencesim_in(&dir, &bin, &json));
    assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok(), "{text}");
}
