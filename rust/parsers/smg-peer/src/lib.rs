//! Nothing to build: this package exists for its benches (`benches/`).
