"""Whether the machine is idle: waited for before the tests marked ``quiet`` (scripts/test.sh), and measured
over each of their real runs.

Those tests compare What if with real runs on TensorFlow's BFC allocator, whose executor takes another order,
and peaks elsewhere, while other processes run (LeNet's batch-32 trace read 80.5-87.0 MB beside two busy
processes, 87.3 on an idle machine). Processes left over from the parallel phase (a TensorBoard or a browser
being torn down, a worker's children) made the first traces of the quiet phase take that order. This reads
``/proc/stat`` once a second until the machine has been idle for a few seconds running, and says what it
waited for; past its time limit it names the busiest processes and goes on. ``others_busy`` says how much of
a core other processes took while a child process ran, so that a run made beside them can be made again.

    python -m tests.support.quiet [--limit SECONDS]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, Optional, Sequence, Tuple

# Busy below this share of one core, summed over every core, counts as idle.
IDLE_CORE_SHARE = 0.15
IDLE_SECONDS_RUNNING = 5


def _cpu_times() -> Optional[Tuple[int, int]]:
    """(busy, total) jiffies over every core since boot: user, nice, system, irq and softirq busy; idle and
    iowait not; steal (a hypervisor's other guests) left out, and guest time, already in user, not counted
    twice. None where ``/proc/stat`` cannot be read (not Linux)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(value) for value in f.readline().split()[1:8]]
    except (OSError, ValueError):
        return None
    fields += [0] * (7 - len(fields))
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
    return busy, busy + fields[3] + fields[4]


class others_busy:
    """A context: ``cores`` is the share of a core that processes other than this one and its waited-for
    children took over the block (the machine's busy time less the children's CPU time, over the wall time)."""

    def __enter__(self) -> "others_busy":
        self.cores = 0.0  # stays 0 where /proc/stat cannot be read
        self._start = (time.monotonic(), _cpu_times(), _children_cpu_s())
        return self

    def __exit__(self, *exc: object) -> None:
        wall, before, children = self._start
        after = _cpu_times()
        if before is None or after is None:
            return
        busy_s = (after[0] - before[0]) / os.sysconf("SC_CLK_TCK")
        self.cores = max(busy_s - (_children_cpu_s() - children), 0.0) / max(time.monotonic() - wall, 1e-3)


# A real run beside other processes taking this much of a core is made again, up to BUSY_RETAKES times
# (``run_alone``): a busy machine moves TensorFlow's executor order and so its BFC peak. CI's quiet phase twice
# began with LeNet traces 13-16% low, while its later real runs of every setting agreed.
BUSY_CORES = 0.25
BUSY_RETAKES = 3


def run_alone(args: Sequence[str], truth: str, clear: str, **run: Any) -> Dict[str, Any]:
    """``subprocess.run(args, **run)`` of a real run that writes its ground truth to ``truth``, made again
    (``clear`` removed first) while other processes took ``BUSY_CORES`` or more beside it, up to
    ``BUSY_RETAKES`` times; where every attempt was busy, the quietest one's ``clear`` and ``truth`` are
    kept. The truth read back, with ``others_busy_cores`` (of the attempt kept) and ``attempts`` (how many
    were made) added, and written."""
    clear = os.path.normpath(clear)
    kept = f"{clear}.quietest"  # the quietest busy attempt so far: its folder and its truth, beside ``clear``
    quietest = float("inf")
    for attempt in range(1, BUSY_RETAKES + 2):
        shutil.rmtree(clear, ignore_errors=True)
        with others_busy() as beside:
            result = subprocess.run(list(args), capture_output=True, text=True, **run)
        assert result.returncode == 0, result.stderr[-3000:]
        if beside.cores < BUSY_CORES:
            quietest = beside.cores
            break
        if beside.cores < quietest:
            quietest = beside.cores
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(clear, kept)
            shutil.copyfile(truth, kept + ".json")
    else:
        shutil.rmtree(clear, ignore_errors=True)
        shutil.copytree(kept, clear)
        shutil.copyfile(kept + ".json", truth)
    shutil.rmtree(kept, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        os.remove(kept + ".json")
    with open(truth) as f:
        said = dict(json.load(f), others_busy_cores=round(quietest, 2), attempts=attempt)
    with open(truth, "w") as f:
        json.dump(said, f)
    return said


def _children_cpu_s() -> float:
    times = os.times()
    return times.children_user + times.children_system


def _busiest_processes() -> str:
    """The five busiest processes as ``ps`` lists them (its own columns), for the log."""
    try:
        listing = subprocess.run(["ps", "-eo", "pid,pcpu,etime,args", "--sort=-pcpu"], capture_output=True,
                                 text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return f"(ps failed: {error})"
    return "\n".join(line[:160] for line in listing.splitlines()[:6])


def wait_until_quiet(limit_s: float) -> bool:
    """True once the machine was idle ``IDLE_SECONDS_RUNNING`` seconds running; False after ``limit_s``."""
    cores = os.cpu_count() or 1
    started = time.monotonic()
    before = _cpu_times()
    idle_run = 0
    while idle_run < IDLE_SECONDS_RUNNING and before is not None:
        if not time.monotonic() - started <= limit_s:
            return False
        time.sleep(1)
        after = _cpu_times()
        if after is None:
            break
        share = cores * (after[0] - before[0]) / max(after[1] - before[1], 1)  # in cores
        before = after
        idle_run = idle_run + 1 if share < IDLE_CORE_SHARE else 0
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=180.0, help="seconds to wait at most (default 180)")
    args = parser.parse_args()
    if _cpu_times() is None:
        print("no /proc/stat to read: not waited for an idle machine")
        return 0
    started = time.monotonic()
    busiest_at_start = _busiest_processes()
    if wait_until_quiet(args.limit):
        waited = time.monotonic() - started
        print(f"machine idle after {waited:.0f} s")
        if waited > IDLE_SECONDS_RUNNING + 2:
            print(f"busiest processes when the wait began:\n{busiest_at_start}")
    else:
        print(f"machine still busy after {args.limit:.0f} s; going on. Busiest processes:\n{_busiest_processes()}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
