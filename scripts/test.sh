#!/usr/bin/env bash
# The whole test suite: lint (ruff, mypy), frontend unit tests (node --test) and pytest (tests/unit,
# tests/integration, tests/e2e). Sets up what is missing first. Extra arguments go to pytest; a path
# among them runs only that (`bash scripts/test.sh tests/unit`: the unit tier).
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
# Arguments go to pytest; one naming a path (tests/unit, tests/integration/test_oom.py::test_x) replaces
# the default "tests", so `bash scripts/test.sh tests/unit` runs the unit tier alone.
paths=(tests)
for arg in "$@"; do
  if [ -e "${arg%%::*}" ]; then paths=(); break; fi
done
.venv/bin/python -m pytest "${paths[@]}" -q -p no:cacheprovider --durations=25 "$@"
