//! The protected resource: `fenced-write` and `equal-token`.
//!
//! Judged from the resource's answers (`WriteDone`) over the whole run:
//! neither a resource restart nor a whole-cluster restore excuses a stale
//! write, because that is exactly what fencing is for (SPEC.md).

use super::state::{Context, Facts};
use super::{Family, Property, Report, Violation};
use crate::history::{Event, EventKind, WritePath, WriteVerdict};
use fencelock::{ClientId, Key, RequestId, Token};
use std::collections::{BTreeMap, BTreeSet};

/// The first answer a write (client, request) got.
#[derive(Clone, Debug)]
struct Original {
    key: Key,
    token: Token,
    accepted: bool,
}

#[derive(Debug, Default)]
pub(crate) struct ResourceChecker {
    /// Per key: the highest accepted token and the client that wrote with it first.
    highest: BTreeMap<Key, (Token, ClientId)>,
    /// Per (key, token): the first client whose write under it was accepted.
    first_writer: BTreeMap<(Key, Token), ClientId>,
    originals: BTreeMap<(ClientId, RequestId), Original>,
    reported: BTreeSet<(Property, ClientId, RequestId)>,
}

impl ResourceChecker {
    fn remember(&mut self, write: &Write, accepted: bool) {
        let original = Original { key: write.key.clone(), token: write.token, accepted };
        self.originals.entry((write.client, write.request)).or_insert(original);
    }

    fn on_accepted(&mut self, w: &Write, report: &mut Report) {
        if let Some(original) = self.originals.get(&(w.client, w.request)) {
            if self.reported.insert((Property::EqualToken, w.client, w.request)) {
                let detail = format!(
                    "{}'s write {} to {} with {} was accepted again on the {:?} path after its first answer \
                     (accepted: {}): a retried write must get the original result, not a second effect",
                    w.client, w.request, w.key, w.token, w.path, original.accepted
                );
                let tokens = [original.token, w.token];
                report.push(Violation::new(Property::EqualToken, w.at_us, detail).clients(&[w.client]).tokens(&tokens));
            }
            return;
        }
        self.remember(w, true);
        if let Some((highest, by)) = self.highest.get(w.key).filter(|(highest, _)| w.token < *highest) {
            if self.reported.insert((Property::FencedWrite, w.client, w.request)) {
                let detail = format!(
                    "the resource accepted {}'s write to {} with {} on the {:?} path after accepting {highest} \
                     from {by}: a stale holder's write got through",
                    w.client, w.key, w.token, w.path
                );
                let v = Violation::new(Property::FencedWrite, w.at_us, detail);
                report.push(v.clients(&[w.client, *by]).tokens(&[w.token, *highest]));
            }
        }
        let first = *self.first_writer.entry((w.key.clone(), w.token)).or_insert(w.client);
        if first != w.client && self.reported.insert((Property::EqualToken, w.client, w.request)) {
            let detail = format!(
                "the resource accepted writes to {} with {} from both {first} and {}: two holders had effects \
                 under one token",
                w.key, w.token, w.client
            );
            report.push(
                Violation::new(Property::EqualToken, w.at_us, detail).clients(&[first, w.client]).tokens(&[w.token]),
            );
        }
        let entry = self.highest.entry(w.key.clone()).or_insert((w.token, w.client));
        if w.token > entry.0 {
            *entry = (w.token, w.client);
        }
    }

    fn on_duplicate(&mut self, w: &Write, accepted: bool, report: &mut Report) {
        // A duplicate of a write the history never saw answered cannot be judged.
        let Some(original) = self.originals.get(&(w.client, w.request)) else { return };
        if original.accepted != accepted && self.reported.insert((Property::EqualToken, w.client, w.request)) {
            let detail = format!(
                "{}'s retried write {} to {} was answered accepted: {accepted} but the original answer to {} \
                 with {} was accepted: {}: a retry must get the original result",
                w.client, w.request, w.key, original.key, original.token, original.accepted
            );
            report.push(Violation::new(Property::EqualToken, w.at_us, detail).clients(&[w.client]).tokens(&[w.token]));
        }
    }
}

struct Write<'a> {
    at_us: u64,
    client: ClientId,
    request: RequestId,
    key: &'a Key,
    token: Token,
    path: WritePath,
}

impl Family for ResourceChecker {
    fn observe(&mut self, _ctx: &Context, _facts: &Facts, event: &Event, report: &mut Report) {
        let EventKind::WriteDone { client, request, key, token, path, verdict } = &event.kind else { return };
        let write = Write { at_us: event.at_us, client: *client, request: *request, key, token: *token, path: *path };
        match verdict {
            WriteVerdict::Accepted => {
                report.counters.writes_accepted += 1;
                self.on_accepted(&write, report);
            }
            WriteVerdict::Duplicate { accepted } => {
                report.counters.duplicate_writes += 1;
                self.on_duplicate(&write, *accepted, report);
            }
            // A retry older than the resource's memory: no effect, nothing to compare with.
            WriteVerdict::DuplicateForgotten => report.counters.duplicate_writes += 1,
            WriteVerdict::RejectedStale { .. } => {
                match path {
                    WritePath::Status => report.counters.stale_writes_rejected_status += 1,
                    WritePath::Ledger => report.counters.stale_writes_rejected_ledger += 1,
                }
                self.remember(&write, false);
            }
            WriteVerdict::RejectedEqualToken { .. } => {
                report.counters.equal_token_writes_rejected += 1;
                self.remember(&write, false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::super::Property;
    use crate::history::{WritePath, WriteVerdict};
    use fencelock::{ClientId, Token};

    #[test]
    fn clean_run_passes_and_counts_writes() {
        let verdict = happy()
            .at_ms(4_000)
            .write(1, 8, "k", 43, WritePath::Ledger, WriteVerdict::Accepted)
            .write(2, 3, "k", 42, WritePath::Status, WriteVerdict::RejectedStale { highest: Token(43) })
            .write(1, 9, "k", 43, WritePath::Status, WriteVerdict::Accepted)
            .check();
        assert_clean(&verdict);
        let c = &verdict.counters;
        assert_eq!((c.writes_accepted, c.duplicate_writes), (4, 1));
        assert_eq!((c.stale_writes_rejected_status, c.stale_writes_rejected_ledger), (1, 1));
    }

    #[test]
    fn a_stale_write_accepted_on_the_second_path_breaks_fenced_write() {
        let verdict = happy()
            .at_ms(4_000)
            // c1 no longer holds its tok43 (its own token is not in question here).
            .belief_end(1, "k", 43)
            .write(1, 8, "k", 41, WritePath::Ledger, WriteVerdict::Accepted)
            .write(1, 8, "k", 41, WritePath::Ledger, WriteVerdict::Duplicate { accepted: true })
            .check();
        assert_only(&verdict, Property::FencedWrite);
        assert_eq!(verdict.violations.len(), 1);
        assert_eq!(verdict.violations[0].tokens, vec![Token(41), Token(42)]);
    }

    #[test]
    fn a_resource_restart_does_not_reset_the_highest_token() {
        let verdict = happy()
            .at_ms(4_000)
            // c1 no longer holds its tok43 (its own token is not in question here).
            .belief_end(1, "k", 43)
            .crash(crate::history::Actor::Resource)
            .restart(crate::history::Actor::Resource)
            .write(1, 8, "k", 41, WritePath::Status, WriteVerdict::Accepted)
            .check();
        assert_only(&verdict, Property::FencedWrite);
    }

    #[test]
    fn two_holders_accepted_under_one_token_break_equal_token() {
        // c1 writes with c2's token 42 (a token the service did issue).
        let verdict = happy()
            .at_ms(4_000)
            .belief_end(1, "k", 43)
            .write(1, 8, "k", 42, WritePath::Status, WriteVerdict::Accepted)
            .check();
        assert_only(&verdict, Property::EqualToken);
        assert_eq!(verdict.violations[0].clients, vec![ClientId(1), ClientId(2)]);
    }

    #[test]
    fn a_retried_write_with_a_second_effect_breaks_equal_token() {
        let verdict = happy().at_ms(4_000).write(2, 2, "k", 42, WritePath::Status, WriteVerdict::Accepted).check();
        assert_only(&verdict, Property::EqualToken);
    }

    #[test]
    fn a_retry_answered_differently_breaks_equal_token() {
        let verdict = happy()
            .at_ms(4_000)
            // c1 no longer holds its tok43 (its own token is not in question here).
            .belief_end(1, "k", 43)
            .write(1, 4, "k", 41, WritePath::Ledger, WriteVerdict::Duplicate { accepted: true })
            .check();
        assert_only(&verdict, Property::EqualToken);
    }

    #[test]
    fn an_equal_token_rejection_is_counted() {
        let verdict = happy()
            .at_ms(4_000)
            // c1 no longer holds its tok43 (its own token is not in question here).
            .belief_end(1, "k", 43)
            .write(1, 8, "k", 42, WritePath::Status, WriteVerdict::RejectedEqualToken { highest: Token(42) })
            .check();
        assert_clean(&verdict);
        assert_eq!(verdict.counters.equal_token_writes_rejected, 1);
    }
}
