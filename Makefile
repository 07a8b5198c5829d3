# The two set-up commands (both install whatever is missing):
#   make dev   - the whole local stack: moto + every function behind the API on 127.0.0.1:$${BATON_PORT:-8080}
#   make test  - every test: lints, Rust unit + integration tests against moto, infra tests
.PHONY: dev test lint plan

dev:
	bash scripts/dev.sh

test:
	bash scripts/test.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

plan:
	cargo run -q -p baton-devhost -- plan --stage $${BATON_STAGE:-dev}
