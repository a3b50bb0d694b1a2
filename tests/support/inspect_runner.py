"""``tb-modelmem inspect`` in a fresh process under an address-space limit and a timeout, reporting its
own peak RSS: what the crafted-file tests run each case through."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Dict, Tuple

from tests.support.paths import REPO

ADDRESS_SPACE = 1 << 30  # RLIMIT_AS of each run: inspect of a real 300 MB ResNet50 .keras peaks at ~50 MB RSS
TIMEOUT_S = 30  # the run is killed past this

# The CLI under its limits, reporting its own peak RSS (VmHWM of its process image: getrusage
# in the parent would also count the pytest process the child was forked from) on fd REPORT.
LAUNCHER = """
import os, resource, sys
report, limit = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
from tb_modelmem import cli
try:
    code = cli.main(sys.argv[3:])
finally:
    with open("/proc/self/status") as f:
        os.write(report, next(l for l in f if l.startswith("VmHWM")).split()[1].encode())
sys.exit(code)
"""


def run_inspect(path: str, *args: str) -> Tuple[int, str, str, float, int]:
    """(exit code, stdout, stderr, seconds, peak RSS bytes) of ``tb-modelmem inspect path [args]`` in a
    fresh process limited to ADDRESS_SPACE and killed after TIMEOUT_S."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
    read_end, write_end = os.pipe()
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(write_end), str(ADDRESS_SPACE), "inspect", path,
                             *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            pass_fds=(write_end,))
    os.close(write_end)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    seconds = time.monotonic() - start
    with os.fdopen(read_end, "rb") as report:
        peak_kib = report.read()
    return proc.returncode, out.decode(), err.decode(), seconds, int(peak_kib or 0) * 1024


def report_worst(measured: Dict[str, Tuple[float, int]], what: str) -> Tuple[float, int]:
    """Writes the worst time and peak RSS of ``measured`` ({case: (seconds, RSS bytes)}) and the five
    slowest and largest cases to stderr; returns (worst seconds, worst RSS)."""
    worst_time = max(measured.items(), key=lambda kv: kv[1][0])
    worst_rss = max(measured.items(), key=lambda kv: kv[1][1])
    sys.stderr.write(f"\n{what}, {len(measured)} runs: worst time {worst_time[1][0]:.2f} s ({worst_time[0]}), "
                     f"worst peak RSS {worst_rss[1][1] / 2**20:.0f} MiB ({worst_rss[0]})\n")
    slowest = sorted(measured, key=lambda n: -measured[n][0])[:5]
    largest = sorted(measured, key=lambda n: -measured[n][1])[:5]
    for name in dict.fromkeys(slowest + largest):
        seconds, rss = measured[name]
        sys.stderr.write(f"  {name:<48}{seconds:6.2f} s {rss / 2**20:6.0f} MiB\n")
    return worst_time[1][0], worst_rss[1][1]
