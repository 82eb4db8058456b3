//! The fault plan drawn as it is played, a few episodes ahead of the clock.
//!
//! A plan of four hours holds tens of thousands of events (a megabyte and
//! more); a run needs only the next one. So each family draws its episodes
//! lazily from its own stream, and the schedule hands out an event once no
//! family can still draw one before it. The events come out in exactly the
//! order `plan` gives them: sorted by time, and at one millisecond in the
//! order the whole-plan draw pushed them (family by family, in each family
//! its own push order), which [`Order`] spells out. A family's draws never
//! read another family's, except the disks', which read the outages drawn in
//! the same family (`standard.rs`), and the clock steps, which read which
//! clocks drift beyond the bound (the initial rates, drawn whole first); so
//! drawing them in another interleaving makes the same events.

use super::standard::{Clocks, Network, Outages, Pauses, ResourceCrashes, ResourceRestores};
use super::{Fault, FaultEvent, Planner, EVENTS_MAX};
use crate::model::Model;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// The seed's fault plan, drawn as it is handed out (see the module's doc).
#[derive(Clone)]
pub struct Schedule {
    model: Model,
    /// The families with episodes left to draw, in the plan's family order.
    families: Vec<Drawing>,
    /// Events drawn and not yet handed out: those a family drew ahead of the
    /// others (an episode's later events, the disks' look-ahead).
    pending: BTreeMap<Order, Fault>,
    /// Places taken among the families, drawn whole or not.
    places: u8,
    given: usize,
}

/// Where an event stands in the plan: by time, then as the whole-plan draw
/// pushed it (a stable sort by time kept that order): its family's place
/// among the families, the list it was pushed from within its family
/// (`rank`), and its place in that list (`seq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Order {
    at_ms: u64,
    place: u8,
    rank: u8,
    seq: u64,
}

impl Schedule {
    /// The schedule of `seed` under `model` (a swarm model already resolved).
    pub fn new(model: &Model, seed: u64) -> Schedule {
        let mut schedule =
            Schedule { model: model.clone(), families: Vec::new(), pending: BTreeMap::new(), places: 0, given: 0 };
        let planner = Planner { model };
        let beyond = schedule.drawn_whole(|sink| planner.initial_rates(sink, seed));
        if model.partitions {
            schedule.add(Draws::Network(Network::new(model, seed)));
        }
        if model.crashes || model.restores {
            schedule.add(Draws::Outages(Outages::new(model, seed)));
        }
        if model.crashes && model.leader_churn {
            schedule.add(Draws::Reacting(Reacting::new(model, seed, &super::churn::LEADER_CHURN)));
        }
        if model.crashes && model.ack_crashes == Some(true) {
            schedule.add(Draws::Reacting(Reacting::new(model, seed, &super::acks::ACK_CRASHES)));
        }
        if model.restores {
            schedule.drawn_whole(|sink| planner.cluster_restores(sink, seed));
        }
        if let Some(pauses) = Pauses::new(model, seed) {
            schedule.add(Draws::Pauses(pauses));
        }
        if let Some(clocks) = Clocks::new(model, seed, beyond) {
            schedule.add(Draws::Clocks(clocks));
        }
        if model.resource_crashes {
            schedule.add(Draws::ResourceCrashes(ResourceCrashes::new(model, seed)));
        }
        if model.resource_restores {
            schedule.add(Draws::ResourceRestores(ResourceRestores::new(model, seed)));
        }
        // The reactive families absent from the standard model: placed after
        // every other family, each from its own stream, so they move nothing else.
        let reacting = [
            (model.renew_strikes == Some(true), &super::renews::RENEW_STRIKES),
            (model.ack_amnesia == Some(true), &super::amnesia::ACK_AMNESIA),
            (model.grant_strikes == Some(true), &super::grants::GRANT_STRIKES),
            (model.crashes && model.vote_strikes == Some(true), &super::votes::VOTE_STRIKES),
            (model.fence_strikes == Some(true), &super::fences::FENCE_STRIKES),
            (model.late_renewals == Some(true), &super::late_renewals::LATE_RENEWALS),
            (model.figure8_strikes == Some(true), &super::figure8::FIGURE8_STRIKES),
        ];
        for (on, kind) in reacting {
            if on {
                schedule.add(Draws::Reacting(Reacting::new(model, seed, kind)));
            }
        }
        schedule
    }

    /// Whether the plan may strike grants or fences: their families are on
    /// (as `new` places them). Without them, what the world must know of
    /// the plan ahead ([`crate::world::Outlook`]) is all at time 0.
    pub fn may_strike_grants_or_fences(&self) -> bool {
        self.model.grant_strikes == Some(true) || self.model.fence_strikes == Some(true)
    }

    /// Events drawn but not yet handed out.
    #[cfg(test)]
    pub(super) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The next place among the families.
    fn place(&mut self) -> u8 {
        self.places += 1;
        self.places - 1
    }

    fn add(&mut self, draws: Draws) {
        let place = self.place();
        self.families.push(Drawing { place, seq: 0, draws });
    }

    /// A family of a handful of events, drawn whole now (its place taken all the same).
    fn drawn_whole<T>(&mut self, draw: impl FnOnce(&mut Sink) -> T) -> T {
        let place = self.place();
        let mut seq = 0;
        draw(&mut Sink { pending: &mut self.pending, place, seq: &mut seq, safety_ms: self.model.safety_ms })
    }

    /// The earliest instant a family may still draw an event at.
    fn horizon_ms(&self) -> u64 {
        self.families.iter().map(|family| family.draws.horizon_ms()).min().unwrap_or(u64::MAX)
    }
}

impl Iterator for Schedule {
    type Item = FaultEvent;

    fn next(&mut self) -> Option<FaultEvent> {
        // Each round draws one episode, and a family ends after at most EVENTS_MAX.
        loop {
            let horizon_ms = self.horizon_ms();
            match self.pending.first_key_value() {
                Some((order, _)) if order.at_ms < horizon_ms => {
                    let (order, fault) = self.pending.pop_first().expect("a first event");
                    self.given += 1;
                    assert!(self.given <= EVENTS_MAX, "fault plan over {EVENTS_MAX} events");
                    return Some(FaultEvent { at_ms: order.at_ms, fault });
                }
                None if horizon_ms == u64::MAX => return None,
                _ => {}
            }
            let planner = Planner { model: &self.model };
            let family = self.families.iter_mut().min_by_key(|f| f.draws.horizon_ms()).expect("a family drawing");
            let mut sink = Sink {
                pending: &mut self.pending,
                place: family.place,
                seq: &mut family.seq,
                safety_ms: self.model.safety_ms,
            };
            family.draws.draw(&planner, &mut sink);
            self.families.retain(|family| family.draws.horizon_ms() < u64::MAX);
        }
    }
}

/// Where a family's events go as it draws them, each under its place in the plan.
pub(super) struct Sink<'a> {
    pending: &'a mut BTreeMap<Order, Fault>,
    place: u8,
    seq: &'a mut u64,
    safety_ms: u64,
}

impl Sink<'_> {
    /// An event of the family's list `rank` (0 for a family of one list).
    pub(super) fn push(&mut self, at_ms: u64, rank: u8, fault: Fault) {
        assert!(at_ms == 0 || at_ms < self.safety_ms, "fault at {at_ms} ms is past the safety phase");
        let order = Order { at_ms, place: self.place, rank, seq: *self.seq };
        *self.seq += 1;
        self.pending.insert(order, fault);
    }
}

/// A family still drawing: its place in the plan, the events it pushed so far, its draws.
#[derive(Clone)]
struct Drawing {
    place: u8,
    seq: u64,
    draws: Draws,
}

/// Each family's episodes, drawn one at a time.
#[derive(Clone)]
enum Draws {
    Network(Network),
    Outages(Outages),
    Pauses(Pauses),
    Clocks(Clocks),
    ResourceCrashes(ResourceCrashes),
    ResourceRestores(ResourceRestores),
    Reacting(Reacting),
}

impl Draws {
    /// No event the family has yet to draw comes before this (`u64::MAX`: it is done).
    fn horizon_ms(&self) -> u64 {
        match self {
            Draws::Network(network) => network.horizon_ms(),
            Draws::Outages(outages) => outages.horizon_ms(),
            Draws::Pauses(pauses) => pauses.horizon_ms(),
            Draws::Clocks(clocks) => clocks.horizon_ms(),
            Draws::ResourceCrashes(crashes) => crashes.horizon_ms(),
            Draws::ResourceRestores(restores) => restores.horizon_ms(),
            Draws::Reacting(reacting) => reacting.episodes.horizon_ms(),
        }
    }

    /// Draws the family's next episode; called only while its horizon is finite.
    fn draw(&mut self, planner: &Planner, sink: &mut Sink) {
        match self {
            Draws::Network(network) => network.draw(planner, sink),
            Draws::Outages(outages) => outages.draw(sink),
            Draws::Pauses(pauses) => pauses.draw(sink),
            Draws::Clocks(clocks) => clocks.draw(planner, sink),
            Draws::ResourceCrashes(crashes) => crashes.draw(sink),
            Draws::ResourceRestores(restores) => restores.draw(sink),
            Draws::Reacting(reacting) => reacting.draw(planner.model, sink),
        }
    }
}

/// The start times of a family's episodes, drawn one at a time: `gap_ms`
/// between the end of one and the start of the next. Every episode ends
/// before the safety phase does.
#[derive(Clone)]
pub(super) struct Episodes {
    rng: ChaCha8Rng,
    gap_ms: (u64, u64),
    fault_rate: f64,
    safety_ms: u64,
    /// The next episode's start.
    t: u64,
    left: usize,
}

impl Episodes {
    pub(super) fn new(mut rng: ChaCha8Rng, gap_ms: (u64, u64), model: &Model) -> Episodes {
        let first_gap = rng.gen_range(0..=gap_ms.1);
        let mut episodes =
            Episodes { rng, gap_ms, fault_rate: model.fault_rate, safety_ms: model.safety_ms, t: 0, left: EVENTS_MAX };
        episodes.t = super::WARMUP_MS + episodes.stretch(first_gap);
        episodes
    }

    /// `fault_rate` below 1 stretches the gaps (fewer episodes); at 1 the draws are the standard model's.
    fn stretch(&self, gap_ms: u64) -> u64 {
        if self.fault_rate == 1.0 {
            gap_ms
        } else {
            (gap_ms as f64 / self.fault_rate) as u64
        }
    }

    pub(super) fn safety_ms(&self) -> u64 {
        self.safety_ms
    }

    /// The next episode's start, while one is left.
    pub(super) fn start_ms(&self) -> Option<u64> {
        (self.left > 0 && self.t < self.safety_ms).then_some(self.t)
    }

    /// The next episode's start, `u64::MAX` when none is left.
    pub(super) fn horizon_ms(&self) -> u64 {
        self.start_ms().unwrap_or(u64::MAX)
    }

    /// Draws the next episode: `episode` makes its draws at its start and
    /// says how long it lasts (None to skip the slot), then the gap after it.
    pub(super) fn next(&mut self, episode: impl FnOnce(&mut ChaCha8Rng, u64) -> Option<u64>) {
        let t = self.start_ms().expect("an episode left to draw");
        let lasted = episode(&mut self.rng, t);
        let gap_ms = self.rng.gen_range(self.gap_ms.0..=self.gap_ms.1);
        self.t += lasted.unwrap_or(0) + self.stretch(gap_ms);
        self.left -= 1;
    }

    /// The stream past every episode left, each drawn by `episode` and
    /// thrown away: where a later use of the same stream starts.
    pub(super) fn into_rng_past(mut self, mut episode: impl FnMut(&mut ChaCha8Rng, u64) -> Option<u64>) -> ChaCha8Rng {
        while self.start_ms().is_some() {
            self.next(&mut episode);
        }
        self.rng
    }
}

/// A reactive family (played by the supervisor at run time): one event
/// per episode, which `draw` gives with how long the episode lasts.
pub(super) struct ReactingKind {
    pub(super) family: super::Family,
    pub(super) gap_ms: (u64, u64),
    pub(super) draw: fn(&Model, &mut ChaCha8Rng) -> (Fault, u64),
}

/// A reactive family's episodes; one that would run past the safety phase
/// is left out, its draws still made.
#[derive(Clone)]
pub(super) struct Reacting {
    episodes: Episodes,
    draw: fn(&Model, &mut ChaCha8Rng) -> (Fault, u64),
}

impl Reacting {
    fn new(model: &Model, seed: u64, kind: &ReactingKind) -> Reacting {
        let rng = super::family_rng(seed, kind.family);
        Reacting { episodes: Episodes::new(rng, kind.gap_ms, model), draw: kind.draw }
    }

    fn draw(&mut self, model: &Model, sink: &mut Sink) {
        let draw = self.draw;
        self.episodes.next(|rng, t| {
            let (fault, lasted) = draw(model, rng);
            if t + lasted >= model.safety_ms {
                return None;
            }
            sink.push(t, 0, fault);
            Some(lasted)
        });
    }
}
