//! Availability after the heal: `answered`, `progress`, `leader-stability`
//! and `work-budget` (SPEC.md §6), and the availability figures of both
//! phases ([`super::Counters`]).
//!
//! A service that answers nothing, commits nothing, re-elects forever or
//! spins must not pass a run that `liveness` alone would call clean. Each
//! rule is judged only once the faults are healed, only where the run lasted
//! long enough to decide it, and with bounds derived from the model
//! ([`super::CheckConfig`]), never from a measured run:
//!
//! - `answered`: every request pending at the heal or sent after it gets a
//!   final answer (not `NotLeader`, not `Unavailable`) within its wait plus
//!   the leader bound. A give-up settles it only with an excuse the history
//!   shows: the client walked away, or crashed, paused or stalled after
//!   sending, or gave up before the leader bound had passed. And each
//!   attempt is answered by the server it reached, within its wait plus the
//!   progress bound (a server that cannot serve says `Unavailable` or
//!   `NotLeader`, never nothing), a `NotLeader` naming the leader the server
//!   knows. At any time, an acquire is never answered `NotHeld` while the
//!   lock its own Grant gave it is still held.
//! - `progress`: from the leader bound on, a key that is free (by the
//!   committed lock table) while some client asks for it is granted within
//!   the progress bound.
//! - `leader-stability`: after the heal, leaders of at most one new term,
//!   plus one per server the heal brought back (restarted or resumed).
//! - `work-budget`: per stretch of the `Work` samples, Raft messages,
//!   `Ready` rounds and disk syncs within a budget from the heartbeat, the
//!   cluster size and the requests, expiries and campaigns of the stretch.

use super::packed::PackedMap;
use super::state::{is_removal, Context, Facts};
use super::{Family, Property, Report, Violation};
use crate::history::{Actor, Event, EventKind, GiveUp};
use fencelock::raft::Role;
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ApplyResult, ClientId, Command, Key, NodeId, RequestId, Term, Token};
use std::collections::{BTreeMap, BTreeSet};

/// The work budget's factor over its estimate of the work a stretch needs.
pub const WORK_BUDGET_FACTOR: u64 = 4;

/// One client request, from its first send.
#[derive(Clone, Debug)]
struct Request {
    first_us: u64,
    /// The first attempt sent at or after the heal: an attempt of the
    /// faults may have been lost, and the service owes an answer from the
    /// client's next try.
    first_healed_us: Option<u64>,
    wait_ms: u64,
    /// The key an Acquire asks for.
    acquire: Option<Key>,
    /// The first final answer (not a redirect or `Unavailable`), when it came.
    answered_us: Option<u64>,
    /// The last reply that was not final, for the violation's sentence.
    last_reply: Option<ClientReply>,
    gave_up: Option<(u64, GiveUp)>,
    /// The last time a leader turned it away (a full wait queue): its
    /// deadline runs afresh from there, and a give-up after it is the
    /// backpressure's, not the service's failure.
    turned_away_us: Option<u64>,
    /// Turned away and not sent again since: it asks for no key meanwhile.
    away: bool,
}

impl Request {
    fn settled(&self) -> bool {
        self.answered_us.is_some() || self.gave_up.is_some()
    }

    /// When the service owes its final answer: the wait plus the leader
    /// bound from the first send, or for a request of the faults from the
    /// client's first try after the heal (the heal itself if it made none).
    /// A request turned away counts from its last turn-away: under
    /// backpressure the service owes an `Unavailable` (each attempt's rule),
    /// not a final answer within a bound.
    fn deadline_us(&self, healed_us: u64, leader_bound_us: u64) -> u64 {
        let from_us =
            if self.first_us >= healed_us { self.first_us } else { self.first_healed_us.unwrap_or(healed_us) };
        from_us.max(self.turned_away_us.unwrap_or(0)) + self.wait_ms * 1_000 + leader_bound_us
    }

    /// When the first final answer or the give-up came, if either did.
    fn settled_us(&self) -> Option<u64> {
        match (self.answered_us, self.gave_up) {
            (Some(a), Some((g, _))) => Some(a.min(g)),
            (Some(a), None) => Some(a),
            (None, Some((g, _))) => Some(g),
            (None, None) => None,
        }
    }
}

/// Whether a reply ends a request: a redirect or `Unavailable` only asks the client to retry.
fn is_final(reply: &ClientReply) -> bool {
    !matches!(reply, ClientReply::NotLeader { .. } | ClientReply::Unavailable)
}

/// A key free while some client asks for it, since `since_us`.
#[derive(Clone, Copy, Debug)]
struct Starving {
    since_us: u64,
    judged: bool,
}

/// One attempt of a request after the heal: sent to `to` at `sent_us`.
#[derive(Clone, Copy, Debug)]
struct Attempt {
    client: ClientId,
    request: RequestId,
    to: NodeId,
    sent_us: u64,
    wait_ms: u64,
}

/// Per stretch of the `Work` samples: what the history says the servers had to do.
#[derive(Clone, Copy, Debug, Default)]
struct Demand {
    requests: u64,
    proposals: u64,
    campaigns: u64,
    /// Entries applied, on every server: a server catching up after the
    /// heal syncs and acknowledges what it receives.
    applied: u64,
}

/// Requests settled before the heal, counted and forgotten: `answered`
/// judges only what was pending at the heal or sent after it, so a request
/// settled during the faults matters only to the fault phase's figures, and
/// all it tells them is known once it settles. What a long run keeps is the
/// requests still in flight, not every request it made.
#[derive(Clone, Copy, Debug, Default)]
struct Retired {
    requests: u64,
    answered: u64,
}

/// How often the interruptions no request can meet are forgotten: every
/// ten simulated seconds (a look at every kept request each time).
const CUT_EVERY_US: u64 = 10_000_000;

#[derive(Debug, Default)]
pub(crate) struct AvailabilityChecker {
    requests: BTreeMap<(ClientId, RequestId), Request>,
    /// Requests settled before the heal, in the order they settled: retired
    /// once the history has passed the instant they settled (an
    /// interruption recorded at that same instant still excuses them).
    settling: std::collections::VecDeque<(u64, ClientId, RequestId)>,
    retired: Retired,
    /// The instants of each client's crashes, pauses and stalls, packed
    /// (`packed.rs`), from the first send of the oldest request still
    /// kept on: every span asked about starts there or later.
    interrupted_us: BTreeMap<ClientId, PackedMap<u64, ()>>,
    /// When the instants were last cut ([`AvailabilityChecker::forget_interruptions`]).
    interruptions_cut_us: u64,
    /// The committed lock table (first applies); `None` after a cluster
    /// restore until the key's next grant or removal shows it.
    held: BTreeMap<Key, Option<bool>>,
    /// Acquires asking for each key now: (client, request).
    wanted: BTreeMap<Key, BTreeSet<(ClientId, RequestId)>>,
    starving: BTreeMap<Key, Starving>,
    /// The last restart, restore or resume of each server, and the servers
    /// whose last one came at the heal's instant (the heal brought them back).
    returning: BTreeMap<NodeId, u64>,
    returned_at_heal: BTreeSet<NodeId>,
    /// Each server's pause: when it began, and when it ended (`None` while
    /// it lasts); forgotten at a restart or restore.
    pauses: BTreeMap<NodeId, (u64, Option<u64>)>,
    /// The pauses the heal ended, in µs summed over their servers: every
    /// message sent to a paused server waits for it, and it answers them all
    /// when it resumes.
    backlog_us: u64,
    /// The highest term any server was seen leading.
    highest_leader_term: Term,
    /// New leader terms after the heal, in order: (term, node, at).
    new_leaders: Vec<(Term, NodeId, u64)>,
    stability_judged: bool,
    /// Demand per work stretch after the heal.
    demand: Vec<Demand>,
    /// Attempts sent after the heal, and each server's replies by request.
    attempts: Vec<Attempt>,
    replies: BTreeMap<(NodeId, ClientId, RequestId), Vec<u64>>,
    /// The leader each server last said it follows.
    known_leader: BTreeMap<NodeId, Option<NodeId>>,
    hintless_judged: bool,
    /// The grant of each acquire, by its first apply: the key and token its
    /// client is owed (forgotten once any server removes that lock, and at a
    /// whole-cluster restore).
    grants: BTreeMap<(ClientId, RequestId), (Key, Token)>,
    denied_judged: bool,
}

impl AvailabilityChecker {
    /// Whether `client` crashed, paused or stalled from `from_us` until
    /// `until_us` (the end of the run when `None`): the excuse of a request
    /// left unanswered in between.
    fn interrupted(&self, client: ClientId, from_us: u64, until_us: Option<u64>) -> bool {
        let until_us = until_us.unwrap_or(u64::MAX);
        let first_us = self.interrupted_us.get(&client).and_then(|instants| instants.first_from(from_us));
        first_us.is_some_and(|at_us| at_us <= until_us)
    }

    /// Forgets the interruptions no span asked about can hold any more:
    /// those before the first send of every request kept (a request is
    /// asked about from its first send until it retires, or the run's end),
    /// and after the heal, before it (each attempt then is asked about from
    /// its send). A new request starts at `now_us` or later.
    fn forget_interruptions(&mut self, now_us: u64, healed_us: Option<u64>) {
        self.interruptions_cut_us = now_us;
        // Every kept request was first sent by now.
        let oldest_us = self.requests.values().map(|request| request.first_us).min().unwrap_or(now_us);
        let from_us = oldest_us.min(healed_us.unwrap_or(u64::MAX));
        for instants in self.interrupted_us.values_mut() {
            instants.forget_below(from_us);
        }
    }

    fn progress_start_us(ctx: &Context, healed_us: u64) -> u64 {
        healed_us + ctx.config.liveness_leader_bound_ms * 1_000
    }

    fn key_free(&self, key: &Key) -> bool {
        self.held.get(key).copied().unwrap_or(Some(false)) == Some(false)
    }

    fn key_wanted(&self, key: &Key) -> bool {
        self.wanted.get(key).is_some_and(|w| !w.is_empty())
    }

    /// Starts or ends the key's starving stretch after a change at `at_us`.
    fn restate(&mut self, key: &Key, at_us: u64) {
        if self.key_free(key) && self.key_wanted(key) {
            self.starving.entry(key.clone()).or_insert(Starving { since_us: at_us, judged: false });
        } else {
            self.starving.remove(key);
        }
    }

    fn unwant(&mut self, client: ClientId, request: RequestId, at_us: u64) {
        let Some(key) = self.requests.get(&(client, request)).and_then(|r| r.acquire.clone()) else { return };
        if let Some(wanted) = self.wanted.get_mut(&key) {
            wanted.remove(&(client, request));
        }
        self.restate(&key, at_us);
    }

    fn unwant_client(&mut self, client: ClientId, at_us: u64) {
        let asked: Vec<RequestId> =
            self.wanted.values().flatten().filter(|(c, _)| *c == client).map(|(_, r)| *r).collect();
        for request in asked {
            self.unwant(client, request, at_us);
        }
    }

    /// Judges every starving key whose stretch passed the progress bound by `now_us`.
    fn judge_starving(&mut self, ctx: &Context, healed_us: u64, now_us: u64, report: &mut Report) {
        let start_us = Self::progress_start_us(ctx, healed_us);
        let bound_us = ctx.config.progress_bound_ms * 1_000;
        for (key, starving) in &mut self.starving {
            let since_us = starving.since_us.max(start_us);
            let deadline_us = since_us + bound_us;
            if starving.judged || now_us <= deadline_us {
                continue;
            }
            starving.judged = true;
            let askers: Vec<ClientId> = self.wanted.get(key).into_iter().flatten().map(|(client, _)| *client).collect();
            let asked: Vec<String> = askers.iter().map(ClientId::to_string).collect();
            let detail = format!(
                "{key} was free from {}ms while {} asked for it, and nobody was granted it by {}ms \
                 although every fault was healed: the service must grant a free key within {}ms",
                since_us / 1_000,
                asked.join(" and "),
                deadline_us / 1_000,
                ctx.config.progress_bound_ms
            );
            report.push(Violation::new(Property::Progress, deadline_us, detail).clients(&askers));
        }
    }

    fn on_request(&mut self, client: ClientId, request: RequestId, body: &ClientRequest, at_us: u64, healed: bool) {
        let (wait_ms, acquire) = match body {
            ClientRequest::Cancel => {
                // The client stops asking for whatever it waited for.
                self.unwant_client(client, at_us);
                return;
            }
            ClientRequest::Acquire { key, wait_ms, .. } => (*wait_ms, Some(key.clone())),
            ClientRequest::Renew { .. } | ClientRequest::Release { .. } | ClientRequest::Revoke { .. } => (0, None),
        };
        let new = !self.requests.contains_key(&(client, request));
        let entry = self.requests.entry((client, request)).or_insert(Request {
            first_us: at_us,
            first_healed_us: None,
            wait_ms,
            acquire: acquire.clone(),
            answered_us: None,
            last_reply: None,
            gave_up: None,
            turned_away_us: None,
            away: false,
        });
        if healed {
            entry.first_healed_us.get_or_insert(at_us);
        }
        // A new acquire, or one turned away and asking again, wants its key.
        let asks = new || std::mem::take(&mut entry.away);
        if let (true, Some(key)) = (asks, acquire) {
            self.wanted.entry(key.clone()).or_default().insert((client, request));
            self.restate(&key, at_us);
        }
    }

    /// A leader turned the request away (a full wait queue): until the
    /// client asks again it waits for no key at the service. Believed only
    /// while the key is held (by the committed table): a queue fills behind
    /// a holder, and a server that turned clients away from a free key would
    /// otherwise pass `answered` and `progress` granting nothing.
    fn on_turned_away(&mut self, client: ClientId, request: RequestId, key: &Key, at_us: u64) {
        if self.key_free(key) {
            return;
        }
        let Some(pending) = self.requests.get_mut(&(client, request)) else { return };
        pending.turned_away_us = Some(at_us);
        pending.away = true;
        self.unwant(client, request, at_us);
    }

    fn on_answer(&mut self, client: ClientId, request: RequestId, reply: ClientReply, at_us: u64) {
        let Some(pending) = self.requests.get_mut(&(client, request)) else { return };
        if !is_final(&reply) {
            pending.last_reply = Some(reply);
            return;
        }
        pending.answered_us.get_or_insert(at_us);
        self.unwant(client, request, at_us);
    }

    /// A request that settled before the heal waits to be retired.
    fn settle(&mut self, client: ClientId, request: RequestId) {
        if let Some(settled_us) = self.requests.get(&(client, request)).and_then(Request::settled_us) {
            self.settling.push_back((settled_us, client, request));
        }
    }

    /// Retires the requests that settled before `now_us`: counted now, and
    /// forgotten. A client neither retries nor gives up a request it has
    /// settled, and whatever interrupted it before it settled is recorded,
    /// so nothing after this changes how it counts.
    fn retire_settled(&mut self, now_us: u64) {
        while let Some(&(settled_us, client, request)) = self.settling.front() {
            if settled_us >= now_us {
                return;
            }
            self.settling.pop_front();
            let Some(pending) = self.requests.remove(&(client, request)) else { continue };
            if let Some(answered) = self.tally(client, &pending) {
                self.retired.requests += 1;
                self.retired.answered += u64::from(answered);
            }
        }
    }

    /// Whether a request counts in the phases' figures (`None`: it walked
    /// away, or its client was interrupted before it settled), and if so
    /// whether it was answered.
    fn tally(&self, client: ClientId, request: &Request) -> Option<bool> {
        let walked_away = matches!(request.gave_up, Some((_, GiveUp::WalkedAway)));
        let interrupted = self.interrupted(client, request.first_us, request.settled_us());
        (!walked_away && !interrupted).then_some(request.answered_us.is_some())
    }

    fn on_apply(&mut self, facts: &Facts, command: &Command, result: &ApplyResult, at_us: u64) {
        if !facts.first_apply {
            return;
        }
        let key = command.key();
        match (command, result) {
            (Command::Grant { holder, .. }, ApplyResult::Granted { token }) => {
                self.grants.insert((holder.client, holder.request), (key.clone(), *token));
                self.held.insert(key.clone(), Some(true));
            }
            (command, result) if is_removal(command, result).is_some() => {
                self.held.insert(key.clone(), Some(false));
            }
            _ => return,
        }
        self.restate(&key.clone(), at_us);
    }

    fn on_role(&mut self, node: NodeId, role: Role, term: Term, healed_us: Option<u64>, at_us: u64) {
        if role != Role::Leader || term <= self.highest_leader_term {
            return;
        }
        self.highest_leader_term = term;
        if healed_us.is_some() {
            self.new_leaders.push((term, node, at_us));
        }
    }

    fn on_heal(&mut self, at_us: u64) {
        self.returned_at_heal = self.returning.iter().filter(|(_, us)| **us == at_us).map(|(n, _)| *n).collect();
        let ended_now = |(_, (paused_us, resumed_us)): (&NodeId, &(u64, Option<u64>))| {
            (*resumed_us == Some(at_us)).then(|| at_us - paused_us)
        };
        self.backlog_us = self.pauses.iter().filter_map(ended_now).sum();
    }

    /// Leader changes after the heal beyond one plus one per server the heal brought back.
    fn judge_stability(&mut self, healed_us: u64, report: &mut Report) {
        if self.stability_judged {
            return;
        }
        let allowed = 1 + self.returned_at_heal.len();
        let Some(&(term, node, at_us)) = self.new_leaders.get(allowed) else { return };
        self.stability_judged = true;
        let returned: Vec<String> = self.returned_at_heal.iter().map(NodeId::to_string).collect();
        let why = if returned.is_empty() {
            "no server came back at the heal".to_string()
        } else {
            format!("{} came back at the heal", returned.join(", "))
        };
        let detail = format!(
            "{node} became leader of {term} at {}ms, the {} new leader since the heal at {}ms, where {allowed} \
             may follow a heal ({why}): the cluster churns leaders with every fault healed",
            at_us / 1_000,
            ordinal(allowed + 1),
            healed_us / 1_000,
        );
        report.push(Violation::new(Property::LeaderStability, at_us, detail).nodes(&[node]));
    }

    fn stretch(&mut self, ctx: &Context, at_us: u64) -> Option<&mut Demand> {
        let healed_us = ctx.healed_at_us?;
        let index = ((at_us.checked_sub(healed_us)?) / ctx.config.work_every_us) as usize;
        if self.demand.len() <= index {
            self.demand.resize(index + 1, Demand::default());
        }
        Some(&mut self.demand[index])
    }

    fn note_demand(&mut self, ctx: &Context, event: &Event) {
        match &event.kind {
            EventKind::Requested { body, .. } if !matches!(body, ClientRequest::Cancel) => {
                if let Some(d) = self.stretch(ctx, event.at_us) {
                    d.requests += 1;
                }
            }
            EventKind::ExpireProposed { .. } | EventKind::GhostReleaseProposed { .. } => {
                if let Some(d) = self.stretch(ctx, event.at_us) {
                    d.proposals += 1;
                }
            }
            EventKind::Role { role: Role::Candidate | Role::PreCandidate | Role::Leader, .. } => {
                if let Some(d) = self.stretch(ctx, event.at_us) {
                    d.campaigns += 1;
                }
            }
            EventKind::Applied { .. } | EventKind::AppliedNoop { .. } | EventKind::SnapshotInstalled { .. } => {
                if let Some(d) = self.stretch(ctx, event.at_us) {
                    d.applied += 1;
                }
            }
            _ => {}
        }
    }

    /// Judges each stretch's work against its budget (`work-budget`).
    fn judge_work(&self, ctx: &Context, at_us: u64, every_us: u64, work: [&[u64]; 3], report: &mut Report) {
        let Some(healed_us) = ctx.healed_at_us else { return };
        let config = &ctx.config;
        let peers = u64::from(config.nodes.saturating_sub(1));
        let servers = u64::from(config.nodes);
        for (i, ((messages, rounds), syncs)) in work[0].iter().zip(work[1]).zip(work[2]).enumerate() {
            let start_us = healed_us + i as u64 * every_us;
            let length_us = every_us.min(at_us.saturating_sub(start_us));
            if length_us == 0 {
                continue;
            }
            let demand = self.demand.get(i).copied().unwrap_or_default();
            // One operation: a request, a proposal of the leader's own, a campaign, and the stretch itself.
            let operations = demand.requests + demand.proposals + demand.campaigns + 1;
            let heartbeats = peers * length_us.div_ceil(config.heartbeat_ms * 1_000);
            let ticks = servers * length_us.div_ceil(config.tick_ms * 1_000);
            // Each heartbeat and each operation's append is answered: two
            // messages a peer; an entry a server applies came in one append.
            // In the heal's own stretch every returning server is probed
            // and caught up beside the heartbeats: they count twice there.
            // And a server the heal resumed answers every heartbeat its
            // leader sent while it was paused, each answer prompting an
            // append: two exchanges per heartbeat it missed.
            let probes = if i == 0 { heartbeats } else { 0 };
            let backlog = if i == 0 { 2 * self.backlog_us.div_ceil(config.heartbeat_ms * 1_000) } else { 0 };
            let message_budget =
                WORK_BUDGET_FACTOR * 2 * (heartbeats + probes + backlog + peers * operations + demand.applied);
            // A round per input at most: a tick, a message or a request.
            let round_budget = WORK_BUDGET_FACTOR * (ticks + messages + demand.requests);
            // A sync per server per operation (its entry, or its vote), and
            // one per entry a server applies (a catching-up server's appends).
            let sync_budget = WORK_BUDGET_FACTOR * (servers * operations + demand.applied);
            let over = [
                ("Raft messages", *messages, message_budget),
                ("Ready rounds", *rounds, round_budget),
                ("disk syncs", *syncs, sync_budget),
            ]
            .into_iter()
            .find(|(_, done, budget)| done > budget);
            if let Some((what, done, budget)) = over {
                let end_us = start_us + length_us;
                let detail = format!(
                    "the servers did {done} {what} from {}ms to {}ms with every fault healed, over the budget of \
                     {budget} for {} requests, {} leader proposals, {} campaigns and {} entries applied \
                     ({WORK_BUDGET_FACTOR} times the heartbeats and the work those need): a busy loop",
                    start_us / 1_000,
                    end_us / 1_000,
                    demand.requests,
                    demand.proposals,
                    demand.campaigns,
                    demand.applied,
                );
                report.push(Violation::new(Property::WorkBudget, end_us, detail));
            }
        }
    }

    fn count(&self, ctx: &Context, report: &mut Report) {
        let healed_us = ctx.healed_at_us;
        let leader_bound_us = ctx.config.liveness_leader_bound_ms * 1_000;
        let phases = &mut report.counters.phases;
        phases.fault_requests += self.retired.requests;
        phases.fault_answered += self.retired.answered;
        for ((client, _), request) in &self.requests {
            // A request the run ended on before its deadline is not counted unanswered.
            let deadline_us = request.first_us + request.wait_ms * 1_000 + leader_bound_us;
            let undecided = !request.settled() && deadline_us > ctx.config.run_end_us;
            let Some(answered) = self.tally(*client, request).filter(|_| !undecided) else { continue };
            let answered = u64::from(answered);
            if healed_us.is_some_and(|h| request.first_us >= h) {
                phases.healed_requests += 1;
                phases.healed_answered += answered;
            } else {
                phases.fault_requests += 1;
                phases.fault_answered += answered;
            }
        }
    }
}

impl AvailabilityChecker {
    /// A redirect after the heal that names no leader although the server
    /// follows one sends the client guessing (judged once: the first).
    fn judge_hint(&mut self, node: NodeId, client: ClientId, reply: &ClientReply, at_us: u64, report: &mut Report) {
        let ClientReply::NotLeader { leader: None } = reply else { return };
        let Some(Some(leader)) = self.known_leader.get(&node).copied() else { return };
        if leader == node || self.hintless_judged {
            return;
        }
        self.hintless_judged = true;
        let detail = format!(
            "{node} redirected {client} without naming a leader at {}ms although it follows {leader}, with \
             every fault healed: the client must guess, one server after another",
            at_us / 1_000
        );
        report.push(Violation::new(Property::Answered, at_us, detail).nodes(&[node, leader]).clients(&[client]));
    }

    /// An acquire answered `NotHeld` while the lock its own Grant gave it is
    /// still held (no removal of that key and token applied anywhere): the
    /// client is told it has no lock while it holds one, and the key stays
    /// blocked for a lease nobody uses. The answering server applied the
    /// Grant (it answers from its session), so a removal it had applied
    /// would be in the history already: the rule holds during the faults
    /// too. Judged once: the first.
    #[allow(clippy::too_many_arguments)]
    fn judge_denied_grant(
        &mut self,
        ctx: &Context,
        node: NodeId,
        client: ClientId,
        request: RequestId,
        reply: &ClientReply,
        at_us: u64,
        report: &mut Report,
    ) {
        if *reply != ClientReply::NotHeld || self.denied_judged {
            return;
        }
        let Some((key, token)) = self.grants.get(&(client, request)) else { return };
        if ctx.was_removed(key, *token) {
            return;
        }
        self.denied_judged = true;
        let detail = format!(
            "{node} answered {client}'s {request} NotHeld at {}ms although its grant {token} of {key} is \
             still held (never released or expired): the client never learns of a lock it holds, and {key} \
             stays blocked for a lease nobody uses",
            at_us / 1_000
        );
        report.push(Violation::new(Property::Answered, at_us, detail).nodes(&[node]).clients(&[client]));
    }

    /// Every attempt after the heal is answered by the server it reached
    /// within its wait plus the progress bound (judged once: the first
    /// silent attempt).
    fn judge_attempts(&self, ctx: &Context, report: &mut Report) {
        let bound_us = ctx.config.progress_bound_ms * 1_000;
        for attempt in &self.attempts {
            let deadline_us = attempt.sent_us + attempt.wait_ms * 1_000 + bound_us;
            if deadline_us > ctx.config.run_end_us {
                continue;
            }
            if self.interrupted(attempt.client, attempt.sent_us, Some(deadline_us)) {
                continue;
            }
            // A request the client walked away from (cancelled, or its
            // connection dropped) is owed no answer.
            let request = self.requests.get(&(attempt.client, attempt.request));
            if request.is_some_and(|r| matches!(r.gave_up, Some((_, GiveUp::WalkedAway)))) {
                continue;
            }
            let replies = self.replies.get(&(attempt.to, attempt.client, attempt.request));
            if replies.into_iter().flatten().any(|at| (attempt.sent_us..=deadline_us).contains(at)) {
                continue;
            }
            let Attempt { client, request, to, sent_us, .. } = attempt;
            let detail = format!(
                "{client} sent {request} to {to} at {}ms and {to} had not replied by {}ms, with every fault \
                 healed: a server that cannot serve a request says so (Unavailable, or NotLeader with the \
                 leader), it does not leave the client to time out",
                sent_us / 1_000,
                deadline_us / 1_000
            );
            report.push(Violation::new(Property::Answered, deadline_us, detail).nodes(&[*to]).clients(&[*client]));
            return;
        }
    }
}

/// `2nd`, `3rd`, `4th`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

impl Family for AvailabilityChecker {
    fn observe(&mut self, ctx: &Context, facts: &Facts, event: &Event, report: &mut Report) {
        let at_us = event.at_us;
        let healed_us = ctx.healed_at_us;
        if let Some(healed_us) = healed_us {
            self.judge_starving(ctx, healed_us, at_us, report);
        }
        self.retire_settled(at_us);
        if at_us >= self.interruptions_cut_us.saturating_add(CUT_EVERY_US) {
            self.forget_interruptions(at_us, healed_us);
        }
        self.note_demand(ctx, event);
        match &event.kind {
            EventKind::Healed => self.on_heal(at_us),
            EventKind::Requested { client, request, body, to } => {
                if healed_us.is_some() && !matches!(body, ClientRequest::Cancel) {
                    let wait_ms = if let ClientRequest::Acquire { wait_ms, .. } = body { *wait_ms } else { 0 };
                    let attempt = Attempt { client: *client, request: *request, to: *to, sent_us: at_us, wait_ms };
                    self.attempts.push(attempt);
                }
                self.on_request(*client, *request, body, at_us, healed_us.is_some());
            }
            EventKind::Replied { node, client, request, reply } => {
                self.judge_denied_grant(ctx, *node, *client, *request, reply, at_us, report);
                if healed_us.is_some() {
                    self.replies.entry((*node, *client, *request)).or_default().push(at_us);
                    self.judge_hint(*node, *client, reply, at_us, report);
                }
            }
            EventKind::Answered { client, request, reply, .. } => {
                self.on_answer(*client, *request, *reply, at_us);
                if healed_us.is_none() {
                    self.settle(*client, *request);
                }
            }
            EventKind::TurnedAway { holder, key, .. } => self.on_turned_away(holder.client, holder.request, key, at_us),
            EventKind::GaveUp { client, request, why } => {
                if let Some(pending) = self.requests.get_mut(&(*client, *request)) {
                    pending.gave_up.get_or_insert((at_us, *why));
                }
                self.unwant(*client, *request, at_us);
                if healed_us.is_none() {
                    self.settle(*client, *request);
                }
            }
            EventKind::Crashed { actor: Actor::Client(client) }
            | EventKind::Paused { actor: Actor::Client(client) }
            | EventKind::Stalled { client, .. }
            | EventKind::StalledUntilOvertaken { client, .. }
            | EventKind::StalledOnGrant { client, .. } => {
                self.interrupted_us.entry(*client).or_default().insert(at_us, ());
                if matches!(event.kind, EventKind::Crashed { .. }) {
                    self.unwant_client(*client, at_us);
                }
            }
            EventKind::Applied { command, result, .. } => {
                if matches!(result, ApplyResult::Granted { .. }) {
                    report.counters.phases.count_grant(facts.first_apply, healed_us.is_some());
                }
                self.on_apply(facts, command, result, at_us);
                // A grant whose lock is gone is never judged again (`judge_denied_grant`).
                for (key, token) in &facts.removed {
                    let Some(issue) = ctx.issue(*token) else { continue };
                    let holder = (issue.holder.client, issue.holder.request);
                    if self.grants.get(&holder).is_some_and(|(k, t)| k == key && t == token) {
                        self.grants.remove(&holder);
                    }
                }
            }
            EventKind::ClusterRestored { .. } => {
                // The restored table is the backup's: unknown until shown.
                self.held.values_mut().for_each(|held| *held = None);
                self.grants.clear();
                let keys: Vec<Key> = self.starving.keys().cloned().collect();
                for key in keys {
                    self.restate(&key, at_us);
                }
            }
            EventKind::Role { node, role, term, leader } => {
                self.known_leader.insert(*node, *leader);
                self.on_role(*node, *role, *term, healed_us, at_us);
            }
            EventKind::Restarted { actor: Actor::Server(node) } | EventKind::NodeRestored { node, .. } => {
                self.returning.insert(*node, at_us);
                self.pauses.remove(node);
            }
            EventKind::Paused { actor: Actor::Server(node) } => {
                self.pauses.insert(*node, (at_us, None));
            }
            EventKind::Resumed { actor: Actor::Server(node) } => {
                self.returning.insert(*node, at_us);
                if let Some((_, resumed_us)) = self.pauses.get_mut(node) {
                    *resumed_us = Some(at_us);
                }
            }
            EventKind::Work { every_us, messages, ready_rounds, syncs } => {
                self.judge_work(ctx, at_us, *every_us, [messages, ready_rounds, syncs], report);
            }
            _ => {}
        }
        if let Some(healed_us) = healed_us {
            self.judge_stability(healed_us, report);
        }
    }

    fn finish(&mut self, ctx: &Context, report: &mut Report) {
        self.count(ctx, report);
        let Some(healed_us) = ctx.healed_at_us else { return };
        self.judge_attempts(ctx, report);
        let run_end_us = ctx.config.run_end_us;
        self.judge_starving(ctx, healed_us, run_end_us, report);
        let leader_bound_us = ctx.config.liveness_leader_bound_ms * 1_000;
        for ((client, request), pending) in &self.requests {
            let interrupted = self.interrupted(*client, pending.first_us, pending.settled_us());
            if interrupted || pending.answered_us.is_some_and(|a| a < healed_us) {
                continue;
            }
            if matches!(pending.gave_up, Some((at, _)) if at < healed_us) {
                continue;
            }
            let deadline_us = pending.deadline_us(healed_us, leader_bound_us);
            let last = pending.last_reply.map_or("no reply".to_string(), |r| format!("last reply {r:?}"));
            let sent = format!("{client}'s request {request}, sent at {}ms,", pending.first_us / 1_000);
            let detail = match (pending.answered_us, pending.gave_up) {
                (Some(answered_us), _) if answered_us > deadline_us => format!(
                    "{sent} was answered only at {}ms, after its deadline of {}ms, although every fault was \
                     healed: an answer must come within the request's wait plus {}ms",
                    answered_us / 1_000,
                    deadline_us / 1_000,
                    ctx.config.liveness_leader_bound_ms
                ),
                (Some(_), _) => continue,
                (None, Some((_, GiveUp::WalkedAway))) => continue,
                (None, Some((gave_up_us, GiveUp::Retries))) if gave_up_us < healed_us + leader_bound_us => continue,
                // A request of the faults its client never tried again after
                // the heal: the service never saw it since. A client's retries
                // run for 3 s of its own clock, so a give-up past the leader
                // bound without a try after the heal means that clock was
                // stepped back (found by the hunt: swarm seed 51995, a client
                // stepped back 3829 ms 178 ms before the heal).
                (None, Some((_, GiveUp::Retries))) if pending.first_healed_us.is_none() => continue,
                // Turned away after its first try since the heal: its
                // retries met a full wait queue, and each attempt's reply
                // (`judge_attempts`) is what the service owed.
                (None, Some((_, GiveUp::Retries)))
                    if pending.turned_away_us.zip(pending.first_healed_us).is_some_and(|(t, f)| t >= f) =>
                {
                    continue
                }
                (None, Some((gave_up_us, GiveUp::Retries))) => {
                    let detail = format!(
                        "{sent} was given up by its client at {}ms after its retries ran out ({last}), although \
                         every fault was healed and a leader was due by {}ms: the service did not answer",
                        gave_up_us / 1_000,
                        (healed_us + leader_bound_us) / 1_000
                    );
                    let violation = Violation::new(Property::Answered, gave_up_us, detail).clients(&[*client]);
                    report.push(violation);
                    continue;
                }
                (None, None) if deadline_us > run_end_us => continue,
                (None, None) => format!(
                    "{sent} had no answer by {}ms ({last}) although every fault was healed: a pending request \
                     must be answered",
                    deadline_us / 1_000
                ),
            };
            report.push(Violation::new(Property::Answered, deadline_us, detail).clients(&[*client]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::ordinal;
    use crate::history::{EventKind, GiveUp};
    use fencelock::raft::Role;
    use fencelock::service::{ClientReply, ClientRequest};
    use fencelock::{ApplyResult, ClientId, NodeId, Property, RequestId};

    fn gave_up(client: u32, request: u64, why: GiveUp) -> EventKind {
        EventKind::GaveUp { client: ClientId(client), request: RequestId(request), why }
    }

    /// A client paused a thousand times keeps only the pauses a request
    /// kept may still meet, and a request open since before them all still
    /// meets its own.
    #[test]
    fn interruptions_no_kept_request_can_meet_are_forgotten() {
        use super::super::state::Context;
        use super::super::Family;
        use super::AvailabilityChecker;
        use crate::history::Actor;
        let pause = |client: u32| EventKind::Paused { actor: Actor::Client(ClientId(client)) };
        let mut h = H::new().at_ms(100).acquire_request(3, 1, "k").at_ms(200).ev(pause(3));
        for second in 1..=1_000 {
            h = h
                .at_ms(second * 1_000)
                .acquire_request(2, second, "j")
                .answered(2, second, ClientReply::TimedOut)
                .at_ms(second * 1_000 + 1)
                .ev(pause(2));
        }
        let mut ctx = Context::new(h.config(2_000_000_000));
        let (mut checker, mut report) = (AvailabilityChecker::default(), Default::default());
        for event in h.events() {
            let facts = ctx.facts(event);
            checker.observe(&ctx, &facts, event, &mut report);
            ctx.absorb(event, &facts);
        }
        let kept = |checker: &AvailabilityChecker, client| checker.interrupted_us[&ClientId(client)].iter().count();
        assert_eq!(kept(&checker, 3), 1, "the pause of the request still open");
        assert!(checker.interrupted(ClientId(3), 100_000, None));
        // Client 3's open request holds every instant from 100 ms on.
        assert_eq!(kept(&checker, 2), 1_000);
        // Once it is answered, the next cut forgets client 2's pauses.
        let h = h.answered(3, 1, ClientReply::TimedOut).at_ms(1_020_000).acquire_request(2, 2_000, "j");
        for event in &h.events()[h.events().len() - 2..] {
            let facts = ctx.facts(event);
            checker.observe(&ctx, &facts, event, &mut report);
            ctx.absorb(event, &facts);
        }
        assert!(kept(&checker, 2) < 300, "{} pauses kept", kept(&checker, 2));
        assert!(!checker.interrupted(ClientId(2), 1_020_000_000, None));
    }

    #[test]
    fn ordinals_read_as_words_do() {
        let read: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22].into_iter().map(ordinal).collect();
        assert_eq!(read, ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd"]);
    }

    #[test]
    fn a_request_given_up_after_the_leader_bound_breaks_answered() {
        // Healed at 3 s, leader bound 5 s: a give-up at 9 s is the service's failure.
        let h = happy()
            .at_ms(6_000)
            .acquire_request(2, 20, "j")
            .reply(0, 2, 20, ClientReply::Unavailable)
            .at_ms(9_000)
            .ev(gave_up(2, 20, GiveUp::Retries));
        let verdict = h.check();
        assert_only(&verdict, Property::Answered);
        assert_eq!(verdict.violations[0].at_us, 9_000_000);
        assert!(verdict.violations[0].detail.contains("retries ran out (no reply)"), "{}", verdict.violations[0]);
        // Without the server's reply, the silent attempt is a violation too, at its deadline.
        let silent = happy().at_ms(6_000).acquire_request(2, 20, "j").at_ms(9_000).ev(gave_up(2, 20, GiveUp::Retries));
        let verdict = silent.check();
        assert_only(&verdict, Property::Answered);
        assert_eq!(verdict.violations[0].at_us, 7_300_000);
        assert!(verdict.violations[0].detail.contains("n0 had not replied by 7300ms"), "{}", verdict.violations[0]);
    }

    #[test]
    fn excused_give_ups_do_not_break_answered() {
        // Walked away by choice, or given up while a leader was not yet due.
        let walked =
            happy().at_ms(6_000).acquire_request(2, 20, "j").at_ms(6_010).ev(gave_up(2, 20, GiveUp::WalkedAway));
        assert_clean(&walked.check());
        let early = happy()
            .at_ms(4_000)
            .acquire_request(2, 20, "j")
            .reply(0, 2, 20, ClientReply::Unavailable)
            .at_ms(7_000)
            .ev(gave_up(2, 20, GiveUp::Retries));
        assert_clean(&early.check());
        let crashed = happy().at_ms(6_000).acquire_request(2, 20, "j").crash(client(2)).at_ms(9_000).ev(gave_up(
            2,
            20,
            GiveUp::Retries,
        ));
        assert_clean(&crashed.check());
    }

    #[test]
    fn a_give_up_without_a_try_after_the_heal_is_the_clients_own() {
        // Healed at 3 s: sent at 50 ms, never tried again (the client's clock
        // stepped back), given up at 9 s: the service never saw it after the heal.
        let sent = |h: H| h.acquire_request(2, 20, "j");
        let untried = happy_with_at_50ms(sent).at_ms(9_000).ev(gave_up(2, 20, GiveUp::Retries));
        assert_clean(&untried.check());
        // Tried again after the heal and given up unanswered: the service's failure.
        let retried = happy_with_at_50ms(sent)
            .at_ms(6_000)
            .acquire_request(2, 20, "j")
            .reply(0, 2, 20, ClientReply::Unavailable)
            .at_ms(9_000)
            .ev(gave_up(2, 20, GiveUp::Retries));
        let verdict = retried.check();
        assert_only(&verdict, Property::Answered);
        assert!(verdict.violations[0].detail.contains("retries ran out"), "{}", verdict.violations[0]);
    }

    fn turned_away(client: u32, request: u64, k: &str) -> EventKind {
        EventKind::TurnedAway { node: NodeId(0), key: key(k), holder: holder(client, request) }
    }

    /// c2 sends its r20 (`body`, an acquire) to n0 at `ms`, which turns it away `Unavailable`.
    fn turned_away_at(h: H, ms: u64, body: ClientRequest) -> H {
        let ClientRequest::Acquire { key: k, .. } = &body else { panic!("only an acquire is turned away") };
        let away = turned_away(2, 20, k.as_str());
        h.at_ms(ms).request(2, 20, 0, body).ev(away).reply(0, 2, 20, ClientReply::Unavailable)
    }

    /// An acquire of `k` (held by 43 in `happy` from 3.1 s) waiting up to `wait_ms`.
    fn asks_k(wait_ms: u64) -> ClientRequest {
        ClientRequest::Acquire { key: key("k"), lease_ms: 2_000, wait_ms }
    }

    #[test]
    fn a_request_turned_away_is_owed_each_attempts_unavailable_not_a_final_answer() {
        // Healed at 3 s, leader bound 5 s: a full queue behind 43 turns c2 away
        // at 6 s and on every retry until its give-up at 9 s. Backpressure, answered.
        let tried = |h: H, ms: u64| turned_away_at(h, ms, asks_k(0));
        let full = tried(tried(happy(), 6_000), 8_500).at_ms(9_000).ev(gave_up(2, 20, GiveUp::Retries));
        assert_clean(&full.check());
        // The same turn-away left silent: each attempt's own rule still fails.
        let silent = happy().at_ms(6_000).request(2, 20, 0, asks_k(0)).ev(turned_away(2, 20, "k"));
        let verdict = silent.at_ms(9_000).ev(gave_up(2, 20, GiveUp::Retries)).check();
        assert_only(&verdict, Property::Answered);
        assert!(verdict.violations[0].detail.contains("n0 had not replied by 7300ms"), "{}", verdict.violations[0]);
    }

    #[test]
    fn a_turn_away_from_a_free_key_excuses_nothing() {
        // `j` is free: no queue can be full behind it, so a server that turns
        // c2 away until its give-up has not answered it.
        let j = || ClientRequest::Acquire { key: key("j"), lease_ms: 2_000, wait_ms: 0 };
        let tried = |h: H, ms: u64| turned_away_at(h, ms, j());
        let verdict = tried(tried(happy(), 6_000), 8_500).at_ms(9_000).ev(gave_up(2, 20, GiveUp::Retries)).check();
        assert_only(&verdict, Property::Answered);
        assert!(verdict.violations[0].detail.contains("retries ran out"), "{}", verdict.violations[0]);
    }

    #[test]
    fn a_request_turned_away_counts_its_deadline_from_its_last_turn_away() {
        // A wait of 2 s for `k`, sent at 4 s: due by 11 s without a turn-away.
        // Turned away until 8.5 s, then queued: due by 15.5 s.
        let tried = |h: H, ms: u64| turned_away_at(h, ms, asks_k(2_000));
        let granted_at = |ms: u64| {
            let queued = tried(tried(happy(), 4_000), 8_500).at_ms(8_750).request(2, 20, 0, asks_k(2_000));
            let freed = queued.at_ms(ms - 100).apply_all(
                &[0, 1, 2],
                6,
                expire("k", 43),
                ApplyResult::Expired { existed: true },
            );
            freed.at_ms(ms).acquire(7, "k", 2, 20, 44)
        };
        assert_clean(&granted_at(12_000).check_until_ms(20_000));
        // Past that deadline, late all the same (and the queued attempt unanswered past its own).
        let verdict = granted_at(16_000).check_until_ms(20_000);
        assert_only(&verdict, Property::Answered);
        assert!(
            verdict.violations.iter().any(|v| v.detail.contains("deadline of 15500ms")),
            "{:#?}",
            verdict.violations
        );
    }

    #[test]
    fn a_client_turned_away_asks_for_no_key_until_it_asks_again() {
        // `k` freed at 8.5 s while c2, turned away at 8.4 s, retries only at 10 s:
        // not starving until it asks again, then granted within the bound.
        let retried = || {
            turned_away_at(happy(), 8_400, asks_k(2_000))
                .at_ms(8_500)
                .apply_all(&[0, 1, 2], 6, expire("k", 43), ApplyResult::Expired { existed: true })
                .at_ms(10_000)
                .request(2, 20, 0, asks_k(2_000))
        };
        assert_clean(&retried().at_ms(10_100).acquire(7, "k", 2, 20, 44).check_until_ms(14_000));
        let h = retried();
        // Asking again and never granted: starving from the retry.
        let verdict = h.check_until_ms(14_000);
        let progress = verdict.violations.iter().find(|v| v.property == Property::Progress).expect("progress");
        assert_eq!(progress.at_us, (10_000 + h.config(0).progress_bound_ms) * 1_000);
    }

    #[test]
    fn redirects_are_not_answers() {
        let renew = ClientRequest::Renew { key: key("j"), token: fencelock::Token(9) };
        let redirect = ClientReply::NotLeader { leader: Some(NodeId(0)) };
        let h = happy()
            .at_ms(4_000)
            .request(2, 20, 1, renew.clone())
            .reply(1, 2, 20, redirect)
            .answered(2, 20, redirect)
            .request(2, 20, 0, renew)
            .at_ms(4_100)
            .reply(0, 2, 20, ClientReply::Unavailable)
            .answered(2, 20, ClientReply::Unavailable);
        let verdict = h.check();
        assert_only(&verdict, Property::Answered);
        assert!(verdict.violations[0].detail.contains("last reply Unavailable"), "{}", verdict.violations[0]);
        // A final answer within the wait plus the bound settles it.
        let answered = h.at_ms(4_200).reply(0, 2, 20, ClientReply::NotHeld).answered(2, 20, ClientReply::NotHeld);
        assert_clean(&answered.check());
    }

    #[test]
    fn a_live_grant_answered_not_held_breaks_answered_at_any_time() {
        // c2's request 1 is granted tok42 at 200 ms and expires at 2.3 s; its
        // retry (a lost reply) is answered NotHeld at `retry_ms`.
        let story = |retry_ms: u64| {
            let h = H::new().leader(0, 1).at_ms(200).acquire(1, "k", 2, 1, 42);
            let retry = |h: H| {
                h.at_ms(retry_ms).acquire_request(2, 1, "k").reply(0, 2, 1, ClientReply::NotHeld).answered(
                    2,
                    1,
                    ClientReply::NotHeld,
                )
            };
            let h = if retry_ms < 2_300 { retry(h) } else { h };
            let h = h.at_ms(2_300).apply_all(&[0, 1, 2], 2, expire("k", 42), ApplyResult::Expired { existed: true });
            let h = if retry_ms >= 2_300 { retry(h) } else { h };
            h.at_ms(3_000).healed()
        };
        let verdict = story(1_000).check();
        assert_only(&verdict, Property::Answered);
        assert_eq!(verdict.violations[0].at_us, 1_000_000);
        assert!(verdict.violations[0].detail.contains("grant tok42 of k is still held"), "{}", verdict.violations[0]);
        // After the expiry, NotHeld is the truth.
        assert_clean(&story(2_500).check());
    }

    #[test]
    fn a_request_of_the_faults_is_owed_its_answer_from_its_first_try_after_the_heal() {
        // Sent at 2.5 s (lost in the faults), tried again only at 9 s (the
        // client's clock was stepped back), answered at 9.5 s: within 5 s of
        // that try, though past the heal's 3 s + 5 s.
        let renew = ClientRequest::Renew { key: key("j"), token: fencelock::Token(9) };
        let h = H::new()
            .leader(0, 1)
            .at_ms(2_500)
            .request(2, 20, 0, renew.clone())
            .at_ms(3_000)
            .healed()
            .at_ms(9_000)
            .request(2, 20, 0, renew)
            .at_ms(9_500)
            .reply(0, 2, 20, ClientReply::NotHeld)
            .answered(2, 20, ClientReply::NotHeld);
        assert_clean(&h.check_until_ms(14_000));
    }

    #[test]
    fn an_answer_after_the_deadline_breaks_answered() {
        let h = happy()
            .at_ms(4_000)
            .request(2, 20, 1, ClientRequest::Renew { key: key("j"), token: fencelock::Token(9) })
            .at_ms(9_500)
            .reply(1, 2, 20, ClientReply::NotHeld)
            .answered(2, 20, ClientReply::NotHeld);
        let verdict = h.check();
        assert_only(&verdict, Property::Answered);
        let late = verdict.violations.iter().find(|v| v.detail.contains("answered only at 9500ms")).unwrap();
        assert_eq!(late.at_us, 9_000_000);
    }

    #[test]
    fn a_free_key_asked_for_and_never_granted_breaks_progress() {
        // `k` is held by 43 from 3.1 s; freed at 8.5 s; c2 asks at 8.6 s with a long wait and is never granted.
        let h = happy()
            .at_ms(8_500)
            .apply_all(&[0, 1, 2], 6, expire("k", 43), fencelock::ApplyResult::Expired { existed: true })
            .at_ms(8_600)
            .request(2, 20, 0, ClientRequest::Acquire { key: key("k"), lease_ms: 2_000, wait_ms: 2_000 });
        let verdict = h.check_until_ms(14_000);
        assert!(verdict.properties().contains(&Property::Progress), "{:#?}", verdict.violations);
        let progress = verdict.violations.iter().find(|v| v.property == Property::Progress).unwrap();
        let bound_ms = h.config(0).progress_bound_ms;
        assert_eq!(progress.at_us, (8_600 + bound_ms) * 1_000);
        assert_eq!(progress.clients, vec![ClientId(2)]);
        // Granted in time: clean.
        let granted = h.at_ms(8_700).acquire(7, "k", 2, 20, 44);
        assert_clean(&granted.check_until_ms(14_000));
    }

    #[test]
    fn a_held_key_asked_for_is_not_starving() {
        // `k` stays held by 43: an acquire waiting for it is answered in time, never starved.
        let h = happy()
            .at_ms(8_600)
            .request(2, 20, 0, ClientRequest::Acquire { key: key("k"), lease_ms: 2_000, wait_ms: 2_000 })
            .at_ms(10_600)
            .reply(0, 2, 20, ClientReply::TimedOut)
            .answered(2, 20, ClientReply::TimedOut);
        assert_clean(&h.check_until_ms(14_000));
    }

    #[test]
    fn leader_churn_after_the_heal_breaks_leader_stability() {
        let h = happy().at_ms(4_000).leader(1, 2).at_ms(5_000).leader(2, 3);
        let verdict = h.check();
        assert_only(&verdict, Property::LeaderStability);
        assert_eq!(verdict.violations[0].at_us, 5_000_000);
        assert_eq!(verdict.violations[0].nodes, vec![NodeId(2)]);
        // One change after the heal is allowed.
        assert_clean(&happy().at_ms(4_000).leader(1, 2).check());
    }

    #[test]
    fn a_server_back_at_the_heal_may_cost_one_more_election() {
        let h = happy_until_heal_with_crash().at_ms(4_000).leader(1, 2).at_ms(5_000).leader(2, 3);
        assert_clean(&h.check());
        let verdict = h.at_ms(6_000).role(0, 4, Role::Candidate).leader(0, 4).check();
        assert_only(&verdict, Property::LeaderStability);
    }

    /// `happy`, but with n2 crashed at 2 s and restarted by the heal at 3 s.
    fn happy_until_heal_with_crash() -> H {
        H::new().leader(0, 1).at_ms(2_000).crash(server(2)).at_ms(3_000).restart(server(2)).healed()
    }

    fn work(every_ms: u64, messages: &[u64], rounds: &[u64], syncs: &[u64]) -> EventKind {
        EventKind::Work {
            every_us: every_ms * 1_000,
            messages: messages.to_vec(),
            ready_rounds: rounds.to_vec(),
            syncs: syncs.to_vec(),
        }
    }

    #[test]
    fn work_within_the_budget_passes_and_a_busy_loop_fails() {
        // Three servers, heartbeat 20 ms: 2 peers x 50 heartbeats a second, each answered.
        let idle = happy().at_ms(12_000).ev(work(1_000, &[200; 9], &[150; 9], &[6; 9]));
        assert_clean(&idle.check());
        let mut rounds = [150; 9];
        rounds[4] = 100_000;
        let busy = happy().at_ms(12_000).ev(work(1_000, &[200; 9], &rounds, &[6; 9]));
        let verdict = busy.check();
        assert_only(&verdict, Property::WorkBudget);
        assert_eq!(verdict.violations[0].at_us, 8_000_000, "the stretch from 7 s to 8 s");
        assert!(verdict.violations[0].detail.contains("100000 Ready rounds"), "{}", verdict.violations[0]);
    }

    #[test]
    fn a_server_resumed_by_the_heal_may_answer_what_waited_for_it() {
        // Three servers, heartbeat 40 ms: the heal's second has a budget of
        // 4 x 2 x (50 heartbeats + 50 probes + 2) = 816 messages. n2 paused
        // for the 2 s before the heal missed 50 heartbeats, each answered
        // with an append back: 4 x 2 x 100 more.
        let busy_heal = |h: H| h.at_ms(12_000).ev(work(1_000, &[1_200, 100, 100], &[300; 3], &[6; 3])).check();
        let paused = |h: H| h.at_ms(1_000).ev(EventKind::Paused { actor: server(2) });
        let base = || H::new().leader(0, 1);
        let resumed_at_heal = paused(base()).at_ms(3_000).ev(EventKind::Resumed { actor: server(2) }).healed();
        assert_clean(&busy_heal(resumed_at_heal));
        let resumed_before =
            paused(base()).at_ms(2_900).ev(EventKind::Resumed { actor: server(2) }).at_ms(3_000).healed();
        assert_only(&busy_heal(resumed_before), Property::WorkBudget);
        let restarted_at_heal = paused(base()).at_ms(2_000).crash(server(2)).at_ms(3_000).restart(server(2)).healed();
        assert_only(&busy_heal(restarted_at_heal), Property::WorkBudget);
        assert_only(&busy_heal(base().at_ms(3_000).healed()), Property::WorkBudget);
    }

    #[test]
    fn a_request_settled_during_the_faults_is_counted_and_forgotten() {
        use super::super::state::Context;
        use super::super::{Family, Report};
        use super::AvailabilityChecker;
        // A thousand acquires during the faults, each answered or given up
        // 40 ms after it was sent: what the checker keeps stays one or two
        // requests, and the figures count every one that was not walked away.
        let h = happy_with_at_50ms(|mut h| {
            for n in 0..1_000u64 {
                let request = 100 + n;
                h = h.acquire_request(2, request, "j");
                let settled_us = h.now_us() + 40;
                h = h.at_us(settled_us);
                h = match n % 4 {
                    0 => h.ev(gave_up(2, request, GiveUp::WalkedAway)),
                    1 => h.ev(gave_up(2, request, GiveUp::Retries)),
                    _ => h.answered(2, request, ClientReply::TimedOut),
                };
            }
            h
        });
        let mut ctx = Context::new(h.config(12_000_000));
        let (mut checker, mut report, mut kept_most) = (AvailabilityChecker::default(), Report::default(), 0);
        for event in h.events() {
            let facts = ctx.facts(event);
            checker.observe(&ctx, &facts, event, &mut report);
            ctx.absorb(event, &facts);
            kept_most = kept_most.max(checker.requests.len());
        }
        assert!(kept_most <= 4, "kept {kept_most} requests at once");
        checker.finish(&ctx, &mut report);
        let c = &report.counters.phases;
        // happy()'s three before the heal, and 750 of the thousand (250 walked away).
        assert_eq!((c.fault_requests, c.fault_answered), (3 + 750, 3 + 500));
        assert_eq!((c.healed_requests, c.healed_answered), (1, 1));
        assert!(report.violations.is_empty(), "{:?}", report.violations);
    }

    #[test]
    fn both_phases_are_counted() {
        let verdict = happy()
            .at_ms(6_000)
            .acquire_request(2, 20, "j")
            .at_ms(6_010)
            .ev(gave_up(2, 20, GiveUp::WalkedAway))
            .check();
        let c = &verdict.counters.phases;
        // Before the heal: c1's and c2's acquires and c1's release, all answered.
        assert_eq!((c.fault_requests, c.fault_answered, c.fault_grants), (3, 3, 2));
        // After: c1's acquire at 3.1 s (granted); c2's walked away (not counted).
        assert_eq!((c.healed_requests, c.healed_answered, c.healed_grants), (1, 1, 1));
    }
}
