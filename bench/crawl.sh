#!/usr/bin/env bash
# Crawl-throughput benchmark: pages/s of `scrape crawl` (pages fetched, parsed, images queued;
# nothing downloaded) against Scrapy, Crawlee and plain Playwright on the same loopback site.
#
#   bench/crawl.sh [--only static|scrapy|browser|crawlee|playwright]...   (default: all)
#
# The site (bench/crawl_site.py, Python stdlib, 127.0.0.1, a free port) delays every response
# by DELAY ms, like a remote host: a gallery /t/1..N.html of 25 images each with `a.next` links
# (/t/N+1.html answers 404), and a listing -> detail site /l/, /d/. Image URLs are never fetched.
#
#   static      scrape, render = "static", three profiles: N independent start URLs;
#               [pagination] kind = "url_template" over the last CHAIN pages (ends at the 404);
#               kind = "next_link" over the last CHAIN pages; the listing -> detail site
#               ([[follow]] a.detail to a level with `img.full`). Each with the defaults, then
#               "tuned" with `[crawl] concurrency = 64, per_host = 64` appended (a binary that
#               does not know that table exits 2: reported as n/a (unsupported)).
#   scrapy      Scrapy (PyPI, venv in /tmp/scrape-bench-scrapy): the N start URLs with default
#               settings and with CONCURRENT_REQUESTS(_PER_DOMAIN) = 64; the next_link chain;
#               the listing -> detail site (N/25 listings, N details).
#   browser     scrape, render = "browser", the first PAGES gallery pages as start URLs,
#               [browser] tabs = T for T in TABS, then tuned with `[crawl] concurrency = T`.
#   crawlee     Crawlee's PlaywrightCrawler (npm, /tmp/scrape-bench-node), maxConcurrency = T.
#   playwright  plain Playwright, one page at a time (bench/peer_playwright_crawl.mjs).
# Every browser is Debian's /usr/bin/chromium (never a downloaded one) with images blocked.
#
# Env: N (2000), CHAIN (500; chains are latency-bound at 1000/DELAY pages/s, so a shorter one
# measures the same rate; CHAIN=$N walks them all), PAGES (120), DELAY (50), TABS ("1 2 4 8"),
# LOAD_WAIT (set: also scrape with [browser] wait = "load" for each T, and Playwright waiting
# for `load`, Crawlee's default; the defaults wait for network idle, 500 ms more per page),
# TIMEOUT (per run, 400 s), SCRAPE_BIN (default: `cargo build --release` then
# target/release/scrape), RESULTS (tables appended there, /tmp/bench-crawl-results.md),
# LOGS (each run's output and the JSON lines, /tmp/bench-crawl-logs), SCRAPE_CHROMIUM.
#
# Each run is measured by bench/crawl_measure.py: wall clock, CPU of the whole process tree
# (wait4 rusage or the sum of /proc samples, whichever is larger), peak PSS of the tree, the
# server's count of pages served and most requests in flight, and the CPU other work on the
# machine took meanwhile. A run counts only if it exits 0 and reports every page and image
# (scrape: `scrape status --json`, pages_done and images_found; peers: their own counts).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

ONLY=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) ONLY+=(${2//,/ }); shift 2 ;;
    --only=*) v="${1#--only=}"; ONLY+=(${v//,/ }); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ ${#ONLY[@]} -gt 0 ]] || ONLY=(static scrapy browser crawlee playwright)
for part in "${ONLY[@]}"; do
  case "$part" in static|scrapy|browser|crawlee|playwright) ;; *) echo "unknown part: $part" >&2; exit 2 ;; esac
done
want() { local p; for p in "${ONLY[@]}"; do [[ "$p" == "$1" ]] && return 0; done; return 1; }

N="${N:-2000}"
CHAIN="${CHAIN:-500}"
(( CHAIN <= N )) || CHAIN=$N
PAGES="${PAGES:-120}"
(( PAGES <= N )) || PAGES=$N
DELAY="${DELAY:-50}"
TABS="${TABS:-1 2 4 8}"
TIMEOUT="${TIMEOUT:-400}"
RESULTS="${RESULTS:-/tmp/bench-crawl-results.md}"
LOGS="${LOGS:-/tmp/bench-crawl-logs}"
CHROMIUM="${SCRAPE_CHROMIUM:-/usr/bin/chromium}"
SCRAPY_DIR="${SCRAPY_DIR:-/tmp/scrape-bench-scrapy}"
NODE_DIR="${NODE_DIR:-/tmp/scrape-bench-node}"
HERE="$(pwd)/bench"

# The tools: scrape built here unless SCRAPE_BIN names one; the peers from their registries.
if want static || want browser; then
  if [[ -z "${SCRAPE_BIN:-}" ]]; then
    cargo build --release --locked --quiet
    SCRAPE_BIN="$(pwd)/target/release/scrape"
  fi
  [[ -x "$SCRAPE_BIN" ]] || { echo "no scrape binary at $SCRAPE_BIN" >&2; exit 2; }
fi
if want scrapy && [[ ! -x "$SCRAPY_DIR/bin/scrapy" ]]; then
  python3 -m venv "$SCRAPY_DIR"
  "$SCRAPY_DIR/bin/pip" install --quiet scrapy
fi
if { want crawlee || want playwright; } && [[ ! -d "$NODE_DIR/node_modules/crawlee" || ! -d "$NODE_DIR/node_modules/playwright-core" ]]; then
  mkdir -p "$NODE_DIR"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --silent --no-fund --no-audit --prefix "$NODE_DIR" crawlee@3 playwright-core@1
fi
if { want browser || want crawlee || want playwright; } && [[ ! -x "$CHROMIUM" ]]; then
  echo "no Chromium at $CHROMIUM (apt-get install chromium, or set SCRAPE_CHROMIUM)" >&2; exit 2
fi

WORK="$(mktemp -d /tmp/bench-crawl.XXXXXX)"
mkdir -p "$LOGS"
JSONL="$LOGS/results.jsonl"
: > "$JSONL"
server=""
cleanup() {
  if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

python3 "$HERE/crawl_site.py" --pages "$N" --delay-ms "$DELAY" --port-file "$WORK/base" > /dev/null 2> "$LOGS/server.log" &
server=$!
for _ in $(seq 100); do [[ -s "$WORK/base" ]] && break; sleep 0.1; done
BASE="$(cat "$WORK/base")"
curl -sf -o /dev/null "$BASE/t/1.html" || { echo "the page server did not start (see $LOGS/server.log)" >&2; exit 1; }
echo "site: $BASE, N=$N pages of 25 images, CHAIN=$CHAIN, PAGES=$PAGES rendered, DELAY=$DELAY ms; logs in $LOGS" >&2

# measure SECTION TOOL SETTING PAGES IMAGES [--verify CMD] [--na-exit2] -- CMD...
measure() {
  local section="$1" tool="$2" setting="$3" pages="$4" images="$5"; shift 5
  local log="$LOGS/$(printf %s "$tool $setting" | tr -c 'A-Za-z0-9=.-' '_').log"
  python3 "$HERE/crawl_measure.py" run --section "$section" --tool "$tool" --setting "$setting" \
    --base "$BASE" --results "$JSONL" --expect-pages "$pages" --expect-images "$images" \
    --timeout "$TIMEOUT" --log "$log" "$@" || echo "  (the measurement itself failed: $tool $setting)" >&2
}

# profile FILE START_TOML RENDER [TABLE...]: a profile of these tables (IMG: `main img`).
IMG=$'[[images]]\nselector = "main img"'
profile() {
  local file="$1" start="$2" render="$3"; shift 3
  {
    printf 'name = "crawl-bench"\nstart = %s\nrender = "%s"\n' "$start" "$render"
    local extra; for extra in "$@"; do printf '\n%s\n' "$extra"; done
  } > "$file"
}
starts_toml() {  # starts_toml FIRST COUNT: a TOML array of gallery URLs
  python3 -c 'import sys; b, f, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]); print("[" + ", ".join(f"\"{b}/t/{i}.html\"" for i in range(f, f + n)) + "]")' "$BASE" "$1" "$2"
}
run_id=0
# scrape_run SECTION SETTING PROFILE PAGES IMAGES [--na-exit2]: one `scrape crawl`, fresh --out.
scrape_run() {
  local section="$1" setting="$2" prof="$3" pages="$4" images="$5"; shift 5
  run_id=$((run_id + 1))
  local out="$WORK/out-$run_id"
  measure "$section" scrape "$setting" "$pages" "$images" "$@" \
    --verify "'$SCRAPE_BIN' status --out '$out' --json | python3 -c 'import json,sys; c=json.load(sys.stdin)[\"counters\"]; print(\"RESULT \" + json.dumps({\"pages\": c[\"pages_done\"], \"images\": c[\"images_found\"], \"pages_failed\": c[\"pages_failed\"]}))'" \
    -- "$SCRAPE_BIN" crawl --profile "$prof" --out "$out"
  rm -rf "$out"
}
TUNED=$'[crawl]\nconcurrency = 64\nper_host = 64'
FIRST=$((N - CHAIN + 1))
S1="static: $N independent start URLs"
S2="static: url_template chain, pages $FIRST..$N (then a 404)"
S3="static: next_link chain, pages $FIRST..$N"
S4="static: listing -> detail, $((N / 25)) listings + $N details"
SB="browser: $PAGES rendered pages (start URLs), images blocked"

if want static; then
  echo "== scrape, static" >&2
  P="$WORK/starts.toml"; profile "$P" "$(starts_toml 1 "$N")" static "$IMG"
  scrape_run "$S1" "defaults" "$P" "$N" $((N * 25))
  P="$WORK/starts-tuned.toml"; profile "$P" "$(starts_toml 1 "$N")" static "$IMG" "$TUNED"
  scrape_run "$S1" "[crawl] concurrency=64 per_host=64" "$P" "$N" $((N * 25)) --na-exit2
  template=$'[pagination]\nkind = "url_template"\ntemplate = "/t/{page}.html"\nstart = '"$FIRST"
  P="$WORK/template.toml"; profile "$P" "[\"$BASE/\"]" static "$IMG" "$template"
  # The 404 that ends the chain may count as a page done (CHAIN + 1); the rate is of CHAIN.
  scrape_run "$S2" "defaults" "$P" "$CHAIN,$((CHAIN + 1))" $((CHAIN * 25)) --rate-pages "$CHAIN"
  P="$WORK/template-tuned.toml"; profile "$P" "[\"$BASE/\"]" static "$IMG" "$template" "$TUNED"
  scrape_run "$S2" "[crawl] concurrency=64 per_host=64" "$P" "$CHAIN,$((CHAIN + 1))" $((CHAIN * 25)) --rate-pages "$CHAIN" --na-exit2
  next=$'[pagination]\nkind = "next_link"\nselector = "a.next"'
  P="$WORK/next.toml"; profile "$P" "[\"$BASE/t/$FIRST.html\"]" static "$IMG" "$next"
  scrape_run "$S3" "defaults" "$P" "$CHAIN" $((CHAIN * 25))
  P="$WORK/next-tuned.toml"; profile "$P" "[\"$BASE/t/$FIRST.html\"]" static "$IMG" "$next" "$TUNED"
  scrape_run "$S3" "[crawl] concurrency=64 per_host=64" "$P" "$CHAIN" $((CHAIN * 25)) --na-exit2
  # Listings (a pure listing: no image rule of its own) whose `a.detail` links lead to detail
  # pages holding `img.full` ([[follow]] and [levels]; a binary without them exits 2: n/a).
  detail=$'[pagination]\nkind = "next_link"\nselector = "a.next"\n\n[[follow]]\nselector = "a.detail"\nlevel = "detail"\n\n[levels.detail]\n[[levels.detail.images]]\nselector = "img.full"'
  P="$WORK/detail.toml"; profile "$P" "[\"$BASE/l/1.html\"]" static "$detail"
  scrape_run "$S4" "defaults" "$P" $((N + N / 25)) "$N" --na-exit2
  P="$WORK/detail-tuned.toml"; profile "$P" "[\"$BASE/l/1.html\"]" static "$detail" "$TUNED"
  scrape_run "$S4" "[crawl] concurrency=64 per_host=64" "$P" $((N + N / 25)) "$N" --na-exit2
fi

if want scrapy; then
  echo "== Scrapy $("$SCRAPY_DIR/bin/scrapy" version 2>/dev/null | awk '{print $2}')" >&2
  PY="$SCRAPY_DIR/bin/python"
  measure "$S1" scrapy "defaults (16 / 8 per domain)" "$N" $((N * 25)) -- "$PY" "$HERE/peer_scrapy.py" "$BASE" starts "$N"
  measure "$S1" scrapy "CONCURRENT_REQUESTS(_PER_DOMAIN)=64" "$N" $((N * 25)) -- "$PY" "$HERE/peer_scrapy.py" "$BASE" starts "$N" 1 --concurrency 64
  measure "$S3" scrapy "defaults" "$CHAIN" $((CHAIN * 25)) -- "$PY" "$HERE/peer_scrapy.py" "$BASE" next "$CHAIN" "$FIRST"
  measure "$S4" scrapy "defaults (16 / 8 per domain)" $((N + N / 25)) "$N" -- "$PY" "$HERE/peer_scrapy.py" "$BASE" detail "$N"
fi

if want browser; then
  echo "== scrape, browser" >&2
  starts="$(starts_toml 1 "$PAGES")"
  for t in $TABS; do
    P="$WORK/browser-$t.toml"; profile "$P" "$starts" browser "$IMG" $'[browser]\nexecutable = "'"$CHROMIUM"$'"\ntabs = '"$t"
    scrape_run "$SB" "tabs=$t (wait network_idle)" "$P" "$PAGES" $((PAGES * 25))
    if [[ -n "${LOAD_WAIT:-}" ]]; then
      P="$WORK/browser-$t-load.toml"; profile "$P" "$starts" browser "$IMG" $'[browser]\nexecutable = "'"$CHROMIUM"$'"\ntabs = '"$t"$'\nwait = "load"'
      scrape_run "$SB" "tabs=$t, wait = \"load\"" "$P" "$PAGES" $((PAGES * 25))
    fi
    P="$WORK/browser-$t-tuned.toml"; profile "$P" "$starts" browser "$IMG" $'[browser]\nexecutable = "'"$CHROMIUM"$'"\ntabs = '"$t" $'[crawl]\nconcurrency = '"$t"
    scrape_run "$SB" "tabs=$t, [crawl] concurrency=$t" "$P" "$PAGES" $((PAGES * 25)) --na-exit2
  done
fi

if want crawlee; then
  echo "== Crawlee $(node -p "require('$NODE_DIR/node_modules/crawlee/package.json').version")" >&2
  cp "$HERE/peer_crawlee.mjs" "$NODE_DIR/peer_crawlee.mjs"
  for t in $TABS; do
    measure "$SB" crawlee "maxConcurrency=$t (wait load)" "$PAGES" $((PAGES * 25)) -- node "$NODE_DIR/peer_crawlee.mjs" "$BASE" "$PAGES" "$t"
  done
fi

if want playwright; then
  echo "== Playwright $(node -p "require('$NODE_DIR/node_modules/playwright-core/package.json').version")" >&2
  cp "$HERE/peer_playwright_crawl.mjs" "$NODE_DIR/peer_playwright_crawl.mjs"
  measure "$SB" playwright "1 page at a time (wait networkidle)" "$PAGES" $((PAGES * 25)) -- node "$NODE_DIR/peer_playwright_crawl.mjs" "$BASE" "$PAGES" networkidle
  if [[ -n "${LOAD_WAIT:-}" ]]; then
    measure "$SB" playwright "1 page at a time (wait load)" "$PAGES" $((PAGES * 25)) -- node "$NODE_DIR/peer_playwright_crawl.mjs" "$BASE" "$PAGES" load
  fi
fi

kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=""
{
  echo
  echo "## bench/crawl.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo
  echo "N=$N, CHAIN=$CHAIN, PAGES=$PAGES, DELAY=$DELAY ms, TABS=\"$TABS\", scrape: ${SCRAPE_BIN:-not run}; $(nproc) cores."
  echo "CPU s/page: user+sys of the tool's whole process tree per page; other load: CPU other work on the machine took during the run."
  python3 "$HERE/crawl_measure.py" table "$JSONL"
} | tee -a "$RESULTS"
echo "(appended to $RESULTS; each run's log and JSON line in $LOGS)" >&2
