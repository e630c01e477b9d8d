#!/usr/bin/env bash
# Object-storage benchmark: `scrape download` of N images (files already on disk, served on
# loopback) into a local folder and into an S3-compatible bucket on loopback (moto's server,
# as the tests use it), in turn, REPEAT times each, beside a peer that only uploads the same
# files to the same server (boto3, 32 threads: the server's own ceiling, no download); prints
# images per second of each run and the ratios of the best runs.
#
#   bench/bucket.sh          # N=3,000
#   bench/bucket.sh N
#
# Env: BIN (default: a release build of this tree), REPEAT (default 3), FLAGS (extra flags of
# both runs, e.g. `--format webdataset`). Needs target/pyenv with moto (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-3000}"
REPEAT="${REPEAT:-3}"
FLAGS="${FLAGS:-}"
PYTHON="$(pwd)/target/pyenv/bin/python"
"$PYTHON" -c 'import moto.server, boto3' 2>/dev/null || { echo "no moto in target/pyenv: run scripts/setup.sh" >&2; exit 2; }
if [[ -z "${BIN:-}" ]]; then
  cargo build --release --locked --quiet
  BIN="$(pwd)/target/release/scrape"
fi
WORK="$(mktemp -d /tmp/bench-bucket-XXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

# Serves folder $1 on loopback; sets ORIGIN.
serve() {
  "$BIN" demo --serve --site "$1" 2> "$WORK/serve.log" &
  pids+=($!)
  for _ in $(seq 100); do
    ORIGIN="$(sed -n 's|^demo site at \(http://[^ ]*\)/ .*|\1|p' "$WORK/serve.log")"
    [[ -n "$ORIGIN" ]] && return 0
    sleep 0.1
  done
  echo "the site did not start: $(cat "$WORK/serve.log")" >&2
  exit 1
}
seconds() { python3 -c 'import sys,time,subprocess; t=time.monotonic(); r=subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(f"{time.monotonic()-t:.2f}") if r.returncode == 0 else sys.exit(f"{sys.argv[1:]} failed: exit {r.returncode}")' "$@"; }

# The corpus: N generated JPEGs, fetched once from the demo site into files, then served as
# files (the server does no work per image beyond reading it).
serve fixtures/demo-site
seq "$N" | sed "s|.*|$ORIGIN/img/bench-&-320x240.jpg|" > "$WORK/generate.txt"
"$BIN" download --urls "$WORK/generate.txt" --out "$WORK/corpus" --progress off -q
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
rm -rf "$WORK/corpus/.scrape" "$WORK/corpus/runs" "$WORK/corpus"/*.jsonl
serve "$WORK/corpus"
(cd "$WORK/corpus" && find . -type f | sed "s|^\.|$ORIGIN|") > "$WORK/urls.txt"

# The bucket's server, its keys on its first line.
coproc S3 { "$PYTHON" tests/s3_server.py serve images 2>/dev/null; }
pids+=($S3_PID)
read -r said <&"${S3[0]}"
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$said" "$1"; }
export AWS_ENDPOINT_URL="http://127.0.0.1:$(field port)" AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID="$(field key)" AWS_SECRET_ACCESS_KEY="$(field secret)"
export SCRAPE_STATE_HOME="$WORK/state"

# The peer: the corpus's files put with boto3 from 32 threads, nothing fetched.
peer() {
  "$PYTHON" - "$WORK/corpus" "peer-$1" <<'PY'
import concurrent.futures, os, sys, time, boto3
root, prefix = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
def put(path):
    with open(path, "rb") as body:
        s3.put_object(Bucket="images", Key=f"{prefix}/{os.path.relpath(path, root)}", Body=body.read(), IfNoneMatch="*")
started = time.monotonic()
with concurrent.futures.ThreadPoolExecutor(32) as pool:
    list(pool.map(put, files))
print(f"{time.monotonic() - started:.2f}")
PY
}

best_local=0 best_bucket=0 best_peer=0
for rep in $(seq "$REPEAT"); do
  # shellcheck disable=SC2086
  t_local=$(seconds "$BIN" download --urls "$WORK/urls.txt" --out "$WORK/local-$rep" --progress off $FLAGS)
  # shellcheck disable=SC2086
  t_bucket=$(seconds "$BIN" download --urls "$WORK/urls.txt" --out "s3://images/run-$rep" --progress off $FLAGS)
  rate_local=$(python3 -c "print(f'{$N/$t_local:.0f}')")
  rate_bucket=$(python3 -c "print(f'{$N/$t_bucket:.0f}')")
  t_peer=$(peer "$rep")
  rate_peer=$(python3 -c "print(f'{$N/$t_peer:.0f}')")
  echo "pass $rep: folder ${t_local} s (${rate_local} images/s), bucket ${t_bucket} s (${rate_bucket} images/s), boto3 puts alone ${t_peer} s (${rate_peer} images/s)"
  best_peer=$(python3 -c "print(max($best_peer, $rate_peer))")
  best_local=$(python3 -c "print(max($best_local, $rate_local))")
  best_bucket=$(python3 -c "print(max($best_bucket, $rate_bucket))")
done
echo "N=$N ${FLAGS:-files}: best folder $best_local images/s, best bucket $best_bucket images/s ($(python3 -c "print(f'{$best_bucket/$best_local:.2f}')")x the folder, $(python3 -c "print(f'{$best_bucket/$best_peer:.2f}')")x boto3's puts alone at $best_peer/s)"
