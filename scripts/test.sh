#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, checks formatting and lints,
# then runs the unit tests of both crates and the integration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked "$@"
