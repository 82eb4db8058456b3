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
