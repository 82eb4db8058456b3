//! A load (`examples/load.toml`): eight workers take, hold for no time and
//! release three keys back to back, on servers whose disks take 16 ms to
//! fsync, so that a round trip is far shorter than an fsync, as on real
//! disks and a LAN. A leader that answered every append answer that moved
//! nothing, while appends were in flight, with another empty append (the
//! check for lost appends before it went once per heartbeat) failed
//! `work-budget` here in seeds 3 and 5 of the eight below (and in 27 of
//! the first 100): the busy loop the real cluster's load showed.

use fencelock::Variant;
use fencesim::model::Model;
use fencesim::run::seed::run_seed;

fn load() -> Model {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/load.toml");
    let text = std::fs::read_to_string(path).expect("examples/load.toml");
    Model::from_toml(&text, "examples/load.toml").expect("the example model loads")
}

#[test]
fn a_load_on_slow_disks_keeps_the_servers_within_the_work_budget() {
    let model = load();
    assert_eq!((model.think_ms_max, model.work_ms_max, model.server_fsync_ms), (Some(0), Some(0), Some(16)));
    for seed in 0..8 {
        let outcome = run_seed(seed, &model);
        let violations: Vec<String> = outcome.violations.iter().map(|v| v.to_string()).collect();
        assert!(outcome.ok, "seed {seed}: {violations:#?}");
    }
}

/// Workers that neither think nor work ask as fast as the cluster answers:
/// three times the grants of the standard pace on the same slow disks (195
/// against 65 in seed 1), where the keys' commits, not the workers, set the pace.
#[test]
fn workers_without_pauses_ask_back_to_back() {
    let model = load();
    let paced = Model { think_ms_max: None, work_ms_max: None, ..model.clone() };
    let (fast, slow) = (run_seed(1, &model), run_seed(1, &paced));
    assert!(fast.ok && slow.ok);
    assert!(fast.grants > 2 * slow.grants, "{} grants back to back, {} paced", fast.grants, slow.grants);
}

/// `loss-check-every-answer` declares this model (its keys copied into
/// `core`, which reads no files): the two stay one model.
#[test]
fn the_storm_variant_declares_this_model() {
    let declared = Model::declared(Variant::LossCheckEveryAnswer);
    assert_eq!(declared, Model { variant: Variant::LossCheckEveryAnswer, ..load() });
}
