//! The simulated network: a message bus of our own on madsim tasks.
//!
//! MADSIM.md measured a bus with one router task and a `BTreeMap` of packets
//! keyed by delivery time about 3x faster than madsim's `Endpoint`, and madsim's
//! network has no partitions, duplication or corruption anyway. Every fault
//! that touches a packet (cut link, loss, duplication, corruption, latency) is
//! decided when it is sent, from the net's own ChaCha stream, so the network
//! draws nothing from madsim's global generator. Packets are bytes (see
//! `wire`); the receiver decodes them and reports checksum failures back
//! through [`Net::note_corrupt_detected`].
//!
//! At delivery, a packet for an address nobody listens on (a killed node) is
//! dropped, except that a server's packet to a vanished client comes back to
//! the server as [`Delivery::Bounced`], like a TCP reset: that is how a server
//! learns a reply never reached a client (ghost locks).

use crate::machine::clock::now_us;
use fencelock::{ClientId, NodeId};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Poll, Waker};

#[cfg(test)]
mod tests;

/// Packets in flight at once; beyond this a send is dropped (counted as `overflow`).
pub const INFLIGHT_MAX: usize = 1_000_000;

/// Deliveries a mailbox holds before the net drops more (counted as `overflow`).
/// A paused node's mailbox fills while it sleeps; this bounds that queue.
pub const MAILBOX_CAPACITY: usize = 65_536;

/// An endpoint on the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Addr {
    Server(NodeId),
    Client(ClientId),
    Resource,
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Server(node) => write!(f, "{node}"),
            Addr::Client(client) => write!(f, "{client}"),
            Addr::Resource => f.write_str("resource"),
        }
    }
}

/// The actor at an address, as the history names it.
impl From<Addr> for crate::actor::Actor {
    fn from(addr: Addr) -> crate::actor::Actor {
        use crate::actor::Actor;
        match addr {
            Addr::Server(node) => Actor::Server(node),
            Addr::Client(client) => Actor::Client(client),
            Addr::Resource => Actor::Resource,
        }
    }
}

/// Link behaviour; the rates are per packet, each decided at send time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetConfig {
    pub latency_min_us: u64,
    pub latency_max_us: u64,
    pub loss_rate: f64,
    pub dup_rate: f64,
    pub corrupt_rate: f64,
    /// Whether packets on one link may overtake each other. Without it a link
    /// is FIFO (each packet arrives no earlier than the one sent before it).
    pub reorder: bool,
}

impl Default for NetConfig {
    fn default() -> NetConfig {
        NetConfig {
            latency_min_us: 1_000,
            latency_max_us: 5_000,
            loss_rate: 0.0,
            dup_rate: 0.0,
            corrupt_rate: 0.0,
            reorder: true,
        }
    }
}

impl NetConfig {
    fn validate(&self) {
        assert!(self.latency_min_us <= self.latency_max_us, "net: latency_min_us > latency_max_us");
        for (name, rate) in
            [("loss_rate", self.loss_rate), ("dup_rate", self.dup_rate), ("corrupt_rate", self.corrupt_rate)]
        {
            assert!((0.0..=1.0).contains(&rate), "net: {name} must be in 0.0..=1.0, got {rate}");
        }
    }
}

/// What a mailbox receives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    Packet {
        from: Addr,
        bytes: Vec<u8>,
    },
    /// A packet this address sent to `to` found nobody listening (a client that went away).
    Bounced {
        to: Addr,
        bytes: Vec<u8>,
    },
}

/// Counters over the whole run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetStats {
    /// Calls to `send`.
    pub sent: u64,
    /// Packets handed to a mailbox (bounces not included).
    pub delivered: u64,
    /// Dropped by the loss rate.
    pub lost: u64,
    /// Dropped because the link was cut.
    pub cut: u64,
    /// Extra copies made by the duplication rate.
    pub duplicated: u64,
    /// Copies with a flipped bit.
    pub corrupted: u64,
    /// Bounce notices handed back to a server.
    pub bounced: u64,
    /// Dropped at delivery: nobody bound, or the mailbox closed (the node was killed).
    pub undeliverable: u64,
    /// Dropped because the in-flight queue or a mailbox was full.
    pub overflow: u64,
    /// Frames receivers refused on their checksum.
    pub corrupt_detected: u64,
}

/// One mailbox's queue, shared by the router (which fills it) and the
/// mailbox (which drains it). A plain queue under a lock: the simulation runs
/// on one thread, and a general-purpose channel cost several times more per
/// message.
struct Slot {
    queue: VecDeque<Delivery>,
    waker: Option<Waker>,
    /// False once the mailbox is dropped (its node was killed).
    receiver_alive: bool,
}

/// Where a bound address receives its packets.
pub struct Mailbox {
    slot: Arc<Mutex<Slot>>,
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        let mut slot = self.slot.lock().expect("mailbox lock");
        slot.receiver_alive = false;
        slot.queue.clear();
        slot.waker = None;
    }
}

impl Mailbox {
    /// The next delivery. If this mailbox was replaced by a later `bind` of
    /// the same address, it never receives again and this waits forever.
    pub async fn recv(&mut self) -> Delivery {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next delivery (the poll form of [`Mailbox::recv`], to race it against an alarm).
    pub fn poll_recv(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Delivery> {
        let mut slot = self.slot.lock().expect("mailbox lock");
        if let Some(delivery) = slot.queue.pop_front() {
            return Poll::Ready(delivery);
        }
        if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            slot.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// A delivery already waiting, if any.
    pub fn try_recv(&mut self) -> Option<Delivery> {
        self.slot.lock().expect("mailbox lock").queue.pop_front()
    }
}

#[derive(Debug)]
struct Packet {
    from: Addr,
    to: Addr,
    bytes: Vec<u8>,
    /// A reset travelling back: `from` is the vanished client, `to` the server.
    bounce: bool,
}

struct Inner {
    config: NetConfig,
    rng: ChaCha8Rng,
    bindings: BTreeMap<Addr, Arc<Mutex<Slot>>>,
    cuts: BTreeSet<(Addr, Addr)>,
    isolated: BTreeSet<Addr>,
    /// Cable pulled: cut off like `isolated`, and its packets on the wire were lost.
    unplugged: BTreeSet<Addr>,
    queue: BTreeMap<(u64, u64), Packet>,
    seq_next: u64,
    /// Latest delivery time per link, to keep links FIFO when reordering is off.
    link_last_us: BTreeMap<(Addr, Addr), u64>,
    /// Links held until a true instant: nothing sent on them arrives before it.
    held: BTreeMap<(Addr, Addr), u64>,
    stats: NetStats,
    router_spawned: bool,
    /// The delivery time the router sleeps until (None: idle, waiting for a packet).
    router_deadline_us: Option<u64>,
    router_woken: bool,
    router_waker: Option<Waker>,
    /// The run is over (`Net::close`): the router ends.
    closed: bool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Let an idle router notice that the net is gone and end.
        if let Some(waker) = self.router_waker.take() {
            waker.wake();
        }
    }
}

/// A handle on the network; clones share it.
#[derive(Clone)]
pub struct Net {
    inner: Arc<Mutex<Inner>>,
}

impl Net {
    pub fn new(config: NetConfig, rng: ChaCha8Rng) -> Net {
        config.validate();
        let inner = Inner {
            config,
            rng,
            bindings: BTreeMap::new(),
            cuts: BTreeSet::new(),
            isolated: BTreeSet::new(),
            unplugged: BTreeSet::new(),
            queue: BTreeMap::new(),
            seq_next: 0,
            link_last_us: BTreeMap::new(),
            held: BTreeMap::new(),
            stats: NetStats::default(),
            router_spawned: false,
            router_deadline_us: None,
            router_woken: false,
            router_waker: None,
            closed: false,
        };
        Net { inner: Arc::new(Mutex::new(inner)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("net lock")
    }

    /// Spawns the router on the current madsim node. Call it once, from a
    /// task that is never killed (the supervisor). It ends when every `Net`
    /// handle is dropped.
    pub fn spawn_router(&self) {
        {
            let mut inner = self.lock();
            assert!(!inner.router_spawned, "net: the router was already spawned");
            inner.router_spawned = true;
        }
        madsim::task::spawn(route(Arc::downgrade(&self.inner)));
    }

    /// Ends the router when the run is over. A router left asleep would keep
    /// madsim's timer alive through its own waker, and the whole runtime with
    /// it (`Supervisor::tear_down`). Packets still in flight are dropped.
    pub fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        inner.router_woken = true;
        if let Some(waker) = inner.router_waker.take() {
            waker.wake();
        }
    }

    /// Binds `addr`, replacing an earlier binding (a restarted node binds again).
    pub fn bind(&self, addr: Addr) -> Mailbox {
        let slot = Arc::new(Mutex::new(Slot { queue: VecDeque::new(), waker: None, receiver_alive: true }));
        self.lock().bindings.insert(addr, slot.clone());
        Mailbox { slot }
    }

    /// Removes `addr`'s binding: packets for it are dropped (or bounced) from now on.
    pub fn unbind(&self, addr: Addr) {
        self.lock().bindings.remove(&addr);
    }

    /// Sends `bytes`; loss, duplication, corruption, latency and cuts are decided now.
    pub fn send(&self, from: Addr, to: Addr, bytes: Vec<u8>) {
        let now = now_us();
        let mut inner = self.lock();
        let inner = &mut *inner;
        inner.stats.sent += 1;
        if inner.is_cut(from, to) {
            inner.stats.cut += 1;
            return;
        }
        // Always draw the same rolls, whatever the rates, so changing one rate
        // does not shift the stream for the decisions that follow.
        let lost = inner.rng.gen_bool(inner.config.loss_rate);
        let duplicated = inner.rng.gen_bool(inner.config.dup_rate);
        if lost {
            inner.stats.lost += 1;
            return;
        }
        // The duplicate is a copy with its own corruption roll and latency.
        let duplicate = duplicated.then(|| bytes.clone());
        inner.stats.duplicated += u64::from(duplicated);
        for mut bytes in std::iter::once(bytes).chain(duplicate) {
            if inner.rng.gen_bool(inner.config.corrupt_rate) {
                crate::machine::wire::corrupt(&mut bytes, &mut inner.rng);
                inner.stats.corrupted += 1;
            }
            let at_us = inner.deliver_at(now, from, to);
            inner.enqueue(at_us, Packet { from, to, bytes, bounce: false });
        }
    }

    /// Cuts the link from `from` to `to` (one direction).
    pub fn cut(&self, from: Addr, to: Addr) {
        self.lock().cuts.insert((from, to));
    }

    pub fn uncut(&self, from: Addr, to: Addr) {
        self.lock().cuts.remove(&(from, to));
    }

    /// Cuts every link between addresses on different sides, both ways.
    /// Addresses on no side keep their links.
    pub fn partition(&self, sides: &[Vec<Addr>]) {
        let mut inner = self.lock();
        for (i, side) in sides.iter().enumerate() {
            for (j, other) in sides.iter().enumerate() {
                if i == j {
                    continue;
                }
                for &a in side {
                    for &b in other {
                        if a != b {
                            inner.cuts.insert((a, b));
                        }
                    }
                }
            }
        }
    }

    /// Cuts `addr` off from everyone, both ways, until `heal`.
    pub fn isolate(&self, addr: Addr) {
        self.lock().isolated.insert(addr);
    }

    /// Pulls `addr`'s cable: cut off from everyone like [`Net::isolate`],
    /// and unlike a cut decided at send time, the packets already on the
    /// wire to or from it are lost too (counted as `cut`).
    pub fn unplug(&self, addr: Addr) {
        let mut inner = self.lock();
        inner.unplugged.insert(addr);
        let before = inner.queue.len();
        inner.queue.retain(|_, packet| packet.from != addr && packet.to != addr);
        let lost = before - inner.queue.len();
        inner.stats.cut += lost as u64;
    }

    /// Plugs `addr`'s cable back in.
    pub fn plug(&self, addr: Addr) {
        self.lock().unplugged.remove(&addr);
    }

    /// Whether `addr`'s cable is pulled.
    pub fn is_unplugged(&self, addr: Addr) -> bool {
        self.lock().unplugged.contains(&addr)
    }

    /// Holds the link from `from` to `to` until the true instant `until_us`:
    /// what is on the wire on it and what is sent on it until then arrives
    /// at `until_us` at the earliest (in the order it was sent). A heal ends
    /// the hold for what is sent after it; what is held stays held (and on a
    /// FIFO link, what follows it stays behind it).
    pub fn hold_link(&self, from: Addr, to: Addr, until_us: u64) {
        let mut inner = self.lock();
        inner.held.insert((from, to), until_us);
        let on_link: Vec<(u64, u64)> = inner
            .queue
            .iter()
            .filter(|(at, p)| p.from == from && p.to == to && at.0 < until_us)
            .map(|(k, _)| *k)
            .collect();
        if !on_link.is_empty() {
            // A FIFO link keeps what follows behind what was held, a heal or not.
            let last = inner.link_last_us.entry((from, to)).or_insert(0);
            *last = (*last).max(until_us);
        }
        for (at_us, seq) in on_link {
            let packet = inner.queue.remove(&(at_us, seq)).expect("just listed");
            inner.queue.insert((until_us, seq), packet);
        }
    }

    /// Removes every cut, partition, isolation, pulled cable and held link.
    pub fn heal(&self) {
        let mut inner = self.lock();
        inner.held.clear();
        inner.cuts.clear();
        inner.isolated.clear();
        inner.unplugged.clear();
    }

    pub fn set_loss_rate(&self, rate: f64) {
        let mut inner = self.lock();
        inner.config.loss_rate = rate;
        inner.config.validate();
    }

    pub fn set_dup_rate(&self, rate: f64) {
        let mut inner = self.lock();
        inner.config.dup_rate = rate;
        inner.config.validate();
    }

    pub fn set_corrupt_rate(&self, rate: f64) {
        let mut inner = self.lock();
        inner.config.corrupt_rate = rate;
        inner.config.validate();
    }

    pub fn set_latency(&self, min_us: u64, max_us: u64) {
        let mut inner = self.lock();
        inner.config.latency_min_us = min_us;
        inner.config.latency_max_us = max_us;
        inner.config.validate();
    }

    pub fn config(&self) -> NetConfig {
        self.lock().config.clone()
    }

    /// Whether a packet from `from` to `to` would be dropped by a cut now.
    pub fn is_cut(&self, from: Addr, to: Addr) -> bool {
        self.lock().is_cut(from, to)
    }

    /// A receiver found a frame whose checksum failed.
    pub fn note_corrupt_detected(&self) {
        self.lock().stats.corrupt_detected += 1;
    }

    pub fn stats(&self) -> NetStats {
        self.lock().stats
    }

    /// Packets (and bounces) still on the wire.
    pub fn in_flight(&self) -> usize {
        self.lock().queue.len()
    }
}

impl Inner {
    fn is_cut(&self, from: Addr, to: Addr) -> bool {
        if from == to {
            return false;
        }
        let off = |addr: &Addr| self.isolated.contains(addr) || self.unplugged.contains(addr);
        off(&from) || off(&to) || self.cuts.contains(&(from, to))
    }

    fn deliver_at(&mut self, now: u64, from: Addr, to: Addr) -> u64 {
        let latency = self.rng.gen_range(self.config.latency_min_us..=self.config.latency_max_us);
        let mut at_us = now + latency;
        if let Some(until_us) = self.held.get(&(from, to)) {
            at_us = at_us.max(*until_us);
        }
        if !self.config.reorder {
            let last = self.link_last_us.entry((from, to)).or_insert(0);
            at_us = at_us.max(*last);
            *last = at_us;
        }
        at_us
    }

    fn enqueue(&mut self, at_us: u64, packet: Packet) {
        if self.queue.len() >= INFLIGHT_MAX {
            self.stats.overflow += 1;
            return;
        }
        let seq = self.seq_next;
        self.seq_next += 1;
        self.queue.insert((at_us, seq), packet);
        // Wake the router only if this packet is due before what it sleeps until.
        let earlier = match self.router_deadline_us {
            Some(deadline) => at_us < deadline,
            None => true,
        };
        if earlier {
            self.router_deadline_us = Some(at_us);
            self.router_woken = true;
            if let Some(waker) = self.router_waker.take() {
                waker.wake();
            }
        }
    }

    /// Hands every packet due by `now` to its mailbox; returns the next delivery time.
    fn deliver_due(&mut self, now: u64) -> Option<u64> {
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let packet = entry.remove();
            self.deliver(now, packet);
        }
        self.queue.first_key_value().map(|(&(at_us, _), _)| at_us)
    }

    fn deliver(&mut self, now: u64, packet: Packet) {
        let Packet { from, to, bytes, bounce } = packet;
        let delivery = if bounce { Delivery::Bounced { to: from, bytes } } else { Delivery::Packet { from, bytes } };
        let Some(slot) = self.bindings.get(&to) else {
            self.undeliverable(now, from, to, delivery);
            return;
        };
        let mut slot = slot.lock().expect("mailbox lock");
        if !slot.receiver_alive {
            // The receiver is gone: the node was killed. Forget the binding.
            drop(slot);
            self.bindings.remove(&to);
            self.undeliverable(now, from, to, delivery);
            return;
        }
        if slot.queue.len() >= MAILBOX_CAPACITY {
            self.stats.overflow += 1;
            return;
        }
        slot.queue.push_back(delivery);
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
        drop(slot);
        if bounce {
            self.stats.bounced += 1;
        } else {
            self.stats.delivered += 1;
        }
    }

    /// A packet found nobody at `to`: a server's packet to a client comes back as a reset.
    fn undeliverable(&mut self, now: u64, from: Addr, to: Addr, delivery: Delivery) {
        self.stats.undeliverable += 1;
        let Delivery::Packet { bytes, .. } = delivery else { return };
        if !(matches!(to, Addr::Client(_)) && matches!(from, Addr::Server(_))) || self.is_cut(to, from) {
            return;
        }
        let at_us = self.deliver_at(now, to, from);
        self.enqueue(at_us, Packet { from: to, to: from, bytes, bounce: true });
    }
}

/// The router: delivers packets in (time, send order) and sleeps until the next one.
async fn route(net: Weak<Mutex<Inner>>) {
    loop {
        let now = now_us();
        let next = {
            let Some(inner) = net.upgrade() else { return };
            let mut inner = inner.lock().expect("net lock");
            if inner.closed {
                return;
            }
            let next = inner.deliver_due(now);
            inner.router_deadline_us = next;
            inner.router_woken = false;
            next
        };
        let woken = RouterWake { net: net.clone() };
        match next {
            Some(at_us) => {
                assert!(at_us > now);
                let sleep = madsim::time::sleep(std::time::Duration::from_micros(at_us - now));
                futures::future::select(Box::pin(sleep), woken).await;
            }
            None => woken.await,
        }
    }
}

/// Resolves when a send scheduled a packet earlier than the router's deadline
/// (or when the net is gone).
struct RouterWake {
    net: Weak<Mutex<Inner>>,
}

impl Future for RouterWake {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let Some(inner) = self.net.upgrade() else { return Poll::Ready(()) };
        let mut inner = inner.lock().expect("net lock");
        if inner.router_woken {
            return Poll::Ready(());
        }
        inner.router_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
