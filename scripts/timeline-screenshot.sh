#!/usr/bin/env bash
# Regenerates docs/timeline.png, the README's picture of a run: the timeline
# of the B-1042 paused-holder story (a scripted scenario, tests/tests/timeline.rs)
# under the sink-unfenced variant, where the stale write gets through and the
# checker reports fenced-write, taken with headless Chromium at 1,400 x 900.
#
#   scripts/timeline-screenshot.sh            # needs `apt-get install -y chromium`
set -euo pipefail
cd "$(dirname "$0")/.."
out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
FENCESIM_TIMELINE_DIR="$out_dir" cargo test -q --release -p fencesim-tests --test suite timeline:: >/dev/null
page="$out_dir/b1042_unfenced.html"
test -s "$page" || { echo "no $page written" >&2; exit 1; }
profile=$(mktemp -d)
chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
  --window-size=1400,900 --hide-scrollbars --screenshot="$PWD/docs/timeline.png" "file://$page" 2>/dev/null
rm -rf "$profile"
echo "wrote docs/timeline.png from $(basename "$page")"
