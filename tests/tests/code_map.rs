//! ARCHITECTURE.md's code map is the way into the code: every path it names
//! must exist, and every folder of `core/src` and `sim/src` must be in it.

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
            let rooted = ["core/", "sim/", "tests/", "seeds/", "docs/"].iter().any(|p| span.starts_with(p));
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
    for crate_src in ["core/src", "sim/src"] {
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
    assert!(lines <= 400, "README.md has {lines} lines: measurements go to docs/RESULTS.md, history to git");
}

/// A reader cannot look up our own issues, sessions or branches; other
/// projects' issues (etcd's, hashicorp/raft's) are public and may be cited.
#[test]
fn no_page_speaks_of_internal_history() {
    for (path, text) in user_pages() {
        let lower = text.to_lowercase();
        for pattern in ["this session", "last session", "issue #", "target met", "target missed"] {
            assert!(!lower.contains(pattern), "{}: says `{pattern}`", path.display());
        }
        let words: Vec<&str> = lower.split_whitespace().collect();
        for (i, pair) in words.windows(2).enumerate() {
            let numbered = pair[1].starts_with(|c: char| c.is_ascii_digit());
            let cited =
                i > 0 && ["etcd", "hashicorp/raft", "raft"].iter().any(|p| words[i - 1].trim_start_matches('(') == *p);
            if (pair[0] == "issue" || pair[0] == "issues") && numbered {
                assert!(cited, "{}: `{} {}` names an internal issue", path.display(), pair[0], pair[1]);
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
