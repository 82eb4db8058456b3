//! What `explore` reports per cell (CLI.md, "fencesim explore"):
//! the fraction of seeds violating each property with its 95% Wilson
//! interval, lease exposures, stale writes rejected, and the availability
//! figures, folded seed by seed from records so a resumed sweep reports the
//! same numbers as one run straight through.

use crate::cli::coverage::Coverage;
use crate::cli::records::Record;
use crate::cli::summary::Summary;
use crate::run::figures::{Histogram, SeedFigures};
use fencelock::Property;
use serde::Serialize;
use std::collections::BTreeMap;

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The 95% Wilson score interval of `failing` out of `seeds` (0..=1 each
/// side); `(0, 1)` for no seeds. Unlike the normal approximation it stays
/// inside 0..1 and is not empty at 0 or `seeds` failures.
pub fn wilson(failing: u64, seeds: u64) -> (f64, f64) {
    assert!(failing <= seeds, "more failing seeds than seeds");
    if seeds == 0 {
        return (0.0, 1.0);
    }
    let n = seeds as f64;
    let p = failing as f64 / n;
    let z2 = Z95 * Z95;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z95 / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The 95% interval of a Poisson mean from `count` events: Garwood's exact
/// interval (the means whose Poisson tail beyond `count` is 2.5%), found by
/// bisection; past [`POISSON_EXACT_MAX`] events Byar's approximation, within
/// 0.1% of it there. Lease exposures of a cell are counted over its seeds as
/// such events; exposures bunched in a few seeds make the true spread wider.
pub fn poisson95(count: u64) -> (f64, f64) {
    let tail = (1.0 - 0.95) / 2.0;
    if count > POISSON_EXACT_MAX {
        let (k, z) = (count as f64, Z95);
        let k1 = k + 1.0;
        let low = k * (1.0 - 1.0 / (9.0 * k) - z / (3.0 * k.sqrt())).powi(3);
        let high = k1 * (1.0 - 1.0 / (9.0 * k1) + z / (3.0 * k1.sqrt())).powi(3);
        return (low, high);
    }
    // P(X <= k) falls as the mean grows: the mean where it crosses `target`.
    let mean_where = |k: u64, target: f64| {
        let (mut lo, mut hi) = (0.0_f64, 2.0 * k as f64 + 20.0);
        for _ in 0..100 {
            let mid = (lo + hi) / 2.0;
            if poisson_cdf(k, mid) > target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (lo + hi) / 2.0
    };
    let low = if count == 0 { 0.0 } else { mean_where(count - 1, 1.0 - tail) };
    (low, mean_where(count, tail))
}

/// Counts up to this get the exact interval (bisection over an O(count) sum).
const POISSON_EXACT_MAX: u64 = 1_000;

/// P(X <= k) for X Poisson with this mean, summed in log space.
fn poisson_cdf(k: u64, mean: f64) -> f64 {
    if mean <= 0.0 {
        return 1.0;
    }
    let (ln_mean, mut ln_factorial, mut sum) = (mean.ln(), 0.0_f64, 0.0_f64);
    for i in 0..=k {
        if i > 0 {
            ln_factorial += (i as f64).ln();
        }
        sum += (i as f64 * ln_mean - mean - ln_factorial).exp();
    }
    sum.min(1.0)
}

/// A rate with its interval, as the JSON and CSV write it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rate {
    pub failing: u64,
    pub rate: f64,
    pub low: f64,
    pub high: f64,
}

impl Rate {
    pub fn of(failing: u64, seeds: u64) -> Rate {
        let (low, high) = wilson(failing, seeds);
        let rate = if seeds == 0 { 0.0 } else { failing as f64 / seeds as f64 };
        Rate { failing, rate: round6(rate), low: round6(low), high: round6(high) }
    }
}

/// Exposures per seed: the 95% interval of `count` over `seeds` ((0, 0) with no seeds).
fn per_seed_interval(count: u64, seeds: u64) -> (f64, f64) {
    if seeds == 0 {
        return (0.0, 0.0);
    }
    let (low, high) = poisson95(count);
    (round6(low / seeds as f64), round6(high / seeds as f64))
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// A cell's seeds folded so far.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub summary: Summary,
    pub grants: u64,
    pub stale_writes_rejected: u64,
    pub acquire_us: Histogram,
    /// Each seed's longest unheld-while-waiting stretch.
    pub unheld_us: Histogram,
    pub unheld_us_max: u64,
}

impl Tally {
    pub fn add(&mut self, record: &Record, figures: &SeedFigures) {
        self.summary.add(record.facts());
        self.grants += figures.grants;
        self.stale_writes_rejected += figures.stale_writes_rejected;
        self.acquire_us.merge(&figures.acquire_us);
        self.unheld_us.add(figures.unheld_waiting_us_max);
        self.unheld_us_max = self.unheld_us_max.max(figures.unheld_waiting_us_max);
    }

    pub fn report(&self, axes: BTreeMap<String, toml::Value>) -> CellReport {
        let seeds = self.summary.seeds_run;
        let properties = Property::ALL
            .iter()
            .map(|p| (p.id().to_string(), Rate::of(self.summary.by_property.get(p).map_or(0, |c| c.seeds), seeds)))
            .collect();
        let ms = |us: Option<u64>| us.map(|us| round1(us as f64 / 1_000.0));
        let per_seed = |n: u64| if seeds == 0 { 0.0 } else { round6(n as f64 / seeds as f64) };
        let sim_s = self.summary.sim_ms as f64 / 1_000.0;
        CellReport {
            axes,
            seeds,
            failing: Rate::of(self.summary.failing_seeds, seeds),
            properties,
            lease_exposures: self.summary.lease_exposures,
            lease_exposures_per_seed: per_seed(self.summary.lease_exposures),
            lease_exposures_per_seed_low: per_seed_interval(self.summary.lease_exposures, seeds).0,
            lease_exposures_per_seed_high: per_seed_interval(self.summary.lease_exposures, seeds).1,
            lease_exposure_seeds: self.summary.lease_exposure_seeds,
            stale_writes_rejected: self.stale_writes_rejected,
            stale_writes_rejected_per_seed: per_seed(self.stale_writes_rejected),
            acquires_granted: self.acquire_us.count(),
            acquire_ms_p50: ms(self.acquire_us.percentile(500)),
            acquire_ms_p99: ms(self.acquire_us.percentile(990)),
            grants_per_s: if sim_s > 0.0 { round6(self.grants as f64 / sim_s) } else { 0.0 },
            unheld_waiting_ms_p50: ms(self.unheld_us.percentile(500)),
            unheld_waiting_ms_max: ms((seeds > 0).then_some(self.unheld_us_max)),
            fault_answered_share: (self.summary.availability.0 > 0)
                .then(|| round6(self.summary.availability.1.fault_answered_share())),
            sim_ms: self.summary.sim_ms,
            probes_reached: (!self.summary.coverage.is_empty()).then(|| self.summary.coverage.reached()),
            coverage: self.summary.coverage.clone(),
        }
    }
}

/// One cell of `explore --json` (CLI.md, "fencesim explore", defines each figure).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CellReport {
    /// The cell's value of each axis.
    pub axes: BTreeMap<String, toml::Value>,
    pub seeds: u64,
    /// Seeds violating any property.
    pub failing: Rate,
    /// Per property id: the seeds violating it.
    pub properties: BTreeMap<String, Rate>,
    pub lease_exposures: u64,
    pub lease_exposures_per_seed: f64,
    /// The 95% interval of exposures per seed ([`poisson95`]).
    pub lease_exposures_per_seed_low: f64,
    pub lease_exposures_per_seed_high: f64,
    pub lease_exposure_seeds: u64,
    pub stale_writes_rejected: u64,
    pub stale_writes_rejected_per_seed: f64,
    pub acquires_granted: u64,
    pub acquire_ms_p50: Option<f64>,
    pub acquire_ms_p99: Option<f64>,
    pub grants_per_s: f64,
    pub unheld_waiting_ms_p50: Option<f64>,
    pub unheld_waiting_ms_max: Option<f64>,
    /// The share of requests sent during the faults that got a final answer.
    pub fault_answered_share: Option<f64>,
    pub sim_ms: u64,
    /// Coverage probes reached by at least one of the cell's seeds (none
    /// when no seed reported probes: records of older versions).
    pub probes_reached: Option<u64>,
    /// Seeds per probe, as `hunt --json` gives it (absent with `probes_reached`).
    #[serde(skip_serializing_if = "Coverage::is_empty")]
    pub coverage: Coverage,
}

/// The CSV columns after the axes, and their values.
pub fn csv_header(axis_keys: &[String]) -> String {
    let mut columns: Vec<String> = axis_keys.to_vec();
    columns.extend(["seeds", "failing", "failing_rate", "failing_low", "failing_high"].map(String::from));
    for property in Property::ALL {
        let id = property.id();
        columns.extend([format!("{id}_failing"), format!("{id}_rate"), format!("{id}_low"), format!("{id}_high")]);
    }
    columns.extend(
        [
            "lease_exposures",
            "lease_exposure_seeds",
            "stale_writes_rejected",
            "acquires_granted",
            "acquire_ms_p50",
            "acquire_ms_p99",
            "grants_per_s",
            "unheld_waiting_ms_p50",
            "unheld_waiting_ms_max",
            "sim_ms",
            "fault_answered_share",
            "lease_exposures_per_seed_low",
            "lease_exposures_per_seed_high",
            "probes_reached",
        ]
        .map(String::from),
    );
    columns.join(",")
}

pub fn csv_row(axis_keys: &[String], cell: &CellReport) -> String {
    let mut fields: Vec<String> = axis_keys.iter().map(|key| csv_value(&cell.axes[key])).collect();
    let rate = |r: &Rate| [r.failing.to_string(), r.rate.to_string(), r.low.to_string(), r.high.to_string()];
    fields.push(cell.seeds.to_string());
    fields.extend(rate(&cell.failing));
    for property in Property::ALL {
        fields.extend(rate(&cell.properties[property.id()]));
    }
    let opt = |x: Option<f64>| x.map_or(String::new(), |x| x.to_string());
    fields.extend([
        cell.lease_exposures.to_string(),
        cell.lease_exposure_seeds.to_string(),
        cell.stale_writes_rejected.to_string(),
        cell.acquires_granted.to_string(),
        opt(cell.acquire_ms_p50),
        opt(cell.acquire_ms_p99),
        cell.grants_per_s.to_string(),
        opt(cell.unheld_waiting_ms_p50),
        opt(cell.unheld_waiting_ms_max),
        cell.sim_ms.to_string(),
        opt(cell.fault_answered_share),
        cell.lease_exposures_per_seed_low.to_string(),
        cell.lease_exposures_per_seed_high.to_string(),
        cell.probes_reached.map_or(String::new(), |n| n.to_string()),
    ]);
    fields.join(",")
}

fn csv_value(value: &toml::Value) -> String {
    let text = crate::cli::sweep_file::show(value);
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::{poisson95, wilson, Rate};

    #[test]
    fn poisson_intervals_match_published_values() {
        // Garwood's exact 95% intervals: 0 -> [0, 3.689], 1 -> [0.0253, 5.572],
        // 10 -> [4.795, 18.39], 100 -> [81.36, 121.6].
        let near =
            |(a, b): (f64, f64), (x, y): (f64, f64)| (a - x).abs() <= 0.01 * x.max(0.3) && (b - y).abs() <= 0.01 * y;
        assert!(near(poisson95(0), (0.0, 3.689)), "{:?}", poisson95(0));
        assert!(near(poisson95(1), (0.0253, 5.572)), "{:?}", poisson95(1));
        assert!(near(poisson95(10), (4.795, 18.39)), "{:?}", poisson95(10));
        assert!(near(poisson95(100), (81.36, 121.6)), "{:?}", poisson95(100));
        assert!(near(poisson95(5_000), (4_862.4, 5_140.4)), "{:?}", poisson95(5_000));
    }

    fn close(a: (f64, f64), b: (f64, f64)) -> bool {
        (a.0 - b.0).abs() < 5e-5 && (a.1 - b.1).abs() < 5e-5
    }

    #[test]
    fn wilson_matches_published_values() {
        // Newcombe (1998), Statistics in Medicine 17:857, table I, method 3:
        // 81/263 → 0.2553–0.3662, 15/148 → 0.0624–0.1605, 0/20 → 0–0.1611, 1/29 → 0.0061–0.1718.
        assert!(close(wilson(81, 263), (0.2553, 0.3662)), "{:?}", wilson(81, 263));
        assert!(close(wilson(15, 148), (0.0624, 0.1605)), "{:?}", wilson(15, 148));
        assert!(close(wilson(0, 20), (0.0, 0.1611)), "{:?}", wilson(0, 20));
        assert!(close(wilson(1, 29), (0.0061, 0.1718)), "{:?}", wilson(1, 29));
        // Symmetric, and closed at the ends.
        let (low, high) = wilson(5, 10);
        assert!((low + high - 1.0).abs() < 1e-12 && close((low, high), (0.2366, 0.7634)), "{low} {high}");
        assert_eq!(wilson(20, 20).1, 1.0);
        assert_eq!(wilson(0, 0), (0.0, 1.0));
        assert_eq!(Rate::of(3, 200).rate, 0.015);
    }
}
