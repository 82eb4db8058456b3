//! Coverage over many seeds: how many seeds reached each probe
//! (`fencelock::probe`), folded in one seed at a time like the rest of the
//! summary (a count per probe, nothing per seed). `hunt` and `merge` print
//! one line of it after the summary, `--coverage` the whole table, and
//! `--json` a `coverage` list.

use fencelock::{Probe, ProbeSet};
use serde::{Serialize, Serializer};
use std::io::IsTerminal;

/// The rarest probes the one-line report names.
const RAREST_NAMED: usize = 3;
/// The never-reached probes the one-line report names before counting the rest.
const NEVER_NAMED: usize = 3;

/// Seeds per probe over the seeds that reported their probes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Seeds folded in with their probes (records of older versions have none).
    pub seeds: u64,
    /// Seeds that reached each probe, in `Probe::ALL`'s order (empty until the first seed).
    counts: Vec<u64>,
}

impl Coverage {
    pub fn add(&mut self, probes: ProbeSet) {
        if self.counts.is_empty() {
            self.counts = vec![0; Probe::ALL.len()];
        }
        self.seeds += 1;
        for (count, probe) in self.counts.iter_mut().zip(Probe::ALL) {
            *count += u64::from(probes.contains(*probe));
        }
    }

    /// Probes reached by at least one seed.
    pub fn reached(&self) -> u64 {
        self.counts.iter().filter(|seeds| **seeds > 0).count() as u64
    }

    /// No seed folded in reported its probes.
    pub fn is_empty(&self) -> bool {
        self.seeds == 0
    }

    /// Seeds that reached `probe`.
    pub fn seeds_of(&self, probe: Probe) -> u64 {
        Probe::ALL.iter().position(|p| *p == probe).and_then(|i| self.counts.get(i).copied()).unwrap_or(0)
    }

    /// Every probe with its seeds, fewest first (never reached first), ties
    /// in declaration order.
    pub fn rarest_first(&self) -> Vec<(Probe, u64)> {
        let mut rows: Vec<(Probe, u64)> = Probe::ALL.iter().map(|p| (*p, self.seeds_of(*p))).collect();
        rows.sort_by_key(|(_, seeds)| *seeds);
        rows
    }

    /// The probes no seed reached.
    pub fn never_reached(&self) -> Vec<Probe> {
        self.rarest_first().into_iter().filter(|(_, seeds)| *seeds == 0).map(|(probe, _)| probe).collect()
    }

    /// One line: how many probes were reached, the ones never reached and the rarest.
    pub fn line(&self) -> String {
        let rows = self.rarest_first();
        let never: Vec<&str> = rows.iter().filter(|(_, s)| *s == 0).map(|(p, _)| p.name()).collect();
        let mut line = format!("coverage: {} of {} probes reached", self.reached(), rows.len());
        if !never.is_empty() {
            let more = never.len().saturating_sub(NEVER_NAMED);
            let named = never[..never.len().min(NEVER_NAMED)].join(", ");
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            line.push_str(&format!("; never: {named}{more}"));
        }
        let rarest: Vec<String> = rows
            .iter()
            .filter(|(_, s)| *s > 0)
            .take(RAREST_NAMED)
            .map(|(p, s)| format!("{p} {}", crate::plural(*s, "seed")))
            .collect();
        if !rarest.is_empty() {
            line.push_str(&format!("; rarest: {}", rarest.join(", ")));
        }
        line.push_str(" (--coverage lists them all)");
        line
    }

    /// The whole table: seeds, probe, why; never reached first (in red
    /// where stdout is a terminal with colour, `color`), then the rarest.
    pub fn table(&self, color: bool) -> Vec<String> {
        let width = Probe::ALL.iter().map(|p| p.name().len()).max().unwrap_or(0);
        let mut lines = vec![format!("{:>7}  {:<width$}  why", "seeds", "probe")];
        for (probe, seeds) in self.rarest_first() {
            let row = format!("{seeds:>7}  {:<width$}  {}", probe.name(), probe.why());
            lines.push(if seeds == 0 && color { format!("\x1b[31m{row}\x1b[0m") } else { row });
        }
        lines
    }
}

/// Colour on stdout: a terminal, and `NO_COLOR` unset or empty (no-color.org).
pub fn stdout_has_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `[{"probe": name, "seeds": n}, …]` in declaration order.
impl Serialize for Coverage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Row {
            probe: &'static str,
            seeds: u64,
        }
        let rows: Vec<Row> = Probe::ALL.iter().map(|p| Row { probe: p.name(), seeds: self.seeds_of(*p) }).collect();
        rows.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::Coverage;
    use fencelock::{Probe, ProbeSet};

    #[test]
    fn counts_seeds_per_probe_and_lists_the_unreached_first() {
        let mut coverage = Coverage::default();
        let some: ProbeSet = [Probe::Compacted, Probe::SnapshotSent].into_iter().collect();
        coverage.add(some);
        coverage.add([Probe::Compacted].into_iter().collect());
        coverage.add(ProbeSet::default());
        assert_eq!((coverage.seeds, coverage.seeds_of(Probe::Compacted)), (3, 2));
        assert_eq!(coverage.seeds_of(Probe::SnapshotSent), 1);
        assert_eq!(coverage.never_reached().len(), Probe::ALL.len() - 2);
        let rows = coverage.rarest_first();
        assert_eq!(rows.last(), Some(&(Probe::Compacted, 2)));
        let line = coverage.line();
        assert!(line.starts_with(&format!("coverage: 2 of {} probes reached; never: ", Probe::ALL.len())), "{line}");
        assert!(line.contains("; rarest: snapshot-sent 1 seed, compacted 2 seeds"), "{line}");
        let table = coverage.table(true);
        assert!(table[1].starts_with("\x1b[31m"), "never reached is red: {}", table[1]);
        assert!(!coverage.table(false)[1].contains('\x1b'));
        assert_eq!(table.len(), Probe::ALL.len() + 1);
    }

    #[test]
    fn memory_is_a_count_per_probe_whatever_the_seed_count() {
        let mut coverage = Coverage::default();
        let all: ProbeSet = Probe::ALL.iter().copied().collect();
        for _ in 0..100_000 {
            coverage.add(all);
        }
        assert_eq!(coverage.counts.len(), Probe::ALL.len());
        assert!(coverage.never_reached().is_empty());
        assert!(!coverage.line().contains("never"));
    }
}
