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
# Compiled dependencies are reused from this checkout's target directory (set
# CARGO_TARGET_DIR to use another); the workspace's own crates rebuild, because their
# path changed.
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
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"

step() { printf '\n== fresh-machine: %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "cargo test --release --workspace in $work/venn"
cargo test --release --workspace

step "quick start: venn-lab run scripts/experiments/quick.toml"
cargo run --release --bin venn-lab -- run scripts/experiments/quick.toml --out "$work/quick"
# The summary records which data the run used: here, both copies built in.
summary="$work/quick/summary.json"
if [ "$(grep -c '"origin": "embedded"' "$summary")" != 2 ] || ! grep -q '"writers": 80,' "$summary"; then
    echo "fresh-machine: the quick start did not run on the built-in data:" >&2
    grep -A12 '"data"' "$summary" >&2
    exit 1
fi

step "venn-sim compare --scale 0.05"
cargo run --release --bin venn-sim -- compare --scale 0.05 --out "$work/compare"

step "done"
