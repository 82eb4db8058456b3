//! The lock table: `expire-safety` and `grant-validity`.
//!
//! `expire-safety` compares each applied removal with the applying node's own
//! lock table (rebuilt from its applied commands): an Expire or Release may
//! only remove the lock carrying its token. Where the history cannot show a
//! node's table (after a restart, a restore or a snapshot) the key stays
//! unjudged until an applied command sets it again.
//!
//! `grant-validity` judges each Granted answer against what the cluster had
//! already applied by then: a removal of that lock in this epoch, or no
//! issue of that token at all, means the client was told something false.

use super::state::{is_removal, Answer, Context, Facts, LockSlot, Seen};
use super::{Family, Property, Report, Violation};
use crate::history::{Event, EventKind};
use fencelock::service::ClientReply;
use fencelock::{ClientId, LogIndex, RequestId, Token};
use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub(crate) struct LockChecker {
    unsafe_removals: BTreeSet<(u32, LogIndex)>,
    invalid_grants: BTreeSet<(ClientId, RequestId, Token)>,
}

impl LockChecker {
    fn on_granted(&mut self, ctx: &Context, answer: Answer, token: Token, report: &mut Report) {
        let Answer { seen: Seen { at_us, node }, client, request } = answer;
        let detail = if !ctx.token_applied(token) {
            format!(
                "{node} told {client} Granted with {token} for {request}, a token no node ever issued: \
                 a grant must be answered only after it is applied"
            )
        } else {
            let Some(issue) = ctx.issue(token) else { return };
            if !ctx.issue_removed(token, &issue) {
                return;
            }
            format!(
                "{node} told {client} Granted with {token} on {} for {request} after the cluster had already \
                 removed that lock: the client now believes in a lock nobody holds",
                issue.key
            )
        };
        if self.invalid_grants.insert((client, request, token)) {
            report.push(
                Violation::new(Property::GrantValidity, at_us, detail)
                    .nodes(&[node])
                    .clients(&[client])
                    .tokens(&[token]),
            );
        }
    }
}

impl Family for LockChecker {
    fn observe(&mut self, ctx: &Context, facts: &Facts, event: &Event, report: &mut Report) {
        match &event.kind {
            EventKind::Applied { node, index, command, result, .. } => {
                let Some((key, token)) = is_removal(command, result) else { return };
                let Some(LockSlot::Held(held)) = facts.slot_before else { return };
                if held != token && self.unsafe_removals.insert((ctx.epoch, *index)) {
                    let detail = format!(
                        "{node} applied {command:?} at {index} and removed the lock on {key} held with {held}: \
                         an Expire or Release must remove only the lock with its own token"
                    );
                    let v = Violation::new(Property::ExpireSafety, event.at_us, detail);
                    report.push(v.nodes(&[*node]).tokens(&[token, held]));
                }
            }
            EventKind::Replied { node, client, request, reply: ClientReply::Granted { token, .. } } => {
                let answer =
                    Answer { seen: Seen { at_us: event.at_us, node: *node }, client: *client, request: *request };
                self.on_granted(ctx, answer, *token, report);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Property;
    use crate::history::EventKind;
    use fencelock::{ApplyResult, Key, LogIndex, NodeId, Token};

    #[test]
    fn clean_run_passes() {
        assert_clean(&happy().check());
    }

    #[test]
    fn a_late_expire_removing_the_next_lock_breaks_expire_safety() {
        let verdict = happy()
            .at_ms(4_000)
            .apply_all(&[0, 1, 2], 6, expire("k", 41), ApplyResult::Expired { existed: true })
            .check();
        assert_only(&verdict, Property::ExpireSafety);
        assert_eq!(verdict.violations.len(), 1, "reported once per index");
        assert_eq!(verdict.violations[0].tokens, vec![Token(41), Token(43)]);
    }

    #[test]
    fn a_release_ignoring_its_token_breaks_expire_safety() {
        let verdict =
            happy().at_ms(4_000).apply_all(&[0, 1, 2], 6, release("k", 42, 2, 9), ApplyResult::Released).check();
        assert_only(&verdict, Property::ExpireSafety);
    }

    #[test]
    fn a_late_expire_that_finds_nothing_is_fine() {
        let verdict = happy()
            .at_ms(4_000)
            .apply_all(&[0, 1, 2], 6, expire("k", 41), ApplyResult::Expired { existed: false })
            .check();
        assert_clean(&verdict);
    }

    fn snapshot_of_node_2(locks: Vec<(Key, Token)>) -> EventKind {
        EventKind::SnapshotInstalled { node: NodeId(2), index: LogIndex(5), token_last: Token(43), locks }
    }

    #[test]
    fn a_snapshot_tells_the_table_so_a_matching_expire_is_fine() {
        let verdict = happy()
            .at_ms(4_000)
            .ev(snapshot_of_node_2(vec![(Key::new("k"), Token(41))]))
            .apply(2, 6, expire("k", 41), ApplyResult::Expired { existed: true })
            .check();
        assert_clean(&verdict);
    }

    #[test]
    fn after_a_snapshot_an_expire_of_another_token_breaks_expire_safety() {
        let verdict = happy()
            .at_ms(4_000)
            .ev(snapshot_of_node_2(vec![(Key::new("k"), Token(43))]))
            .apply(2, 6, expire("k", 41), ApplyResult::Expired { existed: true })
            .check();
        assert_only(&verdict, Property::ExpireSafety);
    }

    #[test]
    fn after_a_restart_without_its_snapshot_the_table_is_not_guessed() {
        let verdict = happy()
            .at_ms(4_000)
            .ev(EventKind::Restarted { actor: crate::history::Actor::Server(NodeId(2)) })
            .apply(2, 6, expire("k", 41), ApplyResult::Expired { existed: true })
            .check();
        assert_clean(&verdict);
    }

    #[test]
    fn granted_after_the_lock_expired_breaks_grant_validity() {
        // c1's retried acquire r5 is answered with the original token after it expired.
        let verdict = happy()
            .at_ms(6_000)
            .apply_all(&[0, 1, 2], 6, expire("k", 43), ApplyResult::Expired { existed: true })
            .reply(0, 1, 5, reply_granted(43))
            .reply(0, 1, 5, reply_granted(43))
            .check();
        assert_only(&verdict, Property::GrantValidity);
        assert_eq!(verdict.violations.len(), 1);
    }

    #[test]
    fn granted_with_a_token_never_issued_breaks_grant_validity() {
        let verdict = happy().at_ms(4_000).reply(0, 2, 8, reply_granted(99)).check();
        assert_only(&verdict, Property::GrantValidity);
    }
}
