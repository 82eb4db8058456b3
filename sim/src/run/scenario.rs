//! Scenario files (CLI.md): a seed, a model, a variant and the expected
//! outcome — the regression corpus in `seeds/` is made of them.

use crate::faults::{self, FaultEvent};
use crate::history::EventKind;
use crate::model::{parse_variant, toml_error, Model};
use crate::run::log::{LogSettings, Record};
use crate::run::seed::{run_plan, run_plan_told, run_seed, run_seed_told, Outcome};
use fencelock::{ApplyResult, Command, Probe};
use fencelock::{Property, Variant};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub name: String,
    pub seed: u64,
    #[serde(default = "default_variant")]
    pub variant: String,
    pub expect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postmortem: Option<String>,
    /// Behaviours the seed must still show (extension of CLI.md): keeps a
    /// pinned seed honest when the fault model or workload changes. See
    /// [`BEHAVIOURS`]; a coverage probe's name (`fencelock::Probe`) also
    /// counts, shown when the run reached it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exhibits: Vec<String>,
    /// The run's own fault plan (extension of CLI.md), as `shrink` writes
    /// it: when present it replaces the plan drawn from the seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<Vec<FaultEvent>>,
    #[serde(default)]
    pub model: Model,
}

/// What a scenario can require its run to exhibit, with how it is seen.
pub const BEHAVIOURS: &[(&str, &str)] = &[
    ("stale-write-rejected", "the resource rejected a write with a stale token"),
    ("cluster-restore", "the whole cluster was restored from a backup"),
    ("node-restore", "one node was restored from a stale backup of its own disk"),
    ("ghost-release", "a leader released a ghost lock"),
    ("late-expire", "an Expire was applied after its lock was gone (Expired { existed: false })"),
    ("lease-exposure", "two clients believed they held a key at once while a clock was beyond its bound"),
];

/// The behaviours of [`BEHAVIOURS`] a run showed, and the names of the
/// coverage probes it reached.
pub fn exhibited(outcome: &Outcome) -> Vec<&'static str> {
    let mut seen = std::collections::BTreeSet::new();
    if outcome.stale_writes_rejected > 0 {
        seen.insert("stale-write-rejected");
    }
    if outcome.lease_exposures > 0 {
        seen.insert("lease-exposure");
    }
    for event in outcome.history.events() {
        match &event.kind {
            EventKind::ClusterRestored { .. } => {
                seen.insert("cluster-restore");
            }
            EventKind::NodeRestored { .. } => {
                seen.insert("node-restore");
            }
            EventKind::GhostReleaseProposed { .. } => {
                seen.insert("ghost-release");
            }
            EventKind::Applied {
                command: Command::Expire { .. },
                result: ApplyResult::Expired { existed: false },
                ..
            } => {
                seen.insert("late-expire");
            }
            _ => {}
        }
    }
    // A coverage probe the run reached counts as shown under its name.
    seen.extend(outcome.probes.iter().map(Probe::name));
    seen.into_iter().collect()
}

fn default_variant() -> String {
    "default".to_string()
}

/// A parsed and validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub file: ScenarioFile,
    pub model: Model,
}

impl Scenario {
    /// Parses a scenario file's text; `origin` (the path) names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario, String> {
        let file: ScenarioFile = toml::from_str(text).map_err(|e| toml_error(origin, text, &e))?;
        let variant: Variant = parse_variant(&file.variant).map_err(|e| format!("{origin}: {e}"))?;
        if file.expect != "pass" {
            file.expect
                .parse::<Property>()
                .map_err(|e| format!("{origin}: `expect` must be \"pass\" or a property: {e}"))?;
        }
        file.model.validate().map_err(|e| format!("{origin}: {e}"))?;
        let known = |b: &String| BEHAVIOURS.iter().any(|(name, _)| name == b) || b.parse::<Probe>().is_ok();
        if let Some(unknown) = file.exhibits.iter().find(|b| !known(b)) {
            let known: Vec<&str> = BEHAVIOURS.iter().map(|(name, _)| *name).collect();
            return Err(format!(
                "{origin}: unknown behaviour `{unknown}` in `exhibits` (known: {}, or a coverage probe: docs/COVERAGE.md)",
                known.join(", ")
            ));
        }
        let model = Model { variant, ..file.model.clone() };
        if let Some(plan) = &file.faults {
            faults::validate(plan, &model).map_err(|e| format!("{origin}: `faults`: {e}"))?;
        }
        Ok(Scenario { file, model })
    }

    /// Runs the scenario: its own fault plan when it carries one, else the seed's.
    pub fn run(&self) -> Outcome {
        match &self.file.faults {
            Some(plan) => run_plan(self.file.seed, &self.model, plan.clone()),
            None => run_seed(self.file.seed, &self.model),
        }
    }

    /// `run`, telling the run to `tracing` (`run::log`).
    pub fn run_told(&self, log: &LogSettings) -> (Outcome, Vec<Record>) {
        match &self.file.faults {
            Some(plan) => run_plan_told(self.file.seed, &self.model, plan.clone(), log),
            None => run_seed_told(self.file.seed, &self.model, log),
        }
    }

    /// Whether an outcome is what the scenario expects, and shows every
    /// behaviour the scenario says it exhibits.
    pub fn matches(&self, outcome: &Outcome) -> bool {
        expectation_met(&self.file.expect, outcome) && self.missing_behaviours(outcome).is_empty()
    }

    /// The required behaviours the run did not show.
    pub fn missing_behaviours(&self, outcome: &Outcome) -> Vec<String> {
        let shown = exhibited(outcome);
        self.file.exhibits.iter().filter(|b| !shown.contains(&b.as_str())).cloned().collect()
    }
}

/// "pass" wants no violation; a property id wants that property violated.
pub fn expectation_met(expect: &str, outcome: &Outcome) -> bool {
    if expect == "pass" {
        outcome.violations.is_empty()
    } else {
        outcome.violations.iter().any(|v| v.property.id() == expect)
    }
}

/// A scenario file for a failing seed, as `hunt --save` writes it.
pub fn for_failure(outcome: &Outcome, model: &Model) -> String {
    let first = &outcome.violations[0];
    let file = ScenarioFile {
        name: format!("{}-seed-{}", first.property, outcome.seed),
        seed: outcome.seed,
        variant: model.variant.name().to_string(),
        expect: first.property.to_string(),
        postmortem: Some(format!("found by hunt: {}", first.detail)),
        exhibits: Vec::new(),
        faults: None,
        model: model.clone(),
    };
    toml::to_string(&file).expect("a scenario always serializes")
}
