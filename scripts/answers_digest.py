"""The sha256 of every answer the plugin gives for a log dir, route by route, (run, tag) by (run, tag).

Why: a refactor that must leave behaviour unchanged is proven by serving the same log dir before and
after it and comparing the digests byte for byte. TF-free: it serves through ``tests.support.plugin_harness``.

    python scripts/answers_digest.py LOGDIR OUT.json [--compare BEFORE.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Any, Dict, Iterator, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.support.plugin_harness import Served  # noqa: E402

Request = Tuple[str, Dict[str, Any]]

Params = Dict[str, Any]
_OP_ROWS: List[Params] = [
    {}, {"sort": "alloc_bytes", "order": "desc", "limit": 50}, {"sort": "name", "order": "asc"},
    {"filter": "phase=forward", "sort": "time_us"}, {"filter": "grad", "offset": 5, "limit": 20}]
_VARIABLES: List[Params] = [
    {}, {"sort": "bytes", "order": "desc"}, {"filter": "kernel", "sort": "name", "order": "asc"}]
_WHATIF: List[Params] = [
    {}, {"batch": 1}, {"batch": 256}, {"optimizer": "SGD"}, {"optimizer": "momentum", "batch": 64},
    {"optimizer": "AdamW"}, {"policy": "mixed_float16"}, {"policy": "mixed_bfloat16", "batch": 8},
    {"replicas": 2}, {"replicas": 4, "batch": 128, "optimizer": "Adam"}, {"budget": "64MiB"},
    {"budget": "8GiB", "replicas": 2, "policy": "mixed_float16"}]


def requests(tag: Dict[str, Any], breakdowns: List[str]) -> Iterator[Request]:
    """Every (route, extra params) worth asking of one tag, by its kind."""
    yield "/steps", {}
    kind = tag["kind"]
    if kind == "breakdown":
        yield "/breakdown", {}
        for params in _VARIABLES:
            yield "/variables", params
    elif kind == "ops":
        for route in ("/ops", "/timeline", "/hosts"):
            yield route, {}
        for params in _OP_ROWS:
            yield "/op_rows", params
        for params in _WHATIF:
            yield "/whatif", params
        for other in breakdowns:  # the trace joined with each of the run's breakdowns
            for route in ("/ops", "/timeline", "/whatif"):
                yield route, {"breakdown": other}
    elif kind == "memory":
        yield "/growth", {}
    elif kind == "oom":
        yield "/oom", {}
    elif kind == "loadbench":
        yield "/loadbench", {}


def digests(logdir: str) -> Dict[str, str]:
    """``{"route run tag params": "status sha256"}`` for every answer."""
    served = Served(logdir)
    out: Dict[str, str] = {}
    listing = served.settled("/runs")
    out["/runs"] = f"{listing.status_code} {hashlib.sha256(listing.get_data()).hexdigest()}"
    runs = json.loads(listing.get_data())["runs"]
    for run in runs:
        breakdowns = [t["tag"] for t in run["tags"] if t["kind"] == "breakdown"]
        for tag in run["tags"]:
            for route, params in requests(tag, breakdowns):
                response = served.settled(route, timeout=600, run=run["run"], tag=tag["tag"], **params)
                key = f"{route} {run['run']} {tag['tag']} {json.dumps(params, sort_keys=True)}"
                out[key] = f"{response.status_code} {hashlib.sha256(response.get_data()).hexdigest()}"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logdir")
    parser.add_argument("out")
    parser.add_argument("--compare", help="an earlier OUT.json: list every answer that differs")
    args = parser.parse_args()
    found = digests(args.logdir)
    with open(args.out, "w") as f:
        json.dump(found, f, indent=1, sort_keys=True)
    statuses: Dict[str, int] = {}
    for value in found.values():
        statuses[value.split()[0]] = statuses.get(value.split()[0], 0) + 1
    print(f"{len(found)} answers, by status {statuses}")
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
        differ = sorted(k for k in set(before) | set(found) if before.get(k) != found.get(k))
        for key in differ:
            print("DIFFERS", key, before.get(key), found.get(key))
        print(f"{len(differ)} of {len(found)} answers differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
