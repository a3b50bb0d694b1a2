"""Breakdown of a TF checkpoint from its index and metadata, never its tensor values.

Handles TF1 name-based checkpoints (``Saver``: ``model.ckpt`` prefix, optional
``.meta`` graph) and TF2 object-based ones (``tf.train.Checkpoint``), whose
object graph tells optimizer slots from weights. Byte offsets come from the
``.index`` table itself, so every byte of every file is either a variable or a
named overhead line: ``sum(variables) + sum(overhead) == file_bytes``.
"""

from __future__ import annotations

import math
import os
import re
import struct
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from tb_modelmem.messages import first_line
from tb_modelmem.records import NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, WEIGHT, Breakdown, VariableRecord

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_BYTES = 48

# Last name component of counters, hyper-parameters and other non-model state.
OTHER_NAMES = {
    "global_step", "beta1_power", "beta2_power", "iter", "iteration", "iterations", "learning_rate", "lr",
    "decay", "beta_1", "beta_2", "epsilon", "rho", "save_counter", "loss_scale", "current_loss_scale",
    "good_steps", "momentum_cache", "u_product",
}
NON_TRAINABLE_NAMES = {"moving_mean", "moving_variance", "moving_avg", "moving_stddev", "num_batches_tracked"}
# TF1 optimizers name slots "<var>/<Optimizer>", "<var>/<Optimizer>_1", ... in creation order.
_TF1_SLOTS = {
    "Adam": ["m", "v"], "Momentum": ["momentum"], "RMSProp": ["rms", "momentum"],
    "Adagrad": ["accumulator"], "ProximalAdagrad": ["accumulator"], "Adadelta": ["accum", "accum_update"],
    "Ftrl": ["accum", "linear"], "AdagradDA": ["gradient_accumulator", "gradient_squared_accumulator"],
    "AdaMax": ["m", "v"], "ExponentialMovingAverage": ["average"],
}
_CENTERED_RMSPROP = ["rms", "mg", "momentum"]
# Training op type (without Resource/Sparse prefixes) -> tf.compat.v1.train optimizer.
_TF1_APPLY_OPS = {
    "ApplyAdam": "AdamOptimizer", "ApplyMomentum": "MomentumOptimizer", "ApplyKerasMomentum": "MomentumOptimizer",
    "ApplyRMSProp": "RMSPropOptimizer", "ApplyCenteredRMSProp": "RMSPropOptimizer",
    "ApplyAdagrad": "AdagradOptimizer", "ApplyAdagradV2": "AdagradOptimizer", "ApplyAdadelta": "AdadeltaOptimizer",
    "ApplyFtrl": "FtrlOptimizer", "ApplyFtrlV2": "FtrlOptimizer", "ApplyGradientDescent": "GradientDescentOptimizer",
    "ApplyProximalAdagrad": "ProximalAdagradOptimizer", "ApplyAdagradDA": "AdagradDAOptimizer",
    "ApplyAdaMax": "AdaMaxOptimizer",
}


class InspectError(ValueError):
    """This path cannot be read as a model or checkpoint; the message is one line for the user."""


def find_prefix(path: str) -> str:
    """The checkpoint prefix for a prefix, an ``.index``/``.data-*`` file, or a checkpoint folder."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        import tensorflow as tf

        try:
            latest = tf.train.latest_checkpoint(path)
        except (ValueError, tf.errors.OpError):  # a 'checkpoint' state file that is not text (it only
            # points at a prefix: fall back to the folder's .index files)
            latest = None
        if latest and os.path.exists(latest + ".index"):
            return latest
        indexes = sorted(f for f in os.listdir(path) if f.endswith(".index"))
        if len(indexes) == 1:
            return os.path.join(path, indexes[0][: -len(".index")])
        pointer = ("its 'checkpoint' file names no checkpoint here" if os.path.exists(os.path.join(path, "checkpoint"))
                   else "no 'checkpoint' file")
        raise InspectError(f"{path}: no checkpoint in this folder ({pointer} and {len(indexes)} *.index files)")
    prefix = re.sub(r"(\.index|\.data-\d{5}-of-\d{5}|\.meta)$", "", path)
    if os.path.exists(prefix + ".index"):
        return prefix
    raise InspectError(f"{path}: not a checkpoint (no {os.path.basename(prefix)}.index next to it)")


def read_checkpoint(path: str) -> Breakdown:
    """Breakdown of the checkpoint at ``path`` (prefix, file or folder), reconciled to the byte."""
    prefix = find_prefix(path)
    entries, num_shards = _read_index(prefix + ".index")
    shapes, dtypes = _shape_and_dtype_maps(prefix)
    graph = _object_graph(prefix) if OBJECT_GRAPH_KEY in shapes else None
    meta = _meta_graph(prefix + ".meta") if graph is None and os.path.exists(prefix + ".meta") else None

    numeric = {k for k in shapes if k != OBJECT_GRAPH_KEY and dtypes[k].is_numpy_compatible
               and dtypes[k].name not in ("string", "variant", "resource")}
    shape_of = {k: [int(d) for d in shapes[k]] for k in numeric}
    dtype_of = {k: dtypes[k].name for k in numeric}
    size_of = {k: math.prod(shape_of[k]) * dtypes[k].size for k in numeric}
    if graph is not None:
        variables, optimizer = _classify_object_graph(graph, shape_of, dtype_of, size_of)
        source = "checkpoint (TF2 object-based)"
    else:
        trainable = _trainable_names(meta) if meta is not None else None
        variables = _classify_names(shape_of, dtype_of, size_of, trainable)
        optimizer = _tf1_optimizer(meta, variables)
        source = "checkpoint (TF1 name-based)"
    overhead, file_bytes = _reconcile(prefix, num_shards, entries, numeric, size_of)
    return Breakdown(source=source, variables=variables, model_name=os.path.basename(prefix),
                     optimizer=optimizer, file_bytes=file_bytes, overhead=overhead)


def _shape_and_dtype_maps(prefix: str) -> Tuple[dict, dict]:
    import tensorflow as tf

    try:
        reader = tf.train.load_checkpoint(prefix)
        return reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    except (tf.errors.OpError, ValueError) as e:
        raise InspectError(f"{prefix}: unreadable checkpoint ({first_line(e)})") from None


# --- the .index file: a LevelDB-style table of BundleEntryProto ---------------------------

def _read_index(index_path: str) -> Tuple[Dict[str, object], int]:
    """Every entry of the bundle index (key -> BundleEntryProto) and the number of data shards."""
    from tensorflow.core.protobuf import tensor_bundle_pb2

    with open(index_path, "rb") as f:
        data = f.read()
    try:
        entries: Dict[str, object] = {}
        num_shards = 1
        for key, value in _table_items(data):
            if key == b"":
                header = tensor_bundle_pb2.BundleHeaderProto.FromString(value)
                num_shards = max(1, header.num_shards)
            else:
                entries[key.decode("utf-8", "replace")] = tensor_bundle_pb2.BundleEntryProto.FromString(value)
    except Exception as e:  # any fault in the table is a corrupt file for the user
        raise InspectError(f"{index_path}: corrupt checkpoint index ({type(e).__name__}: {e})") from None
    return entries, num_shards


def _table_items(data: bytes) -> Iterator[Tuple[bytes, bytes]]:
    if len(data) < _FOOTER_BYTES:
        raise ValueError("file shorter than a table footer")
    footer = data[-_FOOTER_BYTES:]
    if struct.unpack("<Q", footer[-8:])[0] != _TABLE_MAGIC:
        raise ValueError("bad table magic number")
    _, pos = _handle(footer, 0)  # metaindex block: unused by tensor bundles
    index_handle, _ = _handle(footer, pos)
    for _, handle in _block_items(_block(data, index_handle)):
        for item in _block_items(_block(data, _handle(handle, 0)[0])):
            yield item


def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _handle(buf: bytes, pos: int) -> Tuple[Tuple[int, int], int]:
    offset, pos = _varint(buf, pos)
    size, pos = _varint(buf, pos)
    return (offset, size), pos


def _block(data: bytes, handle: Tuple[int, int]) -> bytes:
    offset, size = handle
    if offset + size + 5 > len(data):
        raise ValueError("block runs past the end of the file (truncated?)")
    if data[offset + size] != 0:
        raise ValueError("compressed index blocks are not supported")
    return data[offset:offset + size]


def _block_items(block: bytes) -> Iterator[Tuple[bytes, bytes]]:
    num_restarts = struct.unpack("<I", block[-4:])[0]
    end = len(block) - 4 - 4 * num_restarts
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        value_len, pos = _varint(block, pos)
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        yield key, block[pos:pos + value_len]
        pos += value_len


# --- reconciliation ------------------------------------------------------------------------

def _reconcile(prefix: str, num_shards: int, entries: Dict[str, object], numeric: Set[str],
               size_of: Dict[str, int]) -> Tuple[List[dict], int]:
    """Overhead lines so that variables + overhead == the checkpoint's files on disk."""
    overhead: List[dict] = []
    shards = [f"{prefix}.data-{i:05d}-of-{num_shards:05d}" for i in range(num_shards)]
    missing = [s for s in shards if not os.path.exists(s)]
    if missing:
        raise InspectError(f"{prefix}: data shard missing: {os.path.basename(missing[0])}")
    shard_bytes = [os.path.getsize(s) for s in shards]
    for key, entry in entries.items():
        if entry.size and (entry.shard_id >= num_shards or entry.offset + entry.size > shard_bytes[entry.shard_id]):
            raise InspectError(f"{prefix}: truncated or corrupt checkpoint ({key!r} runs past the end of its .data shard)")
    data_bytes = sum(shard_bytes)
    accounted = sum(size_of.values())
    # Keys starting with NUL are slices of partitioned variables: their bytes are the variable's.
    for key in sorted(k for k in entries if k not in numeric and not k.startswith("\x00") and entries[k].size):
        what = "object graph (_CHECKPOINTABLE_OBJECT_GRAPH)" if key == OBJECT_GRAPH_KEY else f"non-numeric tensor {key!r}"
        overhead.append({"what": f"{what} in .data", "bytes": int(entries[key].size)})
        accounted += int(entries[key].size)
    if data_bytes != accounted:
        overhead.append({"what": ".data bytes not attributed to a variable (padding, slices)",
                         "bytes": data_bytes - accounted})
    file_bytes = data_bytes
    extras = [(prefix + ".index", ".index file (tensor names, shapes, offsets)"),
              (prefix + ".meta", ".meta file (TF1 graph, MetaGraphDef)"),
              (os.path.join(os.path.dirname(prefix), "checkpoint"), "'checkpoint' state file (latest-prefix pointer)")]
    for path, what in extras:
        if os.path.isfile(path):
            overhead.append({"what": what, "bytes": os.path.getsize(path)})
            file_bytes += os.path.getsize(path)
    return overhead, file_bytes


# --- TF1 name-based classification ---------------------------------------------------------

def _meta_graph(path: str) -> Any:  # MetaGraphDef
    from tensorflow.core.protobuf import meta_graph_pb2

    try:
        with open(path, "rb") as f:
            return meta_graph_pb2.MetaGraphDef.FromString(f.read())
    except Exception as e:
        raise InspectError(f"{path}: unreadable .meta graph ({type(e).__name__})") from None


def _trainable_names(meta: Any) -> Optional[Set[str]]:
    from tensorflow.core.framework import variable_pb2

    coll = meta.collection_def.get("trainable_variables")
    if coll is None or not coll.bytes_list.value:
        return None
    names = set()
    for raw in coll.bytes_list.value:
        var = variable_pb2.VariableDef.FromString(raw)
        names.add((var.save_slice_info_def.full_name or var.variable_name).split(":")[0])
    return names


def slot_match(name: str, stored: Set[str]) -> Optional[Tuple[str, str]]:
    """(slot_of, suffix) if ``name`` is a slot of another stored variable (TF1 or Keras 2 naming)."""
    if "/" not in name:
        return None
    base, suffix = name.rsplit("/", 1)
    if base in stored:
        return base, suffix
    if "/" in base:  # Keras 2 optimizers: "<Optimizer>/<var>/<slot>"
        rest = base.split("/", 1)[1]
        if rest in stored:
            return rest, suffix
    return None


def _tf1_slot_name(suffix: str, siblings: Set[str]) -> str:
    m = re.fullmatch(r"(.*?)(?:_(\d+))?", suffix)
    opt, index = m.group(1), int(m.group(2) or 0)
    names = _TF1_SLOTS.get(opt)
    if opt == "RMSProp" and f"{opt}_2" in siblings:
        names = _CENTERED_RMSPROP
    if names and index < len(names):
        return names[index]
    return suffix


def _classify_names(shape_of: Dict[str, List[int]], dtype_of: Dict[str, str], size_of: Dict[str, int],
                    trainable: Optional[Set[str]]) -> List[VariableRecord]:
    stored = set(shape_of)
    slots = {k: slot_match(k, stored) for k in stored}
    suffixes: Dict[str, Set[str]] = {}
    for k, hit in slots.items():
        if hit:
            suffixes.setdefault(hit[0], set()).add(hit[1])
    records = []
    for name in sorted(stored):
        slot = slot_of = None
        if slots[name]:
            slot_of, suffix = slots[name]
            slot = _tf1_slot_name(suffix, suffixes[slot_of])
            role = OPTIMIZER_SLOT
        else:
            role = _role_by_name(name, dtype_of[name], shape_of[name], trainable)
        owner = slot_of or name
        layer = owner.rsplit("/", 1)[0] if "/" in owner else owner
        records.append(VariableRecord(name=name, layer=layer, shape=shape_of[name], dtype=dtype_of[name],
                                      bytes=size_of[name], role=role, slot=slot, slot_of=slot_of))
    return records


def _role_by_name(name: str, dtype: str, shape: List[int], trainable: Optional[Set[str]]) -> str:
    last = name.rsplit("/", 1)[-1]
    if last in OTHER_NAMES or (not shape and dtype.startswith("int")):
        return OTHER
    if last in NON_TRAINABLE_NAMES:
        return NON_TRAINABLE
    if trainable is not None and name not in trainable:
        return NON_TRAINABLE
    return WEIGHT


def _tf1_optimizer(meta: Any, variables: List[VariableRecord]) -> Optional[dict]:
    """The TF1 optimizer class and its constant hyper-parameters from the graph's training ops."""
    if meta is not None:
        from tensorflow.python.framework import op_def_registry

        nodes = {n.name: n for n in meta.graph_def.node}
        for node in meta.graph_def.node:
            op = re.sub(r"^(Resource)?(Sparse)?", "", node.op)
            if op in _TF1_APPLY_OPS:
                args = [a.name for a in op_def_registry.get(node.op).input_arg]
                config = {}
                for arg, inp in zip(args, node.input):
                    value = _const_scalar(nodes, inp)
                    if value is not None:
                        config[arg] = value
                return {"class_name": f"tf.compat.v1.train.{_TF1_APPLY_OPS[op]}", "config": config,
                        "recorded_in": f".meta graph (op {node.op})"}
    opts = set()
    for v in variables:
        if v.role == OPTIMIZER_SLOT:  # "<var>/Adam_1" (TF1) or "Adam/<var>/m" (Keras 2)
            base = re.sub(r"_\d+$", "", v.name.rsplit("/", 1)[1])
            opts.add(base if base in _TF1_SLOTS else v.name.split("/", 1)[0])
    if opts:
        return {"class_name": "/".join(sorted(opts)), "config": {}, "recorded_in": "slot variable names only"}
    return None


def _const_scalar(nodes: Dict[str, Any], name: str) -> Any:
    """Value of a scalar Const feeding a training op (through Cast/Identity), else None."""
    import tensorflow as tf

    node = nodes.get(name.split(":")[0].lstrip("^"))
    while node is not None and node.op in ("Cast", "Identity") and node.input:
        node = nodes.get(node.input[0].split(":")[0])
    if node is None or node.op != "Const":
        return None
    tensor = node.attr["value"].tensor
    if tensor.tensor_shape.dim:
        return None
    return tf.make_ndarray(tensor).item()


# --- TF2 object-based classification -------------------------------------------------------

def _object_graph(prefix: str) -> Any:  # TrackableObjectGraph
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    try:
        raw = tf.train.load_checkpoint(prefix).get_tensor(OBJECT_GRAPH_KEY)
        return trackable_object_graph_pb2.TrackableObjectGraph.FromString(raw)
    except Exception as e:
        raise InspectError(f"{prefix}: unreadable object graph ({first_line(e)})") from None


def _list_items(graph: Any, node_id: int) -> List[int]:
    """Children of a tracked list node in index order ("0", "1", ...), or [] if not a list."""
    children = graph.nodes[node_id].children
    if not children or not all(c.local_name.isdigit() for c in children):
        return []
    return [c.node_id for c in sorted(children, key=lambda c: int(c.local_name))]


def _singular(name: str) -> str:
    name = name.lstrip("_")
    if name.endswith("ies"):
        return name[:-3] + "y"
    return name[:-1] if name.endswith("s") and len(name) > 2 else name


def _classify_object_graph(graph: Any, shape_of: Dict[str, List[int]], dtype_of: Dict[str, str], size_of: Dict[str, int]
                           ) -> Tuple[List[VariableRecord], Optional[dict]]:
    key_of: Dict[int, str] = {}
    for i, node in enumerate(graph.nodes):
        for attr in node.attributes:
            if attr.name == "VARIABLE_VALUE" and attr.checkpoint_key in shape_of:
                key_of[i] = attr.checkpoint_key
    slot_info: Dict[int, Tuple[int, str]] = {}
    optimizers: Set[int] = set()
    trainable: Set[int] = set()
    roles: Dict[int, str] = {}
    for i, node in enumerate(graph.nodes):
        for sv in node.slot_variables:  # legacy optimizers (tf.keras 2, tf.compat.v1 in eager)
            slot_info[sv.slot_variable_node_id] = (sv.original_variable_node_id, sv.slot_name)
            trainable.add(sv.original_variable_node_id)
            optimizers.add(i)
        child = {c.local_name: c.node_id for c in node.children}
        if "_iterations" in child and "_trainable_variables" in child:  # Keras 3 optimizer
            optimizers.add(i)
            weights = _list_items(graph, child["_trainable_variables"])
            trainable.update(weights)
            for local, cid in child.items():
                items = _list_items(graph, cid)
                if local not in ("_variables", "_trainable_variables") and items and len(items) == len(weights):
                    for w, s in zip(weights, items):
                        slot_info.setdefault(s, (w, _singular(local)))
            for cid in (_list_items(graph, child["_variables"]) if "_variables" in child else []):
                roles.setdefault(cid, OPTIMIZER_SLOT)
            for local in ("_iterations", "_learning_rate"):
                if local in child:
                    roles[child[local]] = OTHER
    names = _object_paths(graph, optimizers)
    records = []
    seen_keys = set()
    for i, key in sorted(key_of.items(), key=lambda kv: names.get(kv[0], kv[1])):
        seen_keys.add(key)
        name = names.get(i, key[: -len(_VALUE_SUFFIX)] if key.endswith(_VALUE_SUFFIX) else key)
        slot = slot_of = None
        if i in slot_info and roles.get(i) != OTHER:
            orig, slot = slot_info[i]
            slot_of = names.get(orig, "")
            role = OPTIMIZER_SLOT
        elif i in roles:
            role = roles[i]
            if role == OPTIMIZER_SLOT and not shape_of[key]:
                role = OTHER
        elif trainable and i in trainable:
            role = WEIGHT
        else:
            role = _role_by_name(name, dtype_of[key], shape_of[key], None)
            if role == WEIGHT and trainable:
                role = NON_TRAINABLE
        owner = slot_of or name
        layer = owner.rsplit("/", 1)[0] if "/" in owner else owner
        records.append(VariableRecord(name=name, layer=layer, shape=shape_of[key], dtype=dtype_of[key],
                                      bytes=size_of[key], role=role, slot=slot, slot_of=slot_of))
    rest = {k: shape_of[k] for k in shape_of if k not in seen_keys}
    if rest:  # keys without an object-graph node: fall back to name rules
        records += _classify_names(rest, dtype_of, size_of, None)
    slots = sorted({r.slot for r in records if r.slot})
    optimizer = None
    if slots:
        optimizer = {"class_name": "", "config": {}, "slots": slots,
                     "recorded_in": "not recorded: an object-based checkpoint stores slots, not the optimizer class"}
    return records, optimizer


def _object_paths(graph: Any, optimizers: Set[int]) -> Dict[int, str]:
    """A readable path per node: shortest path from the root, through the model before the optimizer."""
    paths: Dict[int, str] = {0: ""}
    for through_optimizer in (False, True):
        frontier = list(paths) if through_optimizer else [0]
        while frontier:
            nxt = []
            for nid in frontier:
                if nid in optimizers and not through_optimizer:
                    continue
                for c in graph.nodes[nid].children:
                    if c.node_id not in paths:
                        paths[c.node_id] = f"{paths[nid]}/{c.local_name}".lstrip("/")
                        nxt.append(c.node_id)
            frontier = nxt
    return {k: _tidy(v) for k, v in paths.items()}


def _tidy(path: str) -> str:
    """Drop Keras tracking prefixes ("_functional/", leading "_") so paths read like layer names."""
    parts = [p.lstrip("_") or p for p in path.split("/") if p != "_functional"]
    return "/".join(parts)
