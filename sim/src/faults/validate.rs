//! The check of a fault plan read from a file (`replay --fault-file`): bad
//! input is one clear error line, never a panic inside the simulation.

use super::{Fault, FaultEvent, UntilOvertaken, EVENTS_MAX};
use crate::actor::Actor;
use crate::model::{Model, DRIFT_PPM_REAL_MAX};

/// The longest clock step a fault file may hold (one day).
const STEP_MS_MAX: u64 = 86_400_000;

/// Checks a plan read from a file against `model`: every server, worker and
/// address it names exists, and every event but the initial clock rates is
/// inside the safety phase. The error names the first offending event.
pub fn validate(plan: &[FaultEvent], model: &Model) -> Result<(), String> {
    if plan.len() > EVENTS_MAX {
        return Err(format!("a fault plan holds at most {EVENTS_MAX} events, got {}", plan.len()));
    }
    let exists = |actor: &Actor| match actor {
        Actor::Server(node) => node.0 < model.nodes,
        Actor::Client(client) => client.0 < model.clients,
        Actor::Resource => true,
    };
    for (i, event) in plan.iter().enumerate() {
        let names_ok = event.fault.named().iter().all(exists);
        if !names_ok {
            return Err(format!(
                "event {i} ({} at {} ms) names a server or worker the model does not have ({}, {})",
                event.fault,
                event.at_ms,
                crate::plural(model.nodes, "server"),
                crate::plural(model.clients, "worker")
            ));
        }
        if let Fault::ElectionStorm { servers } = event.fault {
            if servers == 0 || servers > model.nodes {
                return Err(format!(
                    "event {i} ({} at {} ms): a storm runs out the timers of 1 to {} servers, got {servers}",
                    event.fault, event.at_ms, model.nodes
                ));
            }
        }
        if let Some(problem) = physical(&event.fault) {
            return Err(format!("event {i} ({} at {} ms): {problem}", event.fault, event.at_ms));
        }
        if event.at_ms >= model.safety_ms && !(event.at_ms == 0 && matches!(event.fault, Fault::ClockRate { .. })) {
            return Err(format!(
                "event {i} ({} at {} ms) is not inside the safety phase (0..{} ms)",
                event.fault, event.at_ms, model.safety_ms
            ));
        }
    }
    Ok(())
}

/// Clock faults a clock can take: a rate within what a model may draw (so
/// the clock moves forward), a step within a day; stalls and times down
/// within a day.
fn physical(fault: &Fault) -> Option<String> {
    match *fault {
        Fault::ClockRate { ppm, .. } if ppm.unsigned_abs() > DRIFT_PPM_REAL_MAX => {
            Some(format!("a clock rate must be within -{DRIFT_PPM_REAL_MAX}..={DRIFT_PPM_REAL_MAX} ppm"))
        }
        Fault::ClockStep { delta_ms, .. } if delta_ms.unsigned_abs() > STEP_MS_MAX => {
            Some(format!("a clock step must be within -{STEP_MS_MAX}..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::CrashLeader { down_ms: ms, .. }
        | Fault::PauseLeader { ms }
        | Fault::StallHolder { ms }
        | Fault::StallOnGrant { ms }
            if ms > STEP_MS_MAX =>
        {
            Some(format!("a planned stall or time down must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::StallUntilOvertaken(UntilOvertaken { after_ms, ms_max, .. }) if after_ms.max(ms_max) > STEP_MS_MAX => {
            Some(format!("a planned stall must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::RenewStrikes { for_ms, pause_ms, .. } if for_ms.max(pause_ms) > STEP_MS_MAX => {
            Some(format!("a renew strike's times must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::VoteStrikes { for_ms, down_ms, cut_ms, .. } if for_ms.max(down_ms).max(cut_ms) > STEP_MS_MAX => {
            Some(format!("a vote strike's times must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::FenceStrikes { for_ms, down_ms, .. } if for_ms.max(down_ms) > STEP_MS_MAX => {
            Some(format!("a fence strike's times must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::LateRenewals { for_ms, after_ms, .. } if for_ms.max(after_ms) > STEP_MS_MAX => {
            Some(format!("a late-renewal episode's times must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::Figure8Strikes { for_ms, strike_ms, down_ms, .. }
            if for_ms.max(strike_ms).max(down_ms) > STEP_MS_MAX =>
        {
            Some(format!("a figure-8 strike's times must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::GrantStrikes { for_ms, pause_ms, .. } if for_ms.max(pause_ms) > STEP_MS_MAX => {
            Some(format!("a grant strike's times must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::AckAmnesia { for_ms, down_ms, fsync_ms } if for_ms.max(down_ms).max(fsync_ms) > STEP_MS_MAX => {
            Some(format!("an ack-amnesia episode's times must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::AckCrashes { for_ms, down_ms, .. } if for_ms.max(down_ms) > STEP_MS_MAX => {
            Some(format!("an ack-crash episode's times must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        Fault::LeaderChurn { for_ms, down_ms, within_ms } if for_ms.max(down_ms).max(within_ms) > STEP_MS_MAX => {
            Some(format!("a leader-churn stretch's times must be within 0..={STEP_MS_MAX} ms (one day)"))
        }
        _ => None,
    }
}
