#!/usr/bin/env bash
# Writes docs/RESULTS.md: the measurements the README points to, made by the
# release binary of this tree on this machine. Nothing in it is typed by hand.
#
#   cargo build --release -p fencesim && scripts/results.sh [--seeds N] [--score-seeds N]
#
#   --seeds N        seeds of the standard and swarm hunts (default 1000)
#   --score-seeds N  seeds tried per variant by `variants --score` (default 1000)
#   --timing-seeds N seeds per heartbeat of the Raft-timing sweep (default 200)
#   --real           also measure the real service beside etcd (scripts/lock-bench.sh;
#                    installs etcd from Debian's packages if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=1000
score_seeds=1000
timing_seeds=200
real=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --score-seeds) score_seeds="$2"; shift 2 ;;
    --timing-seeds) timing_seeds="$2"; shift 2 ;;
    --real) real=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
bin=target/release/fencesim
test -x "$bin" || { echo "build first: cargo build --release -p fencesim" >&2; exit 2; }
out=docs/RESULTS.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" bench --json > "$tmp/bench.json"
"$bin" hunt --seeds "$seeds" --jobs 2 --json > "$tmp/plain.json" || true
"$bin" hunt --seeds "$seeds" --jobs 2 --swarm --json > "$tmp/swarm.json" || true
"$bin" variants --score --seeds "$score_seeds" > "$tmp/score.txt" || true
# Raft timing: what each heartbeat costs idle, and what it buys under faults
# (the standard model's election timeouts, 100..200 ms, allow heartbeats up to 50 ms).
heartbeats=(20 30 40 50)
for hb in "${heartbeats[@]}"; do
  "$bin" replay --seed 1 --model examples/idle3.toml --set "heartbeat_ms=$hb" --json > "$tmp/idle-$hb.json"
done
printf '[sweep]\nseeds = %s\n\n[axes]\nheartbeat_ms = [%s]\n' "$timing_seeds" "$(IFS=,; echo "${heartbeats[*]}")" > "$tmp/timing.toml"
"$bin" explore "$tmp/timing.toml" --jobs 2 --json > "$tmp/timing.json"
# The machine as the measurements began: a busy machine slows every figure of speed.
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$tmp" "$seeds" "$score_seeds" "$(date -u +%Y-%m-%d)" "$(nproc)" "$load_start" "$timing_seeds" > "$out" <<'PY'
import json, sys
tmp, seeds, score_seeds, day, cores, load, timing_seeds = sys.argv[1:]
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
