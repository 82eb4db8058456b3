//! `liveness`: after the faults heal, the service gets going again.
//!
//! Two obligations, each judged only where the run was long enough to
//! decide it (nothing is a violation merely because the run ended):
//! a leader exists within `liveness_leader_bound_ms` of the heal; a client
//! that crashed holding a lock has that lock freed by an applied Expire or
//! Release within `lease_ms + liveness_free_bound_ms` of the later of crash
//! and heal. That requests are answered, and that the service grants, are
//! `answered` and `progress` (`availability_checker`).

use super::state::{Context, Facts};
use super::{Family, Property, Report, Violation};
use crate::history::{Actor, Event, EventKind};
use fencelock::{ClientId, Key, NodeId, Token};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, Default)]
struct NodeRole {
    leader: bool,
    down: bool,
    paused: bool,
}

/// A crashed client's lock that must be freed.
#[derive(Clone, Debug)]
struct Obligation {
    client: ClientId,
    key: Key,
    token: Token,
    crash_us: u64,
}

#[derive(Debug, Default)]
pub(crate) struct LivenessChecker {
    roles: BTreeMap<NodeId, NodeRole>,
    leader_found: bool,
    leader_judged: bool,
    obligations: Vec<Obligation>,
}

impl LivenessChecker {
    fn track(&mut self, ctx: &Context, facts: &Facts, event: &Event, healed_us: Option<u64>, report: &mut Report) {
        let at_us = event.at_us;
        match &event.kind {
            EventKind::Role { node, role, .. } => {
                self.roles.entry(*node).or_default().leader = *role == fencelock::raft::Role::Leader;
            }
            EventKind::Crashed { actor: Actor::Server(node) } => self.roles.entry(*node).or_default().down = true,
            EventKind::Restarted { actor: Actor::Server(node) } | EventKind::NodeRestored { node, .. } => {
                // A restarted process runs afresh: it is neither leader nor paused.
                let role = self.roles.entry(*node).or_default();
                (role.down, role.leader, role.paused) = (false, false, false);
            }
            EventKind::Paused { actor: Actor::Server(node) } => self.roles.entry(*node).or_default().paused = true,
            EventKind::Resumed { actor: Actor::Server(node) } => self.roles.entry(*node).or_default().paused = false,
            EventKind::ClusterRestored { .. } => {
                self.roles.values_mut().for_each(|r| r.leader = false);
                // The restored state is the backup's: crashed holders' locks
                // from before it are gone or different; they cannot be judged.
                self.obligations.clear();
            }
            EventKind::Crashed { actor: Actor::Client(client) } => self.on_client_crash(ctx, *client, at_us),
            EventKind::Applied { .. } if !facts.removed.is_empty() => {
                self.on_removal(ctx, facts, at_us, healed_us, report);
            }
            _ => {}
        }
    }

    fn leader_exists(&self) -> bool {
        self.roles.values().any(|r| r.leader && !r.down && !r.paused)
    }

    fn judge_leader(&mut self, deadline_us: u64, report: &mut Report) {
        if self.leader_found || self.leader_judged {
            return;
        }
        self.leader_judged = true;
        let detail = format!(
            "no leader within {}ms of the heal: the cluster stayed unavailable with every fault healed",
            deadline_us / 1_000
        );
        report.push(Violation::new(Property::Liveness, deadline_us, detail));
    }

    fn on_client_crash(&mut self, ctx: &Context, client: ClientId, crash_us: u64) {
        for (token, issue) in ctx.issues() {
            let held = issue.holder.client == client && issue.epoch == ctx.epoch && !ctx.issue_removed(token, &issue);
            let known = self.obligations.iter().any(|o| o.token == token && o.key == *issue.key);
            if held && !known {
                self.obligations.push(Obligation { client, key: issue.key.clone(), token, crash_us });
            }
        }
    }

    fn free_deadline_us(&self, ctx: &Context, obligation: &Obligation, healed_us: u64) -> u64 {
        obligation.crash_us.max(healed_us) + (ctx.config.lease_ms + ctx.config.liveness_free_bound_ms) * 1_000
    }

    fn on_removal(&mut self, ctx: &Context, facts: &Facts, at_us: u64, healed_us: Option<u64>, report: &mut Report) {
        let (freed, kept): (Vec<Obligation>, Vec<Obligation>) = std::mem::take(&mut self.obligations)
            .into_iter()
            .partition(|o| facts.removed.iter().any(|(key, token)| *key == o.key && *token == o.token));
        self.obligations = kept;
        let Some(healed_us) = healed_us else { return };
        for obligation in freed {
            let deadline_us = self.free_deadline_us(ctx, &obligation, healed_us);
            if at_us > deadline_us {
                self.report_unfreed(&obligation, deadline_us, report);
            }
        }
    }

    fn report_unfreed(&self, o: &Obligation, deadline_us: u64, report: &mut Report) {
        let detail = format!(
            "{} crashed at {}ms holding {} with {} and the lock was still not freed at {}ms: a crashed \
             holder's lock must expire",
            o.client,
            o.crash_us / 1_000,
            o.key,
            o.token,
            deadline_us / 1_000
        );
        report.push(Violation::new(Property::Liveness, deadline_us, detail).clients(&[o.client]).tokens(&[o.token]));
    }
}

impl Family for LivenessChecker {
    fn observe(&mut self, ctx: &Context, facts: &Facts, event: &Event, report: &mut Report) {
        let at_us = event.at_us;
        let healed_us = ctx.healed_at_us.or(matches!(event.kind, EventKind::Healed).then_some(at_us));
        let leader_deadline_us = healed_us.map(|h| h + ctx.config.liveness_leader_bound_ms * 1_000);
        if let Some(deadline_us) = leader_deadline_us.filter(|d| at_us > *d) {
            self.judge_leader(deadline_us, report);
        }
        self.track(ctx, facts, event, healed_us, report);
        if leader_deadline_us.is_some_and(|d| at_us <= d) && self.leader_exists() {
            self.leader_found = true;
        }
    }

    fn finish(&mut self, ctx: &Context, report: &mut Report) {
        let Some(healed_us) = ctx.healed_at_us else { return };
        let run_end_us = ctx.config.run_end_us;
        let leader_bound_us = ctx.config.liveness_leader_bound_ms * 1_000;
        if healed_us + leader_bound_us <= run_end_us {
            self.judge_leader(healed_us + leader_bound_us, report);
        }
        for obligation in &self.obligations {
            let deadline_us = self.free_deadline_us(ctx, obligation, healed_us);
            if deadline_us <= run_end_us {
                self.report_unfreed(obligation, deadline_us, report);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use fencelock::Property;
    use fencelock::{ApplyResult, ClientId};

    #[test]
    fn clean_run_passes() {
        assert_clean(&happy().check_until_ms(20_000));
    }

    #[test]
    fn no_leader_after_the_heal_breaks_liveness() {
        let h = H::new().leader(0, 1).at_ms(1_000).crash(server(0)).at_ms(2_000).healed();
        let verdict = h.check();
        assert_only(&verdict, Property::Liveness);
        assert_eq!(verdict.violations[0].at_us, 7_000_000);
        // Judged only when the run lasted past the bound.
        assert_clean(&h.check_until_ms(6_000));
    }

    #[test]
    fn a_leader_within_the_bound_is_fine() {
        let h = H::new().leader(0, 1).at_ms(1_000).crash(server(0)).at_ms(2_000).healed();
        assert_clean(&h.at_ms(6_900).leader(1, 2).check());
    }

    #[test]
    fn a_leader_too_late_breaks_liveness() {
        let h = H::new().leader(0, 1).at_ms(1_000).crash(server(0)).at_ms(2_000).healed();
        assert_only(&h.at_ms(7_100).leader(1, 2).check(), Property::Liveness);
    }

    #[test]
    fn an_unanswered_request_is_for_answered_not_liveness() {
        let verdict = happy().at_ms(4_000).acquire_request(2, 20, "k").check();
        assert_only(&verdict, Property::Answered);
        assert_eq!(verdict.violations[0].clients, vec![ClientId(2)]);
        // Requests in the last window, or whose client crashed, are not judged.
        assert_clean(&happy().at_ms(11_000).acquire_request(2, 20, "k").check());
        assert_clean(&happy().at_ms(4_000).acquire_request(2, 20, "k").crash(client(2)).check());
    }

    #[test]
    fn a_crashed_holders_lock_never_freed_breaks_liveness() {
        let verdict = happy().at_ms(3_500).crash(client(1)).check_until_ms(15_000);
        assert_only(&verdict, Property::Liveness);
        // Crashed at 3.5 s (after the heal at 3 s): freed by 3.5 s + lease 2 s + 5 s.
        assert_eq!(verdict.violations[0].at_us, 10_500_000);
        // The same run ending before the deadline is not judged.
        assert_clean(&happy().at_ms(3_500).crash(client(1)).check_until_ms(10_400));
    }

    #[test]
    fn a_crashed_holders_lock_freed_in_time_is_fine() {
        let h = happy().at_ms(3_500).crash(client(1)).at_ms(5_200).apply_all(
            &[0, 1, 2],
            6,
            expire("k", 43),
            ApplyResult::Expired { existed: true },
        );
        assert_clean(&h.check_until_ms(15_000));
    }

    #[test]
    fn a_crashed_holders_lock_freed_late_breaks_liveness() {
        let h = happy().at_ms(3_500).crash(client(1)).at_ms(13_000).apply_all(
            &[0, 1, 2],
            6,
            expire("k", 43),
            ApplyResult::Expired { existed: true },
        );
        let verdict = h.check_until_ms(15_000);
        assert_only(&verdict, Property::Liveness);
        assert_eq!(verdict.violations.len(), 1);
    }
}
