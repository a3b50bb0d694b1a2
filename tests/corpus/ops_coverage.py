"""How much of a profiled step's op time tb_modelmem's ops view puts on a layer of the model.

    python -m tests.corpus.ops_coverage RESULT.json [RESULT.json ...]

For each harness result (modelmem mode): served through the real plugin backend, the
``/ops`` answer's per-layer rows are summed where the row's layer is a layer of the
run's breakdown(s), over the time of every op in the table. A measurement, not a test.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List

from tests.corpus import load
from tests.support.plugin_harness import Served, layer_rows


def layer_time_fraction(logdir: str, run: str = "train", tag: str = "ops") -> Dict[str, Any]:
    """{"total_us", "layer_us", "fraction", "layers": rows on a breakdown layer, "elsewhere": the
    other rows, largest first}. The breakdown layers are those of every breakdown in ``run``."""
    served = Served(logdir)
    body = served.json("/ops", run=run, tag=tag)
    names = set()
    for (tag_run, tag_name), info in served.tags(run).items():
        if info["kind"] == "breakdown" and not info["error"]:
            names |= {row["layer"] for row in layer_rows(served.json("/breakdown", run=tag_run, tag=tag_name))}
    total = sum(op["time_us"] for op in body["ops"])
    on_layers = [row for row in layer_rows(body) if row["layer"] in names and row["time_us"] > 0]
    elsewhere = sorted((row for row in layer_rows(body) if row["layer"] not in names),
                       key=lambda row: -row["time_us"])
    layer_us = sum(row["time_us"] for row in on_layers)
    return {"total_us": total, "layer_us": layer_us, "fraction": layer_us / total if total else 0.0,
            "layers": [(row["layer"], row["time_us"]) for row in on_layers],
            "elsewhere": [(row["layer"], row["time_us"]) for row in elsewhere]}


def main(argv: List[str]) -> int:
    for path in argv:
        result = load(path)
        try:
            found = layer_time_fraction(result["logdir"], result["run"])
        except AssertionError as e:  # no ops summary: Served.json asserts a 200
            print(f"{result['name']:40s} no ops table: {str(e)[:200]}")
            continue
        top = ", ".join(f"{name} {us:,.0f} us" for name, us in found["elsewhere"][:4])
        print(f"{result['name']:40s} {found['fraction']:6.1%} of {found['total_us']:,.0f} us on breakdown layers;"
              f" largest elsewhere: {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
