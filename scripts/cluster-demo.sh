#!/usr/bin/env bash
# Many machines, shown on one: a redis-server and three `scrape worker`s on loopback run the
# bundled demo gallery together into one shared folder, then `scrape status` and
# `scrape export` show and write the whole job. WORKERS=N changes the count, OUT the folder.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
if ! command -v redis-server >/dev/null 2>&1; then
  echo "error: redis-server not found; install Debian's redis-server package" >&2
  exit 2
fi
cargo build --release --locked --quiet
scrape=target/release/scrape
profile=site-profiles/demo.toml
out=${OUT:-cluster-output}
workers=${WORKERS:-3}
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A free loopback port for Redis, with its data (append-only file) in a folder of its own.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --bind 127.0.0.1 --port "$port" --appendonly yes --save '' --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
redis="redis://127.0.0.1:$port/0"

# The demo gallery on its usual port (the demo profile's start URL).
"$scrape" demo --serve --progress off >"$work/site.log" 2>&1 &
pids+=($!)
until (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; do sleep 0.1; done

"$scrape" enqueue --redis "$redis" --profile "$profile"
worker_pids=()
for i in $(seq 1 "$workers"); do
  "$scrape" worker --redis "$redis" --profile "$profile" --out "$out" --name "demo-$i" &
  worker_pids+=($!)
done
for pid in "${worker_pids[@]}"; do wait "$pid"; done
"$scrape" status --redis "$redis"
"$scrape" export --redis "$redis" --out "$out"
echo "images in $out/, described in $out/manifest.jsonl"
