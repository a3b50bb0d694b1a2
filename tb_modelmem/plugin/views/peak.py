"""The peak split for a trace joined with a ``BreakdownView``: the view's cached vocabulary handed to the
one rule (``rules.peak``), so the Ops and Timeline answers and What-if read the same resident state."""

from __future__ import annotations

from typing import Any, Dict, Optional

from tb_modelmem.plugin.views.breakdown import BreakdownView
from tb_modelmem.rules import peak as rules_peak
from tb_modelmem.schema.records import OpTrace


def resident(trace: OpTrace, breakdown: Optional[BreakdownView]) -> Optional[Dict[str, int]]:
    """``rules.peak.resident_state`` of the trace with the view's breakdown (its vocabulary built once)."""
    if breakdown is None:
        return rules_peak.resident_state(trace, None)
    return rules_peak.resident_state(trace, breakdown.record, breakdown.vocabulary.variable_layer)


def not_held(trace: OpTrace, breakdown: Optional[BreakdownView]) -> Dict[str, str]:
    """``rules.peak.state_not_held`` of the trace with the view's breakdown."""
    return rules_peak.state_not_held(trace, breakdown.record if breakdown is not None else None)


def peak_by_category(trace: OpTrace, breakdown: Optional[BreakdownView]) -> Dict[str, Any]:
    """``rules.peak.peak_by_category`` with the view's breakdown."""
    return rules_peak.peak_by_category(trace, resident(trace, breakdown), not_held(trace, breakdown))


def peak_notes(trace: OpTrace, breakdown: Optional[BreakdownView], peak: Dict[str, Any]) -> Dict[str, str]:
    """``rules.peak.peak_notes`` with the view's breakdown."""
    return rules_peak.peak_notes(trace, resident(trace, breakdown), peak)
