"""``tb_modelmem.estimate``: what a logged step's peak would be at another batch size, optimizer,
precision policy or replica count, and the largest batch that fits a budget. The same numbers as
``tb-modelmem estimate`` and the tab's What-if panel (``rules.projection``). No TF."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Union

from tb_modelmem.readers.logdir import read_run
from tb_modelmem.rules.projection import WhatIf, largest_batch, project

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def estimate(logdir: str, run: Optional[str] = None, batch: Optional[int] = None, optimizer: Optional[str] = None,
             policy: Optional[str] = None, replicas: int = 1,
             budget: Union[None, int, str] = None) -> Dict[str, Any]:
    """The projection of ``run``'s traced step (``rules.projection.project``): ``{"peak_bytes",
    "by_category", "basis", "unknown", ...}``, plus ``"largest_batch"`` when a ``budget`` (bytes, or
    text such as "16GiB") is given. ValueError for a bad argument or a log dir with no traced step."""
    what = WhatIf(batch, optimizer, policy, replicas)
    what.check()
    budget_bytes = parse_bytes(budget) if budget is not None else None
    logged = read_run(logdir, run)
    result = project(logged.trace, logged.breakdown, what)
    result.update(run=logged.run, trace=logged.source, breakdown=logged.breakdown_source or None)
    if budget_bytes is not None:
        result["budget_bytes"] = budget_bytes
        result["largest_batch"] = largest_batch(logged.trace, logged.breakdown, what, budget_bytes)
    return result


def parse_bytes(text: Union[int, str]) -> int:
    """Bytes of a size: an int, or text such as "16GiB", "512 MB", "2e9"."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*", str(text).lower())
        if found is None or found.group(2) not in _UNITS:
            raise ValueError(f"not a size: {text!r} (say 16GiB, 512MB or a number of bytes)")
        value = int(float(found.group(1)) * _UNITS[found.group(2)])
    if value <= 0:
        raise ValueError(f"a budget must be positive, got {text!r}")
    return value
