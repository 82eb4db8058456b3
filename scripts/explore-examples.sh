#!/usr/bin/env bash
# Runs the three example sweeps of README "Explore" and writes their output
# under examples/explore/NAME/: table.txt (the terminal table), cells.csv,
# cells.json and plots/*.svg. Seed records go to a scratch directory, so the
# JSON run resumes the table run's seeds instead of running them again.
# With --png, also renders docs/explore-fencing.png and docs/explore-drift.png
# with headless Chromium (`apt-get install -y chromium`).
#
#   cargo build --release -p fencesim && scripts/explore-examples.sh [--png]
set -euo pipefail
cd "$(dirname "$0")/.."
records=$(mktemp -d)
trap 'rm -rf "$records"' EXIT
for name in fencing drift election; do
  dir=examples/explore/$name
  rm -rf "$dir" && mkdir -p "$dir"
  target/release/fencesim explore "examples/explore-$name.toml" --jobs 2 --out "$records/$name.jsonl" \
    --csv "$dir/cells.csv" --plot "$dir/plots" > "$dir/table.txt"
  target/release/fencesim explore "examples/explore-$name.toml" --out "$records/$name.jsonl" --json > "$dir/cells.json"
  echo "wrote $dir"
done
if [[ "${1:-}" == "--png" ]]; then
  shot() {
    local profile
    profile=$(mktemp -d)
    chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
      --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
      --window-size="$3" --hide-scrollbars --screenshot="$PWD/$2" "file://$PWD/$1" 2>/dev/null
    rm -rf "$profile"
    echo "wrote $2"
  }
  shot examples/explore/fencing/plots/property-fenced-write.svg docs/explore-fencing.png 890,330
  shot examples/explore/drift/plots/lease-exposures.svg docs/explore-drift.png 660,400
fi
