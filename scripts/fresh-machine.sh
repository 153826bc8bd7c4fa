#!/usr/bin/env bash
# The fresh-machine check: what a new user meets after `git clone`, run in CI.
#
# Clones the committed repository into an empty temporary directory — no ../shared
# beside it, no VENN_DATA / VENN_DATA_DIR, an empty user data directory — and runs the
# README's test command, the quick start and a small simulator comparison there. Every
# run must find the data the repository carries (80 FEMNIST writers, the trace tables).
#
#   scripts/fresh-machine.sh            # from the repository root, after a build
#
# Builds go to $FRESH_TARGET_DIR (default: target-fresh in this checkout, warm after the
# first run). Not the checkout's own target/: cargo would reuse the clone's test binaries
# there, which have the clone's (deleted) paths compiled in. CI, which runs nothing after
# this script, points it at target/ to reuse the compiled dependencies; the workspace's own
# crates rebuild either way, since the clone's sources are newer.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/venn-fresh.XXXXXX")"
trap 'rm -rf "$work"' EXIT

git clone --quiet "$repo" "$work/venn"
cd "$work/venn"
if [ -e ../shared ]; then
    echo "fresh-machine: $work/shared exists; refusing to run beside shared data" >&2
    exit 1
fi
unset VENN_DATA VENN_DATA_DIR VENN_TRACES_DIR
export XDG_DATA_HOME="$work/empty-data" XDG_CACHE_HOME="$work/empty-cache"
export CARGO_TARGET_DIR="${FRESH_TARGET_DIR:-$repo/target-fresh}"

step() { printf '\n== fresh-machine: %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "cargo test --release --workspace in $work/venn"
cargo test --release --workspace

step "quick start: venn-lab run scripts/experiments/quick.toml"
cargo run --release --bin venn-lab -- run scripts/experiments/quick.toml --out "$work/quick"
# The summary records which data the run used: here, both copies built in.
summary="$work/quick/summary.json"
if [ "$(grep -c '"origin": "embedded"' "$summary")" != 2 ] || ! grep -q '"writers": 396,' "$summary"; then
    echo "fresh-machine: the quick start did not run on the built-in data:" >&2
    grep -A12 '"data"' "$summary" >&2
    exit 1
fi

step "venn-sim compare --scale 0.05"
cargo run --release --bin venn-sim -- compare --scale 0.05 --out "$work/compare"

step "done"
