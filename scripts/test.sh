#!/usr/bin/env bash
# The whole test suite: what the README's test command runs and what CI runs.
#   1. formatting, lints and the library's docs (warnings are errors),
#   2. every unit, integration and doc test of the workspace (debug build),
#   3. the lean CLI (--no-default-features: no peer caches, no tokio, no
#      plotters): its lints, its dependency tree and its fast tests,
#   4. the benchmark scripts' request rule (a Python doctest), and the
#      release-only checks that are too slow unoptimised (memory overhead),
#   5. the loom model checks, built with --cfg loom in their own target dir.
# Tests that need ../shared (traces) find it beside the checkout and skip with
# a message where it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo doc (the library crates; broken links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc -p multiarc -p multiarc-lock -p multiarc-file \
  -p multiarc-object-store -p multiarc-bucket -p multiarc-fuse -p multiarc-store-tools --no-deps

step "cargo test (workspace)"
cargo test --workspace

step "the cache's metrics feature (the metrics facade): lints and its test"
cargo clippy -p multiarc --features metrics --all-targets -- -D warnings
cargo test -p multiarc --features metrics --lib metrics

step "the binary: no test support among its dependencies"
if cargo tree -p multiarc-cli -e normal --prefix none |
  grep -E '^(multiarc-s3-loopback|multiarc-garage-harness) '; then
  echo "multiarc-cli depends on the test-support crates above" >&2
  exit 1
fi

step "lean CLI: cargo clippy -p multiarc-cli --no-default-features"
cargo clippy -p multiarc-cli --no-default-features --all-targets -- -D warnings

step "lean CLI: no peer cache, tokio or plotters in its dependencies"
if cargo tree -p multiarc-cli --no-default-features -e normal --prefix none |
  grep -i -E '^(tokio|moka|foyer|quick_cache|tinyufo|concread|lru|plotters) '; then
  echo "the lean multiarc-cli depends on the packages above" >&2
  exit 1
fi

step "lean CLI: build and fast tests (not the FUSE mount tests again)"
cargo build -p multiarc-cli --no-default-features
cargo test -p multiarc-cli --no-default-features --bins \
  --test bench_cli --test hitratio_cli --test hardening_cli

step "the benchmark scripts: which requests the latency proxy counts as object GETs (doctest)"
python3 -m doctest scripts/latency_proxy.py

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
