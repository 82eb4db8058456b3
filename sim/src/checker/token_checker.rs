//! `token-monotonic`: each issued token is greater than every token before it,
//! over the whole run (restarts, node restores and whole-cluster restores
//! included), and no token is issued twice.
//!
//! A token is issued when a Grant is first applied at its index (the first
//! node to apply an index defines what the cluster issued). A retried Grant
//! answered with its holder's original token is not a new issue. Tokens
//! presented at the resource are checked too: a token the lock service never
//! produced (a client's clock reading, say) is no fencing token at all, and a
//! client that believes it holds a key writes with the token of that belief
//! (its latest grant), never with an issued token its client library kept
//! from an earlier grant. The worker writes with the token the client library
//! hands out, and records its beliefs from the service's answers, so a library
//! that keeps an old token shows here.

use super::state::{Context, Facts};
use super::{Family, Property, Report, Violation};
use crate::history::{Actor, Event, EventKind};
use fencelock::{ApplyResult, ClientId, Command, Key, Token};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default)]
pub(crate) struct TokenChecker {
    reported_issues: BTreeSet<Token>,
    foreign_writes: BTreeSet<(ClientId, Token)>,
    /// The token of each client's open belief per key (`BeliefStart` to `BeliefEnd` or a crash).
    believed: BTreeMap<(ClientId, Key), Token>,
    superseded_writes: BTreeSet<(ClientId, Token)>,
}

impl TokenChecker {}

fn restore_hint(after_restore: bool) -> &'static str {
    if after_restore {
        " (a restore must raise the token floor above every token issued before it)"
    } else {
        ""
    }
}

impl Family for TokenChecker {
    fn observe(&mut self, ctx: &Context, facts: &Facts, event: &Event, report: &mut Report) {
        match &event.kind {
            EventKind::Applied {
                node,
                index,
                command: Command::Grant { key, holder, .. },
                result: ApplyResult::Granted { token },
                ..
            } if facts.first_apply => {
                let token = *token;
                match ctx.issue(token) {
                    // A retry answered with the original token: the same issue.
                    Some(issue) if issue.holder == *holder => {}
                    Some(issue) => {
                        report.counters.grants += 1;
                        if self.reported_issues.insert(token) {
                            let detail = format!(
                                "{token} was issued to {holder} for {key} at {index} on {node}, but it had been \
                                 issued before to {} for {}: a token was issued twice{}",
                                issue.holder,
                                issue.key,
                                restore_hint(ctx.epoch > issue.epoch)
                            );
                            let v = Violation::new(Property::TokenMonotonic, event.at_us, detail);
                            report.push(
                                v.nodes(&[*node]).clients(&[holder.client, issue.holder.client]).tokens(&[token]),
                            );
                        }
                    }
                    None => {
                        report.counters.grants += 1;
                        let Some(max) = ctx.token_max().filter(|max| token <= *max) else { return };
                        if self.reported_issues.insert(token) {
                            let detail = format!(
                                "{token} was issued to {holder} for {key} at {index} on {node} after {max} had \
                                 been issued: tokens went down{}",
                                restore_hint(ctx.epoch > 0)
                            );
                            let v = Violation::new(Property::TokenMonotonic, event.at_us, detail);
                            report.push(v.nodes(&[*node]).clients(&[holder.client]).tokens(&[max, token]));
                        }
                    }
                }
            }
            EventKind::WriteSent { client, key, token, path, .. }
                if !ctx.token_seen(*token) && self.foreign_writes.insert((*client, *token)) =>
            {
                let detail = format!(
                    "{client} wrote {key} on the {path:?} path with {token}, a token not issued by the lock \
                         service: only tokens from the lock service fence a write"
                );
                report.push(
                    Violation::new(Property::TokenMonotonic, event.at_us, detail).clients(&[*client]).tokens(&[*token]),
                );
            }
            EventKind::WriteSent { client, key, token, path, .. } => {
                let Some(&believed) = self.believed.get(&(*client, key.clone())) else { return };
                // A token the service never produced was reported just above.
                if believed == *token || !ctx.token_seen(*token) || !self.superseded_writes.insert((*client, *token)) {
                    return;
                }
                let detail = format!(
                    "{client} wrote {key} on the {path:?} path with {token} while its grant for {key} was \
                     {believed}: a client writes with the token of its latest grant"
                );
                let v = Violation::new(Property::TokenMonotonic, event.at_us, detail);
                report.push(v.clients(&[*client]).tokens(&[*token, believed]));
            }
            EventKind::BeliefStart { client, key, token, .. } => {
                self.believed.insert((*client, key.clone()), *token);
            }
            EventKind::BeliefEnd { client, key, .. } => {
                self.believed.remove(&(*client, key.clone()));
            }
            EventKind::Crashed { actor: Actor::Client(client) } => {
                self.believed.retain(|(c, _), _| c != client);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::history::{WritePath, WriteVerdict};
    use fencelock::Property;
    use fencelock::{ApplyResult, Token};

    #[test]
    fn clean_run_passes_and_counts_grants() {
        let verdict = happy().check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.grants, 3);
    }

    #[test]
    fn a_retried_grant_answered_with_its_original_token_is_no_new_issue() {
        let verdict = happy()
            .at_ms(4_000)
            .apply_all(&[0, 1, 2], 6, grant("k", 1, 5), granted(43))
            .reply(0, 1, 5, reply_granted(43))
            .check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.grants, 3);
    }

    #[test]
    fn a_lower_token_breaks_token_monotonic() {
        let verdict = happy()
            .at_ms(4_000)
            .apply_all(&[0, 1, 2], 6, release("k", 43, 1, 6), ApplyResult::Released)
            .apply_all(&[0, 1, 2], 7, grant("k", 2, 7), granted(40))
            .check();
        assert_only(&verdict, Property::TokenMonotonic);
        assert_eq!(verdict.violations.len(), 1);
        assert_eq!(verdict.violations[0].tokens, vec![Token(40), Token(43)]);
    }

    #[test]
    fn a_token_repeated_across_a_cluster_restore_breaks_token_monotonic() {
        // The naive restore takes the counter from a backup at i4: 43 again, to c2.
        let verdict =
            happy().at_ms(4_000).restore(1, 42).leader(0, 1 << 32).at_ms(4_100).acquire(5, "k", 2, 9, 43).check();
        // The clients see it too: the same token told to two acquires (`linearizable`).
        assert_eq!(
            verdict.properties(),
            [Property::TokenMonotonic, Property::Linearizable],
            "{:#?}",
            verdict.violations
        );
        assert!(verdict.violations[0].detail.contains("restore"), "{}", verdict.violations[0]);
        // c1 (43 before the restore) and c2 (43 after) overlap: excused by the restore, counted.
        assert_eq!(verdict.counters.lease_exposures, 1);
    }

    #[test]
    fn a_higher_token_after_a_cluster_restore_is_fine() {
        let verdict =
            happy().at_ms(4_000).restore(1, 100).leader(0, 1 << 32).at_ms(4_100).acquire(5, "k", 2, 9, 101).check();
        assert_clean(&verdict);
    }

    #[test]
    fn a_client_clock_token_breaks_token_monotonic() {
        let verdict = happy()
            .at_ms(4_000)
            .write(1, 8, "k", 4_000_123, WritePath::Status, WriteVerdict::Accepted)
            .write(1, 9, "k", 4_000_123, WritePath::Ledger, WriteVerdict::Duplicate { accepted: true })
            .check();
        assert_only(&verdict, Property::TokenMonotonic);
        assert_eq!(verdict.violations.len(), 1, "one report per client and token");
    }

    #[test]
    fn a_write_with_a_token_kept_from_an_earlier_grant_breaks_token_monotonic() {
        // c1 was granted 43 at 3.1 s (its belief is open) but writes with 41, its grant before.
        let verdict = happy()
            .at_ms(3_200)
            .write(1, 6, "k", 41, WritePath::Status, WriteVerdict::RejectedStale { highest: Token(42) })
            .check();
        assert_only(&verdict, Property::TokenMonotonic);
        assert_eq!(verdict.violations[0].tokens, vec![Token(41), Token(43)]);
    }

    #[test]
    fn a_write_after_the_belief_ended_is_judged_by_fencing_alone() {
        // happy's stale write of c1 with 41 comes after c1 released 41: no belief, no check here.
        let verdict = happy()
            .at_ms(3_200)
            .belief_end(1, "k", 43)
            .write(1, 6, "k", 43, WritePath::Status, WriteVerdict::Accepted)
            .check();
        assert_clean(&verdict);
    }
}
