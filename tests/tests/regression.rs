//! Every scenario file in `seeds/` is a regression test: its outcome must
//! match its `expect`. A failing seed is pinned here, never ignored.

use fencesim::run::scenario::Scenario;
use std::path::PathBuf;

fn seeds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("seeds")
}

#[test]
fn every_seed_file_matches_its_expectation() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(seeds_dir())
        .expect("seeds/ exists")
        .map(|entry| entry.expect("readable seeds/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 5, "seeds/ holds at least five scenarios, found {}", paths.len());
    let mut mismatches = Vec::new();
    for path in &paths {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).expect("readable scenario file");
        let scenario = Scenario::parse(&text, &origin).unwrap_or_else(|e| panic!("{e}"));
        let outcome = scenario.run();
        if !scenario.matches(&outcome) {
            let found: Vec<String> = outcome.violations.iter().map(|v| v.to_string()).collect();
            mismatches.push(format!(
                "{origin}: expected {}, found [{}], missing behaviours {:?}; replay: fencesim run {origin} --trace",
                scenario.file.expect,
                found.join("; "),
                scenario.missing_behaviours(&outcome)
            ));
        }
    }
    assert!(mismatches.is_empty(), "scenarios not matching their expect:\n{}", mismatches.join("\n"));
}
