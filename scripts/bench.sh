#!/usr/bin/env bash
# `make bench`: the claim-path benchmark (bench/). Starts moto on a free port
# (stopped on exit), like test.sh, then runs the bench binary against it.
# Arguments are passed to the binary: `make bench ARGS="--jobs 500"`, or set
# BATON_BENCH_JOBS / BATON_BENCH_RUNNERS. BATON_BENCH_PROFILE=release builds
# optimised (slow to build here; the figures are request counts, so debug is
# the default).
set -euo pipefail
source "$(dirname "$0")/local-aws.sh"
cd "$ROOT"
trap stop_moto EXIT

ensure_venv
profile=()
if [ "${BATON_BENCH_PROFILE:-debug}" = "release" ]; then profile=(--release); fi
# Build before starting moto, so the emulator runs only while the bench does.
cargo build -q "${profile[@]}" -p baton-bench
start_moto "${BATON_MOTO_PORT:-$(free_port)}"
status=0
cargo run -q "${profile[@]}" -p baton-bench -- "$@" || status=$?
stop_moto || true
exit "$status"
