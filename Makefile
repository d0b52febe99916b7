# The same commands CI runs (.ci/run), for developers.
.PHONY: dev lint test rust-test py-test stubtest bench

dev:            ## build the extension into the active virtualenv (debug)
	maturin develop

lint:           ## formatting and lints, Rust and Python
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	ruff check python tests benches
	ruff format --check python tests benches

rust-test:
	cargo test --workspace -q

py-test:        ## the README's test command
	python -m pytest tests

test: rust-test py-test

stubtest:       ## the hand-written _native.pyi matches the extension
	python -m mypy.stubtest smgpy._native

bench:          ## serving overhead vs a pure-Python server (see benches/README.md)
	python benches/bridge.py
