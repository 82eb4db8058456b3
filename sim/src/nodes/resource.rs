//! The protected resource (the shop database) as its own node with its own
//! disk: a write's effect and the raised highest token are durable before the
//! writer hears "accepted".

use crate::history::{EventKind, WriteVerdict};
use crate::machine::disk::fsync;
use crate::machine::envelope::Envelope;
use crate::machine::net::{Addr, Delivery};
use crate::machine::timer::{self, Deadline};
use crate::machine::wire;
use crate::nodes::context::Ctx;
use fencelock::Variant;
use std::sync::Arc;

/// Under `resource-sync-lazy`, how long an answered write may wait for its
/// sync, like a database that flushes once a second.
const SYNC_LAZY_INTERVAL_US: u64 = 1_000_000;

/// The life of the resource process, from its durable state until it is killed.
pub async fn run(ctx: Arc<Ctx>) {
    let variant = ctx.model.variant;
    // What a restart recovers: under `sink-max-in-memory` the highest tokens
    // lived only in memory and are gone.
    let mut state = ctx.resource_disk.lock().expect("disk lock").durable().state.durable_image(variant);
    let mut mailbox = ctx.net.bind(Addr::Resource);
    // The next background sync, while answered writes wait for one (`resource-sync-lazy`).
    let mut flush: Option<Deadline> = None;
    loop {
        let delivery = match flush.as_mut() {
            Some(deadline) => match timer::race(mailbox.recv(), deadline).await {
                Some(delivery) => delivery,
                None => {
                    flush = None;
                    fsync(&ctx.resource_disk).await;
                    continue;
                }
            },
            None => mailbox.recv().await,
        };
        let (from, bytes) = match delivery {
            Delivery::Packet { from, bytes } => (from, bytes),
            Delivery::Bounced { .. } => continue,
        };
        let write = match wire::decode::<Envelope>(&bytes) {
            Ok(Envelope::Write(write)) => write,
            Ok(_) => continue,
            Err(_) => {
                ctx.net.note_corrupt_detected();
                continue;
            }
        };
        let verdict = state.write(&write, variant);
        if effect_of(verdict) {
            ctx.resource_disk.lock().expect("disk lock").write(write.clone());
            // The one place Variant::ResourceSyncLazy is consulted: it answers
            // a write that is not durable yet, and a crash before the
            // background sync forgets it, raised fence and all.
            if variant == Variant::ResourceSyncLazy {
                let at_us = crate::machine::clock::now_us() + SYNC_LAZY_INTERVAL_US;
                flush.get_or_insert_with(|| Deadline::at_us(at_us));
            } else {
                fsync(&ctx.resource_disk).await;
            }
        }
        ctx.record(EventKind::WriteDone {
            client: write.holder.client,
            request: write.request,
            key: write.key.clone(),
            token: write.token,
            path: write.path,
            verdict,
        });
        ctx.send(Addr::Resource, from, &Envelope::WriteReply { request: write.request, verdict });
    }
}

/// Whether a verdict changed the durable state (and so must be synced before the answer).
fn effect_of(verdict: WriteVerdict) -> bool {
    // Rejections are recorded too (the dedup table answers a retried rejected
    // write the same way), so every fresh verdict is persisted.
    !matches!(verdict, WriteVerdict::Duplicate { .. })
}
