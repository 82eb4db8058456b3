//! A process's clocks: true time and the local clock the protocol reads.
//!
//! True time is CLOCK_MONOTONIC in µs (read through nix, not
//! `std::time::Instant`, because `Instant` hides its absolute value: every
//! process on the machine reads the same CLOCK_MONOTONIC, so histories of
//! several processes merge on it). The simulator gives each node a local clock with an offset and a
//! drift rate; a real node's local clock is the monotonic clock with an
//! offset and a rate that an admin request can set (by default none), so a
//! test can skew or step a real process's clock the way the simulator's
//! fault plan does. Lease deadlines are read on the local clock only.

use nix::time::{clock_gettime, ClockId};
use std::time::Duration;

/// The furthest an admin request may step a clock, either way (one day).
pub const OFFSET_MS_MAX: i64 = 86_400_000;
/// The largest rate change, parts per million: a clock still moves forward.
pub const RATE_PPM_MAX: i64 = 500_000;

/// A local clock over the monotonic clock.
#[derive(Clone, Debug)]
pub struct LocalClock {
    /// The mapping: from true µs `anchor_true_us`, local time is
    /// `anchor_local_us + elapsed · (1 + rate_ppm / 1e6)`.
    anchor_true_us: u64,
    anchor_local_us: u64,
    rate_ppm: i64,
}

impl LocalClock {
    /// A clock reading true time until told otherwise.
    pub fn new() -> LocalClock {
        LocalClock { anchor_true_us: 0, anchor_local_us: 0, rate_ppm: 0 }
    }

    /// CLOCK_MONOTONIC in µs.
    pub fn true_us(&self) -> u64 {
        true_us()
    }

    pub fn local_us(&self) -> u64 {
        self.local_us_at(self.true_us())
    }

    fn local_us_at(&self, true_us: u64) -> u64 {
        let elapsed = i128::from(true_us.saturating_sub(self.anchor_true_us));
        let local = i128::from(self.anchor_local_us) + elapsed + elapsed * i128::from(self.rate_ppm) / 1_000_000;
        u64::try_from(local.max(0)).unwrap_or(u64::MAX)
    }

    /// From now on, local time is true time plus `offset_ms`, running at
    /// `1 + rate_ppm / 1e6`. Refuses values outside the bounds.
    pub fn set(&mut self, offset_ms: i64, rate_ppm: i64) -> Result<(), String> {
        if offset_ms.abs() > OFFSET_MS_MAX {
            return Err(format!("clock offset_ms must be within ±{OFFSET_MS_MAX}, got {offset_ms}"));
        }
        if rate_ppm.abs() > RATE_PPM_MAX {
            return Err(format!("clock rate_ppm must be within ±{RATE_PPM_MAX}, got {rate_ppm}"));
        }
        let now = self.true_us();
        let local = i128::from(now) + i128::from(offset_ms) * 1_000;
        self.anchor_true_us = now;
        self.anchor_local_us = u64::try_from(local.max(0)).unwrap_or(u64::MAX);
        self.rate_ppm = rate_ppm;
        Ok(())
    }

    /// Takes `map` as the whole mapping: a machine's clock handed to a
    /// restarted process, or set by whoever plays a fault schedule.
    pub fn set_map(&mut self, map: ClockMap) -> Result<(), String> {
        if map.rate_ppm.abs() > RATE_PPM_MAX {
            return Err(format!("clock rate_ppm must be within ±{RATE_PPM_MAX}, got {}", map.rate_ppm));
        }
        self.anchor_true_us = map.true_us;
        self.anchor_local_us = map.local_us;
        self.rate_ppm = map.rate_ppm;
        Ok(())
    }

    /// The mapping now.
    pub fn map(&self) -> ClockMap {
        ClockMap { true_us: self.anchor_true_us, local_us: self.anchor_local_us, rate_ppm: self.rate_ppm }
    }

    pub fn rate_ppm(&self) -> i64 {
        self.rate_ppm
    }

    /// How long, in true time, until the local clock has advanced `local_us`.
    pub fn true_wait(&self, local_us: u64) -> Duration {
        let factor = 1_000_000 + i128::from(self.rate_ppm);
        let true_us = i128::from(local_us) * 1_000_000 / factor.max(1);
        Duration::from_micros(u64::try_from(true_us).unwrap_or(u64::MAX))
    }
}

/// A local clock's mapping: at true `true_us` (CLOCK_MONOTONIC) it reads
/// `local_us`, and runs at `1 + rate_ppm / 1e6` from there. Written
/// `TRUE,LOCAL,RATE` on a command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClockMap {
    pub true_us: u64,
    pub local_us: u64,
    pub rate_ppm: i64,
}

impl std::str::FromStr for ClockMap {
    type Err = String;

    fn from_str(text: &str) -> Result<ClockMap, String> {
        let bad = || format!("a clock is TRUE_US,LOCAL_US,RATE_PPM (three integers), got {text:?}");
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        let [t, l, r] = fields.as_slice() else { return Err(bad()) };
        let map = ClockMap {
            true_us: t.parse().map_err(|_| bad())?,
            local_us: l.parse().map_err(|_| bad())?,
            rate_ppm: r.parse().map_err(|_| bad())?,
        };
        if map.rate_ppm.abs() > RATE_PPM_MAX {
            return Err(format!("clock rate_ppm must be within ±{RATE_PPM_MAX}, got {}", map.rate_ppm));
        }
        Ok(map)
    }
}

impl std::fmt::Display for ClockMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{},{}", self.true_us, self.local_us, self.rate_ppm)
    }
}

impl Default for LocalClock {
    fn default() -> LocalClock {
        LocalClock::new()
    }
}

/// CLOCK_MONOTONIC in µs. Linux always has it; should the call fail, time
/// standing still is safer for leases than a panic.
pub fn true_us() -> u64 {
    match clock_gettime(ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => {
            let us = i128::from(ts.tv_sec()) * 1_000_000 + i128::from(ts.tv_nsec()) / 1_000;
            u64::try_from(us.max(0)).unwrap_or(u64::MAX)
        }
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_clock_steps_and_runs_at_its_rate() {
        let mut clock = LocalClock::new();
        clock.set(5_000, 100_000).expect("in bounds");
        let local = clock.local_us();
        assert!(local >= 5_000_000, "stepped forward by 5 s: {local}");
        assert_eq!(clock.local_us_at(clock.anchor_true_us + 1_000_000), clock.anchor_local_us + 1_100_000);
        assert_eq!(clock.true_wait(1_100_000), Duration::from_micros(1_000_000));
        assert!(clock.set(0, 600_000).is_err());
        assert!(clock.set(-OFFSET_MS_MAX - 1, 0).is_err());
    }

    #[test]
    fn a_clock_map_reads_back_and_is_taken_whole() {
        let map: ClockMap = "1000,5000,-200".parse().expect("three integers");
        assert_eq!(map, ClockMap { true_us: 1_000, local_us: 5_000, rate_ppm: -200 });
        assert_eq!(map.to_string().parse::<ClockMap>(), Ok(map));
        assert!("1,2".parse::<ClockMap>().is_err());
        assert!("1,2,900000".parse::<ClockMap>().is_err());
        let mut clock = LocalClock::new();
        clock.set_map(map).expect("in bounds");
        assert_eq!(clock.local_us_at(1_000 + 1_000_000), 5_000 + 1_000_000 - 200);
        assert_eq!(clock.map(), map);
    }
}
