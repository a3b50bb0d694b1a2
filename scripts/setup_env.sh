#!/usr/bin/env bash
# Installs everything tb_modelmem needs into ./.venv: Debian chromium (for browser tests),
# the frontend's npm packages and bundle, and the Python package with its test extras.
# Safe to run again: it only does what is missing. Stamps (a sha256 of what each step read) say what
# is done: npm ci when node_modules is missing or package-lock.json changed since the last install; the
# bundle when frontend sources changed or it is missing; pip install -e when the venv lacks the package
# or setup.py changed. FORCE=1 redoes every step.
set -euo pipefail
cd "$(dirname "$0")/.."

# sha256 of the named files' contents and paths, in a fixed order
digest() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }
stamp_matches() { [ "${FORCE:-0}" != 1 ] && [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ "${WITH_BROWSER:-1}" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  echo "== installing Debian chromium (browser tests)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium >/dev/null
fi
command -v npm >/dev/null || {
  echo "== installing Node.js and npm (frontend build)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq nodejs npm >/dev/null
}

NPM_STAMP=frontend/node_modules/.tb_modelmem_lock_sha256
lock_hash=$(digest frontend/package-lock.json)
if stamp_matches "$NPM_STAMP" "$lock_hash"; then
  echo "== frontend packages: up to date (package-lock.json unchanged)"
else
  echo "== installing the frontend's npm packages (npm ci)"
  (cd frontend && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock_hash" > "$NPM_STAMP"
fi
# everything the bundle is built from (node_modules is covered by the lock stamp above)
BUNDLE_STAMP=frontend/node_modules/.tb_modelmem_bundle_sha256
mapfile -t sources < <(find frontend -path frontend/node_modules -prune -o -type f -print | LC_ALL=C sort)
bundle_hash=$(digest "${sources[@]}")
if [ -f tb_modelmem/static/index.js ] && stamp_matches "$BUNDLE_STAMP" "$bundle_hash"; then
  echo "== frontend bundle: up to date (frontend/ unchanged)"
else
  echo "== building the frontend (frontend/ -> tb_modelmem/static/index.js)"
  (cd frontend && npm run build --silent)
  echo "$bundle_hash" > "$BUNDLE_STAMP"
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  python3 -m venv .venv
fi
# torch's CPU build first (the tests run Keras 3 on torch): a plain "torch" from PyPI is a CUDA build of several GB
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "== installing torch (CPU) into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==2.13.0"
fi
PIP_STAMP=.venv/.tb_modelmem_setup_sha256
setup_hash=$(digest setup.py)
if stamp_matches "$PIP_STAMP" "$setup_hash" && .venv/bin/python -m pip show -q tb_modelmem >/dev/null 2>&1; then
  echo "== tb_modelmem in .venv: up to date (setup.py unchanged)"
else
  echo "== installing tb_modelmem and its dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[test]"
  echo "$setup_hash" > "$PIP_STAMP"
fi
