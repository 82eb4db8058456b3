//! `explore` through the binary (CLI.md "Explore"): a tiny sweep end to end
//! (table, JSON, CSV, plots), its resume from `--out`, and bad sweep files.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().expect("the binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("explore-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Two variants × two leases, four short seeds each.
const TINY: &str = "[sweep]\nseeds = \"10..14\"\n[model]\nsafety_ms = 8000\nliveness_ms = 2000\n\
                    [axes]\nvariant = [\"default\", \"sink-unfenced\"]\nlease_ms = [500, 2000]\n";

#[test]
fn a_tiny_sweep_end_to_end_and_resumed() {
    let dir = scratch("tiny");
    let sweep = dir.join("tiny.toml");
    std::fs::write(&sweep, TINY).unwrap();
    let (sweep, out, csv, plots) =
        (sweep.to_str().unwrap(), dir.join("out.jsonl"), dir.join("t.csv"), dir.join("plots"));
    let args = ["explore", sweep, "--jobs", "2", "--json", "--out", out.to_str().unwrap()];
    let first = run(&[&args[..], &["--csv", csv.to_str().unwrap(), "--plot", plots.to_str().unwrap()]].concat());
    assert!(first.status.success(), "{}", text(&first.stderr));
    let json: Value = serde_json::from_slice(&first.stdout).expect("one JSON object");
    assert_eq!(json["axes"][0]["key"], "variant");
    assert_eq!(json["axes"][1]["values"], serde_json::json!([500, 2000]));
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    assert_eq!(cells[1]["axes"], serde_json::json!({"variant": "sink-unfenced", "lease_ms": 500}));
    for cell in cells {
        assert_eq!(cell["seeds"], 4);
        let fenced = &cell["properties"]["fenced-write"];
        let (rate, low, high) =
            (fenced["rate"].as_f64().unwrap(), fenced["low"].as_f64().unwrap(), fenced["high"].as_f64().unwrap());
        assert_eq!(rate, fenced["failing"].as_f64().unwrap() / 4.0);
        assert!(low <= rate && rate <= high && high > 0.0, "{fenced}");
        assert!(cell["acquires_granted"].as_u64().unwrap() > 0, "{cell}");
        assert!(cell["grants_per_s"].as_f64().unwrap() > 0.0);
        // Coverage per cell: the probes its seeds reached, each counted in at most its seeds.
        let coverage = cell["coverage"].as_array().expect("coverage per cell");
        let reached = coverage.iter().filter(|row| row["seeds"].as_u64().unwrap() > 0).count();
        assert_eq!(cell["probes_reached"].as_u64(), Some(reached as u64), "{cell}");
        assert!(reached > 10 && coverage.iter().all(|row| row["seeds"].as_u64().unwrap() <= 4), "{cell}");
    }
    // The safe protocol never lets a stale write through.
    assert_eq!(cells[0]["properties"]["fenced-write"]["failing"], 0);
    assert_eq!(cells[2]["properties"]["fenced-write"]["failing"], 0);

    let csv_text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = csv_text.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(lines[0].starts_with("variant,lease_ms,seeds,failing,failing_rate,"), "{}", lines[0]);
    assert!(lines[2].starts_with("sink-unfenced,500,4,"), "{}", lines[2]);
    assert_eq!(lines[0].split(',').count(), lines[1].split(',').count());
    let failing_svg = std::fs::read_to_string(plots.join("failing.svg")).unwrap();
    assert!(failing_svg.starts_with("<svg") && failing_svg.contains(">sink-unfenced</text>"));
    assert!(failing_svg.contains(">lease_ms</text>"));

    // Resume: keep 5 of the 16 records and a torn sixth line; the rest run again.
    let records = std::fs::read_to_string(&out).unwrap();
    assert_eq!(records.lines().count(), 16);
    let kept: Vec<&str> = records.lines().take(6).collect();
    let torn = format!("{}\n{}", kept[..5].join("\n"), &kept[5][..40]);
    std::fs::write(&out, torn).unwrap();
    let resumed = run(&["explore", sweep, "--jobs", "1", "--json", "--out", out.to_str().unwrap()]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert_eq!(
        text(&resumed.stdout),
        text(&first.stdout),
        "a resumed sweep reports what one run straight through does"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 16);

    // A resumed run with nothing left to do, as a table.
    let table = run(&["explore", sweep, "--out", out.to_str().unwrap(), "--plot", plots.to_str().unwrap()]);
    let table_text = text(&table.stdout);
    let header: Vec<&str> = table_text.lines().next().unwrap_or("").split_whitespace().take(5).collect();
    assert_eq!(header, ["variant", "lease_ms", "seeds", "failing", "[95%]"], "{table_text}");
    assert_eq!(table_text.lines().count(), 6, "a header, four cells and the last line: {table_text}");
    assert!(table_text.contains("0 seeds run") && table_text.contains("16 resumed"), "{table_text}");
    assert_eq!(std::fs::read_to_string(plots.join("failing.svg")).unwrap(), failing_svg, "plots are deterministic");

    // The records of another sweep are refused, before anything runs.
    let other = dir.join("other.toml");
    std::fs::write(&other, TINY.replace("[500, 2000]", "[700]")).unwrap();
    let refused = run(&["explore", other.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(text(&refused.stderr).contains("no cell of this sweep"), "{}", text(&refused.stderr));
}

#[test]
fn bad_sweep_files_are_one_line_and_exit_2_before_anything_runs() {
    let dir = scratch("bad");
    let cases = [
        ("[sweep]\nseeds = 4\n[axes]\nleese_ms = [500]\n", "axis `leese_ms` is not a model key"),
        ("[sweep]\nseeds = 4\n[axes]\nlease_ms = [500, 10]\n", "model key `lease_ms` must be in 100..=600000, got 10"),
        (
            "[sweep]\nseeds = 4\n[axes]\npause_ms_max = { from = 3000, to = 1000, step = 500 }\n",
            "axis `pause_ms_max`: the range 3000 to 1000 is empty",
        ),
        (
            "[sweep]\nseeds = 4\n[axes]\nvariant = [\"sink-unfenced\", \"sink-unfencd\"]\n",
            "axis `variant` value \"sink-unfencd\": unknown variant",
        ),
    ];
    for (i, (body, expected)) in cases.into_iter().enumerate() {
        let sweep = dir.join(format!("bad-{i}.toml"));
        std::fs::write(&sweep, body).unwrap();
        let out = dir.join(format!("bad-{i}.jsonl"));
        let output = run(&["explore", sweep.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(expected), "{stderr:?} should contain {expected:?}");
        assert!(!out.exists(), "nothing ran");
    }
    let missing = run(&["explore", dir.join("none.toml").to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).starts_with("error: cannot read sweep file"));
}
