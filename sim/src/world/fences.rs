//! Fence strikes at run time ([`crate::faults::Fault::FenceStrikes`],
//! planned in `faults/fences.rs`): the supervisor follows, from the
//! history, which locks ended by expiry (an Expire applied that removed the
//! lock), so their holders may still be alive. While an episode lasts, when
//! the resource accepts a write on such a key with a higher token (a
//! takeover: the write that raises the fence against the expired holder),
//! the supervisor crashes the resource in the instant the write is
//! recorded, losing whatever it had not synced, and restarts it
//! `down_ms` later. The expired holder's next write then meets a resource
//! that either kept the raised fence (it synced before it answered: the
//! protocol) or forgot it (`resource-sync-lazy`, `sink-max-in-memory`).
//! With `restore` the strike instead puts the resource's last backup back
//! (the operator's restore, told by the write it follows): a resource that
//! reads its floors again refuses the expired holder, one that trusts the
//! backup's highest tokens lets it in (`resource-restore-naive`).
//!
//! No draws at run time: the first takeover of an episode is struck, one at
//! a time. Every strike is in the history (`ChurnEvent::FenceStruck`); the
//! crash and restart are ordinary `Crashed` and `Restarted` events. A
//! planned crash, restart or restore of the resource takes it over.

use super::churn::Cluster;
use crate::faults::{ChurnEvent, Fault};
use crate::history::{Event, EventKind, Reader};
use fencelock::{ApplyResult, Command, Key, Token, WriteVerdict};
use std::collections::BTreeMap;

/// What the fence strikes read of the history.
#[derive(Clone, Debug, PartialEq, Eq)]
enum FenceTraffic {
    /// The lock on `key` with `token` was removed by an Expire.
    Expired { key: Key, token: Token },
    /// The resource accepted a write on `key` with `token`, at `at_us`.
    Accepted { key: Key, token: Token, at_us: u64 },
}

impl FenceTraffic {
    /// What `event` tells the fence strikes, if anything.
    fn of(event: &Event) -> Option<FenceTraffic> {
        match &event.kind {
            EventKind::Applied {
                command: Command::Expire { key, token },
                result: ApplyResult::Expired { existed: true },
                ..
            } => Some(FenceTraffic::Expired { key: key.clone(), token: *token }),
            EventKind::WriteDone { key, token, verdict: WriteVerdict::Accepted, .. } => {
                Some(FenceTraffic::Accepted { key: key.clone(), token: *token, at_us: event.at_us })
            }
            _ => None,
        }
    }
}

pub(super) struct FenceStrike {
    /// The episode lasts until this true instant (0: none started).
    until_us: u64,
    strikes_left: u64,
    down_ms: u64,
    /// Strikes restore the resource from its last backup instead of crashing it.
    restore: bool,
    /// Whether it follows the history (from the start of the run, so
    /// expiries older than an episode are known): when the run may strike.
    follows: bool,
    /// Each key whose last lock ended by expiry, with that lock's token.
    expired: BTreeMap<Key, Token>,
    /// The instant the struck resource comes back.
    back_us: Option<u64>,
}

impl FenceStrike {
    /// The family of a run that `follows` the history from its start (see [`Reader`]).
    pub(super) fn new(follows: bool) -> FenceStrike {
        FenceStrike {
            until_us: 0,
            strikes_left: 0,
            down_ms: 0,
            restore: false,
            follows,
            expired: BTreeMap::new(),
            back_us: None,
        }
    }

    fn watching(&self, now_us: u64) -> bool {
        now_us < self.until_us && self.strikes_left > 0
    }

    /// Whether the family reads every event as it is recorded (an episode is on).
    pub(super) fn listens(&self, now_us: u64) -> bool {
        self.watching(now_us)
    }

    /// The next instant the family must act whatever is recorded: the
    /// resource due back.
    pub(super) fn next_wake_us(&self) -> Option<u64> {
        self.back_us
    }

    /// Starts an episode: takeovers from now on are watched.
    pub(super) fn start(&mut self, now_us: u64, fault: &Fault, cluster: &impl Cluster) {
        let Fault::FenceStrikes { for_ms, strikes, down_ms, restore } = *fault else {
            unreachable!("a fence-strike episode starts from its fault")
        };
        self.until_us = now_us + for_ms * 1_000;
        self.strikes_left = strikes;
        self.down_ms = down_ms;
        self.restore = restore;
        assert!(self.follows, "a run that may strike follows the history from its start");
        for event in cluster.read_history(Reader::FenceStrikes, FenceTraffic::of) {
            self.follow(&event);
        }
    }

    /// Brings the resource back when due, reads the history since the last
    /// step (every step, so that what it keeps is little) and, during an
    /// episode, crashes the resource after the first takeover write.
    pub(super) fn step(&mut self, now_us: u64, cluster: &mut impl Cluster) {
        if self.back_us.is_some_and(|at_us| at_us <= now_us) {
            self.back_us = None;
            cluster.restart_resource();
        }
        if !self.follows {
            return;
        }
        let watching = self.watching(now_us);
        for event in cluster.read_history(Reader::FenceStrikes, FenceTraffic::of) {
            if let FenceTraffic::Accepted { ref key, token, at_us } = event {
                let over = self.expired.get(key).copied().filter(|expired| *expired < token);
                if let Some(expired) = over {
                    // A restore needs a backup: without one the strike waits for the next takeover.
                    let ready = !self.restore || cluster.resource_backed_up();
                    if watching && self.strikes_left > 0 && self.back_us.is_none() && ready {
                        let (down_ms, restore) = (self.down_ms, self.restore);
                        let after_us = now_us - at_us;
                        let key = key.clone();
                        cluster.note(ChurnEvent::FenceStruck { key, token, expired, after_us, down_ms, restore });
                        if restore {
                            cluster.restore_resource_from_backup();
                        } else {
                            cluster.crash_resource();
                            self.back_us = Some(now_us + down_ms * 1_000);
                        }
                        self.strikes_left -= 1;
                    }
                }
            }
            self.follow(&event);
        }
    }

    /// Keeps `expired` up to date with one event: a takeover settles its key.
    fn follow(&mut self, event: &FenceTraffic) {
        match event {
            FenceTraffic::Expired { key, token } => {
                self.expired.insert(key.clone(), *token);
            }
            FenceTraffic::Accepted { key, token, .. } => {
                if self.expired.get(key).is_some_and(|expired| expired < token) {
                    self.expired.remove(key);
                }
            }
        }
    }

    /// A planned crash, restart or restore of the resource takes it over.
    pub(super) fn yield_to(&mut self, fault: &Fault) {
        if matches!(fault, Fault::CrashResource | Fault::RestartResource | Fault::RestoreResource) {
            self.back_us = None;
        }
    }
}
