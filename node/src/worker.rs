//! A workload worker as its own process: the simulator's worker
//! (`sim/src/nodes/worker.rs`) over real TCP and a real database, so that
//! `fencesim real` can pause it the way the simulator pauses worker A — by
//! SIGSTOP, past its lease, then SIGCONT.
//!
//! Each job: think, acquire a key (half the time the story's key), work on
//! it (a long job renews its lease), check the lease belief, maybe stall,
//! write under the token on one of the two write paths, release (or, three
//! times in ten, revoke the lease by token). Not yet here: the simulator
//! worker's walk-aways (ghost locks) and crashes while holding. Every step
//! goes into the worker's history (`client-N.jsonl`, one line pushed to the
//! file as it happens, so a worker killed at any instant loses nothing it did).
//!
//! Whoever runs the worker steers it through files in its control
//! directory (`--control DIR`), read between steps:
//! - `clock-N` (`TRUE_US,LOCAL_US,RATE_PPM`): this worker's machine clock;
//!   a new mapping is taken as it is seen and recorded as a `Clock` line.
//! - `links-N` (`to=0,2 from=1`): the links between this worker and the
//!   servers that are cut, at the worker's end (`client::Links`), read at
//!   every message.
//! - `stall-armed` (milliseconds, then the stall's number on a line of its
//!   own): the next worker of the run to pass its lease check with a lock
//!   in hand takes it (an atomic rename to `stall-taken-N`, so exactly one
//!   does) and stalls that long: the simulator's `StallHolder`.
//!
//! A stall is a real stop: the worker writes `stopped-N` (the length in ms,
//! `armed` and the armed stall's number, or `drawn`, then the number of the
//! token it holds and its key, a line each), records `Stalled`, and sends itself SIGSTOP; the runner sees it
//! stopped, and sends SIGCONT when the length has passed (or, for an armed
//! stall until overtaken, when the histories show the overtaking). Without
//! a control directory a stall is a sleep.

use crate::client::{ClientOptions, LockClient};
use crate::clock::ClockMap;
use crate::config::Cluster;
use crate::history::{EventKind, HistoryWriter};
use crate::resource::SqlResource;
use fencelock::resource::{Write, WritePath, WriteVerdict};
use fencelock::{ClientId, Holder, Key, RequestId, Token};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A long job renews after each this many thousandths of its lease (the simulator's).
const RENEW_EVERY_PERMILLE: u64 = 400;
/// `Unavailable` answers one write takes before the worker gives up on it (3 s).
const WRITE_UNAVAILABLE_MAX: u32 = 60;
const WRITE_UNAVAILABLE_RETRY: Duration = Duration::from_millis(50);
/// Unanswered attempts of one write before the worker gives up on it (the simulator's `WRITE_ATTEMPTS_MAX`).
const WRITE_SILENT_MAX: u32 = 3;
/// How long one attempt of a lock request waits (the simulator's `REQUEST_TIMEOUT_US`).
const REQUEST_TIMEOUT_MS: u64 = 250;
/// Attempts of one lock request (the simulator's `ATTEMPTS_MAX`).
const ATTEMPTS_MAX: u32 = 12;

/// What one worker process does.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    pub client: ClientId,
    /// Seeds the worker's draws (with its client id and incarnation).
    pub seed: u64,
    /// Counts this client's lives: request ids of a new life never collide with an earlier one's.
    pub incarnation: u64,
    /// The keys it works on; the first is the story's key, taken half the time.
    pub keys: Vec<Key>,
    pub lease_ms: u64,
    /// Stall between the lease check and the write now and then (model key `stalls`), at most this long.
    pub stall_ms_max: Option<u64>,
    /// The protected resource: `sqlite:PATH`, a path, or `postgres://…`.
    pub resource: String,
    pub control: Option<PathBuf>,
    pub clock: Option<ClockMap>,
    /// Jobs before the worker idles (none: until stopped).
    pub jobs_max: Option<u64>,
}

/// Opens the resource as a worker would and closes it: whoever starts a run
/// finds an unreachable database before it starts a cluster.
pub async fn check_resource(cluster: &Cluster, url: &str) -> Result<(), String> {
    SqlResource::open_variant(url, cluster.variant).await.map(drop).map_err(|e| format!("resource {url}: {e}"))
}

/// Runs jobs until `jobs_max` (then idles until stopped) or a failure of the resource.
pub async fn run(cluster: &Cluster, options: WorkerOptions) -> Result<(), String> {
    let history =
        HistoryWriter::open(cluster.history.as_deref(), &format!("client-{}", options.client.0))?.flushing_each_line();
    let client_options = ClientOptions {
        id: options.client,
        first_request: RequestId(options.incarnation << 32),
        request_timeout_ms: REQUEST_TIMEOUT_MS,
        attempts_max: ATTEMPTS_MAX,
    };
    let mut lock = LockClient::new(cluster, &client_options).with_history(history);
    if let Some(dir) = &options.control {
        lock = lock.with_links(dir.join(format!("links-{}", options.client.0)));
    }
    if let Some(map) = options.clock {
        lock.set_clock(map)?;
    }
    let resource = SqlResource::open_variant(&options.resource, cluster.variant)
        .await
        .map_err(|e| format!("resource {}: {e}", options.resource))?;
    let rng = ChaCha8Rng::seed_from_u64(
        options.seed ^ (u64::from(options.client.0) << 40) ^ options.incarnation.wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    let mut worker = Worker { lock, resource, rng, clock_seen: options.clock, writes: 0, options };
    let jobs_max = worker.options.jobs_max.unwrap_or(u64::MAX);
    for _ in 0..jobs_max {
        worker.job().await?;
    }
    std::future::pending::<()>().await;
    Ok(())
}

struct Worker {
    lock: LockClient,
    resource: SqlResource,
    rng: ChaCha8Rng,
    options: WorkerOptions,
    clock_seen: Option<ClockMap>,
    writes: u64,
}

impl Worker {
    async fn job(&mut self) -> Result<(), String> {
        self.follow_control()?;
        tokio::time::sleep(Duration::from_millis(self.rng.gen_range(20..300))).await;
        self.follow_control()?;
        let keys = &self.options.keys;
        let key =
            if self.rng.gen_bool(0.5) { keys[0].clone() } else { keys[self.rng.gen_range(0..keys.len())].clone() };
        let lease_ms = self.options.lease_ms;
        let wait_ms = if self.rng.gen_bool(0.5) { 0 } else { self.rng.gen_range(200..3_000) };
        let Ok(grant) = self.lock.acquire(&key, lease_ms, wait_ms).await else { return Ok(()) };
        let holder = grant.holder;
        if !self.work(&key, lease_ms).await? {
            return Ok(());
        }
        // The worker-side check: a careful worker does not write once it knows
        // its lease is gone. It cannot stop a stall between this check and the
        // write; only the resource's token check can.
        let Some(token) = self.lock.belief(&key) else {
            self.lock.record_event(EventKind::BeliefEnd {
                client: self.options.client,
                key: key.clone(),
                token: grant.token,
            });
            return Ok(());
        };
        self.stall_maybe(lease_ms, &key, token).await?;
        let path = if self.rng.gen_bool(0.5) { WritePath::Status } else { WritePath::Ledger };
        self.write(&key, token, holder, path).await?;
        // Release, or three times in ten revoke the lease by token, as the
        // simulator's workers do (the belief ends before the request
        // leaves); a refusal or no answer changes nothing here.
        if self.rng.gen_bool(0.3) {
            let _ = self.lock.revoke(&key).await;
        } else {
            let _ = self.lock.release(&key).await;
        }
        Ok(())
    }

    /// Works on the job; a long one renews its lease as it goes. Returns
    /// false when a renewal said the lock is gone.
    async fn work(&mut self, key: &Key, lease_ms: u64) -> Result<bool, String> {
        let long = self.rng.gen_bool(0.25);
        let work_ms = if long {
            self.rng.gen_range(lease_ms * 8 / 10..lease_ms * 3)
        } else {
            self.rng.gen_range(lease_ms / 10..lease_ms * 6 / 10)
        };
        let renews = long && self.rng.gen_bool(0.8);
        let chunk_ms = if renews { (lease_ms * RENEW_EVERY_PERMILLE / 1_000).max(1) } else { work_ms.max(1) };
        let mut left_ms = work_ms;
        for _ in 0..=work_ms / chunk_ms {
            let slice_ms = left_ms.min(chunk_ms);
            tokio::time::sleep(Duration::from_millis(slice_ms)).await;
            self.follow_control()?;
            left_ms -= slice_ms;
            if left_ms == 0 {
                break;
            }
            if renews {
                match self.lock.renew(key).await {
                    Ok(_) => {}
                    Err(crate::client::LockError::NotHeld) => return Ok(false),
                    Err(_) => {}
                }
            }
        }
        Ok(true)
    }

    /// A stall between the lease check and the write: the run's armed one,
    /// if this worker takes it, or one the workload draws.
    async fn stall_maybe(&mut self, lease_ms: u64, key: &Key, token: Token) -> Result<(), String> {
        let armed = self.take_armed_stall();
        let how = armed.map_or("drawn".to_string(), |(_, number)| format!("armed {number}"));
        let armed = armed.map(|(ms, _)| ms);
        let drawn = self.options.stall_ms_max.and_then(|longest| {
            self.rng.gen_bool(0.25).then(|| self.rng.gen_range(lease_ms.min(longest) / 2..=longest.max(1)))
        });
        let Some(ms) = armed.or(drawn) else { return Ok(()) };
        let client = self.options.client;
        match &self.options.control {
            Some(dir) => {
                let note = dir.join(format!("stopped-{}", client.0));
                let text = format!("{ms}\n{how}\n{}\n{key}\n", token.0);
                std::fs::write(&note, text).map_err(|e| format!("{}: {e}", note.display()))?;
                self.lock.record_event(EventKind::Stalled { client, ms });
                // Stopped here until the runner's SIGCONT.
                nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP)
                    .map_err(|e| format!("cannot stop myself: {e}"))?;
            }
            None => {
                self.lock.record_event(EventKind::Stalled { client, ms });
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
        }
        self.follow_control()
    }

    /// Claims the run's armed stall, if there is one and no other worker
    /// took it first: its length, and its number (0 where the file names none).
    fn take_armed_stall(&self) -> Option<(u64, u64)> {
        let dir = self.options.control.as_ref()?;
        let taken = dir.join(format!("stall-taken-{}", self.options.client.0));
        std::fs::rename(dir.join("stall-armed"), &taken).ok()?;
        let text = std::fs::read_to_string(&taken).ok()?;
        let _ = std::fs::remove_file(&taken);
        let mut lines = text.lines();
        let ms = lines.next()?.trim().parse().ok()?;
        Some((ms, lines.next().and_then(|number| number.trim().parse().ok()).unwrap_or(0)))
    }

    /// One write under `token`, retried with the same request id while the
    /// resource is restored and reads its floor.
    async fn write(&mut self, key: &Key, token: Token, holder: Holder, path: WritePath) -> Result<(), String> {
        self.writes += 1;
        let client = self.options.client;
        let request = RequestId((self.options.incarnation << 32) | (1 << 31) | self.writes);
        let value = format!("checked by {client} with {token}");
        let write = Write { key: key.clone(), token, holder, request, path, value };
        self.lock.record_event(EventKind::WriteSent { client, request, key: key.clone(), token, path });
        let mut verdict = WriteVerdict::Unavailable;
        let mut silent = 0;
        for _ in 0..=WRITE_UNAVAILABLE_MAX + WRITE_SILENT_MAX {
            // Cut off from the resource (`links-N`): the write and its answer
            // are lost, as in the simulator; after a few the worker gives up
            // on it, and the history has no answer.
            if self.lock.resource_cut() {
                silent += 1;
                if silent >= WRITE_SILENT_MAX {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(REQUEST_TIMEOUT_MS)).await;
                continue;
            }
            verdict = match self.resource.write(&write).await {
                Ok(verdict) => verdict,
                // The database's write lock held past the busy timeout (an outage): the same write again.
                Err(error) if error.is_busy() => WriteVerdict::Unavailable,
                Err(error) => return Err(format!("resource {}: {error}", self.options.resource)),
            };
            if verdict != WriteVerdict::Unavailable {
                break;
            }
            tokio::time::sleep(WRITE_UNAVAILABLE_RETRY).await;
        }
        self.lock.record_event(EventKind::WriteDone { client, request, key: key.clone(), token, path, verdict });
        Ok(())
    }

    /// Takes a new clock mapping from the control directory, if one was written.
    fn follow_control(&mut self) -> Result<(), String> {
        let Some(dir) = &self.options.control else { return Ok(()) };
        let Some(map) = read_clock(dir, self.options.client) else { return Ok(()) };
        if Some(map) != self.clock_seen {
            self.clock_seen = Some(map);
            self.lock.set_clock(map)?;
        }
        Ok(())
    }
}

/// The clock file of `client` in `dir`, if it holds a mapping.
fn read_clock(dir: &Path, client: ClientId) -> Option<ClockMap> {
    std::fs::read_to_string(dir.join(format!("clock-{}", client.0))).ok()?.trim().parse().ok()
}
