#!/usr/bin/env bash
# The AVX-512 check of issue 33, for a machine that has AVX-512 but no Rust toolchain:
# runs prebuilt binaries (build them on any x86-64 machine; they pick the instruction set
# at run time), so that the AVX-512 kernels are tested and timed where they run.
#
#   fl-job/bench/avx512-check.sh TESTS FL_JOB [OUT_DIR]
#
# TESTS:  fl-job's lib test binary, `cargo test --release -p fl-job --lib --no-run` prints
#         its path (target/release/deps/fl_job-<hash>).
# FL_JOB: target/release/fl-job (`cargo build --release -p fl-job`).
# OUT_DIR (default .): where the logs and JSON go.
#
# It prints the CPU's vector flags; runs every lib test (the kernels on each instruction
# set the CPU has, `isa::all`, and on pulp's emulated 16 lanes); `fl-job bench` three
# ways, alternated twice: the widest set (avx512), `FL_JOB_ISA=avx2` on the same machine,
# and avx512 with `FL_JOB_DIRECT=off` (the direct 3 × 3 against im2col); and, if a python3
# with torch is on PATH (or $PYTHON), fl-job/bench/side_by_side.py, Burn against PyTorch.
# Always 2 threads, like the figures in fl-job/TRAINING.md. About 8 minutes.
set -u -o pipefail
tests=${1:?usage: avx512-check.sh TESTS FL_JOB [OUT_DIR]}
fljob=${2:?usage: avx512-check.sh TESTS FL_JOB [OUT_DIR]}
out=${3:-.}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export RAYON_NUM_THREADS=2 RUST_LOG=warn
status=0

echo "== cpu"
grep -m1 'model name' /proc/cpuinfo
flags=$(grep -m1 '^flags' /proc/cpuinfo)
for f in avx512f avx512vl avx512dq avx512bw avx2 fma; do
  case " $flags " in *" $f "*) printf '%s ' "$f" ;; esac
done
echo
case " $flags " in *" avx512f "*) ;; *) echo "WARNING: no avx512f here: this is not the AVX-512 check" ;; esac
echo "load average: $(cat /proc/loadavg)"

echo "== lib tests (${tests})"
# --nocapture: the tests print which instruction sets they ran.
"$tests" --test-threads 2 2>&1 | tee "$out/avx512-tests.log" | grep -v '^test .* ok$'
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "LIB TESTS FAILED"; status=1; }

echo "== fl-job bench: avx512, FL_JOB_ISA=avx2, FL_JOB_DIRECT=off (alternated, 2 rounds)"
for round in 1 2; do
  for mode in avx512 avx2 direct-off; do
    case $mode in
      avx512) env=() ;;
      avx2) env=(FL_JOB_ISA=avx2) ;;
      direct-off) env=(FL_JOB_DIRECT=off) ;;
    esac
    echo "-- round $round, $mode (load $(cut -d' ' -f1-3 /proc/loadavg))"
    env "${env[@]}" "$fljob" bench --seconds 5 --json "$out/avx512-bench-$mode-$round.json" \
      2>&1 | grep -v '^$' || status=1
  done
done

py=${PYTHON:-python3}
if "$py" -c 'import torch' 2>/dev/null; then
  echo "== side by side with PyTorch ($py)"
  "$py" "$here/side_by_side.py" --python "$py" --fl-job "$fljob" --threads 2 --seconds 5 \
    --rounds 3 --out "$out/avx512-side-by-side.json" 2>&1 | tee "$out/avx512-side-by-side.md" \
    || status=1
else
  echo "== no torch for $py: side by side skipped"
fi
exit $status
