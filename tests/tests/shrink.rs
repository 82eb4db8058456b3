//! `fencesim shrink` end to end: a shrunk scenario carries its own fault
//! plan and workload, and replays byte for byte to the same verdict; the
//! shrunk seeds in `seeds/` stay short enough to read.

use fencelock::resource::WritePath;
use fencelock::Variant;
use fencesim::faults;
use fencesim::model::Model;
use fencesim::run::scenario::Scenario;
use fencesim::shrink::text::scenario_toml;
use fencesim::shrink::{shrink, Case, Options, Report};
use std::path::PathBuf;
use std::time::Duration;

/// A shrunk seed's trace stays well below a whole standard run's (1,700-3,000
/// events). The target is 400 (docs/RESULTS.md's shrink table); every pin
/// but two is below it (`waiters-never-time-out` and `election-churn`, whose
/// violations come after a heal, run to 500-600); this bound guards against
/// a file that was not shrunk at all, not the target.
const SHRUNK_TRACE_LINES_MAX: usize = 1_300;

/// A busy loop (`work-budget`) feeds on a load: its pin keeps eight workers
/// back to back for seconds after the heal (`loss-check-every-answer`,
/// about 3,100 events, where the whole run of its model makes 8,600).
const SHRUNK_LOAD_TRACE_LINES_MAX: usize = 3_500;

#[test]
fn a_shrunk_scenario_replays_byte_for_byte_to_the_same_verdict() {
    let model = Model::declared(Variant::ClientClockToken);
    let case = Case { seed: 0, plan: faults::plan(&model, 0), model };
    let options = Options { property: None, budget: Duration::from_secs(120), robustness_seeds: 2, probes: 0 };
    let report = shrink(case, &options).expect("seed 0 of client-clock-token fails");
    assert!(report.after.faults <= report.before.faults);
    assert!(report.after.trace_lines < report.before.trace_lines, "{:?} -> {:?}", report.before, report.after);
    let text = scenario_toml(&report, "client-clock-token-shrunk", Vec::new());
    let scenario = Scenario::parse(&text, "shrunk").unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(scenario.file.faults.as_deref(), Some(report.case.plan.as_slice()), "the plan is in the file");
    let outcome = scenario.run();
    assert!(scenario.matches(&outcome), "{:?}", outcome.violations);
    assert_eq!(outcome.trace_hash, report.outcome.trace_hash, "run FILE replays the shrunk run itself");
}

/// Shrinks seed `seed` of `variant`'s standard run, keeping `property`,
/// and checks the minimal case was fragile and repaired, and that the
/// repaired one fails in at least half of 4 other seeds.
fn shrunk_and_repaired(variant: Variant, seed: u64, property: &str) -> Report {
    shrunk_and_repaired_under(recorded(variant), seed, property)
}

/// `variant`'s declared model with the 20 ms heartbeat these tests' seeds
/// were chosen under (the default before it became 40 ms), as the seed
/// files pin it.
fn recorded(variant: Variant) -> Model {
    Model { heartbeat_ms: 20, ..Model::declared(variant) }
}

/// As [`shrunk_and_repaired`], from `model`'s standard run.
fn shrunk_and_repaired_under(model: Model, seed: u64, property: &str) -> Report {
    let variant = model.variant;
    let case = Case { seed, plan: faults::plan(&model, seed), model };
    let options =
        Options { property: Some(property.into()), budget: Duration::from_secs(120), robustness_seeds: 4, probes: 8 };
    let report = shrink(case, &options).unwrap_or_else(|e| panic!("seed {seed} of {variant:?}: {e}"));
    assert!(report.repaired, "the minimal case fails by luck and is repaired");
    assert!(report.robustness.as_ref().is_some_and(|r| r.robust()), "{:?}", report.robustness);
    report
}

/// `belief-from-arrival` seed 9 fails by a `Granted` answer its client
/// read late: the first answer (tok43, sent at 3862 ms) was lost, and the
/// retry's came back 1.8 s after the grant; the minimal case fails by that
/// luck alone. The repair
/// tells the lateness as a `StallOnGrant` of the next worker granted, which
/// then fails in at least half of the probe seeds whoever is granted there.
#[test]
fn a_late_granted_answer_is_told_as_a_stall_on_grant() {
    let report = shrunk_and_repaired(Variant::BeliefFromArrival, 9, "lease-exclusion");
    let late_ms = report.case.model.lease_ms / 10;
    let plan = &report.case.plan;
    let told = plan.iter().any(|event| matches!(event.fault, faults::Fault::StallOnGrant { ms } if ms >= late_ms));
    assert!(told, "a late answer told as a stall on grant: {plan:?}");
}

/// `resource-no-dedup` seed 29 fails by a write whose answer the network
/// lost and its worker sent again, rarely in other seeds. The repair tells
/// that resend as a `LoseWriteAnswer`, and the trim then takes back the
/// servers the story does not need.
#[test]
fn a_write_the_resource_judged_twice_is_told_as_a_lost_answer() {
    let report = shrunk_and_repaired(Variant::ResourceNoDedup, 29, "equal-token");
    let plan = &report.case.plan;
    assert!(plan.iter().any(|event| event.fault == faults::Fault::LoseWriteAnswer), "{plan:?}");
    assert!(report.case.model.nodes < 5, "the trim took back servers: {:?}", report.case.model);
}

/// `vote-twice` seed 13 fails by two election timers of three servers that
/// ran out within a millisecond, in none of 20 other seeds. The repair tells
/// that split as an `ElectionStorm` armed before the first campaign, on
/// the starting case's five servers, where three stand at once; the trim
/// then ends the run shortly after the violation.
#[test]
fn a_split_election_is_told_as_an_election_storm() {
    let report = shrunk_and_repaired(Variant::VoteTwice, 13, "election-safety");
    let plan = &report.case.plan;
    let storm = faults::Fault::ElectionStorm { servers: 3 };
    assert!(plan.iter().any(|event| event.fault == storm), "{plan:?}");
    assert_eq!(report.case.model.nodes, 5, "{:?}", report.case.model);
    assert!(report.case.model.safety_ms < 1_000, "the trim cut the run: {:?}", report.case.model);
}

/// `second-path-unfenced` seed 94 fails when a stalled holder's stale write
/// (c2's with tok43, after a drawn stall of 5387 ms) happens to take the
/// bulk path, a coin flip of the workload. The repair tells the stalls
/// until overtaken with the path each stalled holder wrote on, so the
/// Ledger write comes under every seed.
#[test]
fn a_stale_writes_path_is_told_with_its_stall() {
    let report = shrunk_and_repaired(Variant::SecondPathUnfenced, 94, "fenced-write");
    let plan = &report.case.plan;
    let ledger = |fault: &faults::Fault| matches!(fault, faults::Fault::StallUntilOvertaken(stall) if stall.path == Some(WritePath::Ledger));
    assert!(plan.iter().any(|event| ledger(&event.fault)), "{plan:?}");
}

/// `resource-restore-naive` seed 81 fails by a restore of the resource
/// timed to fall after one seed's takeover write (at 6057 ms, to its backup
/// of 1908 ms, which forgets c0's tok44 of 2951 ms). The repair tells it by
/// that write, as a fence strike that restores the resource from its backup
/// (taken at the warm-up) just after a takeover, whoever takes over.
#[test]
fn a_restore_of_the_resource_is_told_by_the_takeover_write_it_follows() {
    let report = shrunk_and_repaired(Variant::ResourceRestoreNaive, 81, "fenced-write");
    let plan = &report.case.plan;
    let restoring = |fault: &faults::Fault| matches!(fault, faults::Fault::FenceStrikes { restore: true, .. });
    assert!(plan.iter().any(|event| restoring(&event.fault)), "{plan:?}");
    assert!(!plan.iter().any(|event| event.fault == faults::Fault::RestoreResource), "{plan:?}");
}

/// `vote-not-durable` seed 14 under the ack-crash family fails by a voter
/// crashed just after its vote in an election the run's timing brought.
/// The repair tells the crash as a vote strike, which arranges the
/// election a lost vote decides.
#[test]
fn a_crash_after_a_vote_is_told_as_a_vote_strike() {
    let model = Model { ack_crashes: Some(true), ..recorded(Variant::VoteNotDurable) };
    let report = shrunk_and_repaired_under(model, 14, "election-safety");
    let plan = &report.case.plan;
    assert!(plan.iter().any(|event| matches!(event.fault, faults::Fault::VoteStrikes { .. })), "{plan:?}");
    assert!(!plan.iter().any(|event| matches!(event.fault, faults::Fault::AckCrashes { .. })), "{plan:?}");
}

#[test]
fn a_seed_that_passes_or_a_property_never_violated_is_bad_input() {
    let model = Model::declared(Variant::ClientClockToken);
    let case = Case { seed: 0, plan: faults::plan(&model, 0), model };
    let never = Options {
        property: Some("election-safety".into()),
        budget: Duration::from_secs(5),
        robustness_seeds: 0,
        probes: 0,
    };
    let error = shrink(case, &never).expect_err("client-clock-token breaks tokens, not elections");
    assert!(error.contains("never violates `election-safety`"), "{error}");
    let quiet = Model { safety_ms: 1_000, liveness_ms: 1_000, clients: 0, ..Model::default() };
    let passing = Case { seed: 1, plan: Vec::new(), model: quiet };
    let error = shrink(passing, &Options { property: None, ..never }).expect_err("an idle cluster passes");
    assert!(error.contains("passes"), "{error}");
}

#[test]
fn every_shrunk_seed_file_replays_its_own_plan_twice_alike_and_short() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("seeds");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("seeds/ exists")
        .map(|entry| entry.expect("readable seeds/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    paths.sort();
    for path in paths {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(&path).expect("readable scenario file");
        let scenario = Scenario::parse(&text, &origin).unwrap_or_else(|e| panic!("{e}"));
        if scenario.file.faults.is_none() {
            continue;
        }
        let (first, second) = (scenario.run(), scenario.run());
        assert_eq!(first.trace_hash, second.trace_hash, "{origin}: a shrunk scenario replays byte for byte");
        assert!(scenario.matches(&first), "{origin}: {:?}", first.violations);
        let lines = first.history.events().len();
        let lines_max =
            if scenario.file.expect == "work-budget" { SHRUNK_LOAD_TRACE_LINES_MAX } else { SHRUNK_TRACE_LINES_MAX };
        assert!(lines <= lines_max, "{origin}: {lines} trace lines; replay: fencesim run {origin} --trace");
    }
}

/// A property judged after the heal keeps its whole liveness phase: the
/// shrinker heals the faults sooner instead. `never-commit` seed 0 breaks
/// `progress` with no fault at all, so the run heals long before 30 s and
/// still fails, robustly.
#[test]
fn an_after_heal_property_is_shrunk_by_healing_sooner() {
    let model = Model::declared(Variant::NeverCommit);
    let case = Case { seed: 0, plan: faults::plan(&model, 0), model };
    let options =
        Options { property: Some("progress".into()), budget: Duration::from_secs(60), robustness_seeds: 4, probes: 0 };
    let report = shrink(case, &options).expect("seed 0 of never-commit fails");
    let shrunk = &report.case.model;
    assert!(shrunk.safety_ms < 30_000, "healed sooner: {shrunk:?}");
    assert_eq!(shrunk.liveness_ms, 10_000, "the liveness phase is kept whole");
    assert!(report.robustness.as_ref().is_some_and(|r| r.robust()), "{:?}", report.robustness);
}
