#!/usr/bin/env bash
# Re-records the recordings of the site profiles (fixtures/<profile>/site.har) from the bundled
# fixture sites and rewrites their expected files (fixtures/<profile>/expected.jsonl).
#
#     scripts/record-fixtures.sh            # every profile
#     scripts/record-fixtures.sh spa api    # these only
#
# The sites are served by `scrape demo --serve` on the profiles' own port (127.0.0.1:8080), so
# the recorded URLs are the profiles' start URLs; the port must be free. Browser profiles need
# Chromium. Review `git diff fixtures/` before committing: a changed expected file is a changed
# extraction.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --quiet
bin=target/debug/scrape
port=8080

# record PROFILE SITE_FOLDER PAGES
record() {
    local name=$1 site=$2 pages=$3
    local log
    log=$(mktemp)
    "$bin" demo --serve --site "$site" --profile "site-profiles/$name.toml" --progress off 2>"$log" &
    local server=$!
    for _ in $(seq 1 100); do
        grep -q "demo site at" "$log" && break
        sleep 0.1
    done
    if ! grep -q "demo site at http://127.0.0.1:$port/" "$log"; then
        cat "$log" >&2
        kill "$server" 2>/dev/null || true
        echo "error: port $port is not free; stop what uses it and run again" >&2
        exit 2
    fi
    "$bin" record --profile "site-profiles/$name.toml" --out "fixtures/$name" --pages "$pages"
    kill -INT "$server"
    wait "$server" || true
    rm -f "$log"
    "$bin" test "site-profiles/$name.toml" --update
}

# The demo API's login wants this secret; the recording keeps it and the tokens `[redacted]`.
export PHOTOS_SECRET=demo-secret

# NAME SITE_FOLDER PAGES
profiles=(
    "demo fixtures/demo-site 10"
    "infinite fixtures/js-sites 1"
    "backgrounds fixtures/js-sites 1"
    "spa fixtures/js-sites 1"
    "api fixtures/js-sites 3"
)
wanted=("$@")
known=" ${profiles[*]} "
for name in "${wanted[@]}"; do
    if [[ $known != *" $name "* ]]; then
        echo "error: no fixture site for profile \`$name\` (known: demo infinite backgrounds spa api)" >&2
        exit 2
    fi
done
for entry in "${profiles[@]}"; do
    read -r name site pages <<<"$entry"
    if [[ ${#wanted[@]} -eq 0 || " ${wanted[*]} " == *" $name "* ]]; then
        record "$name" "$site" "$pages"
    fi
done
