"""Per-layer roll-up of a Breakdown, shared by the tab and the CLI so both charge bytes alike. No TF."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from tb_modelmem import roles
from tb_modelmem.capture.layers import scope_layer_records
from tb_modelmem.records import OPTIMIZER_SLOT, OTHER, ROLES, Breakdown, LayerTable, element_count

NO_LAYER = "(no layer)"  # the row of variables under no layer (TF1 ``beta1_power``, optimizer counters)


def owner_column(record: Breakdown) -> List[str]:
    """The layer that owns each variable, in the breakdown's variable order; a slot is charged
    to the layer of its weight."""
    columns = record.variables.columns
    by_name = dict(zip(columns["name"], columns["layer"]))
    return [by_name.get(slot_of or "", layer) if role == OPTIMIZER_SLOT else layer
            for layer, role, slot_of in zip(columns["layer"], columns["role"], columns["slot_of"])]


def layer_rollup(record: Breakdown, owners: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    """One row per layer: params with derivation, bytes by role, total. Model order kept.

    Sources without Keras layers (TF1 graphs, checkpoints) get layers from variable scopes.
    ``owners``: the record's ``owner_column``, when the caller has it already.
    """
    layers = _layer_table(record).columns
    rows: Dict[str, Dict[str, Any]] = {
        name: {"name": name, "class_name": class_name, "params": params, "derivation": derivation,
               "bytes": dict.fromkeys(ROLES, 0)}
        for name, class_name, params, derivation in zip(layers["name"], layers["class_name"], layers["params"],
                                                        layers["derivation"])}
    columns = record.variables.columns
    owners = [owner or NO_LAYER for owner in (owners or owner_column(record))]
    by_owner_role: Dict[Tuple[str, str], int] = {}  # one dict update per variable; rows per group below
    for key, size in zip(zip(owners, columns["role"]), columns["bytes"]):
        by_owner_role[key] = by_owner_role.get(key, 0) + size
    scopes = set()  # owners the layer list does not have: their params are their variables'
    for (owner, role), size in by_owner_role.items():
        row = rows.get(owner)
        if row is None:
            row = rows[owner] = {"name": owner, "class_name": "", "params": 0, "derivation": "",
                                 "bytes": dict.fromkeys(ROLES, 0)}
            scopes.add(owner)
        row["bytes"][role if role in ROLES else OTHER] += size
    if scopes:
        for owner, name, role, shape in zip(owners, columns["name"], columns["role"], columns["shape"]):
            if owner in scopes and roles.is_param(name, role):
                rows[owner]["params"] += element_count(shape)
    for row in rows.values():
        row["total_bytes"] = sum(row["bytes"].values())
    return list(rows.values())


def model_layers(record: Breakdown) -> List[str]:
    """The breakdown's layer paths, in model order."""
    return list(_layer_table(record).column("name"))


def _layer_table(record: Breakdown) -> LayerTable:
    """Its Keras layers; sources without them (TF1 graphs, checkpoints) get one per variable scope."""
    return record.layers or LayerTable.from_rows(scope_layer_records(record.variables))
