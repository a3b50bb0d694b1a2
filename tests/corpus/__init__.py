"""A corpus of public training scripts run the way users run them, with ground truth.

``tests/corpus/scripts/`` holds one script per public source (see SOURCES.md);
``python -m tests.corpus.harness NAME --logdir DIR --out RESULT.json [--mode modelmem|plain]``
runs one in a fresh process and writes RESULT.json (README.md describes it).

From tests::

    from tests.corpus import make_logdir, run

    logdir = make_logdir("mnist_convnet", "plain", tmp_path)   # the log dir the run wrote
    result = run("mnist_convnet", "modelmem", tmp_path)         # RESULT.json as a dict

Each (name, mode) runs once per test process: later calls return the first run's
result and log dir, wherever its ``tmp_path`` was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

REPO = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = Path(__file__).resolve().parent / "scripts"

# name -> kind: "fit" (keras Model.fit), "custom_loop" (GradientTape loop), "tf1" (TF1 session).
SCRIPTS: Dict[str, str] = {
    "mnist_convnet": "fit",
    "text_classification_with_transformer": "fit",
    "bidirectional_lstm_imdb": "fit",
    "siamese_contrastive": "fit",
    "dcgan_overriding_train_step": "fit",
    "quickstart_advanced": "custom_loop",
    "dcgan_tutorial": "custom_loop",
    "mnist_with_summaries": "tf1",
    "cnn_tutorial": "fit",
}
MODES = ("modelmem", "plain")
RUN = "train"  # the run (log dir subfolder) every kind writes its training summaries to
TIMEOUT_S = 600

_cache: Dict[Tuple[str, str, bool, bool], Dict[str, Any]] = {}


def script_path(name: str) -> Path:
    if name not in SCRIPTS:
        raise KeyError(f"no corpus script {name!r}; known: {', '.join(SCRIPTS)}")
    return SCRIPTS_DIR / f"{name}.py"


def run(name: str, mode: str = "modelmem", tmp_path: Any = None, jit_compile: bool = False,
        mixed_precision: bool = False, again: bool = False) -> Dict[str, Any]:
    """Run the harness for ``name`` in ``mode`` in a subprocess (once per process) and return
    its RESULT.json as a dict. Files go to ``tmp_path/<name>-<mode>/``: ``logs/`` (the log
    dir), ``result.json``, ``result_artifacts/`` (the script's working directory ``cwd/``,
    RunMetadata copies) and the process's ``stdout.txt`` / ``stderr.txt``. ``jit_compile``:
    its Keras models are compiled with ``jit_compile=True`` (harness ``--jit-compile``);
    ``mixed_precision``: Keras' global policy is ``mixed_float16`` (harness ``--mixed-precision``); ``again``:
    run it anew into ``tmp_path`` (a run whose premise a busy machine's timing missed)."""
    script_path(name)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    key = (name, mode, jit_compile, mixed_precision)
    if again:
        _cache.pop(key, None)
    if key not in _cache:
        if tmp_path is None:
            raise ValueError("tmp_path is needed for the first run of a (name, mode)")
        base = Path(tmp_path) / f"{name}-{mode}{'-xla' if jit_compile else ''}{'-mp' if mixed_precision else ''}"
        base.mkdir(parents=True, exist_ok=True)
        logdir, out = base / "logs", base / "result.json"
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", MPLBACKEND="Agg", PYTHONHASHSEED="0")
        env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
        with open(base / "stdout.txt", "wb") as stdout, open(base / "stderr.txt", "wb") as stderr:
            proc = subprocess.run(
                [sys.executable, "-m", "tests.corpus.harness", name, "--logdir", str(logdir), "--out", str(out),
                 "--mode", mode] + (["--jit-compile"] if jit_compile else [])
                + (["--mixed-precision"] if mixed_precision else []),
                cwd=str(REPO), env=env, stdout=stdout, stderr=stderr, timeout=TIMEOUT_S)
        if proc.returncode != 0 or not out.exists():
            tail = (base / "stderr.txt").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"corpus harness for {name} ({mode}) exited {proc.returncode}:\n{tail}")
        _cache[key] = load(out)
    return _cache[key]


def make_logdir(name: str, mode: str, tmp_path: Any, jit_compile: bool = False,
                mixed_precision: bool = False) -> str:
    """The log dir of ``name`` run in ``mode`` ("modelmem" or "plain"): built on first use."""
    return run(name, mode, tmp_path, jit_compile, mixed_precision)["logdir"]


def load(result_path: Any) -> Dict[str, Any]:
    """A RESULT.json written by the harness."""
    with open(result_path) as f:
        return json.load(f)
