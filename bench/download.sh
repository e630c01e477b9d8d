#!/usr/bin/env bash
# Download-stage benchmark: `scrape download` with its defaults side by side with peers on the
# same data, and the ratio of its images per second to each peer's.
#
#   bench/download.sh          # the standard pair: N=2,000 with every response delayed 50 ms
#                              # (a distant host, LAT=1), then N=20,000 on plain loopback;
#                              # each also with `--format webdataset` (tar shards)
#   bench/download.sh N        # one run of N generated JPEGs on loopback (files, then
#                              # `--format webdataset`), then the resume figures
#
# Uses the shared peer harness (../shared/bench: nginx on 127.0.0.1:18080, and :18081 with the
# 50 ms delay; generated images; the seeds' aiohttp script, img2dataset, aria2, wget); run its
# setup.sh once first (as root). Env: PEERS (default "seed_aiohttp"), REPEAT, TIMEOUT,
# SHARED_BENCH, and SCRAPE_FLAGS (default none: scrape's own defaults, adaptive per-host windows
# included). On a shared machine, run it under the CPU lock the other builds take.
# With N, it then times a rerun of the finished job and the rerun of a job killed half-way
# (resume must not rescan or re-hash the output).
# BASELINE=REV (a commit) builds that commit too (in a worktree under target/, release) and runs
# it as `scrape@REV` beside this one and the peers, in turn in every repetition, so a change is
# measured against what came before it in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED_BENCH="${SHARED_BENCH:-$(cd .. && pwd)/shared/bench}"
[[ -x "$SHARED_BENCH/peers.sh" ]] || { echo "no peer harness at $SHARED_BENCH (set SHARED_BENCH)" >&2; exit 2; }
BASE_BIN=""
if [[ -n "${BASELINE:-}" ]]; then
  # Built first, in a worktree sharing this target folder (the dependencies are built once),
  # and put aside before this tree's build replaces it.
  rev="$(git rev-parse --short "$BASELINE")"
  tree="$(pwd)/target/baseline-$rev"
  [[ -d "$tree" ]] || git worktree add --detach -q "$tree" "$rev"
  BASE_BIN="$(pwd)/target/release/scrape-$rev"
  [[ -x "$BASE_BIN" ]] || {
    (cd "$tree" && CARGO_TARGET_DIR="$(pwd)/.." cargo build --release --locked --quiet)
    cp target/release/scrape "$BASE_BIN"
  }
  BASE_NAME="scrape@$rev"
fi
cargo build --release --locked --quiet
BIN="$(pwd)/target/release/scrape"
FLAGS="${SCRAPE_FLAGS:-}"
export PEERS="${PEERS:-seed_aiohttp}" OURS_NAME=scrape
RESULTS_ROOT="${RESULTS_DIR:-/tmp/bench-results}"
mkdir -p "$RESULTS_ROOT"

# Each tool writes to a file system of its own, made just before its run (FRESH_FS=1, the
# default as root): on a file system shared by the runs, the tool that runs right after another
# one's files were deleted pays for it (ext4 skips inodes deleted in the last minutes when it
# allocates, which took a third of the kernel time of the second run here). FRESH_FS=0 runs
# everything in one OUT_ROOT, as the harness alone does.
FRESH_FS="${FRESH_FS:-$([[ $(id -u) == 0 ]] && command -v mkfs.ext4 >/dev/null && echo 1 || echo 0)}"
FS_IMAGE="${FS_IMAGE:-/tmp/bench-fs.img}" FS_MOUNT="${FS_MOUNT:-/tmp/bench-fs}"
FS_DEVICE=""
fresh_fs() {
  local n="$1"
  drop_fs
  # Room for the images (31 KB on average) and their metadata, twice over.
  truncate -s "$(( n * 64 / 1000 + 512 ))M" "$FS_IMAGE"
  mkfs.ext4 -q -F "$FS_IMAGE"
  mkdir -p "$FS_MOUNT"
  # Direct I/O to the image file: without it every page is cached twice (the file system's,
  # then the image file's), and 6 GB of output ran at half the speed of the disk.
  FS_DEVICE="$(losetup --direct-io=on -f --show "$FS_IMAGE")"
  mount "$FS_DEVICE" "$FS_MOUNT"
}
drop_fs() {
  [[ "$FRESH_FS" == 1 ]] || return 0
  umount "$FS_MOUNT" 2>/dev/null || true
  if [[ -n "$FS_DEVICE" ]]; then losetup -d "$FS_DEVICE" 2>/dev/null || true; FS_DEVICE=""; fi
  rm -f "$FS_IMAGE"
}
trap drop_fs EXIT

# One scenario: N images, LAT 0 or 1. Prints the harness's table, then scrape's images per
# second over each peer's (best run of each).
scenario() {
  local n="$1" lat="$2" dir ours spec rep
  dir="$(mktemp -d "$RESULTS_ROOT/n$n-lat$lat-XXXX")"
  ln -sfn "$dir" "$RESULTS_ROOT/last"
  echo "== N=$n, LAT=$lat, scrape download $FLAGS (results in $dir)"
  ours="$BIN download --urls {urls_txt} --out {out} --progress off --quiet $FLAGS"
  if [[ "$FRESH_FS" == 1 ]]; then
    # One server for all the calls below (each call would otherwise start and stop its own).
    local started=0
    if ! "$SHARED_BENCH/serve.sh" status >/dev/null 2>&1; then
      "$SHARED_BENCH/serve.sh" start >/dev/null; started=1
    fi
    for rep in $(seq 1 "${REPEAT:-1}"); do
      for spec in $PEERS ours ${BASE_BIN:+baseline}; do
        fresh_fs "$n"
        # A blank PEERS list runs only scrape (an empty one would mean every peer).
        if [[ "$spec" == ours ]]; then
          OUT_ROOT="$FS_MOUNT" REPEAT=1 PEERS=" " RESULTS_DIR="$dir" LAT="$lat" \
            "$SHARED_BENCH/peers.sh" "$n" "$ours"
        elif [[ "$spec" == baseline ]]; then
          OUT_ROOT="$FS_MOUNT" REPEAT=1 PEERS=" " RESULTS_DIR="$dir" LAT="$lat" OURS_NAME="$BASE_NAME" \
            "$SHARED_BENCH/peers.sh" "$n" "${ours/#$BIN/$BASE_BIN}"
        else
          OUT_ROOT="$FS_MOUNT" REPEAT=1 PEERS="$spec" OURS_CMD="" RESULTS_DIR="$dir" LAT="$lat" \
            "$SHARED_BENCH/peers.sh" "$n" ""
        fi
      done
    done
    drop_fs
    if [[ $started == 1 ]]; then "$SHARED_BENCH/serve.sh" stop >/dev/null; fi
  else
    RESULTS_DIR="$dir" LAT="$lat" "$SHARED_BENCH/peers.sh" "$n" "$ours"
  fi
  python3 - "$dir" "$n" "$lat" <<'EOF'
import glob, json, sys
rows = [json.loads(l) for f in glob.glob(sys.argv[1] + "/*.jsonl") for l in open(f) if l.strip()]
best = {}
for r in rows:
    if not r.get("timed_out") and r["img_per_s"] > best.get(r["peer"], {"img_per_s": 0})["img_per_s"]:
        best[r["peer"]] = r
ours = best.get("scrape")
where = "every response delayed 50 ms" if sys.argv[3] == "1" else "loopback"
for peer, r in sorted(best.items()):
    if peer != "scrape" and ours:
        print(f"ratio N={sys.argv[2]} ({where}): scrape {ours['img_per_s']} img/s, "
              f"{peer} {r['img_per_s']} img/s: {ours['img_per_s'] / r['img_per_s']:.2f}x")
EOF
}

# The same N images (LAT 0 or 1) into WebDataset shards, timed outside the harness (it counts
# image files, and a shard is one tar): samples from the shards' indexes, images per second, and
# the ratio to the best run of each peer the harness measured in this scenario (results in $3).
# Run REPEAT times, each on a fresh file system, and scored by its best run, as the harness
# scores every peer.
webdataset() {
  local n="$1" lat="$2" dir="$3" data out start wall samples rep
  data="/tmp/bench-data/n$n"
  [[ "$lat" == 1 ]] && data="/tmp/bench-lat/n$n-lat50ms"
  # A server started here is stopped here: it would otherwise keep the CPU lock's descriptor.
  local started=0
  if ! "$SHARED_BENCH/serve.sh" status >/dev/null 2>&1; then
    "$SHARED_BENCH/serve.sh" start >/dev/null; started=1
  fi
  : > "$dir/webdataset.runs"
  for rep in $(seq 1 "${REPEAT:-1}"); do
    out="${OUT_ROOT:-/tmp/bench-out}/scrape-webdataset"
    if [[ "$FRESH_FS" == 1 ]]; then fresh_fs "$n"; out="$FS_MOUNT/scrape-webdataset"; fi
    rm -rf "$out"
    sync
    start=$(date +%s.%N)
    /usr/bin/time -o "$dir/webdataset.cpu" -f "%U %S" \
      "$BIN" download --urls "$data/urls.txt" --out "$out" --progress off --quiet --format webdataset $FLAGS || true
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    samples=$(cat "$out"/[0-9]*.jsonl | wc -l)
    echo "scrape --format webdataset: $samples samples in $(ls "$out"/*.tar | wc -l) shards, $wall s," \
      "$(awk '{print $1 + $2}' "$dir/webdataset.cpu" | tail -1) CPU s"
    echo "$samples $wall" >> "$dir/webdataset.runs"
    rm -rf "$out"
    drop_fs
  done
  python3 - "$dir" "$n" "$lat" <<'EOF'
import glob, json, sys
rows = [json.loads(l) for f in glob.glob(sys.argv[1] + "/*.jsonl") for l in open(f) if l.strip()]
best = {}
for r in rows:
    if not r.get("timed_out") and r["img_per_s"] > best.get(r["peer"], {"img_per_s": 0})["img_per_s"]:
        best[r["peer"]] = r
runs = [line.split() for line in open(sys.argv[1] + "/webdataset.runs") if line.strip()]
ours = max(int(samples) / float(wall) for samples, wall in runs)
where = "every response delayed 50 ms" if sys.argv[3] == "1" else "loopback"
for peer, r in sorted(best.items()):
    if peer != "scrape":
        print(f"ratio N={sys.argv[2]} ({where}): scrape --format webdataset {ours:.1f} img/s "
              f"(best of {len(runs)}), {peer} {r['img_per_s']} img/s: {ours / r['img_per_s']:.2f}x")
EOF
  if [[ $started == 1 ]]; then "$SHARED_BENCH/serve.sh" stop >/dev/null; fi
}

if [[ $# -eq 0 ]]; then
  for scene in "2000 1" "20000 0"; do
    scenario $scene
    webdataset $scene "$RESULTS_ROOT/last"
  done
  exit 0
fi

N="$1"
scenario "$N" "${LAT:-0}"
webdataset "$N" "${LAT:-0}" "$RESULTS_ROOT/last"

# Resume figures, outside the harness (it deletes each output it scored): a full run, the same
# command again over its finished output, and a run killed half-way then finished by a rerun.
OUT="${OUT_ROOT:-/tmp/bench-out}/ours-resume"
URLS="/tmp/bench-data/n$N/urls.txt"
elapsed() { echo "$(date +%s.%N) - $1" | bc; }
"$SHARED_BENCH/serve.sh" start >/dev/null
# Stopped however the script ends: a server left running keeps the CPU lock's descriptor.
trap '"$SHARED_BENCH/serve.sh" stop >/dev/null 2>&1 || true' EXIT
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
