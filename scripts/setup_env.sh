#!/usr/bin/env bash
# Installs everything tb_modelmem needs into ./.venv: Debian chromium (for browser tests),
# the frontend's npm packages and bundle, and the Python package with its test extras.
# Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

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

echo "== building the frontend (frontend/ -> tb_modelmem/static/index.js)"
(cd frontend && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent)

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  python3 -m venv .venv
fi
echo "== installing tb_modelmem and its dependencies into .venv"
.venv/bin/python -m pip install -q --upgrade pip
# torch's CPU build first (the tests run Keras 3 on torch): a plain "torch" from PyPI is a CUDA build of several GB
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[test]"
