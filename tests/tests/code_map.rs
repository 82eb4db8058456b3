//! ARCHITECTURE.md's code map is the way into the code: every path it names
//! must exist, and every folder of `core/src`, `sim/src` and `node/src` must be in it.

use std::collections::BTreeMap;
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

/// GitHub's anchor for a heading's text: lowercase, every character but
/// letters, digits, `-` and `_` dropped, each space a hyphen. A link in a
/// heading counts by its text, a code span by what is inside it.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some((before, after)) = rest.split_once("](") {
        text.push_str(before);
        rest = after.split_once(')').map_or("", |(_, tail)| tail);
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown page's headings, as GitHub names them: the
/// second heading with the same slug gets `-1`, the third `-2`. A `#` line
/// inside a fenced code block is not a heading.
fn anchors(text: &str) -> Vec<String> {
    let mut anchors = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let level = line.len() - line.trim_start_matches('#').len();
        if fenced || !(1..=6).contains(&level) || !line[level..].starts_with(' ') {
            continue;
        }
        let base = slug(line[level..].trim().trim_end_matches('#').trim_end());
        let mut anchor = base.clone();
        while seen.contains_key(&anchor) {
            let count = seen.get_mut(&base).expect("the base slug was seen first");
            *count += 1;
            anchor = format!("{base}-{count}");
        }
        seen.insert(anchor.clone(), 0);
        anchors.push(anchor);
    }
    anchors
}

/// The relative links of `page` (whose text is `text`) that resolve to no
/// file, or whose `#anchor` names no heading of the Markdown page it points
/// to (`#anchor` alone: of `page` itself).
fn broken_links(page: &Path, text: &str) -> Vec<String> {
    let dir = page.parent().expect("a page has a folder");
    let mut broken = Vec::new();
    for link in text.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
        let (target, anchor) = link.split_once('#').map_or((link, None), |(t, a)| (t, Some(a)));
        if target.contains("://") || link.contains(' ') || target.starts_with("mailto:") {
            continue;
        }
        let file = if target.is_empty() { page.to_path_buf() } else { dir.join(target) };
        if !target.is_empty() && !file.exists() {
            broken.push(format!("`{link}` resolves to nothing"));
            continue;
        }
        let Some(anchor) = anchor.filter(|_| file.extension().is_some_and(|ext| ext == "md")) else {
            continue;
        };
        let headings = if target.is_empty() {
            anchors(text)
        } else {
            anchors(&std::fs::read_to_string(&file).expect("a linked page is readable"))
        };
        if !headings.iter().any(|h| h == anchor) {
            broken.push(format!("`{link}` names no heading of {}", file.display()));
        }
    }
    broken
}

/// Every relative link of README.md and `docs/` resolves to a file, and
/// every `#anchor` in one to a heading of the page it points to.
#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for (path, text) in user_pages() {
        broken.extend(broken_links(&path, &text).into_iter().map(|b| format!("{}: {b}", path.display())));
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn headings_are_named_as_github_names_them() {
    let page = "# fencesim — results\n## 1. The system\n### `lease-exclusion` and exposures\n\
                ## Fault file (JSON) *(extension)*\n## Notes\n## Notes\n## Notes-1\n## Notes\n\
                ```sh\n# not a heading\n```\n## See [SPEC.md](SPEC.md), \"Sessions\"\n#hashtag\n";
    assert_eq!(
        anchors(page),
        [
            "fencesim--results",
            "1-the-system",
            "lease-exclusion-and-exposures",
            "fault-file-json-extension",
            "notes",
            "notes-1",
            "notes-1-1",
            "notes-2",
            "see-specmd-sessions",
        ]
    );
}

#[test]
fn a_link_to_a_missing_heading_is_noticed() {
    let page = root().join("docs").join("PAGE.md");
    let text = "## Here\n[ok](#here) [gone](#there) [spec](SPEC.md#6-properties) \
                [old](SPEC.md#properties) [none](NOWHERE.md) [web](https://example.com/#x)";
    let broken = broken_links(&page, text);
    assert_eq!(broken.len(), 3, "{broken:?}");
    assert!(broken[0].starts_with("`#there` names no heading"), "{broken:?}");
    assert!(broken[1].starts_with("`SPEC.md#properties` names no heading"), "{broken:?}");
    assert_eq!(broken[2], "`NOWHERE.md` resolves to nothing");
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
