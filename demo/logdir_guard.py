"""The demo writes only where it cannot destroy anything it did not write.

``prepare(logdir)`` accepts a folder that does not exist, an empty folder, or one a previous demo wrote
(it holds the marker file ``MARKER`` and nothing but the demo's own runs). A previous demo's runs are
removed, one known name at a time, so that the new runs do not mix with the old ones; anything else is
refused with a message that says what to do. Standard library only: ``demo/run.sh`` runs it with the
system's python3 before it installs anything.

    python3 demo/logdir_guard.py DIR     # exit 0: DIR is ready for the demo; 2: refused (why on stderr)
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Optional

MARKER = ".tb_modelmem_demo"
# Every name demo/make_logdir.py writes at the top of its log dir (the marker aside).
DEMO_RUNS = ("convnet_adam", "convnet_sgd", "tf1_convnet_adam", "lenet_trace", "lenet_peak", "seed004_kept",
             "seed004_cleared", "torch_loop", "gpt2_trainer", "flax_nnx", "loadbench", "model_file")


def prepare(logdir: str) -> Optional[str]:
    """Make ``logdir`` ready for a fresh demo; None when it is, else the reason it is refused (nothing touched)."""
    shown = os.path.abspath(logdir)
    if os.path.lexists(logdir) and not os.path.isdir(logdir):
        return f"{shown} exists and is not a folder. Pass --logdir a new folder, e.g. --logdir demo_logs"
    entries = sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []
    if entries and MARKER not in entries:
        return (f"{shown} already holds files the demo did not write ({_some(entries)}); the demo writes only "
                "into a new or empty folder, or one an earlier demo wrote. Nothing was changed. Pass --logdir a "
                "new folder (e.g. --logdir demo_logs_new), or move those files away first.")
    foreign = [e for e in entries if e != MARKER and e not in DEMO_RUNS]
    if foreign:
        return (f"{shown} was written by an earlier demo, but it now also holds {_some(foreign)}, which the demo "
                "did not write. Nothing was changed. Pass --logdir a new folder, or move those files away first.")
    for entry in entries:  # an earlier demo's runs, by their known names; a link is removed, never followed
        path = os.path.join(logdir, entry)
        if entry == MARKER:
            continue
        if os.path.islink(path) or not os.path.isdir(path):
            os.unlink(path)
        else:
            shutil.rmtree(path)
    os.makedirs(logdir, exist_ok=True)
    with open(os.path.join(logdir, MARKER), "w", encoding="utf-8") as f:
        f.write("Written by tb_modelmem's demo (demo/make_logdir.py). A later demo run may delete this folder's "
                "demo runs; it refuses a folder holding anything else.\n")
    return None


def _some(entries: list) -> str:
    shown = ", ".join(repr(e) for e in entries[:3])
    return shown + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")


def main(argv: list) -> int:
    if len(argv) != 1:
        print("usage: python3 demo/logdir_guard.py LOGDIR", file=sys.stderr)
        return 2
    refused = prepare(argv[0])
    if refused:
        print(f"demo: {refused}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
