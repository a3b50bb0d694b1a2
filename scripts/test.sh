#!/usr/bin/env bash
# The whole test suite: lint (ruff, mypy), frontend unit tests (node --test) and pytest (unit, plugin,
# real tensorboard processes, real Chromium). Sets up everything it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export TF_CPP_MIN_LOG_LEVEL=2
echo "== lint: ruff (pyflakes, imports, pycodestyle) and mypy"
.venv/bin/ruff check .
.venv/bin/mypy
echo "== frontend unit tests"
(cd frontend && npm test --silent)
echo "== python tests"
.venv/bin/python -m pytest tests -q -p no:cacheprovider "$@"
