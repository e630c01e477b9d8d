#!/usr/bin/env bash
# What opening a large state costs: every page checksum of the state database is verified at
# open (redb's check_integrity, a read of the whole file), by `scrape status` and by every run.
#
#   bench/state-open.sh [IMAGES]
#
# Makes the state a finished `scrape download --urls LIST` of IMAGES (1,000,000) URLs would
# leave, through the real import and the real state writer (examples/state_fill.rs: 90% stored,
# 10% failed, no network, no image file), then, REPEAT (3) times, with the file in the page
# cache: redb's open and check_integrity alone (`state_fill --measure`), `scrape status`, and
# a rerun of the finished job that has nothing to fetch (it still rewrites manifest.jsonl and
# failures.jsonl, and stats every stored file: here all missing).
#
# Env: REPEAT (3), SCRAPE_BIN and FILL_BIN (default: `cargo build --release` of both),
# WORK (a temporary folder, removed at the end unless KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGES="${1:-1000000}"
REPEAT="${REPEAT:-3}"
if [[ -z "${SCRAPE_BIN:-}" || -z "${FILL_BIN:-}" ]]; then
  cargo build --release --locked --quiet --bin scrape --example state_fill
  SCRAPE_BIN="$(pwd)/target/release/scrape"
  FILL_BIN="$(pwd)/target/release/examples/state_fill"
fi
WORK="${WORK:-$(mktemp -d /tmp/bench-state-open.XXXXXX)}"
[[ "${KEEP:-0}" == 1 ]] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK"
LIST="$WORK/urls.txt"
OUT="$WORK/out"

echo "== making a state of $IMAGES images in $OUT"
"$FILL_BIN" "$LIST" "$OUT" "$IMAGES"
# Into the page cache, as after the run that wrote it.
cat "$OUT/.scrape/state.redb" > /dev/null

seconds() { local start=$EPOCHREALTIME; "$@" > /dev/null 2>&1 || true; echo "$EPOCHREALTIME - $start" | bc; }
for i in $(seq "$REPEAT"); do
  echo "== pass $i"
  "$FILL_BIN" --measure "$OUT"
  echo "scrape status: $(seconds "$SCRAPE_BIN" status --out "$OUT") s"
  echo "no-op rerun:   $(seconds "$SCRAPE_BIN" download --urls "$LIST" --out "$OUT" --progress off) s"
done
"$SCRAPE_BIN" status --out "$OUT" | head -3
