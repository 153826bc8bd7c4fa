#!/usr/bin/env bash
# The fresh-machine check: what a new user meets after `git clone`, run in CI.
#
# Clones the committed repository into an empty temporary directory — no ../shared
# beside it, no VENN_DATA / VENN_DATA_DIR, an empty user data directory — and there:
# 1. builds the quick start (`cargo build --release --bin venn-lab`), timed: cold when the
#    target directory is empty, as in CI;
# 2. runs the quick start, which must find the data the repository carries (80 FEMNIST
#    writers, the trace tables);
# 3. runs the README's test command, the whole suite, once; its build must compile no
#    Burn crate again (one build of Burn for run and test: see datasets/Cargo.toml);
# 4. tests the cargo features that are off by default: `download` (datasets) and `k8s`
#    (venn-lab, with `podman kube play` where podman runs);
# 5. runs a small simulator comparison.
#
#   scripts/fresh-machine.sh            # from the repository root
#
# With $FRESH_SETUP_DONE set (CI), the tests wait until that file exists: .ci/run installs
# the system packages some tests need in the background and touches it when done.
#
# Builds go to $FRESH_TARGET_DIR (default: target-fresh in this checkout, warm after the
# first run). Not the checkout's own target/: cargo would reuse the clone's test binaries
# there, which have the clone's (deleted) paths compiled in. CI, which runs nothing after
# this script but a `cargo check`, points it at target/.
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

# Runs a cargo build command; fails when it compiles a Burn crate (the quick start's
# build made them all).
no_second_burn() {
    local log="$work/build.log"
    "$@" 2>&1 | tee "$log"
    if grep -E '^ *Compiling burn' "$log"; then
        echo "fresh-machine: \`$*\` compiled Burn again; some dependency's features differ" \
            "from the quick start's build (pin them: see datasets/Cargo.toml)" >&2
        exit 1
    fi
}

step "quick-start build: cargo build --release --bin venn-lab in $work/venn"
t0=$(date +%s)
cargo build --release --bin venn-lab
echo "fresh-machine: quick-start build $(( $(date +%s) - t0 )) s" \
    "(load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"

step "quick start: venn-lab run scripts/experiments/quick.toml"
cargo run --release --bin venn-lab -- run scripts/experiments/quick.toml --out "$work/quick"
# The summary records which data the run used: here, both copies built in.
summary="$work/quick/summary.json"
if [ "$(grep -c '"origin": "embedded"' "$summary")" != 2 ] || ! grep -q '"writers": 396,' "$summary"; then
    echo "fresh-machine: the quick start did not run on the built-in data:" >&2
    grep -A12 '"data"' "$summary" >&2
    exit 1
fi

step "cargo test --release --workspace"
t0=$(date +%s)
no_second_burn cargo test --release --workspace --no-run
echo "fresh-machine: test build $(( $(date +%s) - t0 )) s"
# CI (.ci/run) installs Chromium, podman and iproute2 in the background meanwhile: wait
# while its process lives (at most 20 minutes) for the file it leaves when done.
if [ -n "${FRESH_SETUP_DONE:-}" ]; then
    t0=$(date +%s)
    while [ ! -e "$FRESH_SETUP_DONE" ] && [ $(( $(date +%s) - t0 )) -lt 1200 ] \
        && { [ -z "${FRESH_SETUP_PID:-}" ] || kill -0 "$FRESH_SETUP_PID" 2>/dev/null; }; do
        sleep 2
    done
    if [ -e "$FRESH_SETUP_DONE" ]; then
        echo "fresh-machine: waited $(( $(date +%s) - t0 )) s for the system packages"
        # Where a browser is installed the status page's browser test must really run (the
        # places venn-manager/tests/browser.rs looks).
        if [ -n "${CHROMIUM:-}" ] || [ -x /usr/bin/chromium ] \
            || command -v chromium chromium-browser google-chrome >/dev/null 2>&1; then
            export VENN_REQUIRE_BROWSER=1
        fi
    else
        echo "fresh-machine: the system packages were not ready after $(( $(date +%s) - t0 )) s;" \
            "tests that need them will skip" >&2
    fi
fi
t0=$(date +%s)
cargo test --release --workspace
echo "fresh-machine: test run $(( $(date +%s) - t0 )) s"

step "features off by default: download, k8s (podman kube play)"
t0=$(date +%s)
cargo test --release -p datasets --features download --lib --test download
no_second_burn cargo test --release -p venn-lab --features k8s --test k8s --test podman --no-run
cargo test --release -p venn-lab --features k8s --test k8s --test podman
echo "fresh-machine: feature tests $(( $(date +%s) - t0 )) s"

step "venn-sim compare --scale 0.05"
cargo run --release --bin venn-sim -- compare --scale 0.05 --out "$work/compare"

step "done"
