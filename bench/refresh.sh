#!/usr/bin/env bash
# Refresh benchmark: a collection kept current. A loopback site (bench/crawl_site.py, every
# response delayed DELAY ms, images as small PNGs) is crawled and downloaded once with the
# defaults; then the site publishes new items and `scrape --refresh` runs on the same output
# folder. Reported: the pages and images each run asked for, the images the refresh stored, and
# its time as a share of the first run's.
#
#   bench/refresh.sh     (on a shared machine, under `flock /tmp/scrape-cpu.lock`)
#
# Two sites:
#   gallery   N pages of 25 images linked by `a.next` (one chain); then 10 new images at the top
#             of page 1 and one new page of 25 at the end: 35 new images.
#   listing   N/25 listing pages linking 25 detail pages each ([[follow]], one `img.full` per
#             detail); then 10 new details at the top of listing 1 and a new listing page of 25
#             at the end: 35 new detail pages and images.
#   api       a json_cursor feed of N pages of 25 items, newest first; then 10 new items at its
#             top (every page shifts by 10): 10 new images.
#
# Env: N (2000), DELAY (50), SCRAPE_BIN (default: `cargo build --release`, then
# target/release/scrape), KEEP (set: keep the work folder).
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-2000}"
DELAY="${DELAY:-50}"
if [[ -z "${SCRAPE_BIN:-}" ]]; then
  cargo build --release --locked --quiet
  SCRAPE_BIN="$(pwd)/target/release/scrape"
fi
WORK="$(mktemp -d /tmp/bench-refresh.XXXXXX)"
server=""
stop_site() {
  if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  server=""
}
cleanup() {
  stop_site
  [[ -n "${KEEP:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
# One port for both versions of a site: the state knows pages by URL.
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
BASE="http://127.0.0.1:$PORT"

# site PAGES NEW: serves the site with PAGES gallery pages (and details) and NEW new items.
site() {
  rm -f "$WORK/base"
  python3 bench/crawl_site.py --port "$PORT" --pages "$1" --new "$2" --delay-ms "$DELAY" --images \
    --port-file "$WORK/base" > /dev/null 2>> "$WORK/server.log" &
  server=$!
  for _ in $(seq 200); do [[ -s "$WORK/base" ]] && break; sleep 0.1; done
  [[ -s "$WORK/base" ]] || { echo "the site did not start (see $WORK/server.log)" >&2; exit 1; }
}

# timed OUT NAME [FLAGS...]: one run of the profile $PROFILE into OUT; prints its seconds.
timed() {
  local out="$1" name="$2"; shift 2
  local t0 t1
  t0=$(date +%s.%N)
  "$SCRAPE_BIN" --profile "$PROFILE" --out "$out" --progress off "$@" 2> "$WORK/$name.log" || {
    echo "run $name failed (exit $?), see $WORK/$name.log" >&2; tail -5 "$WORK/$name.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.1f}')"
}

requests() {  # requests KIND: requests of KIND (t, l, d, img) the site answered since its start
  curl -sf "$BASE/stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['by_kind']['$1'])"
}

stored() {  # stored OUT: images stored and duplicates, from the state
  "$SCRAPE_BIN" status --out "$1" --json | python3 -c 'import json,sys; c = json.load(sys.stdin)["counters"]; print(c["stored"] + c["duplicates"])'
}

# bench NAME PAGE_KIND SECOND_PAGES: the first run, then the refresh against the grown site.
bench() {
  local name="$1" kind="$2" grown="$3" out="$WORK/$1-out"
  site "$N" 0
  local first; first=$(timed "$out" "$name-first")
  local first_pages first_images; first_pages=$(requests "$kind"); first_images=$(requests img)
  local before; before=$(stored "$out")
  stop_site
  site "$grown" 10
  local again; again=$(timed "$out" "$name-refresh" --refresh)
  local pages images details after
  pages=$(requests "$kind"); images=$(requests img); details=$(requests d); after=$(stored "$out")
  stop_site
  python3 - "$name" "$first" "$first_pages" "$first_images" "$again" "$pages" "$details" "$images" "$before" "$after" <<'EOF'
import sys
name, first, fp, fi, again, pages, details, images, before, after = sys.argv[1:]
first, again = float(first), float(again)
print(f"| {name} | {first:.1f} s, {fp} pages, {fi} images | {again:.1f} s ({100 * again / first:.2f}%), "
      f"{pages} {'API pages' if name == 'api' else 'pages'}{f' + {details} details' if name == 'listing' else ''}, {images} images | "
      f"{int(after) - int(before)} |")
EOF
}

echo "N=$N, DELAY=$DELAY ms, scrape: $SCRAPE_BIN, defaults (no tuning flags)" >&2
echo "| site | first run | refresh (share of the first run's time) | images the refresh stored |"
echo "|---|---|---|---|"
PROFILE="$WORK/gallery.toml"
printf 'name = "refresh-gallery"\nstart = ["%s/t/1.html"]\nrender = "static"\n\n[pagination]\nkind = "next_link"\nselector = "a.next"\n\n[[images]]\nselector = "main img"\n' "$BASE" > "$PROFILE"
bench gallery t $((N + 1))
PROFILE="$WORK/listing.toml"
printf 'name = "refresh-listing"\nstart = ["%s/l/1.html"]\nrender = "static"\n\n[pagination]\nkind = "next_link"\nselector = "a.next"\n\n[[follow]]\nselector = "a.detail"\nlevel = "detail"\n\n[levels.detail]\n[[levels.detail.images]]\nselector = "img.full"\n' "$BASE" > "$PROFILE"
bench listing l $((N + 25))
PROFILE="$WORK/api.toml"
printf 'name = "refresh-api"\nstart = ["%s/"]\nrender = "static"\n\n[pagination]\nkind = "json_cursor"\nrequest = "/api/items"\ncursor = "$.next_cursor"\n\n[[api]]\nurl = "/api/items"\nitems = "$.items[*]"\nimage = "$.image"\nid = "$.id"\n' "$BASE" > "$PROFILE"
bench api api "$N"
