//! Hand-made client histories: each a short story of requests and answers.
//! Leases are 2,000 ms with a drift bound of 500 ppm, so a lease granted to
//! a request first sent at 0 ms cannot have ended before about 1,998 ms.

use super::ops::{Call, Op};
use super::search::{search, Found, Limits};
use super::spec::State;
use crate::checker::testkit::*;
use crate::checker::{Property, Undecided, Verdict, Violation};
use crate::history::EventKind;
use crate::run::sweep::LinearizableCost;
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ClientId, Key, RequestId, Token};

fn try_lock(h: H, client: u32, request: u64, k: &str) -> H {
    h.acquire_request(client, request, k)
}

fn release_req(h: H, client: u32, request: u64, k: &str, token: u64) -> H {
    h.request(client, request, 0, ClientRequest::Release { key: key(k), token: Token(token) })
}

fn busy(ms: u64) -> ClientReply {
    ClientReply::Busy { remaining_ms: ms }
}

fn found(verdict: &Verdict) -> Vec<&Violation> {
    verdict.violations.iter().filter(|v| v.property == Property::Linearizable).collect()
}

fn assert_linearizable(verdict: &Verdict) {
    assert!(found(verdict).is_empty(), "violations: {:#?}", found(verdict));
}

/// c1 takes `k` with 41 at [0, 10] ms.
fn c1_holds() -> H {
    try_lock(H::new(), 1, 1, "k").at_ms(10).answered(1, 1, reply_granted(41))
}

#[test]
fn a_busy_after_the_holder_released_is_stale() {
    let verdict = release_req(c1_holds().at_ms(100), 1, 2, "k", 41)
        .at_ms(110)
        .answered(1, 2, ClientReply::Released)
        .at_ms(200)
        .acquire_request(2, 1, "k")
        .at_ms(205)
        .answered(2, 1, busy(1_500))
        .check();
    let violations = found(&verdict);
    assert_eq!(violations.len(), 1, "{violations:#?}");
    let detail = &violations[0].detail;
    assert!(detail.contains("have no linearization"), "{detail}");
    // The window is the release and the stale Busy: the grant before them is not needed.
    assert!(detail.contains("release tok41") && detail.contains("Busy, 1500 ms left"), "{detail}");
    assert!(!detail.contains("Granted tok41"), "{detail}");
    assert_eq!(violations[0].at_us, 205_000);
}

#[test]
fn a_busy_while_held_is_fine_but_not_one_longer_than_any_lease() {
    let held = try_lock(c1_holds().at_ms(100), 2, 1, "k").at_ms(105);
    assert_linearizable(&held.answered(2, 1, busy(1_900)).check());
    let held = try_lock(c1_holds().at_ms(100), 2, 1, "k").at_ms(105);
    assert_eq!(found(&held.answered(2, 1, busy(LEASE_MS + 1)).check()).len(), 1);
}

#[test]
fn a_released_after_the_lease_expired_and_the_key_was_regranted_is_wrong() {
    let verdict = try_lock(c1_holds().at_ms(2_500), 2, 1, "k")
        .at_ms(2_510)
        .answered(2, 1, reply_granted(42))
        .at_ms(2_600)
        .request(1, 2, 0, ClientRequest::Release { key: key("k"), token: Token(41) })
        .at_ms(2_610)
        .answered(1, 2, ClientReply::Released)
        .check();
    assert_eq!(found(&verdict).len(), 1, "{:#?}", verdict.violations);
}

#[test]
fn a_grant_is_fine_only_because_an_expiry_may_fall_between_the_two_operations() {
    // c2's try-lock is sent 2,500 ms after c1's: c1's lease may have ended.
    let later = try_lock(c1_holds().at_ms(2_500), 2, 1, "k").at_ms(2_510).answered(2, 1, reply_granted(42));
    assert_linearizable(&later.check());
    // Sent at 1,500 ms and answered at 1,510 ms: c1's lease cannot have ended by then.
    let sooner = try_lock(c1_holds().at_ms(1_500), 2, 1, "k").at_ms(1_510).answered(2, 1, reply_granted(42));
    assert_eq!(found(&sooner.check()).len(), 1);
    // Answered at 2,010 ms: the expiry may fall just before it takes effect.
    let slow = try_lock(c1_holds().at_ms(1_500), 2, 1, "k").at_ms(2_010).answered(2, 1, reply_granted(42));
    assert_linearizable(&slow.check());
}

#[test]
fn a_renewal_pushes_the_earliest_end_out() {
    let renewed = c1_holds()
        .at_ms(1_000)
        .request(1, 2, 0, ClientRequest::Renew { key: key("k"), token: Token(41) })
        .at_ms(1_010)
        .answered(1, 2, ClientReply::Renewed { lease_ms: LEASE_MS });
    let verdict = try_lock(renewed.at_ms(2_500), 2, 1, "k").at_ms(2_510).answered(2, 1, reply_granted(42)).check();
    assert_eq!(found(&verdict).len(), 1);
}

/// A violation is dated when the last answer of its window came: c2 asks
/// first and is answered last, so the window's last operation by sending
/// (c1's renewal, answered at 1,010 ms) is not when it became certain.
#[test]
fn a_violation_is_dated_by_the_last_answer_of_its_window_not_the_last_request() {
    let verdict = try_lock(c1_holds().at_ms(900), 2, 1, "k")
        .at_ms(1_000)
        .request(1, 2, 0, ClientRequest::Renew { key: key("k"), token: Token(41) })
        .at_ms(1_010)
        .answered(1, 2, ClientReply::Renewed { lease_ms: LEASE_MS })
        .at_ms(2_500)
        .answered(2, 1, reply_granted(42))
        .check();
    let violations = found(&verdict);
    assert_eq!(violations.len(), 1, "{violations:#?}");
    let detail = &violations[0].detail;
    assert!(detail.contains("renew tok41") && detail.contains("Granted tok42"), "{detail}");
    assert_eq!(violations[0].at_us, 2_500_000, "{detail}");
}

#[test]
fn a_stepped_server_clock_lets_a_lease_end_early() {
    let stepped = c1_holds().at_ms(500).clock(server(0), 2_500_000, 0, true).clock(server(0), 2_500_000, 0, true);
    // The first mapping of n0 is no step; the jump from it is.
    let verdict = try_lock(stepped.at_ms(1_500), 2, 1, "k").at_ms(1_510).answered(2, 1, reply_granted(42)).check();
    assert_eq!(found(&verdict).len(), 1, "a first mapping is not a step");
    let stepped = H::new()
        .clock(server(0), 0, 0, true)
        .acquire_request(1, 1, "k")
        .at_ms(10)
        .answered(1, 1, reply_granted(41))
        .at_ms(500)
        .clock(server(0), 2_500_000, 0, true);
    let verdict = try_lock(stepped.at_ms(1_500), 2, 1, "k").at_ms(1_510).answered(2, 1, reply_granted(42)).check();
    assert_linearizable(&verdict);
}

#[test]
fn the_same_token_told_twice_is_a_violation_even_on_two_keys() {
    let verdict = try_lock(c1_holds().at_ms(100), 2, 1, "j").at_ms(110).answered(2, 1, reply_granted(41)).check();
    let violations = found(&verdict);
    assert_eq!(violations.len(), 1, "{violations:#?}");
    assert!(violations[0].detail.contains("tok41 was told to two requests"), "{}", violations[0].detail);
}

#[test]
fn a_lower_token_after_a_higher_one_was_answered_is_a_violation_across_keys() {
    let verdict = try_lock(c1_holds().at_ms(100), 2, 1, "j").at_ms(110).answered(2, 1, reply_granted(40)).check();
    let violations = found(&verdict);
    assert_eq!(violations.len(), 1, "{violations:#?}");
    assert!(violations[0].detail.contains("tokens must increase"), "{}", violations[0].detail);
    // Concurrent requests may be granted in either order.
    let concurrent = try_lock(H::new(), 1, 1, "k")
        .at_ms(1)
        .acquire_request(2, 1, "j")
        .at_ms(10)
        .answered(1, 1, reply_granted(42))
        .answered(2, 1, reply_granted(41))
        .check();
    assert_linearizable(&concurrent);
}

#[test]
fn a_grant_nobody_heard_of_explains_a_busy() {
    // c1 gives up on its acquire; c2 is told Busy: the ghost grant may hold the key.
    let verdict = try_lock(H::new(), 1, 1, "k")
        .at_ms(20)
        .ev(EventKind::GaveUp { client: ClientId(1), request: RequestId(1), why: Default::default() })
        .at_ms(100)
        .acquire_request(2, 1, "k")
        .at_ms(105)
        .answered(2, 1, busy(2_000))
        .check();
    assert_linearizable(&verdict);
    // Without that acquire the Busy is stale.
    let verdict = try_lock(H::new().at_ms(100), 2, 1, "k").at_ms(105).answered(2, 1, busy(2_000)).check();
    assert_eq!(found(&verdict).len(), 1);
}

#[test]
fn a_busy_zero_for_a_free_key_is_excused_by_a_waiter_in_the_queue() {
    let waiting = ClientRequest::Acquire { key: key("k"), lease_ms: LEASE_MS, wait_ms: 1_000 };
    let verdict = H::new()
        .request(3, 1, 0, waiting)
        .at_ms(50)
        .acquire_request(2, 1, "k")
        .at_ms(55)
        .answered(2, 1, busy(0))
        .at_ms(120)
        .answered(3, 1, reply_granted(41))
        .check();
    assert_linearizable(&verdict);
}

#[test]
fn after_a_cluster_restore_the_key_is_unknown() {
    let restored = || {
        release_req(c1_holds().at_ms(100), 1, 2, "k", 41)
            .at_ms(110)
            .answered(1, 2, ClientReply::Released)
            .at_ms(150)
            .restore(1, 1 << 32)
    };
    let verdict = try_lock(restored().at_ms(200), 2, 1, "k").at_ms(205).answered(2, 1, busy(1_500)).check();
    assert_linearizable(&verdict);
    // A key first asked for after the restore starts unknown too: the
    // backup may hold a lock on it. Its first segment is judged as the run
    // goes (a later request passes its lease), not only at the end.
    let first_after = |h: H| {
        let h = try_lock(h.at_ms(200), 2, 1, "n").at_ms(205).answered(2, 1, busy(1_500));
        try_lock(h.at_ms(9_000), 3, 1, "k").at_ms(9_005).answered(3, 1, reply_granted(1 << 32))
    };
    assert_linearizable(&first_after(restored()).check());
    let unrestored = release_req(c1_holds().at_ms(100), 1, 2, "k", 41).at_ms(110).answered(1, 2, ClientReply::Released);
    assert_eq!(found(&first_after(unrestored).check()).len(), 1, "without the restore, n is free");
}

/// c1 waits for `k` from 0 ms; c2 is told Busy at 100 ms and granted 42 at
/// 2,500 ms; the cluster is restored at 3,000 ms; c1 is granted the first
/// token above the restore's floor at 3,500 ms (`answer_ms`).
fn granted_across_a_restore(answer_ms: u64) -> H {
    let waiting = ClientRequest::Acquire { key: key("k"), lease_ms: LEASE_MS, wait_ms: 5_000 };
    try_lock(H::new().request(1, 1, 0, waiting).at_ms(100), 2, 1, "k")
        .at_ms(105)
        .answered(2, 1, busy(1_900))
        .at_ms(2_500)
        .acquire_request(2, 2, "k")
        .at_ms(2_510)
        .answered(2, 2, reply_granted(42))
        .at_ms(3_000)
        .restore(1, 1 << 32)
        .at_ms(answer_ms)
        .answered(1, 1, reply_granted((1 << 32) + 1))
}

#[test]
fn an_operation_open_across_a_restore_may_take_effect_before_it_and_again_after() {
    // The Busy at 100 ms is c1's first grant, rolled back by the restore with
    // its session; c1's retry after the restore was granted again. Its
    // answered grant cannot explain the Busy: its token is above 42's.
    assert_linearizable(&granted_across_a_restore(3_500).check());
    // Answered before the restore, c1's grant takes effect once: either
    // before the Busy (then 42 comes after 43) or after 42, and the Busy
    // stays unexplained.
    let before = H::new()
        .request(1, 1, 0, ClientRequest::Acquire { key: key("k"), lease_ms: LEASE_MS, wait_ms: 5_000 })
        .at_ms(100)
        .acquire_request(2, 1, "k")
        .at_ms(105)
        .answered(2, 1, busy(1_900))
        .at_ms(2_500)
        .acquire_request(2, 2, "k")
        .at_ms(2_510)
        .answered(2, 2, reply_granted(42))
        .at_ms(2_800)
        .answered(1, 1, reply_granted(43))
        .at_ms(3_000)
        .restore(1, 1 << 32);
    assert_eq!(found(&before.check()).len(), 1, "a grant answered before the restore takes effect once");
}

#[test]
fn an_answer_that_does_not_fit_the_request_has_no_linearization() {
    let verdict = try_lock(H::new(), 1, 1, "k").at_ms(10).answered(1, 1, ClientReply::Released).check();
    assert_eq!(found(&verdict).len(), 1);
}

#[test]
fn the_clean_run_of_every_family_is_linearizable() {
    assert_linearizable(&happy().check());
}

/// A try-lock of `client` on key `k`, sent at `inv_us` and answered `answer` at `resp_us`.
fn try_lock_op(client: u32, answer: ClientReply, inv_us: u64, resp_us: u64) -> Op {
    Op {
        client: ClientId(client),
        request: RequestId(1),
        key: Key::new("k"),
        call: Call::Acquire { lease_ms: LEASE_MS, wait_ms: 0 },
        answer: Some(answer),
        inv_us,
        resp_us,
        lease_end_min_us: 0,
        queue_excuse: false,
        clock_excuse: false,
    }
}

#[test]
fn a_search_that_hits_its_bound_is_unknown_not_passed() {
    let busy = ClientReply::Busy { remaining_ms: 10 };
    let ops: Vec<Op> = (0..8).map(|c| try_lock_op(c, busy, u64::from(c) * 100, u64::from(c) * 100 + 10)).collect();
    let tight = Limits { ops_per_search_max: 4, steps_max: 1_000, ..Limits::STANDARD };
    assert_eq!(search(&ops, State::unknown(0), tight).found, Found::Unknown);
    let steps = Limits { ops_per_search_max: 100, steps_max: 3, ..Limits::STANDARD };
    assert_eq!(search(&ops, State::unknown(0), steps).found, Found::Unknown);
    assert_eq!(search(&ops, State::unknown(0), Limits::STANDARD).found, Found::Linearizable);
    assert_eq!(search(&ops, State::free(), Limits::STANDARD).found, Found::NoLinearization);
}

#[test]
fn a_memo_that_fills_up_costs_steps_never_a_verdict() {
    // Eight overlapping busy answers fit in any order; a ninth answer fits
    // no state at all. Proving there is no linearization visits every
    // subset of the eight (256 nodes with the whole memo); a memo of 16
    // keeps forgetting and walks orders instead, but finds the same.
    let op = |client: u32, answer: ClientReply| try_lock_op(client, answer, 0, 1_000);
    let mut ops: Vec<Op> = (0..8).map(|c| op(c, ClientReply::Busy { remaining_ms: 10 })).collect();
    ops.push(op(8, ClientReply::Released));
    let whole = search(&ops, State::unknown(0), Limits::STANDARD);
    let small = search(&ops, State::unknown(0), Limits { memo_slots: 16, ..Limits::STANDARD });
    assert_eq!((whole.found, small.found), (Found::NoLinearization, Found::NoLinearization));
    assert!(whole.steps <= 300, "the whole memo visits each subset once: {} steps", whole.steps);
    assert!(small.steps > 10 * whole.steps, "a small memo forgets: {} steps", small.steps);
    ops.pop();
    let small = search(&ops, State::unknown(0), Limits { memo_slots: 16, ..Limits::STANDARD });
    assert_eq!(small.found, Found::Linearizable, "and passes what passes");
}

#[test]
fn a_key_the_search_cannot_take_is_named_not_passed() {
    // A waiter never answered keeps the key's one segment open while 4,096
    // try-locks are answered Busy (excused by the waiter): one more operation
    // than a search takes. The key is not judged, and the verdict says which
    // key it left out and why.
    let mut h =
        H::new().request(9, 1, 0, ClientRequest::Acquire { key: key("k"), lease_ms: LEASE_MS, wait_ms: 600_000 });
    for request in 1..=4_096u64 {
        h = try_lock(h.at_ms(request * 10), 1, request, "k").at_ms(request * 10 + 1).answered(1, request, busy(0));
    }
    let verdict = h.check();
    assert!(found(&verdict).is_empty(), "{:#?}", found(&verdict));
    let undecided = Undecided { key: key("k"), operations: 4_097, steps: 0 };
    assert_eq!(verdict.counters.linearizable_undecided, vec![undecided.clone()]);
    assert_eq!(LinearizableCost::of(&verdict.counters).unknown, 1, "a hunt counts it");
    let text = undecided.to_string();
    assert!(text.starts_with("linearizable: k not judged: of its 4097 operations, a stretch with no pause"), "{text}");
    let searched = Undecided { steps: 200_001, operations: 56, ..undecided };
    let text = searched.to_string();
    assert!(text.contains("a search over a segment of its 56 operations reached a bound after 200001 steps"), "{text}");
}

/// A segment past the search's bound keeps only what was never answered or
/// is still open; the token checks still see every grant.
#[test]
fn a_segment_past_the_bound_keeps_only_its_open_operations_and_the_token_checks_see_every_grant() {
    // On `k`: c3's acquire open throughout (one segment), four try-locks
    // answered Busy, a fifth granted 41; on `j` a grant of 41 again: the
    // same token twice.
    let mut h =
        H::new().request(3, 9, 0, ClientRequest::Acquire { key: key("k"), lease_ms: LEASE_MS, wait_ms: 60_000 });
    for request in 1..=4 {
        h = try_lock(h, 2, request, "k").at_ms(request).answered(2, request, busy(10));
    }
    let h = try_lock(h, 1, 5, "k").at_ms(10).answered(1, 5, reply_granted(41));
    let h = try_lock(h, 4, 7, "j").at_ms(20).answered(4, 7, reply_granted(41));
    let mut log = logged(&h, 4);
    // Two keys named, one teller kept (a repeat keeps the first), the repeat found.
    assert_eq!(log.tokens().held(), (2, 1, 1, 0));
    let found: Vec<String> = log.tokens().take_found().into_iter().map(|v| v.detail).collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].starts_with("tok41 was told to two requests: c1/r5 on k"), "{}", found[0]);
    let keys = log.take_keys();
    let kept: Vec<(u32, Option<ClientReply>)> =
        keys[&key("k")].current.ops.values().map(|op| (op.client.0, op.answer)).collect();
    assert_eq!(kept, [(3, None)]);
    assert_eq!(keys[&key("k")].client_ops, 6);
    assert!(keys[&key("k")].current.trimmed && !keys[&key("j")].current.trimmed);
    // The family with that bound: `k` is unknown (never searched), and its
    // grant still meets `j`'s in the token checks.
    let config = h.config(12_000_000);
    let tight = Limits { ops_per_search_max: 4, ..Limits::STANDARD };
    let mut family = super::LinearizableChecker::with_limits(&config, tight);
    for event in h.events() {
        family.observe_event(event);
    }
    let mut report = crate::checker::Report::default();
    crate::checker::Family::finish(&mut family, &crate::checker::state::Context::new(config), &mut report);
    let unknown = Undecided { key: key("k"), operations: 6, steps: 0 };
    assert_eq!(report.counters.linearizable_undecided, [unknown]);
    assert_eq!(report.counters.linearizable_ops_per_key, [1, 6]);
    let told_twice = report.violations.iter().filter(|v| v.detail.contains("tok41 was told to two requests"));
    assert_eq!(told_twice.count(), 1, "{:#?}", report.violations);
}

/// The token checks are judged as the history goes and keep what does not
/// grow with the run: ten thousand grants on three keys keep three key
/// names, the tellers of the newest tokens and a few pages of bits; a
/// repeat of a token from long before and a decrease are still found, and a
/// repeat of a recent token names its first teller.
#[test]
fn the_token_checks_keep_little_and_still_catch_a_repeat_from_long_before() {
    use super::tokens::{Told, TELLERS_KEPT};
    assert!(std::mem::size_of::<Told>() <= 48, "a grant kept costs {} bytes", std::mem::size_of::<Told>());
    let names = ["a", "b", "c"];
    let mut h = H::new();
    for i in 0..10_000u64 {
        let client = 1 + (i % 5) as u32;
        h = try_lock(h.at_ms(10 * i), client, i + 1, names[(i % 3) as usize]).at_ms(10 * i + 1).answered(
            client,
            i + 1,
            reply_granted(100 + i),
        );
    }
    // A grant of a token told long before, sent after a higher one was
    // answered; then one of a recent token, sent after the first was answered.
    let h = try_lock(h.at_ms(200_000), 9, 1, "b").at_ms(200_001).answered(9, 1, reply_granted(150));
    let h = try_lock(h.at_ms(200_010), 8, 1, "a").at_ms(200_011).answered(8, 1, reply_granted(10_050));
    let mut log = logged(&h, Limits::STANDARD.ops_per_search_max);
    let (keys, tellers, pages, _) = log.tokens().held();
    assert_eq!(keys, 3);
    assert!(tellers as u64 <= TELLERS_KEPT + 128, "{tellers} tellers kept");
    assert!(pages <= 11, "{pages} pages of bits");
    let details: Vec<String> = log.tokens().take_found().into_iter().map(|v| v.detail).collect();
    assert_eq!(details.len(), 4, "{details:#?}");
    assert!(details[0].starts_with("tok150 was told to two requests: one answered earlier"), "{}", details[0]);
    assert!(details[0].contains("and c9/r1 on b (answered at 200001 ms)"), "{}", details[0]);
    assert!(details[1].starts_with("c9/r1 was granted tok150 on b although c5/r10000 had been told tok10099"));
    assert!(details[2].starts_with("tok10050 was told to two requests: c1/r9951 on c (answered at 99501 ms)"));
    assert!(details[3].starts_with("c8/r1 was granted tok10050 on a although c5/r10000"), "{}", details[3]);
}

/// The token checks as the history goes find what the whole-run sweep
/// they replaced finds, over random overlapping grants of few tokens (so
/// repeats and decreases are common): the same decreases, and for each
/// token as many repeats as it has grants after its first.
#[test]
fn the_token_checks_as_the_history_goes_agree_with_a_sweep_of_the_whole_run() {
    use rand::{Rng, SeedableRng};
    let (mut decreases_seen, mut repeats_seen) = (0, 0);
    for seed in 0..200 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let (mut h, mut open, mut grants) = (H::new(), Vec::new(), Vec::new());
        for step in 0..60u64 {
            // Three events an instant: a grant answered as a request is sent is not behind it.
            h = h.at_ms(step / 3 * 10);
            if open.is_empty() || (open.len() < 4 && rng.gen_bool(0.5)) {
                let client = rng.gen_range(1..6);
                h = try_lock(h, client, step, ["a", "b"][rng.gen_range(0..2)]);
                open.push((client, step, h.now_us()));
            } else {
                let (client, request, inv_us) = open.swap_remove(rng.gen_range(0..open.len()));
                let token = rng.gen_range(40..52);
                h = h.answered(client, request, reply_granted(token));
                grants.push((client, request, token, inv_us, h.now_us()));
            }
        }
        let mut log = logged(&h, Limits::STANDARD.ops_per_search_max);
        let found = log.tokens().take_found();
        // The sweep: a grant is below the highest token answered before its first send.
        let mut decreases: Vec<(u32, u64)> = grants
            .iter()
            .filter(|(_, _, token, inv_us, _)| {
                grants.iter().any(|(_, _, earlier, _, resp_us)| resp_us < inv_us && earlier > token)
            })
            .map(|(client, request, ..)| (*client, *request))
            .collect();
        let mut repeats: Vec<u64> = grants.iter().map(|grant| grant.2).collect();
        repeats.sort();
        repeats.dedup();
        let mut repeats: Vec<u64> = repeats
            .into_iter()
            .flat_map(|token| {
                let told = grants.iter().filter(|grant| grant.2 == token).count();
                std::iter::repeat_n(token, told - 1)
            })
            .collect();
        let mut found_decreases = Vec::new();
        let mut found_repeats = Vec::new();
        for v in &found {
            if v.detail.contains("tokens must increase") {
                let named = grants.iter().find(|g| v.detail.starts_with(&format!("c{}/r{} was granted", g.0, g.1)));
                let (client, request, ..) = named.expect("a grant named");
                found_decreases.push((*client, *request));
            } else {
                found_repeats.push(v.tokens[0].0);
            }
        }
        decreases.sort();
        found_decreases.sort();
        repeats.sort();
        found_repeats.sort();
        assert_eq!(found_decreases, decreases, "seed {seed}");
        assert_eq!(found_repeats, repeats, "seed {seed}");
        (decreases_seen, repeats_seen) = (decreases_seen + decreases.len(), repeats_seen + repeats.len());
    }
    assert!(decreases_seen > 500 && repeats_seen > 500, "{decreases_seen} decreases, {repeats_seen} repeats");
}

/// Runs `h` through the family (each segment judged as soon as it may be,
/// or `whole`: each key in one search).
fn judged(h: &H, whole: bool) -> (crate::checker::Report, usize) {
    let config = h.config(h.now_us() + 60_000_000);
    let family =
        if whole { super::LinearizableChecker::uncut(&config) } else { super::LinearizableChecker::eager(&config) };
    judged_by(h, family)
}

/// Runs `h` through the family as a run does (segments held until a key holds many).
fn judged_standard(h: &H) -> (crate::checker::Report, usize) {
    judged_by(h, super::LinearizableChecker::new(&h.config(h.now_us() + 60_000_000)))
}

/// `h` then server 1's clock from `from_ms`, stepped a second ahead every
/// ten seconds 200 times: enough stretches of bad clocks to be sifted often.
fn steps_of_another_server(h: H, from_ms: u64) -> H {
    let mut h = h.at_ms(from_ms).clock(server(1), from_ms * 1_000, 0, true);
    for round in 1..=200u64 {
        let at_ms = from_ms + round * 10_000;
        h = h.at_ms(at_ms).clock(server(1), (at_ms + round * 1_000) * 1_000, 0, true);
    }
    h
}

/// The operations log fed `h`, with a search's bound of `ops_per_search_max`.
fn logged(h: &H, ops_per_search_max: usize) -> super::ops::OpLog {
    let mut log = super::ops::OpLog::new(ops_per_search_max, LEASE_MS);
    for event in h.events() {
        log.observe(event.at_us, &event.kind);
    }
    log
}

/// Runs `h` through `family`; also returns the most operations it held at once.
fn judged_by(h: &H, mut family: super::LinearizableChecker) -> (crate::checker::Report, usize) {
    let config = h.config(h.now_us() + 60_000_000);
    let mut held_max = 0;
    for event in h.events() {
        family.observe_event(event);
        held_max = held_max.max(family.ops_held());
    }
    let mut report = crate::checker::Report::default();
    crate::checker::Family::finish(&mut family, &crate::checker::state::Context::new(config), &mut report);
    (report, held_max)
}

/// A server clock stepped every round for a thousand rounds: the stretches
/// no operation still to be judged can ask of are forgotten, and a step
/// just before the end still lets a lease end early, where none would not.
#[test]
fn old_stretches_of_bad_clocks_are_forgotten_and_a_recent_one_still_counts() {
    const ROUNDS: u64 = 1_000;
    let history = |step_at_end: bool| {
        let mut h = H::new().clock(server(0), 0, 0, true);
        for round in 1..=ROUNDS {
            let at_ms = round * 10_000;
            let client = 1 + (round % 3) as u32;
            // One more second ahead each round: a step from the mapping before.
            h = h.at_ms(at_ms).clock(server(0), (at_ms + round * 1_000) * 1_000, 0, true);
            h = try_lock(h.at_ms(at_ms + 100), client, round, "k").at_ms(at_ms + 110);
            h = h.answered(client, round, reply_granted(100 + round));
        }
        let end_ms = (ROUNDS + 1) * 10_000;
        h = h.at_ms(end_ms).acquire_request(5, 1, "k").at_ms(end_ms + 10).answered(5, 1, reply_granted(5_000));
        if step_at_end {
            h = h.at_ms(end_ms + 500).clock(server(0), (end_ms + 500 + 999_000) * 1_000, 0, true);
        }
        // Granted while 5's lease may still run, unless a clock was stepped meanwhile.
        try_lock(h.at_ms(end_ms + 1_500), 6, 1, "k").at_ms(end_ms + 1_510).answered(6, 1, reply_granted(5_001))
    };
    let (report, _) = judged(&history(true), false);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    assert_linearizable(&history(true).check());
    let (report, _) = judged(&history(false), false);
    assert_eq!(report.violations.len(), 1, "{:#?}", report.violations);
    let h = history(true);
    let mut family = super::LinearizableChecker::eager(&h.config(h.now_us() + 60_000_000));
    for event in h.events() {
        family.observe_event(event);
    }
    assert!(family.bad_clock.len() < 64, "{} stretches kept of {ROUNDS}", family.bad_clock.len());
}

/// While a key holds its operations unjudged, the stretches of bad clocks
/// they may ask of survive every sifting: a grant a step at 500 ms excuses
/// is still excused after 200 steps of another server's clock.
#[test]
fn a_stretch_a_held_operation_needs_survives_sifting() {
    let stepped = try_lock(H::new().clock(server(0), 0, 0, true), 1, 1, "k")
        .at_ms(10)
        .answered(1, 1, reply_granted(41))
        .at_ms(500)
        .clock(server(0), 2_500_000, 0, true);
    let h = try_lock(stepped.at_ms(1_500), 2, 1, "k").at_ms(1_510).answered(2, 1, reply_granted(42));
    let h = steps_of_another_server(h, 2_000);
    let (report, _) = judged_standard(&h);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    assert_linearizable(&h.check());
}

/// A step before a request's first send, within two leases, still excuses
/// a Busy longer than a lease after the stretches are sifted.
#[test]
fn a_step_before_a_held_busy_still_excuses_it_after_sifting() {
    let h = H::new().clock(server(0), 0, 0, true).at_ms(1_500).clock(server(0), 3_500_000, 0, true);
    let h = try_lock(h.at_ms(2_500), 1, 1, "k").at_ms(2_510).answered(1, 1, reply_granted(41));
    let h = try_lock(h.at_ms(3_000), 2, 1, "k").at_ms(3_005).answered(2, 1, busy(LEASE_MS + 500));
    let h = steps_of_another_server(h, 4_000);
    let (report, _) = judged_standard(&h);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    // Without the step the Busy is too long.
    let plain = try_lock(H::new().at_ms(2_500), 1, 1, "k").at_ms(2_510).answered(1, 1, reply_granted(41));
    let plain = try_lock(plain.at_ms(3_000), 2, 1, "k").at_ms(3_005).answered(2, 1, busy(LEASE_MS + 500));
    assert_eq!(found(&plain.check()).len(), 1);
}

/// A request told the same token again (its id sent anew after its answer)
/// is one grant, not two; the token checks hold nothing for a request once it settles.
#[test]
fn the_same_request_told_its_token_again_is_one_grant_and_settled_requests_are_let_go() {
    let h = c1_holds().at_ms(100);
    let h = release_req(h, 1, 2, "k", 41).at_ms(110).answered(1, 2, ClientReply::Released);
    let h = try_lock(h.at_ms(200), 1, 1, "k").at_ms(210).answered(1, 1, reply_granted(41));
    let verdict = h.check();
    let repeats: Vec<&Violation> = found(&verdict).into_iter().filter(|v| v.detail.contains("two requests")).collect();
    assert!(repeats.is_empty(), "{repeats:#?}");
    // Settled by a Busy, by giving up, by a crash, by a grant: nothing held.
    let h = h.at_ms(300);
    let h = try_lock(h, 2, 1, "k").at_ms(310).answered(2, 1, busy(1_000));
    let h = try_lock(h, 3, 1, "k").at_ms(320).ev(EventKind::GaveUp {
        client: ClientId(3),
        request: RequestId(1),
        why: Default::default(),
    });
    let h = try_lock(h, 4, 1, "k").at_ms(330).crash(client(4));
    let h = try_lock(h, 5, 1, "j").at_ms(340).answered(5, 1, reply_granted(42));
    let mut log = logged(&h, Limits::STANDARD.ops_per_search_max);
    assert_eq!(log.tokens().held().3, 0, "requests held after they settled");
}

#[test]
fn a_long_history_is_judged_in_segments_and_forgotten_as_it_goes() {
    // 3,000 rounds of a grant and its release on one key: 6,000 operations,
    // past what one search takes, each round a segment of its own.
    let mut h = H::new();
    for round in 0..3_000u64 {
        let at_ms = round * 100;
        h = try_lock(h.at_ms(at_ms), 1, 2 * round + 1, "k").at_ms(at_ms + 5).answered(
            1,
            2 * round + 1,
            reply_granted(41 + round),
        );
        h = release_req(h.at_ms(at_ms + 50), 1, 2 * round + 2, "k", 41 + round).at_ms(at_ms + 55).answered(
            1,
            2 * round + 2,
            ClientReply::Released,
        );
    }
    let (report, held_max) = judged(&h, false);
    assert!(report.violations.is_empty() && report.counters.linearizable_undecided.is_empty(), "{report:#?}");
    assert!(held_max <= 2 * super::TAIL_OPS, "the family held {held_max} operations at once");
    // As a run judges it: the segments wait until the key holds more than `HELD_OPS_MAX`.
    let (report, held_max) = judged_by(&h, super::LinearizableChecker::new(&h.config(h.now_us() + 60_000_000)));
    assert!(report.violations.is_empty() && report.counters.linearizable_undecided.is_empty(), "{report:#?}");
    let bound = super::ops::HELD_OPS_MAX + 2 * super::TAIL_OPS;
    assert!((super::ops::HELD_OPS_MAX..=bound).contains(&held_max), "the family held {held_max} operations at once");
    // Judged whole, the same key is past the bound: unknown.
    assert_eq!(judged(&h, true).0.counters.linearizable_undecided.len(), 1);
    // A stale Busy at the end is found, shown with the release before it.
    let stale = try_lock(h.at_ms(300_100), 2, 1, "k").at_ms(300_105).answered(2, 1, busy(1_500));
    let (report, _) = judged(&stale, false);
    assert_eq!(report.violations.len(), 1, "{:#?}", report.violations);
    let detail = &report.violations[0].detail;
    assert!(detail.contains("release tok3040") && detail.contains("Busy, 1500 ms left"), "{detail}");
    assert!(!detail.contains("after what the key's earlier operations left"), "{detail}");
}

#[test]
fn an_acquire_never_answered_may_take_effect_segments_later() {
    // c1's try-lock is never answered (it gives up); much later, with no
    // grant ever answered, c2 is told the key is busy: only c1's acquire,
    // taking effect late, explains it.
    let gave_up = try_lock(H::new(), 1, 1, "k").at_ms(100).ev(EventKind::GaveUp {
        client: ClientId(1),
        request: RequestId(1),
        why: Default::default(),
    });
    let later = |h: H| {
        let h = try_lock(h.at_ms(200), 3, 1, "j").at_ms(205).answered(3, 1, reply_granted(41));
        try_lock(h.at_ms(5_000), 2, 1, "k").at_ms(5_010).answered(2, 1, busy(1_900))
    };
    assert!(judged(&later(gave_up), false).0.violations.is_empty());
    let without = later(H::new());
    assert_eq!(judged(&without, false).0.violations.len(), 1, "nothing else explains the Busy");
}

/// A small random history of three clients on one key: try-locks, waits,
/// releases and renewals of tokens they were told, answered plausibly or
/// not at all, overlapping or not, and now and then a whole-cluster restore.
fn random_history(seed: u64) -> H {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    // (true µs, order made, event): sorted into a history at the end.
    let mut events: Vec<(u64, usize, EventKind)> = Vec::new();
    let mut at_ms = 0;
    let mut token = 40;
    let mut told: Vec<Option<u64>> = vec![None; 3];
    for request in 1..=rng.gen_range(4..14u64) {
        let client = rng.gen_range(0..3u32);
        // Few distinct gaps, so that a send often meets an answer's instant.
        at_ms += [0, 5, 300, 900, 1_400][rng.gen_range(0..5)];
        let body = match (rng.gen_range(0..4), told[client as usize]) {
            (0, Some(t)) => ClientRequest::Release { key: key("k"), token: Token(t) },
            (1, Some(t)) => ClientRequest::Renew { key: key("k"), token: Token(t) },
            (2, _) => ClientRequest::Acquire { key: key("k"), lease_ms: LEASE_MS, wait_ms: 1_000 },
            _ => ClientRequest::Acquire { key: key("k"), lease_ms: LEASE_MS, wait_ms: 0 },
        };
        let acquire = matches!(body, ClientRequest::Acquire { .. });
        let requested = H::new().request(client, request, 0, body).events()[0].kind.clone();
        events.push((at_ms * 1_000, events.len(), requested));
        let reply = match (acquire, rng.gen_range(0..5)) {
            (_, 0) => None,
            (true, 1 | 2) => {
                token += 1;
                told[client as usize] = Some(token);
                Some(reply_granted(token))
            }
            (true, 3) => Some(busy(rng.gen_range(0..2_000))),
            (true, _) => Some(ClientReply::TimedOut),
            (false, 1 | 2) if rng.gen_bool(0.5) => Some(ClientReply::Renewed { lease_ms: LEASE_MS }),
            (false, 1 | 2) => Some(ClientReply::Released),
            (false, _) => Some(ClientReply::NotHeld),
        };
        let (client, request) = (ClientId(client), RequestId(request));
        let settle = match reply {
            Some(reply) => H::new().answered(client.0, request.0, reply).events()[0].kind.clone(),
            None => EventKind::GaveUp { client, request, why: Default::default() },
        };
        // Settled before the next request half the time, later otherwise.
        let answer_ms = at_ms + [5, 300, 900, 2_100][rng.gen_range(0..4)];
        events.push((answer_ms * 1_000, events.len(), settle));
        if rng.gen_bool(0.5) {
            at_ms = answer_ms;
        }
        // Now and then a whole-cluster restore, between two requests.
        if rng.gen_bool(0.08) {
            let restored = EventKind::ClusterRestored { epoch: 1, backup_at_us: 0, token_floor: Token(1 << 32) };
            events.push(((at_ms + [0, 5, 300][rng.gen_range(0..3)]) * 1_000, events.len(), restored));
        }
    }
    events.sort_by_key(|(at_us, made, _)| (*at_us, *made));
    events.into_iter().fold(H::new(), |h, (at_us, _, kind)| h.at_us(at_us).ev(kind))
}

#[test]
fn segments_judge_exactly_as_one_search_of_the_whole_key() {
    let (mut fails, mut cut) = (0, 0);
    for seed in 0..3_000 {
        let h = random_history(seed);
        let (segmented, _) = judged(&h, false);
        let (whole, _) = judged(&h, true);
        let verdict = |report: &crate::checker::Report| {
            (!report.violations.is_empty(), report.counters.linearizable_undecided.is_empty())
        };
        assert_eq!(
            verdict(&segmented),
            verdict(&whole),
            "seed {seed}: {:#?} vs {:#?}",
            segmented.violations,
            whole.violations
        );
        fails += usize::from(!whole.violations.is_empty());
        cut += usize::from(segmented.counters.linearizable_steps_max < whole.counters.linearizable_steps_max);
    }
    // Neither all passing nor all failing, and cut into segments often.
    assert!((300..2_700).contains(&fails), "{fails} of 3,000 fail");
    assert!(cut > 300, "{cut} of 3,000 cut");
}
