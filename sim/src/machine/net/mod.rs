//! The simulated network: a message bus of our own on madsim tasks.
//!
//! A packet goes straight into its receiver's inbox, a queue keyed by
//! delivery time, and the receiver's task is woken at that time (madsim's
//! timers ring 1 ms after they are set at the soonest) by a madsim timer
//! armed for the earliest packet it waits for: one wake-up per delivery
//! instant, and no task between sender and receiver. MADSIM.md measured even
//! a bus with a router task between them about 3x faster than madsim's
//! `Endpoint`, and madsim's network has no partitions, duplication or
//! corruption anyway. Every fault
//! that touches a packet (cut link, loss, duplication, corruption, latency) is
//! decided when it is sent, from the net's own ChaCha stream, so the network
//! draws nothing from madsim's global generator. Packets are bytes (see
//! `wire`); the receiver decodes them and reports checksum failures back
//! through [`Net::note_corrupt_detected`].
//!
//! A packet for an address nobody listens on (a killed node, a client whose
//! connection dropped) waits instead with the router, a task that wakes only
//! for such packets: at their delivery time one is handed over if somebody
//! bound the address since, else dropped, except that a server's packet to a
//! vanished client comes back to the server as [`Delivery::Bounced`], like a
//! TCP reset: that is how a server learns a reply never reached a client
//! (ghost locks). Packets move between an inbox and the router as the
//! address's binding comes and goes, so each is judged against the binding
//! at its delivery time.

use crate::machine::clock::now_us;
use fencelock::{ClientId, NodeId};
use rand::distributions::Bernoulli;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Poll, Waker};

mod queue;
mod table;
#[cfg(test)]
mod tests;

use queue::SortedQueue;
use table::AddrTable;

/// Packets on their way to addresses nobody is bound to, at once; beyond
/// this a send is dropped (counted as `overflow`).
pub const INFLIGHT_MAX: usize = 1_000_000;

/// Packets an inbox holds, on their way or due and not yet received, before
/// the net drops more (counted as `overflow`). A paused node's inbox fills
/// while it sleeps; this bounds that queue.
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

    /// Checks the rates and makes their rolls.
    fn rolls(&self) -> Rolls {
        self.validate();
        let roll = |rate| Bernoulli::new(rate).expect("validate keeps a rate in 0.0..=1.0");
        Rolls { loss: roll(self.loss_rate), dup: roll(self.dup_rate), corrupt: roll(self.corrupt_rate) }
    }
}

/// The config's rates as the distributions every send draws from, made
/// when a rate is set: what `gen_bool` would build for each roll of each
/// packet, with the same draws.
struct Rolls {
    loss: Bernoulli,
    dup: Bernoulli,
    corrupt: Bernoulli,
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
    /// Packets that reached a mailbox (bounces not included): received, or
    /// due and lost with their receiver.
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
    /// Dropped because the unbound queue or an inbox was full.
    pub overflow: u64,
    /// Frames receivers refused on their checksum.
    pub corrupt_detected: u64,
}

/// A bound address's packets not yet received, by (delivery time, send
/// order), with what it takes to wake its receiver.
struct Inbox {
    /// Which binding of the address this is: a replaced mailbox reads nothing.
    binding: u64,
    timed: Packets,
    /// The receiver's task, as its last look at an empty inbox left it.
    waker: Option<Waker>,
    /// Instants a madsim timer was set for to wake `waker`. The earliest
    /// packet waited for always has one at or before its time; the timer
    /// itself rings no sooner than madsim's shortest sleep (1 ms) after it
    /// was set, so a packet due less than 1 ms after the receiver last
    /// looked is received up to that late, as with any madsim sleep.
    armed: SortedQueue<u64, ()>,
}

/// Packets by (delivery instant, send order).
type Packets = SortedQueue<(u64, u64), Packet>;

impl Inbox {
    /// Makes sure the receiver is woken by `at_us` (it waits for a packet due then).
    fn arm(&mut self, now: u64, at_us: u64) {
        let Some(waker) = &self.waker else { return };
        if at_us <= now {
            // Due already (no latency): the receiver looks in this instant.
            waker.wake_by_ref();
            return;
        }
        // Timers at instants passed have rung.
        while self.armed.pop_first_if(|first| first <= now).is_some() {}
        if self.armed.first_key().is_some_and(|first| first <= at_us) {
            return;
        }
        crate::machine::timer::wake_after(waker, at_us - now);
        self.armed.insert(at_us, ());
    }

    /// The receiver, polled with `waker`, found nothing due: it is woken when
    /// its earliest packet is.
    fn watch(&mut self, waker: &Waker, now: u64) {
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            self.waker = Some(waker.clone());
            self.armed.clear();
        }
        if let Some((head_us, _)) = self.timed.first_key() {
            self.arm(now, head_us);
        }
    }
}

/// Where a bound address receives its packets. It holds the net itself
/// (every look at it is one lock, nothing more); the net lets go of its
/// receiver's waker when the binding ends or the net closes, so neither
/// keeps the other alive past the run.
pub struct Mailbox {
    net: Arc<Mutex<Inner>>,
    addr: Addr,
    binding: u64,
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        // The receiver is gone (its node was killed, or it bound again). A
        // net closed at the run's end holds no binding, and needs no clock.
        let mut inner = self.net.lock().expect("net lock");
        if inner.bound_as(self.addr, self.binding) {
            inner.release(self.addr, self.binding, now_us());
        }
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
        match self.receive(Some(cx.waker())) {
            Some(delivery) => Poll::Ready(delivery),
            None => Poll::Pending,
        }
    }

    /// A delivery already due, if any.
    pub fn try_recv(&mut self) -> Option<Delivery> {
        self.receive(None)
    }

    /// The earliest packet due now, handed over; if none, and with `waker`,
    /// the receiver is woken when its earliest packet is due.
    fn receive(&mut self, waker: Option<&Waker>) -> Option<Delivery> {
        let mut inner = self.net.lock().expect("net lock");
        let now = now_us();
        let Inner { bindings, stats, .. } = &mut *inner;
        let inbox = bindings.get_mut(self.addr).filter(|inbox| inbox.binding == self.binding)?;
        if let Some((_, packet)) = inbox.timed.pop_first_if(|(at_us, _)| at_us <= now) {
            stats.count_delivered(&packet);
            return Some(packet.into_delivery());
        }
        if let Some(waker) = waker {
            inbox.watch(waker, now);
        }
        None
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

impl NetStats {
    fn count_delivered(&mut self, packet: &Packet) {
        if packet.bounce {
            self.bounced += 1;
        } else {
            self.delivered += 1;
        }
    }
}

impl Packet {
    fn into_delivery(self) -> Delivery {
        let Packet { from, bytes, bounce, .. } = self;
        if bounce {
            Delivery::Bounced { to: from, bytes }
        } else {
            Delivery::Packet { from, bytes }
        }
    }
}

struct Inner {
    config: NetConfig,
    rolls: Rolls,
    rng: ChaCha8Rng,
    bindings: AddrTable<Inbox>,
    binding_next: u64,
    cuts: BTreeSet<(Addr, Addr)>,
    isolated: BTreeSet<Addr>,
    /// Cable pulled: cut off like `isolated`, and its packets on the wire were lost.
    unplugged: BTreeSet<Addr>,
    /// Packets for addresses nobody is bound to: the router's.
    unbound: Packets,
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
        let inner = Inner {
            rolls: config.rolls(),
            config,
            rng,
            bindings: AddrTable::default(),
            binding_next: 0,
            cuts: BTreeSet::new(),
            isolated: BTreeSet::new(),
            unplugged: BTreeSet::new(),
            unbound: Packets::default(),
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

    /// Ends the router when the run is over, and lets go of every receiver's
    /// waker. A router left asleep would keep madsim's timer alive through
    /// its own waker, and the whole runtime with it (`Supervisor::tear_down`).
    /// Packets still in flight are dropped.
    pub fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        inner.bindings.clear();
        inner.unbound.clear();
        inner.router_woken = true;
        if let Some(waker) = inner.router_waker.take() {
            waker.wake();
        }
    }

    /// Binds `addr`, replacing an earlier binding (a restarted node binds
    /// again): what is on its way to `addr` arrives here; what had reached
    /// the earlier binding stays with it.
    pub fn bind(&self, addr: Addr) -> Mailbox {
        let now = now_us();
        let mut inner = self.lock();
        let inner = &mut *inner;
        // What had reached an earlier binding stays with it.
        let mut timed = match inner.bindings.remove(addr) {
            Some(old) => inner.retire(old, now),
            None => Packets::default(),
        };
        timed.extend(inner.unbound.take_where(|_, packet| packet.to == addr));
        let binding = inner.binding_next;
        inner.binding_next += 1;
        inner.bindings.insert(addr, Inbox { binding, timed, waker: None, armed: SortedQueue::default() });
        Mailbox { net: Arc::clone(&self.inner), addr, binding }
    }

    /// Removes `addr`'s binding: packets for it are dropped (or bounced) from now on.
    pub fn unbind(&self, addr: Addr) {
        let mut inner = self.lock();
        if let Some(binding) = inner.bindings.get(addr).map(|inbox| inbox.binding) {
            inner.release(addr, binding, now_us());
        }
    }

    /// Sends `bytes`; loss, duplication, corruption, latency and cuts are decided now.
    pub fn send(&self, from: Addr, to: Addr, bytes: Vec<u8>) {
        self.send_all(now_us(), from, std::iter::once((to, bytes)));
    }

    /// Sends each `(to, bytes)` in order, as that many [`Net::send`]s would
    /// (one lock for them all), at true instant `now`: the caller's reading
    /// of the clock in this instant (a sender that has read it already
    /// need not again).
    pub fn send_all(&self, now: u64, from: Addr, packets: impl IntoIterator<Item = (Addr, Vec<u8>)>) {
        debug_assert_eq!(now, now_us(), "a send is made now");
        let mut inner = self.lock();
        for (to, bytes) in packets {
            inner.send(now, from, to, bytes);
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
        let now = now_us();
        let mut inner = self.lock();
        inner.unplugged.insert(addr);
        let lost = inner.drop_on_wire(now, |packet| packet.from == addr || packet.to == addr);
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
        let now = now_us();
        let mut inner = self.lock();
        let inner = &mut *inner;
        inner.held.insert((from, to), until_us);
        let queue = match inner.bindings.get_mut(to) {
            Some(inbox) => &mut inbox.timed,
            None => &mut inner.unbound,
        };
        let on_link = queue.take_where(|at, p| p.from == from && at.0 > now && at.0 < until_us);
        let held = !on_link.is_empty();
        for ((_, seq), packet) in on_link {
            queue.insert((until_us, seq), packet);
        }
        if held {
            // A FIFO link keeps what follows behind what was held, a heal or not.
            let last = inner.link_last_us.entry((from, to)).or_insert(0);
            *last = (*last).max(until_us);
        }
        // A receiver woken early for a packet held back looks again and waits on.
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
        inner.rolls = inner.config.rolls();
    }

    pub fn set_dup_rate(&self, rate: f64) {
        let mut inner = self.lock();
        inner.config.dup_rate = rate;
        inner.rolls = inner.config.rolls();
    }

    pub fn set_corrupt_rate(&self, rate: f64) {
        let mut inner = self.lock();
        inner.config.corrupt_rate = rate;
        inner.rolls = inner.config.rolls();
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
        let now = now_us();
        let inner = self.lock();
        let on_wire = |queue: &Packets| queue.iter().filter(|(at, _)| at.0 > now).count();
        on_wire(&inner.unbound) + inner.bindings.values().map(|inbox| on_wire(&inbox.timed)).sum::<usize>()
    }
}

impl Inner {
    /// [`Net::send`] at `now`.
    fn send(&mut self, now: u64, from: Addr, to: Addr, bytes: Vec<u8>) {
        if self.closed {
            return;
        }
        self.stats.sent += 1;
        if self.is_cut(from, to) {
            self.stats.cut += 1;
            return;
        }
        // Always draw the same rolls, whatever the rates, so changing one rate
        // does not shift the stream for the decisions that follow (a rate
        // of exactly 1.0 draws nothing: rand's Bernoulli is then sure).
        let lost = self.rng.sample(self.rolls.loss);
        let duplicated = self.rng.sample(self.rolls.dup);
        if lost {
            self.stats.lost += 1;
            return;
        }
        // The duplicate is a copy with its own corruption roll and latency.
        let duplicate = duplicated.then(|| bytes.clone());
        self.stats.duplicated += u64::from(duplicated);
        for mut bytes in std::iter::once(bytes).chain(duplicate) {
            if self.rng.sample(self.rolls.corrupt) {
                crate::machine::wire::corrupt(&mut bytes, &mut self.rng);
                self.stats.corrupted += 1;
            }
            let at_us = self.deliver_at(now, from, to);
            self.enqueue(now, at_us, Packet { from, to, bytes, bounce: false });
        }
    }

    fn is_cut(&self, from: Addr, to: Addr) -> bool {
        // Most sends find no fault on the net: three empty sets, no lookups.
        let whole = self.cuts.is_empty() && self.isolated.is_empty() && self.unplugged.is_empty();
        if from == to || whole {
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

    /// Puts a packet on the wire: into its receiver's inbox, or the router's
    /// queue when nobody is bound to its address.
    fn enqueue(&mut self, now: u64, at_us: u64, packet: Packet) {
        let seq = self.seq_next;
        if let Some(inbox) = self.bindings.get_mut(packet.to) {
            if inbox.timed.len() >= MAILBOX_CAPACITY {
                self.stats.overflow += 1;
                return;
            }
            self.seq_next += 1;
            inbox.timed.insert((at_us, seq), packet);
            inbox.arm(now, at_us);
            return;
        }
        if self.unbound.len() >= INFLIGHT_MAX {
            self.stats.overflow += 1;
            return;
        }
        self.seq_next += 1;
        self.unbound.insert((at_us, seq), packet);
        self.wake_router(at_us);
    }

    /// Wakes the router if `at_us` is before what it sleeps until.
    fn wake_router(&mut self, at_us: u64) {
        if self.router_deadline_us.is_some_and(|deadline| deadline <= at_us) {
            return;
        }
        self.router_deadline_us = Some(at_us);
        self.router_woken = true;
        if let Some(waker) = self.router_waker.take() {
            waker.wake();
        }
    }

    /// Whether `addr` is bound, by its binding `binding`.
    fn bound_as(&self, addr: Addr, binding: u64) -> bool {
        self.bindings.get(addr).is_some_and(|inbox| inbox.binding == binding)
    }

    /// `addr`'s binding `binding` ends (its receiver is gone). What was due
    /// had reached it and is lost with it; what is still on the wire goes to
    /// the router, to be judged at its delivery time.
    fn release(&mut self, addr: Addr, binding: u64, now: u64) {
        if !self.bound_as(addr, binding) {
            return;
        }
        let inbox = self.bindings.remove(addr).expect("just found");
        for (key, packet) in self.retire(inbox, now) {
            self.unbound.insert(key, packet);
            self.wake_router(key.0);
        }
    }

    /// An inbox whose binding ended at `now`: what was due had reached its
    /// receiver and is lost with it; returns what is still on the wire.
    fn retire(&mut self, inbox: Inbox, now: u64) -> Packets {
        let mut due = inbox.timed;
        let on_wire = due.split_off((now + 1, 0));
        for (_, packet) in due.iter() {
            self.stats.count_delivered(packet);
        }
        on_wire
    }

    /// Drops the packets still on the wire that `lost` picks; returns how many.
    fn drop_on_wire(&mut self, now: u64, lost: impl Fn(&Packet) -> bool) -> usize {
        let mut dropped = 0;
        let queues = std::iter::once(&mut self.unbound).chain(self.bindings.values_mut().map(|inbox| &mut inbox.timed));
        for queue in queues {
            let before = queue.len();
            queue.retain(|at, packet| at.0 <= now || !lost(packet));
            dropped += before - queue.len();
        }
        dropped
    }

    /// Hands over or drops every unbound packet due by `now`; returns the next one's time.
    fn route_due(&mut self, now: u64) -> Option<u64> {
        while let Some((_, packet)) = self.unbound.pop_first_if(|(at_us, _)| at_us <= now) {
            // A `bind` takes what is queued for its address: nobody is bound here.
            debug_assert!(!self.bindings.contains(packet.to), "an unbound packet for a bound address");
            self.undeliverable(now, packet);
        }
        self.unbound.first_key().map(|(at_us, _)| at_us)
    }

    /// A packet found nobody at its address: a server's packet to a client comes back as a reset.
    fn undeliverable(&mut self, now: u64, packet: Packet) {
        self.stats.undeliverable += 1;
        let Packet { from, to, bytes, bounce } = packet;
        if bounce || !(matches!(to, Addr::Client(_)) && matches!(from, Addr::Server(_))) || self.is_cut(to, from) {
            return;
        }
        let at_us = self.deliver_at(now, to, from);
        self.enqueue(now, at_us, Packet { from: to, to: from, bytes, bounce: true });
    }
}

/// The router: settles the packets for unbound addresses in (time, send
/// order) and sleeps until the next one.
async fn route(net: Weak<Mutex<Inner>>) {
    loop {
        let now = now_us();
        let next = {
            let Some(inner) = net.upgrade() else { return };
            let mut inner = inner.lock().expect("net lock");
            if inner.closed {
                return;
            }
            let next = inner.route_due(now);
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

/// Resolves when a packet for an unbound address is due earlier than the
/// router's deadline (or when the net is gone).
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
