//! Embeds the commit this binary was built from (`FENCESIM_COMMIT`, written
//! into every seed record). A `FENCESIM_COMMIT` variable in the build's
//! environment (hex digits; deploy/Dockerfile passes it as a build argument,
//! since .git is not in the image's build context) wins over git. Without
//! either (a source tarball) the commit is `unknown`; the build never fails.

use std::process::Command;

fn is_commit(text: &str) -> bool {
    !text.is_empty() && text.len() <= 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn main() {
    println!("cargo:rerun-if-env-changed=FENCESIM_COMMIT");
    let given =
        std::env::var("FENCESIM_COMMIT").ok().map(|text| text.trim().to_string()).filter(|text| is_commit(text));
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
