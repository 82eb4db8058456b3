//! The SQL resource under concurrent connections: the check and the effect of
//! a write are one transaction, so no interleaving of writers on separate
//! connections lets a lower token land after a higher one, and a write sent
//! twice at once takes effect once.
//!
//! The differential test drives one connection and so cannot see a race;
//! this one races several. It checks what must hold for any commit order:
//! the ledger (in commit order) never goes down in token, it holds exactly
//! the accepted writes, and the fence is the highest accepted token.
//!
//! A restore through one connection is seen by every other at once (the
//! workers of a real run and the operator's restore tool are separate
//! processes on one database): their next write is answered `Unavailable`
//! until the floor is raised, and never lands in the image the restore replaced.

use crate::support;

use fencelock::resource::{Fence, LockFloor, Write, WritePath, WriteVerdict};
use fencelock::{ClientId, Holder, Key, RequestId, Token};
use fencelock_node::resource::SqlResource;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;

/// Connections writing at once.
const WRITERS: u32 = 4;
/// Writes of each connection.
const WRITES_PER_WRITER: u64 = 40;
/// Writes each sent on two connections at once.
const TWIN_WRITES: u64 = 20;

fn invoice() -> Key {
    Key::new("invoice/B-1042")
}

/// One writer's ledger writes: tokens scattered over a small range, so that
/// writers overtake each other and share tokens (an equal token from another
/// holder is rejected).
async fn writer(url: String, writer: u32) -> Vec<(Write, WriteVerdict)> {
    let mut db = SqlResource::open(&url).await.expect("open");
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(writer));
    let mut outcomes = Vec::new();
    for request in 1..=WRITES_PER_WRITER {
        // Tokens drift upwards with the writer's progress, so later writes mostly win.
        let token = request + rng.gen_range(0..8);
        let write = Write {
            key: invoice(),
            token: Token(token),
            holder: Holder { client: ClientId(writer), request: RequestId(token) },
            request: RequestId(request),
            path: WritePath::Ledger,
            value: format!("w{writer}-r{request}"),
        };
        let verdict = db.write(&write).await.expect("write");
        outcomes.push((write, verdict));
    }
    outcomes
}

async fn racing_writers_keep_the_ledger_in_token_order(url: String) {
    // The tables exist before the writers race to open them.
    let mut db = SqlResource::open(&url).await.expect("open");
    let mut writers = tokio::task::JoinSet::new();
    for id in 1..=WRITERS {
        writers.spawn(writer(url.clone(), id));
    }
    let mut outcomes = Vec::new();
    while let Some(done) = writers.join_next().await {
        outcomes.extend(done.expect("a writer finished"));
    }
    let state = db.state().await.expect("state");
    let ledger = state.ledger(&invoice());
    for pair in ledger.windows(2) {
        assert!(pair[0].0 <= pair[1].0, "a lower token landed after a higher one: {pair:?}");
    }
    let accepted: BTreeSet<&str> =
        outcomes.iter().filter(|(_, verdict)| verdict.is_accepted()).map(|(write, _)| write.value.as_str()).collect();
    let landed: BTreeSet<&str> = ledger.iter().map(|(_, line)| line.as_str()).collect();
    assert_eq!(landed, accepted, "exactly the accepted writes are in the ledger");
    assert_eq!(ledger.len(), accepted.len(), "each once");
    let highest = outcomes.iter().filter(|(_, verdict)| verdict.is_accepted()).map(|(write, _)| write.token).max();
    assert_eq!(state.highest(&invoice()), highest);
    for (write, verdict) in &outcomes {
        match verdict {
            WriteVerdict::Accepted => {}
            WriteVerdict::RejectedStale { highest } => assert!(*highest > write.token, "{write:?}"),
            WriteVerdict::RejectedEqualToken { highest } => assert_eq!(*highest, write.token, "{write:?}"),
            other => panic!("{write:?} answered {other:?}"),
        }
    }
    let rejected = outcomes.iter().filter(|(_, verdict)| !verdict.is_accepted()).count();
    assert!(rejected > 0 && !accepted.is_empty(), "the race both accepts and rejects: {rejected} rejected");
}

async fn a_write_sent_twice_at_once_takes_effect_once(url: String) {
    let mut first = SqlResource::open(&url).await.expect("open");
    let mut second = SqlResource::open(&url).await.expect("open");
    for request in 1..=TWIN_WRITES {
        let write = Write {
            key: Key::new("invoice/B-1043"),
            token: Token(100 + request),
            holder: Holder { client: ClientId(9), request: RequestId(100 + request) },
            request: RequestId(request),
            path: WritePath::Ledger,
            value: format!("twin {request}"),
        };
        let (a, b) = tokio::join!(first.write(&write), second.write(&write));
        let mut verdicts = [a.expect("write"), b.expect("write")];
        verdicts.sort_by_key(|verdict| !verdict.is_accepted());
        assert_eq!(verdicts, [WriteVerdict::Accepted, WriteVerdict::Duplicate { accepted: true }], "request {request}");
    }
    let state = first.state().await.expect("state");
    assert_eq!(state.ledger(&Key::new("invoice/B-1043")).len() as u64, TWIN_WRITES);
}

async fn a_restore_is_seen_by_every_connection(url: String) {
    let mut operator = SqlResource::open(&url).await.expect("open");
    let mut worker = SqlResource::open(&url).await.expect("open");
    let write = |request: u64, token: u64| Write {
        key: Key::new("invoice/B-1044"),
        token: Token(token),
        holder: Holder { client: ClientId(7), request: RequestId(token) },
        request: RequestId(request),
        path: WritePath::Status,
        value: format!("token {token}"),
    };
    assert_eq!(worker.write(&write(1, 5)).await.expect("write"), WriteVerdict::Accepted);
    let backup = operator.backup("shared").await.expect("backup");
    assert_eq!(worker.write(&write(2, 9)).await.expect("write"), WriteVerdict::Accepted);
    operator.restore(&backup, 1).await.expect("restore");
    assert_eq!(worker.write(&write(3, 9)).await.expect("write"), WriteVerdict::Unavailable, "the worker sees the mark");
    let floor = LockFloor {
        token_last: Token(9),
        held: vec![(Key::new("invoice/B-1044"), Fence { token: Token(9), holder: write(3, 9).holder })],
    };
    assert!(operator.raise_floor(1, &floor).await.expect("raise"));
    assert_eq!(worker.write(&write(3, 9)).await.expect("write"), WriteVerdict::Accepted, "the holder writes again");
    assert_eq!(worker.write(&write(4, 5)).await.expect("write"), WriteVerdict::RejectedStale { highest: Token(9) });
    let state = operator.state().await.expect("state");
    assert_eq!(state.value(&Key::new("invoice/B-1044")), "token 9", "the worker wrote to the restored image");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_serializes_concurrent_writers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("shop.db").display());
    racing_writers_keep_the_ledger_in_token_order(url.clone()).await;
    a_write_sent_twice_at_once_takes_effect_once(url.clone()).await;
    a_restore_is_seen_by_every_connection(url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_serializes_concurrent_writers() {
    let Some(base) = support::postgres_url() else { return };
    racing_writers_keep_the_ledger_in_token_order(support::fresh_postgres_url(&base, "concurrent_race").await).await;
    a_write_sent_twice_at_once_takes_effect_once(support::fresh_postgres_url(&base, "concurrent_twins").await).await;
    a_restore_is_seen_by_every_connection(support::fresh_postgres_url(&base, "concurrent_restore").await).await;
}
