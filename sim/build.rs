//! Embeds the commit this binary was built from (`FENCESIM_COMMIT`, written
//! into every seed record). A `FENCESIM_COMMIT` variable in the build's
//! environment (hex digits; deploy/Dockerfile passes it as a build argument,
//! since .git is not in the image's build context) wins over git. Without
//! either (a source tarball) the commit is `unknown`; the build never fails.
//!
//! `FENCESIM_TREE` says whether the sources the binary is built from (core's
//! and sim's, the workspace manifest and lock file) differed from that commit:
//! `dirty`, `clean`, or `unknown` (no git; a given `FENCESIM_COMMIT` is taken
//! as clean). Other files (docs, tests, seeds) do not make a binary dirty, so
//! editing them rebuilds nothing.

use std::process::Command;

/// The paths, relative to the workspace root, whose edits change the binary.
const SOURCES: [&str; 7] =
    ["core/src", "core/Cargo.toml", "sim/src", "sim/build.rs", "sim/Cargo.toml", "Cargo.toml", "Cargo.lock"];

/// `dirty` if git sees a tracked change in [`SOURCES`], `clean` if not, `unknown` without git.
fn tree_state() -> &'static str {
    let status = Command::new("git")
        .current_dir("..")
        .args(["status", "--porcelain", "--untracked-files=no", "--"])
        .args(SOURCES)
        .output()
        .ok()
        .filter(|output| output.status.success());
    match status {
        Some(output) if output.stdout.is_empty() => "clean",
        Some(_) => "dirty",
        None => "unknown",
    }
}

fn is_commit(text: &str) -> bool {
    !text.is_empty() && text.len() <= 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn main() {
    println!("cargo:rerun-if-env-changed=FENCESIM_COMMIT");
    let given =
        std::env::var("FENCESIM_COMMIT").ok().map(|text| text.trim().to_string()).filter(|text| is_commit(text));
    let tree = if given.is_some() { "clean" } else { tree_state() };
    println!("cargo:rustc-env=FENCESIM_TREE={tree}");
    let commit = given
        .or_else(|| {
            Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()
                .filter(|output| output.status.success())
                .and_then(|output| String::from_utf8(output.stdout).ok())
                .map(|text| text.trim().to_string())
                .filter(|text| is_commit(text))
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=FENCESIM_COMMIT={commit}");
    // A new commit or checkout rewrites HEAD or appends to its reflog;
    // without a reflog, the branch files change. Only paths that exist are
    // watched: cargo reruns this script (and rebuilds the crate) at every
    // build for a watched path that does not exist, and `refs/heads` does not
    // exist in a worktree's own git dir. `--git-path` finds each one in a
    // worktree too.
    let git_path = |path: &str| {
        Command::new("git")
            .args(["rev-parse", "--git-path", path])
            .output()
            .ok()
            .filter(|output| output.status.success())
            .and_then(|output| String::from_utf8(output.stdout).ok())
            .map(|text| std::path::PathBuf::from(text.trim()))
            .filter(|path| path.exists())
    };
    let head = git_path("HEAD");
    match head {
        Some(head) => {
            let moves = git_path("logs/HEAD").or_else(|| git_path("refs/heads"));
            for path in std::iter::once(head).chain(moves) {
                println!("cargo:rerun-if-changed={}", path.display());
            }
            // An edit (or a revert) of a source changes whether the tree is dirty.
            for source in SOURCES {
                println!("cargo:rerun-if-changed=../{source}");
            }
        }
        None => println!("cargo:rerun-if-changed=build.rs"),
    }
}
