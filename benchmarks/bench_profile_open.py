"""Opening a 20 MB and a 200 MB ``.xplane.pb`` in the tab, against a bare protobuf parse (issue 8).

A real TF2 profile of two LeNet training steps is grown to each size by repeating its events
(tests/support/profile_fixtures.big_xplane), put in a log dir as ``<run>/plugins/profile/<session>/host0.xplane.pb``
as the TF2 profiler lays it out, and opened through a real ``tensorboard`` process:

  first   /ops   from the request to the answer (202 "reducing" polled as the tab polls it)
  cached  /ops   the same request again
  RSS            TensorBoard's peak RSS growth while reducing, and after

against the bare parse of the same file (read + ``XSpace.FromString``): its time in this
process, its peak RSS growth in a fresh subprocess. Ratios: first and cached open / bare parse.

    python -m benchmarks.bench_profile_open [--sizes-mb 20 200]
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import psutil

from benchmarks.timing import median_seconds
from tb_modelmem import proto
from tests.support import profile_fixtures, trace_fixtures
from tests.support.tensorboard_process import TensorBoardProcess

# RSS held by the file's bytes and the parsed XSpace, both alive (what a parse needs at once).
_BARE_PARSE_RSS = r"""
import sys, psutil
from tb_modelmem import proto
before = psutil.Process().memory_info().rss
with open(sys.argv[1], "rb") as f:
    data = f.read()
space = proto.XSpace.FromString(data)
print(psutil.Process().memory_info().rss - before)
"""


def lenet_profile(folder: str) -> str:
    """The .xplane.pb of two profiled LeNet training steps (batch 32)."""
    import tensorflow as tf

    training = trace_fixtures.lenet_train_step(trace_fixtures.lenet_keras(), batch_size=32)
    tf.profiler.experimental.start(folder)
    for _ in range(2):
        training.step(*training.batch)
    tf.profiler.experimental.stop()
    (path,) = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
    return path


def bare_parse(path: str) -> tuple:
    def parse() -> None:
        with open(path, "rb") as f:
            proto.XSpace.FromString(f.read())

    seconds = median_seconds(parse, 3)
    rss = subprocess.run([sys.executable, "-c", _BARE_PARSE_RSS, path], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return seconds, int(rss.stdout.split()[-1])


def tab_open(logdir: str, run: str) -> tuple:
    """(first seconds, cached seconds, peak RSS growth, RSS growth after) of /ops of the run's profile."""
    with TensorBoardProcess(logdir, load_fast=False) as tb:
        tb.wait_for_tab()
        tag = next(t["tag"] for r in tb.get("/data/plugin/modelmem/runs")["runs"] for t in r["tags"] if r["run"] == run)
        process = psutil.Process(tb.pid)
        before = process.memory_info().rss
        peak = [before]
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], process.memory_info().rss)
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.perf_counter()
        status, body = tb.answer("/ops", run=run, tag=tag)
        first = time.perf_counter() - started
        done.set()
        watcher.join()
        assert status == 200, body[:300]
        cached = median_seconds(lambda: tb.answer("/ops", run=run, tag=tag), 5)
        return first, cached, peak[0] - before, process.memory_info().rss - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[20, 200])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        source = lenet_profile(os.path.join(root, "profile"))
        print(f"LeNet profile {os.path.getsize(source):,} B, grown by repeating its events")
        for mb in args.sizes_mb:
            logdir = os.path.join(root, f"logs_{mb}")
            session = profile_fixtures.session_dir(logdir, "big")
            path = os.path.join(session, "host0.xplane.pb")
            size = profile_fixtures.big_xplane(source, path, mb * 2**20)
            parse_s, parse_rss = bare_parse(path)
            first, cached, peak, after = tab_open(logdir, "big")
            print(f"\n{size / 2**20:.0f} MiB xplane: bare parse {parse_s:.2f} s, +{parse_rss / 2**20:.0f} MiB RSS")
            print(f"  first open  {first:6.2f} s = {first / parse_s:5.2f}x the parse; TensorBoard RSS peak "
                  f"+{peak / 2**20:.0f} MiB ({peak / parse_rss:.2f}x the parse's), +{after / 2**20:.0f} MiB after")
            print(f"  cached open {cached:6.3f} s = {cached / parse_s:5.3f}x the parse")


if __name__ == "__main__":
    main()
