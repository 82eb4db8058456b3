//! Scenario files (CLI.md): a seed, a model, a variant and the expected
//! outcome — the regression corpus in `seeds/` is made of them.

use crate::model::{one_line, Model};
use crate::run::Outcome;
use fencelock::Variant;
use serde::{Deserialize, Serialize};

/// Every property id the checker reports, plus the harness's own.
pub const PROPERTIES: &[&str] = &[
    "election-safety",
    "apply-agreement",
    "commit-durability",
    "token-monotonic",
    "fenced-write",
    "equal-token",
    "expire-safety",
    "grant-validity",
    "lease-exclusion",
    "liveness",
    "determinism",
    "panic",
];

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
    #[serde(default)]
    pub model: Model,
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
        let file: ScenarioFile = toml::from_str(text).map_err(|e| format!("{origin}: {}", one_line(&e.to_string())))?;
        let variant: Variant = file.variant.parse().map_err(|e| format!("{origin}: {e}"))?;
        if file.expect != "pass" && !PROPERTIES.contains(&file.expect.as_str()) {
            return Err(format!(
                "{origin}: `expect` must be \"pass\" or a property id ({}), got \"{}\"",
                PROPERTIES.join(", "),
                file.expect
            ));
        }
        file.model.validate().map_err(|e| format!("{origin}: {e}"))?;
        let model = Model { variant, ..file.model.clone() };
        Ok(Scenario { file, model })
    }

    /// Whether an outcome is what the scenario expects.
    pub fn matches(&self, outcome: &Outcome) -> bool {
        expectation_met(&self.file.expect, outcome)
    }
}

/// "pass" wants no violation; a property id wants that property violated.
pub fn expectation_met(expect: &str, outcome: &Outcome) -> bool {
    if expect == "pass" {
        outcome.violations.is_empty()
    } else {
        outcome.violations.iter().any(|v| v.property == expect)
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
        model: model.clone(),
    };
    toml::to_string(&file).expect("a scenario always serializes")
}
