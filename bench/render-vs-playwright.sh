#!/usr/bin/env bash
# Render throughput against a plain Playwright script on the same pages and machine.
#
#   bench/render-vs-playwright.sh [PAGES]     (default 60)
#
# Serves fixtures/ on 127.0.0.1:8080 with `scrape demo --serve`, runs the Playwright peer
# (playwright-core from the npm registry, installed under /tmp, driving Debian's Chromium; never
# a downloaded browser), then the project's own render benchmark (bench/render.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
PAGES="${1:-60}"
NODE_DIR="${NODE_DIR:-/tmp/scrape-bench-node}"
if [[ ! -d "$NODE_DIR/node_modules/playwright-core" ]]; then
  mkdir -p "$NODE_DIR" && npm install --silent --prefix "$NODE_DIR" playwright-core@1
fi
cargo build --release --locked --quiet
printf 'name = "bench"\nstart = ["http://127.0.0.1:8080/"]\n[[images]]\nselector = "img"\n' > /tmp/scrape-bench-serve.toml
target/release/scrape demo --serve --site fixtures --profile /tmp/scrape-bench-serve.toml -q &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf -o /dev/null http://127.0.0.1:8080/demo-site/ && break; sleep 0.1; done
paths=$(cd fixtures && ls demo-site/gallery/*.html | sed 's#^#/#'; echo /js-sites/background/)
cp bench/peer_playwright.mjs "$NODE_DIR/peer_playwright.mjs"
node "$NODE_DIR/peer_playwright.mjs" http://127.0.0.1:8080 "$PAGES" $paths
bench/render.sh "$PAGES"
