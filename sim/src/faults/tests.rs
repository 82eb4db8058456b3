//! Tests of the fault planner: determinism, switches, pairing and bounds.

use super::*;
use std::collections::{BTreeMap, BTreeSet};

fn seeds() -> std::ops::Range<u64> {
    0..200
}

/// Events after the initial clock rates.
fn timed(plan: &[FaultEvent]) -> Vec<&FaultEvent> {
    plan.iter().filter(|e| !(e.at_ms == 0 && matches!(e.fault, Fault::ClockRate { .. }))).collect()
}

#[test]
fn deterministic_for_a_seed() {
    let model = Model::default();
    for seed in 0..20 {
        assert_eq!(plan(&model, seed), plan(&model, seed));
    }
    assert_ne!(plan(&model, 1), plan(&model, 2));
}

#[test]
fn sorted_inside_the_safety_phase_at_a_steady_rate() {
    let model = Model::default();
    let mut counts = Vec::new();
    for seed in seeds() {
        let plan = plan(&model, seed);
        assert!(plan.windows(2).all(|w| w[0].at_ms <= w[1].at_ms), "seed {seed}: not sorted");
        assert!(plan.iter().all(|e| e.at_ms < model.safety_ms), "seed {seed}: past the safety phase");
        counts.push(timed(&plan).len());
    }
    let (low, high) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
    let mean = counts.iter().sum::<usize>() / counts.len();
    // One event per 0.3-2 s of a 30 s phase.
    assert!((15..=90).contains(&mean), "mean {mean} events");
    assert!(low >= 8 && high <= 130, "events per run {low}..{high}");
}

/// Picks the events of one family.
type FaultFilter = fn(&Fault) -> bool;

#[test]
fn switched_off_families_have_no_events() {
    let off = Model {
        partitions: false,
        crashes: false,
        restores: false,
        clock_steps: false,
        pauses: false,
        resource_crashes: false,
        resource_restores: false,
        ..Model::default()
    };
    for seed in 0..50 {
        assert!(timed(&plan(&off, seed)).is_empty(), "seed {seed}");
        let checks: [(Model, FaultFilter); 7] = [
            (Model { partitions: false, ..Model::default() }, |f| {
                matches!(
                    f,
                    Fault::Partition { .. }
                        | Fault::OneWay { .. }
                        | Fault::IsolateLeader
                        | Fault::IsolateLeaderWith { .. }
                        | Fault::CutClient { .. }
                        | Fault::Heal
                )
            }),
            (Model { crashes: false, restores: false, ..Model::default() }, |f| {
                matches!(
                    f,
                    Fault::Crash { .. } | Fault::Restart { .. } | Fault::BackupNode { .. } | Fault::LeaderChurn { .. }
                )
            }),
            (Model { leader_churn: false, ..Model::default() }, |f| matches!(f, Fault::LeaderChurn { .. })),
            (Model { restores: false, ..Model::default() }, |f| {
                matches!(f, Fault::RestoreNode { .. } | Fault::BackupCluster | Fault::RestoreCluster)
            }),
            (Model { pauses: false, ..Model::default() }, |f| matches!(f, Fault::Pause { .. })),
            (Model { resource_crashes: false, ..Model::default() }, |f| {
                matches!(f, Fault::CrashResource | Fault::RestartResource)
            }),
            (Model { resource_restores: false, ..Model::default() }, |f| {
                matches!(f, Fault::BackupResource | Fault::RestoreResource)
            }),
        ];
        for (model, forbidden) in checks {
            assert!(timed(&plan(&model, seed)).iter().all(|e| !forbidden(&e.fault)), "seed {seed}");
        }
        let no_clocks = Model { clock_steps: false, ..Model::default() };
        assert!(timed(&plan(&no_clocks, seed))
            .iter()
            .all(|e| !matches!(e.fault, Fault::ClockStep { .. } | Fault::ClockRate { .. })));
    }
}

#[test]
fn switching_a_family_off_leaves_the_others_unchanged() {
    for seed in 0..50 {
        let full = plan(&Model::default(), seed);
        let without = plan(&Model { partitions: false, ..Model::default() }, seed);
        let kept: Vec<&FaultEvent> = full
            .iter()
            .filter(|e| {
                !matches!(
                    e.fault,
                    Fault::Partition { .. }
                        | Fault::OneWay { .. }
                        | Fault::IsolateLeader
                        | Fault::IsolateLeaderWith { .. }
                        | Fault::CutClient { .. }
                        | Fault::Heal
                )
            })
            .collect();
        assert_eq!(kept, without.iter().collect::<Vec<_>>(), "seed {seed}");
    }
}

#[test]
fn every_crash_comes_back_and_every_restore_has_an_earlier_backup() {
    for nodes in [1, 3, 5, 7] {
        let model = Model { nodes, ..Model::default() };
        for seed in seeds() {
            let plan = plan(&model, seed);
            for (i, event) in plan.iter().enumerate() {
                let Fault::Crash { node, .. } = event.fault else { continue };
                let back = plan[i + 1..]
                    .iter()
                    .find(|e| matches!(e.fault, Fault::Restart { node: n } | Fault::RestoreNode { node: n } | Fault::Crash { node: n, .. } if n == node))
                    .unwrap_or_else(|| panic!("seed {seed}: {node} never comes back"));
                assert!(!matches!(back.fault, Fault::Crash { .. }), "seed {seed}: {node} crashed twice");
                let down_ms = back.at_ms - event.at_ms;
                assert!((200..=5_000).contains(&down_ms), "seed {seed}: {node} down {down_ms} ms");
                if matches!(back.fault, Fault::RestoreNode { .. }) {
                    let backup = plan[..i]
                        .iter()
                        .rev()
                        .find(|e| e.fault == Fault::BackupNode { node })
                        .unwrap_or_else(|| panic!("seed {seed}: restore of {node} without a backup"));
                    assert!(event.at_ms - backup.at_ms >= 2_000);
                }
            }
            let crashes = plan.iter().filter(|e| matches!(e.fault, Fault::Crash { .. })).count();
            let returns =
                plan.iter().filter(|e| matches!(e.fault, Fault::Restart { .. } | Fault::RestoreNode { .. })).count();
            assert_eq!(crashes, returns, "seed {seed}");
        }
    }
}

#[test]
fn a_majority_is_never_down_for_long() {
    for nodes in [1, 3, 5] {
        let model = Model { nodes, restores: false, ..Model::default() };
        let majority = usize::from(nodes / 2 + 1);
        for seed in seeds() {
            let mut down = BTreeSet::new();
            let mut majority_since: Option<u64> = None;
            for event in plan(&model, seed) {
                match event.fault {
                    Fault::Crash { node, .. } => assert!(down.insert(node)),
                    Fault::Restart { node } => assert!(down.remove(&node)),
                    _ => continue,
                }
                match (down.len() >= majority, majority_since) {
                    (true, None) => majority_since = Some(event.at_ms),
                    (false, Some(since)) => {
                        let ms = event.at_ms - since;
                        assert!(ms <= MAJORITY_DOWN_MS_MAX, "seed {seed}: majority down {ms} ms");
                        majority_since = None;
                    }
                    _ => {}
                }
            }
            assert!(down.is_empty());
        }
    }
}

#[test]
fn network_faults_are_healed_in_time_one_at_a_time() {
    let model = Model::default();
    let mut kinds = BTreeSet::new();
    for seed in seeds() {
        let mut open: Option<u64> = None;
        for event in plan(&model, seed) {
            match &event.fault {
                Fault::Heal => {
                    let since = open.take().expect("a heal ends a fault");
                    assert!((500..=8_000).contains(&(event.at_ms - since)), "seed {seed}");
                }
                Fault::Partition { sides } => {
                    assert!(sides.len() >= 2 && sides.iter().all(|s| !s.is_empty()));
                    assert!(open.replace(event.at_ms).is_none(), "seed {seed}: overlapping network faults");
                    kinds.insert("partition");
                }
                Fault::OneWay { from, to } => {
                    assert_ne!(from, to);
                    assert!(open.replace(event.at_ms).is_none());
                    kinds.insert("one-way");
                }
                Fault::IsolateLeaderWith { clients, .. } => {
                    assert!(!clients.is_empty() && clients.windows(2).all(|w| w[0] < w[1]), "seed {seed}");
                    assert!(open.replace(event.at_ms).is_none());
                    kinds.insert("isolate-with-clients");
                }
                Fault::IsolateLeader | Fault::CutClient { .. } => {
                    assert!(open.replace(event.at_ms).is_none());
                    kinds.insert(if event.fault == Fault::IsolateLeader { "isolate" } else { "cut-client" });
                }
                _ => {}
            }
        }
        assert!(open.is_none(), "seed {seed}: a network fault outlives the safety phase");
    }
    assert_eq!(kinds.len(), 5, "every kind of network fault appears: {kinds:?}");
}

#[test]
fn initial_clock_rates_respect_the_bound_unless_told_not_to() {
    let model = Model::default();
    for seed in 0..50 {
        let rates: Vec<(Actor, i64)> = plan(&model, seed)
            .iter()
            .filter_map(|e| match e.fault {
                Fault::ClockRate { actor, ppm } if e.at_ms == 0 => Some((actor, ppm)),
                _ => None,
            })
            .collect();
        assert_eq!(rates.len(), usize::from(model.nodes) + model.clients as usize);
        assert!(rates.iter().all(|&(_, ppm)| ppm.unsigned_abs() <= model.drift_ppm_max));
        assert!(rates.iter().any(|&(_, ppm)| ppm != 0));
    }
    let wild = Model { drift_beyond_bound: true, ..Model::default() };
    for seed in 0..50 {
        let beyond: Vec<i64> = plan(&wild, seed)
            .iter()
            .filter_map(|e| match e.fault {
                Fault::ClockRate { ppm, .. } if e.at_ms == 0 && ppm.unsigned_abs() > wild.drift_ppm_max => Some(ppm),
                _ => None,
            })
            .collect();
        assert!((1..=2).contains(&beyond.len()), "seed {seed}: {beyond:?}");
        let bound = wild.drift_ppm_max as i64;
        assert!(beyond.iter().all(|ppm| (3 * bound..=20 * bound).contains(&ppm.abs())));
    }
}

/// Every rate a model can draw, initial or later, with its actor.
fn rates(model: &Model, seed: u64) -> Vec<i64> {
    plan(model, seed)
        .iter()
        .filter_map(|e| match e.fault {
            Fault::ClockRate { ppm, .. } => Some(ppm),
            _ => None,
        })
        .collect()
}

#[test]
fn clocks_draw_from_the_real_drift_range_while_the_protocol_assumes_its_bound() {
    // "The protocol assumes 500 ppm, the clocks really drift up to 3,000."
    let model = Model { drift_ppm_real_max: Some(3_000), ..Model::default() };
    assert_eq!((model.drift_ppm_max, model.drift_ppm_real()), (500, 3_000));
    let drawn: Vec<i64> = (0..50).flat_map(|seed| rates(&model, seed)).collect();
    assert!(drawn.iter().all(|ppm| ppm.unsigned_abs() <= 3_000), "{drawn:?}");
    assert!(drawn.iter().filter(|ppm| ppm.unsigned_abs() > 500).count() > drawn.len() / 2, "most leave the bound");
    // Absent, the real range is the bound: the standard model's draws.
    assert_eq!(rates(&Model::default(), 7), rates(&Model { drift_ppm_real_max: Some(500), ..Model::default() }, 7));
}

#[test]
fn every_drift_a_valid_model_draws_keeps_the_clock_moving_forward() {
    // The largest bound `drift_beyond_bound` allows, and the largest real range.
    let beyond = Model { drift_ppm_max: 25_000, drift_beyond_bound: true, ..Model::default() };
    let real = Model { drift_ppm_max: 100_000, drift_ppm_real_max: Some(500_000), ..Model::default() };
    for model in [beyond, real] {
        assert_eq!(model.validate(), Ok(()));
        for seed in 0..50 {
            let drawn = rates(&model, seed);
            assert!(drawn.iter().all(|ppm| ppm.unsigned_abs() <= crate::model::DRIFT_PPM_REAL_MAX), "{drawn:?}");
        }
    }
    // What made 54 of 100 seeds panic ("a local clock must move forward") is refused.
    let crash = Model { drift_ppm_max: 100_000, drift_beyond_bound: true, ..Model::default() };
    assert!(crash.validate().unwrap_err().contains("`drift_ppm_max` must be at most 25000 with `drift_beyond_bound"));
}

#[test]
fn a_fault_file_clock_must_stay_physical() {
    let model = Model::default();
    let backwards =
        [FaultEvent { at_ms: 0, fault: Fault::ClockRate { actor: Actor::Server(NodeId(0)), ppm: -1_900_000 } }];
    assert!(validate(&backwards, &model).unwrap_err().contains("a clock rate must be within"));
    let step = Fault::ClockStep { actor: Actor::Client(ClientId(0)), delta_ms: i64::MIN };
    let far = [FaultEvent { at_ms: 1_000, fault: step }];
    assert!(validate(&far, &model).unwrap_err().contains("a clock step must be within"));
}

#[test]
fn a_fault_file_episode_lasts_at_most_a_day() {
    let model = Model::default();
    let day_and_a_bit = 86_400_001;
    let check = |fault: Fault| validate(&[FaultEvent { at_ms: 1_000, fault }], &model);
    let crashes = |for_ms, down_ms| Fault::AckCrashes { for_ms, votes: true, strikes: 1, down_ms };
    assert!(check(crashes(day_and_a_bit, 5)).unwrap_err().contains("an ack-crash episode's times"));
    assert!(check(crashes(1_000, day_and_a_bit)).unwrap_err().contains("an ack-crash episode's times"));
    assert_eq!(check(crashes(1_000, 5)), Ok(()));
    let churn = |within_ms| Fault::LeaderChurn { for_ms: 1_000, down_ms: 100, within_ms };
    assert!(check(churn(day_and_a_bit)).unwrap_err().contains("a leader-churn stretch's times"));
    assert_eq!(check(churn(10)), Ok(()));
}

#[test]
fn an_election_storm_takes_one_server_to_all_of_them() {
    let model = Model { nodes: 3, ..Model::default() };
    let check = |servers| validate(&[FaultEvent { at_ms: 90, fault: Fault::ElectionStorm { servers } }], &model);
    for servers in [0, 4] {
        assert!(check(servers).unwrap_err().contains("a storm runs out the timers of 1 to 3 servers"), "{servers}");
    }
    assert_eq!(check(1), Ok(()));
    assert_eq!(check(3), Ok(()));
}

#[test]
fn cluster_restores_are_rare_and_follow_a_backup() {
    let model = Model::default();
    let mut runs_with = 0;
    for seed in seeds() {
        let plan = plan(&model, seed);
        let restores: Vec<&FaultEvent> = plan.iter().filter(|e| e.fault == Fault::RestoreCluster).collect();
        assert!(restores.len() <= 2);
        for restore in &restores {
            let backup = plan.iter().rev().find(|e| e.fault == Fault::BackupCluster && e.at_ms < restore.at_ms);
            assert!(backup.is_some_and(|b| restore.at_ms - b.at_ms >= 2_000), "seed {seed}");
        }
        runs_with += usize::from(!restores.is_empty());
    }
    assert!((30..=90).contains(&runs_with), "{runs_with} of 200 runs restore the cluster");
}

#[test]
fn resource_crashes_are_followed_by_restarts() {
    let model = Model::default();
    for seed in seeds() {
        let mut down_at = None;
        for event in plan(&model, seed) {
            match event.fault {
                Fault::CrashResource => assert!(down_at.replace(event.at_ms).is_none()),
                Fault::RestartResource => {
                    let since = down_at.take().expect("restart after a crash");
                    assert!((100..=1_500).contains(&(event.at_ms - since)));
                }
                _ => {}
            }
        }
        assert!(down_at.is_none());
    }
}

#[test]
fn plans_round_trip_through_json_and_read_as_one_line_each() {
    for seed in 0..20 {
        let plan = plan(&Model::default(), seed);
        let text = serde_json::to_string_pretty(&plan).unwrap();
        let back: Vec<FaultEvent> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, plan);
        assert_eq!(describe(&plan).lines().count(), plan.len());
    }
    let partition = Fault::Partition {
        sides: vec![
            vec![Addr::Server(NodeId(0)), Addr::Server(NodeId(1))],
            vec![Addr::Server(NodeId(2)), Addr::Client(ClientId(3))],
        ],
    };
    assert_eq!(partition.to_string(), "partition {n0 n1} | {n2 c3}");
    assert_eq!(
        Fault::ClockStep { actor: Actor::Client(ClientId(1)), delta_ms: -1_500 }.to_string(),
        "clock step c1 -1500 ms"
    );
    assert_eq!(Fault::Crash { node: NodeId(4), torn: true }.to_string(), "crash n4 (torn write)");
    let with = |clients: Vec<ClientId>| Fault::IsolateLeaderWith { clients, pause_ms: 0 }.to_string();
    assert_eq!(with(vec![ClientId(1), ClientId(2)]), "isolate the leader with c1 c2");
    assert_eq!(with(vec![]), "isolate the leader", "a shrunk fault with no client left");
}

#[test]
fn tiny_and_empty_safety_phases() {
    for safety_ms in [0, 1, 400, 2_000] {
        let model = Model { safety_ms, ..Model::default() };
        for seed in 0..20 {
            let plan = plan(&model, seed);
            assert!(timed(&plan).iter().all(|e| e.at_ms < safety_ms));
        }
    }
    let lonely = Model { nodes: 1, clients: 0, ..Model::default() };
    for seed in 0..20 {
        assert!(!plan(&lonely, seed).is_empty());
    }
}

#[test]
fn disks_stall_and_recover_and_power_losses_take_a_majority_at_once() {
    for nodes in [3, 5] {
        let model = Model { nodes, ..Model::default() };
        let majority = usize::from(nodes / 2 + 1);
        let (mut stalls, mut power_losses) = (0, 0);
        for seed in seeds() {
            let plan = plan(&model, seed);
            let mut stalled: BTreeMap<NodeId, u64> = BTreeMap::new();
            for event in &plan {
                if let Fault::DiskStall { node, fsync_ms } = event.fault {
                    if fsync_ms > 0 {
                        assert!((20..=500).contains(&fsync_ms), "seed {seed}: fsync {fsync_ms} ms");
                        assert!(stalled.insert(node, event.at_ms).is_none(), "seed {seed}: {node} stalled twice");
                        stalls += 1;
                    } else {
                        assert!(stalled.remove(&node).is_some(), "seed {seed}: {node} recovers without a stall");
                    }
                }
            }
            assert!(stalled.is_empty(), "seed {seed}: a stall never ends: {stalled:?}");
            let mut crashes_at: BTreeMap<u64, usize> = BTreeMap::new();
            for event in &plan {
                if let Fault::Crash { .. } = event.fault {
                    *crashes_at.entry(event.at_ms).or_default() += 1;
                }
            }
            power_losses += crashes_at.values().filter(|&&count| count >= majority).count();
        }
        assert!(stalls > 200, "{nodes} nodes: only {stalls} stalls in {} seeds", seeds().end);
        assert!(power_losses > 50, "{nodes} nodes: only {power_losses} power losses");
    }
    let calm = Model { crashes: false, ..Model::default() };
    for seed in 0..50 {
        assert!(plan(&calm, seed).iter().all(|e| !matches!(e.fault, Fault::DiskStall { .. })), "seed {seed}");
    }
}

#[test]
fn leader_churn_is_planned_only_when_switched_on_and_ends_in_the_safety_phase() {
    let on = Model::default();
    assert!(on.leader_churn, "the standard model churns leaders");
    let mut episodes = 0;
    for seed in 0..50 {
        let with = plan(&on, seed);
        for event in &with {
            if let Fault::LeaderChurn { for_ms, within_ms, down_ms, .. } = event.fault {
                episodes += 1;
                assert!(event.at_ms + for_ms + down_ms < on.safety_ms, "seed {seed}: churn past the safety phase");
                assert!((1..=20).contains(&within_ms) && (50..=1_500).contains(&down_ms), "seed {seed}");
            }
        }
        // Its own stream: the other families are the same with and without it.
        let others: Vec<&FaultEvent> = with.iter().filter(|e| !matches!(e.fault, Fault::LeaderChurn { .. })).collect();
        let off = Model { leader_churn: false, ..Model::default() };
        assert_eq!(others, plan(&off, seed).iter().collect::<Vec<_>>(), "seed {seed}");
        let no_crashes = Model { crashes: false, ..on.clone() };
        assert!(plan(&no_crashes, seed).iter().all(|e| !matches!(e.fault, Fault::LeaderChurn { .. })));
    }
    // Two to five episodes in a 30 s phase.
    assert!((100..=250).contains(&episodes), "{episodes} churn episodes in 50 runs");
}

#[test]
fn every_drawn_plan_passes_the_fault_file_check() {
    let three = Model { nodes: 3, clients: 2, ..Model::default() };
    for model in [Model::default(), three] {
        for seed in seeds() {
            let plan = plan(&model, seed);
            assert_eq!(super::validate(&plan, &model), Ok(()), "seed {seed}");
        }
    }
}

#[test]
fn ack_crashes_are_planned_only_when_set_on_and_leave_the_other_families_alone() {
    let standard = Model::default();
    assert_eq!(standard.ack_crashes, None, "off in the standard model, whose schedules stay as pinned");
    let on = Model { ack_crashes: Some(true), ..Model::default() };
    let mut episodes = 0;
    for seed in 0..50 {
        let with = plan(&on, seed);
        assert_eq!(with, plan(&on, seed), "seed {seed}: the same plan every time");
        for event in &with {
            if let Fault::AckCrashes { for_ms, votes, strikes, down_ms } = event.fault {
                episodes += 1;
                assert!(event.at_ms + for_ms + down_ms < on.safety_ms, "seed {seed}: past the safety phase");
                let lasts = if votes { 3_000..=12_000 } else { 1_000..=6_000 };
                assert!(lasts.contains(&for_ms), "seed {seed}: {for_ms} ms");
                assert!((1..=3).contains(&strikes) && (5..=300).contains(&down_ms), "seed {seed}");
            }
        }
        // Its own stream: the other families are the same with and without it.
        let others: Vec<&FaultEvent> = with.iter().filter(|e| !matches!(e.fault, Fault::AckCrashes { .. })).collect();
        assert_eq!(others, plan(&standard, seed).iter().collect::<Vec<_>>(), "seed {seed}");
        let no_crashes = Model { crashes: false, ..on.clone() };
        assert!(plan(&no_crashes, seed).iter().all(|e| !matches!(e.fault, Fault::AckCrashes { .. })));
        let off = Model { ack_crashes: Some(false), ..Model::default() };
        assert_eq!(plan(&off, seed), plan(&standard, seed), "seed {seed}: false is absent");
    }
    assert!((50..=250).contains(&episodes), "{episodes} ack-crash episodes in 50 runs");
}

#[test]
fn vote_strikes_are_planned_only_with_crashes_when_set_on_and_leave_the_other_families_alone() {
    let standard = Model::default();
    assert_eq!(standard.vote_strikes, None, "off in the standard model");
    let on = Model { vote_strikes: Some(true), ..Model::default() };
    let off = Model { vote_strikes: Some(false), ..Model::default() };
    let no_crashes = Model { crashes: false, ..on.clone() };
    let mut episodes = 0;
    for seed in 0..50 {
        let with = plan(&on, seed);
        assert_eq!(with, plan(&on, seed), "seed {seed}: the same plan every time");
        let (strikes, others): (Vec<&FaultEvent>, Vec<&FaultEvent>) =
            with.iter().partition(|e| matches!(e.fault, Fault::VoteStrikes { .. }));
        for event in strikes {
            let Fault::VoteStrikes { for_ms, strikes, down_ms, cut_ms } = event.fault else { unreachable!() };
            episodes += 1;
            let lasts = event.at_ms + for_ms + super::VOTE_WAIT_MS + cut_ms;
            assert!(lasts < on.safety_ms, "seed {seed}: past the safety phase");
            assert!((3_000..=12_000).contains(&for_ms) && (1..=2).contains(&strikes), "seed {seed}");
            assert!((5..=30).contains(&down_ms) && (300..=1_500).contains(&cut_ms), "seed {seed}");
        }
        // Its own stream: the other families are the same with and without it.
        assert_eq!(others, plan(&standard, seed).iter().collect::<Vec<_>>(), "seed {seed}");
        assert_eq!(plan(&off, seed), plan(&standard, seed), "seed {seed}: false is absent");
        let crashless = plan(&no_crashes, seed);
        assert!(crashless.iter().all(|e| !matches!(e.fault, Fault::VoteStrikes { .. })), "seed {seed}: it crashes");
    }
    assert!((50..=250).contains(&episodes), "{episodes} vote-strike episodes in 50 runs");
}

#[test]
fn fence_strikes_are_planned_only_when_set_on_and_leave_the_other_families_alone() {
    let standard = Model::default();
    assert_eq!(standard.fence_strikes, None, "off in the standard model");
    let on = Model { fence_strikes: Some(true), ..Model::default() };
    let off = Model { fence_strikes: Some(false), ..Model::default() };
    let mut episodes = 0;
    for seed in 0..50 {
        let with = plan(&on, seed);
        assert_eq!(with, plan(&on, seed), "seed {seed}: the same plan every time");
        let (strikes, others): (Vec<&FaultEvent>, Vec<&FaultEvent>) =
            with.iter().partition(|e| matches!(e.fault, Fault::FenceStrikes { .. }));
        for event in strikes {
            let Fault::FenceStrikes { for_ms, strikes, down_ms, .. } = event.fault else { unreachable!() };
            episodes += 1;
            assert!(event.at_ms + for_ms + down_ms < on.safety_ms, "seed {seed}: past the safety phase");
            assert!((5_000..=15_000).contains(&for_ms) && (1..=2).contains(&strikes), "seed {seed}");
            assert!((5..=100).contains(&down_ms), "seed {seed}: {down_ms} ms");
        }
        // Its own stream: the other families are the same with and without it.
        assert_eq!(others, plan(&standard, seed).iter().collect::<Vec<_>>(), "seed {seed}");
        assert_eq!(plan(&off, seed), plan(&standard, seed), "seed {seed}: false is absent");
    }
    assert!((50..=200).contains(&episodes), "{episodes} fence-strike episodes in 50 runs");
}

#[test]
fn grant_strikes_are_planned_only_when_set_on_outlast_a_lease_and_leave_the_other_families_alone() {
    let standard = Model::default();
    assert_eq!(standard.grant_strikes, None, "off in the standard model");
    let on = Model { grant_strikes: Some(true), ..Model::default() };
    let off = Model { grant_strikes: Some(false), ..Model::default() };
    let mut episodes = 0;
    for seed in 0..50 {
        let with = plan(&on, seed);
        assert_eq!(with, plan(&on, seed), "seed {seed}: the same plan every time");
        let (strikes, others): (Vec<&FaultEvent>, Vec<&FaultEvent>) =
            with.iter().partition(|e| matches!(e.fault, Fault::GrantStrikes { .. }));
        for event in strikes {
            let Fault::GrantStrikes { for_ms, strikes, pause_ms } = event.fault else { unreachable!() };
            episodes += 1;
            assert!(event.at_ms + for_ms + pause_ms < on.safety_ms, "seed {seed}: past the safety phase");
            assert!((5_000..=15_000).contains(&for_ms) && (1..=2).contains(&strikes), "seed {seed}");
            // A lease, two elections and 100 ms to half a lease more: the successor expires the Grant first.
            let least = on.lease_ms + 2 * on.election_ms_max + 100;
            assert!((least..=least + on.lease_ms / 2).contains(&pause_ms), "seed {seed}: {pause_ms} ms");
        }
        // Its own stream: the other families are the same with and without it.
        assert_eq!(others, plan(&standard, seed).iter().collect::<Vec<_>>(), "seed {seed}");
        assert_eq!(plan(&off, seed), plan(&standard, seed), "seed {seed}: false is absent");
    }
    assert!((50..=200).contains(&episodes), "{episodes} grant-strike episodes in 50 runs");
}

#[test]
fn renew_strikes_and_ack_amnesia_are_planned_only_when_set_on_and_leave_the_other_families_alone() {
    let standard = Model::default();
    assert_eq!((standard.renew_strikes, standard.ack_amnesia), (None, None), "off in the standard model");
    let on = Model { renew_strikes: Some(true), ack_amnesia: Some(true), ..Model::default() };
    let (mut renews, mut amnesia, mut slowed) = (0, 0, 0);
    for seed in 0..50 {
        let with = plan(&on, seed);
        assert_eq!(with, plan(&on, seed), "seed {seed}: the same plan every time");
        for event in &with {
            match event.fault {
                Fault::RenewStrikes { for_ms, strikes, pause_ms } => {
                    renews += 1;
                    let lasts = event.at_ms + for_ms + pause_ms + super::RENEW_CUT_AFTER_PAUSE_MS_MAX;
                    assert!(lasts < on.safety_ms, "seed {seed}: past the safety phase");
                    assert!((5_000..=15_000).contains(&for_ms) && (1..=2).contains(&strikes), "seed {seed}");
                    assert!((1_000..=2_600).contains(&pause_ms), "seed {seed}: {pause_ms} ms");
                }
                Fault::AckAmnesia { for_ms, down_ms, fsync_ms } => {
                    amnesia += 1;
                    slowed += usize::from(fsync_ms > 0);
                    assert!(event.at_ms + for_ms + down_ms < on.safety_ms, "seed {seed}: past the safety phase");
                    assert!((1_000..=5_000).contains(&for_ms) && (200..=1_500).contains(&down_ms), "seed {seed}");
                    assert!(fsync_ms == 0 || (20..=300).contains(&fsync_ms), "seed {seed}: {fsync_ms} ms");
                }
                _ => {}
            }
        }
        // Their own streams: the other families are the same with and without them.
        let reactive = |fault: &Fault| matches!(fault, Fault::RenewStrikes { .. } | Fault::AckAmnesia { .. });
        let others: Vec<&FaultEvent> = with.iter().filter(|e| !reactive(&e.fault)).collect();
        assert_eq!(others, plan(&standard, seed).iter().collect::<Vec<_>>(), "seed {seed}");
        let only_renews = Model { ack_amnesia: None, ..on.clone() };
        assert!(plan(&only_renews, seed).iter().all(|e| !matches!(e.fault, Fault::AckAmnesia { .. })));
        let renews_of = |plan: Vec<FaultEvent>| -> Vec<FaultEvent> {
            plan.into_iter().filter(|e| matches!(e.fault, Fault::RenewStrikes { .. })).collect()
        };
        assert_eq!(
            renews_of(plan(&only_renews, seed)),
            renews_of(with.clone()),
            "seed {seed}: one family's plan alone"
        );
        let off = Model { renew_strikes: Some(false), ack_amnesia: Some(false), ..Model::default() };
        assert_eq!(plan(&off, seed), plan(&standard, seed), "seed {seed}: false is absent");
    }
    assert!((50..=200).contains(&renews), "{renews} renew-strike episodes in 50 runs");
    assert!((50..=250).contains(&amnesia), "{amnesia} ack-amnesia episodes in 50 runs");
    assert!(slowed * 4 > amnesia && slowed * 4 < amnesia * 3, "{slowed} of {amnesia} crash rather than restore");
}

#[test]
fn late_renewals_are_planned_only_when_set_on_and_leave_the_other_families_alone() {
    let standard = Model::default();
    assert_eq!(standard.late_renewals, None, "off in the standard model");
    let on = Model { late_renewals: Some(true), ..Model::default() };
    let off = Model { late_renewals: Some(false), ..Model::default() };
    let mut episodes = 0;
    for seed in 0..50 {
        let with = plan(&on, seed);
        assert_eq!(with, plan(&on, seed), "seed {seed}: the same plan every time");
        let (late, others): (Vec<&FaultEvent>, Vec<&FaultEvent>) =
            with.iter().partition(|e| matches!(e.fault, Fault::LateRenewals { .. }));
        for event in late {
            let Fault::LateRenewals { for_ms, strikes, after_ms } = event.fault else { unreachable!() };
            episodes += 1;
            let held_ms_max = on.lease_ms + super::late_renewals::LATE_RENEWAL_AFTER_MS_MAX;
            assert!(event.at_ms + for_ms + held_ms_max < on.safety_ms, "seed {seed}: past the safety phase");
            assert!((5_000..=15_000).contains(&for_ms) && (1..=3).contains(&strikes), "seed {seed}");
            assert!(after_ms <= super::late_renewals::LATE_RENEWAL_AFTER_MS_MAX, "seed {seed}: {after_ms} ms");
        }
        // Its own stream: the other families are the same with and without it.
        assert_eq!(others, plan(&standard, seed).iter().collect::<Vec<_>>(), "seed {seed}");
        assert_eq!(plan(&off, seed), plan(&standard, seed), "seed {seed}: false is absent");
    }
    assert!((50..=200).contains(&episodes), "{episodes} late-renewal episodes in 50 runs");
}

/// The models whose plans are pinned below: the standard one, every family
/// on (with drift beyond the bound and a stretched fault rate), the swarm's
/// draws, a restores-only cluster, and phases from empty to half an hour.
fn pinned_models(seed: u64) -> Vec<Model> {
    let every = Model {
        restores: true,
        clock_steps: true,
        drift_beyond_bound: true,
        resource_restores: true,
        leader_churn: true,
        ack_crashes: Some(true),
        renew_strikes: Some(true),
        ack_amnesia: Some(true),
        grant_strikes: Some(true),
        vote_strikes: Some(true),
        fence_strikes: Some(true),
        late_renewals: Some(true),
        figure8_strikes: Some(true),
        ..Model::default()
    };
    vec![
        Model::default(),
        every.clone(),
        Model { fault_rate: 0.3, safety_ms: 120_000, ..every.clone() },
        Model { safety_ms: 1_800_000, ..every },
        Model { crashes: false, restores: true, nodes: 5, ..Model::default() },
        Model { safety_ms: 0, ..Model::default() },
        Model { safety_ms: 7_000, ..Model::default() },
        swarm::resolve(&Model { swarm: true, ..Model::default() }, seed),
    ]
}

/// FNV-1a over the plan's JSON: one number per plan to pin.
fn fingerprint(plan: &[FaultEvent]) -> u64 {
    let json = serde_json::to_string(plan).expect("a plan serializes");
    json.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// Drawn as it is played, the schedule gives exactly the plans the
/// whole-plan draw gave (every family pushed whole, then a stable sort by
/// time): their fingerprints, taken from that draw, are pinned here.
#[test]
fn the_schedule_draws_the_plans_the_whole_plan_draw_did() {
    let mut all = 0u64;
    for seed in 0..40 {
        for model in pinned_models(seed) {
            all = all.rotate_left(7) ^ fingerprint(&plan(&model, seed));
        }
    }
    assert_eq!(all, 0x9346_d07c_4367_682d, "a plan moved");
}

/// A four-hour phase with every family on holds only the events drawn
/// ahead of the clock, never the plan.
#[test]
fn a_schedule_holds_a_few_events_whatever_the_phase_length() {
    for seed in 0..4 {
        let model = Model { safety_ms: 4 * 3_600_000, ..pinned_models(seed)[1].clone() };
        let mut schedule = Schedule::new(&model, seed);
        let (mut given, mut pending_max) = (0, 0);
        while schedule.next().is_some() {
            given += 1;
            pending_max = pending_max.max(schedule.pending());
        }
        assert!(given > 30_000, "{given} events in four hours");
        assert!(pending_max <= 64, "{pending_max} events held ahead of the clock");
    }
}

/// Dense plans (ten times the fault rate, every family on) tie a disk's
/// outage with the cluster's own in one millisecond, which the standard
/// rate almost never does: their order there is the whole-plan draw's,
/// pinned from it (seeds 15 and 33 of ten minutes, 25 of nine nodes).
#[test]
fn dense_plans_order_their_ties_as_the_whole_plan_draw_did() {
    let every = [
        "restores=true",
        "clock_steps=true",
        "drift_beyond_bound=true",
        "resource_restores=true",
        "resource_crashes=true",
        "leader_churn=true",
        "ack_crashes=true",
        "renew_strikes=true",
        "ack_amnesia=true",
        "grant_strikes=true",
        "vote_strikes=true",
        "fence_strikes=true",
        "late_renewals=true",
        "figure8_strikes=true",
        "partitions=true",
        "crashes=true",
        "pauses=true",
        "fault_rate=10.0",
    ];
    let cases: [(&[&str], u64, usize, u64); 3] = [
        (&["safety_ms=600000"], 15, 5_956, 0x1335_4bc2_96f7_82d6),
        (&["safety_ms=600000"], 33, 5_873, 0xc818_3617_2e3a_e227),
        (&["nodes=9", "safety_ms=300000"], 25, 3_014, 0xa104_62be_f5fa_10d4),
    ];
    for (extra, seed, len, pinned) in cases {
        let settings: Vec<String> = every.iter().chain(extra).map(|s| s.to_string()).collect();
        let model = Model::default().with_settings(&settings).expect("valid settings");
        let drawn = plan(&model, seed);
        assert_eq!((drawn.len(), fingerprint(&drawn)), (len, pinned), "seed {seed} {extra:?}: a plan moved");
    }
}
