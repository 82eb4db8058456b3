//! Unit tests of the lock state machine: one per row of SPEC.md's command and
//! result tables, the late-command stories, retries and the unsafe variants.

use super::*;

const LEASE_MS: u64 = 3_000;

fn invoice() -> Key {
    Key::new("invoice/B-1042")
}

fn holder(client: u32, request: u64) -> Holder {
    Holder { client: ClientId(client), request: RequestId(request) }
}

fn grant(state: &mut LockState, key: &Key, who: Holder) -> ApplyResult {
    state.apply(&Command::Grant { key: key.clone(), lease_ms: LEASE_MS, holder: who }, Variant::Default)
}

fn release(state: &mut LockState, key: &Key, token: u64, who: Holder, variant: Variant) -> ApplyResult {
    state.apply(&Command::Release { key: key.clone(), token: Token(token), holder: who }, variant)
}

fn expire(state: &mut LockState, key: &Key, token: u64, variant: Variant) -> ApplyResult {
    state.apply(&Command::Expire { key: key.clone(), token: Token(token) }, variant)
}

fn decline(state: &mut LockState, key: &Key, who: Holder, reason: Decline) -> ApplyResult {
    state.apply(&Command::Decline { key: key.clone(), holder: who, reason }, Variant::Default)
}

/// The B-1042 story up to the takeover: A got 41, released it, B got 42.
fn after_takeover(release_variant: Variant) -> (LockState, Holder, Holder) {
    let (worker_a, worker_b) = (holder(1, 1), holder(2, 1));
    let mut state = LockState::new(Token(40));
    assert_eq!(grant(&mut state, &invoice(), worker_a), ApplyResult::Granted { token: Token(41) });
    assert_eq!(release(&mut state, &invoice(), 41, worker_a, release_variant), ApplyResult::Released);
    assert_eq!(grant(&mut state, &invoice(), worker_b), ApplyResult::Granted { token: Token(42) });
    (state, worker_a, worker_b)
}

// ---- SPEC.md commands table ----

#[test]
fn command_grant_assigns_the_token_at_apply_time() {
    let mut state = LockState::new(Token(0));
    assert_eq!(grant(&mut state, &invoice(), holder(1, 1)), ApplyResult::Granted { token: Token(1) });
    let lock = state.lock(&invoice()).expect("granted lock is held");
    assert_eq!(lock, &Lock { token: Token(1), holder: holder(1, 1), lease_ms: LEASE_MS });
    assert_eq!(state.token_last(), Token(1));
    assert_eq!(state.holder_of(&invoice()), Some(holder(1, 1)));
}

#[test]
fn command_release_removes_the_matching_lock() {
    let mut state = LockState::new(Token(0));
    grant(&mut state, &invoice(), holder(1, 1));
    assert_eq!(release(&mut state, &invoice(), 1, holder(1, 1), Variant::Default), ApplyResult::Released);
    assert_eq!(state.lock(&invoice()), None);
    assert_eq!(state.holder_of(&invoice()), None);
}

#[test]
fn command_expire_removes_the_matching_lock() {
    let mut state = LockState::new(Token(0));
    grant(&mut state, &invoice(), holder(1, 1));
    assert_eq!(expire(&mut state, &invoice(), 1, Variant::Default), ApplyResult::Expired { existed: true });
    assert_eq!(state.lock(&invoice()), None);
}

// ---- SPEC.md results table ----

#[test]
fn result_granted_tokens_increase_across_keys() {
    let mut state = LockState::new(Token(0));
    let other = Key::new("invoice/B-1043");
    assert_eq!(grant(&mut state, &invoice(), holder(1, 1)), ApplyResult::Granted { token: Token(1) });
    assert_eq!(grant(&mut state, &other, holder(2, 1)), ApplyResult::Granted { token: Token(2) });
    assert_eq!(release(&mut state, &invoice(), 1, holder(1, 1), Variant::Default), ApplyResult::Released);
    // A freed key never gets its old token back.
    assert_eq!(grant(&mut state, &invoice(), holder(3, 1)), ApplyResult::Granted { token: Token(3) });
}

#[test]
fn result_grant_rejected_when_held_by_another() {
    let mut state = LockState::new(Token(0));
    grant(&mut state, &invoice(), holder(1, 1));
    let before = state.clone();
    assert_eq!(grant(&mut state, &invoice(), holder(2, 1)), ApplyResult::GrantRejected);
    assert_eq!(state.lock(&invoice()), before.lock(&invoice()));
    assert_eq!(state.token_last(), before.token_last());
    // Another request of the same client is another holder too.
    assert_eq!(grant(&mut state, &invoice(), holder(1, 2)), ApplyResult::GrantRejected);
}

#[test]
fn result_released() {
    let mut state = LockState::new(Token(7));
    grant(&mut state, &invoice(), holder(1, 1));
    assert_eq!(release(&mut state, &invoice(), 8, holder(1, 1), Variant::Default), ApplyResult::Released);
}

#[test]
fn result_not_found_for_a_free_key() {
    let mut state = LockState::new(Token(0));
    assert_eq!(release(&mut state, &invoice(), 1, holder(1, 1), Variant::Default), ApplyResult::NotFound);
}

#[test]
fn result_not_found_for_a_wrong_token() {
    let mut state = LockState::new(Token(0));
    grant(&mut state, &invoice(), holder(1, 1));
    assert_eq!(release(&mut state, &invoice(), 9, holder(1, 1), Variant::Default), ApplyResult::NotFound);
    assert_eq!(state.lock(&invoice()).map(|lock| lock.token), Some(Token(1)));
}

#[test]
fn result_expired_existed_false_for_a_free_key() {
    let mut state = LockState::new(Token(0));
    assert_eq!(expire(&mut state, &invoice(), 1, Variant::Default), ApplyResult::Expired { existed: false });
}

#[test]
fn result_noop_for_a_late_older_grant() {
    let mut state = LockState::new(Token(0));
    assert_eq!(grant(&mut state, &invoice(), holder(1, 5)), ApplyResult::Granted { token: Token(1) });
    release(&mut state, &invoice(), 1, holder(1, 5), Variant::Default);
    // Request 4 of the same client arrives after request 5 was answered.
    let before = state.clone();
    assert_eq!(grant(&mut state, &invoice(), holder(1, 4)), ApplyResult::Noop);
    assert_eq!(state, before);
}

// ---- late commands after a takeover ----

#[test]
fn late_expire_after_regrant_leaves_the_new_lock() {
    let (mut state, _, worker_b) = after_takeover(Variant::Default);
    assert_eq!(expire(&mut state, &invoice(), 41, Variant::Default), ApplyResult::Expired { existed: false });
    let lock = state.lock(&invoice()).expect("42 is still held");
    assert_eq!((lock.token, lock.holder), (Token(42), worker_b));
}

#[test]
fn late_release_after_regrant_leaves_the_new_lock() {
    let (mut state, worker_a, worker_b) = after_takeover(Variant::Default);
    assert_eq!(release(&mut state, &invoice(), 41, worker_a, Variant::Default), ApplyResult::NotFound);
    let lock = state.lock(&invoice()).expect("42 is still held");
    assert_eq!((lock.token, lock.holder), (Token(42), worker_b));
}

#[test]
fn token_floor_40_makes_the_first_grant_41() {
    let mut state = LockState::new(Token(40));
    assert_eq!(state.token_last(), Token(40));
    assert_eq!(grant(&mut state, &invoice(), holder(1, 1)), ApplyResult::Granted { token: Token(41) });
}

#[test]
fn raise_token_floor_moves_up_never_down() {
    let mut state = LockState::new(Token(40));
    grant(&mut state, &invoice(), holder(1, 1));
    state.raise_token_floor(Token(10));
    assert_eq!(state.token_last(), Token(41));
    state.raise_token_floor(Token(1_000));
    assert_eq!(state.token_last(), Token(1_000));
    let other = Key::new("invoice/B-1043");
    assert_eq!(grant(&mut state, &other, holder(2, 1)), ApplyResult::Granted { token: Token(1_001) });
}

// ---- retries: exactly-once apply ----

#[test]
fn retried_grant_gets_the_original_token() {
    let mut state = LockState::new(Token(40));
    assert_eq!(grant(&mut state, &invoice(), holder(1, 1)), ApplyResult::Granted { token: Token(41) });
    let before = state.clone();
    assert_eq!(grant(&mut state, &invoice(), holder(1, 1)), ApplyResult::Granted { token: Token(41) });
    assert_eq!(state, before, "a retry has no effect");
}

#[test]
fn retried_grant_after_release_answers_without_regranting() {
    let mut state = LockState::new(Token(40));
    grant(&mut state, &invoice(), holder(1, 1));
    release(&mut state, &invoice(), 41, holder(1, 1), Variant::Default);
    let before = state.clone();
    assert_eq!(grant(&mut state, &invoice(), holder(1, 1)), ApplyResult::Granted { token: Token(41) });
    assert_eq!(state, before, "no ghost lock, no new token");
    assert_eq!(state.lock(&invoice()), None);
}

#[test]
fn retried_rejected_grant_stays_rejected() {
    let mut state = LockState::new(Token(0));
    grant(&mut state, &invoice(), holder(1, 1));
    assert_eq!(grant(&mut state, &invoice(), holder(2, 1)), ApplyResult::GrantRejected);
    release(&mut state, &invoice(), 1, holder(1, 1), Variant::Default);
    assert_eq!(grant(&mut state, &invoice(), holder(2, 1)), ApplyResult::GrantRejected);
    assert_eq!(grant(&mut state, &invoice(), holder(2, 2)), ApplyResult::Granted { token: Token(2) });
}

#[test]
fn holder_guard_answers_a_retry_when_the_session_is_missing() {
    let mut state = LockState::new(Token(40));
    grant(&mut state, &invoice(), holder(1, 1));
    state.sessions.clear();
    assert_eq!(grant(&mut state, &invoice(), holder(1, 1)), ApplyResult::Granted { token: Token(41) });
    assert_eq!(state.token_last(), Token(41));
}

// ---- declines: an acquire answered without a lock is final ----

#[test]
fn a_timed_out_wait_is_never_granted_afterwards() {
    // Seed 94867's story: c2's wait timed out at one leader; its resend
    // reached the next leader, which would have granted it.
    let mut state = LockState::new(Token(40));
    assert_eq!(
        decline(&mut state, &invoice(), holder(2, 16), Decline::TimedOut),
        ApplyResult::Declined { reason: Decline::TimedOut }
    );
    assert_eq!(grant(&mut state, &invoice(), holder(2, 16)), ApplyResult::Declined { reason: Decline::TimedOut });
    assert_eq!(state.lock(&invoice()), None, "the resend took no lock");
    assert_eq!(state.session_result(holder(2, 16)), Some(ApplyResult::Declined { reason: Decline::TimedOut }));
    assert_eq!(grant(&mut state, &invoice(), holder(2, 17)), ApplyResult::Granted { token: Token(41) });
}

#[test]
fn a_decline_after_the_grant_keeps_the_grant() {
    // Seed 29867's story the other way round: the wait was granted first.
    let mut state = LockState::new(Token(50));
    grant(&mut state, &invoice(), holder(2, 4));
    for reason in [Decline::TimedOut, Decline::Busy] {
        assert_eq!(decline(&mut state, &invoice(), holder(2, 4), reason), ApplyResult::Granted { token: Token(51) });
    }
    release(&mut state, &invoice(), 51, holder(2, 4), Variant::Default);
    assert_eq!(
        decline(&mut state, &invoice(), holder(2, 4), Decline::TimedOut),
        ApplyResult::Granted { token: Token(51) },
        "the session keeps the grant after the lock ended"
    );
}

#[test]
fn busy_is_recorded_only_while_the_key_is_held() {
    let mut state = LockState::new(Token(0));
    assert_eq!(decline(&mut state, &invoice(), holder(2, 1), Decline::Busy), ApplyResult::NotFound);
    assert_eq!(state.session_result(holder(2, 1)), None, "nothing recorded: the client asks again");
    grant(&mut state, &invoice(), holder(1, 1));
    assert_eq!(
        decline(&mut state, &invoice(), holder(2, 1), Decline::Busy),
        ApplyResult::Declined { reason: Decline::Busy }
    );
    release(&mut state, &invoice(), 1, holder(1, 1), Variant::Default);
    assert_eq!(
        decline(&mut state, &invoice(), holder(2, 1), Decline::Busy),
        ApplyResult::Declined { reason: Decline::Busy },
        "a retry gets its Busy again, though the key is free now"
    );
    assert_eq!(grant(&mut state, &invoice(), holder(2, 1)), ApplyResult::Declined { reason: Decline::Busy });
}

#[test]
fn a_timed_out_wait_is_recorded_whether_or_not_the_key_is_held() {
    let mut state = LockState::new(Token(0));
    let declined = ApplyResult::Declined { reason: Decline::TimedOut };
    assert_eq!(decline(&mut state, &invoice(), holder(2, 1), Decline::TimedOut), declined);
    grant(&mut state, &invoice(), holder(1, 1));
    assert_eq!(decline(&mut state, &invoice(), holder(2, 2), Decline::TimedOut), declined);
}

#[test]
fn a_late_decline_of_an_older_request_is_a_noop() {
    let mut state = LockState::new(Token(0));
    grant(&mut state, &invoice(), holder(1, 1));
    grant(&mut state, &invoice(), holder(2, 5));
    let before = state.clone();
    assert_eq!(decline(&mut state, &invoice(), holder(2, 4), Decline::Busy), ApplyResult::Noop);
    assert_eq!(decline(&mut state, &invoice(), holder(2, 4), Decline::TimedOut), ApplyResult::Noop);
    assert_eq!(state, before);
}

#[test]
fn a_decline_for_a_holder_whose_session_is_missing_answers_its_lock() {
    let mut state = LockState::new(Token(40));
    grant(&mut state, &invoice(), holder(1, 1));
    state.sessions.clear();
    assert_eq!(
        decline(&mut state, &invoice(), holder(1, 1), Decline::TimedOut),
        ApplyResult::Granted { token: Token(41) }
    );
    assert_eq!(state.session_result(holder(1, 1)), Some(ApplyResult::Granted { token: Token(41) }));
}

// ---- the unsafe variants do what they claim ----

#[test]
fn variant_expire_ignores_token_removes_the_new_lock() {
    let (mut state, _, _) = after_takeover(Variant::Default);
    assert_eq!(expire(&mut state, &invoice(), 41, Variant::ExpireIgnoresToken), ApplyResult::Expired { existed: true });
    assert_eq!(state.lock(&invoice()), None, "the late Expire(41) deleted 42");
}

#[test]
fn variant_release_ignores_token_removes_the_new_lock() {
    let (mut state, worker_a, _) = after_takeover(Variant::ReleaseIgnoresToken);
    assert_eq!(release(&mut state, &invoice(), 41, worker_a, Variant::ReleaseIgnoresToken), ApplyResult::Released);
    assert_eq!(state.lock(&invoice()), None, "the late Release(41) deleted 42");
}

#[test]
fn variants_only_change_their_own_command() {
    // ReleaseIgnoresToken leaves Expire safe and vice versa.
    let (mut state, worker_a, _) = after_takeover(Variant::Default);
    assert_eq!(
        expire(&mut state, &invoice(), 41, Variant::ReleaseIgnoresToken),
        ApplyResult::Expired { existed: false }
    );
    assert_eq!(release(&mut state, &invoice(), 41, worker_a, Variant::ExpireIgnoresToken), ApplyResult::NotFound);
    assert_eq!(state.lock(&invoice()).map(|lock| lock.token), Some(Token(42)));
}

// ---- snapshots ----

#[test]
fn serde_round_trip_keeps_everything() {
    let (mut state, _, _) = after_takeover(Variant::Default);
    grant(&mut state, &Key::new("invoice/B-1043"), holder(3, 9));
    let json = serde_json::to_string(&state).expect("serialize");
    let back: LockState = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(back, state);
    // The restored state answers a retry from its sessions, like the original.
    let mut back = back;
    assert_eq!(grant(&mut back, &invoice(), holder(2, 1)), ApplyResult::Granted { token: Token(42) });
    assert_eq!(grant(&mut back, &Key::new("invoice/B-1044"), holder(4, 1)), ApplyResult::Granted { token: Token(44) });
}

#[test]
fn past_the_session_limit_the_oldest_lockless_session_is_forgotten() {
    let mut state = LockState::new(Token(0));
    // Client 0 takes a lock first and keeps it; clients 1.. are answered and let go.
    let held = Key::new("held");
    assert_eq!(grant(&mut state, &held, holder(0, 1)), ApplyResult::Granted { token: Token(1) });
    for client in 1..SESSIONS_MAX as u32 {
        let key = Key::new(format!("k{client}"));
        let ApplyResult::Granted { token } = grant(&mut state, &key, holder(client, 1)) else { panic!() };
        assert_eq!(release(&mut state, &key, token.0, holder(client, 1), Variant::Default), ApplyResult::Released);
    }
    assert_eq!(state.sessions.len(), SESSIONS_MAX);
    // One more client: the oldest session without a lock (client 1) goes, not
    // client 0's, which is older but holds a lock.
    let newcomer = holder(SESSIONS_MAX as u32, 1);
    assert!(matches!(grant(&mut state, &Key::new("new"), newcomer), ApplyResult::Granted { .. }));
    assert_eq!(state.sessions.len(), SESSIONS_MAX);
    assert!(state.sessions.contains_key(&ClientId(0)), "the lock holder's session is kept");
    assert!(!state.sessions.contains_key(&ClientId(1)), "the oldest lockless session is forgotten");
    assert!(state.sessions.contains_key(&ClientId(2)));
    // The holder's retry is still answered with its token.
    assert_eq!(grant(&mut state, &held, holder(0, 1)), ApplyResult::Granted { token: Token(1) });
}
