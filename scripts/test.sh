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
# Two workers (pytest-xdist), one test file each at a time, so a file's module fixtures (a demo log dir, one
# TensorBoard per loader) are made once; TEST_WORKERS=0 runs in this process, one test after another.
# A worker that dies (a segfault) is not replaced: its test is reported failed by name and the run ends,
# where xdist 3.8 under loadfile reruns that test on a replacement or hangs (pytest-dev/pytest-xdist#784).
# Tests marked quiet compare a projection with real BFC runs, whose op order (and so peak) moves when the
# machine is busy: they run after the rest, one at a time, alone, once the machine is idle
# (tests/support/quiet.py). An -m of your own selects in one run instead.
# pytest's exit 5 is "no test selected": fine for one phase (a path with no quiet test), not for both.
marks=(-m "not quiet")
for arg in "$@"; do
  case "$arg" in -m*) marks=() ;; esac
done
run_pytest() {
  local rc=0
  .venv/bin/python -m pytest "$@" || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
  return "$rc"
}
empty=0
run_pytest "${paths[@]}" -q -p no:cacheprovider --durations=25 "${marks[@]}" \
  -n "${TEST_WORKERS:-2}" --dist loadfile --max-worker-restart=0 "$@" || empty=$((empty + 1))
if [ ${#marks[@]} -gt 0 ]; then
  echo "== python tests that run alone (marked quiet)"
  .venv/bin/python -m tests.support.quiet || true  # a wait that fails must not end the run
  run_pytest "${paths[@]}" -q -p no:cacheprovider -m quiet "$@" -n 0 || empty=$((empty + 1))
  if [ "$empty" -eq 2 ]; then echo "no test selected"; exit 5; fi
elif [ "$empty" -eq 1 ]; then
  exit 5
fi
