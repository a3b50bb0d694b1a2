"""What a TF1 RunMetadata costs to reduce and to store, side by side in one process.

A synthetic RunMetadata of ``--ops`` nodes (tests/support/trace_fixtures.py): the time to parse and
reduce it against the time just to parse it, and the stored payload against its size.
(Profiles: benchmarks/bench_trace.py.)

    python -m benchmarks.bench_run_metadata [--ops 20000 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tensorboard.compat.proto import config_pb2

from benchmarks.timing import median_seconds
from tb_modelmem.readers.run_metadata import reduce_run_metadata
from tb_modelmem.schema import payload
from tests.support import trace_fixtures


def reduce_vs_parse(n_ops: int, repeats: int) -> None:
    data = trace_fixtures.synthetic_run_metadata(n_ops).SerializeToString()
    parse = median_seconds(lambda: config_pb2.RunMetadata.FromString(data), repeats)
    reduce = median_seconds(lambda: reduce_run_metadata(data), repeats)
    blob = payload.encode(reduce_run_metadata(data))
    print(f"synthetic RunMetadata, {n_ops:,} ops, {len(data):,} B: parse {parse * 1e3:.1f} ms | "
          f"parse+reduce {reduce * 1e3:.1f} ms | ratio {reduce / parse:.1f}x (median of {repeats})")
    print(f"  payload {len(blob):,} B = {len(blob) / len(data):.3f} of the serialized RunMetadata")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, nargs="+", default=[20_000, 200_000], help="nodes in the RunMetadata")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for n_ops in args.ops:
        reduce_vs_parse(n_ops, args.repeats)


if __name__ == "__main__":
    main()
