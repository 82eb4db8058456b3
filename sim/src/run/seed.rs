//! Running seeds: each on a fresh OS thread with a fresh madsim runtime
//! (std's HashMap seeds are per thread; MADSIM.md), then checking its history.

use crate::checker::{self, CheckConfig, Counters, Exposure, Property, Undecided, Violation};
use crate::faults::{self, FaultEvent};
use crate::history::{Event, History, Tap};
use crate::machine::net::NetStats;
use crate::model::Model;
use crate::run::figures::{self, Histogram};
use crate::run::log::{LogSettings, Record};
use crate::run::{coverage, trace};
use crate::world::{self, salvage, Plan, RunRecord};
use fencelock::ProbeSet;
use serde::Serialize;
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use tracing::Dispatch;

/// Everything one run produced, as reported by `replay --json`.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub seed: u64,
    pub variant: String,
    pub ok: bool,
    pub violations: Vec<Violation>,
    pub trace_hash: String,
    pub sim_ms: u64,
    pub messages: u64,
    pub grants: u64,
    pub writes_accepted: u64,
    pub stale_writes_rejected: u64,
    pub elections: u64,
    pub first_leader_ms: Option<u64>,
    pub lease_exposures: u64,
    /// Each lease exposure explained: the beliefs, their window, what excused it.
    pub exposures: Vec<Exposure>,
    /// The keys `linearizable` could not decide (absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub undecided: Vec<Undecided>,
    #[serde(skip)]
    pub counters: Counters,
    /// Every event, when the run kept them (`run_seed`). A hunt's run
    /// (`run_seed_streamed`) streamed them: its `len()` counts them, its
    /// `events()` panics.
    #[serde(skip)]
    pub history: History,
    /// Events recorded (the trace's lines), kept or not.
    #[serde(skip)]
    pub events: u64,
    /// Acquire latency, first send to `Granted`, microseconds of true time.
    #[serde(skip)]
    pub acquire_us: Histogram,
    /// The longest stretch any key had no committed holder while a client waited for it.
    #[serde(skip)]
    pub unheld_waiting_us_max: u64,
    /// The faults the run was given to play (`run_seed`, `run_plan`). Empty
    /// for a hunt's run (`run_seed_streamed`), which drew them as it played
    /// them: `faults::plan(model, seed)` draws the same plan again.
    #[serde(skip)]
    pub plan: Vec<FaultEvent>,
    /// The coverage probes the run reached (`fencelock::probe`).
    #[serde(skip)]
    pub probes: ProbeSet,
}

/// Runs one seed of `model` on a fresh thread and checks it. A panic inside
/// the simulation is reported as a violation named `panic`, never swallowed.
/// With `model.swarm`, the seed first draws its model (`faults::swarm`).
pub fn run_seed(seed: u64, model: &Model) -> Outcome {
    let model = &faults::swarm::resolve(model, seed);
    let plan = faults::plan(model, seed);
    run_plan(seed, model, plan)
}

/// Runs one seed with an explicit fault schedule (a saved or edited plan).
pub fn run_plan(seed: u64, model: &Model, plan: Vec<FaultEvent>) -> Outcome {
    run_plan_with(seed, model, plan, None)
}

/// `run_seed`, telling the run to `tracing` (`run::log`): the outcome and
/// the events `log` kept. The run and its trace hash are the same as untold.
pub fn run_seed_told(seed: u64, model: &Model, log: &LogSettings) -> (Outcome, Vec<Record>) {
    let model = &faults::swarm::resolve(model, seed);
    let plan = faults::plan(model, seed);
    run_plan_told(seed, model, plan, log)
}

/// `run_plan`, telling the run to `tracing`.
pub fn run_plan_told(seed: u64, model: &Model, plan: Vec<FaultEvent>, log: &LogSettings) -> (Outcome, Vec<Record>) {
    let (dispatch, told) = log.dispatch();
    let outcome = run_plan_with(seed, model, plan, Some(dispatch));
    (outcome, told.take())
}

/// With a `dispatch`, the run's thread tells its events to it (and only
/// that thread: seeds run in parallel elsewhere stay untold).
fn run_plan_with(seed: u64, model: &Model, plan: Vec<FaultEvent>, dispatch: Option<Dispatch>) -> Outcome {
    run_recording(seed, model, Plan::Given(plan), dispatch, Keep::All)
}

/// Whether a run keeps its events for the caller once judged.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Every event, for a trace, a timeline or a shrink.
    All,
    /// None: the run is judged as it goes and keeps only what its own
    /// readers have yet to read, so its memory does not grow with its length.
    Nothing,
}

/// `run_seed` for a hunt: the run is judged as it is recorded, keeps no
/// history (`Outcome::history` is empty) and draws its faults as it plays
/// them, keeping none (`Outcome::plan` is empty); everything else is as
/// `run_seed` gives it, trace hash included.
pub fn run_seed_streamed(seed: u64, model: &Model) -> Outcome {
    let model = &faults::swarm::resolve(model, seed);
    run_recording(seed, model, Plan::Drawn, None, Keep::Nothing)
}

fn run_recording(seed: u64, model: &Model, plan: Plan, dispatch: Option<Dispatch>, keep: Keep) -> Outcome {
    let judge = Arc::new(Mutex::new(Some(Judge::new(model))));
    let tap = Box::new(TapOf(judge.clone()));
    let history = match keep {
        Keep::All => History::new().tapped(tap),
        Keep::Nothing => History::streamed(tap),
    };
    let thread_model = model.clone();
    let (thread_plan, plan) = match plan {
        Plan::Given(plan) => (Plan::Given(plan.clone()), plan),
        // Drawn as it is played, and not again for the outcome: a long
        // run's plan is a megabyte or more, and `faults::plan(model, seed)`
        // gives it to whoever wants it.
        Plan::Drawn => (Plan::Drawn, Vec::new()),
    };
    let (salvage, salvaged) = mpsc::channel();
    let result = std::thread::Builder::new()
        .name(format!("seed-{seed}"))
        .stack_size(32 << 20)
        .spawn(move || {
            salvage::catch_on_this_thread(salvage);
            let run = move || {
                let runtime = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
                runtime.block_on(world::simulate(seed, thread_model, thread_plan, history))
            };
            match dispatch {
                Some(dispatch) => tracing::dispatcher::with_default(&dispatch, run),
                None => run(),
            }
        })
        .expect("spawning a seed thread")
        .join();
    // The run's thread is gone: nothing else holds the judge now. Its lock is
    // poisoned only by a panic inside the judge: a checker bug, not the
    // simulation's, and a half-fed checker has no verdict to give.
    let judge = match judge.lock() {
        Ok(mut judge) => judge.take().expect("the judge is taken once, after the run"),
        Err(_) => match result {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(_) => unreachable!("a panic inside the judge ends the run's thread"),
        },
    };
    match result {
        Ok(record) => judge.outcome(seed, model, plan, record),
        Err(panic) => {
            let history = salvaged.try_iter().last().map(|shared| {
                let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
                std::mem::take(&mut shared.history)
            });
            panicked(seed, model, plan, panic_message(panic.as_ref()), history.unwrap_or_default(), judge)
        }
    }
}

/// Everything a run is judged by, fed each event as it is recorded: the
/// checker, the coverage probes the history shows, the trace hash and the
/// figures `explore` keeps.
struct Judge {
    checker: checker::Checker,
    coverage: coverage::Watch,
    hash: trace::Hasher,
    availability: figures::Availability,
    events: u64,
    last_at_us: u64,
}

/// The judge as a history's tap (the run's thread feeds it; the seed's thread reads it after).
struct TapOf(Arc<Mutex<Option<Judge>>>);

impl Tap for TapOf {
    fn observe(&mut self, event: &Event) {
        let mut judge = self.0.lock().expect("the judge is poisoned only by its own panic, which ends the run");
        judge.as_mut().expect("the judge is taken only after the run").observe(event);
    }
}

impl Judge {
    fn new(model: &Model) -> Judge {
        Judge {
            checker: checker::Checker::new(CheckConfig::for_model(model)),
            coverage: coverage::Watch::default(),
            hash: trace::Hasher::default(),
            availability: figures::Availability::default(),
            events: 0,
            last_at_us: 0,
        }
    }

    fn observe(&mut self, event: &Event) {
        self.checker.observe(event);
        self.coverage.observe(event);
        self.hash.observe(event);
        self.availability.observe(event);
        self.events += 1;
        self.last_at_us = event.at_us;
    }

    /// The outcome, reporting `plan` as the faults the run played (empty
    /// for a drawn plan: `Outcome::plan`).
    fn outcome(self, seed: u64, model: &Model, plan: Vec<FaultEvent>, record: RunRecord) -> Outcome {
        let verdict = self.checker.finish_at(record.sim_us);
        let counters = verdict.counters;
        let (acquire_us, unheld_waiting_us_max) = self.availability.finish(self.last_at_us);
        Outcome {
            seed,
            variant: model.variant.name().to_string(),
            ok: verdict.violations.is_empty(),
            violations: verdict.violations,
            trace_hash: trace::hash_hex(self.hash.finish()),
            sim_ms: record.sim_us / 1_000,
            messages: record.net.sent,
            grants: counters.grants,
            writes_accepted: counters.writes_accepted,
            stale_writes_rejected: counters.stale_writes_rejected_status + counters.stale_writes_rejected_ledger,
            elections: counters.elections,
            first_leader_ms: counters.first_leader_us.map(|us| us / 1_000),
            lease_exposures: counters.lease_exposures,
            exposures: verdict.exposures,
            undecided: counters.linearizable_undecided.clone(),
            counters,
            history: record.history,
            events: self.events,
            acquire_us,
            unheld_waiting_us_max,
            plan,
            probes: record.probes.union(self.coverage.probes()),
        }
    }
}

/// Judges a run whose history kept every event and fed no judge (a script's, a real run's).
pub(crate) fn judge(seed: u64, model: &Model, plan: Vec<FaultEvent>, record: RunRecord) -> Outcome {
    let mut judge = Judge::new(model);
    for event in record.history.events() {
        judge.observe(event);
    }
    judge.outcome(seed, model, plan, record)
}

/// A run that panicked: the history it recorded up to the panic is checked
/// (the after-heal properties aside: the run was cut short) and traced, and the panic is the
/// last violation, at the last recorded instant.
fn panicked(
    seed: u64,
    model: &Model,
    plan: Vec<FaultEvent>,
    message: String,
    history: History,
    judge: Judge,
) -> Outcome {
    let at_us = judge.last_at_us;
    let record = RunRecord { history, net: NetStats::default(), sim_us: at_us, probes: Default::default() };
    let mut outcome = judge.outcome(seed, model, plan, record);
    outcome.violations.retain(|v| !v.property.after_heal());
    outcome.violations.push(Violation {
        property: Property::Panic,
        at_us,
        nodes: Vec::new(),
        clients: Vec::new(),
        tokens: Vec::new(),
        detail: format!("the simulation panicked: {message}"),
    });
    outcome.ok = false;
    outcome
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::{run_plan, run_seed, run_seed_streamed};
    use crate::faults::{Fault, FaultEvent};
    use crate::history::Actor;
    use crate::model::Model;
    use fencelock::NodeId;

    #[test]
    fn a_panicking_run_keeps_its_history_up_to_the_panic() {
        let model = Model { safety_ms: 3_000, ..Model::default() };
        // A plan edited by hand to step the clock of a server the model does not have: the world panics at 2 s.
        let fault = Fault::ClockStep { actor: Actor::Server(NodeId(42)), delta_ms: 5 };
        let plan = vec![FaultEvent { at_ms: 2_000, fault }];
        let outcome = run_plan(7, &model, plan);
        let panic = outcome.violations.last().expect("the panic is reported");
        assert_eq!(panic.property, fencelock::Property::Panic);
        assert!(panic.detail.starts_with("the simulation panicked: "), "{}", panic.detail);
        assert!((1_990_000..=2_000_000).contains(&panic.at_us), "at the last event before 2 s: {}", panic.at_us);
        assert!(outcome.history.events().len() > 100, "the history up to the panic is kept");
        assert!(outcome.grants > 0, "and checked");
        assert_ne!(outcome.trace_hash, crate::run::trace::hash_hex(0));
    }

    #[test]
    fn a_run_that_keeps_nothing_holds_no_plan_and_plays_the_one_drawn_again() {
        let model = Model { safety_ms: 20_000, liveness_ms: 2_000, ..Model::default() };
        let kept = run_seed(3, &model);
        let streamed = run_seed_streamed(3, &model);
        assert!(!kept.plan.is_empty());
        assert_eq!(kept.plan, crate::faults::plan(&model, 3));
        assert!(streamed.plan.is_empty(), "a streamed run keeps no plan");
        assert_eq!(streamed.trace_hash, kept.trace_hash);
    }
}
