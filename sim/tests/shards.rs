//! A campaign across machines, through the binary: shards, seed records,
//! resume after a kill, and `merge` (CLI.md, `hunt --shard`, `--records`, `merge`).

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn fencesim() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fencesim"));
    command.env_remove("JOB_COMPLETION_INDEX").env_remove("SLURM_ARRAY_TASK_ID");
    command
}

fn run(args: &[&str]) -> Output {
    fencesim().args(args).output().expect("the binary runs")
}

/// A fresh scratch directory under the target dir, named after the test.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("shards-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
    })
}

/// The seeds of a record file, one entry per line.
fn recorded_seeds(path: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(path).expect("records file");
    text.lines().map(|line| serde_json::from_str::<Value>(line).expect("a record")["seed"].as_u64().unwrap()).collect()
}

/// The summary keys a merge must agree on with the hunt it stands for.
const SUMMARY_KEYS: [&str; 9] = [
    "seeds_run",
    "coverage",
    "failing_seeds",
    "by_property",
    "lease_exposures",
    "lease_exposure_seeds",
    "sim_ms",
    "messages",
    "variant",
];

#[test]
fn four_shards_in_parallel_merge_to_the_whole_hunt() {
    let dir = scratch("four");
    let hunt = ["hunt", "--seeds", "0..16", "--variant", "sink-unfenced", "--jobs", "1", "--json"];
    let shards: Vec<_> = (0..4)
        .map(|index| {
            let records = dir.join(format!("shard-{index}.jsonl"));
            fencesim()
                .args(hunt)
                .args(["--shard", "auto/4", "--records", records.to_str().unwrap()])
                .env("JOB_COMPLETION_INDEX", index.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .expect("a shard starts")
        })
        .collect();
    for shard in shards {
        let output = shard.wait_with_output().expect("a shard ends");
        assert!(matches!(output.status.code(), Some(0 | 1)), "a shard failed: {output:?}");
    }
    let mut seeds: Vec<u64> = (0..4).flat_map(|i| recorded_seeds(&dir.join(format!("shard-{i}.jsonl")))).collect();
    seeds.sort_unstable();
    assert_eq!(seeds, (0..16).collect::<Vec<u64>>(), "every seed exactly once");
    let whole = run(&hunt);
    let merged = run(&["merge", dir.to_str().unwrap(), "--json"]);
    assert_eq!(merged.status.code(), whole.status.code(), "{merged:?}");
    let (whole, merged) = (json(&whole), json(&merged));
    for key in SUMMARY_KEYS {
        assert_eq!(merged[key], whole[key], "{key}");
    }
    assert!(whole["failing_seeds"].as_u64().unwrap() > 0, "sink-unfenced fails within 16 seeds");
    assert_eq!((merged["records"].as_u64(), merged["duplicates"].as_u64()), (Some(16), Some(0)));
}

#[test]
fn a_killed_shard_resumes_where_it_stopped() {
    let dir = scratch("resume");
    let records = dir.join("shard.jsonl");
    let hunt = ["hunt", "--seeds", "0..24", "--shard", "1/2", "--jobs", "1", "--records", records.to_str().unwrap()];
    let mut first = fencesim().args(hunt).stdout(Stdio::null()).spawn().expect("the shard starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::fs::read_to_string(&records).map_or(0, |t| t.lines().count()) < 3 {
        assert!(Instant::now() < deadline, "no records after 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().expect("kill the shard");
    first.wait().expect("the shard is gone");
    // A kill mid-write leaves a torn last line: the resume cuts it off.
    let mut text = std::fs::read_to_string(&records).unwrap();
    let done = text.lines().count();
    assert!(done < 12, "the shard was killed before its end ({done} of 12 seeds)");
    text.push_str("{\"format\":1,\"fencesim\":\"0.");
    std::fs::write(&records, text).unwrap();

    let resumed = fencesim().args(hunt).arg("--json").output().expect("the shard resumes");
    assert_eq!(resumed.status.code(), Some(0), "{resumed:?}");
    let resumed = json(&resumed);
    assert_eq!(resumed["seeds_resumed"].as_u64(), Some(done as u64));
    assert_eq!(resumed["seeds_run"].as_u64(), Some(12), "the summary covers the whole shard");
    let mut seeds = recorded_seeds(&records);
    seeds.sort_unstable();
    assert_eq!(seeds, (0..24).filter(|s| s % 2 == 1).collect::<Vec<u64>>(), "every seed of the shard once");
    let merged = json(&run(&["merge", records.to_str().unwrap(), "--json"]));
    for key in SUMMARY_KEYS {
        assert_eq!(merged[key], resumed[key], "{key}");
    }
}

fn record(seed: u64, model_hash: &str, trace_hash: &str) -> String {
    format!(
        concat!(
            r#"{{"format":1,"fencesim":"0.1.0","commit":"abc","model_hash":"{}","variant":"default","seed":{},"#,
            r#""verdict":"pass","properties":[],"trace_hash":"{}","sim_ms":40000,"wall_ms":9,"messages":10,"lease_exposures":0}}"#,
            "\n"
        ),
        model_hash, seed, trace_hash
    )
}

#[test]
fn merge_refuses_records_of_another_model_unless_told() {
    let dir = scratch("mixed");
    let file = dir.join("mixed.jsonl");
    std::fs::write(&file, record(0, "aaaa", "01") + &record(1, "bbbb", "02")).unwrap();
    let refused = run(&["merge", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("mixed.jsonl:2"), "names the file and line: {stderr}");
    let allowed = run(&["merge", file.to_str().unwrap(), "--allow-mixed", "--json"]);
    assert_eq!(allowed.status.code(), Some(0));
    assert_eq!(json(&allowed)["seeds_run"].as_u64(), Some(2));
}

#[test]
fn one_seed_with_two_trace_hashes_is_a_determinism_failure() {
    let dir = scratch("determinism");
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    std::fs::write(&a, record(5, "aaaa", "0123") + &record(6, "aaaa", "0456")).unwrap();
    std::fs::write(&b, record(5, "aaaa", "0123") + &record(6, "aaaa", "0789")).unwrap();
    let merged = run(&["merge", a.to_str().unwrap(), b.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(merged.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL seed 6: determinism"), "{stdout}");
    assert!(stdout.contains("a.jsonl:2") && stdout.contains("b.jsonl:2"), "both records: {stdout}");
    let json = json(&run(&["merge", a.to_str().unwrap(), b.to_str().unwrap(), "--json"]));
    assert_eq!(json["duplicates"].as_u64(), Some(1), "seed 5 twice with one hash is no failure");
    let counts: BTreeMap<String, Value> = serde_json::from_value(json["by_property"].clone()).unwrap();
    assert_eq!(counts["determinism"]["seeds"].as_u64(), Some(1));
}

#[test]
fn a_shard_index_missing_or_out_of_range_is_an_input_error() {
    for (args, env, needle) in [
        (["hunt", "--shard", "auto/4"], None, "JOB_COMPLETION_INDEX"),
        (["hunt", "--shard", "auto/4"], Some("4"), "SLURM_ARRAY_TASK_ID=4"),
        (["hunt", "--shard", "4/4"], None, "--shard 4/4"),
    ] {
        let mut command = fencesim();
        if let Some(index) = env {
            command.env("SLURM_ARRAY_TASK_ID", index);
        }
        let output = command.args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The last line up to its timing (`…, N failing;`): the rest is wall time.
fn without_timing(line: &str) -> &str {
    line.split_once(';').map_or(line, |(counts, _)| counts)
}

#[test]
fn merged_text_reads_like_the_unsharded_hunt() {
    let dir = scratch("text");
    // Linearizable failures (details over one line each) and lease exposures.
    let hunt = ["hunt", "--seeds", "0..3", "--variant", "released-before-commit", "--jobs", "1"];
    for index in 0..2 {
        let records = dir.join(format!("shard-{index}.jsonl"));
        let shard = format!("{index}/2");
        let output = run(&[&hunt[..], &["--shard", &shard, "--records", records.to_str().unwrap()]].concat());
        assert!(matches!(output.status.code(), Some(0 | 1)), "{output:?}");
    }
    let whole = text(&run(&hunt));
    let merged = text(&run(&["merge", dir.to_str().unwrap()]));
    assert!(whole.contains("FAIL seed 1: linearizable at "), "{whole}");
    assert!(whole.contains("  the first is seed "), "an exposure line: {whole}");
    // The merge's own line comes before the last; the rest is the hunt's, line for line.
    let mut merged: Vec<&str> = merged.lines().filter(|l| !l.starts_with("merge: ")).collect();
    let mut whole: Vec<&str> = whole.lines().collect();
    let (merged_last, whole_last) = (merged.pop().unwrap(), whole.pop().unwrap());
    assert_eq!(merged, whole);
    assert_eq!(without_timing(merged_last), without_timing(whole_last));
}

/// Sends `signal` (`TERM`, `INT`) to a process by its PID.
fn send(signal: &str, pid: u32) {
    let status = Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid}");
}

#[test]
fn a_signal_ends_a_logged_hunt_with_its_summary_and_the_shells_code() {
    use std::io::BufRead;
    for (signal, code) in [("TERM", 143), ("INT", 130)] {
        let dir = scratch(&format!("signal-{signal}"));
        let records = dir.join("shard.jsonl");
        let hunt = ["hunt", "--seeds", "0..1000000", "--jobs", "1", "--records", records.to_str().unwrap()];
        // stderr is a pipe, as in a pod's log: no bar, a progress line every second.
        let mut child = fencesim()
            .args(hunt)
            .args(["--progress-s", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the hunt starts");
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let progress = rx.recv_timeout(Duration::from_secs(120));
        // Stop the hunt whatever the progress line said, then judge.
        send(signal, child.id());
        let output = child.wait_with_output().expect("the hunt ends");
        reader.join().unwrap();
        let progress = progress.expect("a progress line on stderr within 120 s");
        assert!(
            progress.starts_with("hunt: ")
                && progress.contains(" of 1000000 seeds run, 0 failing, ")
                && progress.ends_with(" left"),
            "{progress}"
        );
        assert_eq!(output.status.code(), Some(code), "SIG{signal}: {output:?}");
        let stdout = text(&output);
        assert!(stdout.contains("interrupted: the summary covers the "), "{stdout}");
        let done = recorded_seeds(&records).len();
        assert!(done > 0 && stdout.contains(&format!("hunt: {done} seed")), "{done} records; {stdout}");
        // The records hold every finished seed: a rerun resumes them all.
        let resumed =
            json(&run(&["hunt", "--seeds", &format!("0..{done}"), "--records", records.to_str().unwrap(), "--json"]));
        assert_eq!(resumed["seeds_resumed"].as_u64(), Some(done as u64), "SIG{signal}");
    }
}

#[test]
fn a_resumed_hunt_counts_its_speed_over_the_seeds_it_ran() {
    let dir = scratch("resumed-speed");
    let records = dir.join("all.jsonl");
    let hunt = ["hunt", "--seeds", "0..3", "--jobs", "1", "--records", records.to_str().unwrap()];
    let first = text(&run(&hunt));
    assert!(first.lines().last().unwrap().contains(" seeds/s, "), "{first}");
    let again = text(&run(&hunt));
    let last = again.lines().last().unwrap();
    assert!(
        last.starts_with(
            "hunt: 3 seeds of variant default, 0 failing; every one read from the records file, none run, "
        ),
        "{last}"
    );
}

#[test]
fn merge_names_the_shards_it_has_no_record_of() {
    let dir = scratch("missing");
    let records = dir.join("shard-0.jsonl");
    let hunt = ["hunt", "--seeds", "0..4", "--shard", "0/3", "--jobs", "1", "--records", records.to_str().unwrap()];
    assert_eq!(run(&hunt).status.code(), Some(0));
    let merged = run(&["merge", records.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&merged.stderr);
    assert!(
        stderr.contains("warning: no records of 2 of 3 shards: 1/3, 2/3 (the summary covers the 1 merged)"),
        "{stderr}"
    );
    assert_eq!(merged.status.code(), Some(0), "a warning, not an error");
    // Every shard present: no warning.
    for index in 1..3 {
        let shard = format!("{index}/3");
        let records = dir.join(format!("shard-{index}.jsonl"));
        let hunt =
            ["hunt", "--seeds", "0..4", "--shard", &shard, "--jobs", "1", "--records", records.to_str().unwrap()];
        assert_eq!(run(&hunt).status.code(), Some(0));
    }
    let merged = run(&["merge", dir.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&merged.stderr).contains("no records of"), "{merged:?}");
}

#[test]
fn version_names_the_commit_and_the_trees_state() {
    let output = run(&["--version"]);
    let line = text(&output);
    let (version, rest) = line.trim_end().split_once(" (commit ").expect("a commit in --version");
    assert_eq!(version, concat!("fencesim ", env!("CARGO_PKG_VERSION")));
    let (commit, tree) = rest.split_once(", ").expect("the tree's state");
    assert!(commit == "unknown" || commit.bytes().all(|b| b.is_ascii_hexdigit()), "{line}");
    assert!(["clean tree)", "dirty tree)", "unknown tree)"].contains(&tree), "{line}");
}

#[test]
fn stdin_merges_like_a_file_and_shows_both_records_of_a_conflict() {
    let dir = scratch("stdin");
    let file = dir.join("a.jsonl");
    std::fs::write(&file, record(5, "aaaa", "0123") + &record(6, "aaaa", "0456")).unwrap();
    // Seed 6 again from stdin with another trace hash, seed 5 again with the same.
    let mut child = fencesim()
        .args(["merge", file.to_str().unwrap(), "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("merge starts");
    let piped = record(5, "aaaa", "0123") + &record(6, "aaaa", "0789") + &record(7, "aaaa", "0abc");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), piped.as_bytes()).unwrap();
    drop(child.stdin.take());
    let merged = child.wait_with_output().expect("merge ends");
    assert_eq!(merged.status.code(), Some(1), "{merged:?}");
    let json = json(&merged);
    assert_eq!(json["records"].as_u64(), Some(5));
    assert_eq!(json["seeds_run"].as_u64(), Some(3));
    assert_eq!(json["duplicates"].as_u64(), Some(1));
    let conflict = &json["determinism"][0];
    assert_eq!(conflict["seed"].as_u64(), Some(6));
    assert_eq!(conflict["second_place"].as_str(), Some("-:2"), "{conflict}");
    assert_eq!(conflict["second"]["trace_hash"].as_str(), Some("0789"), "stdin's record, read again from its copy");
}

/// A steered hunt (`hunt --swarm --steer`): resumed from a records file cut
/// mid-round, it weights every round as the uninterrupted hunt did; each
/// steered failure's replay line, run alone, fails the same way.
#[test]
fn a_steered_hunt_resumes_as_it_ran_and_its_failures_replay_alone() {
    let dir = scratch("steer");
    let whole_records = dir.join("whole.jsonl");
    let hunt = |records: &Path| {
        let args = ["hunt", "--seeds", "0..60", "--variant", "sink-unfenced", "--swarm", "--steer", "--jobs", "2"];
        run(&[&args[..], &["--json", "--records", records.to_str().unwrap()]].concat())
    };
    let whole = hunt(&whole_records);
    assert_eq!(whole.status.code(), Some(1), "sink-unfenced fails: {whole:?}");
    let whole = json(&whole);
    assert_eq!(whole["steer"]["rounds"].as_u64(), Some(3), "60 seeds are 3 rounds of 25: {}", whole["steer"]);

    // The records of a hunt killed in its second round, and the hunt run again over them.
    let text = std::fs::read_to_string(&whole_records).unwrap();
    let cut: String = text.lines().take(35).map(|line| format!("{line}\n")).collect();
    let resumed_records = dir.join("resumed.jsonl");
    std::fs::write(&resumed_records, cut).unwrap();
    let resumed = json(&hunt(&resumed_records));
    assert_eq!(resumed["seeds_resumed"].as_u64(), Some(35));
    for key in SUMMARY_KEYS.iter().copied().chain(["steer"]) {
        assert_eq!(resumed[key], whole[key], "{key}");
    }
    let by_seed = |path: &Path| -> BTreeMap<u64, (Value, Value)> {
        let text = std::fs::read_to_string(path).unwrap();
        let records = text.lines().map(|line| serde_json::from_str::<Value>(line).unwrap());
        records.map(|r| (r["seed"].as_u64().unwrap(), (r["trace_hash"].clone(), r["swarm_bias"].clone()))).collect()
    };
    assert_eq!(by_seed(&resumed_records), by_seed(&whole_records), "every seed drew and ran as in the whole hunt");

    // The first round draws fair; later rounds carry their weights in the replay line.
    let violations = whole["violations"].as_array().unwrap();
    let steered = violations.iter().find(|v| v["seed"].as_u64().unwrap() >= 25).expect("a failure after round one");
    let replay = steered["replay"].as_str().unwrap();
    assert!(replay.contains(" --swarm --set swarm_bias="), "{replay}");
    let args: Vec<&str> = replay.split(" replay ").nth(1).unwrap().split(' ').collect();
    let again = run(&[&["replay"][..], &args, &["--json"]].concat());
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    let seed = steered["seed"].as_u64().unwrap();
    let recorded = &by_seed(&whole_records)[&seed].0;
    assert_eq!(&json(&again)["trace_hash"], recorded, "the replay line reruns seed {seed} exactly");
}

#[test]
fn steering_without_swarm_is_an_input_error() {
    for args in [&["hunt", "--steer", "--seeds", "1"][..], &["variants", "--score", "--steer", "--seeds", "1"][..]] {
        let output = run(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains("--steer steers swarm's draws: add --swarm"), "{stderr}");
    }
}

/// A key `linearizable` could not decide (seed 0's, with twenty-four workers
/// on one key) is kept in the seed's record, and the merge says it as the
/// hunt did.
#[test]
fn a_merge_says_the_keys_not_judged() {
    let dir = scratch("undecided");
    let records = dir.join("r.jsonl");
    let crowded = ["--set", "keys=1", "--set", "clients=24"];
    let hunt =
        text(&run(&[&["hunt", "--seeds", "0..2", "--records", records.to_str().unwrap()][..], &crowded].concat()));
    let merged = text(&run(&["merge", records.to_str().unwrap()]));
    let said = "  the first is seed 0, its key named (UNDECIDED line): ";
    assert!(hunt.contains("\nlinearizable: 1 of 2 keys in 1 seed not judged") && hunt.contains(said), "{hunt}");
    assert!(merged.contains("\nlinearizable: 1 key in 1 seed not judged") && merged.contains(said), "{merged}");
    let json: serde_json::Value =
        serde_json::from_str(&text(&run(&["merge", records.to_str().unwrap(), "--json"]))).unwrap();
    assert_eq!(
        (json["linearizable"]["unknown"].as_u64(), json["linearizable"]["unknown_seeds"].as_u64()),
        (Some(1), Some(1))
    );
}
