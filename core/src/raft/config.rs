//! Construction and validation of [`Config`]: every error names its field.

use super::{Config, ConfigError};
use crate::types::NodeId;
use crate::variant::Variant;

/// The tick interval `Config::standard` is tuned for.
pub const TICK_MS_STANDARD: u64 = 10;

/// Applied entries between two snapshots in [`Config::standard`].
pub const SNAPSHOT_THRESHOLD_ENTRIES_STANDARD: u64 = 256;

impl Config {
    /// Sensible defaults at a 10 ms tick: heartbeat every 2 ticks, election
    /// timeout in [10, 20) ticks, 64 entries per append, 4 appends in flight,
    /// a snapshot every 256 applied entries, pre-vote and check-quorum on.
    pub fn standard(id: NodeId, voters: Vec<NodeId>) -> Config {
        Config {
            id,
            voters,
            heartbeat_ticks: 2,
            election_ticks_min: 10,
            election_ticks_max: 20,
            entries_per_message_max: 64,
            inflight_max: 4,
            snapshot_threshold_entries: SNAPSHOT_THRESHOLD_ENTRIES_STANDARD,
            pre_vote: true,
            check_quorum: true,
            variant: Variant::Default,
        }
    }

    /// Checks the config once, at construction; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn fail(field: &'static str, reason: String) -> Result<(), ConfigError> {
            Err(ConfigError { field, reason })
        }
        if self.voters.is_empty() {
            return fail("voters", "must not be empty".to_string());
        }
        if !self.voters.contains(&self.id) {
            return fail("voters", format!("must contain the node's own id {}", self.id));
        }
        let mut sorted = self.voters.clone();
        sorted.sort();
        sorted.dedup();
        if sorted.len() != self.voters.len() {
            return fail("voters", "must not contain an id twice".to_string());
        }
        if self.heartbeat_ticks < 1 {
            return fail("heartbeat_ticks", "must be at least 1".to_string());
        }
        if self.election_ticks_min <= self.heartbeat_ticks {
            return fail(
                "election_ticks_min",
                format!("must be above heartbeat_ticks ({}), got {}", self.heartbeat_ticks, self.election_ticks_min),
            );
        }
        if self.election_ticks_max <= self.election_ticks_min {
            return fail(
                "election_ticks_max",
                format!(
                    "must be above election_ticks_min ({}), got {}",
                    self.election_ticks_min, self.election_ticks_max
                ),
            );
        }
        if self.entries_per_message_max < 1 {
            return fail("entries_per_message_max", "must be at least 1".to_string());
        }
        if self.inflight_max < 1 {
            return fail("inflight_max", "must be at least 1".to_string());
        }
        if self.snapshot_threshold_entries < 1 {
            return fail("snapshot_threshold_entries", "must be at least 1".to_string());
        }
        Ok(())
    }

    /// The leader refuses proposals (`ProposeError::Busy`) once this many
    /// entries are uncommitted: what two full windows to one follower can carry.
    pub fn uncommitted_entries_max(&self) -> u64 {
        (self.entries_per_message_max as u64).saturating_mul(self.inflight_max as u64).saturating_mul(2)
    }
}
