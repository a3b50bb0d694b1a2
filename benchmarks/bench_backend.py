"""What does the backend cost for a 20,000-op trace, and what does its decoded-record cache save?

Writes a synthetic 20,000-op trace at 5 steps, serves the log dir through TensorBoard's
Python loader and the plugin (no server process), then times side by side:
  first   /ops for a step not read before (read one blob, inflate, validate, aggregate)
  cached  /ops for the same step again (record from the LRU cache; aggregate only)
and the response size against the payload stored in the event file.

    python -m benchmarks.bench_backend [--ops 20000] [--repeats 5]
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks.timing import median_seconds
from tb_modelmem import summary
from tb_modelmem.readers.run_metadata import reduce_run_metadata
from tb_modelmem.schema import payload
from tests.support.plugin_harness import Served, write_events
from tests.support.trace_fixtures import synthetic_run_metadata


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    trace = reduce_run_metadata(synthetic_run_metadata(args.ops))
    steps = max(args.repeats, 1)
    with tempfile.TemporaryDirectory() as logdir:
        write_events(os.path.join(logdir, "big"), [(s, summary.pb("ops", trace)) for s in range(steps)])
        served = Served(logdir)
        unread = iter(range(steps))
        first = median_seconds(lambda: served.json("/ops", run="big", tag="ops", step=next(unread)), steps)
        cached = median_seconds(lambda: served.json("/ops", run="big", tag="ops", step=0), args.repeats)
        response = served.get("/ops", run="big", tag="ops", step=0)
    print(f"{args.ops:,}-op trace: stored payload {len(payload.encode(trace)):,} B, "
          f"JSON response {len(response.get_data()):,} B ({response.headers.get('Content-Encoding') or 'identity'})")
    print(f"/ops first read of a step: {first * 1e3:8.1f} ms")
    print(f"/ops same step again:      {cached * 1e3:8.1f} ms")
    print(f"ratio first / cached:      {first / cached:8.2f}x")


if __name__ == "__main__":
    main()
