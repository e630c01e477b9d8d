#!/usr/bin/env bash
# What scrolling costs: pages/s of `scrape crawl` with `render = "browser"` and `scroll = 20`
# (every other setting the default: 2 tabs on 2 cores, settle 2 s) on two kinds of page, and
# the images each finds:
#   lazy    a long page of 40 images whose URLs an IntersectionObserver sets as each enters the
#           view (only a page scrolled a screen at a time shows them all)
#   static  a short page of 10 plain images and no script (nothing to wait for)
# N pages of each (distinct query strings, start URLs of one profile), served on loopback by
# Python's http.server; images are never fetched (the browser stubs them).
#
#   bench/scroll.sh [N]          (default 20)
#
# Env: SCRAPE_BIN (default: `cargo build --release`, target/release/scrape); OTHER_BIN, a second
# binary (an older build, say) run after each run of SCRAPE_BIN on the same pages, for a
# before/after comparison in one run; REPEAT (default 2) rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
N="${1:-20}"
REPEAT="${REPEAT:-2}"
if [[ -z "${SCRAPE_BIN:-}" ]]; then
  cargo build --release --locked --quiet
  SCRAPE_BIN=target/release/scrape
fi
WORK="$(mktemp -d /tmp/scrape-bench-scroll.XXXXXX)"
server=""
cleanup() { [[ -n "$server" ]] && kill "$server" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

mkdir -p "$WORK/site"
cat > "$WORK/site/lazy.html" <<'EOF'
<!doctype html><html><head><style>img{display:block;width:200px;height:260px;margin:8px}</style></head>
<body><div id="g"></div><script>
const io = new IntersectionObserver(es => es.forEach(e => {
  if (e.isIntersecting) { e.target.src = '/img/io-' + e.target.dataset.i + '.jpg'; io.unobserve(e.target); }
}));
for (let i = 0; i < 40; i++) { const im = document.createElement('img'); im.dataset.i = i; document.getElementById('g').appendChild(im); io.observe(im); }
</script></body></html>
EOF
{
  echo '<!doctype html><html><body><div id="g">'
  for i in $(seq 10); do echo "<img src=\"/img/static-$i.jpg\">"; done
  echo '</div></body></html>'
} > "$WORK/site/static.html"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$WORK/site" >/dev/null 2>&1 &
server=$!
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$port/static.html" && break; sleep 0.1; done

# profile KIND: N start URLs of KIND.html.
profile() {
  local starts
  starts="$(for i in $(seq "$N"); do printf '"http://127.0.0.1:%s/%s.html?%s",' "$port" "$1" "$i"; done)"
  printf 'name = "scroll-%s"\nstart = [%s]\nrender = "browser"\n[browser]\nscroll = 20\n[[images]]\nselector = "#g img"\n' \
    "$1" "${starts%,}" > "$WORK/$1.toml"
}
profile lazy
profile static

printf '%-8s %-7s %6s %9s %8s %8s\n' binary page pages seconds pages/s images
run() { # BIN LABEL KIND
  local out="$WORK/out-$2-$3" start end images
  rm -rf "$out"
  start=$(date +%s.%N)
  "$1" crawl --profile "$WORK/$3.toml" --out "$out" --progress off -q
  end=$(date +%s.%N)
  images=$("$1" urls --out "$out" --state all | wc -l)
  awk -v b="$2" -v k="$3" -v n="$N" -v s="$start" -v e="$end" -v i="$images" \
    'BEGIN { printf "%-8s %-7s %6d %9.2f %8.2f %8d\n", b, k, n, e - s, n / (e - s), i }'
}
for _ in $(seq "$REPEAT"); do
  for kind in lazy static; do
    run "$SCRAPE_BIN" this "$kind"
    [[ -n "${OTHER_BIN:-}" ]] && run "$OTHER_BIN" other "$kind"
  done
done
