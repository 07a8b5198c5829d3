#!/usr/bin/env bash
# `make chaos`: the chaos soak (docs/faults.md). Real workflows and runner
# processes on stacks whose AWS requests and triggers fail the way AWS's do,
# over many seeds at one fault rate; prints runs, faults injected by kind,
# redeliveries and invariant violations. BATON_CHAOS_SEEDS (first-last,
# default 1-40: 11 scenarios x 40 seeds = 440 runs, and the
# three-minute API outage test once) and BATON_CHAOS_RATE (default 0.1) choose them.
set -euo pipefail
source "$(dirname "$0")/local-aws.sh"
cd "$ROOT"
trap stop_moto EXIT

ensure_venv
export BATON_CHAOS_SEEDS="${BATON_CHAOS_SEEDS:-1-40}"
export BATON_CHAOS_RATE="${BATON_CHAOS_RATE:-0.1}"
cargo build -q --tests -p baton-runner-tests
start_moto "${BATON_MOTO_PORT:-$(free_port)}"
mkdir -p target
status=0
cargo test -q -p baton-runner-tests --test processes chaos:: -- --nocapture > target/chaos.log 2>&1 || status=$?
grep -E '^chaos soak:|panicked|left:|right:|violation|seed [0-9]+:|test result' target/chaos.log || true
echo "chaos: full output in target/chaos.log"
# The slow-link upload at full size (issue 42): 1 GiB at 4 MB/s under 60 s
# leases, its URLs renewed along the way; a download byte-identical.
BATON_SLOW_UPLOAD_BYTES=1073741824 BATON_SLOW_UPLOAD_RATE=4000000 BATON_SLOW_UPLOAD_LEASE_S=60 \
  cargo test -q -p baton-runner-tests --test processes an_upload_slower_than_its_lease -- --nocapture \
  > target/slow-upload.log 2>&1 || status=$?
grep -E '^slow upload:|panicked|test result' target/slow-upload.log || true
exit "$status"
