"""What seeing every CPU allocation costs, and what splitting the peak by category costs (issue 10).

1. TensorFlow's BFC CPU allocator (``tb_modelmem.enable_full_memory_trace()``, i.e.
   ``TF_CPU_ALLOCATOR_USE_BFC=true``): the seed LeNet's training step (batch 32, Adam) timed in a
   process with it and one without, alternating (the allocator is chosen at TensorFlow's start);
   median step time, and the allocation events a profiled step records with each.
2. The categorisation: of a profiled step with every allocation recorded, the time of the
   by-category replay (inside ``reduce_xspace``) plus ``peak_by_category`` against the whole
   reduction it builds on.

    python -m benchmarks.bench_bfc [--rounds 3] [--steps 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(steps: int) -> None:
    """In a fresh process: step times, allocation events of one profiled step, categorisation cost."""
    import glob
    import tempfile

    import tensorflow as tf

    from tb_modelmem import proto
    from tb_modelmem.capture import opgraph
    from tb_modelmem.capture.variables import breakdown_of
    from tb_modelmem.plugin.views.peak import peak_by_category
    from tb_modelmem.readers import allocator_replay, xspace
    from tests.support import trace_fixtures

    model = trace_fixtures.lenet_keras()
    training = trace_fixtures.lenet_train_step(model, batch_size=32)
    for _ in range(3):
        training.step(*training.batch)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        training.step(*training.batch).numpy()
        times.append(time.perf_counter() - started)
    with tempfile.TemporaryDirectory() as folder:
        tf.profiler.experimental.start(folder)
        training.step(*training.batch)
        tf.profiler.experimental.stop()
        (path,) = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
        with open(path, "rb") as f:
            data = f.read()
    space = proto.XSpace.FromString(data)
    allocations = sum(1 for plane in space.planes for line in plane.lines for event in line.events
                      if plane.event_metadata[event.metadata_id].name == "MemoryAllocation")
    graph = opgraph.graph_info(training.step)
    replay_seconds = []
    real_replay = allocator_replay.replay

    def timed_replay(*args, **kwargs):
        started = time.perf_counter()
        result = real_replay(*args, **kwargs)
        replay_seconds.append(time.perf_counter() - started)
        return result

    xspace.replay = timed_replay
    reduce_times, categorise_times = [], []
    record = breakdown_of(model, training.optimizer)
    for _ in range(5):
        replay_seconds.clear()
        started = time.perf_counter()
        trace = xspace.reduce_xspace(proto.XSpace.FromString(data), graph)
        reduce_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        peak_by_category(trace, record)
        categorise_times.append(sum(replay_seconds) + time.perf_counter() - started)
    print(json.dumps({"step_s": statistics.median(times), "allocations": allocations,
                      "reduce_s": statistics.median(reduce_times),
                      "categorise_s": statistics.median(categorise_times)}))


def run_child(bfc: bool, steps: int) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
    if bfc:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_bfc", "--child", str(steps)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    results = {True: [], False: []}
    for _ in range(args.rounds):
        for bfc in (False, True):
            results[bfc].append(run_child(bfc, args.steps))

    def median(bfc: bool, key: str) -> float:
        return statistics.median(r[key] for r in results[bfc])

    plain, full = median(False, "step_s"), median(True, "step_s")
    print(f"LeNet step, batch 32 (median of {args.rounds} processes x {args.steps} steps each, alternating):")
    events = "allocation events per profiled step"
    print(f"  default CPU allocator {plain * 1e3:.1f} ms, {median(False, 'allocations'):.0f} {events}")
    print(f"  BFC CPU allocator     {full * 1e3:.1f} ms, {median(True, 'allocations'):.0f} {events}")
    print(f"  ratio {full / plain:.2f}x")
    reduce, categorise = median(True, "reduce_s"), median(True, "categorise_s")
    print(f"categorisation (by-category replay + peak_by_category) {categorise * 1e3:.1f} ms of a "
          f"{reduce * 1e3:.1f} ms reduction: {categorise / reduce:.2f}x")


if __name__ == "__main__":
    main()
