#!/usr/bin/env bash
# Builds the real Lambda artifacts: every function of infra/resources.json
# (or only those named as arguments) as an arm64 (Graviton) release binary
# with cargo-lambda, into target/lambda/baton-<name>/bootstrap (or under
# $CARGO_TARGET_DIR when that is set).
#
#   bash infra/scripts/build-lambdas.sh            # every function
#   bash infra/scripts/build-lambdas.sh health     # just one
#
# Installs the pinned cargo-lambda and ziglang (the arm64 cross-linker) into
# the repository's virtualenv (.venv) first. A clean release build takes
# minutes (about 4-5 on 2 cores); later ones are incremental. `cdk deploy`
# builds the same way by itself when .venv/bin is on PATH (see infra/README.md);
# running this first only warms target/.
set -euo pipefail

CARGO_LAMBDA_VERSION=1.9.2
ZIGLANG_VERSION=0.17.1

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$ROOT/.venv"
cd "$ROOT"

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
installed="$("$VENV/bin/pip" show cargo-lambda ziglang 2>/dev/null || true)"
if ! grep -qx "Version: $CARGO_LAMBDA_VERSION" <<<"$installed" || ! grep -qx "Version: $ZIGLANG_VERSION" <<<"$installed"; then
  echo "build-lambdas: installing cargo-lambda==$CARGO_LAMBDA_VERSION ziglang==$ZIGLANG_VERSION into .venv" >&2
  "$VENV/bin/pip" install --disable-pip-version-check -q "cargo-lambda==$CARGO_LAMBDA_VERSION" "ziglang==$ZIGLANG_VERSION"
fi
# cargo-lambda finds zig through the venv's python (`python3 -m ziglang`).
export PATH="$VENV/bin:$PATH"

if [ $# -gt 0 ]; then
  functions=("$@")
else
  mapfile -t functions < <(python3 -c 'import json,sys; [print(f["name"]) for f in json.load(open(sys.argv[1]))["functions"]]' infra/resources.json)
fi
if [ ${#functions[@]} -eq 0 ]; then
  echo "build-lambdas: no functions in infra/resources.json" >&2
  exit 0
fi

bins=()
for name in "${functions[@]}"; do
  if [ ! -f "functions/$name/Cargo.toml" ]; then
    echo "build-lambdas: functions/$name/Cargo.toml does not exist" >&2
    exit 1
  fi
  bins+=(--bin "baton-$name")
done

if command -v rustup >/dev/null 2>&1 && ! grep -qx aarch64-unknown-linux-gnu <<<"$(rustup target list --installed 2>/dev/null || true)"; then
  echo "build-lambdas: the aarch64-unknown-linux-gnu standard library is not installed; cargo-lambda will run" >&2
  echo "               'rustup target add aarch64-unknown-linux-gnu' (it needs the Rust toolchain server)" >&2
fi

# One cargo invocation for all of them: dependencies are built once, with
# one set of features.
echo "build-lambdas: cargo lambda build --release --arm64 --locked ${bins[*]}" >&2
cargo lambda build --release --arm64 --locked "${bins[@]}"

for name in "${functions[@]}"; do
  artifact="${CARGO_TARGET_DIR:-target}/lambda/baton-$name/bootstrap"
  if [ ! -x "$artifact" ]; then
    echo "build-lambdas: $artifact was not produced" >&2
    exit 1
  fi
  printf '%s\t%s\n' "$artifact" "$(du -h "$artifact" | cut -f1)"
done
