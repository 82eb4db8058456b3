//! Told forms: a minimal case's faults told by what they wait for rather
//! than when one seed's timing brought them, for the repair of a case that
//! fails by luck (`robustness::repair`). A stall of a lock holder lasts
//! until another worker overtakes it; a late answer, a resent write or a
//! split election becomes the fault that makes it; a crash or restore of
//! the resource, a server's forgetting and a crash after a vote become the
//! strike families that wait for their moment; the strike windows open to
//! the whole run. Each form reads the best run's events up to its kept
//! violation and returns candidates; the repair runs and probes them.

use super::{Case, Shrinker};
use crate::faults::{Fault, FaultEvent, JobEnd, Overtake, StallPoint, UntilOvertaken, WARMUP_MS};
use crate::history::{Actor, Event, EventKind};
use crate::model::Model;
use fencelock::raft::Role;
use fencelock::resource::WritePath;
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ApplyResult, ClientId, Command, Holder, NodeId, RequestId, Term};
use std::collections::BTreeMap;

/// The run's own stalls of lock holders (model key `stalls`) up to the
/// violation, as planned `StallHolder` events in a run whose workload draws
/// none: the stall that broke the property, told as data.
pub(crate) fn planned_stalls(s: &Shrinker, case: &Case) -> Option<Case> {
    if !case.model.stalls {
        return None;
    }
    let stalls: Vec<FaultEvent> = up_to_violation(s)
        .filter_map(|event| match event.kind {
            EventKind::Stalled { ms, .. } => {
                Some(FaultEvent { at_ms: event.at_us / 1_000, fault: Fault::StallHolder { ms } })
            }
            _ => None,
        })
        .collect();
    // Another worker may be the next to write, later than the one that
    // stalled here: the run gets the longest stall's length more to show it
    // (`length::cut` takes back what it does not need).
    let longest_ms = stalls
        .iter()
        .filter_map(|e| match e.fault {
            Fault::StallHolder { ms } => Some(ms),
            _ => None,
        })
        .max()?;
    let model = Model { stalls: false, safety_ms: case.model.safety_ms + longest_ms, ..case.model.clone() };
    Some(Case { model, plan: merged(&case.plan, stalls), ..case.clone() })
}

/// An until-overtaken stall lasts at most this many leases (or the stall it
/// replaces, if longer): long enough for a lease to run out and the key to
/// pass on under any seed's timing.
const OVERTAKEN_LEASES_MAX: u64 = 4;

/// The length of a planned stall of a worker: a `StallHolder`, or a pause
/// of a client (which stops its worker wherever it is).
fn worker_stall_ms(fault: &Fault) -> Option<u64> {
    match *fault {
        Fault::StallHolder { ms } | Fault::Pause { actor: Actor::Client(_), ms } => Some(ms),
        _ => None,
    }
}

/// Where an until-overtaken stall comes and what it waits for, in the
/// order the forms are tried: the stale write after a takeover (two ways
/// of seeing the takeover), then the stale renewal.
const OVERTAKEN_FORMS: [(StallPoint, Overtake); 3] =
    [(StallPoint::Write, Overtake::Write), (StallPoint::Write, Overtake::Grant), (StallPoint::Renew, Overtake::Grant)];

/// The best case with its stalls of workers told by what they wait for
/// instead of how long they last: every planned `StallHolder` or pause of a
/// client — or, where the workload drew the stalls, their planned form —
/// becomes a `StallUntilOvertaken` that ends as another worker's write on
/// the key is accepted, or as another worker is granted it, before the
/// holder's write or before its next renewal ([`OVERTAKEN_FORMS`]); the
/// holder then writes on the path the run's stalled holder did, and ends
/// its job with a Revoke where that one did ([`stall_sequels`]). First the
/// planned form itself where the stalls were drawn, then the rewrites;
/// none where no worker stalls.
pub(crate) fn overtaken_forms(s: &Shrinker, case: &Case) -> Vec<Case> {
    let has_planned = case.plan.iter().any(|e| worker_stall_ms(&e.fault).is_some());
    // `planned_stalls` is `None` where the workload drew no stall either.
    let base = if has_planned {
        case.clone()
    } else {
        let Some(planned) = planned_stalls(s, case) else { return Vec::new() };
        planned
    };
    let lease_ms = base.model.lease_ms;
    let sequels = stall_sequels(s, &base.plan);
    let rewritten = |(before, on): (StallPoint, Overtake)| {
        let plan = base
            .plan
            .iter()
            .zip(&sequels)
            .map(|(event, &(path, end))| match worker_stall_ms(&event.fault) {
                Some(ms) => FaultEvent {
                    at_ms: event.at_ms,
                    fault: Fault::StallUntilOvertaken(UntilOvertaken {
                        on,
                        after_ms: 0,
                        ms_max: ms.max(OVERTAKEN_LEASES_MAX * lease_ms),
                        before,
                        path,
                        end,
                    }),
                },
                None => event.clone(),
            })
            .collect();
        Case { plan, ..base.clone() }
    };
    let mut forms = Vec::new();
    if !has_planned {
        forms.push(base.clone());
    }
    forms.extend(OVERTAKEN_FORMS.into_iter().map(rewritten));
    forms
}

/// What the worker each event of `plan` stalled in the best run did next,
/// up to the violation: the path of its write, and a Revoke where it ended
/// the job with one (the workload's rarer draw, which a story of a late
/// revoke needs under every seed); `(None, Drawn)` where it did neither. A
/// stall event of the plan is matched with the first worker stall of the
/// run (a stall between check and write, or a pause of a client) at or
/// after its instant not matched yet; events that stall no worker get
/// `(None, Drawn)`.
fn stall_sequels(s: &Shrinker, plan: &[FaultEvent]) -> Vec<(Option<WritePath>, JobEnd)> {
    let events: Vec<&Event> = up_to_violation(s).collect();
    let sequel = |i: usize, client: ClientId| {
        let later = || events[i + 1..].iter().map(|event| &event.kind);
        let path = later().find_map(|kind| match *kind {
            EventKind::WriteSent { client: c, path, .. } if c == client => Some(path),
            _ => None,
        });
        // The first Release or Revoke it sent: a Revoke is told, a Release is the common draw.
        let end = later().find_map(|kind| match kind {
            EventKind::Requested { client: c, body, .. } if *c == client => match body {
                ClientRequest::Revoke { .. } => Some(JobEnd::Revoke),
                ClientRequest::Release { .. } => Some(JobEnd::Drawn),
                _ => None,
            },
            _ => None,
        });
        (path, end.unwrap_or(JobEnd::Drawn))
    };
    let mut stalls = events.iter().enumerate().filter_map(|(i, event)| match event.kind {
        EventKind::Stalled { client, .. }
        | EventKind::StalledUntilOvertaken { client, .. }
        | EventKind::Paused { actor: Actor::Client(client) } => Some((event.at_us, i, client)),
        _ => None,
    });
    plan.iter()
        .map(|event| {
            if worker_stall_ms(&event.fault).is_none() {
                return (None, JobEnd::Drawn);
            }
            stalls
                .find(|(at_us, ..)| *at_us >= event.at_ms * 1_000)
                .map_or((None, JobEnd::Drawn), |(_, i, client)| sequel(i, client))
        })
        .collect()
}

/// An answer to a granted acquire read this share of a lease (in
/// thousandths) or more after the Grant applied is late.
const LATE_PERMILLE_MIN: u64 = 100;

/// The best case with the late answers of its run up to the violation —
/// a granted acquire whose answer the worker read [`LATE_PERMILLE_MIN`] of
/// a lease or more after its Grant first applied (a lost answer and a
/// retry, a slow path) — told as `StallOnGrant` events as long, armed as
/// the Grant first applied: the lateness as data, whoever is granted
/// under another seed. `None` where no answer came late.
pub(crate) fn late_answer_form(s: &Shrinker, case: &Case) -> Option<Case> {
    let late_us = case.model.lease_ms * LATE_PERMILLE_MIN;
    let mut applied_us: BTreeMap<Holder, u64> = BTreeMap::new();
    let mut stalls = Vec::new();
    for event in up_to_violation(s) {
        match &event.kind {
            EventKind::Applied {
                command: Command::Grant { holder, .. }, result: ApplyResult::Granted { .. }, ..
            } => {
                applied_us.entry(*holder).or_insert(event.at_us);
            }
            EventKind::Answered { client, request, reply: ClientReply::Granted { .. }, .. } => {
                let holder = Holder { client: *client, request: *request };
                let Some(&applied) = applied_us.get(&holder) else { continue };
                let late_by_us = event.at_us.saturating_sub(applied);
                if late_by_us >= late_us {
                    let fault = Fault::StallOnGrant { ms: late_by_us / 1_000 };
                    stalls.push(FaultEvent { at_ms: applied / 1_000, fault });
                }
            }
            _ => {}
        }
    }
    with_added(case, stalls)
}

/// The best case with the writes its run delivered to the resource twice
/// up to the violation — a lost answer and a resend, or a duplicate on the
/// wire — told as `LoseWriteAnswer` events armed as each write was first
/// sent: the resend as data, whoever writes under another seed. `None`
/// where the resource judged every write once.
pub(crate) fn resent_write_form(s: &Shrinker, case: &Case) -> Option<Case> {
    let mut sent_us: BTreeMap<(ClientId, RequestId), u64> = BTreeMap::new();
    let mut judged: BTreeMap<(ClientId, RequestId), u32> = BTreeMap::new();
    let mut losses = Vec::new();
    for event in up_to_violation(s) {
        match event.kind {
            EventKind::WriteSent { client, request, .. } => {
                sent_us.entry((client, request)).or_insert(event.at_us);
            }
            EventKind::WriteDone { client, request, .. } => {
                let times = judged.entry((client, request)).or_insert(0);
                *times += 1;
                if *times == 2 {
                    let Some(&sent) = sent_us.get(&(client, request)) else { continue };
                    losses.push(FaultEvent { at_ms: sent / 1_000, fault: Fault::LoseWriteAnswer });
                }
            }
            _ => {}
        }
    }
    with_added(case, losses)
}

/// The best case with the election of its run up to the violation in which
/// two servers stood as candidates for one term told as an
/// `ElectionStorm`, armed a tick before that election's first campaign
/// (the first since a leader was last seen): the split as data, whatever
/// the election timers another seed draws. The storm takes as many servers
/// as can each still win with the others' votes (a bare minority plus
/// one: 2 of 3, 3 of 5), on the case's cluster and then on `start_nodes`
/// servers, where more candidates make more chances that two stand at
/// once. Empty where no two servers stood in one term.
pub(crate) fn storm_forms(s: &Shrinker, case: &Case, start_nodes: u8) -> Vec<Case> {
    let mut wave_us: Option<u64> = None;
    let mut candidates: BTreeMap<Term, Vec<NodeId>> = BTreeMap::new();
    let mut split_at_us = None;
    for event in up_to_violation(s) {
        let EventKind::Role { node, role, term, .. } = event.kind else { continue };
        match role {
            Role::Leader => wave_us = None,
            Role::PreCandidate => {
                wave_us.get_or_insert(event.at_us);
            }
            Role::Candidate => {
                let wave = *wave_us.get_or_insert(event.at_us);
                let stood = candidates.entry(term).or_default();
                if !stood.contains(&node) {
                    stood.push(node);
                }
                if stood.len() == 2 {
                    split_at_us = Some(wave);
                    break;
                }
            }
            Role::Follower => {}
        }
    }
    let Some(split_at_us) = split_at_us else { return Vec::new() };
    let at_ms = (split_at_us / 1_000).saturating_sub(STORM_LEAD_MS).max(1);
    let mut sizes = vec![case.model.nodes];
    if start_nodes > case.model.nodes {
        sizes.push(start_nodes);
    }
    sizes
        .into_iter()
        .map(|nodes| {
            let storm = FaultEvent { at_ms, fault: Fault::ElectionStorm { servers: nodes - nodes / 2 } };
            let model = Model { nodes, ..case.model.clone() };
            Case { model, plan: merged(&case.plan, vec![storm]), ..case.clone() }
        })
        .collect()
}

/// A storm is armed this long before the election it tells: a tick.
const STORM_LEAD_MS: u64 = 10;

/// The best run's events up to its kept violation: what a told form reads.
fn up_to_violation(s: &Shrinker) -> impl Iterator<Item = &Event> {
    let violation_us = s.kept_violation().at_us;
    s.best_outcome.history.events().iter().take_while(move |event| event.at_us <= violation_us)
}

/// `case` with `added` put in its plan, `None` where nothing is added.
fn with_added(case: &Case, added: Vec<FaultEvent>) -> Option<Case> {
    (!added.is_empty()).then(|| Case { plan: merged(&case.plan, added), ..case.clone() })
}

/// How many lock holders in a row a repeated told stall takes.
pub(crate) const OVERTAKEN_REPEATS: usize = 3;

/// Whether the fault is a stall told by what it waits for.
fn told_stall(fault: &Fault) -> bool {
    matches!(fault, Fault::StallUntilOvertaken(_) | Fault::StallOnGrant { .. })
}

/// The case with each stall told by what it waits for
/// (`StallUntilOvertaken`, `StallOnGrant`) armed `times` times at
/// its instant, `None` if it has none. What a stalled holder does next is
/// the workload's to draw (a Release or a Revoke, which write path, how
/// long it works): the next holders stall the same way, a few tries at
/// the story in every seed.
pub(crate) fn repeated(case: &Case, times: usize) -> Option<Case> {
    if !case.plan.iter().any(|event| told_stall(&event.fault)) {
        return None;
    }
    let plan = case
        .plan
        .iter()
        .flat_map(|event| {
            let copies = if told_stall(&event.fault) { times } else { 1 };
            (0..copies).map(move |_| event.clone())
        })
        .collect();
    Some(Case { plan, ..case.clone() })
}

/// A widened family strikes at least this many times.
const WIDE_STRIKES_MIN: u64 = 3;

/// How long a window opened from the warm-up to the end of a run of
/// `run_ms` lasts: where a told or widened family watches.
fn whole_run_ms(run_ms: u64) -> u64 {
    run_ms.saturating_sub(WARMUP_MS)
}

/// The case with its strike families' windows opened to the whole run of
/// `run_ms` — from the standard planner's warm-up on (the first election
/// is left in peace), at least [`WIDE_STRIKES_MIN`] strikes —
/// so a strike waits for its trigger whenever this seed's timing brings
/// it, not only inside the window where one seed brought it; `None` where
/// the plan has no such family or it is already as wide.
pub(crate) fn widened(case: &Case, run_ms: u64) -> Option<Case> {
    let mut plan: Vec<FaultEvent> = case
        .plan
        .iter()
        .map(|event| {
            let at_ms = event.at_ms.min(WARMUP_MS);
            let for_ms = run_ms.saturating_sub(at_ms);
            let strikes_of = |strikes: u64| strikes.max(WIDE_STRIKES_MIN);
            let fault = match event.fault {
                Fault::RenewStrikes { strikes, pause_ms, .. } => {
                    Fault::RenewStrikes { for_ms, strikes: strikes_of(strikes), pause_ms }
                }
                Fault::GrantStrikes { strikes, pause_ms, .. } => {
                    Fault::GrantStrikes { for_ms, strikes: strikes_of(strikes), pause_ms }
                }
                Fault::LateRenewals { strikes, after_ms, .. } => {
                    Fault::LateRenewals { for_ms, strikes: strikes_of(strikes), after_ms }
                }
                Fault::Figure8Strikes { strikes, strike_ms, down_ms, .. } => {
                    Fault::Figure8Strikes { for_ms, strikes: strikes_of(strikes), strike_ms, down_ms }
                }
                Fault::VoteStrikes { strikes, down_ms, cut_ms, .. } => {
                    Fault::VoteStrikes { for_ms, strikes: strikes_of(strikes), down_ms, cut_ms }
                }
                Fault::FenceStrikes { strikes, down_ms, restore, .. } => {
                    Fault::FenceStrikes { for_ms, strikes: strikes_of(strikes), down_ms, restore }
                }
                Fault::AckCrashes { votes, strikes, down_ms, .. } => {
                    Fault::AckCrashes { for_ms, votes, strikes: strikes_of(strikes), down_ms }
                }
                _ => return event.clone(),
            };
            FaultEvent { at_ms, fault }
        })
        .collect();
    plan.sort_by_key(|event| event.at_ms);
    (plan != case.plan).then(|| Case { plan, ..case.clone() })
}

/// How long a told vote strike keeps the candidate cut off (the middle of
/// the standard planner's 300-1,500 ms): long enough for the others to
/// time out and elect a leader.
const VOTE_CUT_MS: u64 = 900;

/// The case with its crashes after vote grants (`AckCrashes` with
/// `votes`) told as vote strikes (`VoteStrikes`), from the warm-up to the
/// end of the run of `run_ms`, [`WIDE_STRIKES_MIN`] times at least: a crash
/// just after a vote loses the vote only if the voter's next vote decides
/// an election, and a vote strike arranges that election (the candidate
/// kept to a bare majority with the voter, then cut off while the others
/// elect). `None` where the plan crashes no voter.
pub(crate) fn vote_strike_form(case: &Case, run_ms: u64) -> Option<Case> {
    let mut told = false;
    let mut plan: Vec<FaultEvent> = case
        .plan
        .iter()
        .map(|event| match event.fault {
            Fault::AckCrashes { votes: true, strikes, down_ms, .. } => {
                told = true;
                let fault = Fault::VoteStrikes {
                    for_ms: whole_run_ms(run_ms),
                    strikes: strikes.max(WIDE_STRIKES_MIN),
                    down_ms,
                    cut_ms: VOTE_CUT_MS,
                };
                FaultEvent { at_ms: WARMUP_MS, fault }
            }
            _ => event.clone(),
        })
        .collect();
    plan.sort_by_key(|event| event.at_ms);
    told.then(|| Case { plan, ..case.clone() })
}

/// How long a told amnesia keeps the leader unplugged after its strike
/// (the standard planner draws 200-1,500 ms).
const AMNESIA_DOWN_MS: u64 = 400;

/// The case with a server's planned forgetting told by the commit it
/// follows: a restore from its own backup (`BackupNode`, then `RestoreNode`
/// of that server), or a crash while its disk was slowed (`DiskStall`, then
/// `Crash` of that server, with its restart and the disk's return to
/// normal), becomes one `AckAmnesia` episode from the warm-up to the end of
/// the run of `run_ms`: a follower forgets, by a restore (`fsync_ms` 0) or a
/// crash in its slowed fsync, entries it acknowledged just as the leader
/// applies them, whoever leads and follows under another seed. The first
/// such server's story is told, first without the plan's leader churn (the
/// episode pulls the leader's cable itself), then with it; empty where no
/// server forgets so.
pub(crate) fn amnesia_forms(case: &Case, run_ms: u64) -> Vec<Case> {
    let plan = &case.plan;
    let forgets = |i: usize, event: &FaultEvent| -> Option<(NodeId, u64)> {
        let later = &plan[i + 1..];
        match event.fault {
            Fault::BackupNode { node } if later.iter().any(|e| e.fault == Fault::RestoreNode { node }) => {
                Some((node, 0))
            }
            Fault::DiskStall { node, fsync_ms } if fsync_ms > 0 => later
                .iter()
                .any(|e| matches!(e.fault, Fault::Crash { node: n, .. } if n == node))
                .then_some((node, fsync_ms)),
            _ => None,
        }
    };
    let Some((node, fsync_ms)) = plan.iter().enumerate().find_map(|(i, event)| forgets(i, event)) else {
        return Vec::new();
    };
    let told = |fault: &Fault| match *fault {
        Fault::BackupNode { node: n } | Fault::RestoreNode { node: n } => fsync_ms == 0 && n == node,
        Fault::DiskStall { node: n, .. } | Fault::Crash { node: n, .. } | Fault::Restart { node: n } => {
            fsync_ms > 0 && n == node
        }
        _ => false,
    };
    let amnesia = FaultEvent {
        at_ms: WARMUP_MS,
        fault: Fault::AckAmnesia { for_ms: whole_run_ms(run_ms), down_ms: AMNESIA_DOWN_MS, fsync_ms },
    };
    let kept: Vec<FaultEvent> = plan.iter().filter(|event| !told(&event.fault)).cloned().collect();
    let unchurned: Vec<FaultEvent> =
        kept.iter().filter(|event| !matches!(event.fault, Fault::LeaderChurn { .. })).cloned().collect();
    let mut forms = vec![Case { plan: merged(&unchurned, vec![amnesia.clone()]), ..case.clone() }];
    if unchurned.len() < kept.len() {
        forms.push(Case { plan: merged(&kept, vec![amnesia]), ..case.clone() });
    }
    forms
}

/// The case with the resource's planned crashes and restores told by the
/// write they follow: a crash (with the restart that follows it) becomes a
/// fence strike that crashes the resource just after a takeover write and
/// brings it back as long after, a restore one that restores it there
/// (`FenceStrikes` with `restore`), each watching from the warm-up to the
/// end of the run of `run_ms`, [`WIDE_STRIKES_MIN`] times; the resource's
/// backups are taken at the warm-up, before any story's write. A crash
/// that fell after the stale holder's takeover under one seed's timing
/// falls there under every seed's. `None` where the plan neither crashes
/// nor restores the resource.
pub(crate) fn resource_strikes(case: &Case, run_ms: u64) -> Option<Case> {
    let strike = |down_ms: u64, restore: bool| FaultEvent {
        at_ms: WARMUP_MS,
        fault: Fault::FenceStrikes { for_ms: whole_run_ms(run_ms), strikes: WIDE_STRIKES_MIN, down_ms, restore },
    };
    let mut plan = Vec::with_capacity(case.plan.len());
    let mut told = false;
    let mut restarts_taken = Vec::new();
    for (i, event) in case.plan.iter().enumerate() {
        match event.fault {
            Fault::CrashResource => {
                let restart = case.plan[i + 1..].iter().position(|later| later.fault == Fault::RestartResource);
                let j = restart.map(|k| i + 1 + k)?;
                restarts_taken.push(j);
                plan.push(strike(case.plan[j].at_ms - event.at_ms, false));
                told = true;
            }
            Fault::RestartResource if restarts_taken.contains(&i) => {}
            Fault::RestoreResource => {
                plan.push(strike(0, true));
                told = true;
            }
            Fault::BackupResource => plan.push(FaultEvent { at_ms: event.at_ms.min(WARMUP_MS), ..event.clone() }),
            _ => plan.push(event.clone()),
        }
    }
    plan.sort_by_key(|event| event.at_ms);
    told.then(|| Case { plan, ..case.clone() })
}

/// `plan` with `added` put in time order (an added event goes after the
/// plan's events of the same instant).
pub fn merged(plan: &[FaultEvent], added: Vec<FaultEvent>) -> Vec<FaultEvent> {
    let mut out = plan.to_vec();
    for event in added {
        let at = out.partition_point(|e| e.at_ms <= event.at_ms);
        out.insert(at, event);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(at_ms: u64, fault: Fault) -> FaultEvent {
        FaultEvent { at_ms, fault }
    }

    fn case(plan: Vec<FaultEvent>) -> Case {
        Case { seed: 7, model: Model::default(), plan }
    }

    #[test]
    fn widened_opens_every_strike_window_to_the_whole_run_and_keeps_the_rest() {
        let plan = vec![
            at(100, Fault::Heal),
            at(2_000, Fault::FenceStrikes { for_ms: 500, strikes: 1, down_ms: 12, restore: false }),
            at(2_500, Fault::PauseLeader { ms: 30 }),
            at(4_000, Fault::GrantStrikes { for_ms: 900, strikes: 5, pause_ms: 700 }),
        ];
        let wide = widened(&case(plan.clone()), 10_000).expect("two windows to open");
        assert_eq!(
            wide.plan,
            vec![
                at(100, Fault::Heal),
                at(300, Fault::FenceStrikes { for_ms: 9_700, strikes: 3, down_ms: 12, restore: false }),
                at(300, Fault::GrantStrikes { for_ms: 9_700, strikes: 5, pause_ms: 700 }),
                at(2_500, Fault::PauseLeader { ms: 30 }),
            ],
            "windows from the warm-up to the end, at least three strikes, sizes kept, the plan in time order"
        );
        assert_eq!(widened(&wide, 10_000), None, "already as wide");
        assert_eq!(widened(&case(vec![plan[2].clone()]), 10_000), None, "no strike family");
    }

    #[test]
    fn the_resources_crashes_and_restores_become_fence_strikes_and_its_backups_move_to_the_warm_up() {
        let plan = vec![
            at(100, Fault::Heal),
            at(4_000, Fault::BackupResource),
            at(5_000, Fault::CrashResource),
            at(5_200, Fault::PauseLeader { ms: 30 }),
            at(5_250, Fault::RestartResource),
            at(7_000, Fault::RestoreResource),
        ];
        let told = resource_strikes(&case(plan), 10_000).expect("a crash and a restore to tell");
        let strike = |down_ms, restore| Fault::FenceStrikes { for_ms: 9_700, strikes: 3, down_ms, restore };
        assert_eq!(
            told.plan,
            vec![
                at(100, Fault::Heal),
                at(300, Fault::BackupResource),
                at(300, strike(250, false)),
                at(300, strike(0, true)),
                at(5_200, Fault::PauseLeader { ms: 30 }),
            ],
            "the crash keeps its downtime, the restore restores, each watches the whole run"
        );
        let never_back = vec![at(5_000, Fault::CrashResource)];
        assert_eq!(resource_strikes(&case(never_back), 10_000), None, "a resource left down has no told form");
        assert_eq!(resource_strikes(&case(vec![at(4_000, Fault::BackupResource)]), 10_000), None, "nothing to tell");
    }

    #[test]
    fn a_servers_forgetting_becomes_one_ack_amnesia_without_then_with_the_churn() {
        let churn = at(1_300, Fault::LeaderChurn { for_ms: 2, within_ms: 13, down_ms: 114 });
        let restored = vec![
            at(1_000, Fault::BackupNode { node: NodeId(1) }),
            churn.clone(),
            at(1_400, Fault::Pause { actor: Actor::Server(NodeId(2)), ms: 30 }),
            at(1_500, Fault::RestoreNode { node: NodeId(1) }),
        ];
        let amnesia = |fsync_ms| at(300, Fault::AckAmnesia { for_ms: 9_700, down_ms: AMNESIA_DOWN_MS, fsync_ms });
        let forms = amnesia_forms(&case(restored.clone()), 10_000);
        let plans: Vec<Vec<FaultEvent>> = forms.into_iter().map(|c| c.plan).collect();
        assert_eq!(
            plans,
            vec![vec![amnesia(0), restored[2].clone()], vec![amnesia(0), churn.clone(), restored[2].clone()]],
            "a restore from the server's own backup: fsync 0, first without the churn"
        );
        let crashed = vec![
            at(2_476, Fault::DiskStall { node: NodeId(1), fsync_ms: 121 }),
            at(2_858, Fault::Crash { node: NodeId(1), torn: false }),
            at(2_893, Fault::Crash { node: NodeId(2), torn: false }),
            at(2_905, Fault::DiskStall { node: NodeId(1), fsync_ms: 0 }),
            at(2_974, Fault::Restart { node: NodeId(1) }),
        ];
        let plans: Vec<Vec<FaultEvent>> =
            amnesia_forms(&case(crashed.clone()), 10_000).into_iter().map(|c| c.plan).collect();
        assert_eq!(plans, vec![vec![amnesia(121), crashed[2].clone()]], "a crash in a slowed fsync: that fsync");
        let unrelated = vec![restored[0].clone(), at(1_500, Fault::RestoreNode { node: NodeId(2) })];
        assert!(amnesia_forms(&case(unrelated), 10_000).is_empty(), "a restore from another server's backup");
        let never_crashed = vec![crashed[0].clone(), crashed[2].clone()];
        assert!(amnesia_forms(&case(never_crashed), 10_000).is_empty(), "a slowed server that never crashed");
    }

    #[test]
    fn crashes_after_votes_become_vote_strikes_and_crashes_after_appends_stay() {
        let votes = at(1_000, Fault::AckCrashes { for_ms: 3_703, votes: true, strikes: 2, down_ms: 45 });
        let appends = at(1_500, Fault::AckCrashes { for_ms: 2_000, votes: false, strikes: 1, down_ms: 30 });
        let told = vote_strike_form(&case(vec![votes, appends.clone()]), 10_000).expect("a vote crash to tell");
        let strike = Fault::VoteStrikes { for_ms: 9_700, strikes: 3, down_ms: 45, cut_ms: VOTE_CUT_MS };
        assert_eq!(told.plan, vec![at(300, strike), appends.clone()]);
        assert_eq!(vote_strike_form(&case(vec![appends]), 10_000), None, "no vote crash");
    }

    #[test]
    fn a_repeated_stall_arms_the_next_holders_and_nothing_else_twice() {
        let (on, before) = (Overtake::Write, StallPoint::Renew);
        let stall = at(
            500,
            Fault::StallUntilOvertaken(UntilOvertaken {
                on,
                after_ms: 0,
                ms_max: 2_000,
                before,
                path: None,
                end: JobEnd::Drawn,
            }),
        );
        let late = at(700, Fault::StallOnGrant { ms: 300 });
        let out = repeated(&case(vec![at(100, Fault::Heal), stall.clone(), late.clone(), at(900, Fault::Heal)]), 3);
        let plan = vec![
            at(100, Fault::Heal),
            stall.clone(),
            stall.clone(),
            stall,
            late.clone(),
            late.clone(),
            late,
            at(900, Fault::Heal),
        ];
        assert_eq!(out.map(|c| c.plan), Some(plan));
        let untold = vec![at(100, Fault::Heal), at(200, Fault::StallHolder { ms: 5 }), at(300, Fault::LoseWriteAnswer)];
        assert_eq!(repeated(&case(untold), 3), None, "no stall told by what it waits for");
    }

    #[test]
    fn added_events_keep_the_plan_in_time_order() {
        let plan = vec![at(10, Fault::Heal), at(30, Fault::Heal)];
        let out = merged(&plan, vec![at(30, Fault::StallHolder { ms: 5 }), at(0, Fault::StallHolder { ms: 1 })]);
        let times: Vec<u64> = out.iter().map(|e| e.at_ms).collect();
        assert_eq!(times, vec![0, 10, 30, 30]);
        assert_eq!(out[3].fault, Fault::StallHolder { ms: 5 });
    }
}
