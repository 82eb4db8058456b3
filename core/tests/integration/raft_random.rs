//! Thousands of seeded random schedules (reordering, drops, duplicates,
//! partitions, crashes, crashes before persisting) with election safety and
//! apply agreement checked after every step, commit durability and log
//! matching on the disks, and liveness once the faults stop.
//! `RAFT_SCHEDULES` and `RAFT_STEPS` scale the run.

use crate::raft_harness::{Cluster, Faults};
use fencelock::raft::Config;
use fencelock::Variant;

const FAULTS: Faults = Faults { drop_per_mille: 50, duplicate_per_mille: 30, crash_mid_ready_per_mille: 5 };

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

/// Runs one schedule; returns the violations with the seed to reproduce them,
/// and how many entries were committed.
fn run_schedule(seed: u64, nodes: u8, steps: u64, variant: Variant, faults: Faults) -> (Vec<String>, usize) {
    let mut cluster = Cluster::new(nodes, seed, |config: &mut Config| {
        config.variant = variant;
        if seed.is_multiple_of(2) {
            // Small snapshots so InstallSnapshot happens often.
            config.snapshot_threshold_entries = 8;
        }
    });
    cluster.faults = faults;
    cluster.auto_compact = seed.is_multiple_of(2);
    for step in 0..steps {
        cluster.random_step();
        if step.is_multiple_of(16) {
            cluster.check_durability();
            cluster.check_log_matching();
        }
        if !cluster.violations.is_empty() {
            break;
        }
    }
    if cluster.violations.is_empty() {
        cluster.settle(400);
        cluster.check_durability();
        cluster.check_log_matching();
    }
    let violations =
        cluster.violations.iter().map(|violation| format!("seed={seed} nodes={nodes}: {violation}")).collect();
    (violations, cluster.committed.len())
}

#[test]
fn random_schedules_keep_raft_safe_and_live() {
    let schedules = env_or("RAFT_SCHEDULES", 1000);
    let steps = env_or("RAFT_STEPS", 3000);
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    let mut committed_total = 0;
    for seed in 0..schedules {
        let nodes = if seed.is_multiple_of(3) { 5 } else { 3 };
        let (violations, committed) = run_schedule(seed, nodes, steps, Variant::Default, FAULTS);
        failures.extend(violations);
        committed_total += committed;
        if failures.len() > 5 {
            break;
        }
    }
    eprintln!(
        "{schedules} schedules of {steps} steps, {committed_total} entries committed, in {:?}",
        started.elapsed()
    );
    assert!(failures.is_empty(), "reproduce with the seed:\n{}", failures.join("\n"));
}

/// The checkers are not vacuous: each unsafe persistence variant is caught
/// by some schedule (crashing between send and persist more often).
#[test]
fn random_schedules_catch_the_unsafe_persistence_variants() {
    let faults = Faults { drop_per_mille: 20, duplicate_per_mille: 10, crash_mid_ready_per_mille: 60 };
    for variant in [Variant::VoteNotDurable, Variant::AckBeforeDurable] {
        let caught = (0..2000u64).find_map(|seed| {
            let (violations, _) = run_schedule(seed, 3, 3000, variant, faults);
            violations.into_iter().next()
        });
        eprintln!("{variant:?}: {caught:?}");
        assert!(caught.is_some(), "{variant:?} was never caught");
    }
}
