#!/usr/bin/env bash
# Quick start: build scrape, serve the bundled demo site on 127.0.0.1 (a static gallery, and
# albums that are JavaScript apps rendered in headless Chromium), download it.
# Run it again (or interrupt it and run it again) to see it resume; extra flags go to
# `scrape demo`, e.g. `scripts/demo.sh --fresh` or `scripts/demo.sh --out /tmp/gallery`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo build --release --locked --quiet
exec target/release/scrape demo "$@"
