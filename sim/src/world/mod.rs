//! One run: build the world from a seed and a model, play the fault schedule
//! during the safety phase, heal everything, let the liveness phase run, and
//! hand back the history.
//!
//! The supervisor is the `block_on` future itself (madsim's node 0): it is
//! never killed, so it owns the net's router task, the fault schedule and the
//! operator's backups.

use crate::faults::{FaultEvent, Schedule};
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
pub(crate) use supervisor::{Outlook, Supervisor};

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

/// A run's fault plan: the seed's, drawn as it is played, or one given whole
/// (a saved, edited or shrunk plan, or one the caller keeps a copy of).
pub enum Plan {
    Drawn,
    Given(Vec<FaultEvent>),
}

/// Runs one seed to the end of its liveness phase, recording into `history`
/// (one that keeps every event, or streams them to a judge). Must be called
/// inside a fresh madsim runtime's `block_on`.
pub async fn simulate(seed: u64, model: Model, plan: Plan, history: History) -> RunRecord {
    let mut faults = match plan {
        Plan::Drawn => Faults::Drawn(Schedule::new(&model, seed)),
        Plan::Given(plan) => Faults::Given(Remaining::new(plan)),
    };
    let outlook = faults.outlook();
    let mut supervisor = Supervisor::start(seed, model, outlook, None, history);
    let ctx = supervisor.ctx.clone();
    let safety_end_us = ctx.model.safety_ms * 1_000;
    while let Some(event) = faults.next() {
        if event.at_ms == 0 && is_initial_rate(&event.fault) {
            continue;
        }
        let at_us = event.at_ms * 1_000;
        if at_us >= safety_end_us {
            break;
        }
        supervisor.sleep_until_us(at_us).await;
        supervisor.apply(&event.fault).await;
    }
    drop(faults);
    supervisor.sleep_until_us(safety_end_us).await;
    supervisor.heal();
    ctx.start_work_samples(WORK_SAMPLE_US);
    supervisor.sleep_until_us(safety_end_us + ctx.model.liveness_ms * 1_000).await;
    if ctx.model.liveness_ms > 0 {
        ctx.record(ctx.work_per_sample());
    }
    supervisor.finish()
}

/// The faults still to apply: drawn as they come (a long run's plan would
/// be a megabyte or more), or what is left of a plan given whole.
enum Faults {
    Drawn(Schedule),
    Given(Remaining),
}

impl Faults {
    /// What the world must know of the plan before its first fault. A
    /// drawn plan is read ahead by a copy of its schedule, drawing the
    /// same events and holding only a few at a time, and only past time 0
    /// if it may strike grants or fences.
    fn outlook(&self) -> Outlook {
        match self {
            Faults::Drawn(schedule) => {
                let strikes = schedule.may_strike_grants_or_fences();
                Outlook::of(schedule.clone().take_while(|event| strikes || event.at_ms == 0))
            }
            Faults::Given(remaining) => Outlook::of(remaining.reversed.iter().rev().cloned()),
        }
    }

    fn next(&mut self) -> Option<FaultEvent> {
        match self {
            Faults::Drawn(schedule) => schedule.next(),
            Faults::Given(remaining) => remaining.next(),
        }
    }
}

/// The faults of a plan given whole still to apply, handed out in order.
/// Its memory shrinks as they are applied: a long plan would otherwise stay
/// whole to the end of the run, beside everything the judge has come to
/// hold by then.
struct Remaining {
    /// The faults to come, the next one last.
    reversed: Vec<FaultEvent>,
}

impl Remaining {
    fn new(mut plan: Vec<FaultEvent>) -> Remaining {
        plan.reverse();
        Remaining { reversed: plan }
    }

    fn next(&mut self) -> Option<FaultEvent> {
        let event = self.reversed.pop()?;
        // Halving keeps the copies to one pass over the plan in all.
        if self.reversed.len() < self.reversed.capacity() / 2 {
            self.reversed.shrink_to_fit();
        }
        Some(event)
    }

    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.reversed.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::Remaining;
    use crate::faults::{Fault, FaultEvent};
    use crate::history::{Actor, EventKind};
    use crate::script::{ms, run_script, script_model, worker_a, Sim};

    /// Tasks not yet finished on the supervisor's `timers` node.
    fn timers_tasks() -> usize {
        let by_node = madsim::runtime::Handle::current().metrics().num_tasks_by_node();
        by_node.get("timers").copied().expect("the supervisor's timers node")
    }

    /// Each timed pause ends by a task on the `timers` node, where madsim
    /// forgets a finished task (on its main node it keeps every one), and
    /// the pauses do end. Counting the tasks here is itself what makes
    /// madsim (0.2.34, pinned) forget finished ones, so this holds where the
    /// pauses run, not that the supervisor counts them after each pause:
    /// only a heap profile of a long run shows that.
    #[test]
    fn pauses_end_on_the_timers_node_which_forgets_them() {
        let outcome = run_script(3, script_model(1), async |sim: &mut Sim| {
            for _ in 0..20 {
                sim.fault(Fault::Pause { actor: Actor::Client(worker_a()), ms: 5 }).await;
                assert_eq!(timers_tasks(), 1, "the pause's end waits on the timers node");
                sim.run_for(ms(10)).await;
                assert_eq!(timers_tasks(), 0, "an ended pause leaves no task behind");
            }
        });
        let resumed = outcome.history.events().iter().filter(|e| matches!(e.kind, EventKind::Resumed { .. })).count();
        assert_eq!(resumed, 20, "every pause ends");
    }

    /// The plan's memory follows what is left of it, and its faults come in order.
    #[test]
    fn a_plan_gives_back_its_memory_as_its_faults_are_applied() {
        let plan: Vec<FaultEvent> = (0..10_000).map(|at_ms| FaultEvent { at_ms, fault: Fault::Heal }).collect();
        let mut remaining = Remaining::new(plan);
        for at_ms in 0..10_000 {
            assert_eq!(remaining.next().map(|e| e.at_ms), Some(at_ms));
            let left = 10_000 - at_ms as usize - 1;
            assert!(remaining.capacity() <= 2 * left + 1, "{} kept for {left} faults", remaining.capacity());
        }
        assert_eq!(remaining.next(), None);
        assert!(remaining.capacity() <= 1);
    }
}
