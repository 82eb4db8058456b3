//! The server lanes, the faults lane and the resource lane: roles with
//! terms, outages, pauses, disk stalls, clock steps and offsets; network
//! faults with the lanes they cut; the resource's verdicts and restarts.

use super::layout::{Item, LaneId, Style};
use crate::faults::{ChurnEvent, Fault};
use crate::history::{Actor, Event, EventKind};
use crate::machine::net::Addr;
use fencelock::raft::Role;
use fencelock::resource::WriteVerdict;
use fencelock::{NodeId, Term};
use std::collections::BTreeMap;

/// A span that has begun and not yet ended: its start, label and the trace line that began it.
#[derive(Clone, Debug)]
pub struct Open {
    pub at_us: u64,
    pub label: String,
    pub style: Style,
    pub trace: String,
}

impl Open {
    pub fn new(event: &Event, style: Style, label: String) -> Open {
        Open { at_us: event.at_us, label, style, trace: super::trace_line(event) }
    }

    /// The span from here to `end_us`, its trace the opening line plus `end_trace`.
    pub fn close(self, end_us: u64, end_trace: Option<String>) -> Item {
        let trace = match end_trace {
            Some(end) => format!("{}\n{end}", self.trace),
            None => format!("{}\n(still so when the run ended)", self.trace),
        };
        Item::span(self.at_us, end_us.max(self.at_us), self.style, self.label, trace)
    }
}

/// A local clock as its `Clock` events set it: before the first, it reads true time.
#[derive(Clone, Debug, Default)]
pub struct LocalClock {
    /// `(at_us, local_us, rate_ppm)`, in true-time order.
    maps: Vec<(u64, u64, i64)>,
}

impl LocalClock {
    pub fn set(&mut self, at_us: u64, local_us: u64, rate_ppm: i64) {
        self.maps.push((at_us, local_us, rate_ppm));
    }

    /// Local time at `true_us`, by the mapping in force then.
    pub fn local_at(&self, true_us: u64) -> i128 {
        let map = self.maps.iter().rev().find(|(at, _, _)| *at <= true_us);
        match map {
            None => i128::from(true_us),
            Some(&(at, local, rate)) => {
                let elapsed = i128::from(true_us - at);
                i128::from(local) + (elapsed * (1_000_000 + i128::from(rate))).div_euclid(1_000_000)
            }
        }
    }

    /// The first true instant at or after `from_us` at which this clock reads `until_local_us`.
    pub fn true_reaching(&self, from_us: u64, until_local_us: u64) -> Option<u64> {
        let until = i128::from(until_local_us);
        let mut starts: Vec<u64> = vec![from_us];
        starts.extend(self.maps.iter().map(|(at, _, _)| *at).filter(|at| *at > from_us));
        for (i, &start) in starts.iter().enumerate() {
            let end = starts.get(i + 1).copied();
            let local_start = self.local_at(start);
            if local_start >= until {
                return Some(start);
            }
            let rate = self.maps.iter().rev().find(|(at, _, _)| *at <= start).map_or(0, |m| m.2);
            let speed = 1_000_000 + i128::from(rate);
            if speed <= 0 {
                continue;
            }
            let elapsed = ((until - local_start) * 1_000_000 + speed - 1).div_euclid(speed);
            let reach = u64::try_from(i128::from(start) + elapsed).unwrap_or(u64::MAX);
            if end.is_none_or(|end| reach < end) {
                return Some(reach);
            }
        }
        None
    }
}

#[derive(Default)]
pub struct ServerLane {
    pub roles: Vec<Item>,
    pub events: Vec<Item>,
    pub backgrounds: Vec<Item>,
    pub clock_points: Vec<(u64, i64)>,
    role: Option<Open>,
    down: Option<Open>,
    paused: Option<Open>,
    stall: Option<Open>,
    clock: LocalClock,
    /// The offset of the clock's first reading from true time.
    clock_base: Option<i128>,
}

/// Servers, the faults lane and the resource, fed one event at a time.
#[derive(Default)]
pub struct Servers {
    pub lanes: BTreeMap<NodeId, ServerLane>,
    pub faults: Vec<Item>,
    pub resource: Vec<Item>,
    pub resource_backgrounds: Vec<Item>,
    /// Bands over the lanes a network fault cuts.
    pub cuts: BTreeMap<LaneId, Vec<Item>>,
    net: Vec<(Open, Vec<LaneId>)>,
    unplugged: BTreeMap<NodeId, Open>,
    resource_down: Option<Open>,
    leader: Option<(Term, NodeId)>,
}

impl Servers {
    pub fn observe(&mut self, event: &Event) {
        let at = event.at_us;
        match &event.kind {
            EventKind::Role { node, role, term, .. } => {
                if *role == Role::Leader && self.leader.is_none_or(|(t, _)| *term >= t) {
                    self.leader = Some((*term, *node));
                }
                let lane = self.lanes.entry(*node).or_default();
                let (style, label) = match role {
                    Role::Follower => (Style::Follower, format!("{term}")),
                    Role::PreCandidate => (Style::PreCandidate, format!("pre {term}")),
                    Role::Candidate => (Style::Candidate, format!("cand {term}")),
                    Role::Leader => (Style::Leader, format!("leader {term}")),
                };
                // A follower that learns its leader stays one band.
                if let Some(open) = lane.role.as_mut().filter(|open| open.style == style && open.label == label) {
                    open.trace.push('\n');
                    open.trace.push_str(&super::trace_line(event));
                    return;
                }
                if let Some(open) = lane.role.take() {
                    lane.roles.push(open.close(at, Some(super::trace_line(event))));
                }
                lane.role = Some(Open::new(event, style, label));
            }
            EventKind::Crashed { actor: Actor::Server(node) } => {
                let lane = self.lanes.entry(*node).or_default();
                if let Some(open) = lane.role.take() {
                    lane.roles.push(open.close(at, Some(super::trace_line(event))));
                }
                lane.down = Some(Open::new(event, Style::Down, "down".into()));
            }
            EventKind::Restarted { actor: Actor::Server(node) } => {
                let lane = self.lanes.entry(*node).or_default();
                if let Some(open) = lane.down.take() {
                    lane.roles.push(open.close(at, Some(super::trace_line(event))));
                }
            }
            EventKind::Paused { actor: Actor::Server(node) } => {
                self.lanes.entry(*node).or_default().paused = Some(Open::new(event, Style::Paused, "paused".into()));
            }
            EventKind::Resumed { actor: Actor::Server(node) } => {
                let lane = self.lanes.entry(*node).or_default();
                if let Some(open) = lane.paused.take() {
                    let item = open.close(at, Some(super::trace_line(event)));
                    lane.backgrounds.push(Item { label: String::new(), ..item.clone() });
                    lane.events.push(item);
                }
            }
            EventKind::NodeRestored { node, backup_at_us } => {
                let label = format!("restored ({}s)", backup_at_us / 1_000_000);
                let item = Item::mark(at, Style::Restored, label, super::trace_line(event));
                self.lanes.entry(*node).or_default().events.push(item);
            }
            EventKind::Clock { actor: Actor::Server(node), local_us, rate_ppm, .. } => {
                // Offsets count from the clock's first reading: a clock's
                // epoch is arbitrary, its drift and steps are what matter.
                let lane = self.lanes.entry(*node).or_default();
                let base = *lane.clock_base.get_or_insert(i128::from(*local_us) - i128::from(at));
                let before = lane.clock.local_at(at) - i128::from(at) - base;
                lane.clock.set(at, *local_us, *rate_ppm);
                let after = lane.clock.local_at(at) - i128::from(at) - base;
                if !lane.clock_points.is_empty() {
                    lane.clock_points.push((at, clamp(before)));
                }
                lane.clock_points.push((at, clamp(after)));
            }
            EventKind::Crashed { actor: Actor::Resource } => {
                self.resource_down = Some(Open::new(event, Style::Down, "down".into()));
            }
            EventKind::Restarted { actor: Actor::Resource } => {
                if let Some(open) = self.resource_down.take() {
                    let item = open.close(at, Some(super::trace_line(event)));
                    self.resource_backgrounds.push(item);
                }
            }
            EventKind::WriteDone { token, verdict, .. } => {
                let style =
                    if *verdict == WriteVerdict::Accepted { Style::WriteAccepted } else { Style::WriteRejected };
                let label = format!("{token} {}", verdict_word(verdict));
                self.resource.push(Item::mark(at, style, label, super::trace_line(event)));
            }
            EventKind::Fault { fault } => self.fault(event, fault),
            EventKind::Churn(churn) => self.churn(event, churn),
            EventKind::Healed => {
                self.heal(event);
                self.faults.push(Item::mark(at, Style::Healed, "healed".into(), super::trace_line(event)));
            }
            EventKind::ResourceRestored { backup_at_us, .. } => {
                let label = format!("restored ({}s)", backup_at_us / 1_000_000);
                self.resource.push(Item::mark(at, Style::Restored, label, super::trace_line(event)));
            }
            EventKind::FloorRaised { token_last, .. } => {
                let label = format!("floor {token_last}");
                self.resource.push(Item::mark(at, Style::Restored, label, super::trace_line(event)));
            }
            EventKind::ClusterRestored { epoch, .. } => {
                let label = format!("cluster restored ({epoch})");
                self.faults.push(Item::mark(at, Style::ClusterEvent, label, super::trace_line(event)));
            }
            _ => {}
        }
    }

    fn fault(&mut self, event: &Event, fault: &Fault) {
        let at = event.at_us;
        let mark = |style: Style, label: &str| Item::mark(at, style, label.to_string(), super::trace_line(event));
        match fault {
            Fault::Partition { sides } => {
                let cut = sides.iter().flatten().map(|addr| addr_lane(*addr)).collect();
                self.net.push((Open::new(event, Style::NetFault, "partition".into()), cut));
            }
            Fault::OneWay { from, to } => {
                let label = format!("{from}->{to} cut");
                self.net.push((Open::new(event, Style::NetFault, label), vec![addr_lane(*from), addr_lane(*to)]));
            }
            Fault::IsolateLeader | Fault::IsolateLeaderWith { .. } => {
                let mut cut: Vec<LaneId> = self.leader.iter().map(|(_, node)| LaneId::Server(*node)).collect();
                if let Fault::IsolateLeaderWith { clients, .. } = fault {
                    cut.extend(clients.iter().map(|client| LaneId::Client(*client)));
                }
                let who = self.leader.map(|(_, node)| node.to_string()).unwrap_or_else(|| "leader".into());
                self.net.push((Open::new(event, Style::NetFault, format!("isolate {who}")), cut));
            }
            Fault::CutClient { client } => {
                let label = format!("cut {client}");
                self.net.push((Open::new(event, Style::NetFault, label), vec![LaneId::Client(*client)]));
            }
            Fault::Heal => self.heal(event),
            Fault::LeaderChurn { for_ms, .. } => {
                let text = super::trace_line(event);
                self.faults.push(Item::span(at, at + for_ms * 1_000, Style::Churn, "leader churn".into(), text));
            }
            Fault::BackupCluster => self.faults.push(mark(Style::ClusterEvent, "cluster backup")),
            Fault::BackupResource => self.resource.push(mark(Style::ClusterEvent, "backup")),
            Fault::RestoreCluster => {} // The `ClusterRestored` event that follows is drawn.
            Fault::BackupNode { node } => {
                self.lanes.entry(*node).or_default().events.push(mark(Style::ClusterEvent, "backup"));
            }
            Fault::ClockStep { actor: Actor::Server(node), delta_ms } => {
                let item = mark(Style::ClockStep, &format!("clock {delta_ms:+}ms"));
                self.lanes.entry(*node).or_default().events.push(item);
            }
            Fault::DiskStall { node, fsync_ms } => {
                let lane = self.lanes.entry(*node).or_default();
                if let Some(open) = lane.stall.take() {
                    lane.events.push(open.close(at, Some(super::trace_line(event))));
                }
                if *fsync_ms > 0 {
                    lane.stall = Some(Open::new(event, Style::DiskStall, format!("fsync {fsync_ms}ms")));
                }
            }
            _ => {} // Crashes, restarts, pauses and clock rates are drawn from their own events.
        }
    }

    fn churn(&mut self, event: &Event, churn: &ChurnEvent) {
        match churn {
            ChurnEvent::Struck { node, crashed: false, .. }
            | ChurnEvent::Figure8SuccessorUnplugged { successor: node, .. }
            | ChurnEvent::Figure8Struck { leader: node, .. } => {
                self.unplugged.insert(*node, Open::new(event, Style::NetFault, format!("unplug {node}")));
            }
            // A crash is drawn from its `Crashed` event.
            // The reactive families' crashes, pauses and restores are drawn from their own events.
            ChurnEvent::Struck { .. }
            | ChurnEvent::AckStruck { .. }
            | ChurnEvent::RenewStruck { .. }
            | ChurnEvent::RenewalHeld { .. }
            | ChurnEvent::GrantStruck { .. }
            | ChurnEvent::VoteSplit { .. }
            | ChurnEvent::VoteStruck { .. }
            | ChurnEvent::FenceStruck { .. }
            | ChurnEvent::AmnesiaArmed { .. }
            | ChurnEvent::AmnesiaStruck { .. }
            | ChurnEvent::Reconnected { .. }
            | ChurnEvent::Figure8Stranded { .. } => {}
            ChurnEvent::PluggedBack { node } => {
                if let Some(open) = self.unplugged.remove(node) {
                    self.close_net(open, vec![LaneId::Server(*node)], event.at_us, Some(super::trace_line(event)));
                }
            }
        }
    }

    fn heal(&mut self, event: &Event) {
        for (open, cut) in std::mem::take(&mut self.net) {
            self.close_net(open, cut, event.at_us, Some(super::trace_line(event)));
        }
    }

    fn close_net(&mut self, open: Open, cut: Vec<LaneId>, end_us: u64, end_trace: Option<String>) {
        let item = open.close(end_us, end_trace);
        for lane in cut {
            let band = Item { style: Style::Cut, label: String::new(), ..item.clone() };
            self.cuts.entry(lane).or_default().push(band);
        }
        self.faults.push(item);
    }

    /// Closes everything still open at the end of the run.
    pub fn finish(&mut self, end_us: u64) {
        for lane in self.lanes.values_mut() {
            if let Some(open) = lane.role.take() {
                lane.roles.push(open.close(end_us, None));
            }
            if let Some(open) = lane.down.take() {
                lane.roles.push(open.close(end_us, None));
            }
            if let Some(open) = lane.paused.take() {
                let item = open.close(end_us, None);
                lane.backgrounds.push(Item { label: String::new(), ..item.clone() });
                lane.events.push(item);
            }
            if let Some(open) = lane.stall.take() {
                lane.events.push(open.close(end_us, None));
            }
            let offset = lane.clock.local_at(end_us) - i128::from(end_us) - lane.clock_base.unwrap_or(0);
            if !lane.clock_points.is_empty() {
                lane.clock_points.push((end_us, clamp(offset)));
            }
        }
        for (open, cut) in std::mem::take(&mut self.net) {
            self.close_net(open, cut, end_us, None);
        }
        for (node, open) in std::mem::take(&mut self.unplugged) {
            self.close_net(open, vec![LaneId::Server(node)], end_us, None);
        }
        if let Some(open) = self.resource_down.take() {
            self.resource_backgrounds.push(open.close(end_us, None));
        }
    }
}

fn clamp(offset: i128) -> i64 {
    i64::try_from(offset).unwrap_or(if offset < 0 { i64::MIN } else { i64::MAX })
}

fn addr_lane(addr: Addr) -> LaneId {
    match addr {
        Addr::Server(node) => LaneId::Server(node),
        Addr::Client(client) => LaneId::Client(client),
        Addr::Resource => LaneId::Resource,
    }
}

/// `ok`, `stale`, `equal`, `dup`: a verdict in one short word.
pub fn verdict_word(verdict: &WriteVerdict) -> &'static str {
    match verdict {
        WriteVerdict::Accepted => "ok",
        WriteVerdict::RejectedStale { .. } => "stale",
        WriteVerdict::RejectedEqualToken { .. } => "equal",
        WriteVerdict::Duplicate { .. } | WriteVerdict::DuplicateForgotten => "dup",
        WriteVerdict::Unavailable => "wait",
    }
}
