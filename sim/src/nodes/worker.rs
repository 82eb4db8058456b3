//! The workers: clients of the lock service that write to the protected
//! resource with their token, the way the shop's invoice workers do.
//!
//! A worker loops over jobs: acquire a key, work (sometimes past its lease,
//! sometimes stalled like worker A), write with its token on one of the two
//! write paths, sometimes renew, release. It also misbehaves the ways real
//! clients do: it gives up before the answer (ghost lock), retries with the
//! same request id, and crashes while holding a lock.

use crate::faults::{JobEnd, Overtake, StallPoint, UntilOvertaken};
use crate::history::{Actor, EventKind, GiveUp, Reader, WritePath, WriteVerdict};
use crate::machine::clock::{local_now, now_us, SharedClock};
use crate::machine::net::{Addr, Delivery, Mailbox};
use crate::machine::timer::{self, Deadline};
use crate::machine::wire;
use crate::model::Model;
use crate::nodes::commands::{CommandQueue, WorkerCommand, WorkerResult};
use crate::nodes::context::{ArmedStall, Ctx};
use crate::streams;
use fencelock::client::{Client, ClientConfig, ClientEvent, Outgoing};
use fencelock::resource::Write;
use fencelock::service::ClientReply;
use fencelock::wire::Envelope;
use fencelock::{ApplyResult, ClientId, Holder, Key, RequestId, Token, Variant};
use futures::StreamExt;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long a worker waits for a server before it retries (local µs).
pub const REQUEST_TIMEOUT_US: u64 = 250_000;
/// Attempts of one request (same request id) before the worker gives up: 3 s
/// of retries, so a retry can outlive the lease it asks about (etcd 11456).
const ATTEMPTS_MAX: u32 = 12;
/// Attempts of one resource write without an answer before the worker gives up on it.
const WRITE_ATTEMPTS_MAX: u32 = 3;
/// How long a worker waits before it sends a write answered `Unavailable` again.
const WRITE_UNAVAILABLE_RETRY_MS: u64 = 50;
/// `Unavailable` answers one write takes before the worker gives up on it (3 s).
const WRITE_UNAVAILABLE_MAX: u32 = 60;
/// Jobs of one worker life when the model sets no `jobs_max`.
const JOBS_PER_LIFE_MAX: u64 = 86_400_000;
/// A long job renews after each this many thousandths of its lease.
const RENEW_EVERY_PERMILLE: u64 = 400;

/// The life of one worker process.
pub async fn run(ctx: Arc<Ctx>, id: ClientId) {
    let incarnation = ctx.next_incarnation(Actor::Client(id));
    let mailbox = ctx.net.bind(Addr::Client(id));
    let clock = ctx.clock_of(Actor::Client(id)).clone();
    let mut worker = Worker {
        client: new_client(&ctx.model, id, incarnation),
        rng: streams::worker(ctx.seed, id.0, incarnation),
        ctx,
        id,
        clock,
        mailbox,
        incarnation,
        writes: 0,
        held: BTreeMap::new(),
        job_path: None,
        job_end: JobEnd::Drawn,
    };
    let commands = ctx_commands(&worker.ctx, id);
    match commands {
        Some(commands) => worker.serve(commands).await,
        None => {
            // Without `jobs_max` the bound is one job per simulated ms of a
            // day: more than any run holds (a job sleeps at least madsim's 1 ms).
            let jobs_max = worker.ctx.model.jobs_max.map_or(JOBS_PER_LIFE_MAX, u64::from);
            for _ in 0..jobs_max {
                worker.job().await;
            }
            // Done for this life: the worker idles, answering nothing.
            std::future::pending::<()>().await;
        }
    }
}

/// In a scripted run, the worker's command queue (taken once per life).
fn ctx_commands(ctx: &Ctx, id: ClientId) -> Option<CommandQueue> {
    ctx.script_queues.as_ref().and_then(|queues| queues.lock().expect("queue lock").remove(&id))
}

fn new_client(model: &Model, id: ClientId, incarnation: u64) -> Client {
    Client::new(ClientConfig {
        id,
        nodes: model.nodes,
        drift_ppm_max: model.drift_ppm_max,
        request_timeout_us: REQUEST_TIMEOUT_US,
        // Request ids of a new life never collide with an earlier life's.
        first_request: RequestId(incarnation << 32),
        variant: model.variant,
    })
}

/// What came of a lock request.
enum Answer {
    Event(ClientEvent),
    GaveUp,
}

struct Worker {
    ctx: Arc<Ctx>,
    id: ClientId,
    clock: SharedClock,
    rng: ChaCha8Rng,
    client: Client,
    mailbox: Mailbox,
    incarnation: u64,
    writes: u64,
    /// Tokens and grant requests of locks this worker holds (scripted runs).
    held: BTreeMap<Key, Holder>,
    /// The write path of the job in hand and how it ends: as drawn, unless
    /// a planned stall said (reset as each job starts).
    job_path: Option<WritePath>,
    job_end: JobEnd,
}

impl Worker {
    fn now(&self) -> u64 {
        local_now(&self.clock)
    }

    async fn job(&mut self) {
        (self.job_path, self.job_end) = (None, JobEnd::Drawn);
        let think_ms = match self.ctx.model.think_ms_max {
            Some(max) => self.rng.gen_range(0..=max),
            None => self.rng.gen_range(20..300),
        };
        // No sleep for none: madsim's shortest sleep is 1 ms, not 0.
        if think_ms > 0 {
            madsim::time::sleep(Duration::from_millis(think_ms)).await;
        }
        let model = &self.ctx.model;
        let key_index = if self.rng.gen_bool(0.5) { 0 } else { self.rng.gen_range(0..model.keys) };
        let key = Key::new(Model::key_name(key_index));
        let lease_ms = model.lease_ms;
        let wait_ms = if self.rng.gen_bool(0.5) { 0 } else { self.rng.gen_range(200..3_000) };
        let out = self.client.acquire(key.clone(), lease_ms, wait_ms, self.now());
        let acquire = out.request;
        self.send_request(&out);
        if self.rng.gen_bool(0.05) {
            // Disconnect before the answer: the grant, if any, is a ghost lock.
            self.give_up_soon(acquire).await;
            return;
        }
        let token = match self.await_answer(acquire).await {
            Answer::Event(ClientEvent::Granted { token, until_local_us, .. }) => {
                self.believe(&key, token, until_local_us);
                token
            }
            _ => return,
        };
        let holder = Holder { client: self.id, request: acquire };
        // The write uses the token the client library hands out, not the one the
        // grant's event carried: `token-monotonic` checks it is the client's latest grant.
        let Some(write_token) = self.work(&key, token, lease_ms).await else {
            return;
        };
        self.write(&key, write_token, holder).await;
        self.finish(&key, token).await;
    }

    /// Walks away without the answer, the two ways real clients do: it sends
    /// `Cancel` after a short while, or its connection drops (replies bounce
    /// back to the server) for a while. Either way a grant is a ghost lock.
    async fn give_up_soon(&mut self, request: RequestId) {
        if self.rng.gen_bool(0.5) {
            let wait_ms = self.rng.gen_range(1..20);
            madsim::time::sleep(Duration::from_millis(wait_ms)).await;
            if let Some(cancel) = self.client.cancel(self.now()) {
                self.send_request(&cancel);
            }
            self.ctx.record(EventKind::GaveUp { client: self.id, request, why: GiveUp::WalkedAway });
        } else {
            let away_ms = self.rng.gen_range(200..2_000);
            self.disconnect(request, away_ms).await;
        }
    }

    /// The connection drops for `away_ms`: replies meant for it bounce.
    async fn disconnect(&mut self, request: RequestId, away_ms: u64) {
        self.ctx.net.unbind(Addr::Client(self.id));
        self.ctx.record(EventKind::GaveUp { client: self.id, request, why: GiveUp::WalkedAway });
        madsim::time::sleep(Duration::from_millis(away_ms)).await;
        let _ = self.client.cancel(self.now());
        self.mailbox = self.ctx.net.bind(Addr::Client(self.id));
    }

    /// Works on the job; returns the token the client library then holds for
    /// the write, or `None` when the lock was lost and the job dropped.
    /// A long job renews its lease every `RENEW_EVERY_PERMILLE` of a lease, as a
    /// careful worker does, so renewals meet leader changes and partitions.
    async fn work(&mut self, key: &Key, token: Token, lease_ms: u64) -> Option<Token> {
        let (long, work_ms) = match self.ctx.model.work_ms_max {
            Some(max) => (false, self.rng.gen_range(0..=max)),
            None => {
                let long = self.rng.gen_bool(0.25);
                let work_ms = if long {
                    self.rng.gen_range(lease_ms * 8 / 10..lease_ms * 3)
                } else {
                    self.rng.gen_range(lease_ms / 10..lease_ms * 6 / 10)
                };
                (long, work_ms)
            }
        };
        let renews = long && self.rng.gen_bool(0.8);
        let chunk_ms = if renews { (lease_ms * RENEW_EVERY_PERMILLE / 1_000).max(1) } else { work_ms.max(1) };
        let mut left_ms = work_ms;
        // A bounded loop: at most work_ms / chunk_ms + 1 rounds.
        for _ in 0..=work_ms / chunk_ms {
            let slice_ms = left_ms.min(chunk_ms);
            if slice_ms > 0 {
                madsim::time::sleep(Duration::from_millis(slice_ms)).await;
            }
            left_ms -= slice_ms;
            if left_ms == 0 {
                break;
            }
            if renews {
                // A planned stall before the renewal (`StallUntilOvertaken`
                // with `before = "Renew"`): the renewal then names the token
                // another worker may have been granted the key after.
                if let Some(ArmedStall::UntilOvertaken(stall)) = self.ctx.take_armed_stall(Some(StallPoint::Renew)) {
                    self.stall_until_overtaken(key, token, stall).await;
                }
                if !self.renew(key, token).await {
                    return None;
                }
            }
        }
        // The worker-side check: a careful worker does not write once it knows
        // its lease is gone. It cannot stop a stall between this check and the
        // write; only the resource's token check can.
        let Some(believed) = self.client.belief(key, self.now()) else {
            self.ctx.record(EventKind::BeliefEnd { client: self.id, key: key.clone(), token });
            return None;
        };
        // Worker A: a stop-the-world stall (GC) between the check and the
        // write, planned (`StallHolder`, `StallUntilOvertaken`) or drawn by the workload.
        let stall = self.ctx.take_armed_stall(Some(StallPoint::Write)).or_else(|| {
            (self.ctx.model.stalls && self.rng.gen_bool(0.25)).then(|| {
                let longest_ms = self.ctx.model.stall_ms_longest();
                ArmedStall::For(self.rng.gen_range(lease_ms.min(longest_ms) / 2..=longest_ms))
            })
        });
        match stall {
            Some(ArmedStall::For(ms)) => {
                self.ctx.record(EventKind::Stalled { client: self.id, ms });
                madsim::time::sleep(Duration::from_millis(ms)).await;
                self.ctx.record(EventKind::Resumed { actor: Actor::Client(self.id) });
            }
            Some(ArmedStall::UntilOvertaken(stall)) => {
                self.stall_until_overtaken(key, token, stall).await;
            }
            Some(ArmedStall::OnGrant(_)) => unreachable!("taken only as a Granted answer is read"),
            None => {}
        }
        Some(believed)
    }

    /// A planned stall (`StallOnGrant`) between the arrival of a `Granted`
    /// answer to `request` and its reading, if one is armed.
    async fn stall_on_grant(&mut self, request: RequestId) {
        let Some(ArmedStall::OnGrant(ms)) = self.ctx.take_armed_stall(None) else { return };
        self.ctx.record(EventKind::StalledOnGrant { client: self.id, request, ms });
        madsim::time::sleep(Duration::from_millis(ms)).await;
        self.ctx.record(EventKind::Resumed { actor: Actor::Client(self.id) });
    }

    /// A planned stall that lasts until another worker overtakes this one on
    /// `key` (granted it, or a write under a higher token accepted), then
    /// `after_ms` more, at most `ms_max` in all; the job then ends as the
    /// stall says. The stalled worker does nothing; it looks at the history
    /// once a millisecond.
    async fn stall_until_overtaken(&mut self, key: &Key, token: Token, stall: UntilOvertaken) {
        let UntilOvertaken { on, after_ms, ms_max, before, path, end } = stall;
        (self.job_path, self.job_end) = (path, end);
        let client = self.id;
        let stalled = EventKind::StalledUntilOvertaken {
            client,
            key: key.clone(),
            token,
            on,
            after_ms,
            ms_max,
            before,
            path,
            end,
        };
        self.ctx.record(stalled);
        let reader = Reader::Stall(self.id);
        self.ctx.follow_history(reader);
        let deadline_us = now_us() + ms_max * 1_000;
        while now_us() < deadline_us {
            madsim::time::sleep(Duration::from_micros((deadline_us - now_us()).min(1_000))).await;
            let overtaken = self.ctx.read_history(reader, |event| overtakes(&event.kind, key, token, on).then_some(()));
            if !overtaken.is_empty() {
                // Nothing more is read: the history need not hold the rest of the stall.
                self.ctx.unfollow_history(reader);
                let left_us = deadline_us.saturating_sub(now_us());
                madsim::time::sleep(Duration::from_micros((after_ms * 1_000).min(left_us))).await;
                break;
            }
        }
        self.ctx.unfollow_history(reader);
        self.ctx.record(EventKind::Resumed { actor: Actor::Client(self.id) });
    }

    /// Renews the lease on `key`; returns false when the service says it is lost.
    async fn renew(&mut self, key: &Key, token: Token) -> bool {
        let Some(out) = self.client.renew(key, self.now()) else {
            return true;
        };
        let request = out.request;
        self.send_request(&out);
        match self.await_answer(request).await {
            Answer::Event(ClientEvent::Renewed { until_local_us, .. }) => {
                self.ctx.record(EventKind::BeliefEnd { client: self.id, key: key.clone(), token });
                self.believe(key, token, until_local_us);
                true
            }
            Answer::Event(ClientEvent::Lost { .. }) => {
                self.ctx.record(EventKind::BeliefEnd { client: self.id, key: key.clone(), token });
                false
            }
            _ => true,
        }
    }

    /// Writes the job's result with the token, on one of the two write paths.
    async fn write(&mut self, key: &Key, token: Token, holder: Holder) {
        // The one place `client-clock-token` changes: the worker's local clock
        // reading stands in for the fencing token.
        let token = match self.ctx.model.variant {
            Variant::ClientClockToken => Token(self.now() / 1_000),
            _ => token,
        };
        let drawn = if self.rng.gen_bool(0.5) { WritePath::Status } else { WritePath::Ledger };
        let path = self.job_path.unwrap_or(drawn);
        self.write_with(key, token, holder, path).await;
    }

    /// Sends one write (retrying with the same request id) and returns the verdict, if any came.
    async fn write_with(&mut self, key: &Key, token: Token, holder: Holder, path: WritePath) -> Option<WriteVerdict> {
        self.writes += 1;
        let request = RequestId((self.incarnation << 32) | (1 << 31) | self.writes);
        let value = format!("checked by {} with {}", self.id, token);
        let write = Write { key: key.clone(), token, holder, request, path, value };
        self.ctx.record(EventKind::WriteSent { client: self.id, request, key: key.clone(), token, path });
        let (mut silent, mut unavailable) = (0, 0);
        for _ in 0..WRITE_ATTEMPTS_MAX + WRITE_UNAVAILABLE_MAX {
            self.ctx.send(Addr::Client(self.id), Addr::Resource, &Envelope::Write(write.clone()));
            match self.await_write(request).await {
                // A restored resource reading its floors: the same write
                // (same request id) again a little later.
                Some(WriteVerdict::Unavailable) if unavailable < WRITE_UNAVAILABLE_MAX => {
                    unavailable += 1;
                    madsim::time::sleep(Duration::from_millis(WRITE_UNAVAILABLE_RETRY_MS)).await;
                }
                Some(verdict) => return Some(verdict),
                None => {
                    silent += 1;
                    if silent >= WRITE_ATTEMPTS_MAX {
                        return None;
                    }
                }
            }
        }
        None
    }

    async fn await_write(&mut self, request: RequestId) -> Option<WriteVerdict> {
        let mut deadline = Deadline::at_us(crate::machine::clock::now_us() + REQUEST_TIMEOUT_US);
        loop {
            if deadline.passed() {
                return None;
            }
            match timer::race(self.mailbox.recv(), &mut deadline).await {
                Some(Delivery::Packet { bytes, .. }) => match wire::decode::<Envelope>(&bytes) {
                    Ok(Envelope::WriteReply { request: r, verdict }) if r == request => return Some(verdict),
                    Ok(_) => {}
                    Err(_) => self.ctx.net.note_corrupt_detected(),
                },
                Some(Delivery::Bounced { .. }) => {}
                None => return None,
            }
        }
    }

    /// Releases, or now and then crashes or walks away while holding; a
    /// planned stall may have said which ([`JobEnd`]).
    async fn finish(&mut self, key: &Key, token: Token) {
        let roll: f64 = self.rng.gen();
        let end = self.job_end;
        if end.is_drawn() && roll < 0.04 {
            // Crash while holding: the lock must be freed by expiry.
            let actor = Actor::Client(self.id);
            self.ctx.record(EventKind::BeliefEnd { client: self.id, key: key.clone(), token });
            self.ctx.record(EventKind::Crashed { actor });
            let down_ms = self.rng.gen_range(500..3_000);
            madsim::time::sleep(Duration::from_millis(down_ms)).await;
            self.incarnation = self.ctx.next_incarnation(actor);
            self.client = new_client(&self.ctx.model, self.id, self.incarnation);
            self.ctx.record(EventKind::Restarted { actor });
            return;
        }
        self.ctx.record(EventKind::BeliefEnd { client: self.id, key: key.clone(), token });
        // Some workers end a job by revoking their lease by token (etcd's
        // `lease revoke`) instead of releasing: a retried revoke may land after
        // the key was regranted, the late Expire the token makes harmless.
        let revoke = match end {
            JobEnd::Drawn => self.rng.gen_bool(0.3),
            JobEnd::Release => false,
            JobEnd::Revoke => true,
        };
        let out = if revoke { self.client.revoke(key, self.now()) } else { self.client.release(key, self.now()) };
        if let Some(out) = out {
            let request = out.request;
            self.send_request(&out);
            let _ = self.await_answer(request).await;
        }
    }

    fn believe(&self, key: &Key, token: Token, until_local_us: u64) {
        self.ctx.record(EventKind::BeliefStart { client: self.id, key: key.clone(), token, until_local_us });
    }

    fn send_request(&self, out: &Outgoing) {
        self.ctx.record(EventKind::Requested {
            client: self.id,
            request: out.request,
            to: out.to,
            body: out.body.clone(),
        });
        let envelope = Envelope::Request { client: self.id, request: out.request, body: out.body.clone() };
        self.ctx.send(Addr::Client(self.id), Addr::Server(out.to), &envelope);
    }

    /// Waits for the outcome of `request`, following redirects and retrying
    /// with the same request id on timeouts; gives up after `ATTEMPTS_MAX`.
    async fn await_answer(&mut self, request: RequestId) -> Answer {
        let mut attempts = 1;
        let mut deadline = None;
        loop {
            let deadline_local = self.client.pending_deadline_local_us().unwrap_or(self.now() + REQUEST_TIMEOUT_US);
            let now_true = crate::machine::clock::now_us();
            let deadline_true = self.clock.lock().expect("clock lock").true_us_when(deadline_local, now_true);
            let wait_us = deadline_true.saturating_sub(now_true).max(1);
            match timer::race(self.mailbox.recv(), timer::refresh(&mut deadline, now_true + wait_us)).await {
                Some(Delivery::Packet { from, bytes }) => {
                    let decoded = wire::decode::<Envelope>(&bytes);
                    if decoded.is_err() {
                        self.ctx.net.note_corrupt_detected();
                    }
                    let (Addr::Server(node), Ok(Envelope::Reply { request: r, reply })) = (from, decoded) else {
                        continue;
                    };
                    if r != request {
                        continue;
                    }
                    if let ClientReply::Granted { .. } = reply {
                        self.stall_on_grant(request).await;
                    }
                    self.ctx.record(EventKind::Answered { client: self.id, request, from: node, reply });
                    for event in self.client.on_reply(node, r, reply, self.now()) {
                        match event {
                            ClientEvent::Sent(out) => self.send_request(&out),
                            ClientEvent::Nothing => {}
                            other => return Answer::Event(other),
                        }
                    }
                }
                Some(Delivery::Bounced { .. }) => {}
                None => {
                    attempts += 1;
                    if attempts > ATTEMPTS_MAX {
                        if let Some(cancel) = self.client.cancel(self.now()) {
                            self.send_request(&cancel);
                        }
                        self.ctx.record(EventKind::GaveUp { client: self.id, request, why: GiveUp::Retries });
                        return Answer::GaveUp;
                    }
                    if let Some(out) = self.client.on_timeout(self.now()) {
                        self.send_request(&out);
                    }
                }
            }
        }
    }
}

impl Worker {
    /// Scripted mode: executes the script's commands one at a time.
    async fn serve(&mut self, mut commands: CommandQueue) {
        while let Some(command) = commands.next().await {
            let (result, done) = match command {
                WorkerCommand::Acquire { key, wait_ms, vanish, done } => {
                    (self.scripted_acquire(key, wait_ms, vanish).await, done)
                }
                WorkerCommand::Write { key, token, path, done } => (self.scripted_write(&key, token, path).await, done),
                WorkerCommand::Renew { key, done } => (self.scripted_renew(&key).await, done),
                WorkerCommand::Revoke { key, token, done } => (self.scripted_revoke(&key, token).await, done),
                WorkerCommand::Release { key, done } => (self.scripted_release(&key).await, done),
            };
            // The story may have stopped listening; the command is done either way.
            let _ = done.send(result);
        }
    }

    /// Sends one request and waits for its answer, retrying as the client library says.
    async fn request(&mut self, out: &Outgoing) -> WorkerResult {
        self.send_request(out);
        let answer = self.await_answer(out.request).await;
        self.settle(answer)
    }

    async fn scripted_renew(&mut self, key: &Key) -> WorkerResult {
        match self.client.renew(key, self.now()) {
            Some(out) => self.request(&out).await,
            None => WorkerResult::Refused("holds no lock on that key".into()),
        }
    }

    async fn scripted_revoke(&mut self, key: &Key, token: Token) -> WorkerResult {
        let out = self.client.revoke_token(key, token, self.now());
        self.request(&out).await
    }

    async fn scripted_release(&mut self, key: &Key) -> WorkerResult {
        let token = self.client.token_of(key);
        match (self.client.release(key, self.now()), self.held.remove(key), token) {
            (Some(out), Some(_), Some(token)) => {
                self.ctx.record(EventKind::BeliefEnd { client: self.id, key: key.clone(), token });
                self.request(&out).await
            }
            _ => WorkerResult::Refused("holds no lock on that key".into()),
        }
    }

    async fn scripted_acquire(&mut self, key: Key, wait_ms: u64, vanish: bool) -> WorkerResult {
        let out = self.client.acquire(key.clone(), self.ctx.model.lease_ms, wait_ms, self.now());
        let request = out.request;
        self.send_request(&out);
        if vanish {
            self.disconnect(request, 1_000).await;
            return WorkerResult::NoAnswer;
        }
        let answer = self.await_answer(request).await;
        if let Answer::Event(ClientEvent::Granted { token, until_local_us, .. }) = &answer {
            self.believe(&key, *token, *until_local_us);
            self.held.insert(key, Holder { client: self.id, request });
        }
        self.settle(answer)
    }

    async fn scripted_write(&mut self, key: &Key, token: Option<Token>, path: WritePath) -> WorkerResult {
        let holder = self.held.get(key).copied().unwrap_or(Holder { client: self.id, request: RequestId(0) });
        let Some(token) = token.or_else(|| self.client.token_of(key)) else {
            return WorkerResult::Refused("has no token for that key".into());
        };
        match self.write_with(key, token, holder, path).await {
            Some(verdict) => WorkerResult::Written(verdict),
            None => WorkerResult::NoAnswer,
        }
    }

    fn settle(&self, answer: Answer) -> WorkerResult {
        match answer {
            Answer::Event(ClientEvent::Granted { token, .. }) => WorkerResult::Granted(token),
            Answer::Event(ClientEvent::Renewed { .. }) => WorkerResult::Renewed,
            Answer::Event(ClientEvent::Released { .. }) => WorkerResult::Released,
            Answer::Event(other) => WorkerResult::Refused(format!("{other:?}")),
            Answer::GaveUp => WorkerResult::NoAnswer,
        }
    }
}

/// Whether `event` overtakes a worker holding `key` under `token`: another
/// grant of the key, or an accepted write on it, under a higher token.
fn overtakes(event: &EventKind, key: &Key, token: Token, on: Overtake) -> bool {
    match (on, event) {
        (Overtake::Grant, EventKind::Applied { command, result: ApplyResult::Granted { token: granted }, .. }) => {
            command.key() == key && *granted > token
        }
        (
            Overtake::Write,
            EventKind::WriteDone { key: written, token: higher, verdict: WriteVerdict::Accepted, .. },
        ) => written == key && *higher > token,
        _ => false,
    }
}
