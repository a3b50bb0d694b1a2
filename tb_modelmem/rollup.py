"""Per-layer roll-up of a Breakdown, shared by the tab and the CLI so both charge bytes alike. No TF."""

from __future__ import annotations

from typing import Any, Dict, List

from tb_modelmem import roles
from tb_modelmem.capture.layers import scope_layer_records
from tb_modelmem.records import OPTIMIZER_SLOT, OTHER, ROLES, Breakdown, LayerRecord


def layer_owners(record: Breakdown) -> Dict[str, str]:
    """Layer that owns each variable; a slot is charged to the layer of its weight."""
    by_name = {v.name: v.layer for v in record.variables}
    return {v.name: by_name.get(v.slot_of or "", v.layer) if v.role == OPTIMIZER_SLOT else v.layer
            for v in record.variables}


def layer_rollup(record: Breakdown) -> List[Dict[str, Any]]:
    """One row per layer: params with derivation, bytes by role, total. Model order kept.

    Sources without Keras layers (TF1 graphs, checkpoints) get layers from variable scopes.
    """
    owner = layer_owners(record)
    rows: Dict[str, Dict[str, Any]] = {}
    for layer in _layer_records(record):
        rows[layer.name] = {"name": layer.name, "class_name": layer.class_name, "params": layer.params,
                            "derivation": layer.derivation, "bytes": {r: 0 for r in ROLES}}
    for v in record.variables:
        name = owner[v.name] or "(no layer)"
        row = rows.get(name)
        if row is None:  # a scope the layer list does not have: its params are its variables'
            row = rows[name] = {"name": name, "class_name": "", "params": 0, "derivation": "",
                                "bytes": {r: 0 for r in ROLES}, "_count_params": True}
        row["bytes"][v.role if v.role in ROLES else OTHER] += v.bytes
        if "_count_params" in row and roles.is_param(v.name, v.role):
            row["params"] += v.params
    for row in rows.values():
        row.pop("_count_params", None)
        row["total_bytes"] = sum(row["bytes"].values())
    return list(rows.values())


def model_layers(record: Breakdown) -> List[str]:
    """The breakdown's layer paths, in model order."""
    return [layer.name for layer in _layer_records(record)]


def _layer_records(record: Breakdown) -> List[LayerRecord]:
    """Its Keras layers; sources without them (TF1 graphs, checkpoints) get one per variable scope."""
    return record.layers or scope_layer_records(record.variables)
