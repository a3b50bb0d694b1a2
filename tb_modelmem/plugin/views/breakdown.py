"""A breakdown ready to serve: totals by role, the layer tree, and its variables as a pageable table."""

from __future__ import annotations

import collections
import functools
from typing import Any, Dict, Optional

from tb_modelmem.plugin.views.pager import Pager
from tb_modelmem.plugin.views.trees import layer_tree
from tb_modelmem.rules import devices
from tb_modelmem.rules.join import Vocabulary
from tb_modelmem.rules.rollup import layer_columns, owner_column
from tb_modelmem.schema.records import Breakdown, LoadBench, element_counts

VARIABLE_FIELDS = ("name", "layer", "shape", "dtype", "params", "bytes", "role", "slot", "slot_of", "device",
                   "replicas", "shards", "device_bytes")


class BreakdownView:
    """A breakdown ready to serve: totals, the layer tree, and its variables as a pageable table."""

    def __init__(self, record: Breakdown) -> None:
        self.record = record
        columns = dict(record.variables.columns)
        owners = owner_column(record)
        columns["params"] = element_counts(columns["shape"])
        own = layer_columns(record, owners, columns["params"])
        self.totals = {role: sum(values) for role, values in own["bytes"].items()}  # every variable is on one layer
        # each layer's own figures, by path (a trace's layer rows take theirs from here)
        self.layer_own = own
        self.layer_at = {name: i for i, name in enumerate(own["name"])}
        # as answers carry it: built once, held (and counted) by the store
        shown = {field: values for field, values in own.items() if field not in ("name", "param_bytes")}
        # a layer reachable at two paths (shared by two parents): its parameters are counted at the path
        # owning its variables; the other path's row says how many it shares (Keras counts them in each parent)
        shown["shared_params"] = [max(count - owned, 0) for count, owned in zip(own["params"], own["owned_params"])]
        self.layer_table = layer_tree(own["name"], shown, sums=("params", "owned_params", "shared_params",
                                                                "total_bytes"),
                                      nested=("bytes",), composite={"params": "owned_params"},
                                      root=self.root)
        del self.layer_table["columns"]["owned_params"]
        self._owners = owners
        self.total_params = sum(own["owned_params"])  # every parameter is owned by one layer
        # each role's element count (a tied weight's alias, 0 B, once): the Weights card's is model.parameters()'
        self.params_by_role: Dict[str, int] = collections.Counter()
        for role, count, size in zip(columns["role"], columns["params"], columns["bytes"]):
            if size:
                self.params_by_role[role] += count
        self.variables = Pager({f: columns[f] for f in VARIABLE_FIELDS}, "bytes")

    @property
    def root(self) -> str:
        """The model's own layer, whose submodules' paths do not start with it (``layer_tree``'s root):
        a PyTorch or flax model's class name; "" where the layers are under the model's name (Keras)."""
        name = self.record.model_name
        return name if name and "/" not in name and name in self.layer_at else ""

    @functools.cached_property
    def vocabulary(self) -> Vocabulary:
        """Its layers and variable owners, for joining a trace (built when the first trace asks)."""
        return Vocabulary.from_breakdown(self.record, self._owners)

    def summary(self) -> Dict[str, Any]:
        record = self.record
        return {
            "source": record.source, "model_name": record.model_name, "optimizer": record.optimizer,
            "optimizer_summary": optimizer_summary(record.optimizer),
            "file_bytes": record.file_bytes, "overhead": record.overhead, "totals": self.totals,
            "total_bytes": sum(self.totals.values()), "variable_count": len(record.variables),
            "total_params": self.total_params, "params_by_role": dict(self.params_by_role),
            "layers": self.layer_table, "devices": self.devices,
        }

    @functools.cached_property
    def devices(self) -> Optional[Dict[str, Any]]:
        """What each device holds, by role, when the variables lie over several (None: one device):
        the busiest device, and every variable counted once (the global sizes) beside it."""
        columns = self.record.variables.columns
        if not devices.spread(columns):
            return None
        rows = [{"device": name, "by_role": by_role, "total_bytes": sum(by_role.values())}
                for name, by_role in devices.per_device(columns).items()]
        logical: Dict[str, int] = collections.Counter()
        for role, size in zip(columns["role"], devices.logical_bytes(columns)):
            logical[role] += size
        return {"rows": rows, "busiest": devices.busiest(columns), "logical": dict(logical),
                "logical_total": sum(logical.values()),
                "sharded_variables": sum(1 for shards in columns["shards"] if shards > 1),
                "replicated_variables": sum(1 for shards, replicas in zip(columns["shards"], columns["replicas"])
                                            if shards == 1 and replicas > 1)}


MAX_SUMMARY_TEXT = 2000  # characters of an optimizer's one-line summary


def optimizer_summary(optimizer: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """What a breakdown's optimizer config says, readable where its raw JSON is not (a
    LossScaleOptimizer holds its inner optimizer as a serialized object): ``{"text",
    "optimizers"}``, each optimizer ``{"name", "class_name", "settings", "nested", "text"}``,
    its settings the config's plain values and ``nested`` the serialized objects it holds (a
    wrapped optimizer, a learning-rate schedule) summarised alike. Several optimizers (a GAN's)
    are one entry each; None without a config."""
    if not isinstance(optimizer, dict) or not isinstance(optimizer.get("class_name"), str):
        return None
    config = optimizer.get("config")
    if isinstance(config, dict) and config and all(map(_serialized, config.values())):  # several, by name
        parts = [dict(_described(value), name=name) for name, value in config.items()]
        text = "; ".join(f"{part['name']}: {part['text']}" for part in parts)
    else:
        parts = [_described(optimizer)]
        text = parts[0]["text"]
    return {"text": text[:MAX_SUMMARY_TEXT], "optimizers": parts}


def _serialized(value: Any) -> bool:
    """A Keras serialized object (``{"class_name", "config"}``): an optimizer, a schedule."""
    return isinstance(value, dict) and isinstance(value.get("class_name"), str) and "config" in value


def _described(entry: Dict[str, Any], depth: int = 0) -> Dict[str, Any]:
    config = entry.get("config")
    config = config if isinstance(config, dict) else {}
    name = config.get("name")
    settings = {key: value for key, value in config.items() if key != "name" and _plain(value)}
    nested = {key: _described(value, depth + 1) for key, value in config.items()
              if _serialized(value) and depth < 8}
    text = f"{entry['class_name']}({', '.join(f'{key}={_shown(value)}' for key, value in settings.items())})"
    text += "".join(f"; {key}: {part['text']}" for key, part in nested.items()) + _groups_text(entry.get("groups"))
    return {"name": name if isinstance(name, str) else "", "class_name": entry["class_name"], "settings": settings,
            "nested": nested, "text": text[:MAX_SUMMARY_TEXT]}


def _groups_text(groups: Any) -> str:
    """A torch optimizer's param groups (``optimizer_record``'s "groups"): "; 2 param groups: 4 parameters as
    above, 2 parameters with weight_decay=0"; where none sets its own, "; 2 param groups, the same settings: 25
    parameters, 40 parameters" (Trainer's decay and no-decay groups at weight_decay=0); "an empty one" for a group
    of none; "" for one group."""
    if not isinstance(groups, list) or len(groups) < 2 or not all(
            isinstance(g, dict) and isinstance(g.get("params"), list) and isinstance(g.get("config"), dict)
            for g in groups):
        return ""
    alike = not any(group["config"] for group in groups)
    each = []
    for group in groups:
        own = ", ".join(f"{key}={_shown(value)}" for key, value in group["config"].items())
        others = group.get("others")
        count = len(group["params"]) + (others if isinstance(others, int) and others > 0 else 0)
        each.append("an empty one" if not count else  # Trainer's no-decay group of a LoRA adapter, say
                    f"{count} parameter{'' if count == 1 else 's'}"
                    + ("" if alike else f" with {own}" if own else " as above"))
    return f"; {len(groups)} param groups{', the same settings' if alike else ''}: {', '.join(each)}"


def _plain(value: Any) -> bool:
    """A setting the summary shows: a number, a flag, a string, or a list of them (torch's ``betas``)."""
    scalar = (bool, int, float, str)
    return isinstance(value, scalar) or isinstance(value, list) and bool(value) and all(
        isinstance(item, scalar) for item in value)


def _shown(value: Any) -> str:
    """A setting as the summary writes it: a float32 learning rate as 0.001, not 0.0010000000474974513; a list
    (torch's ``betas``) item by item."""
    if isinstance(value, list):
        return f"({', '.join(_shown(item) for item in value[:8])}{', ...' if len(value) > 8 else ''})"
    return format(value, ".7g") if isinstance(value, float) else repr(value)


def loadbench_view(record: LoadBench) -> Dict[str, Any]:
    return {"model_name": record.model_name, "results": [r.to_dict() for r in record.results]}
