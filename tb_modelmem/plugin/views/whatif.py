"""The What-if panel's answer: a trace's step projected (``rules.projection``), with its breakdown."""

from __future__ import annotations

from typing import Any, Dict, Optional

from tb_modelmem.plugin.views.trace import TraceView
from tb_modelmem.rules.projection import POLICIES, SHARDINGS, WhatIf, largest_batch, optimizer_choices, project


def whatif_view(view: TraceView, what: WhatIf, budget_bytes: Optional[int]) -> Dict[str, Any]:
    """``project()``'s answer for the joined trace, the choices the panel offers, and the largest
    batch within ``budget_bytes`` (with why there is none) when a budget is asked."""
    breakdown = view.breakdown.record if view.breakdown is not None else None
    body = {"whatif": project(view.trace, breakdown, what), "choices": {
        "optimizers": optimizer_choices(), "policies": list(POLICIES), "shardings": SHARDINGS}}
    if budget_bytes is not None:
        found, note = largest_batch(view.trace, breakdown, what, budget_bytes)
        cautious = largest_batch(view.trace, breakdown, what, budget_bytes, cautious=True)[0] if found else None
        body["budget"] = {"bytes": budget_bytes, "largest_batch": found, "note": note, "cautious_batch": cautious}
    return body
