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
# --again none writes the page from the last campaign's results alone.
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
VARIANTS="default sink-unfenced second-path-unfenced release-ignores-token expire-ignores-token no-lease-restart-on-new-leader grant-after-expired-wait renew-without-leadership-check"
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
F=target/release/fencesim
OUT=target/fidelity
if [ -z "$AGAIN" ]; then
  rm -rf "$OUT"
fi
mkdir -p "$OUT"
RUN_VARIANTS="${AGAIN:-$VARIANTS}"
[ "$AGAIN" = none ] && RUN_VARIANTS=""
started=$(date -u +%s)

DEFAULT_RUNS="${DEFAULT_RUNS:-$RUNS}"
runs_of() { if [ "$1" = default ]; then echo "$DEFAULT_RUNS"; else echo "$RUNS"; fi; }

# One real run; exit 1 is a verdict (a violation), not a failure of the script.
real_run() {
  local variant="$1" seed="$2" dir="$OUT/run-$1-$2"
  "$F" real --variant "$variant" --seed "$seed" --seconds "$SECONDS_EACH" --set liveness_ms=5000 \
    --dir "$dir" --json > "$OUT/real-$variant-$seed.json" || [ $? -eq 1 ]
  rm -rf "$dir"
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
import json, os, sys, datetime
out, runs, seconds, sim_seeds, wall_s, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6].split()
default_runs, jobs = int(sys.argv[7]), int(sys.argv[8])
again = [v for v in sys.argv[9].split() if v != "none"]
runs_of = lambda v: default_runs if v == "default" else runs
rows = []
when = {}
totals = {"grants": 0, "stale": 0, "elections": 0, "exposures": 0, "ms": 0, "played": 0, "skipped": 0}
for variant in variants:
    real = []
    for seed in range(runs_of(variant)):
        with open(f"{out}/real-{variant}-{seed}.json") as f:
            real.append(json.load(f))
    failed = [r for r in real if not r["ok"]]
    first = next((i for i, r in enumerate(real) if not r["ok"]), None)
    props = sorted({v["property"] for r in failed for v in r["violations"]})
    with open(f"{out}/sim-{variant}.json") as f:
        sim = json.load(f)
    sim_failing = sim["failing_seeds"]
    sim_first = min((v["seed"] for v in sim["violations"]), default=None)
    for r in real:
        totals["ms"] += r["sim_ms"]
        if variant == "default":
            totals["grants"] += r["grants"]; totals["stale"] += r["stale_writes_rejected"]
            totals["elections"] += r["elections"]; totals["exposures"] += r["lease_exposures"]
        totals["played"] += len(r["faults"]); totals["skipped"] += len(r["real"]["skipped"])
    mean_s = sum(r["sim_ms"] for r in real) / len(real) / 1000
    last = max(os.path.getmtime(f"{out}/real-{variant}-{seed}.json") for seed in range(runs_of(variant)))
    when[variant] = datetime.datetime.fromtimestamp(last, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows.append((variant, len(failed), runs_of(variant), first, ", ".join(props) or "—", sim_failing, sim_first, mean_s))
def first_text(i):
    return "never" if i is None else f"run {i}"
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
    "",
    "Each variant: real runs (`fencesim real --variant V --seed N --seconds S --set liveness_ms=5000`, seeds from 0:",
    "3 or 5 real server processes, one worker process per client, SQLite; S s of faults, then 5 s healed:",
    "the table gives each row's mean length) and",
    f"{sim_seeds} simulated seeds (`fencesim hunt --variant V --seeds 0..{sim_seeds}`) on the same model.",
    "A detection is a run the checker fails. Where the two disagree, [NODE.md](NODE.md)",
    "(\"Where real runs and the simulator differ, and why\") says what a real run cannot do.",
    "",
    "| variant | real: detections | real: first | real: properties | real: s per run | simulated: detections | simulated: first seed |",
    "|---|---|---|---|---|---|---|",
]
for variant, det, n, first, props, sdet, sfirst, mean_s in rows:
    lines.append(f"| `{variant}` | {det} of {n} | {first_text(first)} | {props} | {mean_s:.0f} | {sdet} of {sim_seeds} | {'never' if sfirst is None else sfirst} |")
hours = totals["ms"] / 3_600_000
by_time = {}
for variant, stamp in when.items():
    by_time.setdefault(stamp, []).append(f"`{variant}`")
lines += [
    "",
    "Each row's real runs ended by: " + "; ".join(f"{stamp} ({', '.join(vs)})" for stamp, vs in sorted(by_time.items())) + ".",
    "",
    f"Real time judged: {totals['ms'] / 1000:.0f} s ({hours:.2f} h) over {sum(r[2] for r in rows)} runs;",
    f"faults played {totals['played']}, skipped {totals['skipped']} (kinds a real run cannot play: docs/CLI.md, `fencesim real`).",
    f"The default protocol's runs: {totals['grants']} grants, {totals['stale']} stale writes rejected,",
    f"{totals['elections']} elections, {totals['exposures']} lease exposures.",
    "",
]
with open("docs/FIDELITY.md", "w") as f:
    f.write("\n".join(lines))
print("\n".join(lines))
EOF
