//! The summary of many seeds, as `hunt` prints it at the end and `merge`
//! prints it over records: counts folded in one seed at a time, so it costs
//! the same for ten seeds or ten million.

use crate::cli::coverage::Coverage;
use crate::plural;
use crate::run::figures::PhaseAvailability;
use crate::run::sweep::LinearizableCost;
use fencelock::{ProbeSet, Property};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

/// What the summary needs of one seed (from a run or from a record).
pub struct SeedFacts<'a> {
    /// One entry per violation (a property may come more than once).
    pub properties: &'a [Property],
    pub sim_ms: u64,
    pub messages: u64,
    pub lease_exposures: u64,
    /// `None` for a record of an older version, which did not keep it.
    pub availability: Option<PhaseAvailability>,
    /// The coverage probes the seed reached; `None` for a record of an
    /// older version, which did not keep them.
    pub probes: Option<ProbeSet>,
}

/// Failing seeds and violations of one property.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PropertyCount {
    pub seeds: u64,
    pub violations: u64,
}

/// The counts over every seed folded in so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub seeds_run: u64,
    pub failing_seeds: u64,
    /// Per property: the seeds that violate it, and its violations.
    pub by_property: BTreeMap<Property, PropertyCount>,
    /// Belief overlaps excused by a broken assumption (not violations).
    pub lease_exposures: u64,
    pub lease_exposure_seeds: u64,
    pub sim_ms: u64,
    pub messages: u64,
    /// Requests answered and grants made during the faults and after the
    /// heal, summed over the seeds that report them (`availability_seeds`).
    #[serde(serialize_with = "availability_json", skip_serializing_if = "nothing_counted")]
    pub availability: (u64, PhaseAvailability),
    /// The cost of the `linearizable` search over the seeds run here (records
    /// do not keep it, so a merge or a resumed hunt counts only what it ran).
    #[serde(serialize_with = "linearizable_json", skip_serializing_if = "nothing_judged")]
    pub linearizable: LinearizableCost,
    /// Seeds per coverage probe (`[{"probe", "seeds"}]`), over the seeds that report them.
    #[serde(skip_serializing_if = "Coverage::is_empty")]
    pub coverage: Coverage,
}

fn nothing_counted(availability: &(u64, PhaseAvailability)) -> bool {
    availability.0 == 0
}

/// `{"seeds", "fault_requests", "fault_answered", "fault_answered_share", "fault_grants", "healed_...": ...}`.
fn availability_json<S: Serializer>(availability: &(u64, PhaseAvailability), serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Json {
        seeds: u64,
        fault_requests: u64,
        fault_answered: u64,
        fault_answered_share: f64,
        fault_unanswered: u64,
        fault_grants: u64,
        healed_requests: u64,
        healed_answered: u64,
        healed_answered_share: f64,
        healed_grants: u64,
    }
    let (seeds, a) = availability;
    Json {
        seeds: *seeds,
        fault_requests: a.fault_requests,
        fault_answered: a.fault_answered,
        fault_answered_share: a.fault_answered_share(),
        fault_unanswered: a.fault_unanswered(),
        fault_grants: a.fault_grants,
        healed_requests: a.healed_requests,
        healed_answered: a.healed_answered,
        healed_answered_share: a.healed_answered_share(),
        healed_grants: a.healed_grants,
    }
    .serialize(serializer)
}

fn nothing_judged(cost: &LinearizableCost) -> bool {
    cost.keys == 0 && cost.unknown == 0
}

/// `{"keys", "unknown", "unknown_seeds", "steps_max", "ops_per_key_p99", "ops_per_key_max"}`.
fn linearizable_json<S: Serializer>(cost: &LinearizableCost, serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Json {
        keys: u64,
        unknown: u64,
        unknown_seeds: u64,
        steps_max: u64,
        ops_per_key_p99: u64,
        ops_per_key_max: u64,
    }
    Json {
        keys: cost.keys,
        unknown: cost.unknown,
        unknown_seeds: cost.unknown_seeds,
        steps_max: cost.steps_max,
        ops_per_key_p99: cost.ops_per_key_quantile(990),
        ops_per_key_max: cost.ops_per_key.max(),
    }
    .serialize(serializer)
}

/// The first `max` examples of a kind, and how many more there were.
#[derive(Debug)]
pub struct Examples<T> {
    pub kept: Vec<T>,
    pub left_out: u64,
    max: usize,
}

impl<T> Examples<T> {
    pub fn new(max: usize) -> Examples<T> {
        Examples { kept: Vec::new(), left_out: 0, max }
    }

    pub fn push(&mut self, example: T) {
        if self.kept.len() < self.max {
            self.kept.push(example);
        } else {
            self.left_out += 1;
        }
    }

    pub fn extend(&mut self, examples: impl IntoIterator<Item = T>) {
        for example in examples {
            self.push(example);
        }
    }
}

impl Summary {
    pub fn add(&mut self, seed: SeedFacts<'_>) {
        self.seeds_run += 1;
        self.failing_seeds += u64::from(!seed.properties.is_empty());
        let mut seen: Vec<Property> = Vec::new();
        for &property in seed.properties {
            let count = self.by_property.entry(property).or_default();
            count.violations += 1;
            if !seen.contains(&property) {
                seen.push(property);
                count.seeds += 1;
            }
        }
        self.lease_exposures += seed.lease_exposures;
        self.lease_exposure_seeds += u64::from(seed.lease_exposures > 0);
        self.sim_ms += seed.sim_ms;
        self.messages += seed.messages;
        if let Some(availability) = &seed.availability {
            self.availability.0 += 1;
            self.availability.1.add(availability);
        }
        if let Some(probes) = seed.probes {
            self.coverage.add(probes);
        }
    }

    /// The lines before the last one: per property, then lease exposures
    /// (none when there is nothing to say).
    pub fn detail_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.by_property.is_empty() {
            let parts: Vec<String> = self
                .by_property
                .iter()
                .map(|(property, count)| {
                    format!("{property} {}, {}", plural(count.seeds, "seed"), plural(count.violations, "violation"))
                })
                .collect();
            lines.push(format!("by property: {}", parts.join("; ")));
        }
        let (seeds, a) = &self.availability;
        if *seeds > 0 {
            lines.push(format!(
                "availability: during faults {} of {} requests answered ({:.1}%), {}; after the heal {} of {} \
                 ({:.1}%), {}",
                a.fault_answered,
                a.fault_requests,
                100.0 * a.fault_answered_share(),
                plural(a.fault_grants, "grant"),
                a.healed_answered,
                a.healed_requests,
                100.0 * a.healed_answered_share(),
                plural(a.healed_grants, "grant"),
            ));
        }
        if self.lease_exposures > 0 {
            lines.push(format!(
                "lease exposures: {} in {} (not violations: an assumption was broken)",
                self.lease_exposures,
                plural(self.lease_exposure_seeds, "seed")
            ));
        }
        lines
    }

    /// The line after the summary's that points at the first seed with a
    /// lease exposure (`replay` is that seed's replay line).
    pub fn exposure_line(seed: u64, replay: &str) -> String {
        format!("  the first is seed {seed}, explained in its trace (EXPOSURE lines): {replay} --trace")
    }

    /// The lines that say which keys `linearizable` left undecided, pointing
    /// at the first seed with one (`replay` is its replay line); none when
    /// every key was decided. A hunt's "0 failing" does not cover those keys.
    pub fn undecided_lines(&self, first: Option<(u64, &str)>) -> Vec<String> {
        let cost = &self.linearizable;
        if cost.unknown == 0 {
            return Vec::new();
        }
        // Records keep the keys not judged, not the keys judged: a merge
        // says how many were not judged, of an unknown whole.
        let of = if cost.keys == 0 {
            plural(cost.unknown, "key")
        } else {
            format!("{} of {}", cost.unknown, plural(cost.keys, "key"))
        };
        let mut lines = vec![format!(
            "linearizable: {of} in {} not judged (the search reached its bound: neither passed nor failed)",
            plural(cost.unknown_seeds, "seed")
        )];
        if let Some((seed, replay)) = first {
            lines.push(format!("  the first is seed {seed}, its key named (UNDECIDED line): {replay}"));
        }
        lines
    }

    /// The coverage line after the summary's (none when no seed reported its probes).
    pub fn coverage_line(&self) -> Option<String> {
        (!self.coverage.is_empty()).then(|| self.coverage.line())
    }

    /// The last line, as `hunt` has always printed it.
    /// The hunt's last line. `ran` is the seeds run in `wall_ms` and their
    /// simulated ms: a resumed hunt's speed counts only the seeds it ran,
    /// not those read back from its records file.
    pub fn last_line(&self, variant: &str, wall_ms: u64, (ran, ran_sim_ms): (u64, u64)) -> String {
        if ran == 0 && self.seeds_run > 0 {
            return format!(
                "hunt: {} of variant {variant}, {} failing; every one read from the records file, none run, {}",
                plural(self.seeds_run, "seed"),
                self.failing_seeds,
                plural(self.messages, "message")
            );
        }
        let wall_s = (wall_ms as f64 / 1_000.0).max(0.001);
        format!(
            "hunt: {} of variant {variant}, {} failing; {:.1} seeds/s, {:.0} simulated s in {:.1} s wall ({:.0}x real time), {}",
            plural(self.seeds_run, "seed"),
            self.failing_seeds,
            ran as f64 / wall_s,
            ran_sim_ms as f64 / 1_000.0,
            wall_s,
            ran_sim_ms as f64 / 1_000.0 / wall_s,
            plural(self.messages, "message")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{Examples, SeedFacts, Summary};
    use crate::run::figures::Sketch;
    use crate::run::sweep::LinearizableCost;
    use fencelock::Property;

    #[test]
    fn examples_keep_the_first_n_and_count_the_rest() {
        let mut examples = Examples::new(3);
        examples.extend(0..1_000_000_u64);
        assert_eq!(examples.kept, vec![0, 1, 2], "the first ones, in order");
        assert_eq!(examples.left_out, 999_997);
        assert!(examples.kept.capacity() <= 4, "memory holds 3 examples, not a million");
    }

    #[test]
    fn the_summary_stays_the_same_size_whatever_the_seed_count() {
        // A million seeds' linearizable costs, 1..=5,000 operations per key:
        // the sketch has as many counters after 10,000 seeds as after a
        // million, and its percentiles are within its stated error (0.1%).
        let mut summary = Summary::default();
        let mut buckets_at_10_000 = 0;
        for seed in 0..1_000_000_u64 {
            let mut cost = LinearizableCost { keys: 1, ..LinearizableCost::default() };
            cost.ops_per_key.add_n(seed % 5_000 + 1, 1);
            summary.linearizable.add(&cost);
            summary.add(SeedFacts {
                properties: &[],
                sim_ms: 1,
                messages: 1,
                lease_exposures: 0,
                availability: None,
                probes: None,
            });
            if seed == 9_999 {
                buckets_at_10_000 = summary.linearizable.ops_per_key.buckets();
            }
        }
        assert_eq!(summary.linearizable.ops_per_key.buckets(), buckets_at_10_000, "no per-seed state");
        assert_eq!((summary.seeds_run, summary.linearizable.keys), (1_000_000, 1_000_000));
        for (permille, exact) in [(500, 2_500_u64), (990, 4_950), (1_000, 5_000)] {
            let sketched = summary.linearizable.ops_per_key_quantile(permille);
            let error = sketched.abs_diff(exact) as f64 / exact as f64;
            assert!(error <= 1.0 / 1_024.0, "p{permille}: {sketched} for {exact}");
        }
    }

    #[test]
    fn the_sketch_is_exact_below_2048_and_within_its_error_above() {
        let mut sketch = Sketch::default();
        assert_eq!(sketch.percentile(990), None);
        for value in 1..=1_000 {
            sketch.add_n(value, 1);
        }
        assert_eq!((sketch.percentile(500), sketch.percentile(990), sketch.max()), (Some(500), Some(990), 1_000));
        let mut wide = Sketch::default();
        for value in (0..100_000_u64).map(|i| 10_000 + i * 997) {
            wide.add_n(value, 1);
        }
        let p99_exact = 10_000 + 98_999 * 997;
        let p99 = wide.percentile(990).unwrap();
        assert!(p99.abs_diff(p99_exact) as f64 <= p99_exact as f64 / 1_024.0, "{p99} for {p99_exact}");
    }

    #[test]
    fn seeds_and_violations_are_counted_apart() {
        let mut summary = Summary::default();
        let twice = [Property::FencedWrite, Property::FencedWrite, Property::Liveness];
        summary.add(SeedFacts {
            properties: &twice,
            sim_ms: 10,
            messages: 5,
            lease_exposures: 0,
            availability: None,
            probes: None,
        });
        summary.add(SeedFacts {
            properties: &[Property::FencedWrite],
            sim_ms: 10,
            messages: 5,
            lease_exposures: 2,
            availability: None,
            probes: None,
        });
        summary.add(SeedFacts {
            properties: &[],
            sim_ms: 10,
            messages: 5,
            lease_exposures: 0,
            availability: None,
            probes: None,
        });
        assert_eq!((summary.seeds_run, summary.failing_seeds), (3, 2));
        let fenced = summary.by_property[&Property::FencedWrite];
        assert_eq!((fenced.seeds, fenced.violations), (2, 3));
        assert_eq!((summary.lease_exposures, summary.lease_exposure_seeds), (2, 1));
        assert_eq!(
            summary.detail_lines()[0],
            "by property: fenced-write 2 seeds, 3 violations; liveness 1 seed, 1 violation"
        );
    }

    #[test]
    fn undecided_keys_are_counted_with_their_seeds_and_the_first_is_named() {
        let mut summary = Summary::default();
        assert!(summary.undecided_lines(None).is_empty(), "nothing to say when every key was decided");
        for unknown in [0, 2, 0, 1] {
            let cost =
                LinearizableCost { keys: 2, unknown, unknown_seeds: u64::from(unknown > 0), ..Default::default() };
            summary.linearizable.add(&cost);
        }
        let lines = summary.undecided_lines(Some((7, "fencesim replay --seed 7")));
        assert_eq!(
            lines,
            [
                "linearizable: 3 of 8 keys in 2 seeds not judged (the search reached its bound: neither passed nor \
                 failed)",
                "  the first is seed 7, its key named (UNDECIDED line): fencesim replay --seed 7",
            ]
        );
    }
}
