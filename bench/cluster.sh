#!/usr/bin/env bash
# Scale-out benchmark: one job run by 1, 2 and 4 `scrape worker`s over one local redis-server,
# against bench/crawl_site.py with every page and image delayed by DELAY ms (a remote host).
#
#   bench/cluster.sh            (run it under `flock /tmp/scrape-cpu.lock` on a shared machine)
#
# The job: PAGES gallery pages (/t/1..N.html, 25 images each, served as small PNGs), each page a
# start URL of its own (a chain is sequential; independent start pages are what spreads over
# workers). For each worker count W: a fresh Redis (appendonly, everysec), a fresh shared
# folder, `scrape enqueue`, W workers started together, timed until the last one exits; then
# pages/s and images/s, the speed-up over one worker, and Redis' own count of the commands
# it ran (INFO commandstats), per item (page or image) and by command, so where Redis becomes
# the limit with N machines can be worked out.
#
# Redis' CPU time per item (INFO cpu) bounds the items per second one Redis can serve.
#
# Env: PAGES (200), DELAY (50), WORKERS ("1 2 4"), WORKER_FLAGS (flags for every worker, e.g.
# "--concurrency 16" so one worker is bound by latency, not by this machine's CPU),
# SCRAPE_BIN (default: `cargo build --release` then target/release/scrape), KEEP (set: keep
# the work folder).
set -euo pipefail
cd "$(dirname "$0")/.."
PAGES=${PAGES:-200}
DELAY=${DELAY:-50}
WORKERS=${WORKERS:-"1 2 4"}
if [ -z "${SCRAPE_BIN:-}" ]; then
  cargo build --release --locked --quiet
  SCRAPE_BIN=target/release/scrape
fi
command -v redis-server >/dev/null || { echo "error: redis-server not found (Debian's redis-server)" >&2; exit 2; }
work=$(mktemp -d /tmp/scrape-bench-cluster.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

python3 bench/crawl_site.py --pages "$PAGES" --delay-ms "$DELAY" --images --port-file "$work/site" >/dev/null 2>"$work/site.log" &
pids+=($!)
until [ -s "$work/site" ]; do sleep 0.1; done
base=$(cat "$work/site")

profile="$work/bench.toml"
{
  echo 'name = "bench-cluster"'
  printf 'start = ['
  for n in $(seq 1 "$PAGES"); do printf '"%s/t/%d.html", ' "$base" "$n"; done
  echo ']'
  echo 'render = "static"'
  echo '[pagination]'
  echo 'kind = "next_link"'
  echo 'selector = "a.next"'
  echo '[[images]]'
  echo 'name = "photos"'
  echo 'selector = "main img"'
  echo '[download]'
  echo 'out = "out"'
  echo '[politeness]'
  echo 'robots = "ignore"'
} >"$profile"

printf '\n| workers | seconds | pages/s | images/s | speed-up | Redis commands | per item | Redis CPU µs per item | top commands per item |\n|---|---|---|---|---|---|---|---|---|\n'
first=""
for w in $WORKERS; do
  port=$(free_port)
  rdir="$work/redis-$w"; mkdir -p "$rdir"
  redis-server --bind 127.0.0.1 --port "$port" --appendonly yes --save '' --dir "$rdir" >"$rdir/log" 2>&1 &
  rpid=$!; pids+=($rpid)
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
  url="redis://127.0.0.1:$port/0"
  out="$work/out-$w"
  "$SCRAPE_BIN" enqueue --redis "$url" --profile "$profile" 2>"$work/enqueue-$w.log"
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  start=$(date +%s.%N)
  wpids=()
  for i in $(seq 1 "$w"); do
    # shellcheck disable=SC2086
    "$SCRAPE_BIN" worker --redis "$url" --profile "$profile" --out "$out" --name "w$i" ${WORKER_FLAGS:-} 2>"$work/worker-$w-$i.log" &
    wpids+=($!)
  done
  for pid in "${wpids[@]}"; do wait "$pid"; done
  end=$(date +%s.%N)
  stats=$(redis-cli -p "$port" INFO commandstats; redis-cli -p "$port" INFO cpu)
  status=$("$SCRAPE_BIN" status --redis "$url" --json)
  kill "$rpid"; wait "$rpid" 2>/dev/null || true
  python3 - "$start" "$end" "$w" "$first" "$status" "$stats" <<'PY'
import json, re, sys
start, end, w, first = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
status, stats = json.loads(sys.argv[5]), sys.argv[6]
secs = end - start
pages = status["pages_done"] + status["pages_failed"]
images = status["images_stored"] + status["images_duplicate"] + status["images_failed"]
calls = {m.group(1): int(m.group(2)) for m in re.finditer(r"cmdstat_([a-z|]+):calls=(\d+)", stats)}
total = sum(calls.values())
cpu = sum(float(m.group(1)) for m in re.finditer(r"used_cpu_(?:user|sys):([0-9.]+)", stats))
items = pages + images
top = sorted(calls.items(), key=lambda kv: -kv[1])[:6]
speed = f"{(float(first) / secs):.2f}x" if first else "1.00x"
print(f"| {w} | {secs:.2f} | {pages / secs:.0f} | {images / secs:.0f} | {speed} | {total} | {total / items:.2f} | {cpu / items * 1e6:.0f} | "
      + ", ".join(f"{k} {v / items:.2f}" for k, v in top) + " |")
open("/tmp/scrape-bench-cluster-first", "w").write(f"{secs}")
PY
  [ -n "$first" ] || first=$(cat /tmp/scrape-bench-cluster-first)
done
echo
echo "$PAGES pages x 25 images, every response delayed ${DELAY} ms, worker flags: ${WORKER_FLAGS:-none}; commands the scripts run inside Redis count too (evalsha is one round trip); Redis CPU is its whole process since start (enqueue included)"
