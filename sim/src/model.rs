//! The model: everything besides the seed that decides a run (CLI.md, "Model file").

use fencelock::Variant;
use serde::{Deserialize, Serialize};

/// The fastest real drift a model may draw, parts per million: a clock
/// runs between half and one and a half times true time.
pub const DRIFT_PPM_REAL_MAX: u64 = 500_000;

/// With `drift_beyond_bound`, a beyond clock drifts up to this many times the
/// assumed bound (or [`BEYOND_BOUND_BASE_PPM_MIN`], if the bound is smaller).
pub const BEYOND_BOUND_FACTOR_MAX: u64 = 20;

/// A zero or tiny bound still needs a visible excess: beyond-bound draws count from 50 ppm at least.
pub const BEYOND_BOUND_BASE_PPM_MIN: u64 = 50;

/// The longest stall between a worker's lease check and its write (one hour).
pub const STALL_MS_MAX: u64 = 3_600_000;

/// A run's model. Every key is optional in a model file; missing keys take
/// the standard model's value. Unknown keys are an input error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Model {
    /// Raft servers (odd, 1..=9).
    pub nodes: u8,
    /// Workers competing for locks.
    pub clients: u32,
    /// Lock keys; the first is `invoice/B-1042`.
    pub keys: u32,
    /// Lease length clients ask for.
    pub lease_ms: u64,
    /// Length of the safety phase (faults on).
    pub safety_ms: u64,
    /// Length of the liveness phase (faults healed).
    pub liveness_ms: u64,
    /// Bound on clock drift the protocol assumes, parts per million: what
    /// the leases' safety margin is computed with, and what the checker
    /// judges a clock against.
    pub drift_ppm_max: u64,
    /// How far the clocks really drift (extension of CLI.md): every clock
    /// draws its rate from `-drift_ppm_real_max..=drift_ppm_real_max`.
    /// Absent, it is `drift_ppm_max` (the clocks keep the assumed bound);
    /// above it, clocks leave the bound the protocol assumes. At most
    /// [`DRIFT_PPM_REAL_MAX`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_ppm_real_max: Option<u64>,
    /// The older way to leave the bound: one or two clocks (drawn per seed)
    /// drift 3 to 20 times `drift_ppm_max` (times 50 ppm for a smaller
    /// bound), the others draw within `drift_ppm_real_max`.
    pub drift_beyond_bound: bool,
    /// Longest process pause.
    pub pause_ms_max: u64,
    pub loss_rate: f64,
    pub dup_rate: f64,
    pub partitions: bool,
    pub crashes: bool,
    pub restores: bool,
    pub clock_steps: bool,
    pub corruption: bool,
    /// The token the cluster starts above (40 makes the first grant 41).
    pub token_floor: u64,
    /// Process pauses of servers and workers (extension of CLI.md): the
    /// fault plan's `pause` events, up to `pause_ms_max`.
    pub pauses: bool,
    /// A worker's stall between its lease check and its write (extension of
    /// CLI.md): a quarter of the writes stall (worker A's GC pause); false:
    /// no worker stalls there. Independent of `pauses`.
    pub stalls: bool,
    /// Longest such stall, in ms (extension of CLI.md); a stall lasts
    /// `min(lease_ms, stall_ms_max) / 2..=stall_ms_max`. Absent, it is
    /// `2 * lease_ms + min(pause_ms_max, lease_ms) - 1` (5,999 in the
    /// standard model), the range of the stalls before the key existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall_ms_max: Option<u64>,
    /// Crashes and restarts of the protected resource (extension of CLI.md).
    pub resource_crashes: bool,
    /// The operator backs the protected resource up now and then and later
    /// restores it from a backup, highest tokens and data together
    /// (extension of CLI.md).
    pub resource_restores: bool,
    /// With `crashes`: stretches in which every new leader is struck down
    /// (crashed, or cut off) within milliseconds of taking office or as it
    /// first applies (extension of CLI.md; `world/churn.rs`).
    pub leader_churn: bool,
    /// With `crashes`: stretches in which a server is crashed in the
    /// instant it sends a vote grant or an acknowledgement of appended
    /// entries, back 1-300 ms later (extension of CLI.md; `world/acks.rs`).
    /// Absent, off in a plain run, and swarm draws it like a family the
    /// model enables; `false` keeps it off under swarm too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_crashes: Option<bool>,
    /// Stretches in which a leader that has just renewed a client's lease is
    /// cut off from the other servers with that client and paused 1-2.6 s
    /// (extension of CLI.md; `world/renews.rs`). Absent, off in a plain run;
    /// swarm draws it when the model has `partitions`; `false` keeps it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renew_strikes: Option<bool>,
    /// Stretches in which a follower forgets entries it acknowledged just
    /// as the leader commits them (restored from a stale backup, or crashed
    /// inside a slowed fsync), with a minority cut off and the leader
    /// unplugged (extension of CLI.md; `world/amnesia.rs`). Absent, off in a
    /// plain run; swarm draws it when the model has `crashes` or `restores`;
    /// `false` keeps it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_amnesia: Option<bool>,
    /// Stretches in which a leader that has just freed a key a client waits
    /// for there is paused for longer than a lease, right after it sends the
    /// waiter's Grant (extension of CLI.md; `world/grants.rs`). Absent, off
    /// in a plain run; swarm draws it when the model has `pauses`; `false`
    /// keeps it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant_strikes: Option<bool>,
    /// Stretches in which an election is split around one voter: the
    /// pre-candidate cut off from all but a bare majority, the voter crashed
    /// just after its vote and the candidate cut off (extension of CLI.md;
    /// `world/votes.rs`). Absent, off in a plain run; swarm draws it when the
    /// model has `crashes`; `false` keeps it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vote_strikes: Option<bool>,
    /// Stretches in which the resource crashes just after it accepts a
    /// takeover write (a higher token on a key whose last lock expired)
    /// (extension of CLI.md; `world/fences.rs`). Absent, off in a plain run;
    /// swarm draws it when the model has `resource_crashes`; `false` keeps it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence_strikes: Option<bool>,
    /// Stretches in which a holder's renewal is held on the wire to the
    /// leader until just past the lease's end on the leader's clock, so it
    /// arrives as the expiry is decided (extension of CLI.md;
    /// `world/late_renewals.rs`). Absent, off in a plain run; swarm draws it
    /// when the model has `partitions`; `false` keeps it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_renewals: Option<bool>,
    /// Stretches in which the cluster is walked through Raft's figure 8: a
    /// leader stranded, its successor unplugged as it takes office, the
    /// first leader struck as it returns to office, the successor back
    /// (extension of CLI.md; `world/figure8.rs`). Absent, off in a plain
    /// run; swarm draws it when the model has `partitions`; `false` keeps it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figure8_strikes: Option<bool>,
    /// Servers sleep through the ticks that would only advance Raft's
    /// timers and make them up when they wake (extension of CLI.md;
    /// `nodes/server.rs`): the same protocol in fewer wake-ups, so more
    /// seeds a second. Absent, on; `false` wakes a server at every tick
    /// (other schedules for the same seed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tickless: Option<bool>,
    /// Raft entries per append message (extension of CLI.md); 1 makes a new
    /// leader's first entries travel one by one.
    pub entries_per_message_max: u32,
    /// Raft appends in flight per follower (extension of CLI.md); 1 makes
    /// the leader wait for each acknowledgement before the next append.
    pub inflight_max: u32,
    /// Raft compacts its log every this many applied entries (extension of
    /// CLI.md); absent, core's standard (256). Small values make a follower
    /// that was down or cut off for a moment catch up through a snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_entries: Option<u32>,
    /// Waiters queued per key on a leader (extension of CLI.md); one more is
    /// turned away `Unavailable`. Absent, core's standard (8), which the
    /// standard model's four workers never fill; swarm draws 1 or 2 in some seeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_queue_max: Option<u32>,
    /// Jobs each worker does before it idles (extension of
    /// CLI.md); absent, workers never stop. `shrink` sets it to cut a story short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs_max: Option<u32>,
    /// How long a worker thinks before each job, at most (extension of
    /// CLI.md): drawn from `0..=think_ms_max`. Absent, 20-300 ms. With
    /// `work_ms_max`, 0 makes workers ask back to back, as a load does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think_ms_max: Option<u64>,
    /// How long a worker holds a lock before its write, at most (extension
    /// of CLI.md): drawn from `0..=work_ms_max`, no job renewing. Absent, a
    /// tenth to six tenths of a lease, and a quarter of the jobs longer than
    /// a lease (renewing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_ms_max: Option<u64>,
    /// The fsync latency of the servers' disks (extension of CLI.md); absent,
    /// 1 ms (madsim's shortest sleep, and every packet's shortest wait too).
    /// Real disks take milliseconds where a LAN's round trip takes tens of
    /// microseconds: raised, it restores that ratio for what depends on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_fsync_ms: Option<u64>,
    /// How often every fault family strikes, relative to the standard model
    /// (extension of CLI.md): 0.25 stretches the gaps between a family's
    /// episodes fourfold. Swarm leaves it at this value (drawing it lower did
    /// not help, README, "Swarm testing").
    pub fault_rate: f64,
    /// Swarm testing (extension of CLI.md): each seed draws which fault
    /// families are on and how hard, the cluster size and the batching, with
    /// this model's values as the limits (`faults/swarm.rs`).
    pub swarm: bool,
    /// With `swarm`: each coin's chance of heads in thousandths, as
    /// `crashes:700,pauses:300` (a coin not named is fair). A steered hunt
    /// (`hunt --steer`) sets it per seed; a replay line carries it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swarm_bias: Option<crate::faults::swarm::Bias>,
    /// Raft heartbeat interval (extension of CLI.md), a multiple of the 10 ms tick.
    pub heartbeat_ms: u64,
    /// Raft election timeout, drawn per election from
    /// `[election_ms_min, election_ms_max)` (extension of CLI.md), multiples of the tick.
    pub election_ms_min: u64,
    pub election_ms_max: u64,
    /// The protocol variant; set from `--variant` or a scenario's `variant`, not from a model file.
    #[serde(skip)]
    pub variant: Variant,
}

impl Default for Model {
    fn default() -> Model {
        Model {
            nodes: 5,
            clients: 4,
            keys: 2,
            lease_ms: 2_000,
            safety_ms: 30_000,
            liveness_ms: 10_000,
            drift_ppm_max: 500,
            drift_ppm_real_max: None,
            drift_beyond_bound: false,
            pause_ms_max: 5_000,
            loss_rate: 0.02,
            dup_rate: 0.01,
            partitions: true,
            crashes: true,
            restores: true,
            clock_steps: true,
            corruption: true,
            token_floor: 40,
            pauses: true,
            stalls: true,
            stall_ms_max: None,
            resource_crashes: true,
            resource_restores: true,
            leader_churn: true,
            ack_crashes: None,
            renew_strikes: None,
            ack_amnesia: None,
            grant_strikes: None,
            vote_strikes: None,
            fence_strikes: None,
            late_renewals: None,
            figure8_strikes: None,
            tickless: None,
            entries_per_message_max: 64,
            inflight_max: 4,
            snapshot_entries: None,
            wait_queue_max: None,
            jobs_max: None,
            think_ms_max: None,
            work_ms_max: None,
            server_fsync_ms: None,
            fault_rate: 1.0,
            swarm: false,
            swarm_bias: None,
            heartbeat_ms: 40,
            election_ms_min: 100,
            election_ms_max: 200,
            variant: Variant::Default,
        }
    }
}

/// What values a model key takes (checked by [`Model::validate`], printed by `fencesim model`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Valid {
    Bool,
    /// An integer in `min..=max`.
    Int {
        min: u64,
        max: u64,
    },
    /// A number in `min..=max` (NaN is out of range).
    Float {
        min: f64,
        max: f64,
    },
    /// Text in a form of its own, said in `also`.
    Text,
}

/// One model key: its name, the values it takes, and what it means. The
/// default is the standard model's value ([`Model::default`]).
#[derive(Clone, Copy, Debug)]
pub struct KeyInfo {
    pub name: &'static str,
    pub valid: Valid,
    /// Rules besides the range, as `fencesim model` prints them (checked in [`Model::validate`]).
    pub also: &'static str,
    pub meaning: &'static str,
}

const DAY_MS: u64 = 86_400_000;

const fn int(name: &'static str, min: u64, max: u64, meaning: &'static str) -> KeyInfo {
    KeyInfo { name, valid: Valid::Int { min, max }, also: "", meaning }
}

const fn flag(name: &'static str, meaning: &'static str) -> KeyInfo {
    KeyInfo { name, valid: Valid::Bool, also: "", meaning }
}

const fn rate(name: &'static str, min: f64, max: f64, meaning: &'static str) -> KeyInfo {
    KeyInfo { name, valid: Valid::Float { min, max }, also: "", meaning }
}

const fn with(key: KeyInfo, also: &'static str) -> KeyInfo {
    KeyInfo { also, ..key }
}

/// Every model key, in the order `fencesim model` prints them. A new key is
/// a field of [`Model`], its default, and one row here (a test checks the
/// rows and the fields agree).
pub const KEYS: &[KeyInfo] = &[
    with(int("nodes", 1, 9, "Raft servers."), "odd"),
    int("clients", 0, 64, "Workers competing for locks (0: the cluster idles)."),
    int("keys", 1, 64, "Lock keys: invoice/B-1042, then invoice/B-1043, ..."),
    int("lease_ms", 100, 600_000, "Lease length workers ask for."),
    int("safety_ms", 0, DAY_MS, "Length of the safety phase (faults on), simulated ms."),
    with(
        int("liveness_ms", 0, DAY_MS, "Length of the liveness phase (faults healed); 0: no liveness phase."),
        "0, or at least 1000",
    ),
    int(
        "drift_ppm_max",
        0,
        100_000,
        "The clock drift bound the protocol assumes (leases and checker), parts per million.",
    ),
    int(
        "drift_ppm_real_max",
        0,
        DRIFT_PPM_REAL_MAX,
        "How far the clocks really drift, ppm; absent, drift_ppm_max. Above it, overlaps are lease exposures.",
    ),
    with(
        flag(
            "drift_beyond_bound",
            "One or two clocks drift 3-20 times the bound, the others within drift_ppm_real_max.",
        ),
        "with true, drift_ppm_max at most 25000",
    ),
    int("pause_ms_max", 0, DAY_MS, "Longest process pause; also sets the default stall_ms_max."),
    rate("loss_rate", 0.0, 0.5, "Per-packet loss probability during the safety phase."),
    rate("dup_rate", 0.0, 0.5, "Per-packet duplication probability during the safety phase."),
    flag("partitions", "The network family: partitions, one-way cuts, leader isolation, workers cut off."),
    flag("crashes", "Server crashes and restarts, and the disk family (slow and dying disks, power losses)."),
    flag("restores", "Single-node restores from stale backups, and whole-cluster restores."),
    flag("clock_steps", "Clock steps and drift changes during the run (initial drift is always drawn)."),
    flag("corruption", "1% of packets get one bit flipped (detected by the checksum and dropped)."),
    // Tokens from 2^32 up belong to the restore epochs (`Token::EPOCH_SHIFT`):
    // a floor there would be taken over by the first restore's, and tokens reissued.
    int("token_floor", 0, 1 << 31, "The token the cluster starts above (40 makes the first grant 41)."),
    flag("pauses", "Process pauses (GC stalls) of servers and workers: the fault plan's pause events."),
    flag("stalls", "A quarter of a worker's writes stall between its lease check and the write (worker A's GC pause)."),
    int("stall_ms_max", 1, STALL_MS_MAX, "Longest such stall; absent, 2*lease_ms + min(pause_ms_max, lease_ms) - 1."),
    flag("resource_crashes", "Crashes and restarts of the protected resource."),
    flag(
        "resource_restores",
        "Backups of the protected resource and restores from them (its highest tokens go back with the data).",
    ),
    flag("leader_churn", "With crashes: stretches in which every new leader is struck down as it takes office."),
    flag(
        "ack_crashes",
        "With crashes: a server crashes just after granting a vote or acknowledging entries, back 1-300 ms later; \
         absent, off, but drawn by swarm.",
    ),
    flag(
        "renew_strikes",
        "A leader that has just renewed a client's lease is cut off with that client and paused 1-2.6 s; \
         absent, off, but drawn by swarm (with partitions).",
    ),
    flag(
        "ack_amnesia",
        "A follower forgets entries it acknowledged as the leader commits them (restored from a backup, or crashed \
         inside a slowed fsync), a minority cut off and the leader unplugged; absent, off, but drawn by swarm.",
    ),
    flag(
        "grant_strikes",
        "A leader that has just freed a key a client waits for there is paused for longer than a lease, as the \
         waiter's Grant leaves for its followers; absent, off, but drawn by swarm (with pauses).",
    ),
    flag(
        "vote_strikes",
        "With crashes: an election split around one voter (the pre-candidate cut off from all but a bare majority, \
         the voter crashed just after its vote, the candidate cut off); absent, off, but drawn by swarm.",
    ),
    flag(
        "fence_strikes",
        "The resource crashes just after it accepts a takeover write (a higher token on a key whose last lock \
         expired), back 5-100 ms later; absent, off, but drawn by swarm (with resource_crashes).",
    ),
    flag(
        "late_renewals",
        "A holder's renewal is held on the wire to the leader until just past the lease's end there, so it \
         arrives as the expiry is decided; absent, off, but drawn by swarm (with partitions).",
    ),
    flag(
        "figure8_strikes",
        "Raft's figure 8 walked step by step: a leader stranded, its successor unplugged as it takes office, the \
         first leader struck as it returns to office; absent, off, but drawn by swarm (with partitions).",
    ),
    flag(
        "tickless",
        "Servers sleep through ticks that would only advance Raft's timers and make them up on waking: \
         the same protocol in fewer wake-ups; absent, on; false wakes a server at every tick (other schedules).",
    ),
    int("entries_per_message_max", 1, 1_024, "Raft entries per append message."),
    int("inflight_max", 1, 64, "Raft appends in flight per follower."),
    int(
        "snapshot_entries",
        1,
        1_000_000,
        "Raft compacts its log every this many applied entries; absent, 256 (core's standard).",
    ),
    int(
        "wait_queue_max",
        1,
        fencelock::service::WAITERS_PER_KEY_MAX as u64,
        "Waiters a leader queues per key; one more is turned away Unavailable. Absent, 8 (core's standard).",
    ),
    int("jobs_max", 1, 1_000_000, "Jobs each worker does before it idles; absent, workers never stop."),
    int("think_ms_max", 0, 60_000, "A worker thinks 0..=this many ms before each job; absent, 20-300 ms."),
    int(
        "work_ms_max",
        0,
        600_000,
        "A worker holds a lock 0..=this many ms before its write, never renewing; absent, 0.1-0.6 lease, or longer.",
    ),
    int("server_fsync_ms", 1, 1_000, "fsync latency of the servers' disks; absent, 1 ms (madsim's shortest sleep)."),
    rate("fault_rate", 0.01, 10.0, "How often every fault family strikes, relative to the standard model."),
    flag("swarm", "Swarm testing: each seed draws its configuration with this model's values as the limits."),
    KeyInfo {
        name: "swarm_bias",
        valid: Valid::Text,
        also: "coin:thousandths, comma-separated, with swarm = true",
        meaning:
            "Swarm's coins weighted (heads in this many of 1000); absent, all fair. hunt --steer sets it per seed.",
    },
    // At most 990: the election timeout must fit twice the heartbeat below 2000.
    with(int("heartbeat_ms", 10, 990, "Raft heartbeat interval."), "a multiple of the 10 ms tick"),
    with(
        int("election_ms_min", 20, 1_990, "Raft election timeouts are drawn from [election_ms_min, election_ms_max)."),
        "a multiple of the tick, at least twice heartbeat_ms",
    ),
    with(
        int("election_ms_max", 30, 2_000, "Upper end (exclusive) of the election timeout."),
        "a multiple of the tick, above election_ms_min",
    ),
];

impl KeyInfo {
    /// The row of a key name.
    pub fn named(name: &str) -> Option<&'static KeyInfo> {
        KEYS.iter().find(|key| key.name == name)
    }

    /// The values it takes, as people read them: `1..=9, odd`.
    pub fn valid_text(&self) -> String {
        let range = match self.valid {
            Valid::Bool => "true or false".to_string(),
            Valid::Int { min, max } => format!("{min}..={max}"),
            Valid::Float { min, max } => format!("{min:?}..={max:?}"),
            Valid::Text => return self.also.to_string(),
        };
        if self.also.is_empty() {
            range
        } else {
            format!("{range}, {}", self.also)
        }
    }

    /// A value worth writing for a key absent from the standard model, as
    /// `fencesim model` shows it commented out: what absence means where it
    /// means a number (so uncommenting it changes nothing until edited), a
    /// flag turned on, a job cap a run reaches.
    pub fn example(&self) -> String {
        let standard = Model::default();
        match self.name {
            "drift_ppm_real_max" => standard.drift_ppm_real().to_string(),
            "stall_ms_max" => standard.stall_ms_longest().to_string(),
            "snapshot_entries" => fencelock::raft::SNAPSHOT_THRESHOLD_ENTRIES_STANDARD.to_string(),
            "jobs_max" => "20".to_string(),
            "swarm_bias" => "\"crashes:700,pauses:300\"".to_string(),
            _ => match self.valid {
                Valid::Bool => "true".to_string(),
                Valid::Int { min, .. } => min.to_string(),
                Valid::Float { min, .. } => format!("{min:?}"),
                Valid::Text => "\"\"".to_string(),
            },
        }
    }

    /// Checks a value (as the model serializes to JSON) against the range.
    fn check(&self, value: &serde_json::Value) -> Result<(), String> {
        let name = self.name;
        let fits = match self.valid {
            Valid::Bool => value.is_boolean(),
            Valid::Int { min, max } => value.as_u64().is_some_and(|v| (min..=max).contains(&v)),
            // NaN serializes as null, which fits no range.
            Valid::Float { min, max } => value.as_f64().is_some_and(|v| (min..=max).contains(&v)),
            // Its form is checked as it is read.
            Valid::Text => value.is_string(),
        };
        if fits {
            return Ok(());
        }
        let got = if value.is_null() { "NaN".to_string() } else { value.to_string() };
        Err(format!("model key `{name}` must be in {}, got {got}", self.valid_text()))
    }
}

/// The closest name of `known` to `name`, if it is close enough to be a
/// typo: a name that contains it (`pause_ms` → `pause_ms_max`), else the most
/// similar one.
pub fn did_you_mean<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let known: Vec<&str> = known.into_iter().collect();
    let containing = known.iter().filter(|k| name.len() >= 3 && k.contains(name)).min_by_key(|k| k.len());
    if let Some(close) = containing {
        return Some(close);
    }
    known
        .into_iter()
        .map(|candidate| (strsim::jaro_winkler(name, candidate), candidate))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// A variant by name; an unknown name gets the closest variant as a "did
/// you mean", and the known names with the closest first.
pub fn parse_variant(name: &str) -> Result<Variant, String> {
    name.parse().map_err(|_: String| {
        let mut known: Vec<&str> = fencelock::VARIANTS.iter().map(|info| info.name).collect();
        let close = did_you_mean(name, known.iter().copied());
        if let Some(close) = close {
            known.retain(|k| *k != close);
            known.insert(0, close);
        }
        let hint = close.map(|c| format!("; did you mean `{c}`?")).unwrap_or_default();
        format!("unknown variant `{name}`{hint} (known: {})", known.join(", "))
    })
}

impl Model {
    /// The model a variant runs on when no `--model` is given: the standard
    /// model with the keys the variant declares (`VariantInfo::model`).
    pub fn declared(variant: Variant) -> Model {
        let info = variant.info();
        let mut model = Model::from_toml(info.model, info.name).expect("a variant's declared model is valid");
        model.variant = variant;
        model
    }

    /// Checks every key against its row of [`KEYS`], then the rules that
    /// tie keys together; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        let values = match serde_json::to_value(self).expect("a model always serializes") {
            serde_json::Value::Object(values) => values,
            _ => unreachable!("a model serializes as a map"),
        };
        for key in KEYS {
            // Absent: an optional key left out (`jobs_max`).
            if let Some(value) = values.get(key.name) {
                key.check(value)?;
            }
        }
        if self.nodes.is_multiple_of(2) {
            return Err(format!("model key `nodes` must be odd and in 1..=9, got {}", self.nodes));
        }
        // 0 is a run without a liveness phase (a shrunk safety scenario ends
        // just after its violation); a phase shorter than a second proves nothing.
        if self.liveness_ms != 0 && self.liveness_ms < 1_000 {
            return Err(format!("model key `liveness_ms` must be 0 or at least 1000, got {}", self.liveness_ms));
        }
        if self.swarm_bias.is_some() && !self.swarm {
            return Err("model key `swarm_bias` weights swarm's coins: it needs `swarm = true`".to_string());
        }
        self.validate_drift()?;
        self.validate_raft_timing()
    }

    /// The assumed bound, the real range, and the older `drift_beyond_bound`:
    /// every rate a clock can draw stays physical (a clock moves forward).
    fn validate_drift(&self) -> Result<(), String> {
        if self.drift_ppm_max > 100_000 {
            return Err(format!("model key `drift_ppm_max` must be at most 100000, got {}", self.drift_ppm_max));
        }
        if let Some(real) = self.drift_ppm_real_max {
            if real > DRIFT_PPM_REAL_MAX {
                return Err(format!("model key `drift_ppm_real_max` must be at most {DRIFT_PPM_REAL_MAX}, got {real}"));
            }
        }
        let beyond_max = BEYOND_BOUND_FACTOR_MAX * self.drift_ppm_max.max(BEYOND_BOUND_BASE_PPM_MIN);
        if self.drift_beyond_bound && beyond_max > DRIFT_PPM_REAL_MAX {
            return Err(format!(
                "model key `drift_ppm_max` must be at most {} with `drift_beyond_bound = true` (its clocks drift up to \
                 {BEYOND_BOUND_FACTOR_MAX} times the bound, at most {DRIFT_PPM_REAL_MAX} ppm), got {}; to set how far \
                 clocks really drift, use `drift_ppm_real_max`",
                DRIFT_PPM_REAL_MAX / BEYOND_BOUND_FACTOR_MAX,
                self.drift_ppm_max
            ));
        }
        Ok(())
    }

    /// How far the clocks really drift: `drift_ppm_real_max`, or the assumed bound.
    pub fn drift_ppm_real(&self) -> u64 {
        self.drift_ppm_real_max.unwrap_or(self.drift_ppm_max)
    }

    /// The waiters a leader queues per key: `wait_queue_max`, or core's standard.
    pub fn wait_queue(&self) -> u32 {
        self.wait_queue_max.unwrap_or(fencelock::service::WAIT_QUEUE_MAX_STANDARD as u32)
    }

    /// The longest stall between a worker's lease check and its write (see `stall_ms_max`).
    pub fn stall_ms_longest(&self) -> u64 {
        self.stall_ms_max.unwrap_or(2 * self.lease_ms + self.pause_ms_max.min(self.lease_ms) - 1)
    }

    /// Heartbeat and election timeouts: multiples of the tick, the heartbeat
    /// well inside the election timeout, which stays below the liveness bound.
    fn validate_raft_timing(&self) -> Result<(), String> {
        let tick = fencelock::raft::TICK_MS_STANDARD;
        for (name, ms) in [
            ("heartbeat_ms", self.heartbeat_ms),
            ("election_ms_min", self.election_ms_min),
            ("election_ms_max", self.election_ms_max),
        ] {
            if ms == 0 || ms % tick != 0 {
                return Err(format!("model key `{name}` must be a positive multiple of the {tick} ms tick, got {ms}"));
            }
        }
        if self.election_ms_min < 2 * self.heartbeat_ms {
            return Err(format!(
                "model key `election_ms_min` must be at least twice `heartbeat_ms` ({}), got {}",
                self.heartbeat_ms, self.election_ms_min
            ));
        }
        if self.election_ms_max <= self.election_ms_min {
            return Err(format!(
                "model key `election_ms_max` must be above `election_ms_min` ({}) and at most 2000, got {}",
                self.election_ms_min, self.election_ms_max
            ));
        }
        Ok(())
    }

    /// Parses a model file's text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Model, String> {
        let model: Model = toml::from_str(text).map_err(|e| toml_error(origin, text, &e))?;
        model.validate().map_err(|e| format!("{origin}: {e}"))?;
        Ok(model)
    }

    /// This model with `key=value` settings (`--set`) applied in order,
    /// checked like a model file's keys.
    pub fn with_settings(&self, settings: &[String]) -> Result<Model, String> {
        if settings.is_empty() {
            return Ok(self.clone());
        }
        let mut keys = Vec::new();
        for setting in settings {
            let (name, value) =
                setting.split_once('=').ok_or_else(|| format!("--set wants key=value, got `{setting}`"))?;
            let name = name.trim();
            if KeyInfo::named(name).is_none() {
                return Err(format!("--set {setting}: {}", unknown_key(name, KEYS.iter().map(|k| k.name))));
            }
            let value = match toml::from_str::<toml::Table>(&format!("value = {}", value.trim())) {
                Ok(table) => table["value"].clone(),
                // A key of text takes it bare (`--set swarm_bias=crashes:700`).
                Err(_) if KeyInfo::named(name).is_some_and(|key| key.valid == Valid::Text) => {
                    toml::Value::String(value.trim().to_string())
                }
                Err(_) => return Err(format!("--set {setting}: the value is not a number or true/false")),
            };
            keys.push((name.to_string(), value, setting));
        }
        let model = self
            .with_keys(keys.iter().map(|(name, value, setting)| (name.as_str(), value, format!("--set {setting}"))))?;
        model.validate().map_err(|e| format!("--set: {e}"))?;
        Ok(model)
    }

    /// This model with model keys set over it in order, each checked as a
    /// model file's key (an unknown name gets a "did you mean", a value of
    /// the wrong type is named), not yet validated as a whole: the one
    /// parser of keys given outside a model file (`--set`, a sweep's
    /// `[model]` and axes). Each key comes with how errors name it.
    pub fn with_keys<'a>(
        &self,
        keys: impl IntoIterator<Item = (&'a str, &'a toml::Value, String)>,
    ) -> Result<Model, String> {
        let mut table = toml::Table::try_from(self).map_err(|e| format!("the model does not serialize: {e}"))?;
        for (name, value, what) in keys {
            if KeyInfo::named(name).is_none() {
                return Err(format!("{what}: {}", unknown_key(name, KEYS.iter().map(|k| k.name))));
            }
            table.insert(name.to_string(), value.clone());
            // A value of the wrong type is named with its key.
            Model::deserialize(table.clone()).map_err(|e| format!("{what}: {}", one_line(e.message())))?;
        }
        let model = Model::deserialize(table).map_err(|e| one_line(e.message()))?;
        Ok(Model { variant: self.variant, ..model })
    }

    /// The standard model as a commented TOML file (`fencesim model`): every
    /// key with its default, the values it takes and what it means.
    pub fn commented_toml() -> String {
        let defaults = toml::Table::try_from(Model::default()).expect("the standard model serializes");
        let mut out = String::from(
            "# The standard model of fencesim (`fencesim model`): every key, its default,\n\
             # the values it takes and what it means. Every key is optional in a model\n\
             # file (`--model FILE`); a missing key takes the value below, and\n\
             # `--set key=value` overrides one after the file.\n",
        );
        for key in KEYS {
            out.push_str(&format!("\n# {}\n# valid: {}\n", key.meaning, key.valid_text()));
            match defaults.get(key.name) {
                Some(value) => out.push_str(&format!("{} = {value}\n", key.name)),
                None => {
                    out.push_str(&format!("# absent by default\n# {} = {}\n", key.name, key.example()));
                }
            }
        }
        out
    }

    /// The name of lock key `i`; the first is the invoice of seed 000.
    pub fn key_name(i: u32) -> String {
        if i == 0 {
            "invoice/B-1042".to_string()
        } else {
            format!("invoice/B-{}", 1042 + i)
        }
    }
}

/// A TOML error as a compiler prints one: `FILE:LINE:COL: message` on the
/// first line, then the line of the file with a caret under the place. An
/// unknown key gets a "did you mean".
pub fn toml_error(origin: &str, text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim();
    let message = match unknown_field(message) {
        Some((name, expected)) => unknown_key(name, expected),
        None => message.to_string(),
    };
    let Some(span) = error.span() else { return format!("{origin}: {message}") };
    let start = span.start.min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line_text = text[line_start..line_end].trim_end_matches('\r');
    let line = text[..start].matches('\n').count() + 1;
    let column = text[line_start..start].chars().count() + 1;
    let width = text[start..span.end.clamp(start, line_end)].chars().count().max(1);
    let gutter = " ".repeat(line.to_string().len());
    format!(
        "{origin}:{line}:{column}: {message}\n{gutter} |\n{line} | {line_text}\n{gutter} | {}{}",
        " ".repeat(column - 1),
        "^".repeat(width)
    )
}

/// `unknown field `x`, expected one of `a`, `b``: the name and the names expected.
fn unknown_field(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (name, rest) = rest.split_once('`')?;
    let expected = rest.split('`').skip(1).step_by(2).collect();
    Some((name, expected))
}

/// "unknown key `x`", with the closest known key when one is close.
pub fn unknown_key<'a>(name: &str, known: impl IntoIterator<Item = &'a str> + Clone) -> String {
    let model_keys = known.clone().into_iter().all(|k| KeyInfo::named(k).is_some());
    if name == "variant" && model_keys {
        return "`variant` is not a model key: use --variant".to_string();
    }
    let hint = match did_you_mean(name, known.clone()) {
        Some(close) => format!("did you mean `{close}`?"),
        None if model_keys => "`fencesim model` lists every key".to_string(),
        None => {
            format!("expected one of {}", known.into_iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "))
        }
    };
    format!("unknown key `{name}`; {hint}")
}

/// A message from a JSON parser (one line already) for an error line.
pub fn one_line(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('|')).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::{did_you_mean, KeyInfo, Model, KEYS};

    #[test]
    fn every_model_field_has_one_row_and_every_row_a_field() {
        let all = Model {
            jobs_max: Some(3),
            think_ms_max: Some(0),
            work_ms_max: Some(0),
            server_fsync_ms: Some(16),
            drift_ppm_real_max: Some(800),
            stall_ms_max: Some(900),
            ack_crashes: Some(true),
            renew_strikes: Some(true),
            ack_amnesia: Some(true),
            grant_strikes: Some(true),
            vote_strikes: Some(true),
            fence_strikes: Some(true),
            late_renewals: Some(true),
            figure8_strikes: Some(true),
            tickless: Some(false),
            snapshot_entries: Some(32),
            wait_queue_max: Some(2),
            swarm: true,
            swarm_bias: Some("crashes:700".parse().unwrap()),
            ..Model::default()
        };
        let fields: Vec<String> = match serde_json::to_value(all).unwrap() {
            serde_json::Value::Object(map) => map.keys().cloned().collect(),
            _ => unreachable!(),
        };
        let mut rows: Vec<String> = KEYS.iter().map(|k| k.name.to_string()).collect();
        rows.sort();
        let mut sorted = fields.clone();
        sorted.sort();
        assert_eq!(rows, sorted, "KEYS and Model's fields must agree");
        assert!(KEYS.iter().all(|k| !k.meaning.is_empty()), "every key says what it means");
    }

    #[test]
    fn the_commented_model_parses_back_as_the_standard_model() {
        let text = Model::commented_toml();
        assert_eq!(Model::from_toml(&text, "model").unwrap(), Model::default());
        for key in KEYS {
            assert!(text.contains(&format!("# valid: {}\n", key.valid_text())), "{} is documented", key.name);
        }
    }

    #[test]
    fn every_range_end_is_valid_alone_and_one_past_it_is_not() {
        for key in KEYS {
            let super::Valid::Int { min, max } = key.valid else { continue };
            let (name, partner) = match key.name {
                // Cross-key rules: move the partner keys out of the way.
                "heartbeat_ms" => (key.name, vec!["election_ms_min=1980", "election_ms_max=2000"]),
                "election_ms_min" => (key.name, vec!["election_ms_max=2000", "heartbeat_ms=10"]),
                "election_ms_max" => (key.name, vec!["election_ms_min=20", "heartbeat_ms=10"]),
                _ => (key.name, vec![]),
            };
            let settings = |value: u64| {
                let mut list: Vec<String> = partner.iter().map(|s| s.to_string()).collect();
                list.push(format!("{name}={value}"));
                list
            };
            let legal = |v: u64| match name {
                "nodes" => !v.is_multiple_of(2),
                "liveness_ms" => v == 0 || v >= 1_000,
                "heartbeat_ms" | "election_ms_min" | "election_ms_max" => v.is_multiple_of(10),
                _ => true,
            };
            for value in [min, max].into_iter().filter(|&v| legal(v)) {
                let result = Model::default().with_settings(&settings(value));
                assert!(result.is_ok(), "{name}={value}: {result:?}");
            }
            let above = Model::default().with_settings(&settings(max + 1)).unwrap_err();
            assert!(above.contains(&format!("`{name}`")), "{name}={}: {above}", max + 1);
            if min > 0 {
                assert!(Model::default().with_settings(&settings(min - 1)).is_err(), "{name}={}", min - 1);
            }
        }
        assert!(KeyInfo::named("pause_ms_max").is_some());
    }

    #[test]
    fn a_typo_gets_the_key_it_resembles() {
        let names = || KEYS.iter().map(|k| k.name);
        assert_eq!(did_you_mean("pause_ms", names()), Some("pause_ms_max"));
        assert_eq!(did_you_mean("node", names()), Some("nodes"));
        assert_eq!(did_you_mean("leese_ms", names()), Some("lease_ms"));
        assert_eq!(did_you_mean("flux_capacitor", names()), None);
    }

    #[test]
    fn a_variant_typo_gets_the_closest_variant_first() {
        for typo in ["sink-unfence", "sink-unfencd", "sinkunfenced"] {
            let message = super::parse_variant(typo).unwrap_err();
            let expected =
                format!("unknown variant `{typo}`; did you mean `sink-unfenced`? (known: sink-unfenced, default,");
            assert!(message.starts_with(&expected), "{message}");
        }
        let far = super::parse_variant("flux").unwrap_err();
        assert!(far.starts_with("unknown variant `flux` (known: default, "), "{far}");
    }
}
