//! Tests of the message bus under madsim, each on a fresh thread with a fixed seed.

use super::*;
use crate::machine::wire::{self, WireError};
use madsim::runtime::{Handle, Runtime};
use std::future::Future;
use std::time::Duration;

fn run<F: Future<Output = ()> + 'static>(seed: u64, f: impl FnOnce() -> F + Send + 'static) {
    std::thread::spawn(move || Runtime::with_seed_and_config(seed, madsim::Config::default()).block_on(f()))
        .join()
        .expect("simulation thread");
}

fn n(i: u8) -> Addr {
    Addr::Server(NodeId(i))
}

fn c(i: u32) -> Addr {
    Addr::Client(ClientId(i))
}

fn net(config: NetConfig, seed: u64) -> Net {
    let net = Net::new(config, <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed));
    net.spawn_router();
    net
}

async fn sleep_ms(ms: u64) {
    madsim::time::sleep(Duration::from_millis(ms)).await;
}

/// Every packet waiting in `mailbox`, as (from, payload) pairs.
fn drain(mailbox: &mut Mailbox) -> Vec<(Addr, u64)> {
    let mut got = Vec::new();
    while let Some(delivery) = mailbox.try_recv() {
        match delivery {
            Delivery::Packet { from, bytes } => got.push((from, wire::decode::<u64>(&bytes).expect("clean packet"))),
            Delivery::Bounced { .. } => panic!("unexpected bounce"),
        }
    }
    got
}

#[test]
fn delivery_respects_latency_bounds() {
    run(11, || async {
        let net = net(NetConfig { latency_min_us: 2_000, latency_max_us: 7_000, ..NetConfig::default() }, 11);
        let mut inbox = net.bind(n(1));
        let count = 300;
        let mut latencies = Vec::new();
        for i in 0..count {
            net.send(n(0), n(1), wire::encode(&now_us()));
            if i % 3 == 0 {
                sleep_ms(1).await;
            }
            while let Some(Delivery::Packet { bytes, .. }) = inbox.try_recv() {
                latencies.push(now_us() - wire::decode::<u64>(&bytes).unwrap());
            }
        }
        while latencies.len() < count {
            let Delivery::Packet { bytes, .. } = inbox.recv().await else { panic!("bounce") };
            latencies.push(now_us() - wire::decode::<u64>(&bytes).unwrap());
        }
        // The receiver looks at most 1 ms late (it sleeps madsim's minimum sleep between looks).
        let (low, high) = (latencies.iter().min().unwrap(), latencies.iter().max().unwrap());
        assert!(*low >= 2_000, "a packet arrived after {low} us");
        assert!(*high <= 7_000 + 1_000, "a packet arrived after {high} us");
        // The spread is real, not a constant latency.
        assert!(high - low >= 3_000, "latencies {low}..{high}");
        assert_eq!(net.stats().delivered, count as u64);
    });
}

#[test]
fn fifo_links_without_reorder() {
    run(12, || async {
        let net = net(NetConfig { reorder: false, ..NetConfig::default() }, 12);
        let mut inbox = net.bind(n(1));
        for i in 0..500u64 {
            net.send(n(0), n(1), wire::encode(&i));
        }
        sleep_ms(10).await;
        let got: Vec<u64> = drain(&mut inbox).into_iter().map(|(_, i)| i).collect();
        assert_eq!(got, (0..500).collect::<Vec<_>>());
    });
}

#[test]
fn partition_blocks_both_ways_and_heal_restores() {
    run(13, || async {
        let net = net(NetConfig::default(), 13);
        let mut boxes: Vec<Mailbox> = (0..5).map(|i| net.bind(n(i))).collect();
        let mut client = net.bind(c(0));
        net.partition(&[vec![n(0), n(1)], vec![n(2), n(3), n(4)]]);
        net.send(n(0), n(2), wire::encode(&1u64));
        net.send(n(2), n(0), wire::encode(&2u64));
        net.send(n(0), n(1), wire::encode(&3u64));
        net.send(n(3), n(4), wire::encode(&4u64));
        // An address on no side keeps its links.
        net.send(c(0), n(0), wire::encode(&5u64));
        net.send(n(3), c(0), wire::encode(&6u64));
        sleep_ms(10).await;
        assert_eq!(drain(&mut boxes[0]), vec![(c(0), 5)]);
        assert_eq!(drain(&mut boxes[1]), vec![(n(0), 3)]);
        assert_eq!(drain(&mut boxes[2]), vec![]);
        assert_eq!(drain(&mut boxes[4]), vec![(n(3), 4)]);
        assert_eq!(drain(&mut client), vec![(n(3), 6)]);
        assert_eq!(net.stats().cut, 2);

        net.heal();
        net.send(n(0), n(2), wire::encode(&7u64));
        net.send(n(2), n(0), wire::encode(&8u64));
        sleep_ms(10).await;
        assert_eq!(drain(&mut boxes[2]), vec![(n(0), 7)]);
        assert_eq!(drain(&mut boxes[0]), vec![(n(2), 8)]);
    });
}

#[test]
fn one_way_cut_and_isolation() {
    run(14, || async {
        let net = net(NetConfig::default(), 14);
        let mut boxes: Vec<Mailbox> = (0..3).map(|i| net.bind(n(i))).collect();
        net.cut(n(0), n(1));
        net.send(n(0), n(1), wire::encode(&1u64));
        net.send(n(1), n(0), wire::encode(&2u64));
        sleep_ms(10).await;
        assert_eq!(drain(&mut boxes[1]), vec![]);
        assert_eq!(drain(&mut boxes[0]), vec![(n(1), 2)]);
        net.uncut(n(0), n(1));
        net.send(n(0), n(1), wire::encode(&3u64));
        sleep_ms(10).await;
        assert_eq!(drain(&mut boxes[1]), vec![(n(0), 3)]);

        net.isolate(n(2));
        for i in 0..2 {
            net.send(n(i), n(2), wire::encode(&10u64));
            net.send(n(2), n(i), wire::encode(&11u64));
        }
        net.send(n(0), n(1), wire::encode(&12u64));
        sleep_ms(10).await;
        assert_eq!(drain(&mut boxes[2]), vec![]);
        assert_eq!(drain(&mut boxes[0]), vec![]);
        assert_eq!(drain(&mut boxes[1]), vec![(n(0), 12)]);
        assert!(net.is_cut(c(5), n(2)), "isolation covers addresses bound later too");
        net.heal();
        assert!(!net.is_cut(n(0), n(2)));
    });
}

#[test]
fn a_pulled_cable_loses_the_packets_on_the_wire_too() {
    run(15, || async {
        let net = net(NetConfig::default(), 15);
        let mut boxes: Vec<Mailbox> = (0..3).map(|i| net.bind(n(i))).collect();
        // On the wire (latency at least 1 ms) when the cable is pulled.
        net.send(n(0), n(1), wire::encode(&1u64));
        net.send(n(2), n(0), wire::encode(&2u64));
        net.send(n(1), n(2), wire::encode(&3u64));
        net.unplug(n(0));
        net.send(n(1), n(0), wire::encode(&4u64));
        sleep_ms(10).await;
        assert_eq!(drain(&mut boxes[0]), vec![]);
        assert_eq!(drain(&mut boxes[1]), vec![]);
        assert_eq!(drain(&mut boxes[2]), vec![(n(1), 3)], "other links keep their packets");
        assert_eq!(net.stats().cut, 3);
        net.plug(n(0));
        net.send(n(1), n(0), wire::encode(&5u64));
        sleep_ms(10).await;
        assert_eq!(drain(&mut boxes[0]), vec![(n(1), 5)]);
    });
}

#[test]
fn a_held_link_delivers_nothing_before_its_instant_and_keeps_its_order() {
    run(16, || async {
        let net = net(NetConfig::default(), 16);
        let mut boxes: Vec<Mailbox> = (0..2).map(|i| net.bind(n(i))).collect();
        let mut client = net.bind(c(0));
        // On the wire when the link is held, and sent on it after.
        net.send(c(0), n(0), wire::encode(&1u64));
        let until_us = crate::machine::clock::now_us() + 50_000;
        net.hold_link(c(0), n(0), until_us);
        net.send(c(0), n(0), wire::encode(&2u64));
        net.send(c(0), n(1), wire::encode(&3u64));
        net.send(n(0), c(0), wire::encode(&4u64));
        sleep_ms(10).await;
        assert_eq!(drain(&mut boxes[0]), vec![], "held until its instant");
        assert_eq!(drain(&mut boxes[1]), vec![(c(0), 3)], "other links are not held");
        assert_eq!(drain(&mut client), vec![(n(0), 4)], "nor is the way back");
        sleep_ms(35).await;
        assert_eq!(drain(&mut boxes[0]), vec![], "still before the instant");
        sleep_ms(10).await;
        assert_eq!(drain(&mut boxes[0]), vec![(c(0), 1), (c(0), 2)], "in the order sent");
        // Past the instant the link is an ordinary one; a heal forgets holds.
        net.send(c(0), n(0), wire::encode(&5u64));
        sleep_ms(6).await;
        assert_eq!(drain(&mut boxes[0]), vec![(c(0), 5)]);
        net.hold_link(c(0), n(0), crate::machine::clock::now_us() + 1_000_000);
        net.heal();
        net.send(c(0), n(0), wire::encode(&6u64));
        sleep_ms(6).await;
        assert_eq!(drain(&mut boxes[0]), vec![(c(0), 6)]);
    });
}

#[test]
fn loss_and_duplication_match_their_rates() {
    run(15, || async {
        let net = net(NetConfig { loss_rate: 0.2, dup_rate: 0.1, ..NetConfig::default() }, 15);
        let mut inbox = net.bind(n(1));
        let count = 10_000u64;
        for i in 0..count {
            net.send(n(0), n(1), wire::encode(&i));
        }
        sleep_ms(10).await;
        let got = drain(&mut inbox);
        let stats = net.stats();
        assert_eq!(stats.sent, count);
        assert!((1_800..=2_200).contains(&stats.lost), "lost {}", stats.lost);
        let kept = count - stats.lost;
        assert!((kept / 10 - 100..=kept / 10 + 100).contains(&stats.duplicated), "duplicated {}", stats.duplicated);
        assert_eq!(stats.delivered, kept + stats.duplicated);
        assert_eq!(got.len() as u64, stats.delivered);
        // Each duplicate is a second copy of a packet that was also delivered.
        let distinct: BTreeSet<u64> = got.iter().map(|&(_, i)| i).collect();
        assert_eq!(distinct.len() as u64, kept);
    });
}

#[test]
fn corrupted_packets_are_detected_never_decoded() {
    run(16, || async {
        let net = net(NetConfig { corrupt_rate: 0.3, dup_rate: 0.05, ..NetConfig::default() }, 16);
        let mut inbox = net.bind(n(1));
        let message = (n(0), String::from("grant invoice/B-1042"), 41u64);
        for _ in 0..2_000 {
            net.send(n(0), n(1), wire::encode(&message));
        }
        sleep_ms(10).await;
        let (mut clean, mut refused) = (0u64, 0u64);
        while let Some(Delivery::Packet { bytes, .. }) = inbox.try_recv() {
            match wire::decode::<(Addr, String, u64)>(&bytes) {
                Ok(decoded) => {
                    assert_eq!(decoded, message, "a damaged frame decoded as valid");
                    clean += 1;
                }
                Err(WireError::Checksum) => {
                    net.note_corrupt_detected();
                    refused += 1;
                }
                Err(WireError::Malformed) => panic!("a damaged frame passed the checksum"),
                Err(WireError::Length { .. }) => panic!("a datagram has no length prefix to judge"),
            }
        }
        let stats = net.stats();
        assert_eq!(refused, stats.corrupted);
        assert_eq!(stats.corrupt_detected, stats.corrupted);
        assert_eq!(clean + refused, stats.delivered);
        assert!((500..=700).contains(&stats.corrupted), "corrupted {}", stats.corrupted);
    });
}

#[test]
fn a_killed_node_drops_packets_and_a_restarted_one_rebinds() {
    run(17, || async {
        let net = net(NetConfig::default(), 17);
        let log: Arc<Mutex<Vec<u64>>> = Arc::default();
        let handle = Handle::current();
        let (node_net, node_log) = (net.clone(), log.clone());
        let node = handle
            .create_node()
            .name("n1")
            .init(move || {
                let (net, log) = (node_net.clone(), node_log.clone());
                async move {
                    let mut inbox = net.bind(n(1));
                    for _ in 0..1_000 {
                        if let Delivery::Packet { bytes, .. } = inbox.recv().await {
                            log.lock().unwrap().push(wire::decode(&bytes).unwrap());
                        }
                    }
                    std::future::pending::<()>().await
                }
            })
            .build();
        sleep_ms(1).await;
        net.send(n(0), n(1), wire::encode(&1u64));
        sleep_ms(10).await;
        assert_eq!(*log.lock().unwrap(), vec![1]);

        handle.kill(node.id());
        sleep_ms(1).await;
        net.send(n(0), n(1), wire::encode(&2u64));
        sleep_ms(10).await;
        assert_eq!(*log.lock().unwrap(), vec![1]);
        assert_eq!(net.stats().undeliverable, 1);

        handle.restart(node.id());
        sleep_ms(1).await;
        net.send(n(0), n(1), wire::encode(&3u64));
        sleep_ms(10).await;
        assert_eq!(*log.lock().unwrap(), vec![1, 3]);
    });
}

#[test]
fn a_server_learns_its_reply_bounced_off_a_vanished_client() {
    run(18, || async {
        let net = net(NetConfig::default(), 18);
        let handle = Handle::current();
        let node_net = net.clone();
        let client = handle
            .create_node()
            .name("c0")
            .init(move || {
                let net = node_net.clone();
                async move {
                    let _inbox = net.bind(c(0));
                    std::future::pending::<()>().await
                }
            })
            .build();
        let mut server = net.bind(n(0));
        let mut resource = net.bind(Addr::Resource);
        sleep_ms(1).await;
        handle.kill(client.id());
        sleep_ms(1).await;
        let reply = wire::encode(&42u64);
        net.send(n(0), c(0), reply.clone());
        // Only a server gets a reset; the resource's packet just vanishes.
        net.send(Addr::Resource, c(0), wire::encode(&43u64));
        // Nobody ever bound n7: dropped, no bounce.
        net.send(n(0), n(7), wire::encode(&44u64));
        sleep_ms(20).await;
        assert_eq!(server.try_recv(), Some(Delivery::Bounced { to: c(0), bytes: reply }));
        assert_eq!(server.try_recv(), None);
        assert_eq!(resource.try_recv(), None);
        let stats = net.stats();
        assert_eq!((stats.bounced, stats.undeliverable, stats.delivered), (1, 3, 0));
    });
}

/// A busy three-node run with every packet fault on; returns the delivery log.
type DeliveryLog = Vec<(u64, Addr, Addr, Vec<u8>)>;

fn busy_run(seed: u64) -> DeliveryLog {
    let log: Arc<Mutex<DeliveryLog>> = Arc::default();
    let out = log.clone();
    run(seed, move || async move {
        let config = NetConfig { loss_rate: 0.1, dup_rate: 0.1, corrupt_rate: 0.1, ..NetConfig::default() };
        let net = net(config, seed);
        let handle = Handle::current();
        for i in 0..3u8 {
            let (net, log) = (net.clone(), log.clone());
            handle
                .create_node()
                .name(format!("n{i}"))
                .init(move || {
                    let (net, log) = (net.clone(), log.clone());
                    async move {
                        let mut inbox = net.bind(n(i));
                        let sender = net.clone();
                        madsim::task::spawn(async move {
                            for k in 0..200u64 {
                                sender.send(n(i), n(((u64::from(i) + k) % 3) as u8), wire::encode(&k));
                                sleep_ms(1 + k % 4).await;
                            }
                        });
                        loop {
                            if let Delivery::Packet { from, bytes } = inbox.recv().await {
                                log.lock().unwrap().push((now_us(), from, n(i), bytes));
                            }
                        }
                    }
                })
                .build();
        }
        sleep_ms(1_000).await;
    });
    let log = out.lock().unwrap().clone();
    log
}

#[test]
fn same_seed_same_delivery_order() {
    let first = busy_run(19);
    assert!(first.len() > 400, "only {} deliveries", first.len());
    assert_eq!(first, busy_run(19));
    assert_ne!(first, busy_run(20));
}

#[test]
fn the_router_ends_with_the_net() {
    run(21, || async {
        // The router runs on a node of its own here, so madsim's task count sees it.
        let handle = Handle::current();
        let bus = handle.create_node().name("bus").init(std::future::pending::<()>).build();
        let net = Net::new(NetConfig::default(), <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(21));
        let router_net = net.clone();
        bus.spawn(async move { router_net.spawn_router() }).await.unwrap();
        sleep_ms(1).await;
        assert_eq!(handle.metrics().num_tasks(), 2, "the init task and the router");
        let weak = Arc::downgrade(&net.inner);
        drop(net);
        sleep_ms(2).await;
        assert!(weak.upgrade().is_none());
        assert_eq!(handle.metrics().num_tasks(), 1, "the router is still running");
    });
}

#[test]
fn a_receiver_wakes_once_per_delivery_instant_and_never_between() {
    run(22, || async {
        let net = net(NetConfig { latency_min_us: 1_000, latency_max_us: 40_000, ..NetConfig::default() }, 22);
        let polls = Arc::new(Mutex::new(Vec::new()));
        let (receiver_net, receiver_polls) = (net.clone(), polls.clone());
        madsim::task::spawn(async move {
            let mut inbox = receiver_net.bind(n(1));
            std::future::poll_fn(|cx| {
                let mut received = 0;
                while inbox.poll_recv(cx).is_ready() {
                    received += 1;
                }
                receiver_polls.lock().unwrap().push((now_us(), received));
                Poll::<()>::Pending
            })
            .await;
        });
        sleep_ms(1).await;
        // Twenty packets, some sent while others are on their way.
        for k in 0..20u64 {
            net.send(n(0), n(1), wire::encode(&k));
            if k % 4 == 3 {
                sleep_ms(3).await;
            }
        }
        sleep_ms(100).await;
        assert_eq!(net.stats().delivered, 20);
        let polls = polls.lock().unwrap().clone();
        // The first poll binds; every later one is at an instant a packet was
        // due, and receives it: no wake-up between deliveries, none twice.
        assert!(polls[1..].iter().all(|&(_, received)| received > 0), "woken for nothing: {polls:?}");
        let instants: BTreeSet<u64> = polls[1..].iter().map(|&(at_us, _)| at_us).collect();
        assert_eq!(instants.len(), polls.len() - 1, "woken twice at one instant: {polls:?}");
    });
}

#[test]
fn packets_on_their_way_follow_the_binding_at_their_delivery_time() {
    run(23, || async {
        let net = net(NetConfig { latency_min_us: 5_000, latency_max_us: 5_000, ..NetConfig::default() }, 23);
        let mut server = net.bind(n(0));
        // A client's connection drops with a reply on its way: the reply bounces.
        let client = net.bind(c(0));
        net.send(n(0), c(0), wire::encode(&1u64));
        sleep_ms(1).await;
        net.unbind(c(0));
        sleep_ms(10).await;
        assert!(matches!(server.try_recv(), Some(Delivery::Bounced { to, .. }) if to == c(0)));
        drop(client);
        // A node restarted (a new binding) while a packet is on its way gets it.
        let first = net.bind(n(1));
        net.send(n(0), n(1), wire::encode(&2u64));
        sleep_ms(1).await;
        drop(first);
        let mut second = net.bind(n(1));
        sleep_ms(10).await;
        assert_eq!(drain(&mut second), vec![(n(0), 2)]);
        // A replaced mailbox receives nothing more.
        let mut replaced = net.bind(n(2));
        let mut current = net.bind(n(2));
        net.send(n(0), n(2), wire::encode(&3u64));
        sleep_ms(10).await;
        assert_eq!(replaced.try_recv(), None);
        assert_eq!(drain(&mut current), vec![(n(0), 3)]);
        let stats = net.stats();
        assert_eq!((stats.bounced, stats.undeliverable, stats.delivered), (1, 1, 2));
    });
}

#[test]
fn a_packet_with_no_latency_arrives_in_the_instant_it_was_sent() {
    run(24, || async {
        let net = net(NetConfig { latency_min_us: 0, latency_max_us: 0, ..NetConfig::default() }, 24);
        let got = Arc::new(Mutex::new(None));
        let (receiver_net, receiver_got) = (net.clone(), got.clone());
        madsim::task::spawn(async move {
            let mut inbox = receiver_net.bind(n(1));
            inbox.recv().await;
            *receiver_got.lock().unwrap() = Some(now_us());
        });
        // The receiver waits on its inbox, with nothing armed.
        sleep_ms(1).await;
        let sent_us = now_us();
        net.send(n(0), n(1), wire::encode(&1u64));
        sleep_ms(2).await;
        let got_us = got.lock().unwrap().expect("delivered");
        // Not a madsim timer's shortest sleep (1 ms) later.
        assert!(got_us - sent_us < 100, "sent at {sent_us} us, received at {got_us} us");
    });
}

#[test]
fn what_reached_a_binding_stays_with_it_when_the_address_is_bound_again() {
    run(25, || async {
        let net = net(NetConfig { latency_min_us: 2_000, latency_max_us: 2_000, ..NetConfig::default() }, 25);
        // A node killed and restarted in one step: its old mailbox is still
        // there (madsim drops a killed task later) when the new one binds.
        let old = net.bind(n(1));
        net.send(n(0), n(1), wire::encode(&1u64));
        sleep_ms(3).await;
        net.send(n(0), n(1), wire::encode(&2u64));
        let mut new = net.bind(n(1));
        drop(old);
        sleep_ms(3).await;
        // The first had reached the old binding, unread: lost with it. The second was on its way.
        assert_eq!(drain(&mut new), vec![(n(0), 2)]);
        assert_eq!(net.stats().delivered, 2);
    });
}
