//! The B-1042 story at the resource, on SQLite and PostgreSQL.
//!
//! Worker A holds invoice B-1042 with token 41, writes under it, and pauses
//! (a GC pause, a stalled VM). Its lease runs out; worker B acquires the lock
//! with token 42 and writes. A wakes up and sends its late write with 41: it
//! must be rejected, on both write paths, whichever path B wrote through. The
//! same again with the database restarted (SQLite: the file reopened;
//! PostgreSQL: a new connection) between B's write and A's, and with the
//! database restored from a backup taken before B's write, then its floor
//! raised from the lock service (B holds 42).

use crate::support;

use fencelock::resource::{Fence, LockFloor, ResourceState, Write, WritePath, WriteVerdict};
use fencelock::{ClientId, Holder, Key, RequestId, Token, Variant};
use fencelock_node::resource::SqlResource;

const PATHS: [WritePath; 2] = [WritePath::Status, WritePath::Ledger];

/// What happens to the database between B's write and A's late one.
#[derive(Clone, Copy, Debug)]
enum Between {
    Nothing,
    Restart,
    /// Restored from the backup taken before B's write; the floor read finds B holding 42.
    RestoreAndFloor,
}

const BETWEEN: [Between; 3] = [Between::Nothing, Between::Restart, Between::RestoreAndFloor];

fn invoice() -> Key {
    Key::new("invoice/B-1042")
}

/// Worker A, holding token 41 from its acquire request 1.
fn worker_a() -> Holder {
    Holder { client: ClientId(1), request: RequestId(1) }
}

/// Worker B, holding token 42 from its acquire request 1.
fn worker_b() -> Holder {
    Holder { client: ClientId(2), request: RequestId(1) }
}

fn write(holder: Holder, token: u64, request: u64, path: WritePath, value: &str) -> Write {
    Write { key: invoice(), token: Token(token), holder, request: RequestId(request), path, value: value.into() }
}

/// The database and core's model, told the same story side by side.
struct Shop {
    url: String,
    db: SqlResource,
    model: ResourceState,
}

impl Shop {
    async fn open(url: String) -> Shop {
        let db = SqlResource::open(&url).await.expect("open the resource");
        Shop { url, db, model: ResourceState::new() }
    }

    /// Sends `write` to the database and checks its verdict against core's.
    async fn send(&mut self, write: &Write) -> WriteVerdict {
        let verdict = self.db.write(write).await.expect("write");
        assert_eq!(verdict, self.model.write(write, Variant::Default), "the database judges as core does");
        verdict
    }

    async fn restart(&mut self) {
        self.db = SqlResource::open(&self.url).await.expect("reopen the resource");
    }
}

async fn story(url: String, b_path: WritePath, between: Between) {
    let context = format!("B wrote through {b_path}, then {between:?}");
    let mut shop = Shop::open(url).await;

    // A holds token 41 and writes under it, then pauses.
    assert_eq!(shop.send(&write(worker_a(), 41, 10, WritePath::Status, "open")).await, WriteVerdict::Accepted);
    assert_eq!(shop.send(&write(worker_a(), 41, 11, WritePath::Ledger, "opened")).await, WriteVerdict::Accepted);
    let nightly = shop.db.backup("nightly").await.expect("backup");
    let nightly_model = shop.model.clone();

    // A's lease runs out; B acquires with token 42 and writes.
    assert_eq!(shop.send(&write(worker_b(), 42, 20, b_path, "checked")).await, WriteVerdict::Accepted, "{context}");

    match between {
        Between::Nothing => {}
        Between::Restart => shop.restart().await,
        Between::RestoreAndFloor => {
            shop.db.restore(&nightly, 1).await.expect("restore");
            shop.model = nightly_model;
            shop.model.restored(1, Variant::Default);
            // Until the floor is read, even A's late write is only told to come back.
            let early = write(worker_a(), 41, 12, WritePath::Status, "paid");
            assert_eq!(shop.send(&early).await, WriteVerdict::Unavailable, "{context}");
            let floor = LockFloor {
                token_last: Token(42),
                held: vec![(invoice(), Fence { token: Token(42), holder: worker_b() })],
            };
            assert!(shop.db.raise_floor(1, &floor).await.expect("raise floor"), "{context}");
            assert!(shop.model.raise_floor(1, &floor));
        }
    }

    // A wakes up and sends its late writes with 41, on both paths.
    for (request, path) in [(13, WritePath::Status), (14, WritePath::Ledger)] {
        let late = write(worker_a(), 41, request, path, "paid");
        let verdict = shop.send(&late).await;
        assert_eq!(verdict, WriteVerdict::RejectedStale { highest: Token(42) }, "{context}: A's late {path} write");
    }

    let state = shop.db.state().await.expect("state");
    assert_eq!(state, shop.model, "{context}: the database holds what core holds");
    assert_eq!(state.fence(&invoice()), Some(Fence { token: Token(42), holder: worker_b() }), "{context}");
    assert_ne!(state.value(&invoice()), "paid", "{context}: A's late status never landed");
    assert!(state.ledger(&invoice()).iter().all(|(token, line)| line != "paid" || *token != Token(41)), "{context}");

    // B, the holder, is not locked out.
    assert_eq!(shop.send(&write(worker_b(), 42, 21, WritePath::Ledger, "shipped")).await, WriteVerdict::Accepted);
}

#[tokio::test]
async fn sqlite_rejects_the_late_write_of_the_old_holder() {
    for between in BETWEEN {
        for b_path in PATHS {
            let dir = tempfile::tempdir().expect("tempdir");
            story(format!("sqlite:{}", dir.path().join("shop.db").display()), b_path, between).await;
        }
    }
}

#[tokio::test]
async fn postgres_rejects_the_late_write_of_the_old_holder() {
    let Some(base) = support::postgres_url() else { return };
    for between in BETWEEN {
        for b_path in PATHS {
            let schema = format!("b1042_{b_path}_{between:?}").to_lowercase();
            story(support::fresh_postgres_url(&base, &schema).await, b_path, between).await;
        }
    }
}
