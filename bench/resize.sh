#!/usr/bin/env bash
# Resize benchmark: the same N generated JPEGs downloaded on loopback without and with
# `[download.resize]` (default size 256, keep_ratio, JPEG 95), each into a fresh folder;
# prints images per second and CPU seconds (user + system) per image of each run.
#
#   bench/resize.sh            # N=2,000
#   bench/resize.sh N [SIZE]
#
# Uses the images and the nginx server of the shared peer harness (see bench/download.sh; run
# its setup.sh once first). Env: SHARED_BENCH, BIN (default: a release build of this tree),
# MODE (keep_ratio | center_crop | border), FORMAT (jpeg | png | webp | keep). On a shared
# machine, run it under the CPU lock the other builds take.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED_BENCH="${SHARED_BENCH:-$(cd .. && pwd)/shared/bench}"
[[ -x "$SHARED_BENCH/serve.sh" ]] || { echo "no peer harness at $SHARED_BENCH (set SHARED_BENCH)" >&2; exit 2; }
N="${1:-2000}" SIZE="${2:-256}"
URLS="/tmp/bench-data/n$N/urls.txt"
[[ -f "$URLS" ]] || { echo "no generated data set at $URLS (run the harness's gen_images.py)" >&2; exit 2; }
if [[ -z "${BIN:-}" ]]; then
  cargo build --release --locked --quiet
  BIN="$(pwd)/target/release/scrape"
fi
WORK="$(mktemp -d /tmp/bench-resize-XXXX)"
trap 'rm -rf "$WORK"' EXIT
started=0
if ! "$SHARED_BENCH/serve.sh" status >/dev/null 2>&1; then
  "$SHARED_BENCH/serve.sh" start >/dev/null; started=1
fi
head='name = "bench"\nstart = ["http://a.test/"]\n[[images]]\nselector = "img"\n'
printf "$head" > "$WORK/plain.toml"
printf "$head[download.resize]\nsize = %s\nmode = \"%s\"\nformat = \"%s\"\n" \
  "$SIZE" "${MODE:-keep_ratio}" "${FORMAT:-jpeg}" > "$WORK/resize.toml"
for run in plain resize; do
  sync
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/$run.time" \
    "$BIN" download --urls "$URLS" --out "$WORK/out-$run" --progress off --quiet \
    --profile "$WORK/$run.toml" || true
  read -r wall user sys rss < <(tail -1 "$WORK/$run.time")
  stored=$(wc -l < "$WORK/out-$run/manifest.jsonl")
  python3 -c "import sys; w,u,s,n=map(float,sys.argv[2:6]); print(f'{sys.argv[1]}: {int(n)} images in {w:.2f} s, {n/w:.0f} img/s, {(u+s)/n*1e3:.1f} ms CPU per image, {int(sys.argv[6])//1024} MiB peak')" \
    "$run" "$wall" "$user" "$sys" "$stored" "$rss"
done
if [[ $started == 1 ]]; then "$SHARED_BENCH/serve.sh" stop >/dev/null; fi
