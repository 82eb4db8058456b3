//! The shrunk scenario file: a scenario (CLI.md) with its own `faults`
//! array, one inline table per event under a comment saying what it does,
//! and a postmortem that names each fault, the violation and the robustness.

use super::Report;
use crate::faults::FaultEvent;
use crate::run::scenario::ScenarioFile;

/// The scenario file text of a shrunk case.
pub fn scenario_toml(report: &Report, name: &str, exhibits: Vec<String>) -> String {
    let case = &report.case;
    let file = ScenarioFile {
        name: name.to_string(),
        seed: case.seed,
        variant: case.model.variant.name().to_string(),
        expect: report.property.clone(),
        postmortem: Some(postmortem(report)),
        exhibits,
        faults: None,
        model: case.model.clone(),
    };
    let text = toml::to_string(&file).expect("a scenario always serializes");
    let at = text.find("\n[model]").map_or(text.len(), |i| i + 1);
    format!("{}{}{}", &text[..at], faults_toml(&case.plan), &text[at..])
}

/// `faults = [...]`: one event per line, each under a comment in words.
pub fn faults_toml(plan: &[FaultEvent]) -> String {
    if plan.is_empty() {
        return "faults = []\n".to_string();
    }
    let mut out = String::from("faults = [\n");
    for event in plan {
        out.push_str(&format!("    # {} ms: {}\n", event.at_ms, event.fault));
        let value = toml::Value::try_from(event).expect("a fault event is a TOML table");
        out.push_str(&format!("    {},\n", inline(&value)));
    }
    out.push_str("]\n");
    out
}

/// A TOML value on one line (tables inline).
fn inline(value: &toml::Value) -> String {
    match value {
        toml::Value::Table(table) => {
            let fields: Vec<String> = table.iter().map(|(k, v)| format!("{k} = {}", inline(v))).collect();
            format!("{{ {} }}", fields.join(", "))
        }
        toml::Value::Array(items) => format!("[{}]", items.iter().map(inline).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

/// What the shrink found, in sentences a reader checks against `run FILE --trace`.
pub fn postmortem(report: &Report) -> String {
    let (before, after, model) = (&report.before, &report.after, &report.case.model);
    let mut out = format!(
        "Shrunk by `fencesim shrink` from {} faults, {} trace lines and {} simulated ms to {} faults, {} lines and {} ms \
         ({}, {}, {}{}).\n",
        before.faults,
        before.trace_lines,
        before.sim_ms,
        after.faults,
        after.trace_lines,
        after.sim_ms,
        crate::plural(model.nodes, "server"),
        crate::plural(model.clients, "worker"),
        crate::plural(model.keys, "key"),
        model.jobs_max.map(|j| format!(", {j} jobs each")).unwrap_or_default()
    );
    out.push_str(&format!("The flaw ({}): {}\n", model.variant.name(), model.variant.info().about));
    if !report.minimal {
        out.push_str(&format!(
            "The shrink stopped before it could prove each of the {} remaining faults needed: the plan is \
             smaller, not shown 1-minimal.\n",
            report.case.plan.len()
        ));
    } else if report.needed.is_empty() {
        out.push_str("No fault is needed: the workload alone breaks the property.\n");
    }
    for needed in &report.needed {
        out.push_str(&format!(
            "Needed: {} ms {} (without it the run {}).\n",
            needed.at_ms, needed.fault, needed.without
        ));
    }
    out.push_str(&format!("Violation: {}\n", report.violation));
    if let Some(robustness) = &report.robustness {
        out.push_str(&format!("{}.", capitalized(&robustness.label())));
    }
    out.trim_end().to_string()
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}
