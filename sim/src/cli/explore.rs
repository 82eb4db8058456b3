//! `explore SWEEP.toml`: a model sweep for protocol designers. Every cell
//! of the sweep (one value per axis) runs the same seeds through `hunt`'s
//! machinery (`sweep_each`, the progress bar, Ctrl-C, seed records), and
//! each cell is reported as rates with Wilson intervals and availability
//! figures (`cells.rs`): a table, `--csv`, `--json`, `--plot DIR`.
//!
//! With `--out FILE.jsonl` every seed's record (with its figures) is
//! appended as it finishes; run again with the same file, the sweep skips
//! the seeds it finds there, so an interrupted sweep resumes. The reports
//! are built from records either way, so a resumed sweep writes exactly
//! what an uninterrupted one does.

use crate::cli::args::{ExploreArgs, InputError};
use crate::cli::cells::{csv_header, csv_row, CellReport, Tally};
use crate::cli::output::try_write_line;
use crate::cli::plot::{self, Figure};
use crate::cli::records::{model_hash, Origin, Place, Record, RecordFile};
use crate::cli::sweep_file::{self, show, Axis, SweepPlan};
use crate::run::sweep::{default_jobs, quiet_panics, sweep_each, Flow, Sweep};
use crate::signals::{self, INTERRUPTED};
use fencelock::Property;
use indicatif::{ProgressBar, ProgressStyle};
use roaring::RoaringTreemap;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Serialize)]
struct ExploreJson<'a> {
    seeds: String,
    axes: Vec<AxisJson<'a>>,
    cells: &'a [CellReport],
    interrupted: bool,
}

#[derive(Serialize)]
struct AxisJson<'a> {
    key: &'a str,
    values: &'a [toml::Value],
}

fn progress_bar(len: u64) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() || len == 0 {
        return None;
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds  {per_sec}  {msg}  eta {eta}")
            .expect("a valid progress template"),
    );
    Some(bar)
}

pub fn explore(args: &ExploreArgs) -> Result<ExitCode, InputError> {
    let plan = sweep_file::load(&args.file)?;
    let jobs = args.jobs.unwrap_or_else(default_jobs);
    if jobs == 0 {
        return Err(InputError("--jobs must be at least 1".into()));
    }
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir).map_err(|e| InputError(format!("cannot create {}: {e}", dir.display())))?;
    }
    let mut tallies: Vec<Tally> = vec![Tally::default(); plan.cells.len()];
    // Each cell's seeds resumed from --out: a compressed bitmap, not a tree node per seed.
    let mut done: Vec<RoaringTreemap> = vec![RoaringTreemap::new(); plan.cells.len()];
    let origins: Vec<Origin> = plan.cells.iter().map(|cell| Origin::here(&cell.model)).collect();
    let mut out = match &args.out {
        Some(path) => Some(resume(path, &plan, &origins, &mut tallies, &mut done)?),
        None => None,
    };
    let seeds_resumed: u64 = done.iter().map(RoaringTreemap::len).sum();
    quiet_panics();
    signals::catch(true);
    let started = Instant::now();
    let per_cell = plan.seeds.end - plan.seeds.start;
    let todo = per_cell * plan.cells.len() as u64 - seeds_resumed;
    let bar = if args.json { None } else { progress_bar(todo) };
    let mut error = None;
    for (index, cell) in plan.cells.iter().enumerate() {
        if signals::interrupted() || error.is_some() {
            break;
        }
        if let Some(bar) = &bar {
            bar.set_message(format!("cell {}/{}: {}", index + 1, plan.cells.len(), cell.label(&plan.axes)));
        }
        let skip = &done[index];
        let pending = plan.seeds.clone().filter(|seed| !skip.contains(*seed));
        let how = Sweep { jobs, twice: false, stop: &INTERRUPTED };
        let variant = cell.model.variant.name();
        let tally = &mut tallies[index];
        sweep_each(pending, &cell.model, how, |result| {
            let replay = format!(
                "fencesim replay --seed {} --variant {variant}  # cell {} of {}",
                result.seed,
                cell.label(&plan.axes),
                args.file.display()
            );
            let mut record = Record::of(&result, &origins[index], variant, replay);
            record.figures = Some(result.figures.clone());
            if let Some(file) = &mut out {
                if let Err(e) = file.append(&record) {
                    error = Some(e);
                    return Flow::Stop;
                }
            }
            tally.add(&record, &result.figures);
            if let Some(bar) = &bar {
                bar.inc(1);
            }
            Flow::Continue
        });
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(error) = error {
        return Err(InputError(error));
    }
    let interrupted = signals::interrupted();
    let reports: Vec<CellReport> = plan
        .cells
        .iter()
        .zip(&tallies)
        .map(|(cell, tally)| {
            let axes = plan.axes.iter().zip(&cell.values).map(|(a, v)| (a.key.clone(), v.clone())).collect();
            tally.report(axes)
        })
        .collect();
    let keys: Vec<String> = plan.axes.iter().map(|a| a.key.clone()).collect();
    if let Some(path) = &args.csv {
        let mut text = csv_header(&keys);
        text.push('\n');
        for report in &reports {
            text.push_str(&csv_row(&keys, report));
            text.push('\n');
        }
        std::fs::write(path, text).map_err(|e| InputError(format!("cannot write {}: {e}", path.display())))?;
    }
    if let Some(dir) = &args.plot {
        for figure in figures(&plan, &reports) {
            let svg = if plan.axes.len() == 1 {
                plot::line_chart(&plan.axes[0], &figure)
            } else {
                plot::heatmap(&plan.axes, &figure)
            };
            let path = dir.join(format!("{}.svg", figure.stem));
            std::fs::write(&path, svg).map_err(|e| InputError(format!("cannot write {}: {e}", path.display())))?;
        }
    }
    let seeds_text = format!("{}..{}", plan.seeds.start, plan.seeds.end);
    if args.json {
        let axes = plan.axes.iter().map(|a| AxisJson { key: &a.key, values: &a.values }).collect();
        let json = ExploreJson { seeds: seeds_text, axes, cells: &reports, interrupted };
        try_write_line(format_args!("{}", serde_json::to_string(&json).expect("explore json serializes")));
    } else {
        for line in table(&plan.axes, &reports) {
            if !try_write_line(format_args!("{line}")) {
                return Ok(ExitCode::SUCCESS);
            }
        }
        let seeds_run: u64 = reports.iter().map(|r| r.seeds).sum::<u64>() - seeds_resumed as u64;
        let wall_s = started.elapsed().as_secs_f64().max(0.001);
        let mut last = format!(
            "explore: {} cells x seeds {seeds_text}; {seeds_run} seeds run in {wall_s:.1} s wall ({:.1} seeds/s)",
            plan.cells.len(),
            seeds_run as f64 / wall_s
        );
        if let Some(path) = &args.out {
            last.push_str(&format!(", {seeds_resumed} resumed from {}", path.display()));
        }
        if interrupted {
            last.push_str("; interrupted: the cells cover the seeds finished");
        }
        try_write_line(format_args!("{last}"));
    }
    Ok(if interrupted { ExitCode::from(signals::exit_code()) } else { ExitCode::SUCCESS })
}

/// Reads `--out`: records of this sweep's cells are folded in and their
/// seeds skipped; a record of any other model is refused.
fn resume(
    path: &std::path::Path,
    plan: &SweepPlan,
    origins: &[Origin],
    tallies: &mut [Tally],
    done: &mut [RoaringTreemap],
) -> Result<RecordFile, InputError> {
    let mut by_hash: BTreeMap<(String, &str), Vec<usize>> = BTreeMap::new();
    for (index, cell) in plan.cells.iter().enumerate() {
        by_hash.entry((model_hash(&cell.model), cell.model.variant.name())).or_default().push(index);
    }
    RecordFile::open(path, |place: Place, record: Record| {
        let key = (record.model_hash.clone(), record.variant.as_str());
        let Some(cells) = by_hash.get(&key) else {
            return Err(InputError(format!(
                "{place}: a record of model {} (variant {}), no cell of this sweep: use another --out file",
                record.model_hash, record.variant
            )));
        };
        if record.origin() != origins[cells[0]] {
            return Err(InputError(format!(
                "{place}: a record of {}; this sweep writes {}: use another --out file",
                record.origin(),
                origins[cells[0]]
            )));
        }
        let Some(figures) = record.figures.clone() else {
            return Err(InputError(format!("{place}: a seed record without figures (not written by explore)")));
        };
        if !plan.seeds.contains(&record.seed) {
            return Ok(());
        }
        for &cell in cells {
            if done[cell].insert(record.seed) {
                tallies[cell].add(&record, &figures);
            }
        }
        Ok(())
    })
}

/// The properties any cell violates, in SPEC order.
fn violated(reports: &[CellReport]) -> Vec<Property> {
    Property::ALL.into_iter().filter(|p| reports.iter().any(|r| r.properties[p.id()].failing > 0)).collect()
}

/// The terminal table: one row per cell.
fn table(axes: &[Axis], reports: &[CellReport]) -> Vec<String> {
    let properties = violated(reports);
    let mut header: Vec<String> = axes.iter().map(|a| a.key.clone()).collect();
    header.extend(["seeds".to_string(), "failing [95%]".to_string()]);
    header.extend(properties.iter().map(|p| p.id().to_string()));
    header.extend(
        [
            "exposures/seed [95%]",
            "stale-rejected/seed",
            "acquire p50 ms",
            "p99 ms",
            "grants/s",
            "unheld-waiting max ms",
            "answered in faults",
        ]
        .map(String::from),
    );
    let pct = |x: f64| plot::format_value(x, true);
    let opt = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.1}"));
    let mut rows = vec![header];
    for report in reports {
        let mut row: Vec<String> = axes.iter().map(|a| show(&report.axes[&a.key])).collect();
        let f = report.failing;
        row.push(report.seeds.to_string());
        row.push(format!("{} [{}, {}]", pct(f.rate), pct(f.low), pct(f.high)));
        row.extend(properties.iter().map(|p| pct(report.properties[p.id()].rate)));
        row.extend([
            format!(
                "{:.2} [{:.2}, {:.2}]",
                report.lease_exposures_per_seed,
                report.lease_exposures_per_seed_low,
                report.lease_exposures_per_seed_high
            ),
            format!("{:.2}", report.stale_writes_rejected_per_seed),
            opt(report.acquire_ms_p50),
            opt(report.acquire_ms_p99),
            format!("{:.2}", report.grants_per_s),
            opt(report.unheld_waiting_ms_max),
            report.fault_answered_share.map_or("-".to_string(), &pct),
        ]);
        rows.push(row);
    }
    let columns = rows[0].len();
    let widths: Vec<usize> =
        (0..columns).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:>w$}")).collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect()
}

/// The worst case of SPEC.md's belief `L·(1−ρ)/(1+ρ)` against a server
/// lease `L`, for a client clock slow by `k·ρ` (beyond the bound, as
/// `drift_beyond_bound` draws it, k up to 20) and a server clock fast by
/// `ρ`: the client believes `L·(1−ρ)/((1+ρ)(1−kρ))` of true time, the
/// server's lease lasts `L/(1+ρ)`; the difference is how long the client
/// may believe past the lease, in milliseconds.
pub fn belief_overrun_ms(lease_ms: f64, drift_ppm: f64, k: f64) -> f64 {
    let rho = drift_ppm / 1e6;
    lease_ms / (1.0 + rho) * ((1.0 - rho) / (1.0 - k * rho) - 1.0)
}

/// Beyond-bound clocks drift at most this many times the bound (`faults`).
const BEYOND_BOUND_FACTOR_MAX: f64 = 20.0;
/// The overrun the overlay line marks: about the time from a lease's expiry
/// on the leader to the next holder's grant (a tick, a commit, a reply).
const OVERRUN_LINE_MS: f64 = 20.0;

/// The line `belief_overrun_ms = OVERRUN_LINE_MS` over a sweep whose first
/// two axes are `drift_ppm_max` and `lease_ms` with clocks beyond the bound.
fn belief_line(plan: &SweepPlan) -> Option<(Vec<(f64, f64)>, String)> {
    let keys: Vec<&str> = plan.axes.iter().take(2).map(|a| a.key.as_str()).collect();
    if keys != ["drift_ppm_max", "lease_ms"] || !plan.cells.iter().all(|c| c.model.drift_beyond_bound) {
        return None;
    }
    let number = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
    let drifts: Vec<f64> = plan.axes[0].values.iter().filter_map(number).collect();
    let (low, high) = (drifts.iter().copied().fold(f64::MAX, f64::min), drifts.iter().copied().fold(0.0, f64::max));
    let points = (0..=200)
        .map(|i| low + (high - low) * f64::from(i) / 200.0)
        .filter(|&ppm| ppm > 0.0)
        .map(|ppm| (ppm, OVERRUN_LINE_MS / belief_overrun_ms(1.0, ppm, BEYOND_BOUND_FACTOR_MAX)))
        .collect();
    let label = format!("belief formula: a {BEYOND_BOUND_FACTOR_MAX:.0}x-bound clock overruns {OVERRUN_LINE_MS:.0} ms");
    Some((points, label))
}

/// The charts `--plot` writes, one per figure.
fn figures(plan: &SweepPlan, reports: &[CellReport]) -> Vec<Figure> {
    let rate_figure = |stem: String, title: String, pick: &dyn Fn(&CellReport) -> crate::cli::cells::Rate| Figure {
        stem,
        title,
        unit: "fraction of seeds, with its 95% Wilson interval".into(),
        values: reports.iter().map(|r| Some(pick(r).rate)).collect(),
        bands: Some(reports.iter().map(|r| (pick(r).low, pick(r).high)).collect()),
        percent: true,
        overlay: None,
    };
    let number = |stem: &str, title: &str, unit: &str, pick: &dyn Fn(&CellReport) -> Option<f64>| Figure {
        stem: stem.into(),
        title: title.into(),
        unit: unit.into(),
        values: reports.iter().map(pick).collect(),
        bands: None,
        percent: false,
        overlay: None,
    };
    let mut all = vec![rate_figure("failing".into(), "Seeds violating any property".into(), &|r| r.failing)];
    for property in violated(reports) {
        let id = property.id();
        all.push(rate_figure(format!("property-{id}"), format!("Seeds violating {id}"), &|r| r.properties[id]));
    }
    let mut exposures = number(
        "lease-exposures",
        "Lease exposures per seed",
        "belief overlaps excused by a broken assumption, per seed",
        &|r| Some(r.lease_exposures_per_seed),
    );
    exposures.overlay = belief_line(plan);
    exposures.unit = "excused belief overlaps per seed, with a 95% Poisson interval".into();
    exposures.bands =
        Some(reports.iter().map(|r| (r.lease_exposures_per_seed_low, r.lease_exposures_per_seed_high)).collect());
    all.push(exposures);
    all.extend([
        number(
            "stale-writes-rejected",
            "Stale writes rejected per seed",
            "writes the resource refused for an old token",
            &|r| Some(r.stale_writes_rejected_per_seed),
        ),
        number("acquire-p50", "Acquire latency, median", "ms of true time, first send to Granted", &|r| {
            r.acquire_ms_p50
        }),
        number("acquire-p99", "Acquire latency, 99th percentile", "ms of true time, first send to Granted", &|r| {
            r.acquire_ms_p99
        }),
        number("grants-per-s", "Grants per simulated second", "grants applied / simulated seconds", &|r| {
            Some(r.grants_per_s)
        }),
        number(
            "unheld-waiting-max",
            "Longest a key stayed unheld while a client waited",
            "ms, the longest over the cell's seeds",
            &|r| r.unheld_waiting_ms_max,
        ),
        number(
            "answered-in-faults",
            "Requests answered during the faults",
            "share of requests sent before the heal that got a final answer",
            &|r| r.fault_answered_share,
        ),
        number(
            "unheld-waiting-p50",
            "Unheld while waiting, median seed",
            "ms, the median over seeds of each seed's longest stretch",
            &|r| r.unheld_waiting_ms_p50,
        ),
    ]);
    all
}

#[cfg(test)]
mod tests {
    use super::belief_overrun_ms;

    #[test]
    fn the_belief_is_safe_within_the_bound_and_overruns_beyond_it() {
        // k = 1: a client clock at the bound never believes past the lease.
        assert!(belief_overrun_ms(2_000.0, 500.0, 1.0).abs() < 1e-9);
        // 2 s lease, 500 ppm bound, a clock slow by 10 ms per second: about 19 ms.
        let overrun = belief_overrun_ms(2_000.0, 500.0, 20.0);
        assert!((overrun - 19.18).abs() < 0.01, "{overrun}");
    }
}
