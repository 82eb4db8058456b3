//! The protected resource (the shop database) as its own node with its own
//! disk: a write's effect and the raised highest token are durable before the
//! writer hears "accepted".

use crate::history::{EventKind, WriteVerdict};
use crate::machine::disk::fsync;
use crate::machine::envelope::Envelope;
use crate::machine::net::{Addr, Delivery};
use crate::machine::wire;
use crate::nodes::context::Ctx;
use std::sync::Arc;

/// The life of the resource process, from its durable state until it is killed.
pub async fn run(ctx: Arc<Ctx>) {
    let variant = ctx.model.variant;
    // What a restart recovers: under `sink-max-in-memory` the highest tokens
    // lived only in memory and are gone.
    let mut state = ctx.resource_disk.lock().expect("disk lock").durable().state.durable_image(variant);
    let mut mailbox = ctx.net.bind(Addr::Resource);
    loop {
        let (from, bytes) = match mailbox.recv().await {
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
            fsync(&ctx.resource_disk).await;
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
