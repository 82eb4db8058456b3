#!/usr/bin/env bash
# Regenerates docs/real-sink-unfenced.png and docs/real-default.png, the
# README's pictures of the B-1042 story as real processes: the shrunk
# scenario seeds/0000-sink-unfenced.toml run by `fencesim real` (a worker
# stopped by SIGSTOP between its lease check and its write, one real server,
# SQLite), once under sink-unfenced and once under the default protocol,
# each timeline taken with headless Chromium at 1,400 x 700. A real run is
# not reproducible byte for byte: each regeneration draws its own pictures.
#
#   scripts/real-timelines.sh            # needs `apt-get install -y chromium`
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p fencesim -p fencelock-node
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sed 's/^variant = "sink-unfenced"/variant = "default"/; s/^expect = "fenced-write"/expect = "pass"/' \
  seeds/0000-sink-unfenced.toml > "$out/default.toml"
for case in sink-unfenced default; do
  scenario=seeds/0000-sink-unfenced.toml
  [ "$case" = default ] && scenario="$out/default.toml"
  target/release/fencesim real --scenario "$scenario" --dir "$out/run-$case" --timeline "$out/$case.html" \
    || [ $? -eq 1 ]
  profile=$(mktemp -d)
  chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
    --window-size=1400,700 --hide-scrollbars --screenshot="$PWD/docs/real-$case.png" "file://$out/$case.html" 2>/dev/null
  rm -rf "$profile"
  echo "wrote docs/real-$case.png"
done
