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
    /// With `crashes`: stretches in which every new leader is struck down
    /// (crashed, or cut off) within milliseconds of taking office or as it
    /// first applies (extension of CLI.md; `world/churn.rs`).
    pub leader_churn: bool,
    /// Raft entries per append message (extension of CLI.md); 1 makes a new
    /// leader's first entries travel one by one.
    pub entries_per_message_max: u32,
    /// Raft appends in flight per follower (extension of CLI.md); 1 makes
    /// the leader wait for each acknowledgement before the next append.
    pub inflight_max: u32,
    /// Jobs each worker does before it idles (extension of
    /// CLI.md); absent, workers never stop. `shrink` sets it to cut a story short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs_max: Option<u32>,
    /// How often every fault family strikes, relative to the standard model
    /// (extension of CLI.md): 0.25 stretches the gaps between a family's
    /// episodes fourfold. Swarm draws it per seed, up to this value.
    pub fault_rate: f64,
    /// Swarm testing (extension of CLI.md): each seed draws which fault
    /// families are on and how hard, the cluster size and the batching, with
    /// this model's values as the limits (`faults/swarm.rs`).
    pub swarm: bool,
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
            leader_churn: true,
            entries_per_message_max: 64,
            inflight_max: 4,
            jobs_max: None,
            fault_rate: 1.0,
            swarm: false,
            heartbeat_ms: 20,
            election_ms_min: 100,
            election_ms_max: 200,
            variant: Variant::Default,
        }
    }
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

    /// Checks the ranges a TOML type cannot express; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes == 0 || self.nodes > 9 || self.nodes.is_multiple_of(2) {
            return Err(format!("model key `nodes` must be odd and in 1..=9, got {}", self.nodes));
        }
        if self.clients > 64 {
            return Err(format!("model key `clients` must be at most 64, got {}", self.clients));
        }
        if self.keys == 0 || self.keys > 64 {
            return Err(format!("model key `keys` must be in 1..=64, got {}", self.keys));
        }
        if self.lease_ms < 100 || self.lease_ms > 600_000 {
            return Err(format!("model key `lease_ms` must be in 100..=600000, got {}", self.lease_ms));
        }
        if self.safety_ms > 86_400_000 || self.liveness_ms > 86_400_000 {
            return Err("model keys `safety_ms` and `liveness_ms` must be at most 86400000 (one day)".into());
        }
        // 0 is a run without a liveness phase (a shrunk safety scenario ends
        // just after its violation); a phase shorter than a second proves nothing.
        if self.liveness_ms != 0 && self.liveness_ms < 1_000 {
            return Err(format!("model key `liveness_ms` must be 0 or at least 1000, got {}", self.liveness_ms));
        }
        if self.jobs_max == Some(0) {
            return Err("model key `jobs_max` must be at least 1 (leave it out for no limit)".into());
        }
        self.validate_drift()?;
        if let Some(ms) = self.stall_ms_max {
            if !(1..=STALL_MS_MAX).contains(&ms) {
                return Err(format!("model key `stall_ms_max` must be in 1..={STALL_MS_MAX}, got {ms}"));
            }
        }
        for (name, rate) in [("loss_rate", self.loss_rate), ("dup_rate", self.dup_rate)] {
            if !(0.0..=0.5).contains(&rate) {
                return Err(format!("model key `{name}` must be in 0.0..=0.5, got {rate}"));
            }
        }
        if !(1..=1_024).contains(&self.entries_per_message_max) {
            return Err(format!(
                "model key `entries_per_message_max` must be in 1..=1024, got {}",
                self.entries_per_message_max
            ));
        }
        if !(1..=64).contains(&self.inflight_max) {
            return Err(format!("model key `inflight_max` must be in 1..=64, got {}", self.inflight_max));
        }
        if !(0.01..=10.0).contains(&self.fault_rate) {
            return Err(format!("model key `fault_rate` must be in 0.01..=10.0, got {}", self.fault_rate));
        }
        self.validate_raft_timing()?;
        if self.token_floor > (1 << 40) {
            return Err(format!("model key `token_floor` must be at most 2^40, got {}", self.token_floor));
        }
        Ok(())
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
        if self.heartbeat_ms > 1_000 {
            return Err(format!("model key `heartbeat_ms` must be at most 1000, got {}", self.heartbeat_ms));
        }
        if self.election_ms_min < 2 * self.heartbeat_ms {
            return Err(format!(
                "model key `election_ms_min` must be at least twice `heartbeat_ms` ({}), got {}",
                self.heartbeat_ms, self.election_ms_min
            ));
        }
        if self.election_ms_max <= self.election_ms_min || self.election_ms_max > 2_000 {
            return Err(format!(
                "model key `election_ms_max` must be above `election_ms_min` ({}) and at most 2000, got {}",
                self.election_ms_min, self.election_ms_max
            ));
        }
        Ok(())
    }

    /// Parses a model file's text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Model, String> {
        let model: Model = toml::from_str(text).map_err(|e| format!("{origin}: {}", one_line(&e.to_string())))?;
        model.validate().map_err(|e| format!("{origin}: {e}"))?;
        Ok(model)
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

/// toml's errors span several lines (a source excerpt); keep the message and location.
pub fn one_line(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('|')).collect::<Vec<_>>().join(" ")
}
