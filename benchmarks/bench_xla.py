"""Reducing an XLA-compiled step's profile (issue 27), against reading it bare.

Each real GPU profile (tests/fixtures/gpu_h100: Keras 3 on JAX on an H100; tests/fixtures: ResNet50)
is reduced by ``readers.xspace.reduce_xspace`` (HloProto parse, events tied to instructions, the temp
allocation split, the join), interleaved with two baselines on the same bytes:

  parse   ``XSpace.FromString`` alone
  walk    the parse, every event's stats read once, and every program's HloProto parsed: the least any
          reader of these profiles does

Medians of ``--rounds`` rounds; ratios are reduce / walk and reduce / parse.

    python -m benchmarks.bench_xla [--rounds 7]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import os
import statistics
import time
from typing import Callable, Dict, List

from tb_modelmem import proto
from tb_modelmem.readers.xspace import reduce_xspace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def profiles() -> Dict[str, bytes]:
    found = {}
    fixtures = os.path.join(REPO, "tests", "fixtures")
    for path in sorted(glob.glob(os.path.join(fixtures, "gpu_h100", "*.xplane.pb.gz"))
                       + glob.glob(os.path.join(fixtures, "*.xplane.pb.gz"))):
        with gzip.open(path) as f:
            found[os.path.basename(path).split(".")[0]] = f.read()
    return found


def walk(data: bytes) -> int:
    """Parse, read every event's stats once, parse every HloProto."""
    space = proto.XSpace.FromString(data)
    seen = 0
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                for stat in event.stats:
                    seen += stat.metadata_id
        for metadata in plane.event_metadata.values():
            for stat in metadata.stats:
                if stat.bytes_value:
                    proto.HloProto.FromString(stat.bytes_value)
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    found = profiles()
    if not found:
        raise SystemExit("no profiles under tests/fixtures")
    print(f"{'profile':<28} {'MB':>6} {'parse ms':>9} {'walk ms':>9} {'reduce ms':>10} {'x walk':>7} {'x parse':>8}"
          f"  rows")
    for name, data in found.items():
        steps: Dict[str, Callable[[], object]] = {
            "parse": lambda data=data: proto.XSpace.FromString(data),
            "walk": lambda data=data: walk(data),
            "reduce": lambda data=data: reduce_xspace(proto.XSpace.FromString(data)),
        }
        times: Dict[str, List[float]] = {k: [] for k in steps}
        for _ in range(args.rounds):  # interleaved: the machine's load moves all three alike
            for key, step in steps.items():
                started = time.perf_counter()
                step()
                times[key].append(time.perf_counter() - started)
        parse, bare, reduced = (statistics.median(times[k]) for k in ("parse", "walk", "reduce"))
        rows = len(reduce_xspace(proto.XSpace.FromString(data)).ops)
        print(f"{name:<28} {len(data) / 1e6:>6.2f} {parse * 1e3:>9.1f} {bare * 1e3:>9.1f} {reduced * 1e3:>10.1f} "
              f"{reduced / bare:>7.1f} {reduced / parse:>8.1f}  {rows}")


if __name__ == "__main__":
    main()
