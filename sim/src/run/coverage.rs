//! The coverage probes a run's history shows (`fencelock::probe`, those
//! seen by the simulator): situations visible only across processes — two
//! candidates of one term, a leader's clock stepping back, what the
//! resource was sent and how it answered, restores. The servers' own
//! probes and the disks' come with the run's record; this adds the rest.

use crate::history::{Actor, Event, EventKind, WritePath, WriteVerdict};
use fencelock::raft::Role;
use fencelock::{Key, NodeId, Probe, ProbeSet, Term, Token};
use std::collections::BTreeMap;

/// A clock's mapping from its last `Clock` event.
#[derive(Clone, Copy)]
struct Mapping {
    at_us: u64,
    local_us: u64,
    rate_ppm: i64,
}

impl Mapping {
    /// The local time this mapping reads at true time `at_us`.
    fn local_at(self, at_us: u64) -> i128 {
        let elapsed = i128::from(at_us.saturating_sub(self.at_us));
        i128::from(self.local_us) + elapsed + elapsed * i128::from(self.rate_ppm) / 1_000_000
    }
}

/// The probes a history shows, read as it is recorded.
#[derive(Default)]
pub struct Watch {
    probes: ProbeSet,
    candidates: BTreeMap<Term, NodeId>,
    roles: BTreeMap<NodeId, Role>,
    clocks: BTreeMap<Actor, Mapping>,
    accepted: BTreeMap<Key, (Token, WritePath)>,
}

impl Watch {
    pub fn observe(&mut self, event: &Event) {
        let probes = &mut self.probes;
        match &event.kind {
            EventKind::Role { node, role, term, .. } => {
                self.roles.insert(*node, *role);
                // Once two candidates of one term were seen, the terms are of no more use.
                let wanted = !probes.contains(Probe::TwoCandidatesOneTerm);
                if wanted && *role == Role::Candidate && *self.candidates.entry(*term).or_insert(*node) != *node {
                    probes.insert(Probe::TwoCandidatesOneTerm);
                    self.candidates.clear();
                }
            }
            EventKind::Clock { actor, local_us, rate_ppm, .. } => {
                let now = Mapping { at_us: event.at_us, local_us: *local_us, rate_ppm: *rate_ppm };
                let leads = matches!(actor, Actor::Server(node) if self.roles.get(node) == Some(&Role::Leader));
                if let Some(before) = self.clocks.insert(*actor, now) {
                    if leads && i128::from(*local_us) < before.local_at(event.at_us) {
                        probes.insert(Probe::ClockStepBackOnLeader);
                    }
                }
            }
            EventKind::WriteDone { key, token, path, verdict, .. } => match verdict {
                WriteVerdict::Accepted => {
                    if let Some((last_token, last_path)) = self.accepted.insert(key.clone(), (*token, *path)) {
                        if *path != last_path && *token > last_token {
                            probes.insert(Probe::SecondPathHigherToken);
                        }
                    }
                }
                WriteVerdict::RejectedStale { .. } => probes.insert(Probe::StaleWriteRejected),
                WriteVerdict::Unavailable => probes.insert(Probe::WriteRefusedUntilFloor),
                // An equal token from another holder needs two holders of
                // one token, which only an unsafe variant makes.
                WriteVerdict::RejectedEqualToken { .. }
                | WriteVerdict::Duplicate { .. }
                | WriteVerdict::DuplicateForgotten => {}
            },
            EventKind::ResourceRestored { restore, .. } if *restore >= 2 => probes.insert(Probe::ResourceRestoredTwice),
            EventKind::ClusterRestored { .. } => probes.insert(Probe::ClusterRestored),
            EventKind::NodeRestored { .. } => probes.insert(Probe::NodeRestored),
            _ => {}
        }
    }

    /// The probes the events so far showed.
    pub fn probes(&self) -> ProbeSet {
        self.probes
    }
}

#[cfg(test)]
mod tests {
    use super::Watch;
    use crate::history::{Event, EventKind};
    use fencelock::raft::Role;
    use fencelock::{NodeId, Probe, Term};

    fn candidate(seq: u64, node: u8, term: u64) -> Event {
        let kind = EventKind::Role { node: NodeId(node), role: Role::Candidate, term: Term(term), leader: None };
        Event { seq, at_us: seq * 1_000, kind }
    }

    #[test]
    fn the_terms_of_candidates_are_kept_only_until_two_share_one() {
        let mut watch = Watch::default();
        for term in 1..=10_000 {
            watch.observe(&candidate(term, (term % 5) as u8, term));
        }
        assert!(!watch.probes().contains(Probe::TwoCandidatesOneTerm));
        assert_eq!(watch.candidates.len(), 10_000, "until then any term may get its second candidate");
        watch.observe(&candidate(10_001, 4, 7));
        assert!(watch.probes().contains(Probe::TwoCandidatesOneTerm));
        for term in 10_001..=20_000 {
            watch.observe(&candidate(term + 1, (term % 5) as u8, term));
        }
        assert!(watch.candidates.is_empty(), "the probe is reached: no term is kept");
    }
}
