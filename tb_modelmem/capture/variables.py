"""Every variable of a model and its optimizer, by role and layer: a ``records.Breakdown``.

Reads shapes, dtypes and devices only, never values, so the cost is
O(#variables) however big the model is. Optimizer slots are found by
identity in the optimizer's own per-weight lists (Keras 3) or through
``get_slot`` (TF1), and by name patterns only when that finds nothing.
Roles, slot names and layers follow ``tb_modelmem.rules.roles``, the rules every
other source (checkpoints, model files) follows too. A slot's ``layer`` is its
weight's layer, so a layer's roll-up shows what training it costs; other
optimizer state stays under the optimizer's scope. A ``tf.train.Checkpoint``
may hold several optimizers (a GAN's two): each one's slots are its own.
The one value Keras reads is the learning rate, inside ``get_config``.

TensorFlow is used only when the process has already imported it: a Keras 3 model on torch or
JAX is read through Keras alone (its variables' paths, shapes and dtypes), never importing TF.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import math
import re
import sys
from typing import AbstractSet, Any, Dict, Iterable, List, Optional, Set, Tuple

from tb_modelmem.readers.dtypes import name_size
from tb_modelmem.rules import layers as layer_capture
from tb_modelmem.rules import roles
from tb_modelmem.schema import names, records

Slot = Tuple[str, Any]  # (slot name, the weight variable it belongs to)


def breakdown_of(model: Any = None, optimizer: Any = None) -> records.Breakdown:
    """Breakdown of ``model`` (Keras model/layer, tf.Module, tf.train.Checkpoint, a list
    or dict of variables, nested or not, a PyTorch ``nn.Module``, or None for the TF1 default graph)
    and ``optimizer``."""
    from tb_modelmem.capture import jax_pytrees, torch_modules

    if torch_modules.is_module(model):
        return torch_modules.breakdown_of_module(model, optimizer)
    if jax_pytrees.is_jax_model(model):
        return jax_pytrees.breakdown_of_pytrees(model, optimizer)
    tf = _tf()
    if model is None:
        if tf is None:
            raise ValueError("model=None means the TF1 default graph's global variables, but TensorFlow is not "
                             "in use; pass the model, or a list of its variables")
        if tf.executing_eagerly():
            raise ValueError("model=None means the TF1 default graph's global variables, but TensorFlow is "
                             "executing eagerly; pass the model, a tf.Module or a list of variables")
        return _from_variables(tf.compat.v1.global_variables(), _listed(optimizer), source="tf1")
    if tf is not None and isinstance(model, tf.train.Checkpoint):
        return _from_checkpoint(model, optimizer)
    if _is_keras_layer(model):
        return _from_keras(model, optimizer or getattr(model, "optimizer", None))
    if tf is not None and isinstance(model, tf.Module):
        found = _from_variables(model.variables, _listed(optimizer), source="tf.Module")
        found.model_name = model.name or ""
        return found
    if isinstance(model, collections.abc.Iterable) and not isinstance(model, (str, bytes)):
        return _from_variables(_flat_variables(model), _listed(optimizer), source="variables")
    raise TypeError(
        f"cannot take a variable breakdown of {type(model).__name__}; pass a Keras model or layer, "
        "a PyTorch nn.Module, a tf.Module, a tf.train.Checkpoint, a list or dict of variables, or None (TF1 graph)"
    )


def _tf() -> Any:
    """TensorFlow, when this process has imported it (never imported here: see the module's docstring)."""
    return sys.modules.get("tensorflow")


def _flat_variables(container: Iterable[Any]) -> List[Any]:
    """The variables of a (nested) list, tuple or dict, in ``tf.nest`` order (a dict's by sorted key);
    a TypeError naming anything else, rather than an AttributeError deep inside the capture."""
    found = list(_flattened(container if isinstance(container, (collections.abc.Mapping, list, tuple))
                            else list(container)))
    for item in found:
        if not _is_variable(item):
            raise TypeError(f"expected variables, got a {type(item).__name__} in the {type(container).__name__}")
    return found


def _flattened(nested: Any) -> Iterable[Any]:
    if isinstance(nested, collections.abc.Mapping):
        for key in sorted(nested):
            yield from _flattened(nested[key])
    elif isinstance(nested, (list, tuple)):
        for item in nested:
            yield from _flattened(item)
    else:
        yield nested


def _from_keras(model: Any, optimizer: Any) -> records.Breakdown:
    layers = layer_capture.layer_records(model)
    layer_of = layer_capture.variable_layers(model)
    weights = list(model.variables)
    found = _from_variables(weights, _listed(optimizer), source="keras", layer_of=layer_of,
                            keras_non_trainable=_keras_state_ids(model))
    return dataclasses.replace(found, layers=records.LayerTable.from_rows(layers), model_name=model.name)


def _keras_state_ids(model: Any) -> Set[int]:
    """Ids of the model's untrained state: Keras 3 ``non_trainable_variables`` (non-trainable
    weights plus RNG seeds), Keras 2's ``non_trainable_weights``."""
    return {id(v) for v in getattr(model, "non_trainable_variables", model.non_trainable_weights)}


def _listed(optimizer: Any) -> List[Any]:
    """One optimizer, or several (a GAN's), as a list."""
    if optimizer is None:
        return []
    return [o for o in optimizer if o is not None] if isinstance(optimizer, (list, tuple)) else [optimizer]


def _tracked_paths(root: Any) -> Dict[int, str]:
    """id -> attribute path from the checkpoint ("generator_optimizer"), breadth first."""
    paths, queue = {id(root): ""}, [root]
    while queue:
        obj = queue.pop(0)
        for name, child in _tf().train.TrackableView.children(obj).items():
            if id(child) not in paths:
                paths[id(child)] = f"{paths[id(obj)]}/{name}".lstrip("/")
                queue.append(child)
    return paths


def _from_checkpoint(checkpoint: Any, optimizer: Any) -> records.Breakdown:
    """Walk the checkpoint's object graph: Keras models and optimizers get their
    own treatment (every optimizer in it, each with its own slots), any other
    tracked variable is kept too."""
    objects = _tf().train.TrackableView(checkpoint).descendants()
    keras_layers = [o for o in objects if _is_keras_layer(o)]
    inner = {id(sub) for layer in keras_layers for sub in layer_capture.sublayers(layer, recursive=True)}
    models: List[Any] = []
    covered: Set[int] = set()
    for layer in keras_layers:  # breadth first: a model comes before its internals (Sequential._functional)
        own = {id(v) for v in layer.variables}
        if id(layer) not in inner and not own <= covered:
            models.append(layer)
            covered |= own
    found_optimizers = [o for o in objects if _is_optimizer(o)]
    wrapped = {id(inner) for o in found_optimizers for inner in _keras_optimizers(o)[1:]}
    optimizers = _listed(optimizer) + [o for o in found_optimizers if id(o) not in wrapped and o is not optimizer]
    layer_of: Dict[int, str] = {}
    keras_non_trainable: Set[int] = set()
    variables: List[Any] = []
    layers: List[records.LayerRecord] = []
    for model in models:
        layer_of.update(layer_capture.variable_layers(model))
        keras_non_trainable.update(_keras_state_ids(model))
        variables.extend(model.variables)
        layers.extend(layer_capture.layer_records(model))
    variables.extend(o for o in objects if _is_variable(o))
    found = _from_variables(variables, optimizers, source="checkpoint", layer_of=layer_of,
                            keras_non_trainable=keras_non_trainable)
    if len(optimizers) > 1:
        paths = _tracked_paths(checkpoint)
        found.optimizer = optimizers_summary({paths.get(id(o)) or o.name: o for o in optimizers})
    return dataclasses.replace(found, layers=records.LayerTable.from_rows(layers),
                               model_name=",".join(m.name for m in models))


def _from_variables(variables: Iterable[Any], optimizers: List[Any], source: str,
                    layer_of: Optional[Dict[int, str]] = None,
                    keras_non_trainable: AbstractSet[int] = frozenset()) -> records.Breakdown:
    """Classify model variables plus the optimizers', each variable once.
    ``keras_non_trainable``: ids of variables Keras lists as non-trainable weights."""
    layer_of = layer_of or {}
    all_vars = _unique(list(variables) + [v for opt in optimizers for v in _optimizer_variables(opt)])
    slots: Dict[int, Slot] = {}
    optimizer_state: Set[int] = set()
    for opt in optimizers:
        found_slots, state = _optimizer_slots(opt, all_vars)
        slots.update(found_slots)
        optimizer_state |= state
    if not optimizers:
        slots.update(_slots_by_name(all_vars))
    out = []
    for var in all_vars:
        name = _name(var)
        slot: Optional[Slot] = slots.get(id(var))
        if slot is not None:
            role = names.OPTIMIZER_SLOT
            layer = layer_of.get(id(slot[1]), roles.layer_of(_name(slot[1])))
        elif id(var) in optimizer_state:
            role, layer = names.OTHER, roles.layer_of(name)
        else:
            role = roles.role(name, _dtype(var), _dims_list(static_dims(var)), getattr(var, "trainable", None),
                              keras_state=id(var) in keras_non_trainable)
            layer = layer_of.get(id(var), roles.layer_of(name))
        out.append(_record(var, name, layer, role, slot))
    return records.Breakdown(source=source, variables=records.VariableTable.from_rows(out),
                             optimizer=_summaries(optimizers))


def _summaries(optimizers: List[Any]) -> Optional[Dict[str, Any]]:
    """One optimizer's summary; several (a GAN's) each under its name; None without one."""
    if len(optimizers) <= 1:
        return optimizer_summary(optimizers[0]) if optimizers else None
    named: Dict[str, Any] = {}
    for opt in optimizers:
        name = getattr(opt, "name", "") or type(opt).__name__
        named[name if name not in named else f"{name} ({len(named)})"] = opt
    return optimizers_summary(named)


def _record(var: Any, name: str, layer: str, role: str, slot: Optional[Slot]) -> records.VariableRecord:
    storage = _storage(var)
    tf = _tf()
    distributed = tf is not None and isinstance(storage, tf.distribute.DistributedValues)
    components = list(storage.values) if distributed else [storage]
    shape = _shape(var, components[0])
    dtype = _dtype(var)
    if distributed:  # a mirrored variable: a whole copy on each device
        whole = _whole_bytes(shape, dtype)
        devices = sorted({_device_name(c.device) for c in components if c is not None and getattr(c, "device", None)})
        device_bytes, shards, size = ([whole] * len(devices) if len(devices) > 1 else []), 1, whole * len(components)
    else:
        devices, device_bytes, shards, size = placement(storage, shape, dtype)
    return records.VariableRecord(
        name=name, layer=layer, shape=shape, dtype=dtype, bytes=size, role=role, device=",".join(devices),
        replicas=max(len(devices) // shards if device_bytes and not distributed else len(components), 1),
        device_bytes=device_bytes, shards=shards, slot=slot[0] if slot else None,
        slot_of=_name(slot[1]) if slot else None,
    )


def _whole_bytes(shape: List[int], dtype: str) -> int:
    """Bytes of one whole copy; 0 for a shape with an unknown (-1) dimension."""
    return (0 if any(d < 0 for d in shape) else math.prod(shape)) * name_size(dtype)


def placement(array: Any, shape: List[int], dtype: str) -> Tuple[List[str], List[int], int, int]:
    """(devices, bytes on each, distinct pieces, bytes in all) of one array: a JAX array laid over several
    devices as its sharding lays it (no per-device list for one on a single device)."""
    whole = _whole_bytes(shape, dtype)
    placed = _sharded(array, shape, name_size(dtype))
    if placed is not None:
        devices, device_bytes, shards = placed
        return devices, device_bytes, shards, sum(device_bytes)
    device = getattr(array, "device", None) if array is not None else None
    return ([_device_name(device)] if device and not callable(device) else []), [], 1, whole


def _sharded(array: Any, shape: List[int], itemsize: int) -> Optional[Tuple[List[str], List[int], int]]:
    """(devices, bytes on each, distinct pieces) of a JAX array laid over several devices, from its
    sharding's own index map (what ``addressable_shards`` hold); None for anything else."""
    sharding = getattr(array, "sharding", None)
    index_map = getattr(sharding, "devices_indices_map", None)
    if index_map is None or len(getattr(sharding, "device_set", ())) < 2 or any(d < 0 for d in shape):
        return None
    pieces = {}
    for device, index in sorted(index_map(tuple(shape)).items(), key=lambda kv: kv[0].id):
        spans = tuple(part.indices(size)[:2] if isinstance(part, slice) else (part, part + 1)
                      for part, size in zip(index, shape))
        pieces[_jax_device(device)] = spans
    device_bytes = [math.prod(high - low for low, high in spans) * itemsize for spans in pieces.values()]
    return list(pieces), device_bytes, len(set(pieces.values()))


def _jax_device(device: Any) -> str:
    """A JAX device as TensorFlow and the profiler name it: /device:CPU:3."""
    return f"/device:{str(device.platform).upper()}:{device.id}"


def _device_name(device: Any) -> str:
    """Where one copy lives: TensorFlow's device string, a JAX device by platform and id, else its text."""
    if hasattr(device, "platform") and isinstance(getattr(device, "id", None), int):
        return _jax_device(device)
    return str(device)


def _dtype(var: Any) -> str:
    """The stored dtype's name (float32 under mixed precision: the storage, not the compute dtype),
    whatever the backend holds it as (a TF DType, a torch dtype, a numpy or JAX dtype)."""
    storage = _storage(var)
    dtype = storage.dtype if storage is not None else var.dtype
    tf = _tf()
    if tf is not None and isinstance(dtype, tf.DType):
        return str(dtype.base_dtype.name)
    if isinstance(dtype, str):
        return dtype
    return str(getattr(dtype, "name", None) or dtype).rpartition(".")[2]  # torch.float32 -> float32


def static_dims(var: Any) -> Optional[Tuple[Optional[int], ...]]:
    """The variable's static shape: a size per dimension, None where unknown; None for an
    unknown rank. A Keras variable keeps it as such a tuple, and its ``shape`` makes a new
    TensorShape of it on every read (3 µs, for each variable of every breakdown): read as kept."""
    kept = getattr(var, "_shape", None) if _is_keras_variable(var) else None
    if type(kept) is tuple:
        return kept
    tf = _tf()
    if tf is None:
        return tuple(None if d is None else int(d) for d in var.shape)
    shape = tf.TensorShape(var.shape)
    return None if shape.rank is None else tuple(shape.as_list())


def fully_defined(dims: Optional[Tuple[Optional[int], ...]]) -> bool:
    """True when ``static_dims`` knows every dimension."""
    return dims is not None and None not in dims


def _dims_list(dims: Optional[Tuple[Optional[int], ...]]) -> List[int]:
    """``static_dims`` as a record stores a shape: -1 per unknown dimension, [-1] for an unknown
    rank (enough to tell a scalar counter apart)."""
    return [-1] if dims is None else [-1 if d is None else int(d) for d in dims]


def _shape(var: Any, storage: Any) -> List[int]:
    """The variable's shape; where the static shape is partly unknown (``shape=[None, 3]``,
    or no rank), the shape it holds now, from the resource (VariableShape reads no values).
    In a TF1 graph that shape exists only once run: -1 per unknown dimension, [-1] for an
    unknown rank, and such a variable claims no bytes."""
    dims = static_dims(var)
    handle = getattr(storage, "handle", None)
    tf = _tf()
    if not fully_defined(dims) and tf is not None and tf.executing_eagerly() and handle is not None:
        return [int(d) for d in tf.raw_ops.VariableShape(input=handle, out_type=tf.int64).numpy()]
    return _dims_list(dims)


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
        weights = [w for w in candidates if isinstance(_storage(w), _tf().Variable)]
        for slot_name in optimizer.get_slot_names():
            for weight in weights:
                slot = optimizer.get_slot(_storage(weight), slot_name)
                if slot is not None:
                    slots[id(slot)] = (slot_name, weight)
        state = {id(v) for v in _optimizer_variables(optimizer)} - set(slots)
        return slots, state
    slots = keras_slot_map(optimizer)
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


def keras_slot_map(optimizer: Any) -> Dict[int, Slot]:
    """id(slot variable) -> (slot name, weight) of a Keras 3 optimizer and those it wraps, by
    identity (scripts/gen_keras_slots.py derives the file formats' slot order from this)."""
    slots: Dict[int, Slot] = {}
    for opt in _keras_optimizers(optimizer):
        slots.update(_keras_slot_lists(opt))
    return slots


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
    named = roles.keras_slot_by_name(getattr(slot, "name", ""), [_name(weight)])
    return named[0] if named else attr.strip("_")


def _keras_slots_by_name(optimizer: Any, candidates: List[Any], unclaimed: set) -> Dict[int, Slot]:
    """Fallback for custom optimizers: slots Keras named after their weight (roles.keras_slot_by_name)."""
    weights = {_name(w): w for w in candidates if getattr(w, "trainable", False)}
    slots: Dict[int, Slot] = {}
    for var in _optimizer_variables(optimizer):
        named = roles.keras_slot_by_name(getattr(var, "name", ""), weights) if id(var) in unclaimed else None
        if named:
            slots[id(var)] = (named[0], weights[named[1]])
    return slots


def _slots_by_name(variables: List[Any]) -> Dict[int, Slot]:
    """Without an optimizer: TF1 slots are non-trainable "<weight>/<Slot>[_n]" of a trainable
    weight of the same shape, named as ``get_slot_names`` would name them (roles.tf1_slot_name)."""
    by_name = {_name(v): v for v in variables}
    matches = {id(v): roles.slot_match(_name(v), set(by_name)) for v in variables
               if not getattr(v, "trainable", False)}
    siblings: Dict[str, Set[str]] = {}
    for hit in filter(None, matches.values()):
        siblings.setdefault(hit[0], set()).add(hit[1])
    slots: Dict[int, Slot] = {}
    for var in variables:
        match = matches.get(id(var))
        weight = by_name[match[0]] if match else None
        if match and weight is not None and getattr(weight, "trainable", False) and \
                static_dims(weight) == static_dims(var):
            slots[id(var)] = (roles.tf1_slot_name(match[1], siblings[match[0]]), weight)
    return slots


def optimizers_summary(optimizers: Dict[str, Any]) -> Dict[str, Any]:
    """Several optimizers (a GAN's): "Adam + Adam", and each one's summary under its path."""
    summaries = {path: summary for path, opt in optimizers.items() if (summary := optimizer_summary(opt))}
    return {"class_name": " + ".join(s["class_name"] for s in summaries.values()), "config": summaries}


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


def _unique(variables: List[Any]) -> List[Any]:
    seen, out = set(), []
    for var in variables:
        key = id(_storage(var)) if _storage(var) is not None else id(var)
        if key not in seen:
            seen.add(key)
            out.append(var)
    return out


def _keras() -> Any:
    """Keras, when this process has imported it: an object can be a Keras one only then."""
    return sys.modules.get("keras")


def _is_keras_variable(obj: Any) -> bool:
    keras = _keras()
    return keras is not None and isinstance(obj, keras.Variable)


def _is_keras_layer(obj: Any) -> bool:
    keras = _keras()
    return keras is not None and isinstance(obj, keras.layers.Layer)


def _is_optimizer(obj: Any) -> bool:
    keras, tf = _keras(), _tf()
    return (keras is not None and isinstance(obj, keras.optimizers.Optimizer)) or (
        tf is not None and isinstance(obj, tf.compat.v1.train.Optimizer))


def _is_variable(obj: Any) -> bool:
    tf = _tf()
    return (tf is not None and isinstance(obj, tf.Variable)) or _is_keras_variable(obj)
