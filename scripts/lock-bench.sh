#!/usr/bin/env bash
# fencelock-node beside etcd's `etcdctl lock`, on this machine, three local
# servers each with fsync on.
#
#   scripts/lock-bench.sh [--clients K] [--ops N] [--seconds S]
#
# Prints one table (markdown) on stdout, and under it the Raft messages
# `fencelock-node bench`'s servers sent per committed entry:
# - `fencelock-node bench`: K in-process clients doing acquire → release
#   round trips for S seconds (one connection per client, no process start);
# - the command line of each, K shell loops of N lock cycles on their own
#   keys: etcd's `etcdctl lock KEY -- true` (one process: acquire, run
#   `true`, release) and fencelock-node's `lock acquire` + `lock release`
#   (two processes). Each cycle's latency includes starting its processes.
#
# Installs Debian's etcd-server and etcd-client if `etcd` is missing. Every
# server this script starts listens on 127.0.0.1 only and is stopped by its
# PID when the script ends, however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=4
ops=200
seconds=10
while [[ $# -gt 0 ]]; do
    case "$1" in
        --clients) clients="$2"; shift 2 ;;
        --ops) ops="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "lock-bench: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done
for n in "$clients" "$ops" "$seconds"; do
    [[ "$n" =~ ^[1-9][0-9]{0,5}$ ]] || { echo "lock-bench: counts are whole numbers from 1, got \`$n\`" >&2; exit 2; }
done

log() { echo "lock-bench: $*" >&2; }

if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    log "installing Debian's etcd-server and etcd-client"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >&2
fi
node=target/release/fencelock-node
if [[ ! -x "$node" ]]; then
    log "building fencelock-node (release)"
    cargo build --release -q -p fencelock-node
fi

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    [[ -f "$work/fl/pids" ]] && "$node" cluster down --dir "$work/fl" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# Free loopback ports: bind port 0 and read back what the kernel chose.
ports=($(python3 -c '
import socket
socks = [socket.socket() for _ in range(6)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))'))
cluster=""
endpoints=""
for i in 0 1 2; do
    cluster+="${cluster:+,}e$i=http://127.0.0.1:${ports[$((2 * i + 1))]}"
    endpoints+="${endpoints:+,}127.0.0.1:${ports[$((2 * i))]}"
done
for i in 0 1 2; do
    etcd --name "e$i" --data-dir "$work/etcd-$i" \
        --listen-client-urls "http://127.0.0.1:${ports[$((2 * i))]}" \
        --advertise-client-urls "http://127.0.0.1:${ports[$((2 * i))]}" \
        --listen-peer-urls "http://127.0.0.1:${ports[$((2 * i + 1))]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${ports[$((2 * i + 1))]}" \
        --initial-cluster "$cluster" --initial-cluster-state new \
        > "$work/etcd-$i.log" 2>&1 &
    pids+=($!)
done
for _ in $(seq 1 100); do
    ETCDCTL_API=3 etcdctl --endpoints="$endpoints" endpoint health >/dev/null 2>&1 && break
    sleep 0.1
done
ETCDCTL_API=3 etcdctl --endpoints="$endpoints" endpoint health >/dev/null 2>&1 || { log "etcd did not become healthy"; exit 1; }

# K loops of N cycles; each cycle's latency in microseconds, one per line.
cycles() {
    local kind=$1 k=$2
    local out="$work/$kind-$k.txt"
    for i in $(seq 1 "$ops"); do
        local start end
        start=$(date +%s%N)
        if [[ "$kind" == etcd ]]; then
            ETCDCTL_API=3 etcdctl --endpoints="$endpoints" lock "bench-$k" -- true >/dev/null
        else
            local token
            token=$("$node" lock acquire "bench-$k" --lease-ms 5000 --dir "$work/fl")
            "$node" lock release "bench-$k" --token "$token" --dir "$work/fl" >/dev/null
        fi
        end=$(date +%s%N)
        echo $(((end - start) / 1000)) >> "$out"
    done
}
run_loops() {
    local kind=$1
    local start end
    start=$(date +%s%N)
    local loop_pids=()
    for k in $(seq 1 "$clients"); do
        cycles "$kind" "$k" &
        loop_pids+=($!)
    done
    for pid in "${loop_pids[@]}"; do wait "$pid"; done
    end=$(date +%s%N)
    echo $(((end - start) / 1000)) > "$work/$kind-wall.txt"
}

log "etcdctl lock: $clients loops of $ops cycles"
run_loops etcd
"$node" cluster up --nodes 3 --dir "$work/fl" >/dev/null
log "fencelock-node lock acquire + release: $clients loops of $ops cycles"
run_loops fencelock
"$node" cluster down --dir "$work/fl" >/dev/null
log "fencelock-node bench: $clients clients for $seconds s"
"$node" bench --clients "$clients" --seconds "$seconds" --json > "$work/bench.json"

python3 - "$work" "$clients" "$ops" "$seconds" "$(etcd --version | head -1)" <<'PY'
import json, sys
work, clients, ops, seconds, etcd_version = sys.argv[1:]
def stats(kind):
    lat = []
    for k in range(1, int(clients) + 1):
        lat += [int(x) for x in open(f"{work}/{kind}-{k}.txt")]
    lat.sort()
    wall_s = int(open(f"{work}/{kind}-wall.txt").read()) / 1e6
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1000
    return len(lat) / wall_s, pick(0.50), pick(0.99)
bench = json.load(open(f"{work}/bench.json"))
print(f"| what (3 local servers, fsync on, {clients} clients) | cycles/s | p50 ms | p99 ms |")
print("|---|---|---|---|")
print(f"| `fencelock-node bench` (in-process clients, {seconds} s) | {bench['round_trips_per_s']:.0f} | {bench['p50_ms']:.2f} | {bench['p99_ms']:.2f} |")
for kind, name in [("etcd", f"`etcdctl lock KEY -- true` ({etcd_version}; one process per cycle)"),
                   ("fencelock", "`fencelock-node lock acquire` + `lock release` (two processes per cycle)")]:
    rate, p50, p99 = stats(kind)
    print(f"| {name}, {ops} cycles per client | {rate:.0f} | {p50:.2f} | {p99:.2f} |")
print()
print(f"`fencelock-node bench` sent {bench['raft_messages_per_entry']:.1f} Raft messages per committed entry "
      "(every server's, heartbeats included).")
PY
