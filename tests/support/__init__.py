"""What the tests share: harnesses, fixtures that make traces and profiles, and the worker scripts
they run in a fresh process (``python -m tests.support.<worker>``)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_worker(module: str, *args: str, timeout: float = 600) -> str:
    """``python -m <module> <args>`` from the repository root, in a fresh process; its stdout. A failure
    names the worker and ends with its stderr's tail."""
    done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)
    assert done.returncode == 0, f"{module} exited {done.returncode}: {done.stderr[-4000:]}"
    return done.stdout
