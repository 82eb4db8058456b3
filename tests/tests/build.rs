//! The release build's profile (`.cargo/`, ARCHITECTURE.md "how the code is
//! built"): cargo rebuilds with a new profile only because the flags name
//! its digest, so a profile replaced without its digest would leave builds
//! optimised by the old one, unnoticed. And the README's builds and the
//! tests' resolve every shared dependency with the same features, so that
//! `cargo test --release` compiles none of the dependencies that `cargo run
//! --release -p fencesim` compiled, nor `cargo build --release -p
//! fencelock-node` after it (the same profile and flags are the other half:
//! a `panic` setting in `[profile.release]` would split them again).

use std::collections::{BTreeMap, BTreeSet};
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

/// The rustc release a profile's name says wrote it (`rustc-1.95.0-59807616e.profdata`).
fn profile_rustc(name: &str) -> Option<&str> {
    let (release, commit) = name.strip_prefix("rustc-")?.strip_suffix(".profdata")?.rsplit_once('-')?;
    let is_commit = commit.len() == 9 && commit.chars().all(|c| c.is_ascii_hexdigit());
    (is_commit && !release.is_empty()).then_some(release)
}

/// The digest `.cargo/config.toml` names in `fencesim_pgo="…"`.
fn named_digest(config: &str) -> Option<&str> {
    let (_, rest) = config.split_once("fencesim_pgo=\"")?;
    rest.split_once('"').map(|(digest, _)| digest)
}

#[test]
fn the_flags_name_the_digest_of_the_one_committed_profile() {
    let profiles = profiles();
    assert_eq!(profiles.len(), 1, "one profile, for one rustc: {profiles:?}");
    assert!(profile_rustc(&profiles[0]).is_some(), "the name carries rustc's release and commit: {}", profiles[0]);
    let output =
        Command::new("sha256sum").arg(cargo_dir().join("pgo").join(&profiles[0])).output().expect("sha256sum runs");
    let sum = String::from_utf8(output.stdout).expect("text");
    let config = std::fs::read_to_string(cargo_dir().join("config.toml")).expect(".cargo/config.toml");
    let digest = named_digest(&config).expect("config.toml names fencesim_pgo");
    assert_eq!(digest.len(), 16, "scripts/pgo.sh writes 16 hex digits: {digest}");
    assert!(sum.starts_with(digest), "config.toml names {digest}, the profile's sha256 is {sum} (run scripts/pgo.sh)");
    assert!(config.contains("rustc-wrapper = \".cargo/rustc-pgo\""), "cargo runs rustc through the wrapper");
}

/// The launchers build with the rustc that wrote the profile: with another,
/// the image's binary would be built plainly.
#[test]
fn the_launchers_pin_the_rustc_that_wrote_the_profile() {
    let release = profile_rustc(&profiles()[0]).expect("a profile name").to_string();
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let dockerfile = std::fs::read_to_string(deploy.join("Dockerfile")).expect("deploy/Dockerfile");
    assert!(dockerfile.contains(&format!("FROM rust:{release}-")), "deploy/Dockerfile builds with rustc {release}");
    let workflow = std::fs::read_to_string(deploy.join("github-actions/fencesim-hunt.yml")).expect("the workflow");
    assert!(workflow.contains(&format!("toolchain: \"{release}\"")), "the workflow builds with rustc {release}");
}

/// The wrapper, given a stand-in compiler that answers `-vV` as rustc does
/// and otherwise prints its arguments and one environment variable whose
/// name is no shell's: the profile is added at opt-level 3 exactly when it
/// is this rustc's (the committed file), never below; the variable survives.
#[test]
fn the_wrapper_hands_rustc_its_profile_at_opt_level_3_only() {
    let wrapper = cargo_dir().join("rustc-pgo");
    let dir = std::env::temp_dir().join(format!("fencesim-rustc-pgo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let compiler = dir.join("compiler");
    let script =
        "#!/usr/bin/env bash\n[[ $1 == -vV ]] && exec rustc -vV\nprintf '%s\\n' \"$@\"\nprintenv HYPHENATED-NAME\n";
    std::fs::write(&compiler, script).expect("the stand-in compiler");
    std::fs::set_permissions(&compiler, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("executable");
    let compiled = |opt_level: &str| {
        let output = Command::new(&wrapper)
            .args([compiler.to_str().expect("a path"), "-C", opt_level, "main.rs"])
            .env("HYPHENATED-NAME", "kept")
            .output()
            .expect("the wrapper runs");
        String::from_utf8(output.stdout).expect("text")
    };
    let named = Command::new(&wrapper).args(["--profile-for", "rustc"]).output().expect("the wrapper runs");
    let named = PathBuf::from(String::from_utf8(named.stdout).expect("text").trim());
    let committed = cargo_dir().join("pgo").join(&profiles()[0]);
    let ours = named.canonicalize().ok() == committed.canonicalize().ok();
    // Read here apart from the wrapper: a wrapper that misnamed the profile
    // would otherwise only look like another rustc's build.
    let version = Command::new("rustc").arg("-vV").output().expect("rustc runs");
    let version = String::from_utf8(version.stdout).expect("text");
    let field = |name: &str| version.lines().find_map(|line| line.strip_prefix(name)).unwrap_or_default().to_string();
    let commit = field("commit-hash: ").chars().take(9).collect::<String>();
    let written_by_this_rustc = profiles()[0] == format!("rustc-{}-{commit}.profdata", field("release: "));
    assert_eq!(ours, written_by_this_rustc, "the wrapper names {} for this rustc", named.display());
    let optimised = compiled("opt-level=3");
    let plain = compiled("opt-level=1");
    std::fs::remove_dir_all(&dir).expect("the scratch folder goes");
    let profile_use = format!("-Cprofile-use={}", named.display());
    assert_eq!(
        optimised.lines().any(|arg| arg == profile_use),
        ours,
        "opt-level 3 (this rustc's profile: {ours}): {optimised}"
    );
    assert!(!plain.contains("-Cprofile-use"), "opt-level 1 runs as asked: {plain}");
    assert!(optimised.ends_with("kept\n") && plain.ends_with("kept\n"), "the environment passes whole: {plain}");
}

#[test]
fn a_profiles_name_says_its_rustc() {
    assert_eq!(profile_rustc("rustc-1.95.0-59807616e.profdata"), Some("1.95.0"));
    assert_eq!(profile_rustc("rustc-1.97.0-nightly-0123abcde.profdata"), Some("1.97.0-nightly"));
    assert_eq!(profile_rustc("llvm-22.profdata"), None);
    assert_eq!(profile_rustc("rustc-1.95.0-5980.profdata"), None);
}

#[test]
fn a_digest_is_read_from_between_its_quotes() {
    assert_eq!(named_digest(r#"rustflags = ["--cfg", 'fencesim_pgo="0123456789abcdef"']"#), Some("0123456789abcdef"));
    assert_eq!(named_digest("rustflags = []"), None);
}

/// Each package of a build as `cargo tree` resolves it (`name vX.Y.Z` to the
/// feature sets it is built with: a proc-macro's dependency may be built
/// twice, for the host and the target).
fn resolved(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args(["tree", "--locked", "--prefix", "none", "--format", "{p} [{f}]"])
        .args(args)
        .output()
        .expect("cargo tree runs");
    assert!(output.status.success(), "cargo tree {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // A blank line between the trees of the workspace's packages.
    for line in
        String::from_utf8(output.stdout).expect("cargo tree prints UTF-8").lines().filter(|line| !line.is_empty())
    {
        let (package, features) = line.split_once(" [").expect("a package and its features");
        let name_and_version = package.split(' ').take(2).collect::<Vec<_>>().join(" ");
        let features = features.split_once(']').expect("features end with ]").0;
        packages.entry(name_and_version).or_default().insert(features.to_string());
    }
    packages
}

/// `cargo test --release` reuses the main job's build (`cargo run --release
/// -p fencesim`) and the real service's (`cargo build --release -p
/// fencelock-node`, both in the README) only if every package each needs is
/// built with the same features in it: the "One build" sections of
/// sim/Cargo.toml and node/Cargo.toml ask for them. A feature the workspace
/// adds without the package asking for it too fails here, naming both.
#[test]
fn the_readmes_builds_are_the_tests_build() {
    let tests = resolved(&["--workspace", "--edges", "normal,build,dev"]);
    for (package, folder) in [("fencesim", "sim"), ("fencelock-node", "node")] {
        let own = resolved(&["-p", package, "--edges", "normal,build"]);
        assert!(
            own.keys().any(|dependency| dependency.starts_with("tokio v")),
            "the tree of {package} is read: {own:?}"
        );
        let differing: Vec<String> = own
            .iter()
            .filter(|(dependency, features)| tests.get(*dependency) != Some(features))
            .map(|(dependency, features)| {
                format!(
                    "{dependency}: {features:?} for -p {package}, {:?} for the tests; who asks: cargo tree --workspace -e features -i {}",
                    tests.get(dependency),
                    dependency.replace(" v", "@")
                )
            })
            .collect();
        assert!(
            differing.is_empty(),
            "built twice (ask for the tests' features in the \"One build\" section of {folder}/Cargo.toml):\n{}",
            differing.join("\n")
        );
    }
}
