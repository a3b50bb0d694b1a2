#!/usr/bin/env bash
# The demo in one command: install, train the docs/USER_PROBLEMS.md models into a log dir,
# and start TensorBoard with the Model Memory tab.
#   bash demo/run.sh [--port 6006] [--logdir demo_logs] [--loadbench none]
# The log dir must be new, empty, or one an earlier demo wrote (it holds demo/logdir_guard.py's
# marker file): anything else is refused before anything is installed, and nothing is deleted.
set -euo pipefail
cd "$(dirname "$0")/.."
port=6006; logdir=demo_logs; extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=${2:?--port needs a number}; shift 2 ;;
    --logdir) logdir=${2:?--logdir needs a folder}; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; echo "Other options go to demo/make_logdir.py (see: .venv/bin/python demo/make_logdir.py --help)."; exit 0 ;;
    *) extra+=("$1"); shift ;;
  esac
done
python3 demo/logdir_guard.py "$logdir" || exit 2
WITH_BROWSER=0 bash scripts/setup_env.sh
export TF_CPP_MIN_LOG_LEVEL=2
.venv/bin/python demo/make_logdir.py --logdir "$logdir" ${extra[@]+"${extra[@]}"}
echo
echo "== Model Memory tab: http://localhost:${port}/#modelmem   (Ctrl+C to stop)"
exec .venv/bin/tensorboard --logdir "$logdir" --port "$port" --samples_per_plugin modelmem=0
