//! The timeline: a picture of one run that a person reads in a minute
//! (`--timeline FILE.html` or `FILE.svg`, CLI.md).
//!
//! Time runs left to right on true simulated time. A lane per server (roles
//! with terms, outages, pauses, disk stalls, clock steps, the clock's offset
//! from true time), per client (acquires from first send to answer,
//! beliefs with their tokens, writes with path and verdict), per key (the
//! committed holder; in red, the stretches in which two clients believed
//! they held it), the resource, the faults, and every violation over all of
//! them. Everything drawn comes from the typed history and the checker's
//! violations; nothing is re-simulated.
//!
//! Layers: `servers.rs` and `clients.rs` turn events into items in time,
//! `layout.rs` packs them into rows and caps crowded rows, `svg.rs` places
//! them in pixels with integer arithmetic (the SVG is byte-for-byte the same
//! for the same run), `html.rs` wraps that SVG with CSS and a little script
//! (zoom, compress quiet stretches, hover) and fetches nothing.

mod clients;
mod html;
pub mod layout;
mod servers;
pub mod svg;

use crate::history::Event;
use crate::run::seed::Outcome;
use crate::run::trace;
use layout::{cap, pack, quiet_stretches, thin, Item, Lane, LaneId, Marker, Picture, Row};
use std::path::Path;

/// What `--timeline` writes, decided by the file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Html,
    Svg,
}

impl Format {
    pub fn of(path: &Path) -> Result<Format, String> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("html") | Some("htm") => Ok(Format::Html),
            Some("svg") => Ok(Format::Svg),
            _ => Err(format!("--timeline {}: the file must end in .html or .svg", path.display())),
        }
    }
}

/// Checks `--timeline PATH` before the run: a known extension and a directory that exists.
pub fn check_path(path: &Path) -> Result<Format, String> {
    let format = Format::of(path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(format!("--timeline {}: no directory {}", path.display(), dir.display()));
    }
    Ok(format)
}

/// Writes the timeline of `outcome` to `path` (HTML or SVG by its extension);
/// `name` is the scenario's, if it has one.
pub fn write(outcome: &Outcome, name: Option<&str>, path: &Path) -> Result<(), String> {
    write_titled(outcome, &title(outcome, name), path)
}

/// `write` under a title of the caller's (a real run's, on real time).
pub fn write_titled(outcome: &Outcome, title: &str, path: &Path) -> Result<(), String> {
    let format = check_path(path)?;
    let picture = picture(outcome, title);
    let text = match format {
        Format::Html => html::render(&picture),
        Format::Svg => svg::render(&picture),
    };
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The plain SVG of a run.
pub fn svg(outcome: &Outcome, title: &str) -> String {
    svg::render(&picture(outcome, title))
}

/// The self-contained HTML page of a run.
pub fn html(outcome: &Outcome, title: &str) -> String {
    html::render(&picture(outcome, title))
}

/// `scenario paused-holder-b1042 · seed 13 · variant default · ok · 40.000 s simulated`.
pub fn title(outcome: &Outcome, name: Option<&str>) -> String {
    let verdict = verdict(outcome);
    let scenario = name.map(|n| format!("scenario {n} · ")).unwrap_or_default();
    format!(
        "{scenario}seed {} · variant {} · {verdict} · {}.{:03} s simulated",
        outcome.seed,
        outcome.variant,
        outcome.sim_ms / 1_000,
        outcome.sim_ms % 1_000
    )
}

/// `ok`, `FAILED: 1 violation`, `FAILED: 3 violations`.
pub fn verdict(outcome: &Outcome) -> String {
    match outcome.violations.len() {
        0 => "ok".to_string(),
        1 => "FAILED: 1 violation".to_string(),
        n => format!("FAILED: {n} violations"),
    }
}

/// Everything the timeline draws, from the run's history and violations.
pub fn picture(outcome: &Outcome, title: &str) -> Picture {
    let events = outcome.history.events();
    let last_us = events.last().map_or(0, |e| e.at_us);
    let end_us = (outcome.sim_ms * 1_000).max(last_us).max(1);
    let markers = outcome
        .violations
        .iter()
        .map(|v| Marker { at_us: v.at_us, property: v.property.to_string(), detail: v.detail.clone() })
        .collect();
    build(events, markers, end_us, title)
}

fn build(events: &[Event], markers: Vec<Marker>, end_us: u64, title: &str) -> Picture {
    let mut servers = servers::Servers::default();
    let mut clients = clients::Clients::default();
    for event in events {
        servers.observe(event);
        clients.observe(event);
    }
    servers.finish(end_us);
    clients.finish(end_us);
    // Room for a mark's label (about ten characters at the full run's scale), so packed marks do not collide.
    let room_us = end_us / 130;
    let mut lanes = Vec::new();
    let mut cuts = std::mem::take(&mut servers.cuts);
    let mut lane = |id: LaneId, sections: Vec<Vec<Row>>, mut backgrounds: Vec<Item>, clock: Vec<(u64, i64)>| {
        backgrounds.extend(cuts.remove(&id).unwrap_or_default());
        // Empty rows take no room, but every lane keeps one.
        let mut rows: Vec<Row> = sections.into_iter().flatten().filter(|row| !row.items.is_empty()).collect();
        if rows.is_empty() {
            rows.push(Row::default());
        }
        lanes.push(Lane { id, rows, backgrounds, clock });
    };
    if !servers.faults.is_empty() {
        lane(LaneId::Faults, vec![pack(std::mem::take(&mut servers.faults), room_us)], Vec::new(), Vec::new());
    }
    for (node, server) in std::mem::take(&mut servers.lanes) {
        let sections = vec![vec![Row { items: server.roles }], pack(server.events, room_us)];
        lane(LaneId::Server(node), sections, server.backgrounds, server.clock_points);
    }
    for (client, c) in std::mem::take(&mut clients.lanes) {
        let sections = vec![pack(c.requests, 0), pack(c.beliefs, 0), pack(c.writes, room_us)];
        lane(LaneId::Client(client), sections, c.backgrounds, Vec::new());
    }
    for (key, k) in std::mem::take(&mut clients.keys) {
        let sections = vec![pack(k.holders, 0), vec![Row { items: k.overlaps }]];
        lane(LaneId::Key(key), sections, Vec::new(), Vec::new());
    }
    let resource = pack(std::mem::take(&mut servers.resource), room_us);
    lane(LaneId::Resource, vec![resource], std::mem::take(&mut servers.resource_backgrounds), Vec::new());
    let mut picture = Picture {
        title: title.to_string(),
        start_us: 0,
        end_us,
        lanes,
        markers,
        quiet: Vec::new(),
        offset_us_max: 0,
        aggregated: Vec::new(),
    };
    limit(&mut picture);
    picture.quiet = quiet_stretches(&picture);
    picture
}

/// Applies the caps of `layout.rs` and measures the clock lines' scale.
fn limit(picture: &mut Picture) {
    let (start_us, end_us) = (picture.start_us, picture.end_us);
    for lane in &mut picture.lanes {
        let name = lane.id.name();
        for (index, row) in lane.rows.iter_mut().enumerate() {
            let count = row.items.len();
            if cap(row, start_us, end_us) {
                picture.aggregated.push(format!(
                    "{name} row {}: {count} items in {} stretches",
                    index + 1,
                    row.items.len()
                ));
            }
        }
        let mut backgrounds = Row { items: std::mem::take(&mut lane.backgrounds) };
        cap(&mut backgrounds, start_us, end_us);
        lane.backgrounds = backgrounds.items;
        thin(&mut lane.clock);
        for &(_, offset) in &lane.clock {
            picture.offset_us_max = picture.offset_us_max.max(offset.unsigned_abs());
        }
    }
}

/// A compact text of the picture, one line per item, for snapshot tests:
/// `c0 row 2  135.012..4135.000  belief  tok41 B-1042`.
pub fn outline(picture: &Picture) -> String {
    let mut out = String::new();
    for lane in &picture.lanes {
        for (index, row) in lane.rows.iter().enumerate() {
            for item in &row.items {
                out.push_str(&format!(
                    "{:<7} row {}  {}..{}  {}  {}\n",
                    lane.id.name(),
                    index + 1,
                    ms(item.a_us),
                    ms(item.b_us),
                    item.style.class(),
                    item.label
                ));
            }
        }
        for item in &lane.backgrounds {
            out.push_str(&format!(
                "{:<7} behind {}..{}  {}\n",
                lane.id.name(),
                ms(item.a_us),
                ms(item.b_us),
                item.style.class()
            ));
        }
    }
    for marker in &picture.markers {
        out.push_str(&format!("VIOLATION {} at {}: {}\n", marker.property, ms(marker.at_us), marker.detail));
    }
    out
}

fn trace_line(event: &Event) -> String {
    trace::line(event).trim_start().to_string()
}

fn ms(at_us: u64) -> String {
    layout::ms_text(at_us)
}
