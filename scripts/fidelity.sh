#!/usr/bin/env bash
# The simulator beside the real world: for the default protocol and each
# unsafe variant a real run can show, real runs (`fencesim real`) and
# simulated seeds (`fencesim hunt`) on the same model, and how often and
# how soon each finds the flaw. Writes docs/FIDELITY.md.
#
#   scripts/fidelity.sh [--runs N] [--default-runs N] [--seconds S] [--sim-seeds M] [--jobs J] [--variants "a b c"]
#
# --runs real runs per unsafe variant, --default-runs of the default
# protocol (default: --runs), J real runs at a time (separate clusters).
# --again "a b" runs only those variants again and keeps the other rows'
# results from the last campaign (target/fidelity/); the page says which.
# A row whose results are not there is carried from the page as it was
# last written (it keeps each row's figures in a comment at its end).
# --again none writes the page from the last campaign's results alone.
# Binaries and results go under $CARGO_TARGET_DIR when it is set.
#
# Every real run starts its processes on 127.0.0.1 and stops them by PID
# (fencesim real does); its directory is removed after it is judged.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=10
DEFAULT_RUNS=""
JOBS=1
AGAIN=""
SECONDS_EACH=20
SIM_SEEDS=200
VARIANTS="default sink-unfenced second-path-unfenced release-ignores-token expire-ignores-token no-lease-restart-on-new-leader grant-after-expired-wait renew-without-leadership-check resource-restore-naive restore-naive amnesia-rejoin"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --default-runs) DEFAULT_RUNS="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --again) AGAIN="$2"; shift 2 ;;
    --seconds) SECONDS_EACH="$2"; shift 2 ;;
    --sim-seeds) SIM_SEEDS="$2"; shift 2 ;;
    --variants) VARIANTS="$2"; shift 2 ;;
    *) echo "error: unknown argument $1 (usage: scripts/fidelity.sh [--runs N] [--seconds S] [--sim-seeds M] [--variants \"a b\"])" >&2; exit 2 ;;
  esac
done

cargo build --release -q -p fencesim -p fencelock-node
TARGET="${CARGO_TARGET_DIR:-target}"
F="$TARGET/release/fencesim"
OUT="$TARGET/fidelity"
if [ -z "$AGAIN" ]; then
  rm -rf "$OUT"
fi
mkdir -p "$OUT"
RUN_VARIANTS="${AGAIN:-$VARIANTS}"
[ "$AGAIN" = none ] && RUN_VARIANTS=""
started=$(date -u +%s)

DEFAULT_RUNS="${DEFAULT_RUNS:-$RUNS}"
runs_of() { if [ "$1" = default ]; then echo "$DEFAULT_RUNS"; else echo "$RUNS"; fi; }

# One real run; exit 1 is a verdict (a violation), not a failure of the
# script. Exit 2 is a run that could not start (its one line says why, e.g.
# a port another process took first): it is tried once more; a run that
# still cannot start is left out of its row, which says so.
real_run() {
  local variant="$1" seed="$2" dir="$OUT/run-$1-$2" code=0
  for attempt in 1 2; do
    code=0
    "$F" real --variant "$variant" --seed "$seed" --seconds "$SECONDS_EACH" --set liveness_ms=5000 \
      --dir "$dir" --json > "$OUT/real-$variant-$seed.json" || code=$?
    rm -rf "$dir"
    [ "$code" -eq 2 ] || break
    echo "fidelity.sh: $variant seed $seed could not start (attempt $attempt)" >&2
  done
  [ "$code" -le 2 ]
}
export -f real_run
export F OUT SECONDS_EACH

for variant in $RUN_VARIANTS; do
  for ((seed = 0; seed < $(runs_of "$variant"); seed++)); do echo "$variant $seed"; done
done | xargs -r -P "$JOBS" -L 1 bash -c 'real_run "$0" "$1"'
for variant in $RUN_VARIANTS; do
  "$F" hunt --variant "$variant" --seeds "0..$SIM_SEEDS" --json > "$OUT/sim-$variant.json" || [ $? -eq 1 ]
done

wall_s=$(( $(date -u +%s) - started ))
python3 - "$OUT" "$RUNS" "$SECONDS_EACH" "$SIM_SEEDS" "$wall_s" "$VARIANTS" "$DEFAULT_RUNS" "$JOBS" "$AGAIN" <<'EOF'
import json, os, re, sys, datetime
out, runs, seconds, sim_seeds, wall_s, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6].split()
default_runs, jobs = int(sys.argv[7]), int(sys.argv[8])
again = [v for v in sys.argv[9].split() if v != "none"]
runs_of = lambda v: default_runs if v == "default" else runs
PAGE = "docs/FIDELITY.md"
MARK = "<!-- fidelity-data "
TOTALS = ("grants", "stale", "elections", "exposures", "ms", "played", "skipped")

def page_rows():
    """Each row as the page last wrote it: from its data comment, or (a page
    written before it kept one) from its table, without per-row totals."""
    try:
        text = open(PAGE).read()
    except FileNotFoundError:
        return {}, None
    if MARK in text:
        data = json.loads(text.split(MARK, 1)[1].split(" -->", 1)[0])
        return data["rows"], data.get("earlier")
    rows = {}
    for m in re.finditer(r"^\| `([a-z-]+)` \| (\d+) of (\d+) \| (never|run \d+) \| ([^|]*) \| (\d+) \| (\d+) of (\d+) \| (never|\d+) \|$", text, re.M):
        v = m.group(1)
        rows[v] = {"det": int(m.group(2)), "n": int(m.group(3)),
                   "first": None if m.group(4) == "never" else int(m.group(4).split()[1]),
                   "props": m.group(5).strip(), "mean_s": float(m.group(6)), "sdet": int(m.group(7)),
                   "sim_seeds": int(m.group(8)), "sfirst": None if m.group(9) == "never" else int(m.group(9)),
                   "when": None, "totals": None}
    for stamp, names in re.findall(r"(\d{4}-\d\d-\d\d \d\d:\d\d UTC) \(([^)]*)\)", text.split("ended by:", 1)[-1].split("\n\n", 1)[0]):
        for v in re.findall(r"`([a-z-]+)`", names):
            if v in rows:
                rows[v]["when"] = stamp
    nums = lambda pattern: [int(x) for x in re.search(pattern, text, re.S).groups()]
    try:
        ms_s, n = nums(r"Real time judged: (\d+) s \([^)]*\) over (\d+) runs")
        played, skipped = nums(r"faults played (\d+), skipped (\d+)")
        grants, stale, elections, exposures = nums(r"(\d+) grants, (\d+) stale writes rejected,\s*(\d+) elections, (\d+) lease exposures")
        earlier = {"runs": n, "rows": sorted(rows), "grants": grants, "stale": stale, "elections": elections,
                   "exposures": exposures, "ms": ms_s * 1000, "played": played, "skipped": skipped}
    except AttributeError:
        earlier = None
    return rows, earlier

def measured(variant):
    """The row of `variant` from this campaign's results, or None without them."""
    n = runs_of(variant)
    paths = [f"{out}/real-{variant}-{seed}.json" for seed in range(n)]
    if not all(os.path.exists(p) for p in paths) or not os.path.exists(f"{out}/sim-{variant}.json"):
        return None
    def judged(path):
        text = open(path).read()
        return json.loads(text) if text.strip() else None
    real = [r for r in map(judged, paths) if r is not None]
    unstarted = n - len(real)
    n = len(real)
    if n == 0:
        sys.exit(f"error: no run of {variant} could start ({unstarted} tried; their lines are above)")
    failed = [r for r in real if not r["ok"]]
    sim = json.load(open(f"{out}/sim-{variant}.json"))
    totals = dict.fromkeys(TOTALS, 0)
    for r in real:
        totals["ms"] += r["sim_ms"]
        if variant == "default":
            totals["grants"] += r["grants"]; totals["stale"] += r["stale_writes_rejected"]
            totals["elections"] += r["elections"]; totals["exposures"] += r["lease_exposures"]
        totals["played"] += len(r["faults"]); totals["skipped"] += len(r["real"]["skipped"])
    last = max(os.path.getmtime(p) for p in paths)
    return {"det": len(failed), "n": n, "first": next((i for i, r in enumerate(real) if not r["ok"]), None),
            "props": ", ".join(sorted({v["property"] for r in failed for v in r["violations"]})) or "—",
            "mean_s": sum(r["sim_ms"] for r in real) / n / 1000, "sdet": sim["failing_seeds"], "sim_seeds": sim_seeds,
            "sfirst": min((v["seed"] for v in sim["violations"]), default=None),
            "when": datetime.datetime.fromtimestamp(last, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "totals": totals, "unstarted": unstarted}

previous, earlier = page_rows()
rows, carried = {}, []
for variant in variants:
    row = measured(variant)
    if row is None:
        if variant not in previous:
            sys.exit(f"error: no results for {variant} in {out} and no row for it in {PAGE}")
        row = previous[variant]
        carried.append(variant)
    rows[variant] = row
# Totals: rows with their own figures add them; rows carried from a page
# that kept none are covered by that page's totals, as it last wrote them.
totals = dict.fromkeys(TOTALS, 0)
counted_runs = 0
for variant, row in rows.items():
    if row["totals"] is not None:
        counted_runs += row["n"]
        for k in TOTALS:
            totals[k] += row["totals"][k]
uncounted = [v for v, row in rows.items() if row["totals"] is None]
if uncounted and earlier is None:
    sys.exit(f"error: rows {uncounted} carry no totals and the page has none to cover them")
earlier = earlier if uncounted else None

first_text = lambda i: "never" if i is None else f"run {i}"
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
cores = os.cpu_count()
load = open("/proc/loadavg").read().split()[0]
lines = [
    "# Fidelity: real runs beside the simulator",
    "",
    "Written by `scripts/fidelity.sh`; do not edit by hand.",
    "",
    f"Measured {now} on {cores} cores (load average {load} when written); this invocation took {wall_s} s of wall time.",
    f"Last command: `scripts/fidelity.sh --runs {runs} --default-runs {default_runs} --seconds {seconds} --sim-seeds {sim_seeds} --jobs {jobs}" + (f" --again \"{' '.join(again)}\"" if again else "") + "`",
    f"({jobs} real runs at a time)." + (f" Run again since, alone: {', '.join(f'`{v}`' for v in again)} (`--again`)." if again else ""),
]
if carried:
    lines.append("Carried from the page as last written, not run by this invocation: " + ", ".join(f"`{v}`" for v in carried) + ".")
lines += [
    "",
    "Each variant: real runs (`fencesim real --variant V --seed N --seconds S --set liveness_ms=5000`, seeds from 0:",
    "3 or 5 real server processes, one worker process per client, SQLite; S s of faults, then 5 s healed:",
    "the table gives each row's mean length) and",
    "simulated seeds (`fencesim hunt --variant V --seeds 0..M`) on the same model.",
    "A detection is a run the checker fails. Where the two disagree, [NODE.md](NODE.md)",
    "(\"Where real runs and the simulator differ, and why\") says what a real run cannot do.",
    "",
    "| variant | real: detections | real: first | real: properties | real: s per run | simulated: detections | simulated: first seed |",
    "|---|---|---|---|---|---|---|",
]
for variant, r in rows.items():
    unstarted = f" ({r['unstarted']} more could not start)" if r.get("unstarted") else ""
    lines.append(f"| `{variant}` | {r['det']} of {r['n']}{unstarted} | {first_text(r['first'])} | {r['props']} | {r['mean_s']:.0f} | {r['sdet']} of {r['sim_seeds']} | {'never' if r['sfirst'] is None else r['sfirst']} |")
by_time = {}
for variant, row in rows.items():
    by_time.setdefault(row["when"] or "an earlier campaign", []).append(f"`{variant}`")
lines += [
    "",
    "Each row's real runs ended by: " + "; ".join(f"{stamp} ({', '.join(vs)})" for stamp, vs in sorted(by_time.items())) + ".",
    "",
]
say = lambda t, n: (f"Real time judged: {t['ms'] / 1000:.0f} s ({t['ms'] / 3_600_000:.2f} h) over {n} runs;",
                    f"faults played {t['played']}, skipped {t['skipped']} (kinds a real run cannot play: docs/CLI.md, `fencesim real`).",
                    f"The default protocol's runs: {t['grants']} grants, {t['stale']} stale writes rejected,",
                    f"{t['elections']} elections, {t['exposures']} lease exposures.")
if counted_runs:
    lines += list(say(totals, counted_runs))
if earlier is not None:
    rows_then = ", ".join(f"`{v}`" for v in earlier["rows"])
    lines += ([""] if counted_runs else []) + [
        f"Rows carried without figures of their own ({', '.join(f'`{v}`' for v in uncounted)}) are counted in the totals",
        f"the page last gave for its rows then ({rows_then}), which include runs of rows run again since:"]
    lines += list(say(earlier, earlier["runs"]))
lines += ["", MARK + json.dumps({"rows": rows, "earlier": earlier}, sort_keys=True) + " -->", ""]
with open(PAGE, "w") as f:
    f.write("\n".join(lines))
print("\n".join(lines))
EOF
