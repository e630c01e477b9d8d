# Sourced by the other scripts: checks for (and installs, as root on Debian) what scrape needs
# beyond the Rust toolchain.
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo not found; install the Rust toolchain (https://rustup.rs) first" >&2
  exit 2
fi
need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${need_apt[*]} ..." >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "error: missing ${need_apt[*]}; install them with your package manager" >&2
    exit 2
  fi
fi
# The browser for rendering JavaScript sites (and its tests): Debian's Chromium, never a download.
if [ ! -x /usr/bin/chromium ] && [ -z "${SCRAPE_CHROMIUM:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium ..." >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "warning: no /usr/bin/chromium; browser tests will be skipped (install the chromium package or set SCRAPE_CHROMIUM)" >&2
  fi
fi
# The Redis the `scrape worker` tests (and scripts/cluster-demo.sh) start on loopback: Debian's
# redis-server.
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing redis-server ..." >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  else
    echo "warning: no redis-server; the worker tests will be skipped (install the redis-server package)" >&2
  fi
fi
# In a virtual environment of the checkout (target/pyenv), made once, from PyPI: the reader the
# WebDataset tests load shards back with, as a dataset's user does (`webdataset`), and the
# S3-compatible server the object-storage tests put images into (moto's, with boto3 to read
# the bucket back).
pyenv_dir="$(pwd)/target/pyenv"
if ! "$pyenv_dir/bin/python" -c 'import webdataset, moto.server, flask_cors, boto3' >/dev/null 2>&1; then
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "installing python3-venv ..." >&2
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    fi
  fi
  if python3 -m venv "$pyenv_dir" >/dev/null 2>&1 && "$pyenv_dir/bin/pip" install -q webdataset 'moto[s3]==5.*' flask flask-cors >/dev/null 2>&1; then
    :
  else
    echo "warning: could not install the webdataset and moto Python packages into $pyenv_dir; the WebDataset read-back and object-storage tests will fail" >&2
  fi
fi
