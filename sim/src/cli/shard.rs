//! `hunt --shard I/N`: this process's share of the seed range. Seed `s`
//! belongs to shard `s mod N`, whatever the range: the assignment depends on
//! the seed and `N` alone, so two runs with the same `N` split a range the
//! same way, and a wider range only adds seeds to each shard.

use crate::cli::args::InputError;

/// The engines' index variables `--shard auto/N` reads, first set wins:
/// Kubernetes Indexed Jobs, then Slurm job arrays.
pub const INDEX_VARIABLES: [&str; 2] = ["JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID"];

/// Most shards (a limit like any other; far beyond any engine's array size).
pub const SHARDS_MAX: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    pub fn contains(self, seed: u64) -> bool {
        seed % self.count == self.index
    }

    /// How many seeds of `seeds` are this shard's (without walking the range).
    pub fn count_in(self, seeds: &std::ops::Range<u64>) -> u64 {
        // Seeds below `x` in this shard: one per whole cycle of N, and one
        // more if the partial cycle reaches past the index.
        let below = |x: u64| x / self.count + u64::from(x % self.count > self.index);
        below(seeds.end) - below(seeds.start)
    }
}

/// Parses `I/N` or `auto/N`; `lookup` reads an environment variable.
pub fn parse_shard(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Shard, InputError> {
    let malformed = || InputError(format!("--shard must be I/N or auto/N with 0 <= I < N, got `{text}`"));
    let (index_text, count_text) = text.split_once('/').ok_or_else(malformed)?;
    let count: u64 = count_text.trim().parse().map_err(|_| malformed())?;
    if count == 0 || count > SHARDS_MAX {
        return Err(InputError(format!("--shard {text}: N must be 1..={SHARDS_MAX}")));
    }
    let (index_text, origin) = if index_text.trim() == "auto" {
        let found = INDEX_VARIABLES.iter().find_map(|name| lookup(name).map(|value| (value, *name)));
        let (value, name) = found.ok_or_else(|| {
            InputError(format!("--shard auto/{count}: neither {} is set", INDEX_VARIABLES.join(" nor ")))
        })?;
        let origin = format!("{name}={}", value.trim());
        (value, origin)
    } else {
        (index_text.to_string(), format!("--shard {text}"))
    };
    let index: u64 =
        index_text.trim().parse().map_err(|_| InputError(format!("{origin}: the index is not a number")))?;
    if index >= count {
        return Err(InputError(format!("{origin}: the index must be below the shard count {count}")));
    }
    Ok(Shard { index, count })
}

#[cfg(test)]
mod tests {
    use super::{parse_shard, Shard};

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn explicit_and_auto_indexes() {
        assert_eq!(parse_shard("2/4", env(&[])).unwrap(), Shard { index: 2, count: 4 });
        assert_eq!(parse_shard("auto/4", env(&[("SLURM_ARRAY_TASK_ID", "3")])).unwrap().index, 3);
        let both = env(&[("JOB_COMPLETION_INDEX", "1"), ("SLURM_ARRAY_TASK_ID", "3")]);
        assert_eq!(parse_shard("auto/4", both).unwrap().index, 1);
    }

    #[test]
    fn bad_shards_are_input_errors() {
        for bad in ["4/4", "1/0", "x/2", "1", "-1/2"] {
            assert!(parse_shard(bad, env(&[])).is_err(), "{bad}");
        }
        let error = parse_shard("auto/4", env(&[])).unwrap_err();
        assert!(error.0.contains("JOB_COMPLETION_INDEX"), "{}", error.0);
        let error = parse_shard("auto/4", env(&[("JOB_COMPLETION_INDEX", "7")])).unwrap_err();
        assert!(error.0.contains("JOB_COMPLETION_INDEX=7"), "{}", error.0);
    }

    #[test]
    fn every_seed_in_exactly_one_shard() {
        let shards: Vec<Shard> = (0..4).map(|index| Shard { index, count: 4 }).collect();
        for seed in 0..100 {
            assert_eq!(shards.iter().filter(|s| s.contains(seed)).count(), 1);
        }
        for shard in shards {
            for range in [0..100, 3..17, 5..6, 6..7, u64::MAX - 9..u64::MAX] {
                let walked = range.clone().filter(|&s| shard.contains(s)).count() as u64;
                assert_eq!(shard.count_in(&range), walked, "{shard:?} {range:?}");
            }
        }
    }
}
