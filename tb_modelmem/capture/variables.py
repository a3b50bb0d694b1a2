"""Every variable of a model and its optimizer, by role and layer: a ``records.Breakdown``.

Reads shapes, dtypes and devices only, never values, so the cost is
O(#variables) however big the model is. Optimizer slots are found by
identity in the optimizer's own per-weight lists (Keras 3) or through
``get_slot`` (TF1), and by name patterns only when that finds nothing.
A slot's ``layer`` is its weight's layer, so a layer's roll-up shows what
training it costs; other optimizer state stays under the optimizer's scope.
The one value Keras reads is the learning rate, inside ``get_config``.
"""

from __future__ import annotations

import collections.abc
import json
import math
import re
from typing import AbstractSet, Any, Dict, Iterable, List, Optional, Set, Tuple

import tensorflow as tf

from tb_modelmem import records
from tb_modelmem.capture import layers as layer_capture

# TF1 variables that are optimizer or training state but no per-weight slot.
_OTHER_NAMES = re.compile(
    r"(^|/)(beta\d*_power(_\d+)?|global_step|iterations?|learning_rate|lr|loss_scale\w*|good_steps|"
    r"current_loss_scale|num_good_steps|step_counter|dynamic_scale|seed_generator_state)$"
)
# TF1 slot names: "<weight>/<Slot>" or "<weight>/<Slot>_<n>", e.g. "Variable/Adam_1".
_TF1_SLOT_NAME = re.compile(r"^(?P<weight>.+)/(?P<slot>[A-Za-z][A-Za-z0-9]*(_\d+)?)$")

Slot = Tuple[str, Any]  # (slot name, the weight variable it belongs to)


def breakdown(model: Any = None, optimizer: Any = None) -> records.Breakdown:
    """Breakdown of ``model`` (Keras model/layer, tf.Module, tf.train.Checkpoint, a list
    or dict of variables, nested or not, or None for the TF1 default graph) and ``optimizer``."""
    if model is None:
        if tf.executing_eagerly():
            raise ValueError("model=None means the TF1 default graph's global variables, but TensorFlow is "
                             "executing eagerly; pass the model, a tf.Module or a list of variables")
        return _from_variables(tf.compat.v1.global_variables(), optimizer, source="tf1")
    if isinstance(model, tf.train.Checkpoint):
        return _from_checkpoint(model, optimizer)
    if _is_keras_layer(model):
        return _from_keras(model, optimizer or getattr(model, "optimizer", None))
    if isinstance(model, tf.Module):
        found = _from_variables(model.variables, optimizer, source="tf.Module")
        found.model_name = model.name or ""
        return found
    if isinstance(model, collections.abc.Iterable) and not isinstance(model, (str, bytes)):
        return _from_variables(_flat_variables(model), optimizer, source="variables")
    raise TypeError(
        f"cannot take a variable breakdown of {type(model).__name__}; pass a Keras model or layer, "
        "a tf.Module, a tf.train.Checkpoint, a list or dict of variables, or None (TF1 graph)"
    )


def _flat_variables(container: Iterable[Any]) -> List[Any]:
    """The variables of a (nested) list, tuple or dict, in ``tf.nest`` order; a TypeError
    naming anything else, rather than an AttributeError deep inside the capture."""
    nested = container if isinstance(container, (collections.abc.Mapping, list, tuple)) else list(container)
    found = tf.nest.flatten(nested)
    for item in found:
        if not _is_variable(item):
            raise TypeError(f"expected variables, got a {type(item).__name__} in the {type(container).__name__}")
    return found


def _from_keras(model: Any, optimizer: Any) -> records.Breakdown:
    layers = layer_capture.layer_records(model)
    layer_of = layer_capture.variable_layers(model)
    weights = list(model.variables)
    found = _from_variables(weights, optimizer, source="keras", layer_of=layer_of,
                            keras_non_trainable={id(v) for v in model.non_trainable_weights})
    found.layers = layers
    found.model_name = model.name
    return found


def _from_checkpoint(checkpoint: tf.train.Checkpoint, optimizer: Any) -> records.Breakdown:
    """Walk the checkpoint's object graph: Keras models and optimizers get their
    own treatment, any other tracked variable is kept too."""
    objects = tf.train.TrackableView(checkpoint).descendants()
    keras_layers = [o for o in objects if _is_keras_layer(o)]
    inner = {id(sub) for layer in keras_layers for sub in layer_capture.sublayers(layer, recursive=True)}
    models, covered = [], set()
    for layer in keras_layers:  # breadth first: a model comes before its internals (Sequential._functional)
        own = {id(v) for v in layer.variables}
        if id(layer) not in inner and not own <= covered:
            models.append(layer)
            covered |= own
    if optimizer is None:
        optimizer = next((o for o in objects if _is_optimizer(o)), None)
    layer_of: Dict[int, str] = {}
    keras_non_trainable: Set[int] = set()
    variables: List[Any] = []
    layers: List[records.LayerRecord] = []
    for model in models:
        layer_of.update(layer_capture.variable_layers(model))
        keras_non_trainable.update(id(v) for v in model.non_trainable_weights)
        variables.extend(model.variables)
        layers.extend(layer_capture.layer_records(model))
    variables.extend(o for o in objects if _is_variable(o))
    found = _from_variables(variables, optimizer, source="checkpoint", layer_of=layer_of,
                            keras_non_trainable=keras_non_trainable)
    found.layers = layers
    found.model_name = ",".join(m.name for m in models)
    return found


def _from_variables(variables: Iterable[Any], optimizer: Any, source: str,
                    layer_of: Optional[Dict[int, str]] = None,
                    keras_non_trainable: AbstractSet[int] = frozenset()) -> records.Breakdown:
    """Classify model variables plus the optimizer's, each variable once.
    ``keras_non_trainable``: ids of variables Keras lists as non-trainable weights."""
    layer_of = layer_of or {}
    all_vars = _unique(list(variables) + _optimizer_variables(optimizer))
    slots, optimizer_state = _optimizer_slots(optimizer, all_vars)
    if optimizer is None:
        slots.update(_slots_by_name(all_vars))
    out = []
    for var in all_vars:
        name = _name(var)
        slot: Optional[Slot] = slots.get(id(var))
        if slot is not None:
            role = records.OPTIMIZER_SLOT
            layer = layer_of.get(id(slot[1]), _scope(_name(slot[1])))
        else:
            role = _role(var, name, optimizer_state, keras_non_trainable)
            layer = layer_of.get(id(var), _scope(name))
        out.append(_record(var, name, layer, role, slot))
    return records.Breakdown(source=source, variables=out, optimizer=optimizer_summary(optimizer))


def _role(var: Any, name: str, optimizer_state: AbstractSet[int], keras_non_trainable: AbstractSet[int]) -> str:
    if id(var) in optimizer_state:
        return records.OTHER
    if getattr(var, "trainable", False):
        return records.WEIGHT
    if id(var) in keras_non_trainable:  # BatchNorm moving stats, frozen layers' weights, ...
        return records.NON_TRAINABLE
    if _OTHER_NAMES.search(name) or _is_integer(var):  # counters, seed state, ...
        return records.OTHER
    return records.NON_TRAINABLE


def _record(var: Any, name: str, layer: str, role: str, slot: Optional[Slot]) -> records.VariableRecord:
    storage = _storage(var)
    components = list(storage.values) if isinstance(storage, tf.distribute.DistributedValues) else [storage]
    shape = _shape(var, components[0])
    dtype = tf.as_dtype(storage.dtype if storage is not None else var.dtype).base_dtype
    elements = 0 if any(d < 0 for d in shape) else math.prod(shape)
    devices = sorted({c.device for c in components if c is not None and getattr(c, "device", "")})
    return records.VariableRecord(
        name=name, layer=layer, shape=shape, dtype=dtype.name,
        bytes=elements * dtype.size * len(components), role=role, device=",".join(devices),
        replicas=len(components), slot=slot[0] if slot else None, slot_of=_name(slot[1]) if slot else None,
    )


def _shape(var: Any, storage: Any) -> List[int]:
    """The variable's shape; where the static shape is partly unknown (``shape=[None, 3]``,
    or no rank), the shape it holds now, from the resource (VariableShape reads no values).
    In a TF1 graph that shape exists only once run: -1 per unknown dimension, [-1] for an
    unknown rank, and such a variable claims no bytes."""
    static = tf.TensorShape(var.shape)
    if static.is_fully_defined():
        return [int(d) for d in static.as_list()]
    handle = getattr(storage, "handle", None)
    if tf.executing_eagerly() and handle is not None:
        return [int(d) for d in tf.raw_ops.VariableShape(input=handle, out_type=tf.int64).numpy()]
    return [-1] if static.rank is None else [-1 if d is None else int(d) for d in static.as_list()]


def _optimizer_variables(optimizer: Any) -> List[Any]:
    if optimizer is None:
        return []
    found = optimizer.variables
    return list(found() if callable(found) else found)


def _optimizer_slots(optimizer: Any, candidates: List[Any]) -> Tuple[Dict[int, Slot], set]:
    """(slot variable id -> (slot name, weight), ids of non-slot optimizer state)."""
    if optimizer is None:
        return {}, set()
    if hasattr(optimizer, "get_slot_names"):  # TF1 tf.compat.v1.train.Optimizer
        slots = {}
        weights = [w for w in candidates if isinstance(_storage(w), tf.Variable)]
        for slot_name in optimizer.get_slot_names():
            for weight in weights:
                slot = optimizer.get_slot(_storage(weight), slot_name)
                if slot is not None:
                    slots[id(slot)] = (slot_name, weight)
        state = {id(v) for v in _optimizer_variables(optimizer)} - set(slots)
        return slots, state
    slots = {}
    for opt in _keras_optimizers(optimizer):
        slots.update(_keras_slot_lists(opt))
    state = {id(v) for v in _optimizer_variables(optimizer)} - set(slots)
    slots.update(_keras_slots_by_name(optimizer, candidates, state))
    return slots, state - set(slots)


def _keras_optimizers(optimizer: Any) -> List[Any]:
    """The optimizer and those it wraps (LossScaleOptimizer, MultiOptimizer)."""
    found = [optimizer]
    inner = getattr(optimizer, "inner_optimizer", None)
    if inner is not None:
        found += _keras_optimizers(inner)
    for sub in getattr(optimizer, "_inner_optimizers", None) or []:
        found += _keras_optimizers(sub)
    return found


def _keras_slot_lists(optimizer: Any) -> Dict[int, Slot]:
    """Keras 3 optimizers keep one list per slot kind, aligned with
    ``_trainable_variables`` (see ``_get_variable_index``); find them by identity."""
    weights = list(getattr(optimizer, "_trainable_variables", None) or [])
    if not weights:
        return {}
    own = {id(v) for v in _optimizer_variables(optimizer)}
    weight_ids = {id(w) for w in weights}
    slots: Dict[int, Slot] = {}
    for attr, value in vars(optimizer).items():
        if (attr in ("_variables", "_trainable_variables") or isinstance(value, (str, bytes))
                or not isinstance(value, collections.abc.Sequence) or len(value) != len(weights)):
            continue
        for weight, slot in zip(weights, value):
            if slot is not None and id(slot) in own and id(slot) not in weight_ids:
                slots[id(slot)] = (_keras_slot_name(slot, weight, attr), weight)
    return slots


def _keras_slot_name(slot: Any, weight: Any, attr: str) -> str:
    """Keras names slots "<weight path with _>_<slot>"; else use the list's name."""
    prefix = _name(weight).replace("/", "_") + "_"
    name = getattr(slot, "name", "")
    return name[len(prefix):] if name.startswith(prefix) and len(name) > len(prefix) else attr.strip("_")


def _keras_slots_by_name(optimizer: Any, candidates: List[Any], unclaimed: set) -> Dict[int, Slot]:
    """Fallback for custom optimizers: ``add_variable_from_reference`` names slots
    "<weight path with _>_<slot>"; the longest matching weight prefix wins."""
    weights = {_name(w).replace("/", "_") + "_": w for w in candidates if getattr(w, "trainable", False)}
    slots: Dict[int, Slot] = {}
    for var in _optimizer_variables(optimizer):
        name = getattr(var, "name", "")
        if id(var) not in unclaimed:
            continue
        prefixes = [name[:i + 1] for i, ch in enumerate(name[:-1]) if ch == "_" and name[:i + 1] in weights]
        if prefixes:
            slots[id(var)] = (name[len(prefixes[-1]):], weights[prefixes[-1]])
    return slots


def _slots_by_name(variables: List[Any]) -> Dict[int, Slot]:
    """Without an optimizer: TF1 slots are non-trainable "<weight>/<Slot>[_n]"."""
    by_name = {_name(v): v for v in variables}
    slots: Dict[int, Slot] = {}
    for var in variables:
        match = _TF1_SLOT_NAME.match(_name(var))
        if match and not getattr(var, "trainable", False) and match["weight"] in by_name:
            weight = by_name[match["weight"]]
            if getattr(weight, "trainable", False) and tf.TensorShape(weight.shape) == tf.TensorShape(var.shape):
                slots[id(var)] = (match["slot"], weight)
    return slots


def optimizer_summary(optimizer: Any) -> Optional[Dict[str, Any]]:
    """{"class_name", "config"} with a JSON-safe config (what isn't JSON becomes a string).

    TF1 optimizers have no config, and a Keras one's ``get_config`` raises for a learning
    rate schedule that does not define its own (legal for training): then the config is
    the optimizer's plain hyper-parameter attributes, so the breakdown is never lost to it."""
    if optimizer is None:
        return None
    try:
        config = optimizer.get_config() if hasattr(optimizer, "get_config") else None
    except Exception:
        config = None
    if config is None:
        config = {k.lstrip("_"): v for k, v in vars(optimizer).items()
                  if isinstance(v, (bool, int, float, str)) and not k.startswith(("__", "_self_"))}
    return {"class_name": type(optimizer).__name__, "config": _json_safe(config)}


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return str(value)


def _storage(var: Any) -> Any:
    """The backend variable behind a Keras 3 variable (no read, no autocast)."""
    return getattr(var, "_value", None) if _is_keras_variable(var) else var


def _name(var: Any) -> str:
    path = getattr(var, "path", None) if _is_keras_variable(var) else None
    return path or re.sub(r":\d+$", "", var.name)


def _scope(name: str) -> str:
    return name.rsplit("/", 1)[0] if "/" in name else ""


def _unique(variables: List[Any]) -> List[Any]:
    seen, out = set(), []
    for var in variables:
        key = id(_storage(var)) if _storage(var) is not None else id(var)
        if key not in seen:
            seen.add(key)
            out.append(var)
    return out


def _is_integer(var: Any) -> bool:
    return tf.as_dtype(var.dtype).base_dtype.is_integer


def _is_keras_variable(obj: Any) -> bool:
    import keras

    return isinstance(obj, keras.Variable)


def _is_keras_layer(obj: Any) -> bool:
    import keras

    return isinstance(obj, keras.layers.Layer)


def _is_optimizer(obj: Any) -> bool:
    import keras

    return isinstance(obj, (keras.optimizers.Optimizer, tf.compat.v1.train.Optimizer))


def _is_variable(obj: Any) -> bool:
    return isinstance(obj, tf.Variable) or _is_keras_variable(obj)
