"""Per-layer roll-up of a Breakdown, shared by the tab and the CLI so both charge bytes alike. No TF."""

from __future__ import annotations

import itertools
import operator
from typing import Any, Dict, List, Optional, Set, Tuple

from tb_modelmem.rules import roles
from tb_modelmem.rules.layers import scope_layer_records
from tb_modelmem.schema.names import OPTIMIZER_SLOT, OTHER, ROLES
from tb_modelmem.schema.records import Breakdown, LayerTable, element_counts

NO_LAYER = "(no layer)"  # the row of variables under no layer (TF1 ``beta1_power``, optimizer counters)


def owner_column(record: Breakdown) -> List[str]:
    """The layer that owns each variable, in the breakdown's variable order; a slot is charged
    to the layer of its weight."""
    columns = record.variables.columns
    layer, role, slot_of = columns["layer"], columns["role"], columns["slot_of"]
    by_name = dict(zip(columns["name"], layer))
    names_a_weight = map(operator.is_not, slot_of, itertools.repeat(None))
    not_a_slot = map(operator.ne, role, itertools.repeat(OPTIMIZER_SLOT))
    if "" not in by_name and not any(map(operator.and_, names_a_weight, not_a_slot)):
        return list(map(by_name.get, slot_of, layer))  # only slots name a weight: the whole column in C
    owners = list(layer)
    for i in itertools.compress(range(len(owners)), map(OPTIMIZER_SLOT.__eq__, role)):
        owners[i] = by_name.get(slot_of[i] or "", owners[i])
    return owners


def layer_columns(record: Breakdown, owners: Optional[List[str]] = None,
                  counts: Optional[List[int]] = None) -> Dict[str, Any]:
    """One entry per layer, column by column: ``name``, ``class_name``, ``params`` with its
    ``derivation``, ``bytes`` by role (``{role: [...]}``), ``total_bytes``, and what its own
    variables hold as parameters (``roles.param_flags``: not RNG state): ``owned_params`` and
    ``param_bytes``. Model order kept; owners the layer list lacks (variable scopes, NO_LAYER)
    follow it.

    Sources without Keras layers (TF1 graphs, checkpoints) get layers from variable scopes.
    ``owners``: the record's ``owner_column``, ``counts`` its variables' ``element_counts``, when the
    caller has them already.
    """
    layers = _layer_table(record).columns
    names: List[str] = []
    at: Dict[str, int] = {}
    class_names: List[str] = []
    params: List[int] = []
    derivations: List[str] = []
    for name, class_name, count, derivation in zip(layers["name"], layers["class_name"], layers["params"],
                                                  layers["derivation"]):
        if name in at:  # a repeated layer: its last figures, at its first place
            i = at[name]
            class_names[i], params[i], derivations[i] = class_name, count, derivation
            continue
        at[name] = len(names)
        names.append(name)
        class_names.append(class_name)
        params.append(count)
        derivations.append(derivation)
    by_role = {role: [0] * len(names) for role in ROLES}
    columns = record.variables.columns
    owners = owners or owner_column(record)
    grouped: Dict[Tuple[str, str], int] = {}  # one dict update per variable; one column update per group
    for key, size in zip(zip(owners, columns["role"]), columns["bytes"]):
        grouped[key] = grouped.get(key, 0) + size
    # What each layer's own variables hold as parameters (``roles.param_flags``: RNG state is none),
    # grouped alike: a layer reachable at two paths (a sublayer shared by two parents) owns its
    # variables at one of them only, so the sums of a composite count each parameter once.
    owned: Dict[str, List[int]] = {}  # owner -> [elements, bytes]
    counted = roles.param_flags(columns["name"], columns["role"])
    for owner, count, size in itertools.compress(zip(owners, counts or element_counts(columns["shape"]),
                                                     columns["bytes"]), counted):
        if count and not size:  # a tied parameter's second name (GPT-2's lm_head): counted under its first
            continue
        found = owned.get(owner)
        if found is None:
            owned[owner] = [count, size]
        else:
            found[0] += count
            found[1] += size
    scopes: Set[str] = set()  # owners the layer list does not have
    for (owner, role), size in grouped.items():
        owner = owner or NO_LAYER
        place = at.get(owner)
        if place is None:
            place = at[owner] = len(names)
            names.append(owner)
            class_names.append("")
            params.append(0)
            derivations.append("")
            for values in by_role.values():
                values.append(0)
            scopes.add(owner)
        by_role[role if role in ROLES else OTHER][place] += size
    owned_params, param_bytes = [0] * len(names), [0] * len(names)
    for owner, (count, size) in owned.items():
        place = at[owner or NO_LAYER]
        owned_params[place] += count
        param_bytes[place] += size
    for owner in scopes:  # owners the layer list does not have: their params are their variables'
        params[at[owner]] = owned_params[at[owner]]
    return {"name": names, "class_name": class_names, "params": params, "derivation": derivations,
            "bytes": by_role, "total_bytes": list(map(sum, zip(*by_role.values()))),
            "owned_params": owned_params, "param_bytes": param_bytes}


def layer_rollup(record: Breakdown) -> List[Dict[str, Any]]:
    """``layer_columns`` as one row per layer (``{"name", ..., "bytes": {role: n}, "total_bytes"}``)."""
    columns = layer_columns(record)
    by_role = columns["bytes"]
    return [{"name": name, "class_name": class_name, "params": count, "derivation": derivation,
             "bytes": {role: by_role[role][i] for role in ROLES}, "total_bytes": total}
            for i, (name, class_name, count, derivation, total) in enumerate(zip(
                columns["name"], columns["class_name"], columns["params"], columns["derivation"],
                columns["total_bytes"]))]


def model_layers(record: Breakdown) -> List[str]:
    """The breakdown's layer paths, in model order."""
    return list(_layer_table(record).column("name"))


def _layer_table(record: Breakdown) -> LayerTable:
    """Its Keras layers; sources without them (TF1 graphs, checkpoints) get one per variable scope."""
    return record.layers or LayerTable.from_rows(scope_layer_records(record.variables))
