//! `explore --plot DIR`: one SVG chart per figure, written by hand so the
//! file is the same byte for byte on every machine (coordinates printed
//! with one decimal, no fonts embedded, no timestamps). One axis: a line
//! chart over the axis values (rates with their 95% interval as bars); two
//! axes: a heatmap with every cell's value written in it; three: one
//! heatmap per value of the third axis, side by side, on one colour scale.

use crate::cli::sweep_file::{show, Axis};
use crate::run::timeline::svg::escape;
use std::fmt::Write as _;

/// One figure over every cell of a sweep (cells in the sweep's order).
pub struct Figure {
    /// The file name without `.svg`.
    pub stem: String,
    pub title: String,
    /// What the value measures, with its unit (the y axis or the colour).
    pub unit: String,
    pub values: Vec<Option<f64>>,
    /// Rates: each value's 95% interval.
    pub bands: Option<Vec<(f64, f64)>>,
    /// Shown as percentages.
    pub percent: bool,
    /// A line drawn over the chart in the axes' own values (x, y), with its label.
    pub overlay: Option<(Vec<(f64, f64)>, String)>,
}

const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

fn svg_open(out: &mut String, width: f64, height: f64) {
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" {FONT} font-size=\"13\">"
    );
    let _ = writeln!(out, "<rect width=\"{width:.0}\" height=\"{height:.0}\" fill=\"#ffffff\"/>");
}

fn text(out: &mut String, x: f64, y: f64, anchor: &str, extra: &str, body: &str) {
    let _ = writeln!(out, "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\"{extra}>{}</text>", escape(body));
}

/// A value as the chart writes it: three significant digits, or a percentage.
pub fn format_value(value: f64, percent: bool) -> String {
    if percent {
        let p = value * 100.0;
        return if p == 0.0 || p >= 10.0 { format!("{p:.0}%") } else { format!("{p:.1}%") };
    }
    let abs = value.abs();
    if abs == 0.0 {
        "0".into()
    } else if abs >= 100.0 {
        format!("{value:.0}")
    } else if abs >= 10.0 {
        format!("{value:.1}")
    } else if abs >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// A tick step of 1, 2 or 5 times a power of ten giving about five ticks up to `max`.
fn tick_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * magnitude).find(|step| *step >= raw).unwrap_or(10.0 * magnitude)
}

/// A line chart of `figure` over the one axis.
pub fn line_chart(axis: &Axis, figure: &Figure) -> String {
    let n = axis.values.len();
    let (left, right, top, bottom) = (78.0, 24.0, 54.0, 64.0);
    let plot_w = (n as f64 * 90.0).clamp(360.0, 900.0);
    let plot_h = 300.0;
    let (width, height) = (left + plot_w + right, top + plot_h + bottom);
    let mut out = String::new();
    svg_open(&mut out, width, height);
    text(&mut out, left, 24.0, "start", " font-size=\"16\" font-weight=\"bold\"", &figure.title);
    text(&mut out, left, 42.0, "start", " fill=\"#555\"", &figure.unit);
    let highs = figure.bands.iter().flatten().map(|b| b.1);
    let max = figure.values.iter().flatten().copied().chain(highs).fold(0.0, f64::max);
    let step = tick_step(if max > 0.0 { max } else { 1.0 });
    let top_value = (max / step).ceil().max(1.0) * step;
    let y_of = |v: f64| top + plot_h - v / top_value * plot_h;
    let x_of = |i: usize| left + (i as f64 + 0.5) * plot_w / n as f64;
    let ticks = (top_value / step).round() as usize;
    for t in 0..=ticks {
        let v = t as f64 * step;
        let y = y_of(v);
        let _ = writeln!(
            out,
            "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#e4e4e4\"/>",
            left + plot_w
        );
        text(&mut out, left - 8.0, y + 4.0, "end", " fill=\"#444\"", &format_value(v, figure.percent));
    }
    let bottom_y = top + plot_h;
    let _ = writeln!(
        out,
        "<line x1=\"{left:.1}\" y1=\"{bottom_y:.1}\" x2=\"{:.1}\" y2=\"{bottom_y:.1}\" stroke=\"#333\"/>",
        left + plot_w
    );
    for (i, value) in axis.values.iter().enumerate() {
        text(&mut out, x_of(i), bottom_y + 20.0, "middle", "", &show(value));
    }
    text(&mut out, left + plot_w / 2.0, bottom_y + 46.0, "middle", " font-weight=\"bold\"", &axis.key);
    if let Some(bands) = &figure.bands {
        for (i, (low, high)) in bands.iter().enumerate() {
            let (x, y1, y2) = (x_of(i), y_of(*low), y_of(*high));
            let _ = writeln!(
                out,
                "<path d=\"M{:.1} {y1:.1}H{:.1}M{x:.1} {y1:.1}V{y2:.1}M{:.1} {y2:.1}H{:.1}\" stroke=\"#8fb3d9\" stroke-width=\"2\" fill=\"none\"/>",
                x - 6.0,
                x + 6.0,
                x - 6.0,
                x + 6.0
            );
        }
    }
    let points: Vec<(f64, f64, f64)> =
        figure.values.iter().enumerate().filter_map(|(i, v)| v.map(|v| (x_of(i), y_of(v), v))).collect();
    if points.len() > 1 {
        let path: Vec<String> = points.iter().map(|(x, y, _)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"2.5\"/>",
            path.join(" ")
        );
    }
    for (x, y, v) in &points {
        let _ = writeln!(out, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4.5\" fill=\"#1f5fa8\"/>");
        text(&mut out, *x + 8.0, *y - 8.0, "start", " font-size=\"12\"", &format_value(*v, figure.percent));
    }
    out.push_str("</svg>\n");
    out
}

/// The position of `value` among `values` in cell units (0 is the first
/// cell's centre), linear between neighbours; `None` outside half a cell.
fn position(values: &[f64], value: f64) -> Option<f64> {
    let n = values.len();
    if n == 1 {
        return (value == values[0]).then_some(0.0);
    }
    let ascending = values.windows(2).all(|w| w[0] < w[1]);
    if !ascending {
        return None;
    }
    let (first_gap, last_gap) = (values[1] - values[0], values[n - 1] - values[n - 2]);
    let index = if value < values[0] {
        (value - values[0]) / first_gap
    } else if value >= values[n - 1] {
        (n - 1) as f64 + (value - values[n - 1]) / last_gap
    } else {
        let i = values.windows(2).position(|w| value >= w[0] && value < w[1])?;
        i as f64 + (value - values[i]) / (values[i + 1] - values[i])
    };
    (-0.5..=(n as f64 - 0.5)).contains(&index).then_some(index)
}

/// White through orange to dark red.
fn colour(t: f64) -> String {
    let stops = [(255.0, 247.0, 236.0), (252.0, 141.0, 89.0), (127.0, 0.0, 0.0)];
    let t = t.clamp(0.0, 1.0) * 2.0;
    let (i, f) = if t >= 2.0 { (1, 1.0) } else { (t.floor() as usize, t.fract()) };
    let (a, b) = (stops[i], stops[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// A heatmap of `figure`: the first axis across, the second down, one panel
/// per value of a third.
pub fn heatmap(axes: &[Axis], figure: &Figure) -> String {
    assert!((2..=3).contains(&axes.len()), "a heatmap needs two or three axes");
    let (nx, ny) = (axes[0].values.len(), axes[1].values.len());
    let panels = axes.get(2).map_or(1, |a| a.values.len());
    let (cell_w, cell_h) = (96.0, 46.0);
    let (left, top, gap, right) = (150.0, 96.0, 40.0, 120.0);
    let panel_w = nx as f64 * cell_w;
    let width = left + panels as f64 * panel_w + (panels - 1) as f64 * gap + right;
    let height = top + ny as f64 * cell_h + if figure.overlay.is_some() { 70.0 } else { 44.0 };
    let max = figure.values.iter().flatten().copied().fold(0.0, f64::max);
    let mut out = String::new();
    svg_open(&mut out, width, height);
    text(&mut out, 16.0, 24.0, "start", " font-size=\"16\" font-weight=\"bold\"", &figure.title);
    text(&mut out, 16.0, 42.0, "start", " fill=\"#555\"", &figure.unit);
    for panel in 0..panels {
        let x0 = left + panel as f64 * (panel_w + gap);
        if let Some(third) = axes.get(2) {
            let label = format!("{} = {}", third.key, show(&third.values[panel]));
            text(&mut out, x0 + panel_w / 2.0, top - 34.0, "middle", " font-weight=\"bold\"", &label);
        }
        for (ix, value) in axes[0].values.iter().enumerate() {
            text(&mut out, x0 + (ix as f64 + 0.5) * cell_w, top - 10.0, "middle", "", &show(value));
        }
        if panel == 0 {
            for (iy, value) in axes[1].values.iter().enumerate() {
                let y = top + (iy as f64 + 0.5) * cell_h + 4.0;
                text(&mut out, left - 10.0, y, "end", "", &show(value));
            }
        }
        for iy in 0..ny {
            for ix in 0..nx {
                let cell = ix + nx * (iy + ny * panel);
                let band = figure.bands.as_ref().map(|b| b[cell]);
                heat_cell(&mut out, (x0 + ix as f64 * cell_w, top + iy as f64 * cell_h), figure, cell, band, max);
            }
        }
        if let Some((line, _)) = &figure.overlay {
            overlay(&mut out, axes, (x0, top, cell_w, cell_h), line);
        }
    }
    let axis_y = top + ny as f64 * cell_h;
    text(&mut out, left + panel_w / 2.0, axis_y + 24.0, "middle", " font-weight=\"bold\"", &axes[0].key);
    text(&mut out, left - 10.0, top - 10.0, "end", " font-weight=\"bold\"", &axes[1].key);
    if let Some((_, label)) = &figure.overlay {
        text(
            &mut out,
            left,
            axis_y + 52.0,
            "start",
            " fill=\"#0b3d91\" font-weight=\"bold\"",
            &format!("- - - {label}"),
        );
    }
    legend(&mut out, (width - right + 24.0, top), ny as f64 * cell_h, max, figure.percent);
    out.push_str("</svg>\n");
    out
}

fn heat_cell(out: &mut String, (x, y): (f64, f64), figure: &Figure, cell: usize, band: Option<(f64, f64)>, max: f64) {
    let (w, h) = (96.0, 46.0);
    let Some(value) = figure.values[cell] else {
        let _ = writeln!(
            out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w}\" height=\"{h}\" fill=\"#dddddd\" stroke=\"#fff\"/>"
        );
        text(out, x + w / 2.0, y + h / 2.0 + 5.0, "middle", " fill=\"#666\"", "none");
        return;
    };
    let t = if max > 0.0 { value / max } else { 0.0 };
    let fill = colour(t);
    let ink = if t > 0.55 { "#ffffff" } else { "#111111" };
    let _ =
        writeln!(out, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w}\" height=\"{h}\" fill=\"{fill}\" stroke=\"#fff\"/>");
    let main = format_value(value, figure.percent);
    match band {
        Some((low, high)) => {
            text(out, x + w / 2.0, y + 21.0, "middle", &format!(" fill=\"{ink}\" font-weight=\"bold\""), &main);
            let range = format!("{}–{}", format_value(low, figure.percent), format_value(high, figure.percent));
            text(out, x + w / 2.0, y + 37.0, "middle", &format!(" fill=\"{ink}\" font-size=\"11\""), &range);
        }
        None => {
            text(out, x + w / 2.0, y + h / 2.0 + 5.0, "middle", &format!(" fill=\"{ink}\" font-weight=\"bold\""), &main)
        }
    }
}

fn overlay(out: &mut String, axes: &[Axis], (x0, y0, cell_w, cell_h): (f64, f64, f64, f64), line: &[(f64, f64)]) {
    let numbers = |axis: &Axis| -> Option<Vec<f64>> {
        axis.values.iter().map(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64))).collect()
    };
    let (Some(xs), Some(ys)) = (numbers(&axes[0]), numbers(&axes[1])) else { return };
    let points: Vec<(f64, f64)> = line
        .iter()
        .filter_map(|&(x, y)| Some((position(&xs, x)?, position(&ys, y)?)))
        .map(|(ix, iy)| (x0 + (ix + 0.5) * cell_w, y0 + (iy + 0.5) * cell_h))
        .collect();
    if points.len() < 2 {
        return;
    }
    let path: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    let _ = writeln!(
        out,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#ffffff\" stroke-width=\"6\" opacity=\"0.8\"/>",
        path.join(" ")
    );
    let _ = writeln!(
        out,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#0b3d91\" stroke-width=\"3\" stroke-dasharray=\"9 5\"/>",
        path.join(" ")
    );
}

fn legend(out: &mut String, (x, y): (f64, f64), height: f64, max: f64, percent: bool) {
    let steps = 20;
    for i in 0..steps {
        let t = 1.0 - i as f64 / (steps - 1) as f64;
        let yy = y + i as f64 * height / steps as f64;
        let _ = writeln!(
            out,
            "<rect x=\"{x:.1}\" y=\"{yy:.1}\" width=\"18\" height=\"{:.1}\" fill=\"{}\"/>",
            height / steps as f64 + 0.5,
            colour(t)
        );
    }
    text(out, x + 24.0, y + 10.0, "start", "", &format_value(max, percent));
    text(out, x + 24.0, y + height, "start", "", &format_value(0.0, percent));
}

#[cfg(test)]
mod tests {
    use super::{format_value, position, tick_step};

    #[test]
    fn ticks_positions_and_labels() {
        assert_eq!((tick_step(1.0), tick_step(0.07), tick_step(830.0)), (0.2, 0.02, 200.0));
        assert_eq!(position(&[500.0, 1000.0, 2000.0], 1500.0), Some(1.5));
        assert_eq!(position(&[500.0, 1000.0, 2000.0], 2400.0), Some(2.4));
        assert_eq!(position(&[500.0, 1000.0, 2000.0], 3000.0), None);
        assert_eq!(
            (format_value(0.0526, true), format_value(0.25, true), format_value(12.345, false)),
            ("5.3%".into(), "25%".into(), "12.3".into())
        );
    }
}
