//! Named scenarios (SCENARIOS.md) told as short stories to the simulated
//! world, each snapshotting the compact story of what happened: grants with
//! tokens, expiries with `existed`, resource verdicts, leader changes, faults.
//! Review changed snapshots with `cargo insta review`.

use fencelock::resource::{WritePath, WriteVerdict};
use fencelock::{ClientId, NodeId, Property, Token, Variant};
use fencesim::faults::Fault;
use fencesim::history::Actor;
use fencesim::machine::net::Addr;
use fencesim::model::Model;
use fencesim::nodes::commands::WorkerResult;
use fencesim::run::seed::Outcome;
use fencesim::script::{ms, run_script, script_model, story, worker_a, worker_b, Sim, B1042};

/// Runs a story and snapshots what happened plus the checker's verdict.
fn check<F>(name: &str, model: Model, story_fn: F) -> Outcome
where
    F: AsyncFnOnce(&mut Sim) + Send + 'static,
{
    let outcome = run_script(0, model, story_fn);
    if std::env::var_os("FENCESIM_TRACE").is_some() {
        // `FENCESIM_TRACE=1 cargo test -p fencesim-tests --test suite scenarios::NAME -- --nocapture`
        for event in outcome.history.events() {
            println!("{}", fencesim::run::trace::line(event));
        }
    }
    let mut text = story(&outcome.history);
    text.push_str("\n---\n");
    if outcome.violations.is_empty() {
        text.push_str("verdict: ok");
    } else {
        for violation in &outcome.violations {
            text.push_str(&format!("violation: {} — {}\n", violation.property, violation.detail));
        }
    }
    insta::assert_snapshot!(name, text);
    outcome
}

fn lease_ms() -> u64 {
    script_model(2).lease_ms
}

/// Seed 000, "In der Praxis": A gets 41, stalls, its lease expires, B gets 42
/// and stores the checked status; A wakes and writes with 41; the database
/// compares 41 with 42 and rejects it. `restart_db` restarts the database
/// before A's write; `path` is the write path A's late write takes.
async fn paused_holder(sim: &mut Sim, restart_db: bool, path: WritePath) {
    let (a, b) = (worker_a(), worker_b());
    sim.leader().await;
    assert_eq!(sim.acquire(a, B1042).await, Token(41));
    sim.hold(a);
    let late_write = sim.start_write(a, B1042, path, None);
    sim.run_for(ms(lease_ms() * 2)).await;
    assert_eq!(sim.acquire(b, B1042).await, Token(42));
    assert_eq!(sim.write(b, B1042, WritePath::Status).await, WorkerResult::Written(WriteVerdict::Accepted));
    if restart_db {
        sim.fault(Fault::CrashResource).await;
        sim.run_for(ms(100)).await;
        sim.fault(Fault::RestartResource).await;
        sim.run_for(ms(100)).await;
    }
    sim.resume(a);
    let verdict = sim.outcome(late_write).await;
    assert_eq!(verdict, WorkerResult::Written(WriteVerdict::RejectedStale { highest: Token(42) }));
}

#[test]
fn b1042_paused_holder_is_fenced() {
    let outcome = check("b1042_paused_holder", script_model(2), async |sim: &mut Sim| {
        paused_holder(sim, false, WritePath::Status).await
    });
    assert!(outcome.ok);
}

#[test]
fn b1042_fenced_after_database_restart() {
    let outcome = check("b1042_after_db_restart", script_model(2), async |sim: &mut Sim| {
        paused_holder(sim, true, WritePath::Status).await
    });
    assert!(outcome.ok);
}

#[test]
fn b1042_fenced_on_the_second_write_path() {
    let outcome = check("b1042_second_path", script_model(2), async |sim: &mut Sim| {
        paused_holder(sim, false, WritePath::Ledger).await
    });
    assert!(outcome.ok);
}

/// Seed 002's restore: A writes with 41 and the night's backup of the
/// database is taken; A stalls holding 41, its lease expires, B gets 42 and
/// writes; the database is restored from the night's backup, which knows
/// only 41. A wakes at once and writes with 41: the restored database
/// answers `Unavailable` until it has read its floor from the lock service
/// (B holds the key with 42), then rejects 41 as stale.
async fn restored_under_a_paused_holder(sim: &mut Sim) -> WorkerResult {
    let (a, b) = (worker_a(), worker_b());
    sim.leader().await;
    assert_eq!(sim.acquire(a, B1042).await, Token(41));
    assert_eq!(sim.write(a, B1042, WritePath::Status).await, WorkerResult::Written(WriteVerdict::Accepted));
    sim.fault(Fault::BackupResource).await;
    sim.hold(a);
    let late_write = sim.start_write(a, B1042, WritePath::Status, None);
    sim.run_for(ms(lease_ms() * 2)).await;
    assert_eq!(sim.acquire(b, B1042).await, Token(42));
    assert_eq!(sim.write(b, B1042, WritePath::Status).await, WorkerResult::Written(WriteVerdict::Accepted));
    sim.fault(Fault::RestoreResource).await;
    sim.resume(a);
    sim.outcome(late_write).await
}

#[test]
fn b1042_fenced_after_database_restore() {
    let outcome = check("b1042_after_db_restore", script_model(2), async |sim: &mut Sim| {
        let verdict = restored_under_a_paused_holder(sim).await;
        assert_eq!(verdict, WorkerResult::Written(WriteVerdict::RejectedStale { highest: Token(42) }));
    });
    assert!(outcome.ok);
}

#[test]
fn b1042_restored_database_that_trusts_its_backup_lets_the_stale_write_in() {
    let model = Model { variant: Variant::ResourceRestoreNaive, ..script_model(2) };
    let outcome = check("b1042_after_db_restore_naive", model, async |sim: &mut Sim| {
        let verdict = restored_under_a_paused_holder(sim).await;
        assert_eq!(verdict, WorkerResult::Written(WriteVerdict::Accepted));
    });
    assert!(outcome.violations.iter().any(|v| v.property == Property::FencedWrite));
}

#[test]
fn tokens_stay_monotonic_across_restores() {
    let outcome = check("tokens_across_restores", script_model(2), async |sim: &mut Sim| {
        let a = worker_a();
        let leader = sim.leader().await;
        sim.fault(Fault::BackupCluster).await; // taken at token 40
        sim.fault(Fault::BackupNode { node: NodeId((leader.0 + 1) % 5) }).await;
        for _ in 0..5 {
            sim.acquire(a, B1042).await;
            sim.release(a, B1042).await;
        } // tokens reached 45
          // A node restart, then one node restored from its stale backup.
        sim.crash(leader).await;
        sim.run_for(ms(500)).await;
        sim.restart(leader).await;
        sim.fault(Fault::RestoreNode { node: NodeId((leader.0 + 1) % 5) }).await;
        sim.leader().await;
        sim.acquire(a, B1042).await;
        sim.release(a, B1042).await;
        // The whole cluster restored from the backup at 40, twice.
        for _ in 0..2 {
            sim.fault(Fault::RestoreCluster).await;
            sim.run_for(ms(1_000)).await;
            sim.leader().await;
            sim.acquire(a, B1042).await;
            sim.release(a, B1042).await;
        }
    });
    assert!(outcome.ok);
}

#[test]
fn ghost_lock_is_released_by_the_leader() {
    let outcome = check("ghost_lock", script_model(2), async |sim: &mut Sim| {
        let (a, b) = (worker_a(), worker_b());
        sim.leader().await;
        // A has worked with the cluster before, so it knows the leader.
        sim.acquire(a, "invoice/B-1043").await;
        sim.release(a, "invoice/B-1043").await;
        // Its connection drops right after it asks: the Granted answer bounces.
        sim.acquire_and_vanish(a, B1042).await;
        sim.run_for(ms(300)).await;
        // Well before A's lease would have run out, the key is free again.
        sim.acquire(b, B1042).await;
    });
    assert!(outcome.ok);
}

#[test]
fn leader_change_mid_lease_keeps_the_lease() {
    let outcome = check("leader_change_mid_lease", script_model(2), async |sim: &mut Sim| {
        let (a, b) = (worker_a(), worker_b());
        let leader = sim.leader().await;
        sim.acquire(a, B1042).await;
        sim.crash(leader).await;
        sim.run_for(ms(lease_ms() / 2)).await;
        sim.leader().await;
        // The new leader restarted A's lease from its own start of office.
        assert!(matches!(sim.write(a, B1042, WritePath::Status).await, WorkerResult::Written(WriteVerdict::Accepted)));
        sim.restart(leader).await;
        sim.run_for(ms(lease_ms() * 2)).await;
        sim.acquire(b, B1042).await;
    });
    assert!(outcome.ok);
}

#[test]
fn renew_at_a_deposed_leader_is_not_acknowledged() {
    let outcome = check("renew_at_deposed_leader", script_model(2), async |sim: &mut Sim| {
        let (a, b) = (worker_a(), worker_b());
        let leader = sim.leader().await;
        assert_eq!(sim.acquire(a, B1042).await, Token(41));
        // A and the old leader end up on the minority side.
        let majority: Vec<Addr> =
            (0..5).filter(|&n| n != leader.0).map(|n| Addr::Server(NodeId(n))).chain([Addr::Client(b)]).collect();
        sim.partition(vec![vec![Addr::Server(leader), Addr::Client(a)], majority]).await;
        // The old leader cannot confirm its leadership, so it must not say Renewed.
        let renew = sim.renew(a, B1042).await;
        assert_ne!(renew, WorkerResult::Renewed, "a deposed leader acknowledged a renewal");
        // The majority's new leader expires 41 after a full lease and grants 42.
        sim.run_for(ms(lease_ms() * 2)).await;
        assert_eq!(sim.acquire(b, B1042).await, Token(42));
        sim.heal().await;
    });
    assert!(outcome.ok);
}

#[test]
fn backward_clock_step_on_the_leader_only_delays_expiry() {
    let outcome = check("backward_clock_step", script_model(2), async |sim: &mut Sim| {
        let (a, b) = (worker_a(), worker_b());
        let leader = sim.leader().await;
        sim.acquire(a, B1042).await;
        sim.fault(Fault::ClockStep { actor: Actor::Server(leader), delta_ms: -5_000 }).await;
        sim.run_for(ms(lease_ms() + 500)).await;
        sim.release(a, B1042).await;
        sim.acquire(b, B1042).await;
    });
    assert!(outcome.ok);
}

#[test]
fn drift_beyond_the_bound_is_contained_by_fencing() {
    let outcome = check("drift_beyond_bound", script_model(2), async |sim: &mut Sim| {
        let (a, b) = (worker_a(), worker_b());
        let leader = sim.leader().await;
        // The leader's clock runs 60% fast: far beyond the assumed bound.
        sim.fault(Fault::ClockRate { actor: Actor::Server(leader), ppm: 600_000 }).await;
        sim.acquire(a, B1042).await;
        let late_write = sim.start_write(a, B1042, WritePath::Status, None);
        sim.hold(a);
        sim.run_for(ms(lease_ms() * 7 / 10)).await;
        // A still believes (its own clock is right), but the leader expired it early.
        sim.acquire(b, B1042).await;
        assert_eq!(sim.write(b, B1042, WritePath::Status).await, WorkerResult::Written(WriteVerdict::Accepted));
        sim.resume(a);
        let verdict = sim.outcome(late_write).await;
        assert!(matches!(verdict, WorkerResult::Written(WriteVerdict::RejectedStale { .. })));
    });
    assert!(outcome.ok, "fencing contains the overlap: {:?}", outcome.violations);
    assert!(outcome.lease_exposures > 0, "the overlap beyond the bound is counted as an exposure");
}

/// SCENARIOS.md 3: a late Expire never deletes a freshly regranted lock. An
/// operator's tool decides to revoke A's lease 41 and stalls before sending;
/// meanwhile 41 expires and B gets 42; the tool wakes and its revoke's
/// Expire(41) commits after the regrant, answering
/// `Expired { existed: false }`; a duplicate of it does the same; 42 stays.
async fn late_revoke_after_regrant(sim: &mut Sim) -> WorkerResult {
    let (a, b, operator) = (worker_a(), worker_b(), ClientId(2));
    sim.leader().await;
    assert_eq!(sim.acquire(a, B1042).await, Token(41));
    sim.hold(operator);
    let late_revoke = sim.start_revoke(operator, B1042, Token(41));
    sim.run_for(ms(lease_ms() * 2)).await;
    assert_eq!(sim.acquire(b, B1042).await, Token(42));
    sim.resume(operator);
    sim.outcome(late_revoke).await
}

async fn delayed_expire(sim: &mut Sim) {
    let late = late_revoke_after_regrant(sim).await;
    assert_eq!(late, WorkerResult::Refused("Lost { key: Key(\"invoice/B-1042\") }".into()));
    let duplicate = sim.start_revoke(ClientId(2), B1042, Token(41));
    sim.outcome(duplicate).await;
    assert_eq!(sim.write(worker_b(), B1042, WritePath::Status).await, WorkerResult::Written(WriteVerdict::Accepted));
}

#[test]
fn a_delayed_expire_never_deletes_a_regranted_lock() {
    let outcome = check("delayed_expire", script_model(3), delayed_expire);
    assert!(outcome.ok, "{:?}", outcome.violations);
}

#[test]
fn expire_ignores_token_is_caught_by_the_delayed_expire() {
    let model = Model { variant: Variant::ExpireIgnoresToken, ..script_model(3) };
    let outcome = run_script(0, model, async |sim: &mut Sim| {
        late_revoke_after_regrant(sim).await;
    });
    assert!(outcome.violations.iter().any(|v| v.property == Property::ExpireSafety), "{:?}", outcome.violations);
}

/// SCENARIOS.md 7, the retry half: the leader's Granted answer to A is lost
/// (a one-way cut from the leader to A), A retries with the same request id
/// until the cut heals, and is answered with the original token — the retry
/// is not a second grant.
#[test]
fn a_retry_with_the_same_request_id_gets_the_original_token() {
    let outcome = check("retry_same_request_id", script_model(2), async |sim: &mut Sim| {
        let (a, b) = (worker_a(), worker_b());
        let leader = sim.leader().await;
        // A learns the leader first, so its acquire goes straight there.
        sim.acquire(a, "invoice/B-1043").await;
        sim.release(a, "invoice/B-1043").await;
        sim.fault(Fault::OneWay { from: Addr::Server(leader), to: Addr::Client(a) }).await;
        let acquire = sim.start_acquire(a, B1042);
        sim.run_for(ms(600)).await;
        sim.heal().await;
        assert_eq!(sim.outcome(acquire).await, WorkerResult::Granted(Token(42)));
        // The key really is A's: B is refused.
        assert!(matches!(sim.outcome(sim.start_acquire(b, B1042)).await, WorkerResult::Refused(_)));
    });
    assert!(outcome.ok, "{:?}", outcome.violations);
    assert_eq!(outcome.grants, 2, "one grant for B-1043, one for B-1042: the retry was not a second grant");
}
