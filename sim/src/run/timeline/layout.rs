//! What the timeline draws, in true simulated time and nothing else: lanes
//! of rows of items (spans and marks), the violations, the quiet stretches.
//! No pixels here; `svg.rs` decides where things go.
//!
//! Every collection is a `Vec` or a `BTreeMap`, so the same history always
//! gives the same picture, item for item.

use fencelock::{ClientId, Key, NodeId};

/// Items one row keeps as they are; beyond it the row is aggregated into
/// [`AGGREGATE_BINS`] equal stretches of time (an hour-long run stays a
/// file of a few megabytes that a browser opens at once).
pub const ROW_ITEMS_MAX: usize = 600;
pub const AGGREGATE_BINS: u64 = 300;
/// Points of one clock-offset line; beyond it the line is thinned evenly.
pub const CLOCK_POINTS_MAX: usize = 1_200;
/// Rows one section of a lane may use; items that fit none share the last row.
pub const SECTION_ROWS_MAX: usize = 3;
/// A stretch with no change at all at least this long is quiet: the
/// "compress quiet stretches" toggle shrinks it to [`QUIET_KEPT_US`].
pub const QUIET_MIN_US: u64 = 800_000;
pub const QUIET_KEPT_US: u64 = 150_000;

/// Who a lane is about, in the order lanes are drawn.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LaneId {
    Faults,
    Server(NodeId),
    Client(ClientId),
    Key(Key),
    Resource,
}

impl LaneId {
    /// The name in the lane's gutter: `net`, `n2`, `c1`, `B-1042`, `db`.
    pub fn name(&self) -> String {
        match self {
            LaneId::Faults => "faults".to_string(),
            LaneId::Server(node) => node.to_string(),
            LaneId::Client(client) => client.to_string(),
            LaneId::Key(key) => short_key(key),
            LaneId::Resource => "db".to_string(),
        }
    }
}

/// `invoice/B-1042` → `B-1042`: the part a person tells keys apart by.
pub fn short_key(key: &Key) -> String {
    let text = key.to_string();
    match text.rsplit_once('/') {
        Some((_, tail)) if !tail.is_empty() => tail.to_string(),
        _ => text,
    }
}

/// How an item looks; each is one CSS class of the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Style {
    Follower,
    PreCandidate,
    Candidate,
    Leader,
    Down,
    Paused,
    DiskStall,
    ClockStep,
    Restored,
    Acquire,
    AcquireRefused,
    Request,
    Belief,
    WriteAccepted,
    WriteRejected,
    WriteUnanswered,
    Holder,
    Overlap,
    NetFault,
    Churn,
    ClusterEvent,
    Healed,
    /// The band a network fault lays over a lane it cuts.
    Cut,
    /// Many items of a row folded into one stretch (see [`ROW_ITEMS_MAX`]).
    Aggregate,
}

impl Style {
    pub fn class(self) -> &'static str {
        match self {
            Style::Follower => "follower",
            Style::PreCandidate => "precandidate",
            Style::Candidate => "candidate",
            Style::Leader => "leader",
            Style::Down => "down",
            Style::Paused => "paused",
            Style::DiskStall => "stall",
            Style::ClockStep => "step",
            Style::Restored => "restored",
            Style::Acquire => "acquire",
            Style::AcquireRefused => "refused",
            Style::Request => "request",
            Style::Belief => "belief",
            Style::WriteAccepted => "accepted",
            Style::WriteRejected => "rejected",
            Style::WriteUnanswered => "unanswered",
            Style::Holder => "holder",
            Style::Overlap => "overlap",
            Style::NetFault => "net",
            Style::Churn => "churn",
            Style::ClusterEvent => "cluster",
            Style::Healed => "healed",
            Style::Cut => "cut",
            Style::Aggregate => "aggregate",
        }
    }
}

/// One thing on the timeline: a span `[a_us, b_us)` or, when they are
/// equal, a mark. `trace` is what hovering shows: the trace lines behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub a_us: u64,
    pub b_us: u64,
    pub style: Style,
    pub label: String,
    pub trace: String,
}

impl Item {
    pub fn span(a_us: u64, b_us: u64, style: Style, label: String, trace: String) -> Item {
        assert!(a_us <= b_us, "an item ends before it starts: {a_us} > {b_us}");
        Item { a_us, b_us, style, label, trace }
    }

    pub fn mark(at_us: u64, style: Style, label: String, trace: String) -> Item {
        Item { a_us: at_us, b_us: at_us, style, label, trace }
    }

    pub fn is_mark(&self) -> bool {
        self.a_us == self.b_us
    }
}

/// One row of a lane: items that do not overlap (except in a section's last row).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    pub items: Vec<Item>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lane {
    pub id: LaneId,
    pub rows: Vec<Row>,
    /// Drawn behind the rows over the lane's whole height (pauses, cuts).
    pub backgrounds: Vec<Item>,
    /// The local clock's offset from true time, `(true_us, offset_us)`, a
    /// polyline (servers only; a client's drift shows in its beliefs).
    pub clock: Vec<(u64, i64)>,
}

/// A violation of the checker, drawn over every lane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    pub at_us: u64,
    pub property: String,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picture {
    pub title: String,
    pub start_us: u64,
    pub end_us: u64,
    pub lanes: Vec<Lane>,
    pub markers: Vec<Marker>,
    /// Stretches in which nothing changes, sorted and disjoint.
    pub quiet: Vec<(u64, u64)>,
    /// The largest clock offset of any server, for the offset lines' scale.
    pub offset_us_max: u64,
    /// Rows folded by the cap, as `n2 roles: 2,410 items in 300 stretches`.
    pub aggregated: Vec<String>,
}

/// Packs items into at most [`SECTION_ROWS_MAX`] rows so that items in a
/// row do not overlap (marks get room for a short label): first fit, in
/// the order of their start.
pub fn pack(mut items: Vec<Item>, mark_room_us: u64) -> Vec<Row> {
    items.sort_by_key(|item| (item.a_us, item.b_us));
    let mut rows: Vec<Row> = Vec::new();
    let mut ends: Vec<u64> = Vec::new();
    for item in items {
        let end = if item.is_mark() { item.a_us + mark_room_us } else { item.b_us };
        let fit = ends.iter().position(|&row_end| row_end <= item.a_us);
        let index = match fit {
            Some(index) => index,
            None if rows.len() < SECTION_ROWS_MAX => {
                rows.push(Row::default());
                ends.push(0);
                rows.len() - 1
            }
            None => rows.len() - 1,
        };
        ends[index] = ends[index].max(end);
        rows[index].items.push(item);
    }
    if rows.is_empty() {
        rows.push(Row::default());
    }
    rows
}

/// Folds a row of more than [`ROW_ITEMS_MAX`] items into one item per
/// stretch of `(end - start) / AGGREGATE_BINS`: the stretch takes the style
/// of the item that covers most of it, and says how many it stands for.
/// Returns whether it folded.
pub fn cap(row: &mut Row, start_us: u64, end_us: u64) -> bool {
    if row.items.len() <= ROW_ITEMS_MAX {
        return false;
    }
    let bin_us = (end_us - start_us).div_ceil(AGGREGATE_BINS).max(1);
    let mut folded: Vec<Item> = Vec::new();
    let mut bins: std::collections::BTreeMap<u64, Vec<&Item>> = std::collections::BTreeMap::new();
    for item in &row.items {
        let bin = (item.a_us.saturating_sub(start_us) / bin_us).min(AGGREGATE_BINS - 1);
        bins.entry(bin).or_default().push(item);
    }
    for (bin, items) in bins {
        let a_us = start_us + bin * bin_us;
        let b_us = (a_us + bin_us).min(end_us).max(a_us);
        let widest = items.iter().max_by_key(|item| (item.b_us - item.a_us, std::cmp::Reverse(item.a_us)));
        let widest = widest.expect("a bin holds items");
        let style = if items.len() == 1 { widest.style } else { Style::Aggregate };
        let trace = format!(
            "{} items from {} to {} (too many to draw; see `--trace`), the longest: {}",
            items.len(),
            ms_text(a_us),
            ms_text(b_us),
            widest.trace.lines().next().unwrap_or("").trim()
        );
        folded.push(Item::span(a_us, b_us, style, String::new(), trace));
    }
    row.items = folded;
    true
}

/// Thins a clock line to at most [`CLOCK_POINTS_MAX`] points, keeping the first and last.
pub fn thin(points: &mut Vec<(u64, i64)>) {
    if points.len() <= CLOCK_POINTS_MAX {
        return;
    }
    let keep_every = points.len().div_ceil(CLOCK_POINTS_MAX - 1);
    let last = *points.last().expect("points");
    let mut thinned: Vec<(u64, i64)> = points.iter().copied().step_by(keep_every).collect();
    if thinned.last() != Some(&last) {
        thinned.push(last);
    }
    *points = thinned;
}

/// The quiet stretches: gaps of at least [`QUIET_MIN_US`] between
/// consecutive instants where anything starts, ends or happens.
pub fn quiet_stretches(picture: &Picture) -> Vec<(u64, u64)> {
    let mut instants = std::collections::BTreeSet::new();
    instants.insert(picture.start_us);
    instants.insert(picture.end_us);
    for lane in &picture.lanes {
        for item in lane.rows.iter().flat_map(|row| &row.items).chain(&lane.backgrounds) {
            instants.insert(item.a_us);
            instants.insert(item.b_us);
        }
    }
    for marker in &picture.markers {
        instants.insert(marker.at_us);
    }
    let instants: Vec<u64> = instants.into_iter().collect();
    instants.windows(2).filter(|pair| pair[1] - pair[0] >= QUIET_MIN_US).map(|pair| (pair[0], pair[1])).collect()
}

/// `4720.000ms`: a true instant the way the trace prints it.
pub fn ms_text(at_us: u64) -> String {
    format!("{}.{:03}ms", at_us / 1_000, at_us % 1_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(a: u64, b: u64) -> Item {
        Item::span(a, b, Style::Belief, String::new(), String::new())
    }

    #[test]
    fn overlapping_spans_get_their_own_rows_up_to_the_section_limit() {
        let rows = pack(vec![span(0, 10), span(5, 15), span(10, 20), span(6, 7), span(8, 9)], 0);
        assert_eq!(rows.len(), SECTION_ROWS_MAX);
        assert_eq!(rows[0].items.iter().map(|i| i.a_us).collect::<Vec<_>>(), vec![0, 10]);
        assert_eq!(rows[1].items.iter().map(|i| i.a_us).collect::<Vec<_>>(), vec![5]);
        // The last row takes what fits nowhere.
        assert_eq!(rows[2].items.iter().map(|i| i.a_us).collect::<Vec<_>>(), vec![6, 8]);
    }

    #[test]
    fn a_crowded_row_folds_into_stretches() {
        let mut row = Row { items: (0..5_000).map(|i| span(i * 10, i * 10 + 5)).collect() };
        assert!(cap(&mut row, 0, 50_000));
        assert_eq!(row.items.len(), AGGREGATE_BINS as usize);
        assert!(row.items.iter().all(|i| i.style == Style::Aggregate));
        assert!(row.items[0].trace.starts_with("17 items from 0.000ms"), "{}", row.items[0].trace);
    }

    #[test]
    fn a_long_clock_line_is_thinned_keeping_its_ends() {
        let mut points: Vec<(u64, i64)> = (0..10_000).map(|i| (i, i as i64)).collect();
        thin(&mut points);
        assert!(points.len() <= CLOCK_POINTS_MAX);
        assert_eq!(points.first(), Some(&(0, 0)));
        assert_eq!(points.last(), Some(&(9_999, 9_999)));
    }
}
