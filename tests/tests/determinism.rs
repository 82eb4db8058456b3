//! A fixed sweep of the default model, run twice: the same seed and model
//! give the same trace hash, and the safe protocol shows no violation.

use fencesim::model::Model;
use fencesim::run::sweep::sweep;

const SEEDS: std::ops::Range<u64> = 0..100;

#[test]
fn default_sweep_is_deterministic_and_clean() {
    let model = Model::default();
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let first = sweep(SEEDS, &model, jobs, false, None);
    let second = sweep(SEEDS, &model, jobs, false, None);
    assert_eq!(first.len(), second.len());
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a.seed, b.seed);
        assert_eq!(
            a.trace_hash, b.trace_hash,
            "seed {} is not deterministic; replay: fencesim replay --seed {} --trace",
            a.seed, a.seed
        );
    }
    let failures: Vec<String> =
        first.iter().flat_map(|r| r.violations.iter().map(move |v| format!("seed {}: {v}", r.seed))).collect();
    assert!(failures.is_empty(), "the default protocol violated properties:\n{}", failures.join("\n"));
}
