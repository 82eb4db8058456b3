//! `lease-exclusion` and lease exposures.
//!
//! A client believes it holds a key from its `BeliefStart` until its own clock
//! reads the lease's end (`until_local_us`), or until it says otherwise
//! (`BeliefEnd`, a crash). Local times become true times through the
//! client's clock mappings (`Clock` events), piece by piece, so drift and
//! steps after the start count. Two clients believing in one key at one true
//! instant break `lease-exclusion` only if every clock that measured the two
//! leases stayed within the assumed drift bound, and none was stepped, while
//! the overlap was in the making, and no whole-cluster restore came in that
//! time either (a lease the old cluster granted or renewed loses its
//! guarantee, SPEC.md). Otherwise the overlap is an exposure: counted, and
//! left to fencing to contain.
//!
//! The clocks that measured the leases are the two believers' own and those
//! of the servers that granted, renewed, expired or ghost-released the key
//! inside the window: a server's timer frees a key only through an Expire it
//! proposes, and a belief ends on its own client's clock. Any other clock's
//! fault (another client's, a follower's that never served the key) cannot
//! have caused the overlap and excuses nothing.
//!
//! "In the making" is the overlap's *window*: from the first send of the
//! earlier of the two requests behind the beliefs up to the end of the
//! overlap. Everything the protocol's safety argument measures happens in
//! it: each belief counts from its request's first send, and every server
//! timer that may end the older lease starts after that send (at the Grant's
//! apply, a renewal's confirmation or a new leader's taking office; see
//! `core/src/service/leases.rs`). A step long before the window cannot
//! shorten a lease measured after it, so it excuses nothing; a step or a
//! clock beyond the bound inside it excuses the overlap.
//!
//! Every exposure is kept as an [`Exposure`]: the two beliefs, their window,
//! and what in it excused the overlap (each clock beyond the bound, each
//! step, each whole-cluster restore), so a trace and a JSON report can say why.
//!
//! A long run is judged as it goes: a piece of belief can overlap only with
//! pieces that start before it ends, so once its end is past, and so are its
//! partners' ends and the end of every stretch beyond the bound its overlaps
//! would name, nothing later can change what it finds. Each key's pieces are
//! judged from the earliest, in the order the end of the run would judge
//! them, and what they find is held back to be reported in that order.

use super::bad_clocks::BadClocks;
use super::keys::Keys;
use super::packed::{put_change, take_change, Pack, PackedMap};
use super::request_keys::RequestKeys;
use super::state::{Context, Facts};
use super::{CheckConfig, Family, Property, Report, Violation};
use crate::history::{Actor, Event, EventKind};
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ClientId, Key, NodeId, Token};
use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

/// The causes an exposure's sentence names; the JSON lists them all.
const CAUSES_TOLD_MAX: usize = 4;

/// One million: rates are in parts per million.
const PPM_ONE: i128 = 1_000_000;

/// A jump this small between a clock's old and new mapping is rounding, not a step.
const STEP_TOLERANCE_US: i128 = 100;

/// From `at_us` on (true time), the clock reads `local_us + (t - at_us) * (1 + rate_ppm / 1e6)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClockMap {
    pub at_us: u64,
    pub local_us: u64,
    pub rate_ppm: i64,
}

/// A mapping packed: each number as a change from the mapping before (a few bytes where it took 24).
impl Pack for ClockMap {
    fn pack(&self, before: &Self, bytes: &mut Vec<u8>) {
        put_change(bytes, self.at_us, before.at_us);
        put_change(bytes, self.local_us, before.local_us);
        put_change(bytes, self.rate_ppm as u64, before.rate_ppm as u64);
    }

    fn unpack(before: &Self, bytes: &[u8], at: &mut usize) -> Self {
        let at_us = take_change(bytes, at, before.at_us);
        let local_us = take_change(bytes, at, before.local_us);
        ClockMap { at_us, local_us, rate_ppm: take_change(bytes, at, before.rate_ppm as u64) as i64 }
    }
}

impl ClockMap {
    const IDENTITY: ClockMap = ClockMap { at_us: 0, local_us: 0, rate_ppm: 0 };

    /// Local time at true instant `true_us` (not before `at_us`); rounds down like the world's clocks.
    fn local_at(&self, true_us: u64) -> i128 {
        assert!(true_us >= self.at_us, "a clock mapping read before it began");
        let elapsed = i128::from(true_us - self.at_us);
        i128::from(self.local_us) + (elapsed * (PPM_ONE + i128::from(self.rate_ppm))).div_euclid(PPM_ONE)
    }
}

/// The earliest true instant at or after `from_us` at which a clock with these
/// successive mappings (sorted by `at_us`) reads at least `until_local_us`;
/// `None` if it never does. Before the first mapping the clock reads true time.
pub fn true_us_reaching(maps: impl IntoIterator<Item = ClockMap>, from_us: u64, until_local_us: u64) -> Option<u64> {
    let mut maps = maps.into_iter().peekable();
    let needs_identity = maps.peek().is_none_or(|m| m.at_us > 0);
    let mut pieces = needs_identity.then_some(ClockMap::IDENTITY).into_iter().chain(maps).peekable();
    let until = i128::from(until_local_us);
    while let Some(map) = pieces.next() {
        let end_us = pieces.peek().map(|next| next.at_us);
        assert!(end_us.is_none_or(|end| end >= map.at_us), "clock mappings out of order");
        if end_us.is_some_and(|end| end <= from_us) {
            continue;
        }
        let start_us = map.at_us.max(from_us);
        let local_start = map.local_at(start_us);
        if local_start >= until {
            return Some(start_us);
        }
        let speed = PPM_ONE + i128::from(map.rate_ppm);
        if speed <= 0 {
            continue; // A stopped clock never gets there within this piece.
        }
        // Smallest elapsed time e with floor(e * speed / 1e6) >= until - local at the piece's start.
        let needed = (until - map.local_at(map.at_us)) * PPM_ONE;
        let elapsed = (needed + speed - 1).div_euclid(speed);
        let reach_us = u64::try_from(i128::from(map.at_us) + elapsed).unwrap_or(u64::MAX);
        if end_us.is_none_or(|end| reach_us < end) {
            return Some(reach_us.max(start_us));
        }
    }
    None
}

/// One stretch of belief, before its end is known.
#[derive(Clone, Debug)]
struct Piece {
    client: ClientId,
    token: Token,
    start_us: u64,
    until_local_us: u64,
    /// Ended by the client (BeliefEnd, a renewal, a crash) at this true instant.
    closed_us: Option<u64>,
    /// When the client's clock first read the lease's start (a lease before
    /// `until_local_us`), if that was before `start_us`: decided at the
    /// start, so the clock's older mappings need not be read again. None:
    /// `start_us` if the clock reads it from `start_us` on, else 0.
    sent_before_us: Option<u64>,
}

/// A key's belief pieces not yet judged, sorted by start and client, and
/// what its judged pairs found, in the order the end of the run reports them.
#[derive(Debug, Default)]
struct KeyPieces {
    pieces: VecDeque<Piece>,
    found: Vec<Found>,
}

/// An overlap judged before the end of the run, held back so that the report
/// lists it where judging every piece at the end would have.
#[derive(Debug)]
enum Found {
    Violation(Violation),
    Exposure(Exposure),
}

/// One stretch of belief in true time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Belief {
    pub client: ClientId,
    pub token: Token,
    /// No later than the first send of the request behind the belief.
    pub sent_us: u64,
    pub start_us: u64,
    pub end_us: u64,
    /// The run ended before the belief did (`end_us` is the run's end).
    #[serde(skip)]
    pub past_end: bool,
}

/// What broke the protocol's assumptions inside an overlap's window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "cause", rename_all = "kebab-case")]
pub enum Cause {
    /// A clock ran beyond the assumed drift bound from `from_us` (until
    /// `to_us`; none: to the end of the run).
    BeyondBound {
        #[serde(serialize_with = "as_name")]
        actor: Actor,
        rate_ppm: i64,
        from_us: u64,
        to_us: Option<u64>,
    },
    /// A clock was stepped by `delta_us` (local time) at `at_us`.
    Step {
        #[serde(serialize_with = "as_name")]
        actor: Actor,
        at_us: u64,
        delta_us: i64,
    },
    /// The whole cluster was restored from a backup at `at_us`.
    ClusterRestore { at_us: u64 },
}

fn as_name<S: Serializer>(actor: &Actor, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(actor)
}

impl Cause {
    /// Where the cause begins, for ordering.
    fn begins_us(&self) -> u64 {
        match *self {
            Cause::BeyondBound { from_us, .. } => from_us,
            Cause::Step { at_us, .. } | Cause::ClusterRestore { at_us } => at_us,
        }
    }

    /// Whose clock it was (the resource's for a restore: no clock of the service).
    fn actor(&self) -> Actor {
        match *self {
            Cause::BeyondBound { actor, .. } | Cause::Step { actor, .. } => actor,
            Cause::ClusterRestore { .. } => Actor::Resource,
        }
    }

    /// Whether it touches the true-time window `from_us..end_us`.
    fn inside(&self, from_us: u64, end_us: u64) -> bool {
        match *self {
            Cause::BeyondBound { from_us: since, to_us, .. } => since < end_us && to_us.is_none_or(|to| to >= from_us),
            Cause::Step { at_us, .. } | Cause::ClusterRestore { at_us } => at_us >= from_us && at_us < end_us,
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Cause::BeyondBound { actor, rate_ppm, from_us, to_us: Some(to_us) } => write!(
                f,
                "{actor}'s clock ran {rate_ppm:+}ppm, beyond the bound, from {}ms to {}ms",
                from_us / 1_000,
                to_us / 1_000
            ),
            Cause::BeyondBound { actor, rate_ppm, from_us, to_us: None } => {
                write!(f, "{actor}'s clock ran {rate_ppm:+}ppm, beyond the bound, from {}ms on", from_us / 1_000)
            }
            Cause::Step { actor, at_us, delta_us } => {
                write!(f, "{actor}'s clock stepped {:+}ms at {}ms", delta_us / 1_000, at_us / 1_000)
            }
            Cause::ClusterRestore { at_us } => write!(f, "the cluster was restored at {}ms", at_us / 1_000),
        }
    }
}

/// Two clients believed they held one key at once, excused by a broken
/// assumption (a lease exposure): fencing must contain it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Exposure {
    /// When the overlap began (the later belief's start), true time.
    pub at_us: u64,
    /// When it ended (the earlier of the two beliefs' ends).
    pub end_us: u64,
    /// The run ended while both still believed: the overlap went on past `end_us`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub past_end: bool,
    pub key: Key,
    /// The two beliefs, the earlier first.
    pub beliefs: [Belief; 2],
    /// The overlap was in the making from here (the first send of the earlier request).
    pub window_start_us: u64,
    /// What broke an assumption inside the window, in time order.
    pub causes: Vec<Cause>,
}

impl fmt::Display for Exposure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b] = &self.beliefs;
        write!(
            f,
            "lease exposure at {}ms: {} ({}, believed from {}ms) and {} ({}, from {}ms) both believed they held {} \
             until {}ms{}; in the window from {}ms: ",
            self.at_us / 1_000,
            a.client,
            a.token,
            a.start_us / 1_000,
            b.client,
            b.token,
            b.start_us / 1_000,
            self.key,
            self.end_us / 1_000,
            if self.past_end { ", when the run ended, and past it" } else { "" },
            self.window_start_us / 1_000
        )?;
        let told: Vec<String> = self.causes.iter().take(CAUSES_TOLD_MAX).map(Cause::to_string).collect();
        f.write_str(&told.join("; "))?;
        if self.causes.len() > CAUSES_TOLD_MAX {
            write!(f, "; and {} more", self.causes.len() - CAUSES_TOLD_MAX)?;
        }
        Ok(())
    }
}

#[derive(Debug)]
pub(crate) struct LeaseChecker {
    drift_ppm_max: u64,
    /// Each client's clock mappings, to turn its lease ends into true time
    /// (a server's clock counts only through its steps and stretches beyond
    /// the bound, in `bad_clock`), in order, packed by their number.
    maps: BTreeMap<ClientId, PackedMap<u64, ClockMap>>,
    /// Each clock's current mapping, to tell a step from a rate change; a
    /// restarted process may come back with a new clock.
    current: BTreeMap<Actor, ClockMap>,
    /// Each clock's stretches beyond the bound (`to_us` none while it still
    /// is) and its steps, packed (`bad_clocks.rs`).
    bad_clock: BadClocks,
    /// Clocks beyond the bound now: since when, at what rate.
    beyond_since: BTreeMap<Actor, (u64, i64)>,
    /// Per key (by its number in `keys`), the belief pieces not yet judged
    /// and what the judged ones found.
    by_key: Vec<KeyPieces>,
    /// The pairs of beliefs (key, both clients and tokens) already judged:
    /// two beliefs overlap once, however many pieces each has. Only
    /// overlapping pairs get here: a run keeps one per violation or exposure.
    seen: BTreeSet<Pair>,
    /// When the pieces were last judged as the run goes.
    swept_us: u64,
    /// The key of each acquire and renew sent, to tell which key a reply
    /// served (a server may answer one long after: a waiter granted, a
    /// retry answered from its session), as its number in `keys`.
    request_keys: RequestKeys,
    /// Every key a request or a belief named, once, by number.
    keys: Keys,
    /// Per key and server, when it granted, renewed, expired or
    /// ghost-released the key: the servers whose clocks measured its leases.
    /// A window may reach back to any time, so every instant is kept, packed
    /// (`packed.rs`: a few bytes each, where a renewal a second made this
    /// the lease checker's largest part).
    served: BTreeMap<Key, BTreeMap<NodeId, PackedMap<u64, ()>>>,
}

/// How often (true time) the pieces are judged as the run goes: any period
/// gives the same verdict, a shorter one keeps fewer pieces and costs more.
const SWEEP_EVERY_US: u64 = 1_000_000;

impl LeaseChecker {
    pub fn new(config: &CheckConfig) -> LeaseChecker {
        LeaseChecker {
            drift_ppm_max: config.drift_ppm_max,
            maps: BTreeMap::new(),
            current: BTreeMap::new(),
            bad_clock: BadClocks::default(),
            beyond_since: BTreeMap::new(),
            by_key: Vec::new(),
            seen: BTreeSet::new(),
            swept_us: 0,
            request_keys: RequestKeys::default(),
            keys: Keys::default(),
            served: BTreeMap::new(),
        }
    }

    /// Whether `actor`'s clock measured a lease behind the overlap of `a` and
    /// `b` on `key` inside `window_start_us..=end_us`: one of the two
    /// believers, or a server that served the key in the window.
    fn measured(&self, actor: Actor, key: &Key, [a, b]: [&Belief; 2], window_start_us: u64, end_us: u64) -> bool {
        match actor {
            Actor::Client(client) => client == a.client || client == b.client,
            Actor::Server(node) => self
                .served
                .get(key)
                .and_then(|by_node| by_node.get(&node)?.first_from(window_start_us))
                .is_some_and(|at_us| at_us <= end_us),
            Actor::Resource => false,
        }
    }

    /// The number of `key` in `keys`, given it on first sight.
    fn key_number(&mut self, key: &Key) -> u32 {
        let number = self.keys.number(key);
        if self.by_key.len() < self.keys.len() {
            self.by_key.push(KeyPieces::default());
        }
        number
    }

    /// Ends `client`'s open piece on key number `key` (if it has one).
    fn close(&mut self, client: ClientId, key: usize, at_us: u64) {
        // A piece judged already ended before now: a later close changes nothing.
        let open = self.by_key[key].pieces.iter_mut().rev().find(|p| p.client == client && p.closed_us.is_none());
        if let Some(piece) = open {
            piece.closed_us = Some(at_us);
        }
    }

    fn maps_of(&self, client: ClientId) -> impl Iterator<Item = ClockMap> + '_ {
        self.maps.get(&client).into_iter().flat_map(|maps| maps.iter().map(|(_, map)| map))
    }

    /// A belief lasts less than a lease of local time from its request's
    /// first send: the local time at which it was sent at the latest.
    fn sent_local_us(piece: &Piece, lease_us: u64) -> u64 {
        piece.until_local_us.saturating_sub(lease_us)
    }

    /// The piece's belief as far as `now_us`: `Some(None)` if it lasted no
    /// time, none if something from `now_us` on can still change it (its end,
    /// or its clock reading its request's send, is not past yet; a clock
    /// mapping from `now_us` on changes no reading before it). `at_end`:
    /// `now_us` ends the run, nothing is left to change, and a belief still
    /// held ends there.
    fn belief(&self, piece: &Piece, lease_us: u64, now_us: u64, at_end: bool) -> Option<Option<Belief>> {
        let maps = || self.maps_of(piece.client);
        let expiry_us = true_us_reaching(maps(), piece.start_us, piece.until_local_us).unwrap_or(u64::MAX);
        let ends_us = expiry_us.min(piece.closed_us.unwrap_or(u64::MAX));
        if ends_us >= now_us && !at_end {
            return None;
        }
        let end_us = ends_us.min(now_us);
        if end_us <= piece.start_us {
            return Some(None);
        }
        let sent_us = match piece.sent_before_us {
            Some(sent_us) => sent_us,
            None => match true_us_reaching(maps(), piece.start_us, Self::sent_local_us(piece, lease_us)) {
                Some(reached_us) if at_end || reached_us < now_us => piece.start_us,
                None if at_end => 0,
                _ => return None,
            },
        };
        let (client, token, start_us) = (piece.client, piece.token, piece.start_us);
        let past_end = at_end && ends_us > now_us;
        Some(Some(Belief { client, token, sent_us, start_us, end_us, past_end }))
    }

    /// Judges, on each key, the earliest pieces whose every overlap is
    /// decided at `now_us`, and forgets them. A piece's overlaps are with the
    /// pieces that started before it ended: none can start later. Pairs are
    /// judged in the order the end of the run would judge them, so the first
    /// pieces of two beliefs speak for them as they would there.
    fn sweep(&mut self, ctx: &Context, now_us: u64) {
        // Events after the configured end (a test's) wait for the end of the run.
        let now_us = now_us.min(ctx.config.run_end_us);
        let lease_us = ctx.config.lease_ms.saturating_mul(1_000);
        for key in 0..self.by_key.len() {
            while let Some(judged) = self.judge_first(ctx, key, lease_us, now_us) {
                self.by_key[key].found.extend(judged);
                self.by_key[key].pieces.pop_front();
            }
        }
    }

    /// What key number `key`'s first piece overlaps with and how each
    /// overlap is judged, if all of it is decided at `now_us`.
    fn judge_first(&mut self, ctx: &Context, key: usize, lease_us: u64, now_us: u64) -> Option<Vec<Found>> {
        let pieces = &self.by_key[key].pieces;
        let a = match self.belief(pieces.front()?, lease_us, now_us, false)? {
            Some(a) => a,
            None => return Some(Vec::new()),
        };
        let mut others = Vec::new();
        for piece in pieces.iter().skip(1).take_while(|p| p.start_us < a.end_us) {
            if let Some(b) = self.belief(piece, lease_us, now_us, false)? {
                others.push(b);
            }
        }
        let name = self.keys.name(key as u32);
        // A stretch beyond the bound still open in an overlap's window will
        // be told with its end: wait for it.
        let waits = others.iter().any(|b| {
            let (window_start_us, end_us) = (a.sent_us.min(b.sent_us), a.end_us.min(b.end_us));
            b.client != a.client
                && self.beyond_since.iter().any(|(&actor, &(from_us, _))| {
                    from_us < end_us && self.measured(actor, name, [&a, b], window_start_us, end_us)
                })
        });
        if waits {
            return None;
        }
        let mut found = Vec::new();
        for b in &others {
            if b.client != a.client && self.seen.insert(pair(key, &a, b)) {
                self.judge_overlap(ctx, name, &a, b, &mut found);
            }
        }
        Some(found)
    }

    fn judge_overlap(&self, ctx: &Context, key: &Key, a: &Belief, b: &Belief, found: &mut Vec<Found>) {
        let (start_us, end_us) = (b.start_us, a.end_us.min(b.end_us));
        // Both beliefs outlived the run: the overlap did too (a shrunk run may end inside it).
        let past_end = a.past_end && b.past_end;
        let window_start_us = a.sent_us.min(b.sent_us);
        let mut causes: Vec<Cause> = self
            .bad_clock
            .iter()
            .filter(|c| {
                c.inside(window_start_us, end_us) && self.measured(c.actor(), key, [a, b], window_start_us, end_us)
            })
            .collect();
        // A restore inside the window: a lease the old cluster granted or
        // renewed lost its guarantee, even if its answer arrived after it.
        let restores = ctx.restores_at_us.iter().filter(|&&at_us| at_us > window_start_us && at_us <= end_us);
        causes.extend(restores.map(|&at_us| Cause::ClusterRestore { at_us }));
        if !causes.is_empty() {
            causes.sort_by_key(Cause::begins_us);
            let beliefs = [*a, *b];
            found.push(Found::Exposure(Exposure {
                at_us: start_us,
                end_us,
                past_end,
                key: key.clone(),
                beliefs,
                window_start_us,
                causes,
            }));
            return;
        }
        let detail = format!(
            "{} ({}) and {} ({}) both believed they held {key} from {}ms to {}ms{} while every clock that \
             measured these leases stayed within {}ppm: the lock was granted again before the earlier lease could \
             have run out",
            a.client,
            a.token,
            b.client,
            b.token,
            start_us / 1_000,
            end_us / 1_000,
            if past_end { " (when the run ended, and past it)" } else { "" },
            self.drift_ppm_max
        );
        let v = Violation::new(Property::LeaseExclusion, start_us, detail);
        found.push(Found::Violation(v.clients(&[a.client, b.client]).tokens(&[a.token, b.token])));
    }
}

impl Family for LeaseChecker {
    fn observe(&mut self, ctx: &Context, _facts: &Facts, event: &Event, _report: &mut Report) {
        let at_us = event.at_us;
        if at_us >= self.swept_us.saturating_add(SWEEP_EVERY_US) {
            self.sweep(ctx, at_us);
            self.swept_us = at_us;
        }
        match &event.kind {
            EventKind::Clock { actor, local_us, rate_ppm, within_bound } => {
                let map = ClockMap { at_us, local_us: *local_us, rate_ppm: *rate_ppm };
                let beyond = !*within_bound || rate_ppm.unsigned_abs() > self.drift_ppm_max;
                let delta_us = self.current.get(actor).map_or(0, |prev| i128::from(*local_us) - prev.local_at(at_us));
                if delta_us.abs() > STEP_TOLERANCE_US {
                    let delta_us = i64::try_from(delta_us).unwrap_or(if delta_us < 0 { i64::MIN } else { i64::MAX });
                    self.bad_clock.push(Cause::Step { actor: *actor, at_us, delta_us });
                }
                // A new rate closes a stretch beyond the bound (and opens
                // another if it is still beyond): each stretch has one rate.
                if let Some((from_us, rate_ppm)) = self.beyond_since.remove(actor) {
                    self.bad_clock.push(Cause::BeyondBound { actor: *actor, rate_ppm, from_us, to_us: Some(at_us) });
                }
                if beyond {
                    self.beyond_since.insert(*actor, (at_us, *rate_ppm));
                }
                self.current.insert(*actor, map);
                if let Actor::Client(client) = actor {
                    self.maps.entry(*client).or_default().push(map);
                }
            }
            EventKind::Crashed { actor } | EventKind::Restarted { actor } => {
                // A crash, restart or restore replaces a process or its disk,
                // never its machine's clock: a later jump of that clock is a
                // step (found by the hunt: a leader restarted earlier, then
                // stepped forward, expired a lease early; that overlap is an
                // exposure, not a violation).
                if let (EventKind::Crashed { .. }, Actor::Client(client)) = (&event.kind, actor) {
                    for key in 0..self.by_key.len() {
                        self.close(*client, key, at_us);
                    }
                }
            }
            EventKind::BeliefStart { client, key, token, until_local_us } => {
                let key = self.key_number(key) as usize;
                self.close(*client, key, at_us);
                let mut piece = Piece {
                    client: *client,
                    token: *token,
                    start_us: at_us,
                    until_local_us: *until_local_us,
                    closed_us: None,
                    sent_before_us: None,
                };
                // The clock's readings before now are all known now.
                let lease_us = ctx.config.lease_ms.saturating_mul(1_000);
                let sent_local_us = Self::sent_local_us(&piece, lease_us);
                piece.sent_before_us =
                    true_us_reaching(self.maps_of(*client), 0, sent_local_us).filter(|&sent_us| sent_us < at_us);
                let pieces = &mut self.by_key[key].pieces;
                // Sorted by start, then client; the new piece starts last.
                let place =
                    pieces.iter().rposition(|p| (p.start_us, p.client) <= (at_us, *client)).map_or(0, |i| i + 1);
                pieces.insert(place, piece);
            }
            EventKind::BeliefEnd { client, key, .. } => {
                let key = self.key_number(key) as usize;
                self.close(*client, key, at_us);
            }
            EventKind::Requested {
                client,
                request,
                body: ClientRequest::Acquire { key, .. } | ClientRequest::Renew { key, .. },
                ..
            } => {
                let number = self.key_number(key);
                self.request_keys.insert(*client, *request, number);
            }
            EventKind::Replied {
                node,
                client,
                request,
                reply: ClientReply::Granted { .. } | ClientReply::Renewed { .. },
            } => {
                if let Some(number) = self.request_keys.get(*client, *request) {
                    let key = self.keys.name(number).clone();
                    self.served.entry(key).or_default().entry(*node).or_default().insert(at_us, ());
                }
            }
            EventKind::ExpireProposed { node, key, .. } | EventKind::GhostReleaseProposed { node, key, .. } => {
                self.served.entry(key.clone()).or_default().entry(*node).or_default().insert(at_us, ());
            }
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &Context, report: &mut Report) {
        let run_end_us = ctx.config.run_end_us;
        let still_beyond = std::mem::take(&mut self.beyond_since);
        let open = still_beyond.into_iter().map(|(actor, (from_us, rate_ppm))| Cause::BeyondBound {
            actor,
            rate_ppm,
            from_us,
            to_us: None,
        });
        open.for_each(|cause| self.bad_clock.push(cause));
        let lease_us = ctx.config.lease_ms.saturating_mul(1_000);
        for key in 0..self.by_key.len() {
            let pieces = std::mem::take(&mut self.by_key[key].pieces);
            // Already sorted by start, then client.
            let intervals: Vec<Belief> =
                pieces.iter().filter_map(|piece| self.belief(piece, lease_us, run_end_us, true).flatten()).collect();
            let mut found = Vec::new();
            for (i, a) in intervals.iter().enumerate() {
                // Sorted by start: once one starts after `a` ends, all later ones do.
                for b in intervals[i + 1..].iter().take_while(|b| b.start_us < a.end_us) {
                    if a.client != b.client && self.seen.insert(pair(key, a, b)) {
                        self.judge_overlap(ctx, self.keys.name(key as u32), a, b, &mut found);
                    }
                }
            }
            self.by_key[key].found.extend(found);
        }
        let mut keys: Vec<usize> = (0..self.keys.len()).collect();
        keys.sort_by(|&x, &y| self.keys.name(x as u32).cmp(self.keys.name(y as u32)));
        for key in keys {
            for found in std::mem::take(&mut self.by_key[key].found) {
                match found {
                    Found::Violation(v) => report.push(v),
                    Found::Exposure(e) => {
                        report.counters.lease_exposures += 1;
                        report.exposures.push(e);
                    }
                }
            }
        }
    }
}

/// Two beliefs on one key (by number), named by their clients and tokens, the lesser first.
type Pair = (u32, (ClientId, Token), (ClientId, Token));

/// Two beliefs on key number `key`, named by their clients and tokens, the lesser first.
fn pair(key: usize, a: &Belief, b: &Belief) -> Pair {
    let (a, b) = ((a.client, a.token), (b.client, b.token));
    (u32::try_from(key).expect("a run names fewer than 2^32 keys"), a.min(b), a.max(b))
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::{true_us_reaching, ClockMap};
    use crate::checker::testkit::H;
    use fencelock::Property;

    fn map(at_ms: u64, local_ms: u64, rate_ppm: i64) -> ClockMap {
        ClockMap { at_us: at_ms * 1_000, local_us: local_ms * 1_000, rate_ppm }
    }

    /// A client's mappings are kept packed: stepped back, slowed, sped up, they come back as they were.
    #[test]
    fn clock_mappings_packed_come_back_as_they_were() {
        use crate::checker::packed::PackedMap;
        let maps: Vec<ClockMap> = (0..500u64)
            .map(|n| {
                let rate_ppm = [0, -1_200, 350, -999_999, 2_000_000][(n % 5) as usize];
                // Mostly ahead, every seventh a step back.
                let local_ms = if n % 7 == 6 { n * 900 } else { n * 1_000 + 5 };
                map(n * 1_000 + n % 3, local_ms, rate_ppm)
            })
            .chain([map(600_000, 0, i64::MIN / 4), map(600_000, u64::MAX / 1_000, i64::MAX / 4)])
            .collect();
        let mut packed = PackedMap::default();
        maps.iter().for_each(|m| packed.push(*m));
        assert_eq!(packed.iter().map(|(_, m)| m).collect::<Vec<_>>(), maps);
        // Half the 24 bytes a mapping took, even with rates that jump this far.
        assert!(packed.held().1 <= 12 * maps.len(), "{} bytes for {} mappings", packed.held().1, maps.len());
    }

    #[test]
    fn clock_mapping_converts_local_deadlines_to_true_time() {
        assert_eq!(true_us_reaching([], 1_000, 2_000_000), Some(2_000_000), "no mapping: true time");
        assert_eq!(true_us_reaching([], 3_000_000, 2_000_000), Some(3_000_000), "already past");
        // 1000 ppm fast: 2 s of local time pass in 1.998002 s of true time.
        assert_eq!(true_us_reaching([map(0, 0, 1_000)], 0, 2_000_000), Some(1_998_002));
        // 1000 ppm slow, starting 5 s ahead.
        assert_eq!(true_us_reaching([map(0, 5_000, -1_000)], 0, 7_000_000), Some(2_002_003));
        // Stepped back 500 ms at 1 s: the deadline comes 500 ms later.
        assert_eq!(true_us_reaching([map(0, 0, 0), map(1_000, 500, 0)], 0, 2_000_000), Some(2_500_000));
        // Stepped forward past the deadline at 1 s: reached at the step.
        assert_eq!(true_us_reaching([map(0, 0, 0), map(1_000, 3_000, 0)], 0, 2_000_000), Some(1_000_000));
        // A rate change half way: 1 s at +0, then 1 s local at 2x speed.
        assert_eq!(true_us_reaching([map(0, 0, 0), map(1_000, 1_000, 1_000_000)], 0, 2_000_000), Some(1_500_000));
        // A mapping that starts later than the belief: true time before it.
        assert_eq!(true_us_reaching([map(5_000, 5_000, 0)], 1_000, 2_000_000), Some(2_000_000));
        // A stopped clock never gets there.
        assert_eq!(true_us_reaching([map(0, 0, -1_000_000)], 0, 2_000_000), None);
    }

    /// Feeds `h` to a lease checker alone, with the run ending at `run_end_us`;
    /// returns the most pieces it held at once and its report.
    fn feed(h: &H, run_end_us: u64) -> (usize, crate::checker::Report) {
        use super::LeaseChecker;
        use crate::checker::state::{Context, Facts};
        use crate::checker::{Family, Report};
        let config = h.config(run_end_us);
        let ctx = Context::new(config.clone());
        let mut checker = LeaseChecker::new(&config);
        let mut report = Report::default();
        let mut held_max = 0;
        for event in h.events() {
            checker.observe(&ctx, &Facts::default(), event, &mut report);
            held_max = held_max.max(checker.by_key.iter().map(|k| k.pieces.len()).sum());
        }
        assert!(checker.keys.len() <= 3, "a piece names its key by number");
        checker.finish(&ctx, &mut report);
        (held_max, report)
    }

    /// Ten thousand pieces on two keys from `from_ms` on, each over long before the next.
    fn many_pieces(h: H, from_ms: u64) -> H {
        (0..10_000u64).fold(h, |h, i| {
            let (client, k, at_ms) = (1 + (i % 2) as u32, ["a", "b"][(i % 2) as usize], from_ms + 10 * i);
            let until_us = (at_ms + 1_000) * 1_000;
            h.at_ms(at_ms).belief_until_us(client, k, 100 + i, until_us).at_ms(at_ms + 5).belief_end(client, k, 100 + i)
        })
    }

    /// Pieces are judged as the run goes and forgotten once nothing later can
    /// overlap them: a long run holds a few at a time, and an overlap after
    /// many is still found.
    #[test]
    fn belief_pieces_are_forgotten_once_judged_and_an_overlap_after_many_is_found() {
        assert!(
            std::mem::size_of::<super::Piece>() <= 64,
            "a piece costs {} bytes",
            std::mem::size_of::<super::Piece>()
        );
        let h = many_pieces(H::new(), 0).at_ms(200_000).belief_until_us(1, "a", 20_000, 202_000_000);
        let h = h.at_ms(200_500).belief_until_us(2, "a", 20_001, 202_000_000);
        let (held_max, report) = feed(&h, 203_000_000);
        assert!(held_max <= 500, "{held_max} pieces held at once");
        let found: Vec<(Property, u64)> = report.violations.iter().map(|v| (v.property, v.at_us)).collect();
        assert_eq!(found, [(Property::LeaseExclusion, 200_500_000)]);
    }

    /// A belief from the run's start that lasts long is kept while it lasts,
    /// whatever comes after it: a late overlap with it is found.
    #[test]
    fn a_long_belief_from_long_ago_is_kept_until_it_ends() {
        let h = many_pieces(H::new().belief_until_us(3, "c", 7, 150_000_000_000), 0);
        let h = h.at_ms(120_000).belief_until_us(4, "c", 8, 121_000_000);
        let (held_max, report) = feed(&h, 203_000_000);
        assert!(held_max <= 500, "{held_max} pieces held at once");
        let found: Vec<(Property, u64)> = report.violations.iter().map(|v| (v.property, v.at_us)).collect();
        assert_eq!(found, [(Property::LeaseExclusion, 120_000_000)]);
    }

    /// An exposure excused by a clock beyond the bound is judged only once
    /// that stretch ends, so that it is told with its end, as at the end of
    /// the run; one still open at the end is told open.
    #[test]
    fn an_exposure_waits_for_its_stretch_beyond_the_bound_to_end() {
        let overlap = |h: H| {
            h.clock(client(1), 0, 0, true)
                .at_ms(3_000)
                .clock(client(1), 3_000_000, 900, false)
                .belief_until_us(1, "k", 43, 5_000_000)
                .at_ms(4_000)
                .belief_until_us(2, "k", 44, 6_000_000)
        };
        let h = many_pieces(overlap(H::new()).at_ms(90_000).clock(client(1), 90_078_300, 0, true), 100_000);
        let (_, report) = feed(&h, 203_000_000);
        let told: Vec<String> = report.exposures.iter().map(ToString::to_string).collect();
        assert_eq!(report.counters.lease_exposures, 1);
        assert!(told[0].ends_with("c1's clock ran +900ppm, beyond the bound, from 3000ms to 90000ms"), "{told:?}");
        let (_, report) = feed(&many_pieces(overlap(H::new()), 100_000), 203_000_000);
        let told: Vec<String> = report.exposures.iter().map(ToString::to_string).collect();
        assert!(told[0].ends_with("c1's clock ran +900ppm, beyond the bound, from 3000ms on"), "{told:?}");
    }

    #[test]
    fn clean_run_passes() {
        let verdict = happy().check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.lease_exposures, 0);
    }

    #[test]
    fn overlapping_beliefs_within_the_bound_break_lease_exclusion() {
        // c1 believes in k (43) until about 5.1 s; c2 believes from 4 s.
        let verdict = happy().at_ms(4_000).belief_until_us(2, "k", 44, 6_000_000).check();
        assert_only(&verdict, Property::LeaseExclusion);
        let v = &verdict.violations[0];
        assert_eq!((v.at_us, v.tokens.len()), (4_000_000, 2));
        assert!(v.to_string().starts_with("lease-exclusion at 4000ms: c1 (tok43) and c2 (tok44)"), "{v}");
    }

    #[test]
    fn a_belief_ended_early_does_not_overlap() {
        let verdict = happy().at_ms(3_900).belief_end(1, "k", 43).at_ms(4_000).belief_until_us(2, "k", 44, 6_000_000);
        assert_clean(&verdict.check());
    }

    #[test]
    fn a_crashed_client_believes_nothing() {
        let h = happy().at_ms(3_900).crash(client(1)).at_ms(4_000).belief_until_us(2, "k", 44, 6_000_000);
        // Judged before c1's lock is owed back (liveness: 3.9 s + lease + 5 s).
        assert_clean(&h.check_until_ms(10_000));
    }

    #[test]
    fn a_slow_client_clock_stretches_its_belief() {
        // c3's clock runs at half speed (beyond the bound from 3 s): its 1 s lease lasts 2 s of true time.
        let h = H::new()
            .at_ms(3_000)
            .clock(client(3), 3_000_000, -500_000, false)
            .belief_until_us(3, "j", 50, 4_000_000)
            .at_ms(4_500)
            .belief_until_us(4, "j", 51, 6_000_000);
        let verdict = h.check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.lease_exposures, 1, "counted as an exposure beyond the bound");
    }

    #[test]
    fn overlaps_beyond_the_drift_bound_are_exposures() {
        let verdict = happy()
            .at_ms(3_500)
            .clock(client(1), 3_499_300, 900, false)
            .at_ms(4_000)
            .belief_until_us(2, "k", 44, 6_000_000)
            .check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.lease_exposures, 1);
    }

    #[test]
    fn a_rate_above_drift_ppm_max_is_beyond_the_bound_even_if_not_flagged() {
        let verdict = happy()
            .at_ms(3_500)
            .clock(server(0), 3_500_350, 900, true)
            .at_ms(4_000)
            .belief_until_us(2, "k", 44, 6_000_000)
            .check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.lease_exposures, 1);
    }

    #[test]
    fn a_stepped_clock_makes_overlaps_exposures() {
        // n0's clock (100 ppm fast since 0) reads 3_500_350 at 3.5 s; it is stepped back to 3 s.
        let verdict = happy()
            .at_ms(3_500)
            .clock(server(0), 3_000_000, 100, true)
            .at_ms(4_000)
            .belief_until_us(2, "k", 44, 6_000_000)
            .check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.lease_exposures, 1);
    }

    #[test]
    fn a_rate_change_within_the_bound_is_no_step() {
        let verdict = happy()
            .at_ms(3_500)
            .clock(server(1), 3_500_350, -300, true)
            .at_ms(4_000)
            .belief_until_us(2, "k", 44, 6_000_000)
            .check();
        assert_only(&verdict, Property::LeaseExclusion);
    }

    #[test]
    fn a_bad_clock_after_the_overlap_does_not_excuse_it() {
        let verdict = happy()
            .at_ms(4_000)
            .belief_until_us(2, "k", 44, 6_000_000)
            .at_ms(9_000)
            .clock(server(1), 0, 100, true)
            .check();
        assert_only(&verdict, Property::LeaseExclusion);
    }

    /// c1 believes in k from 3 s (sent then at the latest) to 5 s, c2 from 4 s,
    /// after n0 expired c1's lease at 3.9 s; `before` adds events before c1's
    /// belief, `between` between the two.
    fn overlap(before: impl FnOnce(H) -> H, between: impl FnOnce(H) -> H) -> H {
        let h = H::new().clock(server(0), 0, 0, true).clock(client(1), 0, 0, true).clock(client(2), 0, 0, true);
        let h = between(before(h).at_ms(3_000).belief_until_us(1, "k", 43, 5_000_000));
        h.at_ms(3_900).expire_proposed(0, "k", 43).at_ms(4_000).belief_until_us(2, "k", 44, 6_000_000)
    }

    fn overlap_after(before: impl FnOnce(H) -> H) -> H {
        overlap(before, |h| h)
    }

    #[test]
    fn a_step_before_the_overlaps_window_excuses_nothing() {
        // n0 stepped forward 1 s at 0.5 s; c1's belief until 5 s counts from a send at 3 s or later.
        let verdict = overlap_after(|h| h.at_ms(500).clock(server(0), 1_500_000, 0, true)).check();
        assert_only(&verdict, Property::LeaseExclusion);
        assert_eq!(verdict.counters.lease_exposures, 0);
    }

    #[test]
    fn a_step_inside_the_overlaps_window_excuses_it() {
        // c1's belief until 5 s counts from a send at 3 s or later: n0's step at 3.5 s is inside.
        let verdict = overlap(|h| h, |h| h.at_ms(3_500).clock(server(0), 4_500_000, 0, true)).check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.lease_exposures, 1);
    }

    #[test]
    fn an_overlap_the_run_ended_inside_says_so() {
        let verdict = overlap(|h| h, |h| h).check_until_ms(4_500);
        let v = verdict.violations.iter().find(|v| v.property == Property::LeaseExclusion).expect("lease-exclusion");
        assert!(v.to_string().contains("from 4000ms to 4500ms (when the run ended, and past it) while"), "{v}");
        // Ended inside the run: no such words.
        let verdict = overlap(|h| h, |h| h).check_until_ms(8_000);
        let v = verdict.violations.iter().find(|v| v.property == Property::LeaseExclusion).expect("lease-exclusion");
        assert!(v.to_string().contains("from 4000ms to 5000ms while"), "{v}");
    }

    #[test]
    fn a_step_of_a_believers_clock_inside_the_window_excuses_it() {
        // c1's clock stepped back 2 s at 3.5 s: its belief until 5 s (local) lasts to 7 s.
        let verdict = overlap(|h| h, |h| h.at_ms(3_500).clock(client(1), 1_500_000, 0, true)).check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.lease_exposures, 1);
    }

    #[test]
    fn a_clock_that_measured_neither_lease_excuses_nothing() {
        // Inside the window: c3 (no belief in k) stepped, n1 (never served k)
        // ran beyond the bound. Neither clock measured c1's or c2's lease.
        let verdict = overlap(
            |h| h.clock(client(3), 0, 0, true).clock(server(1), 0, 0, true),
            |h| h.at_ms(3_500).clock(client(3), 7_000_000, 0, true).clock(server(1), 3_500_000, 9_000, false),
        )
        .check();
        assert_only(&verdict, Property::LeaseExclusion);
        assert_eq!(verdict.counters.lease_exposures, 0);
    }

    #[test]
    fn a_server_that_granted_the_key_in_the_window_counts() {
        // n1 answered c2's acquire of k at 3.85 s, after running beyond the bound from 3.5 s.
        let verdict = overlap(
            |h| h.clock(server(1), 0, 0, true),
            |h| {
                let h = h.at_ms(3_500).clock(server(1), 3_500_000, 9_000, false).acquire_request(2, 7, "k");
                h.at_ms(3_850).reply(1, 2, 7, reply_granted(44))
            },
        )
        .check();
        // (The grant itself is not in the history: only the lease judgement matters here.)
        assert!(!verdict.properties().contains(&Property::LeaseExclusion), "{:#?}", verdict.violations);
        assert_eq!(verdict.counters.lease_exposures, 1);
    }

    #[test]
    fn a_drift_beyond_the_bound_that_ended_before_the_window_excuses_nothing() {
        // n0 ran 900 ppm fast from 0.2 s to 1 s (beyond 500), then within the bound again.
        let verdict = overlap_after(|h| {
            h.at_ms(200).clock(server(0), 200_000, 900, false).at_ms(1_000).clock(server(0), 1_000_720, 100, true)
        })
        .check();
        assert_only(&verdict, Property::LeaseExclusion);
        // Still beyond the bound when the window opens: an exposure.
        let verdict = overlap_after(|h| h.at_ms(200).clock(server(0), 200_000, 900, false)).check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.lease_exposures, 1);
    }

    #[test]
    fn a_renewal_answered_after_a_cluster_restore_is_an_exposure() {
        // c1 asked before the restore at 2.9 s (its belief until 4.8 s counts
        // from 2.8 s at the latest) and heard back after it (found by the hunt,
        // default seed 14959 before the fix).
        let verdict = H::new()
            .clock(client(1), 0, 0, true)
            .clock(client(2), 0, 0, true)
            .at_ms(2_900)
            .restore(1, 100)
            .at_ms(3_000)
            .belief_until_us(1, "k", 43, 4_800_000)
            .at_ms(4_000)
            .belief_until_us(2, "k", 101, 6_000_000)
            .check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.lease_exposures, 1);
    }

    #[test]
    fn overlaps_across_a_cluster_restore_are_exposures() {
        let verdict =
            happy().at_ms(3_900).restore(1, 100).leader(0, 1 << 32).at_ms(4_000).acquire(5, "k", 2, 9, 101).check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.lease_exposures, 1);
    }
}
