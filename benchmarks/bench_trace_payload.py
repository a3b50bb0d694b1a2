"""What an op trace costs to store and to reduce, measured side by side in one process.

1. A real TF2 profile of LeNet training steps (USER_PROBLEMS.md #3): size of the
   ``.xplane.pb`` vs the encoded OpTrace payload tb_modelmem stores instead.
2. A synthetic 20,000-op RunMetadata: time to reduce it vs time just to parse it.

Run: TF_CPP_MIN_LOG_LEVEL=2 python -m benchmarks.bench_trace_payload [--steps 2] [--ops 20000]
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tensorboard.compat.proto import config_pb2  # noqa: E402

from benchmarks.timing import median_seconds  # noqa: E402
from tb_modelmem import payload  # noqa: E402
from tb_modelmem.capture import xspace  # noqa: E402
from tb_modelmem.capture.run_metadata import reduce_run_metadata  # noqa: E402
from tests import trace_fixtures  # noqa: E402



def profile_payload(steps: int) -> None:
    import tensorflow as tf

    train_step, batch = trace_fixtures.lenet_train_step(trace_fixtures.lenet_keras())
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(steps):
            train_step(*batch)
        tf.profiler.experimental.stop()
        (path,) = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
        raw = os.path.getsize(path)
        record = xspace.reduce_xspace(xspace.load_xspace(path), xspace.graph_info(train_step))
    blob = payload.encode(record)
    print(f"LeNet train step x{steps} (TF2 profiler): .xplane.pb {raw:,} B | OpTrace payload {len(blob):,} B "
          f"({len(record.ops)} ops, {len(record.timeline)} timeline points) | ratio {len(blob) / raw:.3f}")


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
    parser.add_argument("--steps", type=int, default=2, help="profiled LeNet training steps")
    parser.add_argument("--ops", type=int, default=20_000, help="nodes in the synthetic RunMetadata")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    reduce_vs_parse(args.ops, args.repeats)
    profile_payload(args.steps)


if __name__ == "__main__":
    main()
