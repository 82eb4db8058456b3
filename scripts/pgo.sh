#!/usr/bin/env bash
# Writes the release build's optimisation profile,
# .cargo/pgo/rustc-RELEASE-COMMIT.profdata (rustc's release and commit: only
# that rustc's builds name their functions as the profile does), and its
# digest in .cargo/config.toml (`fencesim_pgo`), so that cargo rebuilds with it.
#
#   scripts/pgo.sh
#
# It builds the simulator instrumented (its own target directory,
# target/pgo-gen), runs the main job's work with it (a hunt on the standard
# model, and one on drawn models) and `bench` (so that bare madsim, the
# yardstick of its `overhead_ratio`, is optimised as the full stack is),
# and merges what the runs counted. Run it
# again when the hot path has changed much: a function whose code changed
# since the profile was taken is optimised as if there were none, so the
# build stays correct and only the gain fades. Installs rustup's llvm-tools
# (for llvm-profdata) if missing. Takes about five minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# The wrapper names the profile, as it looks for it when it compiles.
out=$(.cargo/rustc-pgo --profile-for rustc) ||
    { echo "pgo.sh: rustc -vV names no release or commit" >&2; exit 1; }
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [[ ! -x "$profdata" ]]; then
    echo "pgo.sh: installing rustup's llvm-tools (llvm-profdata)" >&2
    rustup component add llvm-tools
fi

gen="$root/target/pgo-gen"
raw="$gen/raw"
# CARGO_ENCODED_RUSTFLAGS (flags apart by 0x1f, so a path may hold spaces)
# replaces config.toml's flags, and the empty RUSTC_WRAPPER its wrapper: the
# instrumented build must not be optimised by the old profile. The profile
# names each function by its crate's hash, which cargo makes of the crate's
# features among other things: this is the one build of the README's main
# job, deploy/, results.sh and `cargo test --release` (they turn on the same
# features, sim/Cargo.toml).
RUSTC_WRAPPER="" RUSTFLAGS="" CARGO_ENCODED_RUSTFLAGS="$(printf '%s\x1f%s\x1f%s' --cfg madsim "-Cprofile-generate=$raw")" \
    cargo build --release --locked --target-dir "$gen" -p fencesim
# Only the runs' counts: the build's scripts and proc-macros, instrumented
# too, wrote theirs while they ran.
rm -rf "$raw"
"$gen/release/fencesim" hunt --seeds 0..300 --jobs 2 >/dev/null
"$gen/release/fencesim" hunt --swarm --seeds 0..150 --jobs 2 >/dev/null
"$gen/release/fencesim" bench --seeds 0..20 >/dev/null

# Sparse: a function the runs never entered gets no entry (and is optimised
# as if unprofiled) instead of one of zeros: a quarter of the file, as fast.
# Merged aside first: a failed merge leaves the committed profile as it was.
"$profdata" merge --sparse -o "$gen/merged.profdata" "$raw"
mkdir -p .cargo/pgo
rm -f .cargo/pgo/*.profdata
mv "$gen/merged.profdata" "$out"
digest=$(sha256sum "$out" | cut -c1-16)
sed -i "s/'fencesim_pgo=\"[^\"]*\"'/'fencesim_pgo=\"$digest\"'/" .cargo/config.toml
grep -q "fencesim_pgo=\"$digest\"" .cargo/config.toml ||
    { echo "pgo.sh: could not write the digest into .cargo/config.toml" >&2; exit 1; }
echo "pgo.sh: wrote $out ($(du -k "$out" | cut -f1) KiB, digest $digest)"
