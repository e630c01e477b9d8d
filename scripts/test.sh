#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then unit and integration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo test --workspace --locked "$@"
