#!/usr/bin/env bash
# `make bench`: the benchmark (bench/, docs/benchmarks.md). Starts moto on a
# free port (stopped on exit), like test.sh, then runs the bench binary
# against it. Arguments are passed to the binary:
# `make bench ARGS="--sections workflows --runs 5"`, or set BATON_BENCH_<FLAG>
# (see `--help`). BATON_BENCH_PROFILE=release builds the bench optimised (the
# figures are request counts, so debug is the default). The cold-start
# section times the functions' release binaries, so unless
# BATON_BENCH_SECTIONS / --sections leaves it out, the release build of every
# function comes first (the first one takes a long while on 2 cores; later
# ones are incremental).
set -euo pipefail
source "$(dirname "$0")/local-aws.sh"
cd "$ROOT"
trap stop_moto EXIT

ensure_venv
profile=()
if [ "${BATON_BENCH_PROFILE:-debug}" = "release" ]; then profile=(--release); fi
# Build before starting moto, so the emulator runs only while the bench does.
cargo build -q "${profile[@]}" -p baton-bench
sections="${BATON_BENCH_SECTIONS:-cold-start}"
for ((i = 1; i <= $#; i++)); do
  if [ "${!i}" = "--sections" ]; then j=$((i + 1)); sections="${!j:-}"; fi
done
if [[ ",$sections," == *",cold-start,"* ]]; then
  mapfile -t packages < <(python3 -c 'import json,sys; [print("-p\nbaton-" + f["name"]) for f in json.load(open(sys.argv[1]))["functions"]]' infra/resources.json)
  echo "bench: building the functions' release binaries (for the cold-start section) …" >&2
  cargo build -q --release "${packages[@]}"
fi
if [[ ",$sections," == *",fleet,"* ]]; then
  # The fleet section starts real runner processes (the local provisioner's
  # machines and a fixed fleet).
  cargo build -q -p baton-runner --bin baton-runner
fi
start_moto "${BATON_MOTO_PORT:-$(free_port)}"
status=0
cargo run -q "${profile[@]}" -p baton-bench -- "$@" || status=$?
stop_moto || true
exit "$status"
