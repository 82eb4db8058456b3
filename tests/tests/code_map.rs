//! ARCHITECTURE.md's code map is the way into the code: every path it names
//! must exist, and every folder of `core/src`, `sim/src` and `node/src` must be in it.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `code span` of the text that names a path of the repository.
fn named_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            let rooted = ["core/", "sim/", "node/", "tests/", "seeds/", "docs/"].iter().any(|p| span.starts_with(p));
            rooted && !span.contains(' ') && !span.contains('*')
        })
        .map(str::to_string)
        .collect()
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md is readable")
}

#[test]
fn every_path_the_code_map_names_exists() {
    let text = architecture();
    let paths = named_paths(&text);
    assert!(paths.len() >= 30, "the code map names the code: {paths:?}");
    let missing: Vec<&String> = paths.iter().filter(|p| !root().join(p).exists()).collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md names paths that do not exist: {missing:?}");
}

#[test]
fn every_folder_of_the_code_is_in_the_code_map() {
    let text = architecture();
    let mut unnamed = Vec::new();
    for crate_src in ["core/src", "sim/src", "node/src"] {
        let entries = std::fs::read_dir(root().join(crate_src)).expect("a source folder");
        for entry in entries {
            let entry = entry.expect("a folder entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() && name != "tests" {
                let path = format!("{crate_src}/{name}/");
                if !text.contains(&format!("`{path}")) {
                    unnamed.push(path);
                }
            }
        }
    }
    assert!(unnamed.is_empty(), "folders missing from ARCHITECTURE.md's code map: {unnamed:?}");
}

#[test]
fn a_path_that_is_not_there_is_noticed() {
    let paths = named_paths("see `sim/src/nowhere.rs` and `core/src/lock/`, not `fencesim hunt`");
    assert_eq!(paths, ["sim/src/nowhere.rs", "core/src/lock/"]);
    assert!(!root().join(&paths[0]).exists());
}

/// The user-facing pages: README.md and every page of `docs/`.
fn user_pages() -> Vec<(PathBuf, String)> {
    let mut paths = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.expect("readable docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("readable page");
            (path, text)
        })
        .collect()
}

#[test]
fn the_readme_is_a_guide_not_a_notebook() {
    let lines = std::fs::read_to_string(root().join("README.md")).expect("README.md").lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: measurements go to docs/RESULTS.md, depth to docs/");
}

/// A reader cannot look up our own issues, sessions or branches. Other
/// projects' issues are cited as `owner/repo#N` (`etcd-io/etcd#11456`), so
/// "issue N" never appears on a page.
#[test]
fn no_page_speaks_of_internal_history() {
    for (path, text) in user_pages() {
        let lower = text.to_lowercase();
        for pattern in ["this session", "last session", "issue #", "target met", "target missed"] {
            assert!(!lower.contains(pattern), "{}: says `{pattern}`", path.display());
        }
        let words: Vec<&str> = lower.split_whitespace().collect();
        for pair in words.windows(2) {
            let numbered = pair[1].starts_with(|c: char| c.is_ascii_digit());
            if (pair[0] == "issue" || pair[0] == "issues") && numbered {
                panic!("{}: `{} {}` names an issue a reader cannot look up", path.display(), pair[0], pair[1]);
            }
        }
    }
}

/// Every relative link of README.md and `docs/` resolves to a file.
#[test]
fn every_relative_link_resolves() {
    for (path, text) in user_pages() {
        let dir = path.parent().expect("a page has a folder");
        for link in text.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
            let target = link.split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.contains(' ') {
                continue;
            }
            assert!(dir.join(target).exists(), "{}: the link `{link}` resolves to nothing", path.display());
        }
    }
}

/// One key of `fencesim model` (`Model::commented_toml`): its name, its
/// default as printed (`None`: absent by default) and its `# valid:` text.
struct PrintedKey {
    name: String,
    default: Option<String>,
    valid: String,
}

/// Reads what `fencesim model` prints: each key is a `# valid: …` line, then
/// either `key = value` or `# absent by default` and a commented example.
fn printed_model() -> Vec<PrintedKey> {
    let text = fencesim::model::Model::commented_toml();
    let mut keys = Vec::new();
    let mut valid: Option<String> = None;
    let mut absent = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# valid: ") {
            valid = Some(rest.to_string());
            absent = false;
        } else if line == "# absent by default" {
            absent = true;
        } else if let Some(range) = valid.take() {
            let assignment = line.trim_start_matches("# ");
            let (name, value) = assignment.split_once(" = ").expect("a key line follows its `# valid:` line");
            keys.push(PrintedKey {
                name: name.to_string(),
                default: (!absent).then(|| value.to_string()),
                valid: range,
            });
        }
    }
    keys
}

/// The rows of CLI.md's model-key table: (key, default cell, valid cell).
fn model_table() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(root().join("docs/CLI.md")).expect("docs/CLI.md");
    let section = text.split("\n## Model file (TOML)\n").nth(1).expect("CLI.md has a section `Model file (TOML)`");
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            let key = cells[0].split('`').nth(1).expect("a key cell names its key").to_string();
            (key, cells[1].to_string(), cells[2].to_string())
        })
        .collect()
}

#[test]
fn the_model_table_of_cli_md_is_the_printed_model() {
    let printed = printed_model();
    let table = model_table();
    assert!(printed.len() >= 30, "fencesim model prints every key: {} read", printed.len());
    let printed_names: Vec<&str> = printed.iter().map(|k| k.name.as_str()).collect();
    let table_names: Vec<&str> = table.iter().map(|(k, _, _)| k.as_str()).collect();
    let missing: Vec<&&str> = printed_names.iter().filter(|k| !table_names.contains(k)).collect();
    assert!(missing.is_empty(), "model keys missing from CLI.md's model table: {missing:?}");
    let unknown: Vec<&&str> = table_names.iter().filter(|k| !printed_names.contains(k)).collect();
    assert!(unknown.is_empty(), "CLI.md's model table names keys the model does not have: {unknown:?}");
    assert_eq!(table_names, printed_names, "CLI.md's model table lists the keys in the order `fencesim model` prints");
    let library: Vec<&str> = fencesim::model::KEYS.iter().map(|k| k.name).collect();
    assert_eq!(printed_names, library, "`fencesim model` prints every row of model::KEYS");
    for (key, (name, default, valid)) in printed.iter().zip(&table) {
        match &key.default {
            Some(value) => {
                let cell = default.split('`').nth(1).unwrap_or_default();
                assert_eq!(cell, value, "CLI.md: the default of `{name}` is `{value}`, as `fencesim model` prints");
            }
            None => assert!(
                default.starts_with("absent"),
                "CLI.md: `{name}` is absent by default, the table says {default}"
            ),
        }
        let range = valid.replace('`', "");
        assert!(
            range.starts_with(&key.valid),
            "CLI.md: `{name}` takes `{}` (fencesim model's `# valid:` line), the table says `{range}`",
            key.valid
        );
    }
}

#[test]
fn a_key_missing_from_the_model_table_is_noticed() {
    let printed = printed_model();
    let lease = printed.iter().find(|k| k.name == "lease_ms").expect("lease_ms is a model key");
    assert_eq!(lease.default.as_deref(), Some("2000"));
    assert_eq!(lease.valid, "100..=600000");
    let jobs = printed.iter().find(|k| k.name == "jobs_max").expect("jobs_max is a model key");
    assert_eq!(jobs.default, None, "jobs_max is absent by default");
    let table = model_table();
    assert!(table.iter().any(|(k, _, _)| k == "lease_ms"));
    assert!(!table.iter().any(|(k, _, _)| k == "lease"), "the table is read key by key, not by prefix");
}
