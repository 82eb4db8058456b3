//! Tests of the Raft family: election safety, apply agreement (no-ops and
//! terms included) and commit durability, on hand-made histories.

use super::super::testkit::*;
use super::super::Property;
use super::RaftChecker;
use crate::history::EventKind;
use fencelock::raft::Role;
use fencelock::{ApplyResult, ClientId, LogIndex, NodeId, Token};

#[test]
fn clean_run_passes_and_counts_elections() {
    let verdict = happy().at_ms(4_000).leader(1, 2).check();
    assert_clean(&verdict);
    assert_eq!(verdict.counters.elections, 2);
    assert_eq!(verdict.counters.first_leader_us, Some(10_000));
}

#[test]
fn two_leaders_in_one_term_break_election_safety() {
    let verdict = happy().at_ms(4_000).role(1, 1, Role::Candidate).leader(1, 1).leader(1, 1).check();
    assert_only(&verdict, Property::ElectionSafety);
    assert_eq!(verdict.violations.len(), 1, "reported once");
    assert_eq!(verdict.violations[0].nodes, vec![NodeId(0), NodeId(1)]);
}

#[test]
fn the_same_leader_reelected_after_restart_is_fine() {
    let verdict = happy().at_ms(4_000).crash(server(0)).restart(server(0)).leader(0, 1).check();
    assert_clean(&verdict);
}

#[test]
fn a_term_repeated_across_a_restore_still_breaks_election_safety() {
    let verdict = happy().at_ms(4_000).restore(1, 100).leader(2, 1).check();
    assert_only(&verdict, Property::ElectionSafety);
}

#[test]
fn diverging_results_break_apply_agreement() {
    let verdict = happy()
        .at_ms(4_000)
        .apply(0, 6, expire("k", 43), ApplyResult::Expired { existed: false })
        .apply(1, 6, expire("k", 43), ApplyResult::Expired { existed: false })
        .apply(2, 6, expire("k", 44), ApplyResult::Expired { existed: false })
        .check();
    assert_only(&verdict, Property::ApplyAgreement);
    assert_eq!(verdict.violations[0].nodes, vec![NodeId(0), NodeId(2)]);
}

#[test]
fn indices_restart_after_a_cluster_restore() {
    // After the restore index 1 holds a different grant: a new epoch, not a divergence.
    let verdict = happy()
        .at_ms(4_000)
        .restore(1, 100)
        .leader(0, 1 << 32)
        .apply_all(&[0, 1, 2], 1, grant("k", 2, 9), granted(101))
        .check();
    assert_clean(&verdict);
}

#[test]
fn an_acked_grant_overwritten_by_a_noop_breaks_commit_durability() {
    // n0 applies and acknowledges i6 alone; the new leader n1 overwrites
    // i6 with its no-op, which this history leaves out, and the others apply i7 without it.
    let verdict = happy()
        .at_ms(4_000)
        .apply(0, 6, grant("j", 2, 7), granted(44))
        .reply(0, 2, 7, reply_granted(44))
        .crash(server(0))
        .at_ms(4_500)
        .leader(1, 2)
        .apply_all(&[1, 2], 7, grant("j", 1, 8), granted(45))
        .check();
    assert_only(&verdict, Property::CommitDurability);
    let lost = verdict.violations.iter().find(|v| v.property == Property::CommitDurability).unwrap();
    assert_eq!(lost.nodes, vec![NodeId(0), NodeId(1), NodeId(2)]);
    assert_eq!(lost.at_us, 4_500_000);
}

#[test]
fn an_acked_release_skipped_by_later_entries_breaks_only_commit_durability() {
    let verdict = happy()
        .at_ms(4_000)
        .apply(0, 6, release("k", 43, 1, 9), ApplyResult::Released)
        .reply(0, 1, 9, fencelock::service::ClientReply::Released)
        .at_ms(4_500)
        .leader(1, 2)
        .apply_all(&[1, 2], 7, expire("k", 43), ApplyResult::Expired { existed: false })
        .check();
    assert_only(&verdict, Property::CommitDurability);
}

#[test]
fn a_snapshot_without_the_acked_token_breaks_only_commit_durability() {
    let verdict = happy()
        .at_ms(4_000)
        .ev(EventKind::SnapshotInstalled {
            node: NodeId(2),
            index: LogIndex(5),
            token_last: Token(42),
            locks: Vec::new(),
        })
        .check();
    assert_only(&verdict, Property::CommitDurability);
}

#[test]
fn a_snapshot_carrying_the_acked_token_is_fine() {
    let verdict = happy()
        .at_ms(4_000)
        .ev(EventKind::SnapshotInstalled {
            node: NodeId(2),
            index: LogIndex(5),
            token_last: Token(43),
            locks: Vec::new(),
        })
        .apply(2, 6, expire("k", 43), ApplyResult::Expired { existed: true })
        .check();
    assert_clean(&verdict);
}

#[test]
fn a_whole_cluster_restore_may_roll_back_acked_entries() {
    // i5 (c1's grant of 43) was acknowledged; the restore rolls back to a
    // backup at i4 and i5 now holds another grant with a higher token.
    let verdict = happy()
        .at_ms(4_000)
        .restore(1, 100)
        .leader(0, 1 << 32)
        .apply_all(&[0, 1, 2], 5, grant("j", 2, 9), granted(101))
        .apply_all(&[0, 1, 2], 6, grant("k", 2, 10), granted(102))
        .check();
    assert_clean(&verdict);
}

/// A late Expire of the already expired token 42: harmless to every other family.
fn late_expire() -> fencelock::Command {
    expire("k", 42)
}

const LATE_EXPIRED: ApplyResult = ApplyResult::Expired { existed: false };

#[test]
fn noops_of_different_terms_at_one_index_break_apply_agreement() {
    // Figure 8: n1's no-op of t3 is applied where n0 and n2 applied the no-op of t2.
    let verdict = happy().at_ms(4_000).apply_noop(0, 6, 2).apply_noop(1, 6, 3).apply_noop(2, 6, 2).check();
    assert_only(&verdict, Property::ApplyAgreement);
    assert_eq!(verdict.violations.len(), 1, "reported once per index");
    let v = &verdict.violations[0];
    assert_eq!(v.nodes, vec![NodeId(0), NodeId(1)]);
    assert!(v.detail.starts_with("n1 applied a no-op of t3 at i6 where n0 applied a no-op of t2"), "{}", v.detail);
}

#[test]
fn a_noop_and_a_command_at_one_index_break_apply_agreement() {
    let verdict = happy().at_ms(4_000).apply_noop(0, 6, 1).apply_in(2, 6, 1, late_expire(), LATE_EXPIRED).check();
    assert_only(&verdict, Property::ApplyAgreement);
    let v = &verdict.violations[0];
    assert_eq!(v.nodes, vec![NodeId(0), NodeId(2)]);
    assert!(v.detail.contains("n2 applied Expire"), "{}", v.detail);
    assert!(v.detail.contains("where n0 applied a no-op of t1"), "{}", v.detail);
}

#[test]
fn the_same_command_in_different_terms_breaks_apply_agreement() {
    let verdict = happy()
        .at_ms(4_000)
        .apply_in(0, 6, 1, late_expire(), LATE_EXPIRED)
        .apply_in(1, 6, 2, late_expire(), LATE_EXPIRED)
        .apply_in(2, 6, 1, late_expire(), LATE_EXPIRED)
        .check();
    assert_only(&verdict, Property::ApplyAgreement);
    assert_eq!(verdict.violations.len(), 1);
    assert_eq!(verdict.violations[0].nodes, vec![NodeId(0), NodeId(1)]);
    assert!(verdict.violations[0].detail.contains("of t2 at i6 where n0 applied Expire"));
}

#[test]
fn every_node_applying_the_same_noop_is_fine() {
    let verdict = happy()
        .at_ms(4_000)
        .leader(1, 2)
        .apply_noop(1, 6, 2)
        .apply_noop(0, 6, 2)
        .apply_noop(2, 6, 2)
        .apply_all(&[1, 0, 2], 7, late_expire(), LATE_EXPIRED)
        .check();
    assert_clean(&verdict);
}

#[test]
fn an_acked_grant_applied_elsewhere_as_a_noop_breaks_commit_durability() {
    // n0 applies and acknowledges i6 alone; the new leader n1 overwrites it with its no-op of t2.
    let verdict = happy()
        .at_ms(4_000)
        .apply(0, 6, grant("j", 2, 7), granted(44))
        .reply(0, 2, 7, reply_granted(44))
        .crash(server(0))
        .at_ms(4_500)
        .leader(1, 2)
        .apply_noop(1, 6, 2)
        .apply_noop(2, 6, 2)
        .check();
    assert_eq!(verdict.properties(), vec![Property::ApplyAgreement, Property::CommitDurability]);
    let lost: Vec<_> = verdict.violations.iter().filter(|v| v.property == Property::CommitDurability).collect();
    assert_eq!(lost.len(), 1, "reported once");
    assert_eq!((lost[0].nodes.clone(), lost[0].at_us), (vec![NodeId(0), NodeId(1)], 4_500_000));
    assert_eq!((lost[0].clients.clone(), lost[0].tokens.clone()), (vec![ClientId(2)], vec![Token(44)]));
    assert!(lost[0].detail.starts_with("n1 applied a no-op of t2 at i6, where n0 had acknowledged"));
}

#[test]
fn acking_a_grant_where_a_noop_was_applied_breaks_commit_durability() {
    // The no-op comes first in the history; n0's acknowledgement is for an entry the cluster does not hold.
    let verdict = happy()
        .at_ms(4_000)
        .apply_noop(1, 6, 2)
        .apply(0, 6, grant("j", 2, 7), granted(44))
        .reply(0, 2, 7, reply_granted(44))
        .check();
    assert_eq!(verdict.properties(), vec![Property::ApplyAgreement, Property::CommitDurability]);
    let lost = verdict.violations.iter().find(|v| v.property == Property::CommitDurability).unwrap();
    assert!(lost.detail.contains("but n1 applied a no-op of t2 there"), "{}", lost.detail);
}

#[test]
fn an_index_reused_in_another_term_after_a_cluster_restore_is_fine() {
    let verdict = happy()
        .at_ms(4_000)
        .apply_noop(0, 6, 1)
        .apply_noop(1, 6, 1)
        .restore(1, 100)
        .leader(0, 1 << 32)
        .apply_noop(0, 6, 1 << 32)
        .apply_noop(1, 6, 1 << 32)
        .apply_in(2, 5, 1 << 32, late_expire(), LATE_EXPIRED)
        .check();
    assert_clean(&verdict);
}

#[test]
fn replaying_the_same_noops_after_a_restart_a_snapshot_or_a_node_restore_is_fine() {
    // n1 applies the no-ops of t2 at i6 and i7; it restarts and replays i6,
    // installs a snapshot up to i6 and applies i7, and after a restore from
    // a backup replays both: the same entries each time, so nothing diverges.
    let snapshot =
        EventKind::SnapshotInstalled { node: NodeId(1), index: LogIndex(6), token_last: Token(43), locks: vec![] };
    let restored = EventKind::NodeRestored { node: NodeId(1), backup_at_us: 3_000_000 };
    let verdict = happy()
        .at_ms(4_000)
        .leader(1, 2)
        .apply_noop(1, 6, 2)
        .apply_noop(1, 7, 2)
        .apply_noop(0, 6, 2)
        .crash(server(1))
        .restart(server(1))
        .apply_noop(1, 6, 2)
        .ev(snapshot)
        .apply_noop(1, 7, 2)
        .ev(restored)
        .apply_noop(1, 6, 2)
        .apply_noop(1, 7, 2)
        .apply_noop(2, 7, 2)
        .check();
    assert_clean(&verdict);
}

/// The runs a node's applied indices are kept as answer what a map of every
/// index to its first apply would: over random applies, restarts and jumps.
#[test]
fn applied_runs_answer_as_a_map_of_every_index() {
    use crate::checker::index_runs::IndexRuns;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    for seed in 0..50 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let (mut runs, mut every) = (IndexRuns::default(), BTreeMap::new());
        for at_us in 0..300u64 {
            let index = LogIndex(rng.gen_range(1..120));
            runs.insert(index, at_us);
            every.entry(index).or_insert(at_us);
        }
        for i in 0..130 {
            let index = LogIndex(i);
            assert_eq!(runs.contains(index), every.contains_key(&index), "seed {seed}, {index:?}");
            if !every.contains_key(&index) {
                let above = every.range(LogIndex(i + 1)..).next().map(|(k, v)| (*k, *v));
                assert_eq!(runs.first_above(index), above, "seed {seed}, {index:?}");
            }
        }
    }
}

#[test]
fn only_a_clients_latest_four_applies_per_server_back_its_acknowledgements() {
    // n0 alone applies c2's r7 at i6 and `later` more grants of c2 after it,
    // then acknowledges r7; the new leader n1 applies past them all.
    let acked_then_skipped = |later: u64| {
        let mut h = happy().at_ms(4_000).apply(0, 6, grant("j", 2, 7), granted(44));
        for i in 0..later {
            h = h.apply(0, 7 + i, grant(["a", "b", "c", "d"][i as usize], 2, 8 + i), granted(45 + i));
        }
        let h = h.reply(0, 2, 7, reply_granted(44)).crash(server(0)).at_ms(4_500).leader(1, 2);
        h.apply_all(&[1, 2], 7 + later, expire("k", 43), ApplyResult::Expired { existed: true }).check()
    };
    let lost_at_i6 = |later: u64| {
        let verdict = acked_then_skipped(later);
        verdict.violations.iter().any(|v| v.property == Property::CommitDurability && v.detail.contains("at i6"))
    };
    // Among c2's four latest applies at n0: judged, and lost.
    assert!(lost_at_i6(3));
    // The fifth latest: a server answers only a client's latest acquire, and
    // the checker keeps four per client and server; not judged here.
    assert!(!lost_at_i6(4));
}

/// Three servers apply no-ops at 1..=3000 (term 1), n0's disk holds a
/// snapshot at 100 when `backup` says it is backed up, then every disk's
/// snapshot reaches 2900 and n0 is restored and applies a no-op of term 9 at 101.
fn reapply_after_the_floor(backup: bool) -> H {
    let mut h = H::new().at_ms(10).leader(0, 1);
    for index in 1..=3_000 {
        h = h.apply_noop(0, index, 1).apply_noop(1, index, 1).apply_noop(2, index, 1);
        if index == 150 {
            h = h.ev(EventKind::SnapshotDurable { node: NodeId(0), index: LogIndex(100) });
            if backup {
                h = h.ev(EventKind::Fault { fault: crate::faults::Fault::BackupNode { node: NodeId(0) } });
            }
        }
    }
    for node in 0..3 {
        h = h.ev(EventKind::SnapshotDurable { node: NodeId(node), index: LogIndex(2_900) });
    }
    let restored = EventKind::NodeRestored { node: NodeId(0), backup_at_us: 10_000 };
    let start = EventKind::SnapshotInstalled {
        node: NodeId(0),
        index: LogIndex(100),
        token_last: Token(40),
        locks: Vec::new(),
    };
    h.at_ms(20).ev(restored).ev(start).apply_noop(0, 101, 9)
}

#[test]
fn entries_no_disk_or_backup_can_reach_are_forgotten_and_a_backups_are_kept() {
    // With n0's backup at 100 kept, its restore re-applies 101 and is judged.
    let verdict = reapply_after_the_floor(true).check();
    assert_only(&verdict, Property::ApplyAgreement);
    assert!(verdict.violations[0].detail.contains("at i101"), "{}", verdict.violations[0]);
    // Without a backup no disk holds a snapshot below 2900: the checker kept
    // the entries from 1900 on only, so the same history (which the world
    // cannot produce) goes unjudged at 101.
    assert_clean(&reapply_after_the_floor(false).check());
}

/// Three servers apply c1's grants at 1..=`count`, each acknowledged by
/// n0, every disk's snapshot trailing the applies by 100 (n0's held at 100
/// by an operator backup when `backup` says so); then n0 is restored from
/// that backup and applies another grant at 101.
fn acked_then_reapplied(count: u64, backup: bool) -> H {
    let mut h = H::new().at_ms(10).leader(0, 1);
    for index in 1..=count {
        h = h.apply_all(&[0, 1, 2], index, grant("k", 1, index), granted(1_000 + index));
        h = h.reply(0, 1, index, reply_granted(1_000 + index));
        if index == 100 && backup {
            h = h.ev(EventKind::SnapshotDurable { node: NodeId(0), index: LogIndex(100) });
            h = h.ev(EventKind::Fault { fault: crate::faults::Fault::BackupNode { node: NodeId(0) } });
        }
        if index % 100 == 0 {
            for node in 0..3 {
                h = h.ev(EventKind::SnapshotDurable { node: NodeId(node), index: LogIndex(index - 100) });
            }
        }
    }
    let restored = EventKind::NodeRestored { node: NodeId(0), backup_at_us: 10_000 };
    let start = EventKind::SnapshotInstalled {
        node: NodeId(0),
        index: LogIndex(100),
        token_last: Token(1_100),
        locks: Vec::new(),
    };
    h.at_ms(20).ev(restored).ev(start).apply_in(0, 101, 9, grant("k", 2, 1), granted(1_101))
}

/// Feeds `h` to a Raft checker alone; returns the most acknowledgements it
/// held at once and its report.
fn feed_raft(h: &H) -> (usize, crate::checker::Report) {
    use crate::checker::state::Context;
    use crate::checker::{Family, Report};
    let mut ctx = Context::new(h.config(h.now_us() + 1));
    let mut checker = RaftChecker::default();
    let mut report = Report::default();
    let mut held_max = 0;
    for event in h.events() {
        let facts = ctx.facts(event);
        checker.observe(&ctx, &facts, event, &mut report);
        ctx.absorb(event, &facts);
        held_max = held_max.max(checker.acked.len());
    }
    checker.finish(&ctx, &mut report);
    (held_max, report)
}

#[test]
fn acknowledgements_below_the_horizon_are_forgotten_and_a_backups_are_kept() {
    // Without a backup, what the checker holds does not grow with the run.
    let (held_short, report) = feed_raft(&acked_then_reapplied(3_000, false));
    assert!(report.violations.iter().all(|v| v.property != Property::CommitDurability));
    let (held_long, _) = feed_raft(&acked_then_reapplied(6_000, false));
    assert!(held_short <= 1_200, "{held_short} acknowledgements held at once");
    assert_eq!(held_long, held_short, "held at 6000 grants");
    // n0's backup at 100 keeps i101's acknowledgement: its restore applies
    // another grant there, and the overwrite is found.
    let (held, report) = feed_raft(&acked_then_reapplied(3_000, true));
    assert_eq!(held, 3_000);
    let lost = report.violations.iter().find(|v| v.property == Property::CommitDurability).expect("commit-durability");
    assert!(lost.detail.contains("at i101, where n0 had acknowledged"), "{}", lost.detail);
}
