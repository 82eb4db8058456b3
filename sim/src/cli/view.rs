//! How `replay` and `run` show a run's trace: which events are told
//! (`--log`, `--why`, `FENCESIM_LOG`), which lines are kept (`--actor`,
//! `--key`, `--from`, `--to`), as text or as the JSON `trace` array.

use crate::cli::args::{InputError, TraceArgs};
use crate::history::History;
use crate::model::Model;
use crate::run::explain;
use crate::run::filter::TraceFilter;
use crate::run::log::{LogSettings, Record, LOG_ENV};
use crate::run::seed::Outcome;

/// A trace to show: what to tell and what to keep of it.
pub struct TraceView {
    pub log: LogSettings,
    filter: TraceFilter,
}

impl TraceView {
    /// `None` when no trace is wanted: `--trace` not given and no filter,
    /// `--log` or `--why` that implies it. Bad values are input errors.
    pub fn from_args(trace: bool, args: &TraceArgs, model: &Model) -> Result<Option<TraceView>, InputError> {
        let implied = !args.actors.is_empty()
            || args.key.is_some()
            || args.from.is_some()
            || args.to.is_some()
            || args.log.is_some()
            || args.why;
        if !trace && !implied {
            return Ok(None);
        }
        let filter = TraceFilter::new(&args.actors, args.key.as_deref(), args.from, args.to, model)?;
        let user = match &args.log {
            Some(log) => Some(log.clone()),
            None => std::env::var(LOG_ENV).ok(),
        };
        let log = LogSettings::new(user.as_deref(), args.why)?;
        Ok(Some(TraceView { log, filter }))
    }

    /// The records this view keeps of a run's.
    pub fn keep(&self, records: Vec<Record>, history: &History) -> Vec<Record> {
        self.filter.apply(records, history)
    }

    /// Prints the kept records as trace lines. A filtered trace first says
    /// how much of the whole it shows; a whole trace also tells each of the
    /// checker's findings right after the events of its instant (a filtered
    /// one leaves them to the end, where every view lists them).
    pub fn print(&self, records: Vec<Record>, outcome: &Outcome) {
        let all = records.len();
        let kept = self.keep(records, &outcome.history);
        let findings = if self.filter.is_active() {
            crate::outln!("trace: {} of {all} lines kept by the filters", kept.len());
            Vec::new()
        } else {
            explain::findings(outcome)
        };
        for line in explain::with_findings(kept.iter().map(|r| (r.at_us, r.line())), findings) {
            crate::outln!("{line}");
        }
    }
}
