"""Reducing a PyTorch profiler trace (issue 35), against parsing it bare.

The real H100 ResNet50 trace (tests/fixtures/torch_h100) and a synthetic one made from it at 10x the
steps (its events repeated, times shifted, addresses kept distinct) are reduced by
``readers.torch_trace`` (parse, ops placed on their ranges, kernels tied, the allocator replayed),
interleaved with the baseline on the same bytes:

  parse   ``orjson.loads`` of the decompressed JSON and one pass over its events: the least any reader does

Medians of ``--rounds`` rounds; the ratio is reduce / parse.

    python -m benchmarks.bench_torch_trace [--rounds 7]
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import time
from typing import Callable, Dict, List

import orjson

from tb_modelmem.readers import torch_trace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H100 = os.path.join(REPO, "tests", "fixtures", "torch_h100", "resnet50_adamw_b32.pt.trace.json.gz")


def _repeated(trace: dict, times: int) -> bytes:
    """The trace's events ``times`` over, each copy after the last, its memory addresses its own."""
    events = trace["traceEvents"]
    span = max(float(e.get("ts", 0)) + float(e.get("dur", 0) or 0) for e in events if "ts" in e) - \
        min(float(e["ts"]) for e in events if "ts" in e)
    out: List[dict] = []
    for i in range(times):
        for e in events:
            copy = dict(e)
            if "ts" in copy:
                copy["ts"] = float(copy["ts"]) + i * (span + 1)
            if isinstance(copy.get("args"), dict) and "Addr" in copy["args"]:
                copy["args"] = dict(copy["args"], Addr=copy["args"]["Addr"] + i)
            out.append(copy)
    return orjson.dumps(dict(trace, traceEvents=out))


def _parse(data: bytes) -> int:
    return sum(1 for e in orjson.loads(data)["traceEvents"] if e.get("ph"))


def _reduce(data: bytes) -> int:
    return len(torch_trace.reduce_trace(torch_trace.load(data)).ops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with gzip.open(H100, "rb") as f:
        real = f.read()
    cases = {"H100 ResNet50, 1 step": real, "same x10 steps": _repeated(orjson.loads(real), 10)}
    for name, data in cases.items():
        times: Dict[str, List[float]] = {"parse": [], "reduce": []}
        runs: Dict[str, Callable[[bytes], int]] = {"parse": _parse, "reduce": _reduce}
        for _ in range(args.rounds):
            for label, run in runs.items():
                started = time.perf_counter()
                run(data)
                times[label].append(time.perf_counter() - started)
        parse, reduce = statistics.median(times["parse"]), statistics.median(times["reduce"])
        print(f"{name}: {len(data) / 2**20:.1f} MiB of JSON; parse {parse * 1e3:.0f} ms, reduce {reduce * 1e3:.0f} ms "
              f"= {reduce / parse:.2f}x")


if __name__ == "__main__":
    main()
