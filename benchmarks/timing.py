"""Shared timing helper for the benchmarks: median wall time of repeated calls."""

import statistics
import time
from typing import Callable


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
