//! Coverage probes (`fencelock::probe`, docs/COVERAGE.md): a fixed swarm
//! sweep must reach every one of them, and the page that lists them must
//! say what the code says.

use fencelock::probe::{Probe, Seen};
use fencesim::cli::coverage::Coverage;
use fencesim::model::Model;
use fencesim::run::sweep::sweep;
use std::path::Path;

/// The swarm seeds the floor is judged on: every probe must be reached in
/// at least one of them. A probe these seeds cannot reach is either made
/// reachable (the workload or the fault draw) or dropped, never exempted.
const SEEDS: std::ops::Range<u64> = 0..300;

#[test]
fn every_probe_is_reached_by_300_swarm_seeds() {
    let model = Model { swarm: true, ..Model::default() };
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mut coverage = Coverage::default();
    for result in sweep(SEEDS, &model, jobs, false, None) {
        coverage.add(result.probes);
    }
    assert_eq!(coverage.seeds, SEEDS.end - SEEDS.start);
    let never: Vec<String> =
        coverage.never_reached().iter().map(|probe| format!("  {probe}: {}", probe.why())).collect();
    assert!(
        never.is_empty(),
        "probes no seed of hunt --swarm --seeds {SEEDS:?} reached (make them reachable or drop them):\n{}",
        never.join("\n")
    );
}

/// The table of docs/COVERAGE.md, as the code makes it.
fn table_of_the_code() -> String {
    let mut table = String::from("| probe | seen by | why it matters |\n|---|---|---|\n");
    for probe in Probe::ALL {
        let seen = match probe.seen() {
            Seen::Core => "core",
            Seen::Simulator => "simulator",
        };
        table.push_str(&format!("| `{}` | {seen} | {} |\n", probe.name(), probe.why()));
    }
    table
}

#[test]
fn the_coverage_page_lists_every_probe_as_the_code_does() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/COVERAGE.md");
    let page = std::fs::read_to_string(path).expect("docs/COVERAGE.md is readable");
    let table = table_of_the_code();
    assert!(
        page.contains(&table),
        "docs/COVERAGE.md's table differs from the code (core/src/probe.rs); the code's table is:\n\n{table}"
    );
    assert!(page.contains(&format!("{} probes", Probe::ALL.len())), "the page says how many probes there are");
}
