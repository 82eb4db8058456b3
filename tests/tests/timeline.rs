//! The timeline of a run (`--timeline`), checked on the B-1042 story.
//!
//! The snapshot is the picture's outline (one line per drawn item: lane,
//! row, span, style, label), which a reviewer can read; the SVG itself is
//! checked for being the same byte for byte across runs and for the marks a
//! person looks for. `FENCESIM_TIMELINE_DIR=DIR` also writes the pages
//! there (`scripts/timeline-screenshot.sh` takes the README's picture from one).

use fencelock::resource::{WritePath, WriteVerdict};
use fencelock::{Token, Variant};
use fencesim::model::Model;
use fencesim::nodes::commands::WorkerResult;
use fencesim::run::seed::Outcome;
use fencesim::run::timeline;
use fencesim::script::{ms, run_script, script_model, worker_a, worker_b, Sim, B1042};

/// Seed 000, "In der Praxis": A gets 41 and stalls; its lease expires; B gets
/// 42 and writes; A wakes and writes with 41. The verdict on A's write is
/// what the variant makes of it.
async fn paused_holder(sim: &mut Sim) {
    let (a, b) = (worker_a(), worker_b());
    sim.leader().await;
    assert_eq!(sim.acquire(a, B1042).await, Token(41));
    sim.hold(a);
    let late_write = sim.start_write(a, B1042, WritePath::Status, None);
    sim.run_for(ms(script_model(2).lease_ms * 2)).await;
    assert_eq!(sim.acquire(b, B1042).await, Token(42));
    assert_eq!(sim.write(b, B1042, WritePath::Status).await, WorkerResult::Written(WriteVerdict::Accepted));
    sim.resume(a);
    sim.outcome(late_write).await;
}

fn run(model: Model) -> Outcome {
    run_script(0, model, async |sim: &mut Sim| paused_holder(sim).await)
}

/// Writes the page when `FENCESIM_TIMELINE_DIR` is set.
fn maybe_write(outcome: &Outcome, name: &str) {
    if let Some(dir) = std::env::var_os("FENCESIM_TIMELINE_DIR") {
        let path = std::path::Path::new(&dir).join(format!("{name}.html"));
        timeline::write(outcome, Some(name), &path).expect("the page is written");
    }
}

#[test]
fn b1042_fenced_timeline() {
    let outcome = run(script_model(2));
    assert!(outcome.ok);
    maybe_write(&outcome, "b1042_fenced");
    let picture = timeline::picture(&outcome, "b1042");
    insta::assert_snapshot!("b1042_fenced_outline", timeline::outline(&picture));

    let svg = timeline::svg(&outcome, "b1042");
    assert_eq!(svg, timeline::svg(&run(script_model(2)), "b1042"), "the same run draws the same bytes");
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.ends_with("</svg>\n"));
    // A's late write, rejected, on A's lane and at the resource; the holders of the key.
    assert!(svg.contains(">status tok41 stale</text>"), "A's rejected write is labelled");
    assert!(svg.contains(">tok41 stale</text>"), "the resource's verdict is labelled");
    assert!(svg.contains(">c0 tok41</text>") && svg.contains(">c1 tok42</text>"), "both committed holders");
    assert!(svg.contains("class=\"it sp bg paused\""), "A's stall lies behind its lane");
    assert!(!svg.contains("class=\"it mk vio\""), "no violation");
    let lanes = svg.matches("<g class=\"lane\">").count();
    assert_eq!(lanes, 1 + 5 + 2 + 1 + 1, "the faults (the heal), 5 servers, 2 clients, 1 key, the resource");
}

#[test]
fn b1042_unfenced_timeline_marks_the_violation() {
    let outcome = run(Model { variant: Variant::SinkUnfenced, ..script_model(2) });
    maybe_write(&outcome, "b1042_unfenced");
    let violation = outcome.violations.first().expect("the stale write gets through");
    assert_eq!(violation.property.to_string(), "fenced-write");

    let svg = timeline::svg(&outcome, "b1042 unfenced");
    assert!(svg.contains(">status tok41 ok</text>"), "A's stale write is accepted");
    assert!(svg.contains(&format!("class=\"it mk vio\" data-a=\"{}\"", violation.at_us)), "a marker at the violation");
    assert!(svg.contains(">fenced-write</text>"));

    let html = timeline::html(&outcome, "b1042 unfenced");
    assert!(html.contains(&svg), "the page holds the same SVG");
    // Self-contained: nothing to fetch (the only URL is the SVG namespace).
    for needle in ["src=", "href=", "@import", "url(http", "fetch("] {
        assert!(!html.contains(needle), "the page fetches something: {needle}");
    }
    let urls = html.matches("http").count();
    assert_eq!(urls, html.matches("http://www.w3.org/2000/svg").count(), "only the SVG namespace");
}
