#!/usr/bin/env bash
# Download-stage benchmark: `scrape download` side by side with peers on the same data.
#
#   bench/download.sh [N]            # N generated JPEGs (default 20000) served by a local nginx
#
# Uses the shared peer harness (../shared/bench: nginx on 127.0.0.1:18080, generated images,
# the seeds' aiohttp script, img2dataset, aria2, wget); run its setup.sh once first (as root).
# Env: PEERS (default "seed_aiohttp img2dataset_raw"), REPEAT, TIMEOUT, SHARED_BENCH, and
# SCRAPE_FLAGS (default "--concurrency 64 --per-host 64").
# Then it times a rerun of the finished job and the rerun of a job killed half-way (resume must
# not rescan or re-hash the output).
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-20000}"
SHARED_BENCH="${SHARED_BENCH:-$(cd .. && pwd)/shared/bench}"
[[ -x "$SHARED_BENCH/peers.sh" ]] || { echo "no peer harness at $SHARED_BENCH (set SHARED_BENCH)" >&2; exit 2; }
cargo build --release --locked --quiet
BIN="$(pwd)/target/release/scrape"
FLAGS="${SCRAPE_FLAGS:---concurrency 64 --per-host 64}"
export RESULTS_DIR="${RESULTS_DIR:-/tmp/bench-results}"
mkdir -p "$RESULTS_DIR"
PEERS="${PEERS:-seed_aiohttp img2dataset_raw}" \
  "$SHARED_BENCH/peers.sh" "$N" "$BIN download --urls {urls_txt} --out {out} --progress off --quiet $FLAGS"

# Resume figures, outside the harness (it deletes each output it scored): a full run, the same
# command again over its finished output, and a run killed half-way then finished by a rerun.
OUT="${OUT_ROOT:-/tmp/bench-out}/ours-resume"
URLS="/tmp/bench-data/n$N/urls.txt"
elapsed() { echo "$(date +%s.%N) - $1" | bc; }
"$SHARED_BENCH/serve.sh" start >/dev/null
rm -rf "$OUT"
start=$(date +%s.%N)
"$BIN" download --urls "$URLS" --out "$OUT" --progress off --quiet $FLAGS || true
echo "full run (for the resume figures): $(elapsed "$start") s"
start=$(date +%s.%N)
"$BIN" download --urls "$URLS" --out "$OUT" --progress off --quiet $FLAGS || true
echo "resume of the finished job: $(elapsed "$start") s"
rm -rf "$OUT"

# SIGKILL a fresh run once about half the images are in the output folder, then time the rerun.
HALF="${OUT_ROOT:-/tmp/bench-out}/ours-half"
rm -rf "$HALF"
start=$(date +%s.%N)
"$BIN" download --urls "$URLS" --out "$HALF" --progress off --quiet $FLAGS &
pid=$!
while kill -0 "$pid" 2>/dev/null && (( $(find "$HALF" -name '*.jpg' 2>/dev/null | wc -l) < N / 2 )); do
  sleep 0.2
done
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
killed_after=$(elapsed "$start")
stored=$("$BIN" status --out "$HALF" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"]["stored"])')
start=$(date +%s.%N)
"$BIN" download --urls "$URLS" --out "$HALF" --progress off --quiet $FLAGS || true
echo "half-done job: killed after ${killed_after} s with ${stored} of $N stored; the rerun finished the rest in $(elapsed "$start") s"
echo "  ($(find "$HALF" -name '*.jpg' | wc -l) files, $(find "$HALF" -name '*.part' | wc -l) part files left)"
rm -rf "$HALF"
"$SHARED_BENCH/serve.sh" stop >/dev/null
