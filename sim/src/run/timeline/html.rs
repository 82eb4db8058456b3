//! The self-contained page: the SVG of `svg.rs` inline, the violations as
//! text, a hover panel and the script of `timeline.js` (zoom, compress
//! quiet stretches; it opens on the first violation). Nothing is fetched.

use super::layout::Picture;
use super::svg::{escape, render as render_svg};
use std::fmt::Write as _;

const SCRIPT: &str = include_str!("timeline.js");

const PAGE_CSS: &str = "body{margin:0;font:13px sans-serif;color:#111;background:#fff}\
header{padding:6px 8px;display:flex;gap:14px;align-items:center;flex-wrap:wrap;border-bottom:1px solid #e5e7eb}\
header button{font:12px sans-serif}\
#window{color:#6b7280;font-size:12px}\
ul.vio{margin:4px 8px;padding-left:18px;color:#991b1b;font-size:12px}\
ul.vio li{cursor:pointer;max-width:1340px}\
main{padding:0 0 64px 0;overflow-x:auto}\
svg{cursor:grab;user-select:none;display:block}\
svg .quiet{fill:#f3f4f6;stroke:#9ca3af;stroke-dasharray:2 3;opacity:.85}\
#info{position:fixed;left:0;right:0;bottom:0;margin:0;padding:6px 8px;min-height:30px;max-height:120px;overflow:auto;\
background:#111827;color:#f9fafb;font:12px \"DejaVu Sans Mono\",Menlo,monospace;white-space:pre-wrap}";

pub fn render(picture: &Picture) -> String {
    let mut out = String::with_capacity(1 << 16);
    let _ = writeln!(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = writeln!(out, "<title>{}</title>\n<style>{PAGE_CSS}</style></head><body>", escape(&picture.title));
    let _ = writeln!(
        out,
        "<header><button id=\"whole\">whole run</button>\
         <label><input type=\"checkbox\" id=\"compress\"> compress quiet stretches</label>\
         <span id=\"window\"></span><span id=\"window-hint\" style=\"color:#6b7280;font-size:12px\">\
         wheel: zoom · drag: pan · hover: trace lines</span></header>"
    );
    if !picture.markers.is_empty() {
        let _ = writeln!(out, "<ul class=\"vio\">");
        for marker in &picture.markers {
            let _ = writeln!(
                out,
                "<li data-at=\"{}\"><b>{}</b> at {}: {}</li>",
                marker.at_us,
                escape(&marker.property),
                super::ms(marker.at_us),
                escape(&marker.detail)
            );
        }
        let _ = writeln!(out, "</ul>");
    }
    let _ = writeln!(out, "<main>");
    out.push_str(&render_svg(picture));
    let _ = writeln!(out, "</main>");
    let _ = writeln!(out, "<pre id=\"info\">Hover over anything for the trace lines behind it.</pre>");
    let _ = writeln!(out, "<script>\n{SCRIPT}</script>\n</body></html>");
    out
}
