"""The seed-004 loops of demo/growth_loops.py, each in a fresh process, run once per pytest session: the
integration tier reads them through the plugin, the e2e tier in Chromium (tests/conftest.py ``growth_loop``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, Tuple

from tests.support.paths import REPO


def run(mode: str, base: str) -> Tuple[str, Dict[str, Any]]:
    """(log dir, TRUTH.json) of one loop: gc counts and the model's own variables, taken without tb_modelmem."""
    logdir, out = os.path.join(base, "logs"), os.path.join(base, "truth.json")
    result = subprocess.run([sys.executable, "-m", "demo.growth_loops", mode, logdir, out], cwd=REPO,
                            capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out) as f:
        return logdir, json.load(f)
