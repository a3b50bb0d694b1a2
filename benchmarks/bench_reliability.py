"""What a hostile log dir costs a real TensorBoard, both loaders (issue 12).

Two TensorBoard processes run side by side in each round: one on the hostile log dir of
``tests/support/hostile_logdir.py`` (good runs beside a bomb, kind-mismatched payloads, a 10**4000 shape,
a 5,000-character tag, a corrupt profile, ...), one on a log dir holding only its good runs.
CLIENTS threads poll every route of every item of each for SECONDS, as open tabs would. Printed:
requests and 5xx answers, the slowest request and the median, and each process's RSS growth;
ratios are hostile against good-only, measured in the same round.

    python -m benchmarks.bench_reliability [--seconds 60] [--clients 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from typing import Dict, List, Tuple

import psutil

from tests.support.hostile_logdir import GOOD, HOSTILE, routes, write_hostile_logdir
from tests.support.tensorboard_process import TensorBoardProcess


def _items(tb: TensorBoardProcess) -> List[Tuple[str, str, str]]:
    status, body = tb.answer("/runs")
    assert status == 200, body
    return [(r["run"], t["tag"], t["kind"] or "") for r in json.loads(body)["runs"] for t in r["tags"]]


def _hammer(tb: TensorBoardProcess, seconds: float, clients: int) -> Dict[str, object]:
    """Poll every route of every item from ``clients`` threads; latencies and statuses."""
    items = _items(tb)
    requests = [(route, run, tag) for run, tag, kind in items for route in routes(kind) + ("/breakdown", "/ops")]
    latencies: List[float] = []
    statuses: Dict[int, int] = {}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(offset: int) -> None:
        i = offset
        while time.monotonic() < stop:
            route, run, tag = requests[i % len(requests)]
            i += 1
            started = time.perf_counter()
            status, _ = tb.answer(route, run=run, tag=tag)
            took = time.perf_counter() - started
            with lock:
                latencies.append(took)
                statuses[status] = statuses.get(status, 0) + 1

    process = psutil.Process(tb.pid)
    rss_before = process.memory_info().rss
    threads = [threading.Thread(target=client, args=(k * 7,)) for k in range(clients)]
    for t in threads:
        t.start()
    peak_rss = rss_before
    while any(t.is_alive() for t in threads):
        peak_rss = max(peak_rss, process.memory_info().rss)
        time.sleep(0.2)
    return {"items": len(items), "requests": len(latencies), "statuses": statuses,
            "p50_ms": statistics.median(latencies) * 1e3, "max_ms": max(latencies) * 1e3,
            "rss_before_mib": rss_before / 2**20, "rss_growth_mib": (peak_rss - rss_before) / 2**20}


def _good_only(hostile: str, into: str) -> str:
    """The runs of the hostile log dir that hold no hostile item."""
    for run in sorted({run for run, _ in GOOD} - {run for run, _ in HOSTILE}):
        shutil.copytree(os.path.join(hostile, run), os.path.join(into, run))
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        hostile = write_hostile_logdir(os.path.join(root, "hostile"))
        good = _good_only(hostile, os.path.join(root, "good"))
        print(f"{args.clients} clients x {args.seconds:.0f} s per TensorBoard; hostile vs good-only side by side")
        for load_fast in (True, False):
            loader = "rust data server" if load_fast else "python loader"
            with TensorBoardProcess(hostile, load_fast=load_fast) as bad_tb, \
                    TensorBoardProcess(good, load_fast=load_fast) as good_tb:
                bad_tb.wait_for_tab(expect_tags=10)
                good_tb.wait_for_tab(expect_tags=3)
                results = {}
                threads = [threading.Thread(target=lambda k=k, tb=tb: results.__setitem__(
                    k, _hammer(tb, args.seconds, args.clients)))
                           for k, tb in (("hostile", bad_tb), ("good", good_tb))]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            bad, ok = results["hostile"], results["good"]
            five_xx = sum(n for s, n in bad["statuses"].items() if s >= 500)
            print(f"\n{loader}:")
            for name, r in (("hostile", bad), ("good-only", ok)):
                print(f"  {name:9} {r['items']:3d} items  {r['requests']:6,d} requests  statuses {r['statuses']}  "
                      f"p50 {r['p50_ms']:.1f} ms  max {r['max_ms']:.0f} ms  "
                      f"RSS {r['rss_before_mib']:.0f} MiB +{r['rss_growth_mib']:.0f} MiB")
            print(f"  5xx answers: {five_xx}; slowest request {bad['max_ms'] / ok['max_ms']:.2f}x the good-only "
                  f"log dir's; RSS growth {bad['rss_growth_mib']:.0f} vs {ok['rss_growth_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
