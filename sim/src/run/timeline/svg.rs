//! Places the picture in pixels and writes it as SVG: the whole run,
//! linear in true time, 1,380 px wide.
//!
//! Positions are integers in tenths of a pixel, printed with one decimal,
//! so the file is the same byte for byte on every machine. Every item is a
//! `<g class="it …" data-a=… data-b=…>` translated to its start, holding
//! its shape, its label and a `<title>` with its trace lines: the HTML
//! page's script moves the same groups when it zooms. A label is drawn only
//! where it fits: inside its span, or after its mark up to the next item of
//! the row and after the previous label.

use super::layout::{Item, Lane, LaneId, Picture};
use std::fmt::Write as _;

pub const WIDTH: i64 = 1_380;
pub const GUTTER: i64 = 74;
const RIGHT: i64 = 14;
pub const PLOT: i64 = WIDTH - GUTTER - RIGHT;
const ROW: i64 = 16;
const BOX: i64 = 13;
const CLOCK_ROW: i64 = 12;
const LANE_PAD: i64 = 3;
const TOP: i64 = 62;
/// Width of one label character in tenths of a pixel (11 px monospace).
pub const CHAR10: i64 = 70;
const CSS: &str = include_str!("timeline.css");
/// The clock lines' scale never magnifies less than this: a drift of a
/// few milliseconds stays a nearly flat line.
const OFFSET_SCALE_MIN_US: u64 = 10_000;

/// Maps true time to x (tenths of a pixel) over the whole run.
struct Scale {
    start_us: u64,
    span_us: u64,
}

impl Scale {
    fn x10(&self, at_us: u64) -> i64 {
        let offset = u128::from(at_us.saturating_sub(self.start_us).min(self.span_us));
        let x = offset * u128::from((PLOT * 10) as u64) / u128::from(self.span_us);
        GUTTER * 10 + i64::try_from(x).expect("x fits")
    }
}

/// Tenths of a pixel as `123.4`.
fn px(tenths: i64) -> String {
    let sign = if tenths < 0 { "-" } else { "" };
    let abs = tenths.unsigned_abs();
    format!("{sign}{}.{}", abs / 10, abs % 10)
}

pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

fn label_width10(label: &str) -> i64 {
    label.chars().count() as i64 * CHAR10
}

fn lane_height(lane: &Lane) -> i64 {
    let clock = if lane.clock.is_empty() { 0 } else { CLOCK_ROW };
    LANE_PAD * 2 + ROW * lane.rows.len() as i64 + clock
}

/// The whole picture as one `<svg>` element.
pub fn render(picture: &Picture) -> String {
    let scale = Scale { start_us: picture.start_us, span_us: (picture.end_us - picture.start_us).max(1) };
    let lanes_h: i64 = picture.lanes.iter().map(lane_height).sum();
    let legend_y = TOP + lanes_h + 16;
    let height = legend_y + 10 + 14 * picture.aggregated.len() as i64;
    let quiet: Vec<String> = picture.quiet.iter().map(|(a, b)| format!("{a}-{b}")).collect();
    let mut out = String::with_capacity(1 << 16);
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" data-start="{}" data-end="{}" data-gutter="{GUTTER}" data-plot="{PLOT}" data-char="{}" data-bottom="{}" data-quiet="{}">"#,
        picture.start_us,
        picture.end_us,
        px(CHAR10),
        TOP + lanes_h,
        quiet.join(",")
    );
    let _ = writeln!(out, "<style>{}</style>", CSS.trim());
    let _ = writeln!(out, r#"<rect class="paper" width="{WIDTH}" height="{height}"/>"#);
    let _ = writeln!(
        out,
        r#"<clipPath id="plot"><rect x="{}" y="0" width="{}" height="{height}"/></clipPath>"#,
        GUTTER - 6,
        PLOT + 12
    );
    let _ = writeln!(out, r#"<text class="title" x="6" y="15">{}</text>"#, escape(&picture.title));
    axis(&mut out, &scale, picture, TOP + lanes_h);
    let mut y = TOP;
    let mut previous: Option<&LaneId> = None;
    for (index, lane) in picture.lanes.iter().enumerate() {
        let group_changed = previous.is_some_and(|p| std::mem::discriminant(p) != std::mem::discriminant(&lane.id));
        lane_svg(&mut out, &scale, picture, (index, lane), y, group_changed);
        y += lane_height(lane);
        previous = Some(&lane.id);
    }
    markers(&mut out, &scale, picture, TOP + lanes_h);
    legend(&mut out, picture, legend_y);
    out.push_str("</svg>\n");
    out
}

fn axis(out: &mut String, scale: &Scale, picture: &Picture, bottom: i64) {
    let span_ms = scale.span_us / 1_000;
    let step_ms = tick_step_ms(span_ms.max(1));
    let _ = writeln!(out, r#"<g id="axis">"#);
    let mut t_ms = picture.start_us.div_ceil(1_000 * step_ms) * step_ms;
    while t_ms * 1_000 <= picture.end_us {
        let x = scale.x10(t_ms * 1_000);
        let _ = writeln!(
            out,
            r#"<line class="tick" x1="{x}" x2="{x}" y1="{}" y2="{bottom}"/><text class="tick" x="{x}" y="{}">{}</text>"#,
            TOP - 8,
            TOP - 11,
            tick_label(t_ms, step_ms),
            x = px(x),
        );
        t_ms += step_ms;
    }
    let _ = writeln!(out, "</g>");
}

/// 1, 2 or 5 times a power of ten, so that about twelve ticks span the run.
fn tick_step_ms(span_ms: u64) -> u64 {
    let mut step = 1;
    loop {
        for factor in [1, 2, 5] {
            if span_ms / (step * factor) <= 12 {
                return step * factor;
            }
        }
        step *= 10;
    }
}

/// `12s`, `12.5s`, `12.25s`: as many decimals as the step needs.
fn tick_label(t_ms: u64, step_ms: u64) -> String {
    match step_ms {
        s if s % 1_000 == 0 => format!("{}s", t_ms / 1_000),
        s if s % 100 == 0 => format!("{}.{}s", t_ms / 1_000, (t_ms % 1_000) / 100),
        s if s % 10 == 0 => format!("{}.{:02}s", t_ms / 1_000, (t_ms % 1_000) / 10),
        _ => format!("{}.{:03}s", t_ms / 1_000, t_ms % 1_000),
    }
}

fn lane_svg(out: &mut String, scale: &Scale, picture: &Picture, lane: (usize, &Lane), top: i64, group_changed: bool) {
    let (index, lane) = lane;
    let height = lane_height(lane);
    let class = if group_changed { "sep group" } else { "sep" };
    let _ = writeln!(out, r#"<g class="lane"><line class="{class}" x1="0" x2="{WIDTH}" y1="{top}" y2="{top}"/>"#);
    let name: String = lane.id.name().chars().take(10).collect();
    let _ = writeln!(out, r#"<text class="name" x="6" y="{}">{}</text>"#, top + LANE_PAD + 11, escape(&name));
    if !lane.clock.is_empty() {
        let y = top + LANE_PAD + ROW * lane.rows.len() as i64 + CLOCK_ROW - 2;
        let _ = writeln!(out, r#"<text class="small" x="6" y="{y}">clock</text>"#);
    }
    let _ = writeln!(out, r#"<g clip-path="url(#plot)" data-lane="{index}">"#);
    for item in &lane.backgrounds {
        item_svg(out, scale, item, top, height, None);
    }
    for (row_index, row) in lane.rows.iter().enumerate() {
        let row_top = top + LANE_PAD + ROW * row_index as i64;
        let mut free_x10 = 0;
        for (i, item) in row.items.iter().enumerate() {
            let next_x10 = row.items.get(i + 1).map(|next| scale.x10(next.a_us));
            let shown = label_fits(scale, item, free_x10, next_x10);
            if let Some(placed) = shown {
                free_x10 = placed.free_x10;
            }
            item_svg(out, scale, item, row_top + 1, BOX, Some(shown));
        }
    }
    if !lane.clock.is_empty() {
        clock_svg(out, scale, picture, lane, top + LANE_PAD + ROW * lane.rows.len() as i64);
    }
    let _ = writeln!(out, "</g></g>");
}

/// A label that fits: where it starts relative to its item, and where the
/// row is free again (tenths of a pixel).
#[derive(Clone, Copy)]
struct Placed {
    dx10: i64,
    free_x10: i64,
}

/// Inside its span if it fits there, else after its mark or span up to the
/// next item of the row; `None` when neither has room.
fn label_fits(scale: &Scale, item: &Item, free_x10: i64, next_x10: Option<i64>) -> Option<Placed> {
    if item.label.is_empty() {
        return None;
    }
    let (a, b) = (scale.x10(item.a_us), scale.x10(item.b_us));
    let width = label_width10(&item.label);
    let inside = a + 30;
    if !item.is_mark() && inside >= free_x10 && inside + width + 20 <= b {
        return Some(Placed { dx10: 30, free_x10: b });
    }
    let start = if item.is_mark() { a + 50 } else { b + 30 };
    let limit = next_x10.unwrap_or((GUTTER + PLOT) * 10);
    let room = start + width + 20 <= limit;
    (start >= free_x10 && room).then_some(Placed { dx10: start - a, free_x10: start + width + 30 })
}

/// One item; `label` is `None` for backgrounds (no label), else whether the label shows.
fn item_svg(out: &mut String, scale: &Scale, item: &Item, y: i64, height: i64, label: Option<Option<Placed>>) {
    let x = scale.x10(item.a_us);
    let kind = if item.is_mark() { "mk" } else { "sp" };
    let bg = if label.is_none() { " bg" } else { "" };
    let _ = write!(
        out,
        r#"<g class="it {kind}{bg} {}" data-a="{}" data-b="{}" transform="translate({},{y})">"#,
        item.style.class(),
        item.a_us,
        item.b_us,
        px(x)
    );
    if item.is_mark() {
        let _ = write!(out, r#"<path d="M0 0.5l4 6-4 6-4-6z"/>"#);
    } else {
        let width = (scale.x10(item.b_us) - x).max(10);
        let _ = write!(out, r#"<rect width="{}" height="{height}"/>"#, px(width));
    }
    if let Some(shown) = label.filter(|_| !item.label.is_empty()) {
        let dx = shown.map_or(if item.is_mark() { 50 } else { 30 }, |placed| placed.dx10);
        let hidden = if shown.is_some() { "" } else { r#" class="h""# };
        let _ = write!(out, r#"<text x="{}" y="10"{hidden}>{}</text>"#, px(dx), escape(&item.label));
    }
    let _ = writeln!(out, "<title>{}</title></g>", escape(&item.trace));
}

fn clock_svg(out: &mut String, scale: &Scale, picture: &Picture, lane: &Lane, top: i64) {
    let mid10 = (top * 2 + CLOCK_ROW) * 5;
    let max = i128::from(picture.offset_us_max.max(OFFSET_SCALE_MIN_US));
    let mut times = Vec::with_capacity(lane.clock.len());
    let mut points = Vec::with_capacity(lane.clock.len());
    for &(at_us, offset_us) in &lane.clock {
        // Up is ahead of true time; the largest offset of any server touches the row's edge.
        let dy10 = i128::from(offset_us) * i128::from((CLOCK_ROW / 2 - 1) * 10) / max;
        let y10 = mid10 - i64::try_from(dy10).expect("bounded by the row");
        times.push(at_us.to_string());
        points.push(format!("{},{}", px(scale.x10(at_us)), px(y10)));
    }
    let biggest = lane.clock.iter().map(|(_, o)| o.unsigned_abs()).max().unwrap_or(0);
    let _ = writeln!(
        out,
        r#"<line class="zero" x1="{}" x2="{}" y1="{m}" y2="{m}"/><polyline class="clock" data-t="{}" points="{}"><title>clock offset from true time (from its first reading), up to {} ms; scale ±{} ms for all servers</title></polyline>"#,
        px(GUTTER * 10),
        px((GUTTER + PLOT) * 10),
        times.join(" "),
        points.join(" "),
        biggest / 1_000,
        picture.offset_us_max.max(OFFSET_SCALE_MIN_US) / 1_000,
        m = px(mid10),
    );
}

fn markers(out: &mut String, scale: &Scale, picture: &Picture, bottom: i64) {
    let _ = writeln!(out, r#"<g clip-path="url(#plot)">"#);
    let mut free_x10 = 0;
    for marker in &picture.markers {
        let x = scale.x10(marker.at_us);
        let label = marker.property.clone();
        let width = label_width10(&label);
        // Near the right edge the label goes to the left of its line.
        let label_x10 = if x + 80 + width > (GUTTER + PLOT) * 10 { -80 - width } else { 80 };
        let shown = x + label_x10 >= free_x10;
        if shown {
            free_x10 = x + label_x10 + width + 40;
        }
        let hidden = if shown { "" } else { r#" class="h""# };
        let _ = writeln!(
            out,
            r#"<g class="it mk vio" data-a="{a}" data-b="{a}" transform="translate({},0)"><line y1="22" y2="{bottom}"/><path d="M0 38l-6-12h12z"/><text x="{}" y="35"{hidden}>{}</text><title>VIOLATION {} at {}: {}</title></g>"#,
            px(x),
            px(label_x10),
            escape(&label),
            escape(&marker.property),
            super::ms(marker.at_us),
            escape(&marker.detail),
            a = marker.at_us,
        );
    }
    let _ = writeln!(out, "</g>");
}

fn legend(out: &mut String, picture: &Picture, y: i64) {
    let entries = [
        ("leader", "leader"),
        ("candidate", "candidate"),
        ("follower", "follower"),
        ("down", "down"),
        ("paused", "paused"),
        ("acquire", "granted"),
        ("refused", "refused"),
        ("belief", "belief"),
        ("accepted", "accepted"),
        ("rejected", "rejected"),
        ("holder", "holder"),
        ("overlap", "two believers"),
        ("net", "net fault"),
        ("cut", "cut off"),
    ];
    let mut x = 6 * 10;
    let _ = write!(out, r#"<g class="legend">"#);
    for (class, text) in entries {
        let _ = write!(
            out,
            r#"<g class="it sp {class}" transform="translate({},{})"><rect width="12.0" height="10"/></g><text x="{}" y="{}">{}</text>"#,
            px(x),
            y - 9,
            px(x + 160),
            y,
            text
        );
        x += 160 + label_width10(text) + 120;
    }
    let _ = writeln!(out, "</g>");
    for (i, note) in picture.aggregated.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<text class="small" x="6" y="{}">aggregated (too many items to draw one by one): {}</text>"#,
            y + 14 * (i as i64 + 1),
            escape(note)
        );
    }
}
