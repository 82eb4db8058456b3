//! The launchers of `deploy/` (README.md, "Run it on many machines"): each
//! file parses and has the fields its engine requires, the Dockerfile builds
//! with the command CI and the README use, and the commands each launcher
//! runs are run here the way its engine would run them (the Kubernetes
//! container's arguments with `$(VAR)` expanded, the GitHub Actions steps'
//! scripts with the matrix value put in, the Slurm script with the array
//! variables set), on a small seed range: their merged records must give the
//! summary of one unsharded hunt.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml(path: &str) -> Value {
    serde_norway::from_str(&read(path)).unwrap_or_else(|e| panic!("{path} is not YAML: {e}"))
}

fn fencesim() -> &'static str {
    env!("CARGO_BIN_EXE_fencesim")
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("deploy-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
    })
}

fn words(command: &str) -> Vec<String> {
    command.split_whitespace().map(str::to_string).collect()
}

/// The one command of the project's build, as README.md and CI spell it.
const BUILD: &str = "cargo build --release -p fencesim --locked";

/// The variant the launchers are run with here, so that some shards find
/// failing seeds (exit 1) and the launchers' handling of it is exercised.
const VARIANT: &str = "sink-unfenced";
/// The seeds each launcher is run over here.
const SEEDS: &str = "0..32";

/// The summary keys a merge must agree on with the hunt it stands for.
const SUMMARY_KEYS: [&str; 8] = [
    "seeds_run",
    "failing_seeds",
    "by_property",
    "lease_exposures",
    "lease_exposure_seeds",
    "sim_ms",
    "messages",
    "variant",
];

/// `fencesim hunt --seeds SEEDS --variant VARIANT --json`, unsharded.
fn whole_hunt() -> (Option<i32>, Value) {
    let output =
        Command::new(fencesim()).args(["hunt", "--seeds", SEEDS, "--variant", VARIANT, "--json"]).output().unwrap();
    let whole = json(&output);
    assert!(whole["failing_seeds"].as_u64().unwrap() > 0, "{VARIANT} fails within {SEEDS}");
    (output.status.code(), whole)
}

/// Merges `dir`'s records and checks the summary is the unsharded hunt's.
fn assert_merge_is_the_whole_hunt(dir: &Path, engine: &str) {
    let merged = Command::new(fencesim()).args(["merge", dir.to_str().unwrap(), "--json"]).output().unwrap();
    let (code, whole) = whole_hunt();
    assert_eq!(merged.status.code(), code, "{engine}: {merged:?}");
    let merged = json(&merged);
    for key in SUMMARY_KEYS {
        assert_eq!(merged[key], whole[key], "{engine}: {key}");
    }
    assert_eq!(merged["duplicates"].as_u64(), Some(0), "{engine}: no seed run twice");
}

/// A stand-in for the binary that adds `--variant VARIANT` to a hunt.
fn binary_with_variant(dir: &Path) -> PathBuf {
    let path = dir.join("fencesim");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = hunt ]; then exec '{}' \"$@\" --variant {VARIANT}; fi\nexec '{}' \"$@\"\n",
        fencesim(),
        fencesim()
    );
    std::fs::write(&path, script).unwrap();
    let chmod = Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    assert!(chmod.success());
    path
}

// ---- Dockerfile ----

/// One instruction of a Dockerfile: keyword and its text, continuation
/// lines joined, comments and blank lines dropped.
#[derive(Debug)]
struct Instruction {
    keyword: String,
    text: String,
}

fn parse_dockerfile(text: &str) -> Vec<Instruction> {
    let mut instructions = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_empty()) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let (keyword, rest) = pending.trim().split_once(char::is_whitespace).expect("an instruction has arguments");
        instructions.push(Instruction { keyword: keyword.to_uppercase(), text: rest.trim().to_string() });
        pending.clear();
    }
    assert!(pending.is_empty(), "a continuation line ends the file");
    instructions
}

/// The stages: each `FROM` and the instructions after it.
fn stages(instructions: &[Instruction]) -> Vec<&[Instruction]> {
    let starts: Vec<usize> = (0..instructions.len()).filter(|&i| instructions[i].keyword == "FROM").collect();
    assert_eq!(starts.first(), Some(&0), "a Dockerfile starts with FROM (after ARGs we do not use)");
    let mut ends = starts[1..].to_vec();
    ends.push(instructions.len());
    starts.iter().zip(ends).map(|(&start, end)| &instructions[start..end]).collect()
}

/// The shell commands of a RUN (shell form), split at `&&` and `;`.
fn shell_commands(run: &str) -> Vec<Vec<String>> {
    run.split("&&").flat_map(|part| part.split(';')).map(words).filter(|w| !w.is_empty()).collect()
}

fn version_tuple(text: &str) -> Vec<u64> {
    text.split('.').map(|part| part.parse().unwrap_or_else(|_| panic!("a version: {text}"))).collect()
}

/// The Rust version of the builder image (`rust:1.95.0-slim-bookworm` → 1.95.0).
fn builder_toolchain() -> String {
    let instructions = parse_dockerfile(&read("deploy/Dockerfile"));
    let from = words(&stages(&instructions)[0][0].text);
    let image = from[0].strip_prefix("rust:").expect("the builder is the official Rust image");
    image.split('-').next().unwrap().to_string()
}

#[test]
fn the_dockerfile_builds_the_binary_with_the_ci_command_into_a_small_image() {
    let instructions = parse_dockerfile(&read("deploy/Dockerfile"));
    let stages = stages(&instructions);
    assert!(stages.len() >= 2, "multi-stage: a builder and a runtime image");
    let (builder, runtime) = (stages[0], stages[stages.len() - 1]);

    let from = words(&builder[0].text);
    assert!(from.len() == 3 && from[1].eq_ignore_ascii_case("as"), "the builder stage is named: {from:?}");
    let name = &from[2];
    let toolchain = builder_toolchain();
    let workspace: toml::Value = toml::from_str(&read("Cargo.toml")).unwrap();
    let msrv = workspace["workspace"]["package"]["rust-version"].as_str().unwrap();
    assert_eq!(version_tuple(&toolchain).len(), 3, "the toolchain is pinned to a release: {toolchain}");
    assert!(version_tuple(&toolchain) >= version_tuple(msrv), "the builder's Rust {toolchain} is below {msrv}");

    let runs: Vec<Vec<String>> =
        builder.iter().filter(|i| i.keyword == "RUN").flat_map(|i| shell_commands(&i.text)).collect();
    let builds: Vec<&Vec<String>> = runs.iter().filter(|w| w.starts_with(&["cargo".into(), "build".into()])).collect();
    assert_eq!(builds.len(), 1, "one cargo build in the builder: {runs:?}");
    assert_eq!(*builds[0], words(BUILD), "the build command is the project's own");
    let workdir = builder.iter().rev().find(|i| i.keyword == "WORKDIR").expect("the builder sets its WORKDIR");
    assert!(builder.iter().any(|i| i.keyword == "COPY" && words(&i.text) == ["."; 2]), "the workspace is copied");

    let runtime_from = words(&runtime[0].text);
    assert!(!runtime_from[0].starts_with("rust:"), "the runtime image is not the toolchain's");
    assert!(!runtime.iter().any(|i| i.keyword == "RUN"), "the runtime image is the base and the binary alone");
    let copies: Vec<Vec<String>> = runtime.iter().filter(|i| i.keyword == "COPY").map(|i| words(&i.text)).collect();
    let built = format!("{}/target/release/fencesim", workdir.text.trim_end_matches('/'));
    assert_eq!(copies.len(), 1, "one COPY: the binary");
    assert_eq!(copies[0][..2], [format!("--from={name}"), built], "the binary comes from the builder");
    let entrypoint = runtime.iter().find(|i| i.keyword == "ENTRYPOINT").expect("an ENTRYPOINT");
    let entrypoint: Vec<String> = serde_json::from_str(&entrypoint.text).expect("ENTRYPOINT in exec form");
    assert_eq!(entrypoint, [copies[0][2].clone()], "`docker run IMAGE hunt …` runs the binary");

    // The commands users are told to run and CI's build are this one.
    let readme = read("README.md");
    assert!(readme.lines().any(|line| line.trim() == BUILD), "README.md shows `{BUILD}`");
    assert!(readme.contains("docker build -f deploy/Dockerfile"), "README.md shows the image's build");
}

/// Whether `path` (relative, `/`-separated) is left out by a .dockerignore pattern.
fn ignored(pattern: &str, path: &str) -> bool {
    fn glob(pattern: &str, text: &str) -> bool {
        match pattern.split_once('*') {
            None => pattern == text,
            Some((head, tail)) => text.starts_with(head) && (head.len()..=text.len()).any(|i| glob(tail, &text[i..])),
        }
    }
    let pattern = pattern.trim_end_matches('/');
    let components: Vec<&str> = path.split('/').collect();
    let prefixes: Vec<String> = (1..=components.len()).map(|n| components[..n].join("/")).collect();
    match pattern.strip_prefix("**/") {
        Some(name) => components.iter().any(|c| glob(name, c)),
        None => prefixes.iter().any(|prefix| glob(pattern, prefix)),
    }
}

#[test]
fn the_build_context_keeps_the_workspace_and_leaves_out_the_build() {
    let text = read(".dockerignore");
    let patterns: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    assert!(patterns.iter().all(|p| !p.starts_with('!')), "no exceptions to reason about");
    let left_out = |path: &str| patterns.iter().any(|p| ignored(p, path));
    for needed in
        ["Cargo.toml", "Cargo.lock", ".cargo/config.toml", "core/src/lib.rs", "sim/src/main.rs", "sim/build.rs"]
    {
        assert!(root().join(needed).exists(), "{needed}");
        assert!(!left_out(needed), ".dockerignore leaves out {needed}, which the build needs");
    }
    assert!(!left_out("tests/Cargo.toml"), "every workspace member's manifest is needed");
    for heavy in ["target/release/fencesim", ".git/HEAD", "tests/tests/snapshots/x.snap.new"] {
        assert!(left_out(heavy), ".dockerignore keeps {heavy}");
    }
    assert!(ignored("**/*.snap.new", "a/b.snap.new") && !ignored("target/", "sim/target2"));
}

// ---- Kubernetes ----

fn as_u64(value: &Value, what: &str) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("{what} is a whole number: {value}"))
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map_or(Vec::new(), |a| a.iter().map(|v| v.as_str().expect("a string").to_string()).collect())
}

/// The value after `flag` in `args`.
fn after<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("{flag} in {args:?}"));
    args.get(at + 1).unwrap_or_else(|| panic!("a value after {flag}"))
}

/// Kubernetes' `$(VAR)` expansion of a container's arguments.
fn expand(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = text.to_string();
    for (name, value) in env {
        out = out.replace(&format!("$({name})"), value);
    }
    assert!(!out.contains("$("), "every $(VAR) is defined: {out}");
    out
}

/// The one container of a Job and its whole command line.
fn job_container(job: &Value) -> (&Value, Vec<String>) {
    let containers = job["spec"]["template"]["spec"]["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    let container = &containers[0];
    let mut line = strings(&container["command"]);
    line.extend(strings(&container["args"]));
    (container, line)
}

/// The claim mounted at the directory `path` is written in, and the mount.
fn mount_of<'a>(job: &'a Value, container: &'a Value, path: &str) -> (&'a str, &'a Value) {
    let mounts = container["volumeMounts"].as_array().expect("volumeMounts");
    let mount = mounts
        .iter()
        .find(|m| path.starts_with(&format!("{}/", m["mountPath"].as_str().unwrap().trim_end_matches('/'))))
        .unwrap_or_else(|| panic!("{path} is on a mounted volume"));
    let volumes = job["spec"]["template"]["spec"]["volumes"].as_array().expect("volumes");
    let volume = volumes.iter().find(|v| v["name"] == mount["name"]).expect("the mount's volume");
    (volume["persistentVolumeClaim"]["claimName"].as_str().expect("a PersistentVolumeClaim"), mount)
}

#[test]
fn the_kubernetes_indexed_job_has_what_the_engine_requires() {
    let job = yaml("deploy/kubernetes/hunt-job.yaml");
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(job["kind"], "Job");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let completions = as_u64(&spec["completions"], "completions");
    let parallelism = as_u64(&spec["parallelism"], "parallelism");
    assert!(completions >= 1 && (1..=completions).contains(&parallelism), "{completions} {parallelism}");
    as_u64(&spec["backoffLimitPerIndex"], "backoffLimitPerIndex");
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never", "required by backoffLimitPerIndex");

    // A shard that found failing seeds is done (its index marked failed), bad input fails the Job.
    let rules = spec["podFailurePolicy"]["rules"].as_array().expect("podFailurePolicy rules");
    let action_for = |code: u64| {
        rules.iter().find(|r| {
            r["onExitCodes"]["operator"] == "In"
                && r["onExitCodes"]["values"].as_array().is_some_and(|v| v.contains(&Value::from(code)))
        })
    };
    assert_eq!(action_for(1).expect("a rule for exit 1")["action"], "FailIndex");
    assert_eq!(action_for(2).expect("a rule for exit 2")["action"], "FailJob");

    let (container, line) = job_container(&job);
    assert_eq!(line[0], "hunt", "{line:?}");
    assert_eq!(after(&line, "--shard"), format!("auto/{completions}"), "--shard auto/N with N = completions");
    let records = after(&line, "--records");
    assert!(records.contains("$(JOB_COMPLETION_INDEX)") && records.ends_with(".jsonl"), "one file per index");
    let (claim, mount) = mount_of(&job, container, records);
    assert_ne!(mount["readOnly"], true, "records are written");
    let pvc = yaml("deploy/kubernetes/records-pvc.yaml");
    assert_eq!((pvc["kind"].as_str(), pvc["metadata"]["name"].as_str()), (Some("PersistentVolumeClaim"), Some(claim)));
    assert!(strings(&pvc["spec"]["accessModes"]).contains(&"ReadWriteMany".to_string()), "shards on many nodes");

    let merge = yaml("deploy/kubernetes/merge-job.yaml");
    assert_eq!((merge["apiVersion"].as_str(), merge["kind"].as_str()), (Some("batch/v1"), Some("Job")));
    let (merge_container, merge_line) = job_container(&merge);
    assert_eq!(merge_line[0], "merge");
    let records_dir = &merge_line[1];
    let (merge_claim, _) = mount_of(&merge, merge_container, &format!("{records_dir}/shard-0.jsonl"));
    assert_eq!(merge_claim, claim, "the merge reads the volume the shards write");
}

#[test]
fn the_kubernetes_shards_and_merge_run_as_the_kubelet_would_run_them() {
    let dir = scratch("kubernetes");
    let job = yaml("deploy/kubernetes/hunt-job.yaml");
    let completions = as_u64(&job["spec"]["completions"], "completions");
    let (container, line) = job_container(&job);
    let mount_path = container["volumeMounts"][0]["mountPath"].as_str().unwrap().to_string();
    for index in 0..completions {
        let env = BTreeMap::from([("JOB_COMPLETION_INDEX".to_string(), index.to_string())]);
        let mut args: Vec<String> =
            line.iter().map(|a| expand(a, &env).replace(&mount_path, dir.to_str().unwrap())).collect();
        let seeds = args.iter().position(|a| a == "--seeds").unwrap() + 1;
        args[seeds] = SEEDS.to_string();
        args.extend(["--variant".into(), VARIANT.into(), "--jobs".into(), "1".into(), "--json".into()]);
        let output =
            Command::new(fencesim()).args(&args).envs(&env).env_remove("SLURM_ARRAY_TASK_ID").output().unwrap();
        let failing = json(&output)["failing_seeds"].as_u64().unwrap();
        let expected = if failing > 0 { 1 } else { 0 };
        assert_eq!(output.status.code(), Some(expected), "shard {index}: {output:?}");
        assert!(dir.join(format!("shard-{index}.jsonl")).exists(), "shard {index} wrote its records");
    }
    assert_merge_is_the_whole_hunt(&dir, "kubernetes");
    let merge = yaml("deploy/kubernetes/merge-job.yaml");
    let (_, merge_line) = job_container(&merge);
    let args: Vec<String> = merge_line.iter().map(|a| a.replace(&mount_path, dir.to_str().unwrap())).collect();
    let merged = Command::new(fencesim()).args(&args).output().unwrap();
    assert_eq!(merged.status.code(), Some(1), "the merge job fails when a seed failed: {merged:?}");
    assert!(String::from_utf8_lossy(&merged.stdout).contains("FAIL seed"));
}

// ---- GitHub Actions ----

fn workflow() -> Value {
    yaml("deploy/github-actions/fencesim-hunt.yml")
}

/// The `run` scripts of a job's steps.
fn runs(job: &Value) -> Vec<String> {
    job["steps"].as_array().expect("steps").iter().filter_map(|s| s["run"].as_str().map(str::to_string)).collect()
}

/// The job with a matrix of shard indexes, its name, the matrix key and N.
fn shard_job(workflow: &Value) -> (String, &Value, String, u64) {
    let jobs = workflow["jobs"].as_object().expect("jobs");
    let (name, job) = jobs.iter().find(|(_, job)| job["strategy"]["matrix"].is_object()).expect("a job with a matrix");
    let matrix = job["strategy"]["matrix"].as_object().unwrap();
    assert_eq!(matrix.len(), 1, "one matrix key: the shard index");
    let (key, values) = matrix.iter().next().unwrap();
    let values: Vec<u64> = values.as_array().expect("a list").iter().map(|v| as_u64(v, "a shard index")).collect();
    let count = values.len() as u64;
    assert_eq!(values, (0..count).collect::<Vec<u64>>(), "the indexes 0..N, each once");
    (name.clone(), job, key.clone(), count)
}

#[test]
fn the_github_actions_workflow_has_a_shard_matrix_and_a_merge_job() {
    let workflow = workflow();
    assert!(workflow["on"].is_object(), "`on` is read as a key, with its triggers: {}", workflow["on"]);
    assert!(workflow["on"]["workflow_dispatch"].is_object());
    let (name, job, key, count) = shard_job(&workflow);
    assert_eq!(job["strategy"]["fail-fast"], false, "one shard's failure does not cancel the others");
    let hunt = runs(job).into_iter().find(|r| r.contains("hunt")).expect("a step runs the hunt");
    // The matrix value, as one word.
    let hunt_words = words(&hunt.replace(&format!("${{{{ matrix.{key} }}}}"), "MATRIX_VALUE"));
    assert_eq!(after(&hunt_words, "--shard"), format!("MATRIX_VALUE/{count}"), "--shard I/N with N shards");
    assert!(after(&hunt_words, "--records").contains("MATRIX_VALUE"), "one records file per shard");
    let uploads: Vec<&Value> = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("actions/upload-artifact@")))
        .collect();
    assert_eq!(uploads.len(), 1, "the records are uploaded");
    let uploaded = uploads[0]["with"]["name"].as_str().unwrap();

    let jobs = workflow["jobs"].as_object().unwrap();
    let (merge_name, merge) = jobs.iter().find(|(_, job)| runs(job).iter().any(|r| r.contains("merge"))).unwrap();
    assert_ne!(*merge_name, name);
    let needs = match &merge["needs"] {
        Value::String(one) => vec![one.clone()],
        many => strings(many),
    };
    assert!(needs.contains(&name), "{merge_name} needs {name}: {needs:?}");
    let download = merge["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["with"]["pattern"].is_string())
        .expect("the merge downloads every shard's records");
    let pattern = download["with"]["pattern"].as_str().unwrap();
    let prefix = pattern.strip_suffix('*').expect("a pattern `records-*`");
    assert!(uploaded.starts_with(prefix), "the pattern {pattern} takes the artifact {uploaded}");
    assert_eq!(download["with"]["merge-multiple"], true, "all records in one directory");

    let build_job = jobs.values().find(|job| runs(job).iter().any(|r| r.contains("cargo build"))).unwrap();
    let build = runs(build_job).into_iter().find(|r| r.contains("cargo build")).unwrap();
    assert_eq!(words(&build), words(BUILD), "the build command is the project's own");
    let toolchain = build_job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s["with"]["toolchain"].as_str())
        .expect("a pinned toolchain");
    assert_eq!(toolchain, builder_toolchain(), "the toolchain of deploy/Dockerfile's builder");
}

/// Runs a step's script as the runner does (`bash -e -o pipefail`), with
/// `${{ … }}` expressions replaced.
fn run_step(script: &str, expressions: &[(&str, &str)], cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut script = script.to_string();
    for (expression, value) in expressions {
        script = script.replace(expression, value);
    }
    assert!(!script.contains("${{"), "every expression is given: {script}");
    Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
        .current_dir(cwd)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

#[test]
fn the_github_actions_steps_run_as_the_runner_would_run_them() {
    let dir = scratch("github-actions");
    let workflow = workflow();
    let (_, job, key, count) = shard_job(&workflow);
    let hunt = runs(job).into_iter().find(|r| r.contains("hunt")).unwrap();
    let records = dir.join("records");
    std::fs::create_dir_all(&records).unwrap();
    for index in 0..count {
        let runner = dir.join(format!("shard-{index}"));
        std::fs::create_dir_all(&runner).unwrap();
        binary_with_variant(&runner);
        let shard = index.to_string();
        let output = run_step(&hunt, &[(&format!("${{{{ matrix.{key} }}}}"), &shard)], &runner, &[("SEEDS", SEEDS)]);
        assert!(output.status.success(), "shard {index} succeeds, failing seeds or not: {output:?}");
        // upload-artifact, then download-artifact with merge-multiple: one directory.
        let file = format!("shard-{index}.jsonl");
        std::fs::copy(runner.join(&file), records.join(&file)).expect("the shard's records");
    }
    assert_merge_is_the_whole_hunt(&records, "github-actions");
    let jobs = workflow["jobs"].as_object().unwrap();
    let merge = jobs.values().find_map(|job| runs(job).into_iter().find(|r| r.contains("merge"))).unwrap();
    binary_with_variant(&dir);
    let output = run_step(&merge, &[], &dir, &[]);
    assert_eq!(output.status.code(), Some(1), "the merge job fails when a seed failed: {output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("FAIL seed"));
    let summary: Value = serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["seeds_run"].as_u64(), Some(32), "summary.json covers every seed");
}

// ---- Slurm ----

/// The `#SBATCH` options of a batch script (they end at its first command).
fn sbatch_options(script: &str) -> BTreeMap<String, String> {
    let mut options = BTreeMap::new();
    for line in script.lines().skip(1) {
        let line = line.trim();
        if !line.is_empty() && !line.starts_with('#') {
            break;
        }
        if let Some(option) = line.strip_prefix("#SBATCH ") {
            let (name, value) = option.trim().split_once('=').unwrap_or((option.trim(), ""));
            options.insert(name.to_string(), value.to_string());
        }
    }
    options
}

#[test]
fn the_slurm_script_is_a_job_array_of_shards() {
    let script = read("deploy/slurm/hunt.sbatch");
    assert!(script.starts_with("#!/bin/bash\n"), "sbatch needs an interpreter line");
    let options = sbatch_options(&script);
    let array = options.get("--array").expect("#SBATCH --array before the first command");
    let range = array.split('%').next().unwrap();
    let (first, last) = range.split_once('-').expect("a range of task ids");
    assert_eq!(first, "0", "shard indexes start at 0");
    assert!(last.parse::<u64>().is_ok(), "{array}");
    let hunt = script.lines().find(|l| l.contains(" hunt ")).expect("the script runs a hunt");
    assert!(hunt.contains("--shard \"auto/$SHARDS\""), "--shard auto/N: {hunt}");
    assert!(script.contains("SHARDS=${SLURM_ARRAY_TASK_COUNT"), "N is the array's size");
    assert!(script.contains("--records \"$RECORDS/shard-$SLURM_ARRAY_TASK_ID.jsonl\""), "one file per task");
    let syntax = Command::new("bash").arg("-n").arg(root().join("deploy/slurm/hunt.sbatch")).output().unwrap();
    assert!(syntax.status.success(), "{syntax:?}");
}

/// Runs the batch script as one task of an array `0-(count-1)`.
fn slurm_task(dir: &Path, index: u64, count: u64, min: u64) -> Output {
    Command::new("bash")
        .arg(root().join("deploy/slurm/hunt.sbatch"))
        .current_dir(dir)
        .env("SLURM_ARRAY_TASK_ID", index.to_string())
        .env("SLURM_ARRAY_TASK_COUNT", count.to_string())
        .env("SLURM_ARRAY_TASK_MIN", min.to_string())
        .env("SLURM_ARRAY_TASK_MAX", (min + count - 1).to_string())
        .env("SLURM_CPUS_PER_TASK", "1")
        .env("SEEDS", SEEDS)
        .env("FENCESIM", binary_with_variant(dir))
        .env("RECORDS", dir.join("records"))
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap()
}

#[test]
fn the_slurm_tasks_run_as_slurm_would_run_them() {
    let dir = scratch("slurm");
    let count = 4;
    for index in 0..count {
        let output = slurm_task(&dir, index, count, 0);
        assert!(output.status.success(), "task {index} succeeds, failing seeds or not: {output:?}");
    }
    assert_merge_is_the_whole_hunt(&dir.join("records"), "slurm");
    let shifted = slurm_task(&scratch("slurm-shifted"), 1, count, 1);
    assert_eq!(shifted.status.code(), Some(2), "an array 1-4 is refused: {shifted:?}");
    assert!(String::from_utf8_lossy(&shifted.stderr).contains("the array must be 0-3"));
}

// ---- README ----

#[test]
fn the_readme_tells_how_to_run_each_launcher() {
    let readme = read("README.md");
    let section = readme.split("## Run it on many machines").nth(1).expect("a section `Run it on many machines`");
    let section = section.split("\n## ").next().unwrap();
    for file in [
        "deploy/Dockerfile",
        "deploy/kubernetes/records-pvc.yaml",
        "deploy/kubernetes/hunt-job.yaml",
        "deploy/kubernetes/merge-job.yaml",
        "deploy/github-actions/fencesim-hunt.yml",
        "deploy/slurm/hunt.sbatch",
    ] {
        assert!(root().join(file).exists(), "{file}");
        assert!(section.contains(file), "the section names {file}");
    }
    for command in ["kubectl apply -f", "sbatch", "docker build", "fencesim merge"] {
        assert!(section.contains(command), "the section shows `{command}`");
    }
}
