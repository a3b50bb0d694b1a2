"""Every array of a JAX model and its optimizer when no Keras holds them: a ``records.Breakdown``.

What people train on JAX without Keras keeps its state in pytrees, each leaf named by its path as the
framework names it (so Storage, an orbax checkpoint and the ops of a step meet on the same names):

- flax nnx: a ``Module``'s variables (``nnx.state``) by attribute path (``conv1.kernel``):
  ``Param`` a weight, RNG state (``RngKey``, ``RngCount``) other, every other variable (``BatchStat``,
  a custom one) non-trainable; its modules are the layers, the model's own class the root's;
- flax linen: the ``variables`` dict ``init`` returns (``{"params": ..., "batch_stats": ...}``) or its
  ``params`` alone: the params collection weights, the other collections non-trainable, named by
  their path inside the collection (``block0.Dense_0.kernel``, ``batch_stats.BatchNorm_0.mean``);
- equinox, or any pytree of arrays: its array leaves, floating ones weights, the others non-trainable;
- the optimizer: an ``nnx.Optimizer``, or the optax state ``tx.init(params)`` returns. A leaf whose
  path ends with a parameter's path (``mu.conv1.kernel``) is that parameter's slot, named by the state
  field above it (``mu``, ``nu``, ``trace``, Adafactor's ``v_row``); a scalar (``count``, a step) is
  other, and so is a per-element leaf that no parameter's path ends, as ``roles.optimizer_variable_role``
  says.

Sharded arrays count per device as Keras-on-JAX variables do (``variables.placement``). Each array
is counted once, under its first name. Reads shapes, dtypes and shardings only, never values.
Needs jax (the caller's process has it); never imports Keras, TensorFlow, flax or optax itself.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from tb_modelmem.capture.variables import placement
from tb_modelmem.rules import roles
from tb_modelmem.rules.layers import scope_layer_records
from tb_modelmem.schema.names import JAX_BREAKDOWN_SOURCES, NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, WEIGHT
from tb_modelmem.schema.records import Breakdown, LayerRecord, LayerTable, VariableRecord, VariableTable

Path = Tuple[Any, ...]  # a leaf's keys: attribute names, dict keys, sequence indices
_RNG_VARIABLES = ("RngKey", "RngCount", "RngState")
_PARAMS = "params"  # linen's trainable collection


def is_jax_model(model: Any) -> bool:
    """A flax nnx or equinox module, or a pytree (dict, list, tuple) whose leaves are all JAX arrays
    (linen's variables, a params dict): what this module reads. jax is not imported to ask."""
    if _is_nnx(model) \
            or _is_equinox(model) or _is_train_state(model):
        return True
    jax = sys.modules.get("jax")
    if jax is None or not isinstance(model, (Mapping, list, tuple)) or not model:
        return False
    leaves = jax.tree_util.tree_leaves(model)  # a FrozenDict's, a dict's; Python numbers beside arrays allowed
    return (any(isinstance(leaf, jax.Array) for leaf in leaves)
            and all(isinstance(leaf, (jax.Array, int, float, bool)) for leaf in leaves))


def arrays_of(model: Any, optimizer: Any = None) -> List[Any]:
    """Every array of ``model`` and ``optimizer`` (what the step's program takes as its state)."""
    return [array for _, array, _ in _leaves(model)] + [array for _, array, _ in _leaves(optimizer)]


def breakdown_of_pytrees(model: Any, optimizer: Any = None) -> Breakdown:
    """Breakdown of ``model`` and ``optimizer`` (see the module's docstring). A flax ``TrainState`` is its
    ``params`` and, unless ``optimizer`` is given, its ``opt_state``."""
    transformation = getattr(optimizer, "tx", None)  # nnx.Optimizer's, a TrainState's: what the state cannot say
    if _is_train_state(model):
        if optimizer is None or optimizer is model.opt_state:
            optimizer, transformation = model.opt_state, model.tx
        model = {_PARAMS: model.params}
    counted: Set[int] = set()
    rows: List[VariableRecord] = []
    params: Dict[Path, VariableRecord] = {}
    nnx_model = _is_nnx(model)
    linen = isinstance(model, Mapping) and _PARAMS in model and all(isinstance(v, Mapping) for v in model.values())
    root = root_layer(model) if nnx_model else ""  # the nnx model's own variables: its class's layer

    def layer_of(path: Path) -> str:
        return _layer(path) or root

    def add(path: Path, array: Any, role: str, layer: str, name: str, slot: Optional[str] = None,
            slot_of: Optional[str] = None) -> VariableRecord:
        record = _record(name, layer, array, role, slot, slot_of, counted)
        rows.append(record)
        return record

    for path, array, kind in _leaves(model):
        if linen:
            collection, path = str(path[0]), path[1:]
            role = WEIGHT if collection == _PARAMS else NON_TRAINABLE
            name = _dotted(path) if collection == _PARAMS else _dotted((collection,) + path)
        else:
            role = _role(kind, array)
            name = _dotted(path)
        record = add(path, array, role, layer_of(path), name)
        if role == WEIGHT:
            params.setdefault(path, record)
    for path, array, kind in _leaves(optimizer):
        owner, field = _owner(path, params)
        name = _dotted(("optimizer",) + path)
        if owner is not None:
            add(path, array, OPTIMIZER_SLOT, layer_of(owner), name, field, params[owner].name)
        else:
            add(path, array, roles.optimizer_variable_role(name, list(array.shape)), "", name)
    model_name = type(model).__name__ if nnx_model or not isinstance(model, (Mapping, list, tuple)) else ""
    layers = scope_layer_records(r for r in rows if r.bytes or r.role != OPTIMIZER_SLOT)
    if nnx_model:
        layers = _module_layers(model, layers)
    found = Breakdown(source=_source(model), variables=VariableTable.from_rows(rows), model_name=model_name,
                      layers=LayerTable.from_rows(layers))
    if optimizer is not None:
        found.optimizer = _optimizer_record(optimizer, any(r.role == OPTIMIZER_SLOT for r in rows), transformation)
    return found


def root_layer(model: Any) -> str:
    """The layer of a model's own call, outside its submodules: its class name (no attribute path is one)."""
    return type(model).__name__


def module_paths(model: Any) -> Iterable[Tuple[str, Any]]:
    """(layer path, module) of every flax nnx module in ``model``, the model itself first as ``root_layer``."""
    from flax import nnx

    for path, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Module):
            yield (_layer(tuple(path) + ("",)) if path else root_layer(model)), node


def _module_layers(model: Any, counted: List[LayerRecord]) -> List[LayerRecord]:
    """Every module of an nnx model in its order, with its class and the variables it holds itself."""
    by_name = {record.name: record for record in counted}
    out = []
    for layer, module in sorted(module_paths(model), key=lambda pair: pair[0] != root_layer(model)):
        record = by_name.pop(layer, None) or LayerRecord(name=layer, class_name="", params=0)
        record.class_name = type(module).__name__
        out.append(record)
    return out + list(by_name.values())  # variables of the root module itself (layer "")


def _leaves(tree: Any) -> List[Tuple[Path, Any, str]]:
    """(path, array, variable kind) of every array leaf: an nnx object's variables (kind: the variable's
    class), else the pytree's leaves (kind "")."""
    if tree is None:
        return []
    if _framework_class(tree, ("flax.nnx",), ("Module", "Object", "Pytree", "Optimizer")):
        from flax import nnx

        return [(tuple(path), variable.get_value(), type(variable).__name__)
                for path, variable in nnx.to_flat_state(nnx.state(tree)) if _is_array(variable.get_value())]
    import jax

    found = jax.tree_util.tree_flatten_with_path(tree)[0]
    return [(tuple(_key(k) for k in path), leaf, "") for path, leaf in found if _is_array(leaf)]


def _key(entry: Any) -> Any:
    """A path entry's key: a dict key, an attribute's name, a sequence index."""
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return getattr(entry, attr)
    return str(entry)


def _role(kind: str, array: Any) -> str:
    """An nnx variable's role by its class; a plain pytree leaf's by its dtype (what gets a gradient)."""
    if kind:
        return WEIGHT if kind == "Param" else OTHER if kind in _RNG_VARIABLES else NON_TRAINABLE
    import jax.numpy as jnp

    return WEIGHT if jnp.issubdtype(array.dtype, jnp.inexact) else NON_TRAINABLE


def _owner(path: Path, params: Dict[Path, VariableRecord]) -> Tuple[Optional[Path], Optional[str]]:
    """The parameter an optimizer leaf belongs to (the longest parameter path its own path ends with),
    and the state field that names it (the nearest named key above), or (None, None)."""
    for start in range(1, len(path)):
        owner = path[start:]
        if owner in params:
            field = next((str(k) for k in reversed(path[:start]) if isinstance(k, str)), None)
            return owner, field
    return None, None


def _dotted(path: Sequence[Any]) -> str:
    return ".".join(str(k) for k in path)


def _layer(path: Path) -> str:
    """The layer of a leaf: the path of the module holding it, "/"-separated as every layer path is."""
    return "/".join(str(k) for k in path[:-1])


def _record(name: str, layer: str, array: Any, role: str, slot: Optional[str], slot_of: Optional[str],
            counted: Set[int]) -> VariableRecord:
    shape = [int(d) for d in array.shape]
    dtype = str(array.dtype)
    devices, device_bytes, shards, total = placement(array, shape, dtype)
    if id(array) in counted:  # one array under two names (tied, shared): its memory once
        total, device_bytes = 0, [0] * len(device_bytes)
    counted.add(id(array))
    replicas = max(len(devices) // shards, 1) if device_bytes else 1
    return VariableRecord(name=name, layer=layer, shape=shape, dtype=dtype, bytes=total, role=role,
                          device=",".join(devices), replicas=replicas, device_bytes=device_bytes, shards=shards,
                          slot=slot, slot_of=slot_of)


def _optimizer_record(optimizer: Any, slots: bool, transformation: Any = None) -> Dict[str, Any]:
    """{"class_name", "config"}: the optimizer family optax's state says (``_OPTAX_FAMILIES``: what What if
    recomputes the state of; a chain's, such as clipping then AdamW, found anywhere in it), "" when it says
    none; AdamW where ``transformation``'s parts decay Adam's update (``_decays``). The config names the
    state's classes, the parts and the holder. ``slots``: whether any leaf is a slot."""
    tx_state = getattr(optimizer, "opt_state", None)
    state = tx_state if tx_state is not None else optimizer
    states = list(_state_classes(state))
    stateless: Tuple[str, Dict[str, Any]] = ("SGD", {}) if not slots else ("", {})  # nothing per parameter
    family = next((_OPTAX_FAMILIES[s] for s in states if s in _OPTAX_FAMILIES), stateless)
    holder = "nnx.Optimizer" if tx_state is not None else "optax state"
    # the transformation's parts say what the state cannot, such as AdamW's decay (its state is Adam's)
    transforms = _optax_transforms(transformation)
    named = _DECAYED.get(family[0], family[0]) if _decays(transforms, state) else family[0]
    said = {"optax_transforms": transforms} if transforms else {}
    return {"class_name": named, "config": {**family[1], "optax_state": states, **said, "holder": holder}}


# optax's state classes -> (the Keras optimizer whose state has the same layout, its flags): Adam and AdamW
# keep two moments per parameter and a count, SGD with momentum a trace, Adafactor factored moments; a state
# with nothing per parameter (optax.sgd without momentum) is laid out as plain SGD
_OPTAX_FAMILIES: Dict[str, Tuple[str, Dict[str, Any]]] = {
    "ScaleByAdamState": ("Adam", {}), "TraceState": ("SGD", {"momentum": True}),
    "FactoredState": ("Adafactor", {}), "ScaleByRmsState": ("RMSprop", {}),
}


# optax's family -> the Keras class with the same state that also decays the weights (optax.adamw chains
# scale_by_adam with add_decayed_weights)
_DECAYED: Dict[str, str] = {"Adam": "AdamW"}
_OPTAX_PLUMBING = ("chain", "with_extra_args_support")  # what joins transforms, none itself


def _decays(transforms: List[str], state: Any) -> bool:
    """Whether the update decays the weights after Adam's moments, as ``optax.adamw`` does (not before them:
    L2 on the gradient; not ``lamb``, which scales by a trust ratio after): by the transformation's parts, or
    ``inject_hyperparams``' state naming a ``weight_decay``."""
    if "scale_by_adam" in transforms and "scale_by_trust_ratio" not in transforms:
        adam = transforms.index("scale_by_adam")
        return transforms[adam + 1:adam + 2] == ["add_decayed_weights"]
    return any("weight_decay" in getattr(part, "hyperparams", {}) for part in _state_parts(state))


def _optax_transforms(tx: Any) -> List[str]:
    """The optax transforms ``tx`` chains, in order ("clip_by_global_norm", "scale_by_adam",
    "add_decayed_weights", "scale"): the names of the ``update_fn``s its update closes over, read, never
    called; [] where it is no optax transformation or says none."""
    found: List[str] = []
    seen: Set[int] = set()

    def walk(function: Any, depth: int) -> None:
        for cell in (getattr(function, "__closure__", None) or ()) if depth < 8 else ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            for part in value if isinstance(value, (tuple, list)) else (value,):
                if callable(part) and id(part) not in seen:
                    seen.add(id(part))
                    owner, _, inner = str(getattr(part, "__qualname__", "")).partition(".<locals>.")
                    if inner == "update_fn" and owner not in _OPTAX_PLUMBING and owner not in found:
                        found.append(owner)
                    walk(part, depth + 1)

    try:  # what a closure holds is the user's: anything it raises leaves the parts unknown, never the capture
        walk(getattr(tx, "update", None), 0)
    except Exception:  # noqa: BLE001
        return []
    return found


def _state_classes(state: Any) -> Iterable[str]:
    """The class names of an optax state's parts, outermost first (``_state_parts``)."""
    for part in _state_parts(state):
        if type(part).__name__ != "EmptyState":
            yield type(part).__name__


def _state_parts(state: Any, depth: int = 0) -> Iterable[Any]:
    """An optax state's NamedTuple parts, outermost first: a chain's tuple, a NamedTuple state and what it
    holds (``inject_hyperparams``' inner state), a few levels down."""
    if depth > 8 or not isinstance(state, (tuple, list)):
        return
    if hasattr(state, "_fields"):
        yield state
    for part in state:
        yield from _state_parts(part, depth + 1)


def _is_nnx(obj: Any) -> bool:
    """A flax nnx module (or another nnx object holding variables)."""
    return _framework_class(obj, ("flax.nnx",), ("Module", "Object", "Pytree"))


def _is_equinox(obj: Any) -> bool:
    return _framework_class(obj, ("equinox",), ("Module",))


def _is_train_state(obj: Any) -> bool:
    """flax's ``TrainState`` (flax.training.train_state), or one derived from it."""
    return _framework_class(obj, ("flax.training",), ("TrainState",))


def _source(model: Any) -> str:
    """One of ``names.JAX_BREAKDOWN_SOURCES``."""
    if _is_nnx(model):
        return JAX_BREAKDOWN_SOURCES[0]
    if _is_equinox(model):
        return JAX_BREAKDOWN_SOURCES[1]
    return JAX_BREAKDOWN_SOURCES[2]


def _framework_class(obj: Any, modules: Tuple[str, ...], names: Tuple[str, ...]) -> bool:
    return obj is not None and any(c.__module__.startswith(modules) and c.__name__ in names
                                   for c in type(obj).__mro__)


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "sharding")
