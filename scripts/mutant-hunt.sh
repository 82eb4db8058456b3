#!/usr/bin/env bash
# The hunt as a mutant killer: for each chosen cargo-mutants mutant of core,
# apply its diff to a scratch copy of the tree (never to this worktree), build
# `fencesim` (release) there, run a hunt, and print one line per mutant:
#
#   caught   <mutant name>   <property> <seeds>, ...
#   missed   <mutant name>
#   unviable <mutant name>   (the mutated tree does not build)
#
# A seed that panics counts as caught, through the property `panic` (the line
# names it like any other property). A line `check` first runs the unmutated
# tree: a hunt that fails there would make every mutant look caught.
#
# Usage:
#   scripts/mutant-hunt.sh [-F REGEX]... [--missed FILE] [--seeds A..B] [--jobs N] [--swarm] [--set KEY=VALUE]... [--no-check]
#
#   -F REGEX      mutants whose name matches (as `cargo mutants -F`); repeatable
#   --missed FILE the missed mutants of a cargo-mutants run: `mutants.out/missed.txt`
#                 (one name a line) or `mutants.out/outcomes.json`
#   --seeds A..B  hunt seed range (default 0..300)
#   --jobs N      hunt threads (default 2)
#   --swarm       hunt with --swarm
#   --set K=V     a model key for the hunt, as `fencesim hunt --set` (repeatable)
#   --no-check    skip the run of the unmutated tree
#
# A hunt still running after MUTANT_HUNT_TIMEOUT seconds (default 300) is
# stopped and its mutant reported as `timeout`: a mutant that loops forever
# must not stall the rest.
#
# Environment: MUTANT_HUNT_DIR (default target/mutant-hunt) holds the scratch
# tree (`tree/`), its target directory (`target/`, reused across mutants so
# only fencelock and fencesim rebuild) and each mutant's hunt JSON (`out/`).
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"

filters=()
missed=""
seeds="0..300"
jobs=2
hunt_flags=()
check=1
while [ $# -gt 0 ]; do
    case "$1" in
        -F) filters+=(-F "$2"); shift 2 ;;
        --missed) missed="$2"; shift 2 ;;
        --seeds) seeds="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --swarm) hunt_flags+=(--swarm); shift ;;
        --set) hunt_flags+=(--set "$2"); shift 2 ;;
        --no-check) check=0; shift ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) echo "mutant-hunt: unknown argument \`$1\` (see --help)" >&2; exit 2 ;;
    esac
done
if [ ${#filters[@]} -eq 0 ] && [ -z "$missed" ]; then
    echo "mutant-hunt: name mutants with -F REGEX or --missed FILE (see --help)" >&2
    exit 2
fi

dir=${MUTANT_HUNT_DIR:-$root/target/mutant-hunt}
tree="$dir/tree"
out="$dir/out"
export CARGO_TARGET_DIR="$dir/target"
if [ ! -d "$CARGO_TARGET_DIR/release" ] && [ -d "$root/target/release" ]; then
    # Seed the scratch target with this tree's release build: the dependencies are not built again.
    mkdir -p "$CARGO_TARGET_DIR"
    cp -r "$root/target/release" "$CARGO_TARGET_DIR/release"
fi
mkdir -p "$tree" "$out"

# The mutants, with their diffs, as one JSON array.
mutants="$dir/mutants.json"
if [ -n "$missed" ]; then
    names="$dir/names.txt"
    case "$missed" in
        *.json) jq -r '.outcomes[] | select(.summary == "MissedMutant") | .scenario.Mutant.name' "$missed" > "$names" ;;
        *) grep -v '^$' "$missed" > "$names" ;;
    esac
    cargo mutants --list --json --diff "${filters[@]}" \
        | jq --rawfile names "$names" '($names | split("\n") | map(select(. != ""))) as $n | map(select(.name as $m | $n | index($m)))' \
        > "$mutants"
else
    cargo mutants --list --json --diff "${filters[@]}" > "$mutants"
fi
count=$(jq length "$mutants")
echo "mutant-hunt: $count mutants, hunt --seeds $seeds --jobs $jobs ${hunt_flags[*]}" >&2

# A scratch copy of the tree as it is now (tracked and new files, without target/).
copy_tree() {
    find "$tree" -mindepth 1 -maxdepth 1 ! -name target -exec rm -rf {} +
    git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$tree"
}

# Builds the scratch tree and hunts; prints `caught <ids>`, `missed` or `unviable`.
build_and_hunt() {
    local json="$1"
    if ! (cd "$tree" && cargo build --release -q -p fencesim) > "$json.build" 2>&1; then
        echo unviable
        return
    fi
    local code=0
    timeout "${MUTANT_HUNT_TIMEOUT:-300}" "$CARGO_TARGET_DIR/release/fencesim" hunt --seeds "$seeds" --json --jobs "$jobs" "${hunt_flags[@]}" > "$json" 2> "$json.err" || code=$?
    if [ "$code" -eq 124 ]; then
        echo "timeout (the hunt ran past ${MUTANT_HUNT_TIMEOUT:-300} s)"
        return
    fi
    if [ "$code" -ne 0 ] && [ "$code" -ne 1 ]; then
        echo "error (hunt exit $code, see $json.err)"
        return
    fi
    local caught
    caught=$(jq -r '.by_property // {} | to_entries | map("\(.key) \(.value.seeds)") | join(", ")' "$json")
    if [ -n "$caught" ]; then echo "caught $caught"; else echo missed; fi
}

copy_tree
if [ "$check" = 1 ]; then
    result=$(build_and_hunt "$out/unmutated.json")
    # "missed" here means what is wanted: no seed of the unmutated tree fails.
    printf 'check    (unmutated tree)  %s\n' "${result/#missed/clean}"
fi
for i in $(seq 0 $((count - 1))); do
    name=$(jq -r ".[$i].name" "$mutants")
    file=$(jq -r ".[$i].file" "$mutants")
    # The diff's second header names the mutant, not a file: rewrite both for `git apply`.
    jq -r ".[$i].diff" "$mutants" \
        | sed -e "1s|^--- .*|--- a/$file|" -e "2s|^+++ .*|+++ b/$file|" > "$out/patch.diff"
    # `patch`, not `git apply`: the scratch tree may sit inside this repository
    # (target/ is ignored), where `git apply` would patch the worktree itself.
    if ! patch -s -p1 -d "$tree" < "$out/patch.diff" > /dev/null; then
        printf '%-8s %s   (the diff does not apply)\n' error "$name"
        cp "$root/$file" "$tree/$file"
        continue
    fi
    # The readable name, then a short hash of the exact name: `<` and `<=`
    # of one line read alike once symbols become `_`.
    slug=$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.-' '_' | cut -c1-140)-$(printf '%s' "$name" | sha256sum | cut -c1-8)
    result=$(build_and_hunt "$out/$slug.json")
    verdict=${result%% *}
    detail=${result#"$verdict"}
    printf '%-8s %s  %s\n' "$verdict" "$name" "${detail# }"
    cp "$root/$file" "$tree/$file"
done
