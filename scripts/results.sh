#!/usr/bin/env bash
# Writes docs/RESULTS.md: the measurements the README points to, made by the
# release binary of this tree on this machine. Nothing in it is typed by hand.
#
#   cargo build --release -p fencesim && scripts/results.sh [--seeds N] [--score-seeds N] ...
#
#   --seeds N          seeds of the standard and swarm hunts (default 1000)
#   --score-seeds N    seeds tried per variant by `variants --score`, plain and
#                      `--swarm` (default 1000)
#   --timing-seeds N   seeds per heartbeat of the Raft-timing sweep (default 200)
#   --shrink-budget-s N  wall seconds of reduction per file of seeds/ that `shrink`
#                      gets (default 10)
#   --real             also measure the real service beside etcd (scripts/lock-bench.sh;
#                      installs etcd from Debian's packages if missing)
#   --mutants          also run `cargo mutants` over core (.cargo/mutants.toml; needs
#                      `cargo install cargo-mutants`); without it the page says it was not asked for
#   --out FILE         write there instead of docs/RESULTS.md
set -euo pipefail
seeds=1000
score_seeds=1000
timing_seeds=200
shrink_budget_s=10
real=0
mutants=0
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --score-seeds) score_seeds="$2"; shift 2 ;;
    --timing-seeds) timing_seeds="$2"; shift 2 ;;
    --shrink-budget-s) shrink_budget_s="$2"; shift 2 ;;
    --real) real=1; shift ;;
    --mutants) mutants=1; shift ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
# --out is relative to where the script was started; the rest to the repository.
if [[ -n "$out" ]]; then out=$(realpath -m -- "$out"); fi
cd "$(dirname "$0")/.."
out=${out:-docs/RESULTS.md}
bin=target/release/fencesim
test -x "$bin" || { echo "build first: cargo build --release -p fencesim" >&2; exit 2; }
# Asked for and impossible: say so now, not after an hour of measurements.
if [[ "$mutants" == 1 ]] && ! cargo mutants --version > /dev/null 2>&1; then
  echo "--mutants needs cargo-mutants: cargo install cargo-mutants" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The machine as the measurements began: a busy machine slows every figure of speed.
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
"$bin" bench --json > "$tmp/bench.json"
"$bin" hunt --seeds "$seeds" --jobs 2 --json > "$tmp/plain.json" || true
"$bin" hunt --seeds "$seeds" --jobs 2 --swarm --json > "$tmp/swarm.json" || true
"$bin" variants --score --seeds "$score_seeds" > "$tmp/score.txt" || true
"$bin" variants --score --swarm --seeds "$score_seeds" > "$tmp/score-swarm.txt" || true
# Steered swarm beside plain swarm, on seeds no other table uses (held out).
held_out="1000000..$((1000000 + seeds))"
"$bin" hunt --seeds "$held_out" --jobs 2 --swarm --json > "$tmp/held-swarm.json" || true
"$bin" hunt --seeds "$held_out" --jobs 2 --swarm --steer --json > "$tmp/held-steer.json" || true
"$bin" variants --score --swarm --steer --seeds "$score_seeds" > "$tmp/score-steer.txt" || true
# Each pinned failure of seeds/ shrunk again, within a budget; the files that
# expect `pass` have nothing to shrink. A shrink that refuses its file prints
# no JSON, and the table gives its error's last line instead.
mkdir "$tmp/shrink"
for file in seeds/*.toml; do
  grep -q '^expect = "pass"' "$file" && continue
  name=$(basename "$file" .toml)
  "$bin" shrink "$file" --budget-s "$shrink_budget_s" --json > "$tmp/shrink/$name.json" 2> "$tmp/shrink/$name.err" || true
done
if [[ "$mutants" == 1 ]]; then
  cargo mutants --version > "$tmp/mutants-version.txt"
  # Exit 2 (mutants missed) and 3 (timeouts) are results; anything else stops the script.
  status=0
  cargo mutants --output "$tmp/mutants" > "$tmp/mutants.log" 2>&1 || status=$?
  if [[ "$status" != 0 && "$status" != 2 && "$status" != 3 ]]; then
    tail -20 "$tmp/mutants.log" >&2
    echo "cargo mutants failed with exit $status" >&2
    exit 1
  fi
fi
# Raft timing: what each heartbeat costs idle, and what it buys under faults
# (the standard model's election timeouts, 100..200 ms, allow heartbeats up to 50 ms).
heartbeats=(20 30 40 50)
for hb in "${heartbeats[@]}"; do
  "$bin" replay --seed 1 --model examples/idle3.toml --set "heartbeat_ms=$hb" --json > "$tmp/idle-$hb.json"
done
printf '[sweep]\nseeds = %s\n\n[axes]\nheartbeat_ms = [%s]\n' "$timing_seeds" "$(IFS=,; echo "${heartbeats[*]}")" > "$tmp/timing.toml"
"$bin" explore "$tmp/timing.toml" --jobs 2 --json > "$tmp/timing.json"
python3 - "$tmp" "$seeds" "$score_seeds" "$(date -u +%Y-%m-%d)" "$(nproc)" "$load_start" "$timing_seeds" \
  "$shrink_budget_s" "$mutants" "$held_out" > "$out" <<'PY'
import json, os, re, sys
tmp, seeds, score_seeds, day, cores, load, timing_seeds, shrink_budget_s, mutants, held_out = sys.argv[1:]
bench = json.load(open(f"{tmp}/bench.json"))
print("# fencesim — results\n")
print(f"Written by `scripts/results.sh` on {day} from the release build of this tree, on a machine")
print(f"with {cores} cores (load average {load} when the script began); do not edit by hand. Run the")
print("script again to refresh every figure. Under each table, the command that made it.\n")
print("## Speed\n")
print("| figure | value |\n|---|---|")
for key, value in bench.items():
    if isinstance(value, (int, float, str)):
        print(f"| `{key}` | {value} |")
    elif isinstance(value, list):
        print(f"| `{key}` | {', '.join(str(v) for v in value)} |")
print("\n`fencesim bench --json`")
for name in ["plain", "swarm"]:
    hunt = json.load(open(f"{tmp}/{name}.json"))
    flag = " --swarm" if name == "swarm" else ""
    print(f"\n## Hunt of the default protocol{', swarm' if flag else ''}\n")
    print("| figure | value |\n|---|---|")
    print(f"| seeds run | {hunt['seeds_run']} |")
    print(f"| failing seeds | {hunt['failing_seeds']} |")
    print(f"| lease exposures (in seeds) | {hunt['lease_exposures']} ({hunt['lease_exposure_seeds']}) |")
    print(f"| messages | {hunt['messages']} |")
    a = hunt.get("availability")
    if a:
        print(f"| requests answered during faults | {a['fault_answered']} of {a['fault_requests']} ({100 * a['fault_answered_share']:.1f}%) |")
        print(f"| requests answered after the heal | {a['healed_answered']} of {a['healed_requests']} ({100 * a['healed_answered_share']:.1f}%) |")
        print(f"| grants during faults / after the heal | {a['fault_grants']} / {a['healed_grants']} |")
    print(f"| wall seconds | {hunt['wall_ms'] / 1000:.1f} |")
    print(f"\n`fencesim hunt --seeds {seeds} --jobs 2{flag} --json`")
print("\n## Mutation score\n")
print("Each unsafe variant on its declared model, seed after seed from 0, until a seed violates")
print("the property it must break.\n")
print("```")
print(open(f"{tmp}/score.txt").read().rstrip())
print("```")
print(f"\n`fencesim variants --score --seeds {score_seeds}`")

def score_rows(path):
    """The lines of a `variants --score` table by variant: (breaks, detection cell), and its score line."""
    rows, summary = {}, ""
    for line in open(path).read().splitlines():
        found = re.match(r"(\S+)\s+breaks (\S+)\s+found \S+\s+after\s+(\d+) seeds? +\(seed (\d+)\)$", line)
        missed = re.match(r"(\S+)\s+breaks (\S+)\s+NOT DETECTED in (.+)$", line)
        if found:
            rows[found[1]] = (found[2], f"{found[3]} (seed {found[4]})")
        elif missed:
            rows[missed[1]] = (missed[2], f"not in {missed[3]}")
        elif line.startswith("score:"):
            summary = line
    return rows, summary

def score_beside(left, right):
    """Two score tables side by side: each a (label, rows, summary line); the right one's variants in its order."""
    (left_label, left_rows, left_summary), (right_label, right_rows, right_summary) = left, right
    print(f"| variant | breaks | {left_label} | {right_label} |\n|---|---|---|---|")
    for name, (breaks, cell) in right_rows.items():
        print(f"| `{name}` | `{breaks}` | {left_rows.get(name, ('', '-'))[1]} | {cell} |")
    print(f"\n- {left_label}: {left_summary.removeprefix('score: ') or '-'}")
    print(f"- {right_label}: {right_summary.removeprefix('score: ') or '-'}")

print("\n## Mutation score, swarm\n")
print("The same unsafe variants under swarm testing: each seed draws its own configuration within the")
print("standard model's limits instead of running the variant's declared model. Seeds to detection")
print("(and the detecting seed) beside the declared model's, from the table above.\n")
swarm_score = ("swarm", *score_rows(f"{tmp}/score-swarm.txt"))
score_beside(("declared model", *score_rows(f"{tmp}/score.txt")), swarm_score)
print(f"\n`fencesim variants --score --swarm --seeds {score_seeds}`")

print("\n## Steered swarm beside plain swarm\n")
print("`hunt --swarm --steer` weights swarm's coins, round by round, toward the draws whose seeds")
print("reached the rarest coverage probes (COVERAGE.md, \"Steered hunts\"). The same held-out seeds")
print("plain and steered: the probes each reached, and the ten probes plain swarm reached least.\n")
plain_hunt = json.load(open(f"{tmp}/held-swarm.json"))
steer_hunt = json.load(open(f"{tmp}/held-steer.json"))
plain_cov = {c["probe"]: c["seeds"] for c in plain_hunt.get("coverage", [])}
steer_cov = {c["probe"]: c["seeds"] for c in steer_hunt.get("coverage", [])}
print("| probe | plain swarm, seeds | steered, seeds |\n|---|---|---|")
print(f"| probes reached (of {len(plain_cov)}) | {sum(1 for n in plain_cov.values() if n)} | {sum(1 for n in steer_cov.values() if n)} |")
for probe in sorted(plain_cov, key=lambda p: (plain_cov[p], p))[:10]:
    print(f"| `{probe}` | {plain_cov[probe]} | {steer_cov.get(probe, '-')} |")
print(f"| failing seeds | {plain_hunt['failing_seeds']} | {steer_hunt['failing_seeds']} |")
print(f"\n`fencesim hunt --seeds {held_out} --jobs 2 --swarm [--steer] --json`\n")
print("The mutation score under steering, beside plain swarm's from the table above:\n")
score_beside(swarm_score, ("steered", *score_rows(f"{tmp}/score-steer.txt")))
print(f"\n`fencesim variants --score --swarm --steer --seeds {score_seeds}`")

print("\n## Mutation testing of core\n")
if mutants == "1":
    def listed(kind):
        path = f"{tmp}/mutants/mutants.out/{kind}.txt"
        return open(path).read().splitlines() if os.path.exists(path) else []
    outcomes = {kind: listed(kind) for kind in ["caught", "missed", "unviable", "timeout"]}
    version = open(f"{tmp}/mutants-version.txt").read().strip()
    print(f"{version} over `core/src` (`.cargo/mutants.toml`), each mutant judged by core's own tests.\n")
    print("| outcome | mutants |\n|---|---|")
    for kind, names in outcomes.items():
        print(f"| {kind} | {len(names)} |")
    if outcomes["missed"]:
        print("\nMissed (no test of core noticed the change):\n")
        print("```")
        print("\n".join(outcomes["missed"]))
        print("```")
    print("\n`cargo mutants`")
else:
    print("Not asked for in this run: `scripts/results.sh --mutants` runs `cargo mutants` over core")
    print("(`.cargo/mutants.toml`; needs `cargo install cargo-mutants`).")

print("\n## Shrinking the pinned failures\n")
print("Every file of `seeds/` that expects a violation, shrunk again to the smallest run that still")
print(f"violates its property, with {shrink_budget_s} wall seconds of reduction each. Sizes are before → after;")
print("robust: the shrunk plan still fails under that many of the other workload seeds tried.\n")
print("| file | property | fault events | trace lines | simulated ms | 1-minimal | robust | wall s |")
print("|---|---|---|---|---|---|---|---|")
for name in sorted(n.removesuffix(".json") for n in os.listdir(f"{tmp}/shrink") if n.endswith(".json")):
    text = open(f"{tmp}/shrink/{name}.json").read().strip()
    file = f"{name}.toml"
    if not text:
        error = (open(f"{tmp}/shrink/{name}.err").read().strip().splitlines() or ["no output"])[-1]
        print(f"| `{file}` | not shrunk: {error.replace('|', '/')} | | | | | | |")
        continue
    r = json.loads(text)
    robust = "-" if r["robust_seeds"] is None else f"{r['robust_failing']} of {r['robust_seeds']}"
    minimal = "yes" if r["minimal"] else ("no (interrupted)" if r["interrupted"] else "no (budget)")
    print(f"| `{file}` | `{r['property']}` | {r['faults_before']} → {r['faults_after']} | "
          f"{r['trace_lines_before']} → {r['trace_lines_after']} | {r['sim_ms_before']} → {r['sim_ms_after']} | "
          f"{minimal} | {robust} | {r['wall_ms'] / 1000:.1f} |")
print(f"\n`fencesim shrink seeds/FILE.toml --budget-s {shrink_budget_s} --json`, for each file that does not expect `pass`")

print("\n## Raft timing: the idle cost of a heartbeat, and what it buys\n")
print("Idle: 3 servers, no clients, no faults, one simulated minute; a message is a request or its answer.")
print(f"Under faults: the standard model (election timeouts 100..200 ms), seeds 0..{timing_seeds} per row.\n")
print("| heartbeat_ms | idle messages/s | idle requests/s | first leader ms | failing seeds | acquire p50 ms | acquire p99 ms | unheld-waiting max ms | answered during faults |")
print("|---|---|---|---|---|---|---|---|---|")
timing = json.load(open(f"{tmp}/timing.json"))
for cell in timing["cells"]:
    hb = cell["axes"]["heartbeat_ms"]
    idle = json.load(open(f"{tmp}/idle-{hb}.json"))
    per_s = idle["messages"] / (idle["sim_ms"] / 1000)
    share = cell.get("fault_answered_share")
    answered = "-" if share is None else f"{100 * share:.1f}%"
    print(f"| {hb} | {per_s:.0f} | {per_s / 2:.0f} | {idle['first_leader_ms']} | {cell['failing']['failing']} of {cell['seeds']} | "
          f"{cell['acquire_ms_p50']} | {cell['acquire_ms_p99']} | {cell['unheld_waiting_ms_max']} | {answered} |")
print("\n`fencesim replay --seed 1 --model examples/idle3.toml --set heartbeat_ms=H --json`; "
      f"`fencesim explore` over `heartbeat_ms = [20, 30, 40, 50]`, `seeds = {timing_seeds}`")
PY
if [[ "$real" == 1 ]]; then
  {
    echo
    echo "## The real service beside etcd"
    echo
    echo "Three local servers of each, fsync on, on this machine. A command-line cycle includes"
    echo "starting its processes: one for \`etcdctl lock\`, two for fencelock-node's acquire and release."
    echo
    scripts/lock-bench.sh --clients 4 --ops 200 --seconds 10
    echo
    echo "\`scripts/lock-bench.sh --clients 4 --ops 200 --seconds 10\`"
  } >> "$out"
fi
echo "wrote $out"
