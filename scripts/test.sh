#!/usr/bin/env bash
# The whole test suite: what the README's test command runs and what CI runs.
#   1. formatting, lints and the library's docs (warnings are errors),
#   2. every unit, integration and doc test of the workspace (debug build),
#   3. the release-only checks that are too slow unoptimised (memory overhead),
#   4. the loom model checks, built with --cfg loom in their own target dir.
# Tests that need ../shared (traces) find it beside the checkout and skip with
# a message where it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo doc (library and lock crate; broken links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc -p multiarc -p multiarc-lock --no-deps

step "cargo test (workspace)"
cargo test --workspace

step "release-only tests"
cargo test --release -p multiarc --test memory_overhead

step "loom model checks"
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" RUSTFLAGS="--cfg loom" \
  CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}" \
  cargo test --release -p multiarc --test 'loom_*'
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" RUSTFLAGS="--cfg loom" \
  CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}" \
  cargo test --release -p multiarc --lib loom_tests
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" RUSTFLAGS="--cfg loom" \
  CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}" \
  cargo test --release -p multiarc-lock --test 'loom_*'

step "all tests passed"
