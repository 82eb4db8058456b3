//! Trace filters (`--actor`, `--key`, `--from`, `--to`): a failure on one
//! screen instead of a grep through thousands of lines.
//!
//! A filtered trace keeps what explains the chosen actors and key: with
//! `--actor`, every line that involves one of them (its own events, a reply
//! to it, a request to it, a fault that names it); with `--key`, every line
//! about the key and the key-less lines (roles, crashes, clocks, pauses) of
//! every actor that acted on the key — lines about other keys go. Faults
//! that name nobody (a heal, a cluster restore) are always kept: they
//! change everything. The caller keeps the VIOLATION and trace-hash lines.

use crate::history::{Actor, History};
use crate::model::Model;
use crate::run::log::Record;
use fencelock::Key;
use std::collections::BTreeSet;

/// What a filtered trace keeps; the default keeps everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceFilter {
    /// Actor names as the trace prints them (`n0`, `c1`, `db`, `sim`); empty: all.
    actors: BTreeSet<String>,
    key: Option<Key>,
    from_us: Option<u64>,
    to_us: Option<u64>,
}

impl TraceFilter {
    /// Checks each value against `model`: an actor or key the model does not
    /// have, or a window that ends before it starts, is an error naming it.
    pub fn new(
        actors: &[String],
        key: Option<&str>,
        from_ms: Option<u64>,
        to_ms: Option<u64>,
        model: &Model,
    ) -> Result<TraceFilter, String> {
        let known_actors = actor_names(model);
        let mut chosen = BTreeSet::new();
        for name in actors {
            if !known_actors.contains(name) {
                return Err(format!(
                    "--actor `{name}` is not an actor of this model (one of: {})",
                    known_actors.join(", ")
                ));
            }
            chosen.insert(name.clone());
        }
        let key = match key {
            None => None,
            Some(wanted) => {
                let names: Vec<String> = (0..model.keys).map(Model::key_name).collect();
                // `B-1042` is enough: the part after the last `/`.
                let found = names.iter().find(|name| *name == wanted || name.rsplit('/').next() == Some(wanted));
                match found {
                    Some(name) => Some(Key::new(name.as_str())),
                    None => {
                        return Err(format!(
                            "--key `{wanted}` is not a key of this model (one of: {})",
                            names.join(", ")
                        ))
                    }
                }
            }
        };
        if let (Some(from), Some(to)) = (from_ms, to_ms) {
            if from > to {
                return Err(format!("--from {from} is after --to {to}: the window would be empty"));
            }
        }
        let us = |ms: u64| ms.saturating_mul(1_000);
        Ok(TraceFilter { actors: chosen, key, from_us: from_ms.map(us), to_us: to_ms.map(us) })
    }

    /// Whether the filter drops anything at all.
    pub fn is_active(&self) -> bool {
        *self != TraceFilter::default()
    }

    /// The records the filter keeps, in order. `history` is the run's: it
    /// says which key a reply is about and which actors acted on the key.
    pub fn apply(&self, records: Vec<Record>, history: &History) -> Vec<Record> {
        if !self.is_active() {
            return records;
        }
        let facts = Facts::of(history);
        let key_actors: BTreeSet<String> = match &self.key {
            None => BTreeSet::new(),
            Some(key) => history
                .events()
                .iter()
                .filter(|event| facts.key(event.seq).as_ref() == Some(key))
                .flat_map(|event| event.kind.actors())
                .map(|actor| actor.to_string())
                .collect(),
        };
        records.into_iter().filter(|record| self.keeps(record, &facts, &key_actors)).collect()
    }

    fn keeps(&self, record: &Record, facts: &Facts, key_actors: &BTreeSet<String>) -> bool {
        if self.from_us.is_some_and(|from| record.at_us < from) || self.to_us.is_some_and(|to| record.at_us > to) {
            return false;
        }
        let (involved, key) = match record.seq {
            Some(seq) => (facts.actors(seq), facts.key(seq)),
            // A protocol event: the server that told it and the peer or client it names.
            None => {
                let mut involved = vec![record.actor.clone()];
                involved.extend(["from", "client"].iter().filter_map(|name| record.field(name)).map(str::to_string));
                (involved, record.field("key").map(Key::new))
            }
        };
        let global = involved.iter().all(|name| name == "sim");
        if !self.actors.is_empty() && !global && !involved.iter().any(|name| self.actors.contains(name)) {
            return false;
        }
        match (&self.key, key) {
            (None, _) => true,
            (Some(wanted), Some(key)) => *wanted == key,
            (Some(_), None) => global || involved.iter().any(|name| key_actors.contains(name)),
        }
    }
}

/// Every actor name a trace line of `model` can show.
pub fn actor_names(model: &Model) -> Vec<String> {
    let servers = (0..model.nodes).map(|n| Actor::Server(fencelock::NodeId(n)));
    let clients = (0..model.clients).map(|c| Actor::Client(fencelock::ClientId(c)));
    let mut names: Vec<String> = servers.chain(clients).chain([Actor::Resource]).map(|a| a.to_string()).collect();
    names.push("sim".to_string());
    names
}

/// What the filter needs of each history event: who it involves and its key.
struct Facts {
    actors: Vec<Vec<String>>,
    keys: Vec<Option<Key>>,
}

impl Facts {
    fn of(history: &History) -> Facts {
        use crate::history::EventKind as K;
        let requests = history.requests_keys();
        let mut facts = Facts { actors: Vec::new(), keys: Vec::new() };
        for event in history.events() {
            let mut actors: Vec<String> = event.kind.actors().iter().map(Actor::to_string).collect();
            // The simulator's own lines (faults, churn, heal) are also `sim`'s.
            if matches!(event.kind, K::Healed | K::Fault { .. } | K::Churn(_) | K::ClusterRestored { .. }) {
                actors.push("sim".to_string());
            }
            let key = match &event.kind {
                K::Replied { client, request, .. }
                | K::Answered { client, request, .. }
                | K::GaveUp { client, request, .. } => requests.get(&(*client, *request)).cloned(),
                kind => kind.key().cloned(),
            };
            facts.actors.push(actors);
            facts.keys.push(key);
        }
        facts
    }

    fn actors(&self, seq: u64) -> Vec<String> {
        self.actors.get(seq as usize).cloned().unwrap_or_default()
    }

    fn key(&self, seq: u64) -> Option<Key> {
        self.keys.get(seq as usize).cloned().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::TraceFilter;
    use crate::model::Model;

    #[test]
    fn values_are_checked_against_the_model() {
        let model = Model { nodes: 3, clients: 2, keys: 2, ..Model::default() };
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(TraceFilter::new(&names(&["n2", "c1", "db", "sim"]), None, None, None, &model).is_ok());
        let error = TraceFilter::new(&names(&["n3"]), None, None, None, &model).unwrap_err();
        assert!(error.contains("`n3`") && error.contains("n0, n1, n2, c0, c1, db, sim"), "{error}");
        let short = TraceFilter::new(&[], Some("B-1043"), None, None, &model).unwrap();
        let long = TraceFilter::new(&[], Some("invoice/B-1043"), None, None, &model).unwrap();
        assert_eq!(short, long);
        assert!(TraceFilter::new(&[], Some("B-1044"), None, None, &model).is_err(), "the model has two keys");
        assert!(TraceFilter::new(&[], None, Some(5), Some(5), &model).is_ok(), "a one-millisecond window");
        assert!(TraceFilter::new(&[], None, Some(6), Some(5), &model).is_err());
        assert!(!TraceFilter::new(&[], None, None, None, &model).unwrap().is_active());
    }
}
