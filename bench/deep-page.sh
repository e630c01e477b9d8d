#!/usr/bin/env bash
# Deep-page benchmark: `scrape probe` on a page of DEPTH nested <div>s with an image at the
# bottom (a shape that once made the HTML parse quadratic: 100 s for 200,000), beside Python's
# own html.parser reading the same file, and the same page at a quarter of the depth: prints the
# seconds of each and two ratios, scrape against Python, and scrape at DEPTH against DEPTH/4
# (about 4 when the analysis is linear, 16 when it is quadratic).
#
#   bench/deep-page.sh            # DEPTH=200,000
#   bench/deep-page.sh DEPTH
#
# Env: BIN (default: a release build of this tree).
set -euo pipefail
cd "$(dirname "$0")/.."
DEPTH="${1:-200000}"
if [[ -z "${BIN:-}" ]]; then
  cargo build --release --locked --quiet
  BIN="$(pwd)/target/release/scrape"
fi
WORK="$(mktemp -d /tmp/bench-deep-XXXX)"
trap 'rm -rf "$WORK"' EXIT
printf 'name = "deep"\nstart = ["http://x.test/"]\n\n[[images]]\nselector = ".gallery figure img"\n' \
  > "$WORK/deep.toml"
page() {
  python3 -c "import sys; d=int(sys.argv[1]); print('<html><body><div class=gallery><figure>' \
+ '<div>'*d + '<img src=/deep.jpg>' + '</div>'*d + '</figure></div></body></html>')" "$1" > "$2"
}
seconds() { python3 -c 'import sys,time,subprocess; t=time.monotonic(); subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(f"{time.monotonic()-t:.2f}")' "$@"; }
page "$DEPTH" "$WORK/deep.html"
page "$((DEPTH / 4))" "$WORK/quarter.html"
"$BIN" probe --profile "$WORK/deep.toml" --url http://x.test/ --html "$WORK/deep.html" 2>/dev/null \
  | grep -q 'http://x.test/deep.jpg' || { echo "scrape did not find the image" >&2; exit 1; }
ours=$(seconds "$BIN" probe --profile "$WORK/deep.toml" --url http://x.test/ --html "$WORK/deep.html")
quarter=$(seconds "$BIN" probe --profile "$WORK/deep.toml" --url http://x.test/ --html "$WORK/quarter.html")
peer=$(seconds python3 -c 'import sys
from html.parser import HTMLParser
HTMLParser().feed(open(sys.argv[1]).read())' "$WORK/deep.html")
echo "depth $DEPTH: scrape probe ${ours} s, python html.parser ${peer} s ($(python3 -c "print(f'{$ours/$peer:.2f}')")x); depth $((DEPTH / 4)): scrape ${quarter} s (deep/quarter $(python3 -c "print(f'{$ours/max($quarter,0.01):.1f}')")x)"
