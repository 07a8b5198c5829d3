#!/usr/bin/env bash
# `make dev`: the whole local stack in the foreground: moto on 127.0.0.1
# (BATON_MOTO_PORT, default 5055), the dev host serving the API on
# 127.0.0.1:BATON_PORT (default 8080), and BATON_DEV_RUNNERS local runners
# (default 1; 0 for none) with the labels linux,x64 in workspace
# BATON_DEV_WORKSPACE (default demo). Ctrl-C stops everything.
set -euo pipefail
source "$(dirname "$0")/local-aws.sh"
cd "$ROOT"

DEVHOST_PID=""
RUNNER_PIDS=()
cleanup() {
  trap - EXIT INT TERM
  for pid in "${RUNNER_PIDS[@]}" "$DEVHOST_PID"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null || true
    fi
  done
  stop_moto
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

runners="${BATON_DEV_RUNNERS:-1}"
case "$runners" in ''|*[!0-9]*) echo "BATON_DEV_RUNNERS must be a number, got '$runners'" >&2; exit 2 ;; esac
workspace="${BATON_DEV_WORKSPACE:-demo}"

ensure_venv
cargo build -q -p baton-devhost -p baton-runner
# The dev host stores this token as the admin's; the runners' registration
# token is made with it, and it is printed for the CLI.
export BATON_ADMIN_TOKEN="${BATON_ADMIN_TOKEN:-bat_$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')}"
export BATON_API="http://127.0.0.1:${BATON_PORT:-8080}"
start_moto "${BATON_MOTO_PORT:-5055}"
"$ROOT/target/debug/baton-devhost" run &
DEVHOST_PID=$!

if [ "$runners" -gt 0 ]; then
  # Wait for the API to answer (the dev host provisions the emulator
  # first), then register the runners as an operator would.
  registration=""
  for _ in $(seq 1 120); do
    kill -0 "$DEVHOST_PID" 2>/dev/null || { echo "the dev host exited" >&2; exit 1; }
    if registration=$("$ROOT/target/debug/baton" token create --workspace "$workspace" --name dev-runners 2>/dev/null); then
      break
    fi
    sleep 0.5
  done
  [ -n "$registration" ] || { echo "the API did not answer within 60 s" >&2; exit 1; }
  for i in $(seq 1 "$runners"); do
    BATON_REGISTRATION_TOKEN="$registration" BATON_LABELS=linux,x64 BATON_RUNNER_NAME="dev-$i" \
      "$ROOT/target/debug/baton-runner" &
    RUNNER_PIDS+=($!)
  done
  cat <<MSG

$runners local runner(s) with the labels linux,x64 are waiting for jobs in workspace $workspace.
Submit the example workflow and follow it, from another terminal in this directory:

  export BATON_API=$BATON_API BATON_ADMIN_TOKEN=$BATON_ADMIN_TOKEN BATON_WORKSPACE=$workspace
  target/debug/baton run submit --watch examples/ci.yml

MSG
fi
wait "$DEVHOST_PID"
