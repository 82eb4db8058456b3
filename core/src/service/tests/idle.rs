//! `LockServer::idle_ticks`: how many coming ticks a driver may sleep
//! through. Every tick of every test here is also checked by the harness
//! (`Cluster::tick_checked`: a tick called idle does nothing); these tests
//! check the other side, that the count is not too cautious to matter and
//! that the first tick after it is the one that acts.

use super::{acquire, three, Cluster, TICK_MS};
use crate::raft::Role;
use crate::service::{Expiry, ServiceConfig};
use crate::types::NodeId;
use crate::variant::Variant;

/// Ticks `node` alone through its idle ticks, then once more; returns how
/// many were idle and whether the next one made Raft work.
fn idle_then_next(cluster: &mut Cluster, node: NodeId) -> (u32, bool) {
    let idle = cluster.server(node).idle_ticks(cluster.now_ms(node) + TICK_MS);
    for _ in 0..idle {
        cluster.tick_alone(node);
    }
    cluster.tick_alone(node);
    (idle, cluster.server(node).has_ready())
}

#[test]
fn a_quiet_leader_sleeps_until_its_next_heartbeat_and_then_sends_it() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.settle();
    for _ in 0..5 {
        let (idle, acted) = idle_then_next(&mut cluster, leader);
        // Core's standard heartbeat is every 2 ticks: at most 1 idle tick.
        assert!(idle <= 1, "{idle} idle ticks between a leader's heartbeats");
        assert!(acted, "the first tick after the idle ones sends the heartbeat");
        cluster.settle();
    }
}

#[test]
fn a_follower_cut_off_sleeps_until_its_election_timeout_and_then_campaigns() {
    let (mut cluster, leader) = three(Variant::Default);
    let follower = NodeId((leader.0 + 1) % 3);
    cluster.settle();
    cluster.isolate(follower);
    let (idle, acted) = idle_then_next(&mut cluster, follower);
    // Election timeouts are 10..20 ticks: the timer's whole rest is idle.
    assert!((8..20).contains(&idle), "{idle} idle ticks before an election timeout");
    assert!(acted, "the tick after them campaigns");
    assert_eq!(cluster.server(follower).raft().soft_state().role, Role::PreCandidate);
}

/// A leader whose Raft timers are slow enough to sleep past a waiter: client
/// 1 holds the key with a 1 s lease, client 2 waits for it up to 200 ms.
fn leader_with_a_waiter() -> (Cluster, NodeId) {
    let slow = |raft: &mut crate::raft::Config| {
        raft.heartbeat_ticks = 40;
        raft.election_ticks_min = 100;
        raft.election_ticks_max = 120;
    };
    let mut cluster = Cluster::with_raft(3, ServiceConfig::standard(Variant::Default), slow);
    let leader = cluster.elect();
    cluster.request(leader, 1, 1, acquire(0));
    cluster.request(leader, 2, 1, acquire(200));
    (cluster, leader)
}

#[test]
fn a_waiters_deadline_ends_the_idle_ticks_at_the_tick_that_times_it_out() {
    let (mut cluster, leader) = leader_with_a_waiter();
    assert!(cluster.answers(2, 1).is_empty(), "the second acquire waits");
    let raft_idle = cluster.server(leader).raft().idle_ticks();
    let (idle, acted) = idle_then_next(&mut cluster, leader);
    assert!(raft_idle > 20, "Raft alone would sleep {raft_idle} ticks");
    // The ticks before the one at the deadline (200 ms = 20 ticks away) are idle.
    assert_eq!(idle, 19);
    assert!(acted, "the tick at the deadline proposes the waiter's TimedOut");
}

/// Makes a cluster at a moment with idle ticks ahead of the node it names.
type Moment = fn() -> (Cluster, NodeId);

/// Five such moments: a quiet leader, a follower cut off, a leader whose
/// waiter will time out (also after a backward step of its clock), and a
/// leader cut off whose holder's lease waits for its confirmation.
fn idle_moments() -> Vec<(&'static str, Moment)> {
    fn quiet_leader() -> (Cluster, NodeId) {
        let (mut cluster, leader) = three(Variant::Default);
        cluster.settle();
        (cluster, leader)
    }
    fn cut_off_follower() -> (Cluster, NodeId) {
        let (mut cluster, leader) = three(Variant::Default);
        let follower = NodeId((leader.0 + 1) % 3);
        cluster.settle();
        cluster.isolate(follower);
        (cluster, follower)
    }
    fn waiter_after_a_step_back() -> (Cluster, NodeId) {
        let (mut cluster, leader) = leader_with_a_waiter();
        // The tick at the stepped-back reading moves the waiter's deadline back.
        cluster.step_clock(leader, -400);
        cluster.tick_alone(leader);
        (cluster, leader)
    }
    fn lease_confirming_while_cut_off() -> (Cluster, NodeId) {
        let (mut cluster, leader) = leader_with_a_waiter();
        cluster.isolate(leader);
        let confirming = |cluster: &Cluster| {
            cluster.server(leader).leases.values().any(|lease| matches!(lease.expiry, Expiry::Confirming { .. }))
        };
        for _ in 0..200 {
            if confirming(&cluster) {
                return (cluster, leader);
            }
            cluster.tick_alone(leader);
        }
        panic!("the lease of a leader cut off never went to confirming");
    }
    vec![
        ("a quiet leader", quiet_leader as Moment),
        ("a follower cut off", cut_off_follower),
        ("a leader with a waiter", leader_with_a_waiter),
        ("a waiter after a backward clock step", waiter_after_a_step_back),
        ("a lease confirming while its leader is cut off", lease_confirming_while_cut_off),
    ]
}

#[test]
fn idle_ticks_made_at_once_leave_the_server_as_made_one_by_one() {
    for (moment, make) in idle_moments() {
        let (mut one_by_one, node) = make();
        let (mut at_once, _) = make();
        let idle = one_by_one.server(node).idle_ticks(one_by_one.now_ms(node) + TICK_MS);
        assert!(idle > 0, "{moment}: no idle tick ahead");
        for _ in 0..idle {
            one_by_one.tick_alone(node);
        }
        at_once.tick_idle_alone(node, idle);
        // Timer for timer: the node alone for its next 30 ticks (the one
        // after the idle ones acts), then the whole cluster running on,
        // output for output.
        let timers = |cluster: &Cluster| {
            let server = cluster.server(node);
            let raft = server.raft();
            (raft.idle_ticks(), server.idle_ticks(cluster.now_ms(node) + TICK_MS), raft.soft_state(), raft.has_ready())
        };
        for tick in 0..30 {
            assert_eq!(timers(&one_by_one), timers(&at_once), "{moment}: {tick} ticks after the idle ones");
            one_by_one.tick_alone(node);
            at_once.tick_alone(node);
        }
        one_by_one.run_ms(3_000);
        at_once.run_ms(3_000);
        assert_eq!(one_by_one.now_ms(node), at_once.now_ms(node), "{moment}");
        assert_eq!(format!("{:?}", one_by_one.log), format!("{:?}", at_once.log), "{moment}: outputs differ");
        assert_eq!(one_by_one.server(node).raft().soft_state(), at_once.server(node).raft().soft_state(), "{moment}");
    }
}

#[test]
#[should_panic(expected = "idle ticks asked")]
fn making_more_ticks_at_once_than_are_idle_panics() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.settle();
    let idle = cluster.server(leader).idle_ticks(cluster.now_ms(leader) + TICK_MS);
    cluster.tick_idle_alone(leader, idle + 1);
}
