#!/usr/bin/env bash
# `make dev`: the whole local stack in the foreground: moto on 127.0.0.1
# (BATON_MOTO_PORT, default 5055), the dev host serving the API on
# 127.0.0.1:BATON_PORT (default 8080), and an elastic fleet for the labels
# linux,x64 in workspace BATON_DEV_WORKSPACE (default demo): the local
# reference provisioner (`baton-provisioner local`) starts an ephemeral
# `baton-runner` per queued job (at most BATON_DEV_MAX_INSTANCES, default 4)
# and the fleet is back to zero when the work is done. BATON_DEV_RUNNERS=N
# keeps a fixed fleet of N runners instead (0 for none). Ctrl-C stops
# everything.
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

# Unset: the elastic fleet; a number: that many fixed runners.
runners="${BATON_DEV_RUNNERS-elastic}"
case "$runners" in elastic) ;; ''|*[!0-9]*) echo "BATON_DEV_RUNNERS must be a number, got '$runners'" >&2; exit 2 ;; esac
max_instances="${BATON_DEV_MAX_INSTANCES:-4}"
case "$max_instances" in ''|*[!0-9]*) echo "BATON_DEV_MAX_INSTANCES must be a number, got '$max_instances'" >&2; exit 2 ;; esac
workspace="${BATON_DEV_WORKSPACE:-demo}"

ensure_venv
cargo build -q -p baton-devhost -p baton-runner --bins
# The web console, served by the dev host at / (BATON_CONSOLE_BUILT=1: the
# caller built web/dist already, as `make test` does before its browser tests).
if [ -z "${BATON_CONSOLE_BUILT:-}" ]; then
  (cd web && npm ci --no-audit --no-fund --loglevel=error && npm run -s build >/dev/null)
fi
# The dev host stores this token as the admin's; the runners' registration
# token is made with it, and it is printed for the CLI.
export BATON_ADMIN_TOKEN="${BATON_ADMIN_TOKEN:-bat_$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')}"
export BATON_API="http://127.0.0.1:${BATON_PORT:-8080}"
start_moto "${BATON_MOTO_PORT:-5055}"
"$ROOT/target/debug/baton-devhost" run &
DEVHOST_PID=$!

# Runs an operator command once the API answers (the dev host provisions
# the emulator first); its stdout is the answer.
operator_when_up() {
  local answer=""
  for _ in $(seq 1 120); do
    kill -0 "$DEVHOST_PID" 2>/dev/null || { echo "the dev host exited" >&2; return 1; }
    if answer=$("$ROOT/target/debug/baton" "$@" 2>/dev/null); then
      echo "$answer"
      return 0
    fi
    sleep 0.5
  done
  echo "the API did not answer within 60 s" >&2
  return 1
}

if [ "$runners" = elastic ]; then
  # The operator registers a provisioner (ephemeral machines: one job
  # each) and runs the local reference provisioner with its token.
  token=$(operator_when_up provisioner create --workspace "$workspace" --name dev-fleet \
    --label-set linux,x64 --max-instances "$max_instances" --jobs-per-instance 1 --idle-timeout-s 60)
  BATON_PROVISIONER_TOKEN="$token" "$ROOT/target/debug/baton-provisioner" local \
    --runner-bin "$ROOT/target/debug/baton-runner" --work-dir "${TMPDIR:-/tmp}/baton-dev-fleet" &
  RUNNER_PIDS+=($!)
  cat <<MSG

An elastic fleet serves the labels linux,x64 in workspace $workspace: no runner
is up now; the local provisioner starts one per queued job (at most
$max_instances at once) and each goes when its job ended. Watch it with:

  BATON_PROVISIONER_TOKEN=$token target/debug/baton fleet --watch

Open the console at $BATON_API/ (sign in with the admin token and workspace $workspace), or
submit the example workflow and follow it, from another terminal in this directory:

  export BATON_API=$BATON_API BATON_ADMIN_TOKEN=$BATON_ADMIN_TOKEN BATON_WORKSPACE=$workspace
  target/debug/baton run submit --watch examples/ci.yml

MSG
elif [ "$runners" -gt 0 ]; then
  registration=$(operator_when_up token create --workspace "$workspace" --name dev-runners)
  for i in $(seq 1 "$runners"); do
    BATON_REGISTRATION_TOKEN="$registration" BATON_LABELS=linux,x64 BATON_RUNNER_NAME="dev-$i" \
      "$ROOT/target/debug/baton-runner" &
    RUNNER_PIDS+=($!)
  done
  cat <<MSG

$runners local runner(s) with the labels linux,x64 are waiting for jobs in workspace $workspace.
Open the console at $BATON_API/ (sign in with the admin token and workspace $workspace), or
submit the example workflow and follow it, from another terminal in this directory:

  export BATON_API=$BATON_API BATON_ADMIN_TOKEN=$BATON_ADMIN_TOKEN BATON_WORKSPACE=$workspace
  target/debug/baton run submit --watch examples/ci.yml

MSG
fi
wait "$DEVHOST_PID"
