#!/usr/bin/env bash
# The test suite on AArch64 (issue 33), from an x86-64 machine: cross-builds every test for
# aarch64-unknown-linux-gnu and runs it under QEMU's user-mode emulator, so fl-job's
# kernels take their NEON path and everything else runs on an AArch64 build. Optional,
# not in CI (about 10 min to build and 26 min to run on 2 cores: the training tests run
# emulated).
#
#   scripts/aarch64-check.sh [EXTRA CARGO TEST ARGS]
#
# Needs (Debian/Ubuntu): apt-get install qemu-user gcc-aarch64-linux-gnu
# libc6-dev-arm64-cross; rustup target add aarch64-unknown-linux-gnu.
#
# Left out: the tests that start one of this workspace's programs as a child process
# (femnist, device-agent, venn-manager, venn-sim, venn-lab). Without a binfmt_misc entry
# for QEMU (which changes the host kernel, so this script does not add one) the kernel
# cannot execute an AArch64 child. Those tests exercise the CLIs and process handling, not
# anything that depends on the instruction set; they run in the x86-64 suite.
set -eu -o pipefail
cd "$(dirname "$0")/.."

target=aarch64-unknown-linux-gnu
sysroot=/usr/aarch64-linux-gnu
for tool in qemu-aarch64 aarch64-linux-gnu-gcc; do
    command -v "$tool" >/dev/null || {
        echo "aarch64-check: $tool not found (apt-get install qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross)" >&2
        exit 2
    }
done
rustup target list --installed | grep -qx "$target" || {
    echo "aarch64-check: rustup target add $target" >&2
    exit 2
}

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $sysroot"
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
# QEMU's default CPU for AArch64 ("max") has NEON; fl-job prints the set it picked.

# Tests that spawn one of the workspace's binaries (see above), by exact name.
skip=(
    lookup::a_downloaded_set_in_the_user_data_dir_is_found_and_named
    lookup::a_variable_naming_no_data_is_an_error_not_a_fallback
    lookup::the_older_variable_name_names_the_data_directory
    shared_data::femnist_stats_reports_396_writers
    shared_data::venn_data_may_name_the_shared_data_dir
    help_documents_shards_and_the_counters_endpoint
    a_shard_outside_its_count_is_refused_naming_the_flag
    multihost::an_experiment_over_five_network_hosts_completes_and_is_gathered_over_http
    saved::a_seeds_folder_read_back_gives_the_same_summary
    saved::summarize_redraws_a_seeds_folder_from_the_command_line
    hostile_clients_neither_stall_nor_bloat_the_manager
    admission::the_binary_checks_its_admission_flags
    recovery::a_killed_manager_process_restarts_and_the_round_completes
    cli::run_writes_csv_summary_and_table
    cli::table1_json_has_workload_policy_speedups
)
args=(--exact)
for t in "${skip[@]}"; do
    args+=(--skip "$t")
done

echo "== aarch64: build"
cargo test --release --workspace --target "$target" --no-run "$@"
echo "== aarch64: run under qemu-aarch64 (${#skip[@]} tests that spawn programs left out)"
cargo test --release --workspace --target "$target" --no-fail-fast "$@" -- "${args[@]}"
