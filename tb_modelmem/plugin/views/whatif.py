"""The What-if panel's answer: a trace's step projected (``rules.projection``), with its breakdown."""

from __future__ import annotations

from typing import Any, Dict, Optional

from tb_modelmem.plugin.views.trace import TraceView
from tb_modelmem.rules.projection import budget_answer, precision_unknown, project
from tb_modelmem.rules.projection_state import POLICIES, SHARDINGS, WhatIf, is_torch_run, optimizer_choices


def whatif_view(view: TraceView, what: WhatIf, budget_bytes: Optional[int]) -> Dict[str, Any]:
    """``project()``'s answer for the joined trace, the choices the panel offers, and the largest
    batch within ``budget_bytes`` (with why there is none) when a budget is asked."""
    breakdown = view.breakdown.record if view.breakdown is not None else None
    torch = is_torch_run(view.trace, breakdown)
    fixed = precision_unknown(view.trace, torch)  # autocast, XLA or torch's kernels set it, not a policy
    body = {"whatif": project(view.trace, breakdown, what), "choices": {
        "optimizers": optimizer_choices(torch), "policies": [] if fixed else list(POLICIES), "shardings": SHARDINGS}}
    if fixed:
        body["choices"]["policy_note"], body["choices"]["policy_as_traced"] = fixed
    if budget_bytes is not None:
        body["budget"] = {"bytes": budget_bytes, **budget_answer(view.trace, breakdown, what, budget_bytes)}
    return body
