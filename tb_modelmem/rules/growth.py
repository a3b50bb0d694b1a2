"""Which memory series keep growing over steps or model builds, by how much, and what explains it. No TF.

A series is flagged when it keeps growing, not when it rose once: its slope (Theil-Sen: the
median of the slopes between every pair of samples, so a warm-up jump or one outlier does
not move it) is positive past a noise floor, and it rises in most consecutive samples after
the first ones (the first quarter is TensorFlow warming up: tracing the train function,
growing its allocator). What grows is then named from the census: the models whose
variables are still alive, the functions whose graphs accumulate, the object types that multiply.
"""

from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tb_modelmem.schema.names import OTHER_LINE
from tb_modelmem.schema.records import MemorySample

# Series name -> (unit, noise floor per step: growth below it is not flagged).
SERIES: Dict[str, Tuple[str, float]] = {
    "rss_bytes": ("bytes", 1 * 2**20),
    "live_variables": ("count", 0.5),
    "live_variable_bytes": ("bytes", 1024.0),
    "graph_ops": ("count", 1.0),
    "live_models": ("count", 0.25),
    "python_objects": ("count", 200.0),
}
MIN_SAMPLES = 4  # fewer than this says nothing about a trend
RISING_SHARE = 0.6  # of consecutive steps after warm-up that must rise


def slope(steps: Sequence[float], values: Sequence[float]) -> Optional[float]:
    """Theil-Sen slope: the median slope over every pair of samples (None with fewer than 2)."""
    pairs = [(values[j] - values[i]) / (steps[j] - steps[i])
             for i in range(len(steps)) for j in range(i + 1, len(steps)) if steps[j] != steps[i]]
    return statistics.median(pairs) if pairs else None


def analyse(samples: Sequence[Tuple[int, MemorySample]]) -> Dict[str, Any]:
    """``{"series": {name: {"unit", "steps", "values"}}, "growth": [{"series", "per_step", "flagged",
    "reason"}], "explained_by": {...}}`` of samples ordered by step."""
    samples = sorted(samples, key=lambda s: s[0])
    series: Dict[str, Dict[str, Any]] = {}
    for name, (unit, _) in SERIES.items():
        points = [(step, getattr(s, name)) for step, s in samples if getattr(s, name) is not None]
        if points:
            series[name] = {"unit": unit, "steps": [p[0] for p in points], "values": [p[1] for p in points]}
    devices = sorted({d.name for _, s in samples for d in s.devices})
    for device in devices:
        for field, suffix in (("current_bytes", "bytes_in_use"), ("peak_bytes", "peak_bytes")):
            points = [(step, getattr(d, field)) for step, s in samples for d in s.devices if d.name == device]
            series[f"{device}/{suffix}"] = {"unit": "bytes", "steps": [p[0] for p in points],
                                            "values": [p[1] for p in points]}
    growth = [trend(name, data["steps"], data["values"], SERIES.get(name, ("bytes", 1 * 2**20))[1])
              for name, data in series.items()]
    flagged = {g["series"] for g in growth if g["flagged"]}
    return {"series": series, "growth": growth, "explained_by": explain(samples, flagged),
            "samples": len(samples), "census_seconds": _median([s.census_seconds for _, s in samples])}


def trend(name: str, steps: Sequence[int], values: Sequence[float], floor: float) -> Dict[str, Any]:
    """The growth per step of one series, and whether it keeps growing."""
    warm = max(1, len(steps) // 4) if len(steps) >= MIN_SAMPLES else 0
    s, v = list(steps[warm:]), list(values[warm:])
    per_step = slope(s, v) if len(s) >= 2 else None
    result: Dict[str, Any] = {"series": name, "per_step": per_step, "flagged": False, "reason": ""}
    if len(steps) < MIN_SAMPLES or per_step is None:
        result["reason"] = f"{len(steps)} samples: too few to tell a trend (at least {MIN_SAMPLES})"
        return result
    rising = sum(b > a for a, b in zip(v, v[1:])) / max(len(v) - 1, 1)
    if per_step > floor and rising >= RISING_SHARE:
        result["flagged"] = True
        result["reason"] = f"grows in {rising:.0%} of steps after warm-up"
    elif per_step > floor:
        result["reason"] = f"rose, but only in {rising:.0%} of steps after warm-up: not a steady growth"
    else:
        result["reason"] = "flat after warm-up"
    return result


def explain(samples: Sequence[Tuple[int, MemorySample]], flagged: set) -> Dict[str, Any]:
    """For the flagged series, what grows: from the first census after warm-up to the last."""
    census = [(step, s) for step, s in samples if s.live_variables is not None]
    if len(census) < 2:
        return {}
    first, last = census[max(0, len(census) // 4)][1], census[-1][1]
    steps = max(census[-1][0] - census[max(0, len(census) // 4)][0], 1)
    out: Dict[str, Any] = {}
    if flagged & {"live_variables", "live_variable_bytes", "live_models", "rss_bytes"}:
        # every model alive at the end (``new``: not alive at the first sample): something keeps them
        started = {c.name for c in census[0][1].models}
        out["models"] = [{"name": c.name, "variables": c.count, "bytes": c.bytes, "new": c.name not in started}
                         for c in last.models]
        out["variables_by_owner"] = _movers(first.variables_by_owner, last.variables_by_owner, steps)
    if flagged & {"graph_ops", "rss_bytes", "python_objects"}:
        out["graph_ops_by_function"] = _movers(first.graph_ops_by_function, last.graph_ops_by_function, steps)
    if flagged:
        out["objects_by_type"] = _movers(first.objects_by_type, last.objects_by_type, steps)[:10]
    return out


def _movers(before: Sequence[Any], after: Sequence[Any], steps: int) -> List[Dict[str, Any]]:
    """Lines that grew (or appeared), largest growth first, with the growth per step (the
    average over the window). A line missing from an earlier census that was cut to its top
    lines (it has an "(other)" line) may have been below the cut: its growth is unknown (None),
    listed after the known ones, never counted from 0."""
    was = {c.name: c for c in before}
    cut = OTHER_LINE in was
    known, unknown = [], []
    for c in after:
        old = was.get(c.name)
        if old is None and cut and c.name != OTHER_LINE:
            unknown.append({"name": c.name, "count": c.count, "bytes": c.bytes, "grown": None, "per_step": None,
                            "new": None})
            continue
        grown = c.count - (old.count if old else 0)
        if grown > 0:
            known.append({"name": c.name, "count": c.count, "bytes": c.bytes, "grown": grown,
                          "per_step": grown / steps, "new": old is None})
    return sorted(known, key=lambda m: -m["grown"]) + unknown


def _median(values: List[float]) -> Optional[float]:
    return statistics.median(values) if values else None
