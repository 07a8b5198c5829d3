#!/usr/bin/env bash
# `make test`: every test. Lints, then Rust unit and integration tests against
# a moto server started here on a free port (stopped on exit), then the infra
# tests (CDK synth + assertions, cfn-lint, asl-validator) when infra/ has them.
set -euo pipefail
source "$(dirname "$0")/local-aws.sh"
cd "$ROOT"
trap stop_moto EXIT

ensure_venv

# On CI (a clean clone, on a machine whose free disk varies) the lints and
# the check build into a directory of their own, removed once they pass:
# their metadata-only builds of the dependencies (about 0.9 GB) are of no use
# to the test build, and a CI run once ran out of disk compiling it.
lint_target="${CARGO_TARGET_DIR:-$ROOT/target}"
if [ -n "${BATON_CI:-}" ]; then
  lint_target="$ROOT/target/lint"
fi

echo "== format and lints"
cargo fmt --all -- --check
CARGO_TARGET_DIR="$lint_target" cargo clippy --workspace --all-targets -q -- -D warnings

echo "== the house: layering, line shares, import circles (ARCHITECTURE.md)"
python3 scripts/house.py

echo "== the functions as deployed (the store without the operator tools' feature)"
# Built alone, the functions do not get operator-tools through the dev host or
# the tests (features unify across a workspace build): this is their build.
# The fault layer and the rest of the local stack's equipment are not in it:
# they are baton-localstack, which no function depends on.
functions=()
for manifest in functions/*/Cargo.toml; do
  functions+=(-p "$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -1)")
done
CARGO_TARGET_DIR="$lint_target" cargo check -q --bins "${functions[@]}"
if [ -n "${BATON_CI:-}" ]; then
  rm -rf "$ROOT/target/lint"
fi

echo "== the console: its API types from the OpenAPI document, type check, lint, unit tests, build"
ensure_chromium
(cd web && npm ci --no-audit --no-fund --loglevel=error && npm run -s typecheck \
  && npm run -s lint && npm run -s test:unit -- --reporter=dot && npm run -s build)

echo "== Rust tests (unit, and integration against moto)"
start_moto "${BATON_MOTO_PORT:-$(free_port)}"
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast --failure-output final
else
  cargo test --workspace --no-fail-fast
fi
stop_moto

echo "== the console in headless Chromium, against the stack as make dev starts it"
(cd web && time node --test --test-concurrency=1 tests/)

if [ -f infra/package.json ]; then
  echo "== infra tests"
  mkdir -p target
  cargo run -q -p baton-devhost -- plan --stage test > target/plan-test.json
  export BATON_PLAN_JSON="$ROOT/target/plan-test.json"
  (cd infra && npm ci --no-audit --no-fund --loglevel=error && npm test)
fi
echo "== all tests passed"
