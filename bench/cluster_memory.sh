#!/usr/bin/env bash
# Redis memory of one job: `used_memory` (INFO memory) of a fresh redis-server before
# `scrape enqueue` and after one `scrape worker` finished the job, against bench/crawl_site.py
# serving PAGES gallery pages of 25 images each (every page a start URL of its own).
#
#   bench/cluster_memory.sh     (PAGES=400: 400 pages and 10,000 images)
#
# Env: PAGES (400), SCRAPE_BIN (default: `cargo build --release` then target/release/scrape).
set -euo pipefail
cd "$(dirname "$0")/.."
PAGES=${PAGES:-400}
if [ -z "${SCRAPE_BIN:-}" ]; then
  cargo build --release --locked --quiet
  SCRAPE_BIN=target/release/scrape
fi
command -v redis-server >/dev/null || { echo "error: redis-server not found (Debian's redis-server)" >&2; exit 2; }
work=$(mktemp -d /tmp/scrape-bench-memory.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

python3 bench/crawl_site.py --pages "$PAGES" --delay-ms 0 --images --port-file "$work/site" >/dev/null 2>"$work/site.log" &
pids+=($!)
until [ -s "$work/site" ]; do sleep 0.1; done
base=$(cat "$work/site")
profile="$work/memory.toml"
{
  echo 'name = "memory"'
  printf 'start = ['
  for n in $(seq 1 "$PAGES"); do printf '"%s/t/%d.html", ' "$base" "$n"; done
  echo ']'
  printf 'render = "static"\n[pagination]\nkind = "next_link"\nselector = "a.next"\n'
  printf '[[images]]\nname = "photos"\nselector = "main img"\n'
  printf '[download]\nout = "out"\n[politeness]\nrobots = "ignore"\n'
} >"$profile"

redis-server --bind 127.0.0.1 --port "$port" --appendonly yes --save '' --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
used() { redis-cli -p "$port" INFO memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p'; }
url="redis://127.0.0.1:$port/0"
before=$(used)
"$SCRAPE_BIN" enqueue --redis "$url" --profile "$profile" 2>"$work/enqueue.log"
"$SCRAPE_BIN" worker --redis "$url" --profile "$profile" --out "$work/out" --name w1 2>"$work/worker.log"
after=$(used)
status=$("$SCRAPE_BIN" status --redis "$url" --json)
python3 - "$before" "$after" "$status" <<'PY'
import json, sys
before, after, status = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
images = status["images_enqueued"]
pages = status["pages_enqueued"]
per = (after - before) / images
print(f"{pages} pages, {images} images: used_memory {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB, "
      f"{per:.0f} bytes per image, {per * 1e6 / 1e9:.2f} GB per million images")
PY
for key in seen done image-records page-records owners pages images; do
  printf '%s: %s bytes\n' "$key" "$(redis-cli -p "$port" MEMORY USAGE "scrape:{memory}:$key" SAMPLES 0)"
done
