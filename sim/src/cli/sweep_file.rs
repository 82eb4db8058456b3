//! Sweep files (`explore SWEEP.toml`, CLI.md "Explore"): a base model, one
//! to three axes over model keys, and the seeds every cell runs.
//!
//! Every cell's model is built and validated here, before anything runs, so
//! an unknown key, a bad value, an empty range or an unknown variant is one
//! error line naming the key. A cell's model goes through the model file's
//! own parsing and `Model::validate`: an axis can set only what a model file
//! can, with the same checks.

use crate::cli::args::{parse_seeds, InputError};
use crate::model::{did_you_mean, parse_variant, toml_error, Model, KEYS};
use fencelock::Variant;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use toml::{Spanned, Table, Value};

/// At most this many axes (a heatmap per value of the third).
pub const AXES_MAX: usize = 3;
/// Values of one axis.
pub const AXIS_VALUES_MAX: usize = 100;
/// Cells of one sweep.
pub const CELLS_MAX: usize = 1_000;

/// A parsed sweep: every cell's model is valid.
#[derive(Clone, Debug)]
pub struct SweepPlan {
    pub seeds: Range<u64>,
    pub axes: Vec<Axis>,
    /// In order: the first axis varies fastest.
    pub cells: Vec<Cell>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub key: String,
    pub values: Vec<Value>,
}

#[derive(Clone, Debug)]
pub struct Cell {
    /// One value per axis, in the axes' order.
    pub values: Vec<Value>,
    pub model: Model,
}

impl Cell {
    /// `lease_ms=500 pause_ms_max=3000`.
    pub fn label(&self, axes: &[Axis]) -> String {
        let pairs: Vec<String> =
            axes.iter().zip(&self.values).map(|(axis, value)| format!("{}={}", axis.key, show(value))).collect();
        pairs.join(" ")
    }
}

/// A value as a person writes it: strings without quotes.
pub fn show(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    sweep: RawSweep,
    #[serde(default)]
    model: Table,
    axes: BTreeMap<String, Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    /// A count `N` (seeds `0..N`) or a range `"A..B"`.
    seeds: Value,
    /// A model file, relative to the sweep file.
    model: Option<String>,
}

/// Reads and checks a sweep file.
pub fn load(path: &Path) -> Result<SweepPlan, InputError> {
    let origin = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| InputError(format!("cannot read sweep file {origin}: {e}")))?;
    let base_dir = path.parent().unwrap_or(Path::new("."));
    parse(&text, &origin, |name| {
        let model_path = base_dir.join(name);
        std::fs::read_to_string(&model_path)
            .map(|text| (model_path.display().to_string(), text))
            .map_err(|e| format!("cannot read model file {}: {e}", model_path.display()))
    })
}

/// Parses a sweep file's text; `read_model` reads the `[sweep] model` file
/// (its name and text). Errors start with `origin`.
pub fn parse(
    text: &str,
    origin: &str,
    read_model: impl Fn(&str) -> Result<(String, String), String>,
) -> Result<SweepPlan, InputError> {
    let fail = |message: String| InputError(format!("{origin}: {message}"));
    // A TOML error points at its place as a model file's does.
    let raw: RawFile = toml::from_str(text).map_err(|e| InputError(toml_error(origin, text, &e)))?;
    let seeds = seeds_of(&raw.sweep.seeds).map_err(fail)?;
    let base_file = raw.sweep.model.as_deref().map(&read_model).transpose().map_err(fail)?;
    let mut spanned: Vec<(String, Spanned<Value>)> = raw.axes.into_iter().collect();
    // Axes in the order the file writes them: the first is the x axis.
    spanned.sort_by_key(|(_, value)| value.span().start);
    if spanned.is_empty() || spanned.len() > AXES_MAX {
        return Err(fail(format!("[axes] must name 1 to {AXES_MAX} model keys, got {}", spanned.len())));
    }
    let known = model_keys();
    let not_a_key = |what: String, key: &str| {
        let hint = match did_you_mean(key, known.iter().map(String::as_str)) {
            Some(close) => format!("did you mean `{close}`?"),
            None => "`fencesim model` lists every key".to_string(),
        };
        fail(format!("{what} is not a model key; {hint}"))
    };
    let mut axes = Vec::new();
    for (key, value) in spanned {
        if !known.contains(&key) {
            return Err(not_a_key(format!("axis `{key}`"), &key));
        }
        let values = axis_values(&key, value.get_ref()).map_err(fail)?;
        axes.push(Axis { key, values });
    }
    for key in raw.model.keys() {
        if !known.contains(key) {
            return Err(not_a_key(format!("[model] key `{key}`"), key));
        }
        if axes.iter().any(|axis| &axis.key == key) {
            return Err(fail(format!("key `{key}` is both in [model] and an axis")));
        }
    }
    let count: usize = axes.iter().map(|axis| axis.values.len()).product();
    if count > CELLS_MAX {
        return Err(fail(format!("{count} cells: a sweep has at most {CELLS_MAX}")));
    }
    let mut cells = Vec::with_capacity(count);
    for index in 0..count {
        let mut rest = index;
        let mut values = Vec::with_capacity(axes.len());
        for axis in &axes {
            values.push(axis.values[rest % axis.values.len()].clone());
            rest /= axis.values.len();
        }
        let model = cell_model(base_file.as_ref(), &raw.model, &axes, &values).map_err(fail)?;
        cells.push(Cell { values, model });
    }
    Ok(SweepPlan { seeds, axes, cells })
}

fn seeds_of(value: &Value) -> Result<Range<u64>, String> {
    match value {
        Value::Integer(n) if *n >= 1 => Ok(0..*n as u64),
        Value::String(text) => parse_seeds(text)
            .map_err(|_| format!("[sweep] seeds must be a count or a range \"A..B\" with A < B, got \"{text}\"")),
        other => Err(format!("[sweep] seeds must be a count (at least 1) or a range \"A..B\", got {other}")),
    }
}

/// Every key a model file may set (the keys `fencesim model` lists and
/// `--set` takes), and `variant`, sorted.
pub fn model_keys() -> Vec<String> {
    let mut keys: Vec<String> = KEYS.iter().map(|key| key.name.to_string()).collect();
    keys.push("variant".to_string());
    keys.sort_unstable();
    keys
}

/// An axis's values: a non-empty list, or `{ from, to, step }` (inclusive).
fn axis_values(key: &str, value: &Value) -> Result<Vec<Value>, String> {
    let values = match value {
        Value::Array(values) => values.clone(),
        Value::Table(table) => range_values(key, table)?,
        other => {
            return Err(format!("axis `{key}` must be a list of values or {{ from, to, step }}, got {other}"));
        }
    };
    if values.is_empty() {
        return Err(format!("axis `{key}` has no values"));
    }
    if values.len() > AXIS_VALUES_MAX {
        return Err(format!("axis `{key}` has {} values; at most {AXIS_VALUES_MAX}", values.len()));
    }
    Ok(values)
}

fn range_values(key: &str, table: &Table) -> Result<Vec<Value>, String> {
    let names: Vec<&str> = table.keys().map(String::as_str).collect();
    if names != ["from", "step", "to"] {
        return Err(format!("axis `{key}`: a range is {{ from, to, step }}, got {{ {} }}", names.join(", ")));
    }
    let (from, to, step) = (&table["from"], &table["to"], &table["step"]);
    if let (Value::Integer(from), Value::Integer(to), Value::Integer(step)) = (from, to, step) {
        if *step <= 0 {
            return Err(format!("axis `{key}`: step must be positive, got {step}"));
        }
        if from > to {
            return Err(format!("axis `{key}`: the range {from} to {to} is empty"));
        }
        let count = (to - from) / step + 1;
        if count as usize > AXIS_VALUES_MAX {
            return Err(format!("axis `{key}` has {count} values; at most {AXIS_VALUES_MAX}"));
        }
        return Ok((0..count).map(|i| Value::Integer(from + i * step)).collect());
    }
    let number = |v: &Value| match v {
        Value::Integer(n) => Some(*n as f64),
        Value::Float(x) => Some(*x),
        _ => None,
    };
    let (Some(from), Some(to), Some(step)) = (number(from), number(to), number(step)) else {
        return Err(format!("axis `{key}`: from, to and step must be numbers"));
    };
    if step.is_nan() || step <= 0.0 {
        return Err(format!("axis `{key}`: step must be positive, got {step}"));
    }
    if from.is_nan() || to.is_nan() || from > to {
        return Err(format!("axis `{key}`: the range {from} to {to} is empty"));
    }
    // Each value from its index, so steps do not accumulate rounding; the
    // end is kept when it is within a millionth of a step.
    let count = ((to - from) / step + 1e-6).floor() + 1.0;
    if count > AXIS_VALUES_MAX as f64 {
        return Err(format!("axis `{key}` has {count} values; at most {AXIS_VALUES_MAX}"));
    }
    Ok((0..count as usize).map(|i| Value::Float(round9(from + i as f64 * step))).collect())
}

fn round9(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

/// The model of one cell: the variant's (or the model file's) model, the
/// `[model]` keys over it, then the cell's axis values, checked as a model file is.
fn cell_model(
    base_file: Option<&(String, String)>,
    keys: &Table,
    axes: &[Axis],
    values: &[Value],
) -> Result<Model, String> {
    let mut overlay: Vec<(&str, &Value)> = keys.iter().map(|(k, v)| (k.as_str(), v)).collect();
    overlay.extend(axes.iter().zip(values).map(|(axis, value)| (axis.key.as_str(), value)));
    let named = |key: &str, value: &Value| -> String {
        if axes.iter().any(|axis| axis.key == key) {
            format!("axis `{key}` value {value}")
        } else {
            format!("[model] key `{key}` = {value}")
        }
    };
    let mut variant = Variant::Default;
    for (key, value) in &overlay {
        if *key == "variant" {
            let Value::String(name) = value else {
                return Err(format!("{}: a variant is a name (see `fencesim variants`)", named(key, value)));
            };
            variant = parse_variant(name).map_err(|e| format!("{}: {e}", named(key, value)))?;
        }
    }
    let base = match base_file {
        Some((name, text)) => Model::from_toml(text, name)?,
        None => Model::declared(variant),
    };
    // The keys go through the parser `--set` uses: one vocabulary, one set of checks.
    let keys =
        overlay.iter().filter(|(key, _)| *key != "variant").map(|(key, value)| (*key, *value, named(key, value)));
    let mut model = base.with_keys(keys)?;
    model.variant = variant;
    model.validate().map_err(|e| {
        let cell: Vec<String> = axes.iter().zip(values).map(|(a, v)| format!("{}={}", a.key, show(v))).collect();
        format!("cell {}: {e}", cell.join(" "))
    })?;
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::{parse, SweepPlan};
    use toml::Value;

    fn sweep(text: &str) -> Result<SweepPlan, String> {
        let models = |name: &str| match name {
            "small.toml" => Ok(("small.toml".to_string(), "nodes = 3\nsafety_ms = 5000\n".to_string())),
            other => Err(format!("cannot read model file {other}: not found")),
        };
        parse(text, "s.toml", models).map_err(|e| e.0)
    }

    fn error(text: &str) -> String {
        sweep(text).expect_err("a bad sweep file")
    }

    #[test]
    fn axes_keep_the_file_order_and_the_first_varies_fastest() {
        let plan = sweep(
            "[sweep]\nseeds = 20\n[model]\nclock_steps = false\n\
             [axes]\npause_ms_max = [1000, 3000]\nlease_ms = { from = 500, to = 1500, step = 500 }\n",
        )
        .unwrap();
        assert_eq!(plan.seeds, 0..20);
        let keys: Vec<&str> = plan.axes.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["pause_ms_max", "lease_ms"]);
        assert_eq!(plan.axes[1].values, [Value::Integer(500), Value::Integer(1000), Value::Integer(1500)]);
        assert_eq!(plan.cells.len(), 6);
        let c = &plan.cells[1];
        assert_eq!((c.model.pause_ms_max, c.model.lease_ms, c.model.clock_steps), (3_000, 500, false));
        assert_eq!(c.label(&plan.axes), "pause_ms_max=3000 lease_ms=500");
        assert_eq!(plan.cells[5].model.lease_ms, 1_500);
    }

    #[test]
    fn variants_a_model_file_a_seed_range_and_float_ranges() {
        let plan = sweep(
            "[sweep]\nseeds = \"100..110\"\nmodel = \"small.toml\"\n\
             [axes]\nvariant = [\"default\", \"sink-unfenced\"]\nloss_rate = { from = 0.0, to = 0.3, step = 0.1 }\n",
        )
        .unwrap();
        assert_eq!(plan.seeds, 100..110);
        assert_eq!(plan.axes[1].values.len(), 4, "0.3 is reached despite rounding");
        assert_eq!(plan.axes[1].values[3], Value::Float(0.3));
        let c = &plan.cells[1];
        assert_eq!((c.model.variant, c.model.nodes, c.model.safety_ms), (fencelock::Variant::SinkUnfenced, 3, 5_000));
        // Without a model file a variant runs on its declared model, as `hunt --variant` does.
        let plan =
            sweep("[sweep]\nseeds = 1\n[axes]\nvariant = [\"default\", \"commit-old-term-by-count\"]\n").unwrap();
        let declared = crate::model::Model::declared(fencelock::Variant::CommitOldTermByCount);
        assert_eq!(plan.cells[1].model, declared);
    }

    #[test]
    fn bad_files_are_one_line_naming_the_key() {
        let cases = [
            (
                "[sweep]\nseeds = 5\n[axes]\nleese_ms = [1]\n",
                "s.toml: axis `leese_ms` is not a model key; did you mean `lease_ms`?",
            ),
            (
                "[sweep]\nseeds = 5\n[axes]\nlease_ms = [50, 500]\n",
                "s.toml: cell lease_ms=50: model key `lease_ms` must be in 100..=600000, got 50",
            ),
            (
                "[sweep]\nseeds = 5\n[axes]\nlease_ms = { from = 900, to = 500, step = 100 }\n",
                "s.toml: axis `lease_ms`: the range 900 to 500 is empty",
            ),
            (
                "[sweep]\nseeds = 5\n[axes]\nlease_ms = { from = 500, to = 900, step = 0 }\n",
                "s.toml: axis `lease_ms`: step must be positive, got 0",
            ),
            ("[sweep]\nseeds = 5\n[axes]\nlease_ms = []\n", "s.toml: axis `lease_ms` has no values"),
            (
                "[sweep]\nseeds = 5\n[axes]\nvariant = [\"default\", \"nope\"]\n",
                "s.toml: axis `variant` value \"nope\": unknown variant `nope`",
            ),
            (
                "[sweep]\nseeds = 5\n[axes]\nlease_ms = [\"long\"]\n",
                "s.toml: axis `lease_ms` value \"long\": invalid type",
            ),
            (
                "[sweep]\nseeds = 5\n[model]\nnodez = 3\n[axes]\nlease_ms = [500]\n",
                "s.toml: [model] key `nodez` is not a model key; did you mean `nodes`?",
            ),
            ("[sweep]\nseeds = 0\n[axes]\nlease_ms = [500]\n", "s.toml: [sweep] seeds must be a count (at least 1)"),
            (
                "[sweep]\nseeds = \"9..3\"\n[axes]\nlease_ms = [500]\n",
                "s.toml: [sweep] seeds must be a count or a range",
            ),
            ("[sweep]\nseeds = 5\n[axes]\n", "s.toml: [axes] must name 1 to 3 model keys, got 0"),
            (
                "[sweep]\nseeds = 5\nmodel = \"gone.toml\"\n[axes]\nlease_ms = [500]\n",
                "s.toml: cannot read model file gone.toml",
            ),
            (
                "[sweep]\nseeds = 5\n[model]\nlease_ms = 500\n[axes]\nlease_ms = [500]\n",
                "s.toml: key `lease_ms` is both in [model] and an axis",
            ),
            (
                "[sweep]\nseeds = 5\n[axes]\nheartbeat_ms = [20, 80]\n",
                "s.toml: cell heartbeat_ms=80: model key `election_ms_min` must be at least twice `heartbeat_ms`",
            ),
        ];
        for (text, start) in cases {
            let message = error(text);
            assert!(message.starts_with(start), "{message:?} should start with {start:?}");
            assert!(!message.contains('\n'), "one line: {message:?}");
        }
    }

    #[test]
    fn every_key_of_the_model_is_a_sweep_key() {
        // The keys absent from the standard model too: one vocabulary with `--set` and `fencesim model`.
        let standard = toml::Table::try_from(crate::model::Model::default()).unwrap();
        for key in crate::model::KEYS {
            let value = standard.get(key.name).map_or_else(|| key.example(), |v| v.to_string());
            // `swarm_bias` weights swarm's coins: it comes with swarm on.
            let swarm = if key.name == "swarm_bias" { "swarm = true\n" } else { "" };
            let text = format!(
                "[sweep]\nseeds = 1\n[model]\n{swarm}{} = {value}\n[axes]\nvariant = [\"default\"]\n",
                key.name
            );
            assert!(sweep(&text).is_ok(), "[model] {}: {:?}", key.name, sweep(&text).err());
        }
        let plan =
            sweep("[sweep]\nseeds = 1\n[model]\nsnapshot_entries = 64\n[axes]\nstall_ms_max = [100, 200]\n").unwrap();
        assert_eq!(plan.cells[1].model.stall_ms_max, Some(200));
        assert_eq!(plan.cells[1].model.snapshot_entries, Some(64));
    }

    #[test]
    fn a_toml_error_points_at_its_place() {
        let message = error("[sweep]\nseeds = 5\nextra = 1\n[axes]\nlease_ms = [500]\n");
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines[0], "s.toml:3:1: unknown key `extra`; expected one of `seeds`, `model`", "{message}");
        assert_eq!(lines[2], "3 | extra = 1");
        assert_eq!(lines[3], "  | ^^^^^");
    }
}
