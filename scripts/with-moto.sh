#!/usr/bin/env bash
# Runs one command against a moto server of its own, started here on a free
# port and stopped on exit: the way to run a few integration tests without
# the whole of `make test`, e.g.
#   bash scripts/with-moto.sh cargo nextest run -p baton-tests -E "test(/^runners_leases::/)"
set -euo pipefail
source "$(dirname "$0")/local-aws.sh"
trap stop_moto EXIT
ensure_venv
start_moto "${BATON_MOTO_PORT:-$(free_port)}"
"$@"
