#!/usr/bin/env bash
# `make dev`: the whole local stack in the foreground: moto on 127.0.0.1
# (BATON_MOTO_PORT, default 5055) and the dev host serving the API on
# 127.0.0.1:BATON_PORT (default 8080). Ctrl-C stops both.
set -euo pipefail
source "$(dirname "$0")/local-aws.sh"
cd "$ROOT"

DEVHOST_PID=""
cleanup() {
  trap - EXIT INT TERM
  if [ -n "$DEVHOST_PID" ] && kill -0 "$DEVHOST_PID" 2>/dev/null; then
    kill -TERM "$DEVHOST_PID" 2>/dev/null
    wait "$DEVHOST_PID" 2>/dev/null || true
  fi
  stop_moto
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ensure_venv
cargo build -q -p baton-devhost
start_moto "${BATON_MOTO_PORT:-5055}"
"$ROOT/target/debug/baton-devhost" run &
DEVHOST_PID=$!
wait "$DEVHOST_PID"
