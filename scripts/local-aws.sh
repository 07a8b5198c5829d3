#!/usr/bin/env bash
# The local AWS emulator (moto server), sourced by dev.sh and test.sh.
#   ensure_venv          install the pinned Python tools into .venv (once, and again when the pins change)
#   start_moto PORT      start moto on 127.0.0.1:PORT, switch Step Functions execution on, wait until ready
#   stop_moto            stop it (also called from the callers' EXIT traps)
# Sets BATON_AWS_ENDPOINT for the processes started afterwards.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The tests run every function in one process (the dev host), unoptimised:
# a debug build's futures are many times their release size, and at a 30 %
# fault rate the chaos soak's nested invocations (replayed requests,
# retries) overflowed a tokio worker's default 2 MiB stack. Threads started
# without an explicit size (tokio's workers too) take this one. A Lambda
# runs one function, optimised: nothing to raise there.
export RUST_MIN_STACK="${RUST_MIN_STACK:-16777216}"
VENV="$ROOT/.venv"
LOCAL_DIR="$ROOT/.local"
MOTO_PID=""

ensure_venv() {
  local req="$ROOT/scripts/requirements-local.txt"
  local stamp="$VENV/.requirements.sha256"
  local want
  want="$(sha256sum "$req" | cut -d' ' -f1)"
  if [ -x "$VENV/bin/moto_server" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  echo "local-aws: installing pinned Python tools into .venv …" >&2
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || return 1
  "$VENV/bin/pip" install --disable-pip-version-check -q -r "$req" || return 1
  echo "$want" > "$stamp"
}

# Debian's Chromium for the console's browser tests (web/tests), driven by
# playwright-core at its executable path: no test tool downloads a browser.
ensure_chromium() {
  local chromium="${BATON_CHROMIUM:-/usr/bin/chromium}"
  [ -x "$chromium" ] && return 0
  echo "local-aws: installing Debian's chromium for the browser tests …" >&2
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -q >/dev/null || return 1
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q chromium >/dev/null || return 1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start_moto() {
  local port="$1"
  mkdir -p "$LOCAL_DIR"
  local log="$LOCAL_DIR/moto-$port.log"
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "local-aws: port $port is already in use; set BATON_MOTO_PORT to another port" >&2
    return 1
  fi
  # Our launcher: moto with its DynamoDB backend made thread-safe (see the file).
  "$VENV/bin/python" "$ROOT/scripts/moto_server.py" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
  MOTO_PID=$!
  local deadline=$((SECONDS + 60))
  until curl -fsS -o /dev/null "http://127.0.0.1:$port/moto-api/" 2>/dev/null; do
    if ! kill -0 "$MOTO_PID" 2>/dev/null; then
      echo "local-aws: moto exited; see $log" >&2
      tail -20 "$log" >&2
      return 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "local-aws: moto did not answer on port $port within 60 s; see $log" >&2
      return 1
    fi
    sleep 0.2
  done
  # Step Functions only executes state machines with this switch on.
  curl -fsS -X POST -H 'Content-Type: application/json' "http://127.0.0.1:$port/moto-api/config" \
    -d '{"stepfunctions":{"execute_state_machine":true},"lambda":{"use_docker":false}}' >/dev/null || return 1
  export BATON_AWS_ENDPOINT="http://127.0.0.1:$port"
  export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
  echo "local-aws: moto $(cat "$VENV/.requirements.sha256" | cut -c1-8) on $BATON_AWS_ENDPOINT (pid $MOTO_PID)" >&2
}

# Always succeeds: callers run under `set -e`, and moto's exit status after
# the signal (143) is not a failure of theirs.
stop_moto() {
  if [ -n "$MOTO_PID" ] && kill -0 "$MOTO_PID" 2>/dev/null; then
    kill "$MOTO_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$MOTO_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$MOTO_PID" 2>/dev/null || true
    wait "$MOTO_PID" 2>/dev/null || true
  fi
  MOTO_PID=""
  return 0
}
