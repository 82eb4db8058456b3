//! The release build's profile (`.cargo/`, ARCHITECTURE.md "how the code is
//! built"): cargo rebuilds with a new profile only because the flags name
//! its digest, so a profile replaced without its digest would leave builds
//! optimised by the old one, unnoticed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn cargo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cargo")
}

/// The profiles in `.cargo/pgo/`, by name.
fn profiles() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(cargo_dir().join("pgo"))
        .expect(".cargo/pgo/ holds the profile")
        .map(|entry| entry.expect("a folder entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".profdata"))
        .collect();
    names.sort();
    names
}

/// The digest `.cargo/config.toml` names in `fencesim_pgo="…"`.
fn named_digest(config: &str) -> Option<&str> {
    let (_, rest) = config.split_once("fencesim_pgo=\"")?;
    rest.split_once('"').map(|(digest, _)| digest)
}

#[test]
fn the_flags_name_the_digest_of_the_one_committed_profile() {
    let profiles = profiles();
    assert_eq!(profiles.len(), 1, "one profile, for one LLVM: {profiles:?}");
    assert!(profiles[0].starts_with("llvm-"), "the name carries LLVM's major version: {}", profiles[0]);
    let output =
        Command::new("sha256sum").arg(cargo_dir().join("pgo").join(&profiles[0])).output().expect("sha256sum runs");
    let sum = String::from_utf8(output.stdout).expect("text");
    let config = std::fs::read_to_string(cargo_dir().join("config.toml")).expect(".cargo/config.toml");
    let digest = named_digest(&config).expect("config.toml names fencesim_pgo");
    assert_eq!(digest.len(), 16, "scripts/pgo.sh writes 16 hex digits: {digest}");
    assert!(sum.starts_with(digest), "config.toml names {digest}, the profile's sha256 is {sum} (run scripts/pgo.sh)");
    assert!(config.contains("rustc-wrapper = \".cargo/rustc-pgo\""), "cargo runs rustc through the wrapper");
}

#[test]
fn a_digest_is_read_from_between_its_quotes() {
    assert_eq!(named_digest(r#"rustflags = ["--cfg", 'fencesim_pgo="0123456789abcdef"']"#), Some("0123456789abcdef"));
    assert_eq!(named_digest("rustflags = []"), None);
}
