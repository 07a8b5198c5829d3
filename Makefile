# The two set-up commands (both install whatever is missing):
#   make dev   - the whole local stack: moto + every function behind the API on 127.0.0.1:$${BATON_PORT:-8080}
#   make test  - every test: lints, Rust unit + integration tests against moto, infra tests
# Also: make bench - the claim-path benchmark against moto (docs/benchmarks.md); ARGS="--jobs 500" to change it
#       make chaos - the chaos soak: many seeds of faults (docs/faults.md); BATON_CHAOS_SEEDS=1-40 BATON_CHAOS_RATE=0.1
.PHONY: dev test lint plan bench chaos

dev:
	bash scripts/dev.sh

test:
	bash scripts/test.sh

bench:
	bash scripts/bench.sh $(ARGS)

chaos:
	bash scripts/chaos.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

plan:
	cargo run -q -p baton-devhost -- plan --stage $${BATON_STAGE:-dev}
