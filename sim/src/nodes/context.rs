//! What every simulated process shares: the model, the wire, the clocks, the
//! disks and the history. One `Ctx` per run, held in an `Arc` by every node's
//! init closure, so it outlives kills and restarts.

use crate::faults::{StallPoint, UntilOvertaken};
use crate::history::{Actor, Event, EventKind, History, Reader};
use crate::machine::clock::{now_us, LocalClock, SharedClock};
use crate::machine::disk::{Disk, NodeImage, ResourceImage, SharedDisk};
use crate::machine::net::{Addr, Net};
use crate::machine::wire;
use crate::model::Model;
use crate::nodes::commands::CommandQueue;
use fencelock::raft::{Role, SoftState};
use fencelock::resource::ResourceState;
use fencelock::wire::Envelope;
use fencelock::{NodeId, Probe, ProbeSet};
use futures::task::AtomicWaker;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Waker};

/// Mutable world state behind one lock; the simulation is single-threaded so
/// the lock is never contended.
pub struct Shared {
    pub history: History,
    /// Last role each server reported, to find the leader for `IsolateLeader`.
    pub roles: BTreeMap<NodeId, SoftState>,
    /// Lives of each actor, for per-incarnation random streams.
    pub incarnations: BTreeMap<Actor, u64>,
    /// Entries each server has applied (commands and no-ops), for leader churn.
    pub applies: BTreeMap<NodeId, u64>,
    /// Stalls planned by `StallHolder`, `StallUntilOvertaken` and
    /// `StallOnGrant`, in the order they fired, each taken by the next
    /// worker to reach its point (`ArmedStall::point`).
    pub armed_stalls: VecDeque<ArmedStall>,
    /// Answers to writes `LoseWriteAnswer` left for the resource to lose,
    /// each the answer to the next write it judges.
    pub write_answers_to_lose: u64,
    /// Vote grants and entry acknowledgements sent while the ack-crash
    /// watch is on (`Ctx::watch_acks`), in the order they were sent.
    pub acks: Vec<AckSent>,
    /// Pre-vote and vote grants sent while the vote-strike watch is on
    /// (`Ctx::watch_votes`), in the order they were sent.
    pub votes: Vec<VoteSent>,
    /// Coverage probes reached so far in this run (`fencelock::probe`): the
    /// servers' own, taken after each round, and the simulator's. Read by
    /// nothing in the run, so it moves no schedule.
    pub probes: ProbeSet,
}

/// A stall a planned fault left for the next worker to pass its lease check
/// with a lock held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArmedStall {
    /// `StallHolder`: this many milliseconds.
    For(u64),
    /// `StallUntilOvertaken`: until another worker overtakes it on its key.
    UntilOvertaken(UntilOvertaken),
    /// `StallOnGrant`: this many milliseconds before reading a `Granted` answer.
    OnGrant(u64),
}

impl ArmedStall {
    /// Where the stall comes: before the write or a renewal of a lock
    /// held, or (`None`) before reading a `Granted` answer.
    fn point(&self) -> Option<StallPoint> {
        match self {
            ArmedStall::For(_) => Some(StallPoint::Write),
            ArmedStall::UntilOvertaken(stall) => Some(stall.before),
            ArmedStall::OnGrant(_) => None,
        }
    }
}

/// A vote granted, or appended entries acknowledged, by a server in a round
/// that wrote to its disk: what a crash just after it may make it forget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckSent {
    pub node: NodeId,
    pub to: NodeId,
    pub term: fencelock::Term,
    pub acked: crate::faults::Acked,
    pub at_us: u64,
}

/// A pre-vote or vote granted by `voter` to `candidate` for `term`, as it was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoteSent {
    pub voter: NodeId,
    pub candidate: NodeId,
    pub term: fencelock::Term,
    pub pre: bool,
    pub at_us: u64,
}

pub struct Ctx {
    pub seed: u64,
    pub model: Model,
    pub net: Net,
    pub server_clocks: Vec<SharedClock>,
    pub client_clocks: Vec<SharedClock>,
    pub resource_clock: SharedClock,
    pub node_disks: Vec<SharedDisk<NodeImage>>,
    pub resource_disk: SharedDisk<ResourceImage>,
    /// Behind an `Arc` so the run's history outlives a panic (`run::offer_salvage`).
    pub shared: Arc<Mutex<Shared>>,
    /// In a scripted run, each worker's command queue, taken by the worker when it starts.
    pub script_queues: Option<Mutex<BTreeMap<fencelock::ClientId, CommandQueue>>>,
    /// Whether servers report their acknowledgements (`Shared::acks`); off
    /// outside the ack-crash family's episodes, so it costs one load per round.
    acks_watched: AtomicBool,
    /// Whether servers report the (pre-)votes they grant (`Shared::votes`);
    /// off outside the vote-strike family's episodes.
    votes_watched: AtomicBool,
    /// Servers (one bit per id) whose election timers `ElectionStorm` runs
    /// out at their next tick: one load per server round, no lock (a
    /// sleeping server's waker is in `server_wakers`).
    campaigns: AtomicU16,
    /// Servers (one bit per id) whose pause ended since they last looked.
    resumed: AtomicU16,
    /// Servers asleep through idle ticks, woken when a storm arms their
    /// campaign or their pause ends.
    server_wakers: Mutex<Vec<Option<Waker>>>,
    /// For each server, when a pause (or hold) of it began, if one did since
    /// the server last asked (`u64::MAX`: none): ticks due while it was
    /// paused are lost, not made up.
    paused_since_us: Vec<AtomicU64>,
    /// The servers' work so far (`EventKind::Work`, `work-budget`).
    work: Work,
    /// Wakes the supervisor when what a reactive family listens for happens.
    bell: Bell,
}

/// The supervisor's bell: while a reactive family listens (`Ctx::listen`),
/// every event recorded and every acknowledgement or vote reported rings
/// it, and the supervisor steps the families in that instant. Off, a ring
/// is one load.
#[derive(Debug, Default)]
struct Bell {
    listening: AtomicBool,
    rung: AtomicBool,
    waker: AtomicWaker,
}

/// What the servers did, counted from the run's start: one relaxed add per
/// message, round or sync. From the heal on, the first count past each
/// stretch's end keeps the totals as they were (all counted before it), so
/// sampling wakes nobody and moves no schedule.
#[derive(Debug, Default)]
struct Work {
    messages: AtomicU64,
    ready_rounds: AtomicU64,
    syncs: AtomicU64,
    /// The end of the stretch being counted; `u64::MAX` until the heal.
    next_sample_us: AtomicU64,
    every_us: AtomicU64,
    /// Totals at the heal and at the end of each stretch since.
    samples: Mutex<Vec<[u64; 3]>>,
}

impl Work {
    fn totals(&self) -> [u64; 3] {
        [&self.messages, &self.ready_rounds, &self.syncs].map(|counter| counter.load(Ordering::Relaxed))
    }

    /// Keeps the totals for every stretch that ended by `now_us`.
    fn sample_up_to(&self, now_us: u64) {
        let mut next = self.next_sample_us.load(Ordering::Relaxed);
        if now_us < next {
            return;
        }
        let totals = self.totals();
        let every = self.every_us.load(Ordering::Relaxed);
        let mut samples = self.samples.lock().expect("work lock");
        while next <= now_us {
            samples.push(totals);
            next += every;
        }
        self.next_sample_us.store(next, Ordering::Relaxed);
    }

    fn add(&self, counter: &AtomicU64, n: u64, now_us: u64) {
        self.sample_up_to(now_us);
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// What every local clock reads when the run starts (1000 s after its
/// machine booted), so a backward step has room to go back.
pub const LOCAL_START_US: u64 = 1_000_000_000;

/// fsync latency of every simulated disk (the servers' unless the model sets
/// `server_fsync_ms`). madsim's minimum sleep is 1 ms.
pub const FSYNC_US: u64 = 1_000;

impl Ctx {
    /// A run's world recording into `history` (one that keeps every event, or streams them to a judge).
    pub fn new(seed: u64, model: Model, net: Net, clock_rates: &BTreeMap<Actor, i64>, history: History) -> Ctx {
        let clock = |actor: Actor| {
            let rate_ppm = clock_rates.get(&actor).copied().unwrap_or(0);
            Arc::new(Mutex::new(LocalClock::new(0, LOCAL_START_US, rate_ppm)))
        };
        let nodes = model.nodes;
        let server_fsync_us = model.server_fsync_ms.map_or(FSYNC_US, |ms| ms * 1_000);
        let resource_image = ResourceImage { state: ResourceState::default(), variant: model.variant };
        Ctx {
            seed,
            net,
            server_clocks: (0..nodes).map(|n| clock(Actor::Server(NodeId(n)))).collect(),
            client_clocks: (0..model.clients).map(|c| clock(Actor::Client(fencelock::ClientId(c)))).collect(),
            resource_clock: clock(Actor::Resource),
            node_disks: (0..nodes)
                .map(|_| Arc::new(Mutex::new(Disk::new(NodeImage::default(), server_fsync_us))))
                .collect(),
            resource_disk: Arc::new(Mutex::new(Disk::new(resource_image, FSYNC_US))),
            shared: Arc::new(Mutex::new(Shared {
                history,
                roles: BTreeMap::new(),
                incarnations: BTreeMap::new(),
                applies: BTreeMap::new(),
                armed_stalls: VecDeque::new(),
                write_answers_to_lose: 0,
                acks: Vec::new(),
                votes: Vec::new(),
                probes: ProbeSet::default(),
            })),
            model,
            script_queues: None,
            acks_watched: AtomicBool::new(false),
            votes_watched: AtomicBool::new(false),
            campaigns: AtomicU16::new(0),
            resumed: AtomicU16::new(0),
            server_wakers: Mutex::new(vec![None; usize::from(nodes)]),
            paused_since_us: (0..nodes).map(|_| AtomicU64::new(u64::MAX)).collect(),
            work: Work { next_sample_us: AtomicU64::new(u64::MAX), ..Work::default() },
            bell: Bell::default(),
        }
    }

    pub fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().expect("the world lock is never poisoned: a panic ends the run")
    }

    /// Appends an event to the history at the current true time.
    pub fn record(&self, kind: EventKind) {
        let at_us = now_us();
        let mut shared = self.shared();
        if let EventKind::Applied { node, .. } | EventKind::AppliedNoop { node, .. } = &kind {
            *shared.applies.entry(*node).or_insert(0) += 1;
        }
        shared.history.record(at_us, kind);
        drop(shared);
        self.ring();
    }

    /// Whether the supervisor's bell rings from now on; it starts unrung.
    pub fn listen(&self, on: bool) {
        self.bell.listening.store(on, Ordering::Relaxed);
        self.bell.rung.store(false, Ordering::Relaxed);
    }

    /// Rings the supervisor's bell, if it listens.
    fn ring(&self) {
        let bell = &self.bell;
        if bell.listening.load(Ordering::Relaxed) && !bell.rung.swap(true, Ordering::Relaxed) {
            bell.waker.wake();
        }
    }

    /// Whether the bell rang since the supervisor began to listen; if not,
    /// `cx` is woken when it does.
    pub fn poll_rung(&self, cx: &mut Context<'_>) -> bool {
        if self.bell.rung.load(Ordering::Relaxed) {
            return true;
        }
        self.bell.waker.register(cx.waker());
        false
    }

    /// `reader` follows the history from the next event on.
    pub fn follow_history(&self, reader: Reader) {
        self.shared().history.follow(reader);
    }

    /// `reader` stops following the history.
    pub fn unfollow_history(&self, reader: Reader) {
        self.shared().history.unfollow(reader);
    }

    /// What `pick` takes from each event `reader` has not read yet, oldest first.
    pub fn read_history<T>(&self, reader: Reader, pick: impl Fn(&Event) -> Option<T>) -> Vec<T> {
        self.shared().history.read(reader, pick)
    }

    /// Counts a new life of `actor` and returns its number (0 for the first).
    pub fn next_incarnation(&self, actor: Actor) -> u64 {
        let mut shared = self.shared();
        let counter = shared.incarnations.entry(actor).or_insert(0);
        let this = *counter;
        *counter += 1;
        this
    }

    pub fn clock_of(&self, actor: Actor) -> &SharedClock {
        match actor {
            Actor::Server(node) => &self.server_clocks[node.0 as usize],
            Actor::Client(client) => &self.client_clocks[client.0 as usize],
            Actor::Resource => &self.resource_clock,
        }
    }

    /// Encodes and hands one envelope to the simulated network.
    pub fn send(&self, from: Addr, to: Addr, envelope: &Envelope) {
        self.net.send(from, to, wire::encode(envelope));
    }

    /// Sends each `(to, envelope)` in order, as that many [`Ctx::send`]s
    /// would, at true instant `now_us` (now).
    pub fn send_all(&self, now_us: u64, from: Addr, envelopes: impl IntoIterator<Item = (Addr, Envelope)>) {
        self.net.send_all(now_us, from, envelopes.into_iter().map(|(to, envelope)| (to, wire::encode(&envelope))));
    }

    /// Whether the resource is to lose the answer to the write it just
    /// judged (`LoseWriteAnswer`); takes that loss if so.
    pub fn take_write_answer_to_lose(&self) -> bool {
        let mut shared = self.shared();
        let armed = shared.write_answers_to_lose > 0;
        shared.write_answers_to_lose = shared.write_answers_to_lose.saturating_sub(1);
        armed
    }

    /// Runs the election timers of `nodes` out at their next tick (`ElectionStorm`).
    pub fn arm_campaigns(&self, nodes: impl IntoIterator<Item = NodeId>) {
        let nodes: Vec<NodeId> = nodes.into_iter().collect();
        let bits = nodes.iter().fold(0, |bits, node| bits | 1 << node.0);
        self.campaigns.fetch_or(bits, Ordering::Relaxed);
        for node in nodes {
            self.wake_server(node);
        }
    }

    /// Wakes `node`'s server if it sleeps through idle ticks.
    fn wake_server(&self, node: NodeId) {
        let mut wakers = self.server_wakers.lock().expect("server wakers lock");
        if let Some(waker) = wakers.get_mut(usize::from(node.0)).and_then(Option::take) {
            waker.wake();
        }
    }

    /// Whether its pause ended or (with `campaign`) a storm armed `node`'s
    /// campaign; if neither, `cx` is woken when one does.
    pub fn poll_server_woken(&self, node: NodeId, campaign: bool, cx: &mut Context<'_>) -> bool {
        let resumed = self.resumed.load(Ordering::Relaxed) & 1 << node.0 != 0;
        if resumed || (campaign && self.campaign_armed(node)) {
            return true;
        }
        let mut wakers = self.server_wakers.lock().expect("server wakers lock");
        let slot = &mut wakers[usize::from(node.0)];
        if !slot.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
            *slot = Some(cx.waker().clone());
        }
        false
    }

    /// Whether a storm armed `node`'s campaign for its next tick.
    pub fn campaign_armed(&self, node: NodeId) -> bool {
        self.campaigns.load(Ordering::Relaxed) & 1 << node.0 != 0
    }

    /// Records that `actor` was paused (or held); a server learns when.
    pub fn note_paused(&self, actor: Actor) {
        if let Actor::Server(node) = actor {
            self.paused_since_us[usize::from(node.0)].fetch_min(now_us(), Ordering::Relaxed);
        }
        self.record(EventKind::Paused { actor });
    }

    /// Records that `actor`'s pause (or hold) ended; a server asleep through
    /// idle ticks wakes, to tick at once as a ticking one would.
    pub fn note_resumed(&self, actor: Actor) {
        if let Actor::Server(node) = actor {
            self.resumed.fetch_or(1 << node.0, Ordering::Relaxed);
            self.wake_server(node);
        }
        self.record(EventKind::Resumed { actor });
    }

    /// When a pause of `node` began, if one did since the last call (which
    /// also takes the news that it ended).
    pub fn take_paused_since(&self, node: NodeId) -> Option<u64> {
        self.resumed.fetch_and(!(1 << node.0), Ordering::Relaxed);
        let since = self.paused_since_us[usize::from(node.0)].swap(u64::MAX, Ordering::Relaxed);
        (since != u64::MAX).then_some(since)
    }

    /// Whether `ElectionStorm` runs `node`'s election timer out at this
    /// tick; takes that campaign if so.
    pub fn take_campaign(&self, node: NodeId) -> bool {
        // A load on every tick; the write only when a storm armed this server.
        self.campaign_armed(node) && self.campaigns.fetch_and(!(1 << node.0), Ordering::Relaxed) & 1 << node.0 != 0
    }

    /// The first stall a planned fault left for the next worker to reach
    /// `point` (`None`: a `Granted` answer), if any.
    pub fn take_armed_stall(&self, point: Option<StallPoint>) -> Option<ArmedStall> {
        let mut shared = self.shared();
        let at = shared.armed_stalls.iter().position(|stall| stall.point() == point)?;
        shared.armed_stalls.remove(at)
    }

    pub fn note_role(&self, node: NodeId, soft: SoftState) {
        let mut shared = self.shared();
        shared.roles.insert(node, soft);
        let at_us = now_us();
        shared.history.record(at_us, EventKind::Role { node, role: soft.role, term: soft.term, leader: soft.leader });
        drop(shared);
        self.ring();
    }

    /// Turns the servers' reports of their acknowledgements on or off,
    /// dropping the unread ones either way: an episode reads only what was
    /// sent while it watched.
    pub fn watch_acks(&self, on: bool) {
        self.acks_watched.store(on, Ordering::Relaxed);
        self.shared().acks.clear();
    }

    /// Whether servers report their acknowledgements now.
    pub fn acks_watched(&self) -> bool {
        self.acks_watched.load(Ordering::Relaxed)
    }

    /// Reports acknowledgements as they are sent, if the watch is still on
    /// (it may have gone off during the round's fsync); rings the
    /// supervisor's bell if there are any.
    pub fn report_acks(&self, acks: impl IntoIterator<Item = AckSent>) {
        self.report(&self.acks_watched, acks, |shared| &mut shared.acks);
    }

    /// The acknowledgements reported since the last call, oldest first.
    pub fn take_acks(&self) -> Vec<AckSent> {
        std::mem::take(&mut self.shared().acks)
    }

    /// Turns the servers' reports of the (pre-)votes they grant on or off,
    /// dropping the unread ones either way (as `watch_acks`).
    pub fn watch_votes(&self, on: bool) {
        self.votes_watched.store(on, Ordering::Relaxed);
        self.shared().votes.clear();
    }

    /// Whether servers report the (pre-)votes they grant now.
    pub fn votes_watched(&self) -> bool {
        self.votes_watched.load(Ordering::Relaxed)
    }

    /// Reports (pre-)vote grants as they are sent, if the watch is still on;
    /// rings the supervisor's bell if there are any.
    pub fn report_votes(&self, votes: impl IntoIterator<Item = VoteSent>) {
        self.report(&self.votes_watched, votes, |shared| &mut shared.votes);
    }

    /// Adds `reports` to the list `list` picks, if `watched`; rings the
    /// supervisor's bell if there were any.
    fn report<T>(
        &self,
        watched: &AtomicBool,
        reports: impl IntoIterator<Item = T>,
        list: fn(&mut Shared) -> &mut Vec<T>,
    ) {
        if !watched.load(Ordering::Relaxed) {
            return;
        }
        let mut shared = self.shared();
        let list = list(&mut shared);
        let before = list.len();
        list.extend(reports);
        let reported = list.len() > before;
        drop(shared);
        if reported {
            self.ring();
        }
    }

    /// The (pre-)vote grants reported since the last call, oldest first.
    pub fn take_votes(&self) -> Vec<VoteSent> {
        std::mem::take(&mut self.shared().votes)
    }

    /// Notes coverage probes reached (`fencelock::probe`).
    pub fn note_probes(&self, probes: ProbeSet) {
        if !probes.is_empty() {
            let mut shared = self.shared();
            shared.probes = shared.probes.union(probes);
        }
    }

    /// Notes one coverage probe the simulator reached.
    pub fn probe(&self, probe: Probe) {
        self.note_probes([probe].into_iter().collect());
    }

    /// `probe` from a destructor: skipped if the world lock is taken or
    /// poisoned (a drop inside a kill, or while a panic unwinds).
    pub fn probe_from_drop(&self, probe: Probe) {
        if let Ok(mut shared) = self.shared.try_lock() {
            shared.probes.insert(probe);
        }
    }

    /// Counts Raft messages a server sent at true instant `now_us` (now).
    pub fn count_messages(&self, messages: u64, now_us: u64) {
        self.work.add(&self.work.messages, messages, now_us);
    }

    /// Counts one `Ready` round a server handled at `now_us` (now).
    pub fn count_ready_round(&self, now_us: u64) {
        self.work.add(&self.work.ready_rounds, 1, now_us);
    }

    /// Counts one fsync of a server's disk, begun at `now_us` (now).
    pub fn count_sync(&self, now_us: u64) {
        self.work.add(&self.work.syncs, 1, now_us);
    }

    /// Starts sampling the work in stretches of `every_us` from now (the heal).
    pub fn start_work_samples(&self, every_us: u64) {
        self.work.samples.lock().expect("work lock").push(self.work.totals());
        self.work.every_us.store(every_us, Ordering::Relaxed);
        self.work.next_sample_us.store(now_us() + every_us, Ordering::Relaxed);
    }

    /// The work of each stretch since the heal, the last one ending now.
    pub fn work_per_sample(&self) -> EventKind {
        let now = now_us();
        self.work.sample_up_to(now);
        let mut samples = self.work.samples.lock().expect("work lock").clone();
        let every = self.work.every_us.load(Ordering::Relaxed);
        // A last, shorter stretch unless the run ended on a stretch's end.
        if now > self.work.next_sample_us.load(Ordering::Relaxed) - every {
            samples.push(self.work.totals());
        }
        let per = |i: usize| samples.windows(2).map(|w| w[1][i] - w[0][i]).collect();
        EventKind::Work { every_us: every, messages: per(0), ready_rounds: per(1), syncs: per(2) }
    }

    /// The server that most recently reported itself leader in the highest term.
    pub fn known_leader(&self) -> Option<NodeId> {
        let shared = self.shared();
        shared.roles.iter().filter(|(_, s)| s.role == Role::Leader).max_by_key(|(_, s)| s.term).map(|(n, _)| *n)
    }
}
