#!/usr/bin/env bash
# Render-stage benchmark: pages/s, CPU ms per page (the Chromium tree's and the bench's own) and
# peak PSS of the Chromium process tree for 1, 2 and 4 tabs, with images/media/fonts blocked by
# resource type in the Fetch domain (`fetch`, what runs use), by URL pattern only (`url`) and not
# at all (`off`), on the bundled fixture sites (loopback).
#
#   bench/render.sh [PAGES]          # pages per run (default 60)
#
# Env: PROFILE (cargo profile, default release).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo run --locked --quiet --profile "${PROFILE:-release}" --example render_bench -- "${1:-60}"
