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
//!
//! A restore from a backup is the exception the resource cannot see coming:
//! the operator puts an older image back, and with it older highest tokens. A
//! restored image is marked ([`ResourceState::restored`]) and answers every
//! write [`WriteVerdict::Unavailable`] until a floor read from the lock
//! service ([`LockFloor`], a linearizable read) raises every key's floor
//! ([`ResourceState::raise_floor`]): per key, a key held at the read is fenced
//! at its holder's token (the holder's own equal token still writes); a key
//! free at the read rejects every token issued before it (docs/SPEC.md §4,
//! "The restore floor and why it is safe").

mod ledger;

use crate::types::{ClientId, Holder, Key, RequestId, Token};
use crate::variant::Variant;
use ledger::Ledger;
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
    /// The resource was restored from a backup and has not raised its floors
    /// from the lock service yet: no effect, not remembered; send it again.
    Unavailable,
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
            WriteVerdict::Unavailable => f.write_str("unavailable, retry"),
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

/// What the lock service said at one linearizable read after a restore:
/// its token counter, and every key held then with its holder and token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockFloor {
    pub token_last: Token,
    pub held: Vec<(Key, Fence)>,
}

/// What the resource stores for one key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    /// `None` until the first accepted write (or after a restart that lost it,
    /// under `Variant::SinkMaxInMemory`).
    fence: Option<Fence>,
    /// Set by a floor read that found the key free: every token at or below
    /// it was issued before the read, so its holder's lock had ended.
    stale_through: Option<Token>,
    value: String,
    ledger: Ledger,
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
    /// The operator's restore this image came back from, while its floors
    /// are not raised yet: every write is answered `Unavailable`.
    restored: Option<u64>,
    /// The `stale_through` of keys without a record yet (the last floor's counter).
    stale_through_new: Option<Token>,
}

/// The one token comparison of both write paths: `Ok` if a write with `token`
/// from `holder` may take effect over the key's `fence` and the floor a read
/// after a restore set (`stale_through`: every token at or below it is stale).
pub fn check_token(
    fence: Option<Fence>,
    stale_through: Option<Token>,
    token: Token,
    holder: Holder,
) -> Result<(), WriteVerdict> {
    if let Some(floor) = stale_through.filter(|floor| token <= *floor) {
        return Err(WriteVerdict::RejectedStale { highest: floor });
    }
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
        if self.restored.is_some() {
            // Neither the records nor the table of answers can be trusted
            // until the floors are raised; nothing is remembered either.
            return WriteVerdict::Unavailable;
        }
        let client = write.holder.client;
        if let Some(verdict) = self.retry_answer(client, write.request) {
            return verdict;
        }
        let record = self.record_mut(&write.key);
        let checked = if is_fenced(variant, write.path) {
            check_token(record.fence, record.stale_through, write.token, write.holder)
        } else {
            Ok(())
        };
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

    /// The operator's restore procedure: this image came back from a backup
    /// in restore number `restore`. From now until [`ResourceState::raise_floor`]
    /// every write is answered `Unavailable`. A restore while the floor of an
    /// earlier one is still being read replaces it: the read must start over.
    pub fn restored(&mut self, restore: u64, variant: Variant) {
        // The one place Variant::ResourceRestoreNaive is consulted: the
        // restored records are trusted as they are, and writes served at once.
        if variant != Variant::ResourceRestoreNaive {
            self.restored = Some(restore);
        }
    }

    /// The restore whose floors are still to be read, if any.
    pub fn awaiting_floor(&self) -> Option<u64> {
        self.restored
    }

    /// Raises every key's floor from one linearizable read of the lock
    /// service taken after the restore `restore`, and serves writes again.
    /// A floor of another restore (a read that a later restore overtook) is
    /// ignored. Returns whether it was taken.
    ///
    /// Per key: held at the read by `holder` with `token` → fenced at that
    /// token with that holder (every earlier token of the key is below it,
    /// the holder's own equal token passes `check_token`); free → every token
    /// up to `token_last` is stale (all were issued before the read, and
    /// their locks had ended). A floor never lowers a fence.
    pub fn raise_floor(&mut self, restore: u64, floor: &LockFloor) -> bool {
        if self.restored != Some(restore) {
            return false;
        }
        let held: BTreeMap<&Key, Fence> = floor.held.iter().map(|(key, fence)| (key, *fence)).collect();
        for fence in held.values() {
            assert!(fence.token <= floor.token_last, "a held lock's token was issued by the read's counter");
        }
        for (key, record) in self.records.iter_mut() {
            if !held.contains_key(key) {
                record.stale_through = record.stale_through.max(Some(floor.token_last));
            }
        }
        self.stale_through_new = self.stale_through_new.max(Some(floor.token_last));
        for (key, fence) in held {
            let record = self.records.entry(key.clone()).or_default();
            // The read vouches for the holder: every earlier token of the key
            // is below its token, which the fence now covers.
            record.stale_through = None;
            record.raise_fence(fence.token, fence.holder);
        }
        self.restored = None;
        true
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

    /// The ledger of `key`: every accepted Ledger write, in order, with its
    /// token (a copy of the lines).
    pub fn ledger(&self, key: &Key) -> Vec<(Token, String)> {
        let Some(record) = self.records.get(key) else { return Vec::new() };
        let mut lines = Vec::with_capacity(record.ledger.len());
        lines.extend(record.ledger.iter().map(|(token, text)| (token, text.to_string())));
        lines
    }

    /// The record of `key`, created with the floor of keys never written.
    fn record_mut(&mut self, key: &Key) -> &mut Record {
        let stale_through = self.stale_through_new;
        self.records.entry(key.clone()).or_insert_with(|| Record { stale_through, ..Record::default() })
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
    matches!(verdict, WriteVerdict::Duplicate { .. } | WriteVerdict::DuplicateForgotten | WriteVerdict::Unavailable)
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
            WritePath::Ledger => self.ledger.push(write.token, &write.value),
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
        assert_eq!(check_token(None, None, Token(1), worker_a()), Ok(()));
        let fence = Some(Fence { token: Token(5), holder: worker_a() });
        assert_eq!(check_token(fence, None, Token(6), worker_b()), Ok(()));
        assert_eq!(
            check_token(fence, None, Token(4), worker_a()),
            Err(WriteVerdict::RejectedStale { highest: Token(5) })
        );
        assert_eq!(
            check_token(fence, Some(Token(6)), Token(6), worker_b()),
            Err(WriteVerdict::RejectedStale { highest: Token(6) })
        );
    }

    /// The B-1042 story with last night's backup: A wrote with 41 before the
    /// backup, B wrote with 42 after it; the database is restored.
    fn restored_after_b() -> ResourceState {
        let mut db = ResourceState::new();
        db.write(&write(worker_a(), 41, 10, WritePath::Status, "open"), Variant::Default);
        let mut backup = db.clone();
        db.write(&write(worker_b(), 42, 20, WritePath::Status, "checked"), Variant::Default);
        backup.restored(1, Variant::Default);
        backup
    }

    fn held_by_b(token_last: u64) -> LockFloor {
        LockFloor {
            token_last: Token(token_last),
            held: vec![(invoice(), Fence { token: Token(42), holder: worker_b() })],
        }
    }

    #[test]
    fn a_restored_resource_answers_unavailable_until_its_floor_is_raised() {
        let mut db = restored_after_b();
        let late = write(worker_a(), 41, 11, WritePath::Status, "paid");
        assert_eq!(db.write(&late, Variant::Default), WriteVerdict::Unavailable);
        assert_eq!(db.write(&late, Variant::Default), WriteVerdict::Unavailable, "not remembered: judged again");
        assert_eq!(db.awaiting_floor(), Some(1));
        assert!(db.raise_floor(1, &held_by_b(43)));
        assert_eq!(db.awaiting_floor(), None);
        assert_eq!(db.write(&late, Variant::Default), WriteVerdict::RejectedStale { highest: Token(42) });
        // The current holder is not locked out, on either path.
        let b_again = write(worker_b(), 42, 21, WritePath::Ledger, "line");
        assert_eq!(db.write(&b_again, Variant::Default), WriteVerdict::Accepted);
    }

    #[test]
    fn a_free_key_at_the_floor_read_rejects_every_token_issued_before_it() {
        let mut db = restored_after_b();
        assert!(db.raise_floor(1, &LockFloor { token_last: Token(43), held: Vec::new() }));
        for token in [41, 42, 43] {
            let late = write(worker_a(), token, 30 + token, WritePath::Status, "late");
            assert_eq!(db.write(&late, Variant::Default), WriteVerdict::RejectedStale { highest: Token(43) });
        }
        // A key the backup never saw is covered too; the next grant's token writes.
        let mut other = write(worker_a(), 43, 90, WritePath::Status, "other");
        other.key = Key::new("invoice/B-1043");
        assert_eq!(db.write(&other, Variant::Default), WriteVerdict::RejectedStale { highest: Token(43) });
        other.token = Token(44);
        other.request = RequestId(91);
        assert_eq!(db.write(&other, Variant::Default), WriteVerdict::Accepted);
    }

    #[test]
    fn another_holder_with_the_held_token_is_rejected_after_the_floor() {
        let mut db = restored_after_b();
        db.raise_floor(1, &held_by_b(50));
        let impostor = Holder { client: ClientId(3), request: RequestId(7) };
        let forged = write(impostor, 42, 70, WritePath::Status, "forged");
        assert_eq!(db.write(&forged, Variant::Default), WriteVerdict::RejectedEqualToken { highest: Token(42) });
    }

    #[test]
    fn a_floor_of_an_overtaken_restore_is_ignored_and_never_lowers_a_fence() {
        let mut db = restored_after_b();
        db.restored(2, Variant::Default);
        assert!(!db.raise_floor(1, &held_by_b(43)), "restore 2 must read its own floor");
        assert_eq!(db.awaiting_floor(), Some(2));
        // A fence above the holder's token (a lock service restored behind it) stays.
        let mut ahead = ResourceState::new();
        ahead.write(&write(worker_b(), 45, 20, WritePath::Status, "x"), Variant::Default);
        ahead.restored(3, Variant::Default);
        assert!(ahead.raise_floor(3, &held_by_b(50)));
        assert_eq!(ahead.highest(&invoice()), Some(Token(45)));
    }

    #[test]
    fn resource_restore_naive_trusts_the_restored_records() {
        let mut db = ResourceState::new();
        db.write(&write(worker_a(), 41, 10, WritePath::Status, "open"), Variant::Default);
        db.restored(1, Variant::ResourceRestoreNaive);
        assert_eq!(db.awaiting_floor(), None);
        let late = write(worker_a(), 41, 11, WritePath::Status, "paid");
        assert_eq!(db.write(&late, Variant::ResourceRestoreNaive), WriteVerdict::Accepted, "B's 42 is forgotten");
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

    /// Paths and verdicts are told in traces as the doc comments above show.
    #[test]
    fn paths_and_verdicts_read_as_the_trace_tells_them() {
        assert_eq!(PATHS.map(|path| path.to_string()), ["status", "ledger"]);
        let verdicts = [
            (WriteVerdict::Accepted, "accepted"),
            (WriteVerdict::Duplicate { accepted: true }, "duplicate of an accepted write"),
            (WriteVerdict::Duplicate { accepted: false }, "duplicate of a rejected write"),
            (WriteVerdict::RejectedStale { highest: Token(42) }, "rejected stale (highest tok42)"),
            (
                WriteVerdict::RejectedEqualToken { highest: Token(42) },
                "rejected equal token (highest tok42 from another holder)",
            ),
            (WriteVerdict::DuplicateForgotten, "duplicate, original answer forgotten"),
            (WriteVerdict::Unavailable, "unavailable, retry"),
        ];
        for (verdict, text) in verdicts {
            assert_eq!(verdict.to_string(), text);
        }
    }
}
