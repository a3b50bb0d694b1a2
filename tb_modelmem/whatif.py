"""``tb_modelmem.estimate``: what a logged step's peak would be at another batch size, sequence length,
optimizer, precision policy, device count or sharding, and the largest batch that fits a budget. The same numbers as
``tb-modelmem estimate`` and the tab's What-if panel (``rules.projection``). No TF."""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

from tb_modelmem.readers.logdir import read_run
from tb_modelmem.rules.projection import WhatIf, budget_answer, parse_size, project


def estimate(logdir: str, run: Optional[str] = None, batch: Optional[int] = None, optimizer: Optional[str] = None,
             policy: Optional[str] = None, replicas: int = 1,
             budget: Union[None, int, str] = None, shard: Optional[str] = None,
             seq: Optional[int] = None) -> Dict[str, Any]:
    """The projection of ``run``'s traced step (``rules.projection.project``): ``{"peak_bytes",
    "by_category", "basis", "unknown", ...}`` on each of ``replicas`` devices (``shard``: what else is
    split over them, one of ``rules.projection.SHARDINGS``; ``seq``: tokens per sample), plus
    ``"largest_batch"`` and ``"largest_batch_note"`` (why there is none) when a ``budget`` (bytes, or text
    such as "16GiB") is given, and ``"cautious_batch"``: the largest whose allocator band fits too, or on a CUDA
    trace what its caching allocator would reserve (``"cautious_by"``: "band" or "reserved").
    ValueError for a bad argument or a log dir with no traced step."""
    what = WhatIf(batch, optimizer, policy, replicas, shard, seq)
    what.check()
    budget_bytes = parse_size(budget) if budget is not None else None
    logged = read_run(logdir, run)
    result = project(logged.trace, logged.breakdown, what)
    result.update(run=logged.run, trace=logged.source, breakdown=logged.breakdown_source or None)
    if logged.unreadable:  # passed over for the next the rule takes (``readers.pairing``), each with why
        result["breakdowns_unreadable"] = logged.unreadable
    if logged.trace.allocations != "all":  # what the trace missed (TF's default CPU allocator: large ones only)
        trace = logged.trace
        result["allocations_note"] = trace.allocations_note or f"allocations recorded: {trace.allocations}"
    if budget_bytes is not None:
        result["budget_bytes"] = budget_bytes
        answer = budget_answer(logged.trace, logged.breakdown, what, budget_bytes)
        result.update(largest_batch=answer["largest_batch"], largest_batch_note=answer["note"],
                      cautious_batch=answer["cautious_batch"], cautious_by=answer["cautious_by"],
                      largest_batch_peak_bytes=answer["largest_batch_peak_bytes"])
    return result
