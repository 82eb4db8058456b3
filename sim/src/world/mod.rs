//! One run: build the world from a seed and a model, play the fault schedule
//! during the safety phase, heal everything, let the liveness phase run, and
//! hand back the history.
//!
//! The supervisor is the `block_on` future itself (madsim's node 0): it is
//! never killed, so it owns the net's router task, the fault schedule and the
//! operator's backups.

use crate::faults::FaultEvent;
use crate::history::History;
use crate::machine::net::NetStats;
use crate::model::Model;

mod acks;
mod amnesia;
mod churn;
mod fences;
mod figure8;
mod grants;
mod late_renewals;
mod renews;
mod restores;
pub mod salvage;
mod supervisor;
mod votes;

use supervisor::is_initial_rate;
pub(crate) use supervisor::Supervisor;

/// How often the liveness phase samples the servers' work (`work-budget`):
/// the history gets the work of each such stretch after the heal.
pub const WORK_SAMPLE_US: u64 = 1_000_000;

/// What a run leaves behind for the checker and the CLI.
pub struct RunRecord {
    pub history: History,
    pub net: NetStats,
    pub sim_us: u64,
    /// The coverage probes the servers and the simulator reached
    /// (`fencelock::probe`); the history's own are judged from it.
    pub probes: fencelock::ProbeSet,
}

/// Runs one seed to the end of its liveness phase, recording into `history`
/// (one that keeps every event, or streams them to a judge). Must be called
/// inside a fresh madsim runtime's `block_on`.
pub async fn simulate(seed: u64, model: Model, plan: Vec<FaultEvent>, history: History) -> RunRecord {
    let mut supervisor = Supervisor::start(seed, model, &plan, None, history);
    let ctx = supervisor.ctx.clone();
    let safety_end_us = ctx.model.safety_ms * 1_000;
    for event in plan.into_iter().filter(|e| e.at_ms > 0 || !is_initial_rate(&e.fault)) {
        let at_us = event.at_ms * 1_000;
        if at_us >= safety_end_us {
            break;
        }
        supervisor.sleep_until_us(at_us).await;
        supervisor.apply(&event.fault).await;
    }
    supervisor.sleep_until_us(safety_end_us).await;
    supervisor.heal();
    ctx.start_work_samples(WORK_SAMPLE_US);
    supervisor.sleep_until_us(safety_end_us + ctx.model.liveness_ms * 1_000).await;
    if ctx.model.liveness_ms > 0 {
        ctx.record(ctx.work_per_sample());
    }
    supervisor.finish()
}
