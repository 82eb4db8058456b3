//! Model keys seen from whole runs: the workers' stalls between their lease
//! check and their write (`stalls`, `stall_ms_max`), the real drift range
//! apart from the bound the protocol assumes (`drift_ppm_real_max`), and the
//! lease exposures the checker explains.

use fencesim::history::{Actor, EventKind};
use fencesim::model::Model;
use fencesim::run::seed::{run_seed, Outcome};
use fencesim::run::{explain, trace};

/// A shorter run than the standard model's: enough jobs for stalls to come.
fn short(model: Model) -> Model {
    Model { safety_ms: 12_000, liveness_ms: 3_000, ..model }
}

/// Each stall: its length, and the true time until the worker resumed
/// (none if it crashed first, or the run ended).
fn stalls(outcome: &Outcome) -> Vec<(u64, Option<u64>)> {
    let events = outcome.history.events();
    let mut found = Vec::new();
    for (i, event) in events.iter().enumerate() {
        if let EventKind::Stalled { client, ms } = event.kind {
            let actor = Actor::Client(client);
            let next = events[i + 1..]
                .iter()
                .find(|e| e.kind == EventKind::Resumed { actor } || e.kind == EventKind::Crashed { actor });
            let resumed = next.filter(|e| e.kind == EventKind::Resumed { actor }).map(|e| e.at_us - event.at_us);
            found.push((ms, resumed));
        }
    }
    found
}

#[test]
fn workers_stall_unless_stalls_is_false() {
    let stalling: usize = (0..3).map(|seed| stalls(&run_seed(seed, &short(Model::default()))).len()).sum();
    assert!(stalling > 0, "the standard model stalls workers before their writes");
    let calm = short(Model { stalls: false, ..Model::default() });
    for seed in 0..3 {
        let outcome = run_seed(seed, &calm);
        assert!(stalls(&outcome).is_empty(), "seed {seed}: stalls = false means no stall");
        assert!(outcome.writes_accepted > 0, "seed {seed}: the workers still write");
    }
}

#[test]
fn stall_ms_max_bounds_every_stall_and_pauses_do_not() {
    let model = short(Model { stall_ms_max: Some(300), pauses: false, ..Model::default() });
    let mut seen = 0;
    for seed in 0..3 {
        for (ms, lasted_us) in stalls(&run_seed(seed, &model)) {
            // From min(lease, 300) / 2 up to 300 ms.
            assert!((150..=300).contains(&ms), "seed {seed}: a stall of {ms} ms");
            if let Some(us) = lasted_us {
                assert!((ms * 1_000..=ms * 1_000 + 1_000).contains(&us), "seed {seed}: {ms} ms lasted {us} us");
            }
            seen += 1;
        }
    }
    assert!(seen > 0, "`pauses = false` does not stop the stalls: they have keys of their own");
}

#[test]
fn a_high_real_drift_runs_without_panic() {
    let model = short(Model { drift_ppm_real_max: Some(500_000), ..Model::default() });
    let mut beyond = 0;
    for seed in 0..3 {
        let outcome = run_seed(seed, &model);
        let panics: Vec<String> =
            outcome.violations.iter().filter(|v| v.property.id() == "panic").map(|v| v.detail.clone()).collect();
        assert_eq!(panics, Vec::<String>::new(), "seed {seed}");
        beyond += outcome
            .history
            .events()
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Clock { within_bound: false, .. }))
            .count();
    }
    assert!(beyond > 0, "clocks drift beyond the 500 ppm the protocol assumes");
}

#[test]
fn an_exposure_is_explained_in_the_trace_at_its_instant() {
    // Seed 2 of the standard model: n1's clock steps forward inside the window
    // of c1's and c2's overlapping beliefs (seeds/0002-drift-beyond-bound.toml tells a similar story).
    let outcome = run_seed(2, &Model::default());
    assert_eq!(outcome.exposures.len() as u64, outcome.lease_exposures);
    let exposure = outcome.exposures.first().expect("seed 2 has a lease exposure");
    let [a, b] = exposure.beliefs;
    assert_ne!(a.client, b.client);
    assert!(a.start_us <= b.start_us && b.start_us == exposure.at_us && exposure.at_us < exposure.end_us);
    assert!(!exposure.causes.is_empty(), "an exposure says what excused it");
    let lines = explain::trace_lines(&outcome);
    assert_eq!(lines.len(), outcome.history.events().len() + outcome.exposures.len() + outcome.violations.len());
    let at = lines.iter().position(|l| l.contains("chk   EXPOSURE")).expect("an EXPOSURE line");
    let time = |line: &str| line.split("ms").next().unwrap().trim().parse::<f64>().unwrap();
    assert!(time(&lines[at - 1]) <= time(&lines[at]) && time(&lines[at]) < time(&lines[at + 1]), "in time order");
    assert!(lines[at].contains(&format!("{} ({}", a.client, a.token)), "{}", lines[at]);
    // The findings are printed around the history, never hashed with it.
    assert_eq!(outcome.trace_hash, trace::hash_hex(trace::hash(outcome.history.events())));
}
