//! The protected resource (the shop database): every write carries a fencing token.
//!
//! Per key the resource stores the highest token it accepted and who it was
//! granted to, the current value (the invoice status) and an append-only
//! ledger. Both write paths, `set_status` ([`WritePath::Status`], the
//! application) and `append_ledger` ([`WritePath::Ledger`], a bulk import),
//! pass through the one comparison in [`check_token`], atomically with the
//! effect: `write` takes `&mut self`, so the check and the effect cannot be
//! interleaved with another write.
//!
//! The highest accepted token lives in [`ResourceState`] itself, which is the
//! resource's durable state: the simulator persists it, loses unsynced writes
//! and restores it as one plain value. Only an accepted write of the key may
//! raise it, and nothing lowers it.

use crate::types::{ClientId, Holder, Key, RequestId, Token};
use crate::variant::Variant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// How many answered writes the resource remembers per client for retries.
///
/// A worker has at most one write in flight and retries only that one, so a
/// retry is always of its latest write. The window of 8 also covers network
/// duplicates that were reordered behind up to 7 later writes of the same
/// client. A duplicate older than the window is not applied again either: it
/// is answered [`WriteVerdict::DuplicateForgotten`], because request ids of
/// one client only go up.
pub const WRITES_REMEMBERED_PER_CLIENT: usize = 8;

/// Which write path of the protected resource a write took.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WritePath {
    /// The application's write (`set_status`).
    Status,
    /// The bulk import (`append_ledger`).
    Ledger,
}

/// How the resource answered a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteVerdict {
    Accepted,
    /// A retry of an earlier write (same client and request id): the original answer, no second effect.
    Duplicate {
        accepted: bool,
    },
    /// Lower than the highest token accepted for the key.
    RejectedStale {
        highest: Token,
    },
    /// Equal to the highest token but from another holder.
    RejectedEqualToken {
        highest: Token,
    },
    /// A retry older than the client's remembered writes: no effect, and the
    /// original answer is no longer known.
    DuplicateForgotten,
}

impl fmt::Display for WritePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WritePath::Status => "status",
            WritePath::Ledger => "ledger",
        })
    }
}

/// `accepted`, `rejected stale (highest tok42)`, …
impl fmt::Display for WriteVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteVerdict::Accepted => f.write_str("accepted"),
            WriteVerdict::Duplicate { accepted: true } => f.write_str("duplicate of an accepted write"),
            WriteVerdict::Duplicate { accepted: false } => f.write_str("duplicate of a rejected write"),
            WriteVerdict::RejectedStale { highest } => write!(f, "rejected stale (highest {highest})"),
            WriteVerdict::RejectedEqualToken { highest } => {
                write!(f, "rejected equal token (highest {highest} from another holder)")
            }
            WriteVerdict::DuplicateForgotten => f.write_str("duplicate, original answer forgotten"),
        }
    }
}

impl WriteVerdict {
    pub fn is_accepted(self) -> bool {
        self == WriteVerdict::Accepted
    }
}

/// One write to the protected resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Write {
    pub key: Key,
    /// The fencing token the writer holds for `key`.
    pub token: Token,
    /// Who `token` was granted to; `holder.client` is the writing client.
    pub holder: Holder,
    /// The write's own request id; a retry reuses it.
    pub request: RequestId,
    pub path: WritePath,
    /// The new status (Status path) or the line to append (Ledger path).
    pub value: String,
}

/// The highest token accepted for a key and who held it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fence {
    pub token: Token,
    pub holder: Holder,
}

/// What the resource stores for one key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    /// `None` until the first accepted write (or after a restart that lost it,
    /// under `Variant::SinkMaxInMemory`).
    fence: Option<Fence>,
    value: String,
    ledger: Vec<(Token, String)>,
}

/// The answered writes of one client, for retries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Answered {
    /// The last [`WRITES_REMEMBERED_PER_CLIENT`] answers, by request id.
    verdicts: BTreeMap<RequestId, WriteVerdict>,
    /// The highest request id dropped from `verdicts`; anything at or below it
    /// that is not remembered is an old duplicate.
    forgotten_max: Option<RequestId>,
}

/// The resource's whole durable state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceState {
    records: BTreeMap<Key, Record>,
    answered: BTreeMap<ClientId, Answered>,
}

/// The one token comparison of both write paths: `Ok` if a write with `token`
/// from `holder` may take effect over the key's `fence`.
pub fn check_token(fence: Option<Fence>, token: Token, holder: Holder) -> Result<(), WriteVerdict> {
    let Some(fence) = fence else {
        return Ok(());
    };
    if token < fence.token {
        return Err(WriteVerdict::RejectedStale { highest: fence.token });
    }
    // An equal token is one grant's generation. Only its own holder may write
    // under it again; another holder with the same token means the token was
    // issued twice, and both must not get effects in.
    if token == fence.token && holder != fence.holder {
        return Err(WriteVerdict::RejectedEqualToken { highest: fence.token });
    }
    Ok(())
}

/// Whether `path` compares tokens under `variant`.
fn is_fenced(variant: Variant, path: WritePath) -> bool {
    match variant {
        Variant::SinkUnfenced => false,
        Variant::SecondPathUnfenced => path == WritePath::Status,
        _ => true,
    }
}

impl ResourceState {
    pub fn new() -> ResourceState {
        ResourceState::default()
    }

    /// Checks and applies one write atomically. A retry of an answered write
    /// gets the original answer and has no second effect.
    pub fn write(&mut self, write: &Write, variant: Variant) -> WriteVerdict {
        let client = write.holder.client;
        if let Some(verdict) = self.retry_answer(client, write.request) {
            return verdict;
        }
        let record = self.records.entry(write.key.clone()).or_default();
        let checked =
            if is_fenced(variant, write.path) { check_token(record.fence, write.token, write.holder) } else { Ok(()) };
        let verdict = match checked {
            Ok(()) => {
                record.raise_fence(write.token, write.holder);
                record.apply(write);
                WriteVerdict::Accepted
            }
            Err(rejected) => rejected,
        };
        // The one place Variant::ResourceNoDedup is consulted: without the
        // table of answers a retry is judged, and takes effect, afresh.
        if variant != Variant::ResourceNoDedup {
            self.remember(client, write.request, verdict);
        }
        verdict
    }

    /// What a restart recovers. The default keeps everything; under
    /// `Variant::SinkMaxInMemory` the highest token lived only in memory, so
    /// the image has values and ledgers but no fences.
    pub fn durable_image(&self, variant: Variant) -> ResourceState {
        let mut image = self.clone();
        if variant == Variant::SinkMaxInMemory {
            for record in image.records.values_mut() {
                record.fence = None;
            }
        }
        image
    }

    /// The highest token accepted for `key`.
    pub fn highest(&self, key: &Key) -> Option<Token> {
        self.fence(key).map(|fence| fence.token)
    }

    /// The highest token accepted for `key` and who it was granted to.
    pub fn fence(&self, key: &Key) -> Option<Fence> {
        self.records.get(key).and_then(|record| record.fence)
    }

    /// The current status of `key`; empty if never set.
    pub fn value(&self, key: &Key) -> &str {
        self.records.get(key).map_or("", |record| record.value.as_str())
    }

    /// The ledger of `key`: every accepted Ledger write, in order, with its token.
    pub fn ledger(&self, key: &Key) -> &[(Token, String)] {
        self.records.get(key).map_or(&[], |record| record.ledger.as_slice())
    }

    fn retry_answer(&self, client: ClientId, request: RequestId) -> Option<WriteVerdict> {
        let answered = self.answered.get(&client)?;
        if let Some(verdict) = answered.verdicts.get(&request) {
            assert!(!is_retry_answer(*verdict), "only first answers are remembered");
            return Some(WriteVerdict::Duplicate { accepted: verdict.is_accepted() });
        }
        match answered.forgotten_max {
            Some(forgotten_max) if request <= forgotten_max => Some(WriteVerdict::DuplicateForgotten),
            _ => None,
        }
    }

    fn remember(&mut self, client: ClientId, request: RequestId, verdict: WriteVerdict) {
        assert!(!is_retry_answer(verdict), "only first answers are remembered");
        let answered = self.answered.entry(client).or_default();
        let previous = answered.verdicts.insert(request, verdict);
        assert!(previous.is_none(), "a write is answered once");
        while answered.verdicts.len() > WRITES_REMEMBERED_PER_CLIENT {
            let (oldest, _) = answered.verdicts.pop_first().expect("the window is not empty");
            answered.forgotten_max = answered.forgotten_max.max(Some(oldest));
        }
    }
}

fn is_retry_answer(verdict: WriteVerdict) -> bool {
    matches!(verdict, WriteVerdict::Duplicate { .. } | WriteVerdict::DuplicateForgotten)
}

impl Record {
    /// Raises the fence to `token` if it is higher. Under the unfenced variants
    /// a lower token may be accepted; the fence still keeps the highest seen.
    fn raise_fence(&mut self, token: Token, holder: Holder) {
        let before = self.fence.map(|fence| fence.token);
        let raises = match before {
            Some(highest) => token > highest,
            None => true,
        };
        if raises {
            self.fence = Some(Fence { token, holder });
        }
        let after = self.fence.map(|fence| fence.token);
        assert!(after >= before, "the highest accepted token never goes down");
        assert!(after >= Some(token), "the fence covers every accepted token");
    }

    fn apply(&mut self, write: &Write) {
        match write.path {
            WritePath::Status => self.value.clone_from(&write.value),
            WritePath::Ledger => self.ledger.push((write.token, write.value.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATHS: [WritePath; 2] = [WritePath::Status, WritePath::Ledger];

    fn invoice() -> Key {
        Key::new("invoice/B-1042")
    }

    /// Worker A got token 41 with its acquire request 1; worker B got 42.
    fn worker_a() -> Holder {
        Holder { client: ClientId(1), request: RequestId(1) }
    }

    fn worker_b() -> Holder {
        Holder { client: ClientId(2), request: RequestId(1) }
    }

    fn write(holder: Holder, token: u64, request: u64, path: WritePath, value: &str) -> Write {
        Write { key: invoice(), token: Token(token), holder, request: RequestId(request), path, value: value.into() }
    }

    /// What a key looks like from outside: highest token, value, ledger length.
    fn view(state: &ResourceState) -> (Option<Token>, String, usize) {
        (state.highest(&invoice()), state.value(&invoice()).to_string(), state.ledger(&invoice()).len())
    }

    #[test]
    fn b1042_late_write_of_the_old_holder_is_rejected() {
        let mut db = ResourceState::new();
        assert_eq!(
            db.write(&write(worker_a(), 41, 10, WritePath::Status, "open"), Variant::Default),
            WriteVerdict::Accepted
        );
        assert_eq!(
            db.write(&write(worker_b(), 42, 20, WritePath::Status, "checked"), Variant::Default),
            WriteVerdict::Accepted
        );
        let late = write(worker_a(), 41, 11, WritePath::Status, "paid");
        assert_eq!(db.write(&late, Variant::Default), WriteVerdict::RejectedStale { highest: Token(42) });
        assert_eq!(db.value(&invoice()), "checked");
        assert_eq!(db.fence(&invoice()), Some(Fence { token: Token(42), holder: worker_b() }));
    }

    #[test]
    fn first_write_is_accepted_and_sets_the_highest_on_both_paths() {
        for path in PATHS {
            let mut db = ResourceState::new();
            assert_eq!(db.write(&write(worker_a(), 41, 10, path, "open"), Variant::Default), WriteVerdict::Accepted);
            assert_eq!(db.highest(&invoice()), Some(Token(41)), "{path:?}");
        }
    }

    #[test]
    fn status_path_sets_the_value_and_ledger_path_appends() {
        let mut db = ResourceState::new();
        db.write(&write(worker_a(), 41, 10, WritePath::Status, "open"), Variant::Default);
        db.write(&write(worker_a(), 41, 11, WritePath::Status, "checked"), Variant::Default);
        db.write(&write(worker_a(), 41, 12, WritePath::Ledger, "line 1"), Variant::Default);
        db.write(&write(worker_b(), 42, 20, WritePath::Ledger, "line 2"), Variant::Default);
        assert_eq!(db.value(&invoice()), "checked");
        assert_eq!(db.ledger(&invoice()), &[(Token(41), "line 1".to_string()), (Token(42), "line 2".to_string())]);
        assert_eq!(db.highest(&invoice()), Some(Token(42)));
        // The status path never touched the ledger and the ledger path never the status.
        assert_eq!(db.value(&Key::new("other")), "");
        assert!(db.ledger(&Key::new("other")).is_empty());
    }

    #[test]
    fn lower_token_is_rejected_as_stale_on_both_paths() {
        for path in PATHS {
            let mut db = ResourceState::new();
            db.write(&write(worker_b(), 42, 20, path, "checked"), Variant::Default);
            let before = view(&db);
            let verdict = db.write(&write(worker_a(), 41, 10, path, "late"), Variant::Default);
            assert_eq!(verdict, WriteVerdict::RejectedStale { highest: Token(42) }, "{path:?}");
            assert_eq!(view(&db), before, "{path:?}: a rejected write has no effect");
        }
    }

    #[test]
    fn stale_check_spans_both_paths() {
        // A token raised through one path fences the other: one comparison for both.
        for (first, second) in [(WritePath::Status, WritePath::Ledger), (WritePath::Ledger, WritePath::Status)] {
            let mut db = ResourceState::new();
            db.write(&write(worker_b(), 42, 20, first, "new"), Variant::Default);
            let verdict = db.write(&write(worker_a(), 41, 10, second, "late"), Variant::Default);
            assert_eq!(verdict, WriteVerdict::RejectedStale { highest: Token(42) }, "{first:?} then {second:?}");
        }
    }

    #[test]
    fn equal_token_from_the_same_holder_is_accepted_on_both_paths() {
        for path in PATHS {
            let mut db = ResourceState::new();
            db.write(&write(worker_a(), 41, 10, path, "one"), Variant::Default);
            assert_eq!(db.write(&write(worker_a(), 41, 11, path, "two"), Variant::Default), WriteVerdict::Accepted);
        }
    }

    #[test]
    fn equal_token_from_another_holder_is_rejected_on_both_paths() {
        // Only a reissued token (a restore bug) gives two holders one token.
        let impostor = Holder { client: ClientId(3), request: RequestId(7) };
        for path in PATHS {
            let mut db = ResourceState::new();
            db.write(&write(worker_a(), 41, 10, path, "one"), Variant::Default);
            let before = view(&db);
            let verdict = db.write(&write(impostor, 41, 30, path, "two"), Variant::Default);
            assert_eq!(verdict, WriteVerdict::RejectedEqualToken { highest: Token(41) }, "{path:?}");
            assert_eq!(view(&db), before, "{path:?}");
            assert_eq!(db.fence(&invoice()).map(|fence| fence.holder), Some(worker_a()));
        }
    }

    #[test]
    fn higher_token_is_accepted_and_raises_the_highest_on_both_paths() {
        for path in PATHS {
            let mut db = ResourceState::new();
            db.write(&write(worker_a(), 41, 10, path, "one"), Variant::Default);
            assert_eq!(db.write(&write(worker_b(), 42, 20, path, "two"), Variant::Default), WriteVerdict::Accepted);
            assert_eq!(db.fence(&invoice()), Some(Fence { token: Token(42), holder: worker_b() }), "{path:?}");
        }
    }

    #[test]
    fn keys_are_fenced_independently() {
        let mut db = ResourceState::new();
        db.write(&write(worker_b(), 42, 20, WritePath::Status, "checked"), Variant::Default);
        let mut other = write(worker_a(), 41, 10, WritePath::Status, "open");
        other.key = Key::new("invoice/B-1043");
        assert_eq!(db.write(&other, Variant::Default), WriteVerdict::Accepted);
    }

    #[test]
    fn retry_of_an_accepted_write_has_no_second_effect_on_both_paths() {
        for path in PATHS {
            let mut db = ResourceState::new();
            let first = write(worker_a(), 41, 10, path, "open");
            db.write(&first, Variant::Default);
            db.write(&write(worker_a(), 41, 11, path, "checked"), Variant::Default);
            let before = view(&db);
            assert_eq!(db.write(&first, Variant::Default), WriteVerdict::Duplicate { accepted: true }, "{path:?}");
            assert_eq!(view(&db), before, "{path:?}: the retry neither resets the value nor appends again");
        }
    }

    #[test]
    fn retry_of_a_rejected_write_is_still_rejected() {
        let mut db = ResourceState::new();
        db.write(&write(worker_b(), 42, 20, WritePath::Status, "checked"), Variant::Default);
        let late = write(worker_a(), 41, 10, WritePath::Status, "late");
        assert_eq!(db.write(&late, Variant::Default), WriteVerdict::RejectedStale { highest: Token(42) });
        assert_eq!(db.write(&late, Variant::Default), WriteVerdict::Duplicate { accepted: false });
    }

    #[test]
    fn retry_is_recognised_per_client() {
        // The same request id from another client is a different write.
        let mut db = ResourceState::new();
        db.write(&write(worker_a(), 41, 10, WritePath::Ledger, "a"), Variant::Default);
        assert_eq!(
            db.write(&write(worker_b(), 42, 10, WritePath::Ledger, "b"), Variant::Default),
            WriteVerdict::Accepted
        );
        assert_eq!(db.ledger(&invoice()).len(), 2);
    }

    #[test]
    fn retry_older_than_the_window_is_forgotten_but_not_applied() {
        let mut db = ResourceState::new();
        let first = write(worker_a(), 41, 1, WritePath::Ledger, "line 1");
        db.write(&first, Variant::Default);
        // Another client's writes do not push worker A's answers out.
        for request in 0..20 {
            let mut other = write(worker_b(), 42, 100 + request, WritePath::Status, "b");
            other.key = Key::new("invoice/B-1043");
            db.write(&other, Variant::Default);
        }
        assert_eq!(db.write(&first, Variant::Default), WriteVerdict::Duplicate { accepted: true });
        let window = WRITES_REMEMBERED_PER_CLIENT as u64;
        for request in 2..=window + 1 {
            db.write(&write(worker_a(), 41, request, WritePath::Ledger, "more"), Variant::Default);
        }
        let before = view(&db);
        assert_eq!(db.write(&first, Variant::Default), WriteVerdict::DuplicateForgotten);
        assert_eq!(view(&db), before, "a forgotten retry is still not applied twice");
        // The oldest write still in the window is answered from it.
        let kept = write(worker_a(), 41, 2, WritePath::Ledger, "more");
        assert_eq!(db.write(&kept, Variant::Default), WriteVerdict::Duplicate { accepted: true });
        assert!(db.answered[&ClientId(1)].verdicts.len() <= WRITES_REMEMBERED_PER_CLIENT);
    }

    #[test]
    fn a_new_write_after_the_window_is_full_is_applied() {
        // Forgetting old answers must not swallow new writes: only ids at or
        // below the highest forgotten one are old duplicates.
        let mut db = ResourceState::new();
        let window = WRITES_REMEMBERED_PER_CLIENT as u64;
        for request in 1..=window + 1 {
            db.write(&write(worker_a(), 41, request, WritePath::Ledger, "line"), Variant::Default);
        }
        assert_eq!(db.answered[&ClientId(1)].forgotten_max, Some(RequestId(1)), "the window is full");
        let new = write(worker_a(), 41, window + 2, WritePath::Ledger, "new line");
        assert_eq!(db.write(&new, Variant::Default), WriteVerdict::Accepted);
        assert_eq!(db.ledger(&invoice()).len() as u64, window + 2);
    }

    #[test]
    fn sink_unfenced_accepts_stale_writes_on_both_paths() {
        for path in PATHS {
            let mut db = ResourceState::new();
            db.write(&write(worker_b(), 42, 20, path, "checked"), Variant::SinkUnfenced);
            assert_eq!(
                db.write(&write(worker_a(), 41, 10, path, "late"), Variant::SinkUnfenced),
                WriteVerdict::Accepted
            );
            assert_eq!(db.highest(&invoice()), Some(Token(42)), "{path:?}: the highest seen never goes down");
        }
    }

    #[test]
    fn an_unfenced_equal_token_from_another_holder_leaves_the_fence_with_the_first() {
        // Unfenced, B's write with A's token is accepted; the fence still names A,
        // whose write first reached that token, so fenced again, B is rejected.
        let mut db = ResourceState::new();
        db.write(&write(worker_a(), 41, 10, WritePath::Status, "open"), Variant::SinkUnfenced);
        let equal = write(worker_b(), 41, 20, WritePath::Status, "forged");
        assert_eq!(db.write(&equal, Variant::SinkUnfenced), WriteVerdict::Accepted);
        assert_eq!(db.fence(&invoice()), Some(Fence { token: Token(41), holder: worker_a() }));
        let status = write(worker_b(), 41, 22, WritePath::Status, "forged");
        assert_eq!(db.write(&status, Variant::Default), WriteVerdict::RejectedEqualToken { highest: Token(41) });
    }

    #[test]
    fn second_path_unfenced_only_opens_the_ledger_path() {
        let mut db = ResourceState::new();
        let variant = Variant::SecondPathUnfenced;
        db.write(&write(worker_b(), 42, 20, WritePath::Status, "checked"), variant);
        let late_status = write(worker_a(), 41, 10, WritePath::Status, "late");
        assert_eq!(db.write(&late_status, variant), WriteVerdict::RejectedStale { highest: Token(42) });
        let late_ledger = write(worker_a(), 41, 11, WritePath::Ledger, "late line");
        assert_eq!(db.write(&late_ledger, variant), WriteVerdict::Accepted);
        assert_eq!(db.ledger(&invoice()), &[(Token(41), "late line".to_string())]);
        assert_eq!(db.highest(&invoice()), Some(Token(42)));
    }

    #[test]
    fn retries_are_deduplicated_under_the_unfenced_variants_too() {
        for variant in [Variant::SinkUnfenced, Variant::SecondPathUnfenced] {
            let mut db = ResourceState::new();
            let line = write(worker_a(), 41, 10, WritePath::Ledger, "line");
            db.write(&line, variant);
            assert_eq!(db.write(&line, variant), WriteVerdict::Duplicate { accepted: true });
            assert_eq!(db.ledger(&invoice()).len(), 1, "{variant:?}");
        }
    }

    #[test]
    fn resource_no_dedup_applies_a_retried_write_twice() {
        let variant = Variant::ResourceNoDedup;
        let mut db = ResourceState::new();
        let line = write(worker_a(), 41, 10, WritePath::Ledger, "line");
        assert_eq!(db.write(&line, variant), WriteVerdict::Accepted);
        assert_eq!(db.write(&line, variant), WriteVerdict::Accepted, "the retry is judged afresh");
        assert_eq!(db.ledger(&invoice()).len(), 2, "and appends a second line");
    }

    #[test]
    fn durable_image_keeps_the_highest_token_across_a_restart() {
        let mut db = ResourceState::new();
        db.write(&write(worker_b(), 42, 20, WritePath::Status, "checked"), Variant::Default);
        let mut restarted = db.durable_image(Variant::Default);
        assert_eq!(restarted, db);
        let late = write(worker_a(), 41, 10, WritePath::Status, "late");
        assert_eq!(restarted.write(&late, Variant::Default), WriteVerdict::RejectedStale { highest: Token(42) });
    }

    #[test]
    fn sink_max_in_memory_forgets_the_highest_token_on_restart() {
        let variant = Variant::SinkMaxInMemory;
        let mut db = ResourceState::new();
        db.write(&write(worker_b(), 42, 20, WritePath::Status, "checked"), variant);
        db.write(&write(worker_b(), 42, 21, WritePath::Ledger, "line"), variant);
        let late = write(worker_a(), 41, 10, WritePath::Status, "late");
        // Before the restart it fences like the default.
        assert_eq!(db.clone().write(&late, variant), WriteVerdict::RejectedStale { highest: Token(42) });
        let mut restarted = db.durable_image(variant);
        assert_eq!(restarted.highest(&invoice()), None);
        assert_eq!(restarted.value(&invoice()), "checked", "the data itself survives");
        assert_eq!(restarted.ledger(&invoice()).len(), 1);
        assert_eq!(restarted.write(&late, variant), WriteVerdict::Accepted, "the stale write gets in");
        assert_eq!(restarted.value(&invoice()), "late");
    }

    #[test]
    fn check_token_is_open_for_a_fresh_key() {
        assert_eq!(check_token(None, Token(1), worker_a()), Ok(()));
        let fence = Some(Fence { token: Token(5), holder: worker_a() });
        assert_eq!(check_token(fence, Token(6), worker_b()), Ok(()));
        assert_eq!(check_token(fence, Token(4), worker_a()), Err(WriteVerdict::RejectedStale { highest: Token(5) }));
    }

    #[test]
    fn serde_round_trip_keeps_everything() {
        let mut db = ResourceState::new();
        db.write(&write(worker_a(), 41, 10, WritePath::Status, "open"), Variant::Default);
        db.write(&write(worker_b(), 42, 20, WritePath::Ledger, "line"), Variant::Default);
        let json = serde_json::to_string(&db).expect("serialize");
        let mut back: ResourceState = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, db);
        let retry = write(worker_b(), 42, 20, WritePath::Ledger, "line");
        assert_eq!(back.write(&retry, Variant::Default), WriteVerdict::Duplicate { accepted: true });
    }
}
