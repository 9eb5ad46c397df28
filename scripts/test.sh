#!/usr/bin/env bash
# The whole test suite: formatting, lints, docs, unit + integration tests.
# Installs and starts everything the tests need; fails loudly if it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (-D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo doc (-D warnings)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

step "cargo test"
PROPTEST_CASES="${PROPTEST_CASES:-1000}" cargo test --workspace --locked
