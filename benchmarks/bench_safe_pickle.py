"""Reading a memory snapshot with the bounded unpickler (issue 47), against ``pickle.loads`` of the same bytes.

``readers.safe_pickle.load_plain`` is Python's own unpickler with the opcodes that let a crafted pickle
corrupt, freeze or exhaust the reader replaced (BUILD, dict keys and set elements, memo fetches counted
against a budget); ``pickle.loads`` is the C unpickler with none of that, and no class refused either: the
fastest any reader could go, and unsafe. The snapshot is synthetic, shaped as torch writes one
(``_dump_snapshot``: segments with their blocks, one device's trace of alloc/free entries, each with a
stack of frame dicts shared between entries, as torch's own symbolizer shares them), ``--entries`` long.
Then the whole read: ``load_snapshot`` + ``reduce_snapshot``, beside the unpickling alone.

Medians of ``--rounds`` rounds, interleaved; the ratio is bounded / C.

    python -m benchmarks.bench_safe_pickle [--entries 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import pickle
import random
import statistics
from typing import Any, Dict, List

from benchmarks.timing import median_seconds
from tb_modelmem.readers.safe_pickle import load_plain
from tb_modelmem.readers.torch_snapshot import load_snapshot, reduce_snapshot


def synthetic_snapshot(entries: int, seed: int = 0) -> bytes:
    """A snapshot dict of ``entries`` trace entries (allocs, each freed later), pickled as torch does."""
    rng = random.Random(seed)
    frames = [{"filename": f"/usr/lib/python3/site-packages/torch/nn/modules/m{i}.py", "line": i, "name": f"f{i}"}
              for i in range(400)]
    trace: List[Dict[str, Any]] = []
    live: List[int] = []
    for i in range(entries):
        if live and rng.random() < 0.5:
            addr = live.pop(rng.randrange(len(live)))
            trace.append({"action": "free_requested", "addr": addr, "size": 512, "stream": 0, "time_us": i,
                          "frames": []})
            continue
        addr = 0x7F0000000000 + i * 512
        live.append(addr)
        stack = [frames[(i * 7 + j) % len(frames)] for j in range(rng.randrange(10, 40))]
        trace.append({"action": "alloc", "addr": addr, "size": 512, "stream": 0, "time_us": i, "frames": stack})
    segments = [{"device": 0, "address": 0x7F0000000000, "total_size": entries * 512, "allocated_size": 0,
                 "segment_type": "large", "blocks": [{"size": entries * 512, "state": "inactive"}]}]
    return pickle.dumps({"segments": segments, "device_traces": [trace]}, protocol=4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    data = synthetic_snapshot(args.entries)
    print(f"synthetic snapshot: {args.entries:,} entries, {len(data) / 2**20:.1f} MiB pickled")
    c_times, bounded_times, whole_times = [], [], []
    for _ in range(args.rounds):  # interleaved: the machine is shared and noisy
        c_times.append(median_seconds(lambda: pickle.loads(data), 1))
        bounded_times.append(median_seconds(lambda: load_plain(data, "bench"), 1))
        whole_times.append(median_seconds(lambda: reduce_snapshot(load_snapshot(data, "bench")), 1))
    c, bounded, whole = (statistics.median(t) for t in (c_times, bounded_times, whole_times))
    print(f"pickle.loads (C, unbounded, unsafe)   {c:8.3f} s")
    print(f"load_plain (bounded, no class)        {bounded:8.3f} s   ratio {bounded / c:.2f}x")
    print(f"load_snapshot + reduce_snapshot       {whole:8.3f} s   the unpickling is {bounded / whole:.0%} of it")


if __name__ == "__main__":
    main()
