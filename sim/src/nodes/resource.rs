//! The protected resource (the shop database) as its own node with its own
//! disk: a write's effect and the raised highest token are durable before the
//! writer hears "accepted".
//!
//! Restored from a backup, it starts by reading its floors from the lock
//! service (`FloorRead`, answered after a read-index round at the leader) and
//! answers every write `Unavailable` meanwhile; once the floors are durable it
//! serves writes again (docs/SPEC.md, "The restore floor and why it is safe").

use crate::history::{Actor, EventKind, WriteVerdict};
use crate::machine::clock::now_us;
use crate::machine::disk::{fsync, ResourceOp};
use crate::machine::net::{Addr, Delivery};
use crate::machine::timer::{self, Deadline};
use crate::machine::wire;
use crate::nodes::context::Ctx;
use fencelock::resource::{ResourceState, Write};
use fencelock::service::FloorAnswer;
use fencelock::wire::Envelope;
use fencelock::{NodeId, Variant};
use std::sync::Arc;

/// Under `resource-sync-lazy`, how long an answered write may wait for its
/// sync, like a database that flushes once a second.
const SYNC_LAZY_INTERVAL_US: u64 = 1_000_000;

/// How long a floor read waits for its answer before it asks the next server.
const FLOOR_TIMEOUT_US: u64 = 100_000;

/// How long the resource waits before it asks again a leader that could not serve the read yet.
const FLOOR_RETRY_US: u64 = 20_000;

/// Floor reads of one life; a day of timeouts, more than any run holds.
const FLOOR_ATTEMPTS_MAX: u64 = 86_400_000_000 / FLOOR_TIMEOUT_US;

/// The floor read of a restored resource: which server it asks, and when it
/// asks again. Read ids carry the process's life, so an answer to a read of
/// an earlier life (before a later restore) is never taken.
struct FloorRead {
    restore: u64,
    life: u64,
    attempts: u64,
    /// The server the attempt in flight went to.
    to: NodeId,
    /// The server the next attempt goes to, at `next_at_us`.
    next_to: NodeId,
    next_at_us: u64,
}

impl FloorRead {
    fn read_id(&self) -> u64 {
        (self.life << 32) | self.attempts
    }

    /// Whether `read` is a read of this life (any attempt: each was sent after the restore).
    fn is_ours(&self, read: u64) -> bool {
        read >> 32 == self.life
    }

    /// Sends the next attempt to `to`, unless the bound is reached; without
    /// an answer in time, the next server round the ring is asked.
    fn ask(&mut self, ctx: &Ctx, to: NodeId) {
        if self.attempts >= FLOOR_ATTEMPTS_MAX {
            self.next_at_us = u64::MAX;
            return;
        }
        self.attempts += 1;
        self.to = to;
        self.next_to = NodeId((to.0 + 1) % ctx.model.nodes.max(1));
        self.next_at_us = now_us() + FLOOR_TIMEOUT_US;
        let read = self.read_id();
        ctx.record(EventKind::FloorAsked { restore: self.restore, read, to });
        ctx.send(Addr::Resource, Addr::Server(to), &Envelope::FloorRead { read });
    }

    /// Asks `to` again a little later.
    fn ask_later(&mut self, to: NodeId) {
        self.next_to = to;
        self.next_at_us = now_us() + FLOOR_RETRY_US;
    }
}

/// The life of the resource process, from its durable state until it is killed.
pub async fn run(ctx: Arc<Ctx>) {
    let variant = ctx.model.variant;
    // What a restart recovers: under `sink-max-in-memory` the highest tokens
    // lived only in memory and are gone.
    let mut state = ctx.resource_disk.lock().expect("disk lock").durable().state.durable_image(variant);
    let life = ctx.next_incarnation(Actor::Resource);
    let mut mailbox = ctx.net.bind(Addr::Resource);
    let mut floor = state.awaiting_floor().map(|restore| {
        let first = NodeId((life % u64::from(ctx.model.nodes.max(1))) as u8);
        let mut read = FloorRead { restore, life, attempts: 0, to: first, next_to: first, next_at_us: 0 };
        read.ask(&ctx, first);
        read
    });
    // The next background sync, while answered writes wait for one (`resource-sync-lazy`).
    let mut flush_at_us: Option<u64> = None;
    let mut deadline: Option<Deadline> = None;
    loop {
        let wake_us = [flush_at_us, floor.as_ref().map(|read| read.next_at_us)].into_iter().flatten().min();
        let delivery = match wake_us {
            Some(at_us) => match timer::race(mailbox.recv(), timer::refresh(&mut deadline, at_us)).await {
                Some(delivery) => delivery,
                None => {
                    if flush_at_us.is_some_and(|at| at <= now_us()) {
                        flush_at_us = None;
                        fsync(&ctx.resource_disk).await;
                    }
                    if let Some(read) = floor.as_mut().filter(|read| read.next_at_us <= now_us()) {
                        let to = read.next_to;
                        read.ask(&ctx, to);
                    }
                    continue;
                }
            },
            None => mailbox.recv().await,
        };
        let (from, bytes) = match delivery {
            Delivery::Packet { from, bytes } => (from, bytes),
            Delivery::Bounced { .. } => continue,
        };
        match wire::decode::<Envelope>(&bytes) {
            Ok(Envelope::Write(write)) => {
                let verdict = judge(&ctx, &mut state, &write, variant, &mut flush_at_us).await;
                ctx.record(EventKind::WriteDone {
                    client: write.holder.client,
                    request: write.request,
                    key: write.key.clone(),
                    token: write.token,
                    path: write.path,
                    verdict,
                });
                if ctx.take_write_answer_to_lose() {
                    ctx.record(EventKind::WriteAnswerLost { client: write.holder.client, request: write.request });
                } else {
                    ctx.send(Addr::Resource, from, &Envelope::WriteReply { request: write.request, verdict });
                }
            }
            Ok(Envelope::FloorReply { read, answer }) => {
                let Addr::Server(node) = from else { continue };
                let Some(pending) = floor.as_mut().filter(|pending| pending.is_ours(read)) else { continue };
                match answer {
                    FloorAnswer::Floor(lock_floor) => {
                        let restore = pending.restore;
                        assert!(state.raise_floor(restore, &lock_floor), "the floor is read for this life's restore");
                        ctx.resource_disk
                            .lock()
                            .expect("disk lock")
                            .write(ResourceOp::Floor { restore, floor: lock_floor.clone() });
                        fsync(&ctx.resource_disk).await;
                        let held = lock_floor.held.iter().map(|(key, fence)| (key.clone(), fence.token)).collect();
                        ctx.record(EventKind::FloorRaised {
                            restore,
                            read,
                            from: node,
                            token_last: lock_floor.token_last,
                            held,
                        });
                        floor = None;
                    }
                    // Only the answer to the attempt in flight moves the read on.
                    _ if read != pending.read_id() => {}
                    FloorAnswer::NotLeader { leader: Some(leader) } => pending.ask(&ctx, leader),
                    // No leader known there: the next server, a little later.
                    FloorAnswer::NotLeader { leader: None } => pending.ask_later(pending.next_to),
                    // It leads but cannot serve yet: the same server, a little later.
                    FloorAnswer::Unavailable => pending.ask_later(node),
                }
            }
            Ok(_) => {}
            Err(_) => ctx.net.note_corrupt_detected(),
        }
    }
}

/// Judges one write and makes its effect durable before the answer (or, under
/// `resource-sync-lazy`, within a second).
async fn judge(
    ctx: &Ctx,
    state: &mut ResourceState,
    write: &Write,
    variant: Variant,
    flush_at_us: &mut Option<u64>,
) -> WriteVerdict {
    let verdict = state.write(write, variant);
    if effect_of(verdict) {
        ctx.resource_disk.lock().expect("disk lock").write(ResourceOp::Write(write.clone()));
        // The one place Variant::ResourceSyncLazy is consulted: it answers
        // a write that is not durable yet, and a crash before the
        // background sync forgets it, raised fence and all.
        if variant == Variant::ResourceSyncLazy {
            flush_at_us.get_or_insert(now_us() + SYNC_LAZY_INTERVAL_US);
        } else {
            fsync(&ctx.resource_disk).await;
        }
    }
    verdict
}

/// Whether a verdict changed the durable state (and so must be synced before the answer).
fn effect_of(verdict: WriteVerdict) -> bool {
    // Rejections are recorded too (the dedup table answers a retried rejected
    // write the same way), so every fresh verdict is persisted. A write
    // answered `Unavailable` was not judged at all.
    !matches!(verdict, WriteVerdict::Duplicate { .. } | WriteVerdict::Unavailable)
}
