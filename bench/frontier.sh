#!/usr/bin/env bash
# Frontier memory benchmark: does scrape's memory stay flat while the crawl's link queue grows to
# a million pending pages? (The queue lives in the state database; only a batch of it is read
# at a time.)
#
#   bench/frontier.sh
#
# The site (bench/crawl_site.py, 127.0.0.1, a free port): LISTINGS listing pages /l/N.html of
# LINKS links each to detail pages /d/ID.html (LISTINGS x LINKS details in all). Listing pages
# answer after DELAY ms, detail pages after DETAIL_DELAY ms, so the crawl finds links far faster
# than it can follow them and the queue fills. The profile walks the listings as a URL template
# and follows every `a.detail` link to a level with one image rule; the crawl runs with its
# default settings (`scrape crawl`, nothing downloaded).
#
# Every SAMPLE seconds the script prints: seconds, listings and details served, links queued so
# far (listings x LINKS), pending (queued - details served) and the RSS of the scrape process.
# Once every listing is served it samples HOLD seconds more, then interrupts scrape (SIGINT) and
# reports how long it took to stop, and `scrape status`'s counts from the database.
#
# Env: LISTINGS (2000), LINKS (500), DELAY (50), DETAIL_DELAY (1000), SAMPLE (5), HOLD (30),
# TIMEOUT (900 s for the listings), SCRAPE_BIN (default: `cargo build --release` then
# target/release/scrape), LOGS (/tmp/bench-frontier-logs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

LISTINGS="${LISTINGS:-2000}"
LINKS="${LINKS:-500}"
DELAY="${DELAY:-50}"
DETAIL_DELAY="${DETAIL_DELAY:-1000}"
SAMPLE="${SAMPLE:-5}"
HOLD="${HOLD:-30}"
TIMEOUT="${TIMEOUT:-900}"
LOGS="${LOGS:-/tmp/bench-frontier-logs}"
HERE="$(pwd)/bench"
DETAILS=$((LISTINGS * LINKS))

if [[ -z "${SCRAPE_BIN:-}" ]]; then
  cargo build --release --locked --quiet
  SCRAPE_BIN="$(pwd)/target/release/scrape"
fi
[[ -x "$SCRAPE_BIN" ]] || { echo "no scrape binary at $SCRAPE_BIN" >&2; exit 2; }

WORK="$(mktemp -d /tmp/bench-frontier.XXXXXX)"
mkdir -p "$LOGS"
server=""
crawler=""
cleanup() {
  for pid in "$crawler" "$server"; do
    if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

python3 "$HERE/crawl_site.py" --pages "$DETAILS" --listing-links "$LINKS" --delay-ms "$DELAY" \
  --detail-delay-ms "$DETAIL_DELAY" --port-file "$WORK/base" > /dev/null 2> "$LOGS/server.log" &
server=$!
for _ in $(seq 100); do [[ -s "$WORK/base" ]] && break; sleep 0.1; done
BASE="$(cat "$WORK/base")"
curl -sf -o /dev/null "$BASE/l/1.html" || { echo "the page server did not start (see $LOGS/server.log)" >&2; exit 1; }

cat > "$WORK/frontier.toml" <<EOF
name = "frontier"
start = ["$BASE/l/"]
render = "static"

[pagination]
kind = "url_template"
template = "/l/{page}.html"

[[follow]]
selector = "a.detail"
level = "detail"

[levels.detail]
[[levels.detail.images]]
selector = "img.full"

[download]
out = "$WORK/out"
EOF
"$SCRAPE_BIN" check --profile "$WORK/frontier.toml" > /dev/null

echo "site: $BASE, $LISTINGS listings x $LINKS links = $DETAILS detail pages; listings after $DELAY ms, details after $DETAIL_DELAY ms" >&2
"$SCRAPE_BIN" crawl --profile "$WORK/frontier.toml" --progress off > "$LOGS/scrape.log" 2>&1 &
crawler=$!

stats() { curl -sf "$BASE/stats" | python3 -c 'import json,sys; s=json.load(sys.stdin)["by_kind"]; print(s["l"], s["d"])'; }
rss_mib() { awk '/^VmRSS:/ { printf "%d", $2 / 1024 }' "/proc/$crawler/status" 2>/dev/null || echo "-"; }

printf '%8s %9s %9s %10s %10s %8s\n' seconds listings details queued pending rss_MiB
began=$(date +%s)
held=""
peak=0
while kill -0 "$crawler" 2>/dev/null; do
  now=$(( $(date +%s) - began ))
  read -r listings details < <(stats)
  queued=$(( (listings < LISTINGS ? listings : LISTINGS) * LINKS ))
  rss=$(rss_mib)
  [[ "$rss" =~ ^[0-9]+$ ]] && (( rss > peak )) && peak=$rss
  printf '%8d %9d %9d %10d %10d %8s\n' "$now" "$listings" "$details" "$queued" "$((queued - details))" "$rss"
  if (( listings >= LISTINGS )) && [[ -z "$held" ]]; then held=$now; fi
  if [[ -n "$held" ]] && (( now - held >= HOLD )); then break; fi
  if (( now >= TIMEOUT )); then echo "the listings were not all served within $TIMEOUT s" >&2; break; fi
  sleep "$SAMPLE"
done

stop_began=$(date +%s.%N)
kill -INT "$crawler" 2>/dev/null || true
code=0
wait "$crawler" || code=$?
crawler=""
stopped=$(python3 -c "import time; print(f'{time.time() - $stop_began:.1f}')")
echo "peak RSS ${peak} MiB; interrupted: exit $code after ${stopped} s" >&2
"$SCRAPE_BIN" status --out "$WORK/out" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
c = s["counters"]
print("state: pages done", c["pages_done"], "- images found", c["images_found"])
'
