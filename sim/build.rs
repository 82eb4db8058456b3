//! Embeds the commit this binary was built from (`FENCESIM_COMMIT`, written
//! into every seed record). Without git or outside a repository (a source
//! tarball, a clean container) the commit is `unknown`; the build never fails.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty() && text.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=FENCESIM_COMMIT={commit}");
    // A new commit changes HEAD or the branch it names; watch both when they exist.
    let git_dir = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|text| std::path::PathBuf::from(text.trim()));
    match git_dir {
        Some(dir) => {
            println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
            println!("cargo:rerun-if-changed={}", dir.join("refs/heads").display());
        }
        None => println!("cargo:rerun-if-changed=build.rs"),
    }
}
