#!/usr/bin/env bash
# Lints what the stack deploys:
#   1. synthesizes the app into infra/cdk.out without building the Rust
#      functions (BATON_SKIP_BUNDLING=1; a function whose crate does not exist
#      yet gets placeholder code, with a warning);
#   2. runs cfn-lint on every synthesized template (W3005, "redundant
#      DependsOn", is what CDK templates always trip and is ignored);
#   3. validates every infra/statemachines/*.asl.json (and the test fixtures)
#      with asl-validator (there may be none: that is fine).
# cfn-lint comes from the repository's virtualenv (.venv, installed pinned by
# scripts/local-aws.sh); CFN_LINT=/path/to/cfn-lint overrides it.
# Run from anywhere; `npm test` runs it after the unit tests.
set -euo pipefail

INFRA="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="$(cd "$INFRA/.." && pwd)"
cd "$INFRA"

if [ -n "${CFN_LINT:-}" ]; then
  cfn_lint="$CFN_LINT"
elif [ -x "$ROOT/.venv/bin/cfn-lint" ]; then
  cfn_lint="$ROOT/.venv/bin/cfn-lint"
elif command -v cfn-lint >/dev/null 2>&1; then
  cfn_lint="$(command -v cfn-lint)"
else
  echo "lint: cfn-lint not found: run 'make test' once (it installs the pinned tools into .venv)," >&2
  echo "      or: python3 -m venv $ROOT/.venv && $ROOT/.venv/bin/pip install cfn-lint==1.58.0" >&2
  exit 1
fi

if [ ! -f dist/bin/baton.js ]; then
  npx --no-install tsc -p tsconfig.json
fi

echo "== cdk synth (bundling skipped) → infra/cdk.out"
rm -rf cdk.out
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! BATON_SKIP_BUNDLING=1 CDK_DEFAULT_ACCOUNT="${CDK_DEFAULT_ACCOUNT:-123456789012}" \
  CDK_DEFAULT_REGION="${CDK_DEFAULT_REGION:-us-east-1}" \
  npx --no-install cdk synth --quiet --no-notices -c allowMissingCrates=true >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
grep -i -E 'warn|error' "$log" | grep -v 'feature flags are not configured' >&2 || true

# The fixture of the tests has every kind of entry (subscribers, task queues,
# schedules, state machines) that the real resources.json may not have yet:
# lint its template too, so every code path of the stack meets cfn-lint.
mkdir -p cdk.out/fixture
node -e '
  const { FIXTURE } = require("./dist/lib/testing/variants");
  const { synth } = require("./dist/lib/testing/synth");
  const out = "cdk.out/fixture/BatonFixture.template.json";
  require("node:fs").writeFileSync(out, JSON.stringify(synth({ ...FIXTURE.props, stage: "fixture" }).json, null, 1));
'

shopt -s nullglob
templates=(cdk.out/*.template.json cdk.out/fixture/*.template.json)
if [ ${#templates[@]} -lt 2 ]; then
  echo "lint: cdk synth produced no template" >&2
  exit 1
fi

echo "== cfn-lint $("$cfn_lint" --version 2>&1 | awk '{print $NF}') on ${templates[*]}"
"$cfn_lint" --ignore-checks W3005 -- "${templates[@]}"

definitions=(statemachines/*.asl.json test/fixtures/statemachines/*.asl.json)
if [ ${#definitions[@]} -eq 0 ]; then
  echo "== asl-validator: no state machine definitions"
else
  echo "== asl-validator on ${#definitions[@]} definition(s)"
  for definition in "${definitions[@]}"; do
    npx --no-install asl-validator --json-path "$definition"
  done
fi
echo "== lint passed"
