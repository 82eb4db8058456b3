//! How a traced run is told: a `tracing` subscriber for one run's thread,
//! filtered by an `EnvFilter` (`--log`, `--why`, `FENCESIM_LOG`), whose one
//! layer keeps every event it lets through, in order, in simulated time.
//!
//! Every history event is told (target `fencesim::history`, level INFO, in a
//! `node{name=…}` span: `History::record`); the protocol in `fencelock` tells
//! its decisions at DEBUG, inside madsim's `node{name=…}` span of the server
//! that made them. The kept events are printed as trace lines (a history
//! event's line is exactly `trace::line` of it) or as a JSON array. The trace
//! hash is computed over the history alone, so none of this can change it.
//! **Architecture Invariant:** nothing here reads a wall clock: an event's
//! time is its `at_us` field, or else the simulation's own clock.

use serde::Serialize;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::subscriber::NoSubscriber;
use tracing::{Dispatch, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The target every history event is told under.
pub const HISTORY_TARGET: &str = "fencesim::history";
/// What `--trace` prints when nothing else is asked for: the history.
const DEFAULT_DIRECTIVES: &str = "fencesim=info";
/// What `--why` adds: the protocol's decisions.
const WHY_DIRECTIVES: &str = "fencelock=debug";
/// madsim's per-node span (level ERROR): kept enabled so an event of the
/// protocol knows which server told it, whatever the user's filter says.
const NODE_SPAN_DIRECTIVES: &str = "madsim::sim::task=error";
/// The environment variable read when `--log` is not given.
pub const LOG_ENV: &str = "FENCESIM_LOG";

/// A dispatch interested in nothing, registered for the rest of the process
/// before the first told run's. tracing-core caches a callsite's interest
/// when a thread first reaches it, and while the process has exactly one
/// dispatch it asks that thread's own default instead of the dispatch
/// (tokio-rs/tracing#3611): a seed run untold beside a told one (`cargo
/// test`'s threads) cached "never" for the history's events, and the told
/// run then kept none of them. With two, it asks every dispatch there is.
static BESIDE: OnceLock<Dispatch> = OnceLock::new();

/// Which events a traced run keeps: `EnvFilter` directives.
#[derive(Clone, Debug)]
pub struct LogSettings {
    directives: String,
}

impl LogSettings {
    /// The history alone: today's `--trace`.
    pub fn history() -> LogSettings {
        LogSettings { directives: format!("{DEFAULT_DIRECTIVES},{NODE_SPAN_DIRECTIVES}") }
    }

    /// The history plus `user`'s directives (`--log`, else `FENCESIM_LOG`)
    /// and, with `why`, the protocol's debug events. A directive the user
    /// gives overrides the default for its target (`fencesim::history=off`).
    pub fn new(user: Option<&str>, why: bool) -> Result<LogSettings, String> {
        let mut directives = Self::history().directives;
        if why {
            directives.push(',');
            directives.push_str(WHY_DIRECTIVES);
        }
        if let Some(user) = user.map(str::trim).filter(|text| !text.is_empty()) {
            // Checked alone, so the error names what the user wrote.
            EnvFilter::builder()
                .parse(user)
                .map_err(|e| format!("--log `{user}` is not a filter (e.g. `fencelock=debug`): {e}"))?;
            directives.push(',');
            directives.push_str(user);
        }
        Ok(LogSettings { directives })
    }

    /// A subscriber for one run's thread and the list it fills.
    pub fn dispatch(&self) -> (Dispatch, Told) {
        BESIDE.get_or_init(|| Dispatch::new(NoSubscriber::default()));
        let filter = EnvFilter::builder().parse(&self.directives).expect("directives are checked when built");
        let told = Told::default();
        let subscriber = tracing_subscriber::registry().with(filter).with(Keeper { told: told.clone() });
        (Dispatch::new(subscriber), told)
    }
}

/// The events a run told, shared between its thread and the caller.
#[derive(Clone, Debug, Default)]
pub struct Told(Arc<Mutex<Vec<Record>>>);

impl Told {
    pub fn take(&self) -> Vec<Record> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn push(&self, record: Record) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(record);
    }
}

/// One told event: `replay --trace --json` prints these as its `trace` array.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Record {
    /// The history event's position; `None` for an event that is not history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Simulated time, microseconds.
    pub at_us: u64,
    pub level: String,
    pub target: String,
    /// Who told it: `n2`, `c1`, `db`, `sim` (`?` when no node span says).
    pub actor: String,
    pub message: String,
    /// The event's other fields, in the order it gave them.
    pub fields: Vec<(String, String)>,
}

impl Record {
    /// A history event's line is `trace::line` of it; any other event's
    /// line shows its level, target and fields: `  DEBUG fencelock::raft::election: vote refused … from=n2`.
    pub fn line(&self) -> String {
        let time = format!("{:>7}.{:03}ms", self.at_us / 1_000, self.at_us % 1_000);
        if self.seq.is_some() {
            return format!("{time}  {:<4}  {}", self.actor, self.message);
        }
        let mut line = format!("{time}  {:<4}  {} {}: {}", self.actor, self.level, self.target, self.message);
        for (name, value) in &self.fields {
            line.push_str(&format!(" {name}={value}"));
        }
        line
    }

    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// The layer that keeps every event the filter lets through.
struct Keeper {
    told: Told,
}

/// The `name` of a `node` span (ours or madsim's), kept in the span's extensions.
struct NodeName(String);

impl<S> Layer<S> for Keeper
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "node" {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let (Some(name), Some(span)) = (fields.take("name"), ctx.span(id)) {
            span.extensions_mut().insert(NodeName(name));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let seq = fields.take("seq").and_then(|text| text.parse().ok());
        let at_us = fields.take("at_us").and_then(|text| text.parse().ok()).unwrap_or_else(simulated_us);
        let actor = fields.take("actor").or_else(|| {
            ctx.event_scope(event)?
                .find_map(|span| span.extensions().get::<NodeName>().map(|NodeName(name)| name.clone()))
        });
        let metadata = event.metadata();
        self.told.push(Record {
            seq,
            at_us,
            level: metadata.level().to_string(),
            target: metadata.target().to_string(),
            actor: actor.unwrap_or_else(|| "?".to_string()),
            message: fields.take("message").unwrap_or_default(),
            fields: fields.0,
        });
    }
}

/// Now in the simulation (0 outside one): the time of an event that does not carry its own.
fn simulated_us() -> u64 {
    madsim::time::TimeHandle::try_current()
        .map_or(0, |time| u64::try_from(time.elapsed().as_micros()).unwrap_or(u64::MAX))
}

/// An event's or span's fields as text, in order.
#[derive(Default)]
struct Fields(Vec<(String, String)>);

impl Fields {
    fn take(&mut self, name: &str) -> Option<String> {
        let at = self.0.iter().position(|(n, _)| n == name)?;
        Some(self.0.remove(at).1)
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_string(), value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.push((field.name().to_string(), format!("{value:?}")));
    }
}

#[cfg(test)]
mod tests {
    use super::LogSettings;
    use crate::faults;
    use crate::model::Model;
    use crate::run::seed::{run_plan, run_plan_told};
    use crate::run::trace;

    /// Log settings never change a run: the trace hash and the default trace
    /// text are the same untold, told as `--trace` tells it, and told with
    /// every debug event of every crate.
    #[test]
    fn telling_changes_neither_the_run_nor_the_trace() {
        let model = Model { safety_ms: 4_000, variant: fencelock::Variant::SinkUnfenced, ..Model::default() };
        let seed = 2;
        let untold = run_plan(seed, &model, faults::plan(&model, seed));
        let history_lines: Vec<String> = untold.history.events().iter().map(trace::line).collect();
        assert!(history_lines.len() > 100, "a run worth tracing");

        let (told, records) = run_plan_told(seed, &model, faults::plan(&model, seed), &LogSettings::history());
        assert_eq!(told.trace_hash, untold.trace_hash);
        let lines: Vec<String> = records.iter().map(|record| record.line()).collect();
        assert_eq!(lines, history_lines, "the default trace is the history's lines, byte for byte");

        let debug = LogSettings::new(Some("debug"), true).expect("a filter");
        let (told, records) = run_plan_told(seed, &model, faults::plan(&model, seed), &debug);
        assert_eq!(told.trace_hash, untold.trace_hash, "debug logging does not change the hash");
        assert_eq!(told.messages, untold.messages);
        let (history, others): (Vec<_>, Vec<_>) = records.iter().partition(|record| record.seq.is_some());
        let lines: Vec<String> = history.iter().map(|record| record.line()).collect();
        assert_eq!(lines, history_lines, "nor the history's lines among the debug ones");
        assert!(
            others.iter().any(|record| record.target.starts_with("fencelock::")),
            "the protocol told its decisions"
        );
        assert!(others.windows(2).all(|pair| pair[0].at_us <= pair[1].at_us), "in simulated time");
    }

    #[test]
    fn a_bad_filter_is_refused_with_what_the_user_wrote() {
        let error = LogSettings::new(Some("fencelock=loud"), false).unwrap_err();
        assert!(error.contains("fencelock=loud"), "{error}");
        assert!(LogSettings::new(Some("fencelock::raft=debug,[node{name=n1}]=debug"), true).is_ok());
    }
}
