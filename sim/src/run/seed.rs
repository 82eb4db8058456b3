//! Running seeds: each on a fresh OS thread with a fresh madsim runtime
//! (std's HashMap seeds are per thread; MADSIM.md), then checking its history.

use crate::checker::{self, CheckConfig, Counters, Exposure, Property, Violation};
use crate::faults::{self, FaultEvent};
use crate::history::History;
use crate::machine::net::NetStats;
use crate::model::Model;
use crate::run::log::{LogSettings, Record};
use crate::run::{coverage, trace};
use crate::world::{self, salvage, RunRecord};
use fencelock::ProbeSet;
use serde::Serialize;
use std::sync::{mpsc, PoisonError};
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
    #[serde(skip)]
    pub counters: Counters,
    #[serde(skip)]
    pub history: History,
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
    let thread_model = model.clone();
    let thread_plan = plan.clone();
    let (salvage, salvaged) = mpsc::channel();
    let result = std::thread::Builder::new()
        .name(format!("seed-{seed}"))
        .stack_size(32 << 20)
        .spawn(move || {
            salvage::catch_on_this_thread(salvage);
            let run = move || {
                let runtime = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
                runtime.block_on(world::simulate(seed, thread_model, thread_plan))
            };
            match dispatch {
                Some(dispatch) => tracing::dispatcher::with_default(&dispatch, run),
                None => run(),
            }
        })
        .expect("spawning a seed thread")
        .join();
    match result {
        Ok(record) => judge(seed, model, plan, record),
        Err(panic) => {
            // The thread is gone: nothing else holds the world's state now.
            let history = salvaged.try_iter().last().map(|shared| {
                let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
                std::mem::take(&mut shared.history)
            });
            panicked(seed, model, plan, panic_message(panic.as_ref()), history.unwrap_or_default())
        }
    }
}

pub(crate) fn judge(seed: u64, model: &Model, plan: Vec<FaultEvent>, record: RunRecord) -> Outcome {
    let config = CheckConfig { run_end_us: record.sim_us, ..CheckConfig::for_model(model) };
    let verdict = checker::check(&record.history, config);
    let counters = verdict.counters;
    let probes = record.probes.union(coverage::of_history(&record.history));
    Outcome {
        seed,
        variant: model.variant.name().to_string(),
        ok: verdict.violations.is_empty(),
        violations: verdict.violations,
        trace_hash: trace::hash_hex(trace::hash(record.history.events())),
        sim_ms: record.sim_us / 1_000,
        messages: record.net.sent,
        grants: counters.grants,
        writes_accepted: counters.writes_accepted,
        stale_writes_rejected: counters.stale_writes_rejected_status + counters.stale_writes_rejected_ledger,
        elections: counters.elections,
        first_leader_ms: counters.first_leader_us.map(|us| us / 1_000),
        lease_exposures: counters.lease_exposures,
        exposures: verdict.exposures,
        counters,
        history: record.history,
        plan,
        probes,
    }
}

/// A run that panicked: the history it recorded up to the panic is checked
/// (the after-heal properties aside: the run was cut short) and traced, and the panic is the
/// last violation, at the last recorded instant.
fn panicked(seed: u64, model: &Model, plan: Vec<FaultEvent>, message: String, history: History) -> Outcome {
    let at_us = history.events().last().map_or(0, |event| event.at_us);
    let record = RunRecord { history, net: NetStats::default(), sim_us: at_us, probes: Default::default() };
    let mut outcome = judge(seed, model, plan, record);
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
    use super::run_plan;
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
}
