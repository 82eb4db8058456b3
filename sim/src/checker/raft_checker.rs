//! Raft's own properties: `election-safety`, `apply-agreement`, `commit-durability`.
//!
//! Election safety is judged over the whole run: restores move terms into a
//! new epoch, so a term never legitimately has two leaders. Agreement and
//! durability are judged per cluster epoch, since a whole-cluster restore
//! rolls the log back by design (SPEC.md).
//!
//! Agreement is Raft's State Machine Safety: no two nodes apply different
//! entries — term and payload — at one index. No-ops count: two nodes
//! applying no-ops of different terms at one index (the figure-8 bug) is a
//! divergence the commands alone never show.

use super::index_runs::IndexRuns;
use super::packed::PackedMap;
use super::state::{describe_payload, Answer, Context, EntrySeen, Facts, Seen};
use super::{Family, Property, Report, Violation};
use crate::history::{Event, EventKind};
use fencelock::raft::Role;
use fencelock::service::ClientReply;
use fencelock::{ApplyResult, ClientId, Command, LogIndex, NodeId, RequestId, Term, Token};
use std::collections::{BTreeMap, BTreeSet};

/// A command a server told its client was committed.
#[derive(Clone, Debug)]
struct Acked {
    node: NodeId,
    client: ClientId,
    command: Command,
    token: Option<Token>,
}

/// How many of a client's latest grants (and, apart, releases) each node's
/// applies are kept for, to match that node's acknowledgements against.
/// A server answers only a client's latest acquire from its session (an
/// older one gets `Noop`), so an acknowledgement of an entry four applies
/// old for the same client is not judged here, as one answered from a
/// snapshot is not: `grant-validity` and `linearizable` still see it. What
/// the checker keeps stays fixed however long the run.
const APPLIES_KEPT_PER_CLIENT: usize = 4;

/// One node's latest applies for one client, of one kind (grants or releases),
/// oldest first: the request, and the entry with its result.
type LastApplies = std::collections::VecDeque<(RequestId, (LogIndex, Command, ApplyResult))>;

/// What one node applied in this epoch, and how far a snapshot carried it.
#[derive(Clone, Debug, Default)]
struct Progress {
    /// The indices it applied, each run with the instant its lowest index
    /// was first applied: what `judge_lost` asks (was this index applied;
    /// if not, the first applied index above it, and when).
    applied: IndexRuns<u64>,
    snapshot_index: LogIndex,
}

#[derive(Debug, Default)]
pub(crate) struct RaftChecker {
    /// The first leader of every term, for the whole run (a second may come
    /// at any time in a faulty run), packed (`packed.rs`: two bytes a term).
    leaders: PackedMap<Term, NodeId>,
    split_terms: BTreeSet<Term>,
    disagreements: BTreeSet<(u32, LogIndex)>,
    /// Per (node, client, is-a-grant): the last entry of each of that
    /// client's latest requests the node applied, this epoch.
    last_apply: BTreeMap<(NodeId, ClientId, bool), LastApplies>,
    /// The acknowledged commands above the state's horizon
    /// ([`Context::forgotten_to`]): no server applies or installs a snapshot
    /// at or below it again, and every server has applied or installed up
    /// to it, so an acknowledgement there can no longer be overwritten,
    /// skipped or left out of a snapshot.
    acked: BTreeMap<LogIndex, Acked>,
    /// The horizon `acked` was last cut at.
    acked_forgotten_to: LogIndex,
    progress: BTreeMap<NodeId, Progress>,
    lost: BTreeSet<(u32, LogIndex)>,
}

impl RaftChecker {
    /// Forgets the acknowledgements the state's horizon has passed.
    fn forget_acked(&mut self, ctx: &Context) {
        let horizon = ctx.forgotten_to();
        if horizon > self.acked_forgotten_to {
            self.acked_forgotten_to = horizon;
            self.acked = self.acked.split_off(&LogIndex(horizon.0 + 1));
        }
    }

    fn on_leader(&mut self, at_us: u64, node: NodeId, term: Term, report: &mut Report) {
        self.leaders.insert(term, node);
        let first = self.leaders.get(term).expect("just recorded");
        if first == node {
            report.counters.elections = self.leaders.len() as u64;
            report.counters.first_leader_us.get_or_insert(at_us);
            return;
        }
        if self.split_terms.insert(term) {
            let detail = format!(
                "{first} and {node} both became leader of {term}: two leaders in one term can commit \
                 conflicting entries (look at vote durability and vote counting)"
            );
            report.push(Violation::new(Property::ElectionSafety, at_us, detail).nodes(&[first, node]));
        }
    }

    /// Any applied entry (`command` is `None` for a no-op): agreement on the
    /// entry itself — the first node to apply `index` in this epoch applied
    /// the same term, and a command where this is a command (which command,
    /// and its result, [`RaftChecker::on_applied`] compares) — and durability
    /// of an acknowledged command at that index.
    fn on_entry(&mut self, ctx: &Context, entry: EntrySeen, command: Option<&Command>, report: &mut Report) {
        let EntrySeen { seen: Seen { at_us, node }, index, term } = entry;
        if let Some(first) = ctx.entry_at(index) {
            let differs = first.term != term || first.command.is_some() != command.is_some();
            if differs && self.disagreements.insert((ctx.epoch, index)) {
                let detail = format!(
                    "{node} applied {} at {index} where {} applied {}: two nodes applied different entries at one \
                     index (look at the commit rule and log matching)",
                    describe_payload(command, term),
                    first.node,
                    first.what()
                );
                report.push(Violation::new(Property::ApplyAgreement, at_us, detail).nodes(&[first.node, node]));
            }
        }
        if let Some(acked) = self.acked.get(&index) {
            if command != Some(&acked.command) && self.lost.insert((ctx.epoch, index)) {
                let detail = format!(
                    "{node} applied {} at {index}, where {} had acknowledged {:?} to {} as committed: \
                     an acknowledged entry was overwritten",
                    describe_payload(command, term),
                    acked.node,
                    acked.command,
                    acked.client
                );
                let tokens: Vec<Token> = acked.token.into_iter().collect();
                let v = Violation::new(Property::CommitDurability, at_us, detail);
                report.push(v.nodes(&[acked.node, node]).clients(&[acked.client]).tokens(&tokens));
            }
        }
        self.progress.entry(node).or_default().applied.insert(index, at_us);
    }

    fn on_applied(
        &mut self,
        ctx: &Context,
        facts: &Facts,
        entry: EntrySeen,
        command: &Command,
        result: &ApplyResult,
        report: &mut Report,
    ) {
        let EntrySeen { seen: Seen { at_us, node }, index, .. } = entry;
        if let Some(first) = ctx.applied_at(index).filter(|_| !facts.first_apply) {
            let differs = first.command != *command || first.result != *result;
            if differs && self.disagreements.insert((ctx.epoch, index)) {
                let detail = format!(
                    "{node} applied {command:?} -> {result:?} at {index} where {} applied {:?} -> {:?}: \
                     the replicas' state machines diverged",
                    first.node, first.command, first.result
                );
                report.push(Violation::new(Property::ApplyAgreement, at_us, detail).nodes(&[first.node, node]));
            }
        }
        let holder = match command {
            Command::Grant { holder, .. } => Some((*holder, true)),
            Command::Release { holder, .. } => Some((*holder, false)),
            // A Decline's answer is judged by `linearizable` (the session keeps it).
            Command::Expire { .. } | Command::Decline { .. } => None,
        };
        if let Some((holder, is_grant)) = holder {
            let kept = self.last_apply.entry((node, holder.client, is_grant)).or_default();
            kept.retain(|(request, _)| *request != holder.request);
            kept.push_back((holder.request, (index, command.clone(), *result)));
            if kept.len() > APPLIES_KEPT_PER_CLIENT {
                kept.pop_front();
            }
        }
    }

    fn on_snapshot(
        &mut self,
        ctx: &Context,
        at_us: u64,
        node: NodeId,
        index: LogIndex,
        token_last: Token,
        report: &mut Report,
    ) {
        let progress = self.progress.entry(node).or_default();
        progress.snapshot_index = progress.snapshot_index.max(index);
        // A snapshot past an acknowledged grant must count that grant's token.
        for (acked_index, acked) in self.acked.range(..=index) {
            let Some(token) = acked.token.filter(|t| *t > token_last) else { continue };
            if self.lost.insert((ctx.epoch, *acked_index)) {
                let detail = format!(
                    "{node} installed a snapshot at {index} whose last token is {token_last}, but {} had \
                     acknowledged {token} to {} at {acked_index}: the acknowledged grant is not in the snapshot",
                    acked.node, acked.client
                );
                let v = Violation::new(Property::CommitDurability, at_us, detail);
                report.push(v.nodes(&[acked.node, node]).clients(&[acked.client]).tokens(&[token, token_last]));
            }
        }
    }

    fn on_replied(&mut self, ctx: &Context, answer: Answer, reply: &ClientReply, report: &mut Report) {
        let Answer { seen: Seen { at_us, node }, client, request } = answer;
        let (is_grant, token) = match reply {
            ClientReply::Granted { token, .. } => (true, Some(*token)),
            ClientReply::Released => (false, None),
            _ => return,
        };
        // An acknowledgement the node cannot back with its own apply in this
        // epoch (answered from a snapshot, from before a restore, or of a
        // request older than the client's latest few) is not judged here;
        // `grant-validity` judges unknown tokens.
        let kept = self.last_apply.get(&(node, client, is_grant)).into_iter().flatten();
        let Some((_, (index, command, result))) = kept.rev().find(|(kept, _)| *kept == request) else { return };
        let matches = match (result, token) {
            (ApplyResult::Granted { token: applied }, Some(replied)) => *applied == replied,
            (ApplyResult::Released, None) => true,
            _ => false,
        };
        if !matches || self.acked.contains_key(index) {
            return;
        }
        let acked = Acked { node, client, command: command.clone(), token };
        // The first entry applied at the index, a no-op included, is the cluster's.
        if let Some(first) = ctx.entry_at(*index).filter(|first| first.command.as_ref() != Some(command)) {
            if self.lost.insert((ctx.epoch, *index)) {
                let detail = format!(
                    "{node} acknowledged {command:?} to {client} as committed at {index}, but {} applied {} \
                     there: the acknowledgement is for an entry the cluster does not hold",
                    first.node,
                    first.what()
                );
                let tokens: Vec<Token> = token.into_iter().collect();
                let v = Violation::new(Property::CommitDurability, at_us, detail);
                report.push(v.nodes(&[node, first.node]).clients(&[client]).tokens(&tokens));
            }
        }
        self.acked.insert(*index, acked);
    }

    /// An acknowledged entry is lost if a node applied past it without
    /// applying it and without a snapshot that covers it.
    fn judge_lost(&mut self, ctx: &Context, report: &mut Report) {
        for (index, acked) in &self.acked {
            if self.lost.contains(&(ctx.epoch, *index)) {
                continue;
            }
            let mut skipped_by = Vec::new();
            let mut first_past_us = u64::MAX;
            for (node, progress) in &self.progress {
                if progress.applied.contains(*index) || progress.snapshot_index >= *index {
                    continue;
                }
                if let Some((_, past_us)) = progress.applied.first_above(*index) {
                    skipped_by.push(*node);
                    first_past_us = first_past_us.min(past_us);
                }
            }
            if skipped_by.is_empty() {
                continue;
            }
            self.lost.insert((ctx.epoch, *index));
            let names: Vec<String> = skipped_by.iter().map(|n| n.to_string()).collect();
            let detail = format!(
                "{} acknowledged {:?} to {} at {index}, but {} applied later entries without it: \
                 an acknowledged entry was lost",
                acked.node,
                acked.command,
                acked.client,
                names.join(", ")
            );
            skipped_by.push(acked.node);
            let tokens: Vec<Token> = acked.token.into_iter().collect();
            let v = Violation::new(Property::CommitDurability, first_past_us, detail);
            report.push(v.nodes(&skipped_by).clients(&[acked.client]).tokens(&tokens));
        }
    }
}

impl Family for RaftChecker {
    fn observe(&mut self, ctx: &Context, facts: &Facts, event: &Event, report: &mut Report) {
        self.forget_acked(ctx);
        match &event.kind {
            EventKind::Role { node, role: Role::Leader, term, .. } => {
                self.on_leader(event.at_us, *node, *term, report);
            }
            EventKind::Applied { node, index, term, command, result } => {
                let entry = EntrySeen { seen: Seen { at_us: event.at_us, node: *node }, index: *index, term: *term };
                self.on_entry(ctx, entry, Some(command), report);
                self.on_applied(ctx, facts, entry, command, result, report);
            }
            EventKind::AppliedNoop { node, index, term } => {
                let entry = EntrySeen { seen: Seen { at_us: event.at_us, node: *node }, index: *index, term: *term };
                self.on_entry(ctx, entry, None, report);
            }
            EventKind::SnapshotInstalled { node, index, token_last, .. } => {
                self.on_snapshot(ctx, event.at_us, *node, *index, *token_last, report);
            }
            EventKind::Replied { node, client, request, reply } => {
                let answer =
                    Answer { seen: Seen { at_us: event.at_us, node: *node }, client: *client, request: *request };
                self.on_replied(ctx, answer, reply, report);
            }
            EventKind::ClusterRestored { .. } => {
                // The old epoch ends here: judge its acknowledgements, then
                // forget its indices, which the new epoch reuses.
                self.judge_lost(ctx, report);
                self.last_apply.clear();
                self.acked.clear();
                self.acked_forgotten_to = LogIndex(0);
                self.progress.clear();
            }
            _ => {}
        }
    }

    fn finish(&mut self, ctx: &Context, report: &mut Report) {
        self.judge_lost(ctx, report);
    }
}

#[cfg(test)]
mod tests;
