"""Breakdown of a TF checkpoint from its index and metadata, never its tensor values. No TF.

Handles TF1 name-based checkpoints (``Saver``: ``model.ckpt`` prefix, optional
``.meta`` graph) and TF2 object-based ones (``tf.train.Checkpoint``), whose
object graph tells optimizer slots from weights. Shapes, dtypes and byte offsets come
from the ``.index`` table itself (parsed here, checked entry by entry before anything
trusts it), the object graph from its bytes in the ``.data`` shard, the ``.meta`` graph
through TensorBoard's protos: TensorFlow is never imported. Every byte of every file is
either a variable or a named overhead line: ``sum(variables) + sum(overhead) == file_bytes``.
Roles, slots and layers follow ``tb_modelmem.rules.roles``, as every other source does.
"""

from __future__ import annotations

import math
import os
import re
import struct
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from tb_modelmem import proto
from tb_modelmem.readers.bounded import (
    GRAPH_LIMIT,
    INDEX_LIMIT,
    STATE_LIMIT,
    InspectError,
    file_size,
    read_file,
    read_range,
)
from tb_modelmem.readers.dtypes import dtype_name, dtype_size
from tb_modelmem.rules import roles
from tb_modelmem.schema.names import OPTIMIZER_SLOT, OTHER
from tb_modelmem.schema.records import Breakdown, VariableRecord, VariableTable

__all__ = ["InspectError", "find_prefix", "read_checkpoint"]

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_BYTES = 48
_MAX_RANK = 254  # TensorShape's own limit
_MAX_SHARDS = 1 << 16  # shards a real checkpoint splits into are a handful; each must exist as a file
_DT_STRING = 7
_MAX_ORIGINALS = 16  # lists tried as the original of a list of copies (Keras' export: one)
# Training op type (without Resource/Sparse prefixes) -> tf.compat.v1.train optimizer.
_TF1_APPLY_OPS = {
    "ApplyAdam": "AdamOptimizer", "ApplyMomentum": "MomentumOptimizer", "ApplyKerasMomentum": "MomentumOptimizer",
    "ApplyRMSProp": "RMSPropOptimizer", "ApplyCenteredRMSProp": "RMSPropOptimizer",
    "ApplyAdagrad": "AdagradOptimizer", "ApplyAdagradV2": "AdagradOptimizer", "ApplyAdadelta": "AdadeltaOptimizer",
    "ApplyFtrl": "FtrlOptimizer", "ApplyFtrlV2": "FtrlOptimizer", "ApplyGradientDescent": "GradientDescentOptimizer",
    "ApplyProximalAdagrad": "ProximalAdagradOptimizer", "ApplyAdagradDA": "AdagradDAOptimizer",
    "ApplyAdaMax": "AdaMaxOptimizer",
}


# Files a folder may hold that inspect reads one at a time (PyTorch's, safetensors, Keras'), named when a folder
# holds no TensorFlow checkpoint
_MODEL_FILES = (".pt", ".pth", ".bin", ".ckpt", ".safetensors", ".keras", ".h5")


def find_prefix(path: str) -> str:
    """The checkpoint prefix for a prefix, an ``.index``/``.data-*`` file, or a checkpoint folder."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        latest = _latest_checkpoint(path)
        if latest and os.path.exists(latest + ".index"):
            return latest
        indexes = sorted(f for f in os.listdir(path) if f.endswith(".index"))
        if len(indexes) == 1:
            return os.path.join(path, indexes[0][: -len(".index")])
        pointer = ("its 'checkpoint' file names no checkpoint here" if os.path.exists(os.path.join(path, "checkpoint"))
                   else "no 'checkpoint' file")
        files = sorted(f for f in os.listdir(path) if f.endswith(_MODEL_FILES))[:3]
        named = f"; it holds {', '.join(files)}: inspect one of them" if files else ""
        if not files and _holds_event_files(path):
            named = ("; it is a TensorBoard log dir: open it with tensorboard --logdir, or project a run's traced "
                     f"step with tb-modelmem estimate {path} --run RUN")
        raise InspectError(f"{path}: no TensorFlow checkpoint in this folder ({pointer} and {len(indexes)} *.index "
                           f"files){named}")
    prefix = re.sub(r"(\.index|\.data-\d{5}-of-\d{5}|\.meta)$", "", path)
    if os.path.exists(prefix + ".index"):
        return prefix
    raise InspectError(f"{path}: not a checkpoint (no {os.path.basename(prefix)}.index next to it)")


def _holds_event_files(folder: str, depth: int = 3, most: int = 2000) -> bool:
    """Whether ``folder`` or a folder up to ``depth`` below it holds TensorBoard event files (a log dir given to
    inspect), looking at no more than ``most`` entries."""
    seen = 0
    for root, dirs, names in os.walk(folder):
        seen += len(names) + len(dirs)
        if any(".tfevents." in name for name in names):
            return True
        if root[len(folder):].count(os.sep) >= depth - 1:
            dirs.clear()
        if seen > most:
            return False
    return False


def _latest_checkpoint(folder: str) -> Optional[str]:
    """The prefix a folder's 'checkpoint' state file names (a CheckpointState in text format:
    ``model_checkpoint_path: "ckpt-3"``), as ``tf.train.latest_checkpoint`` reads it; None if
    there is none or it is not readable text (it only points: the folder's .index files remain)."""
    from google.protobuf import text_encoding

    state = os.path.join(folder, "checkpoint")
    if not os.path.lexists(state):
        return None
    try:
        text = read_file(state, STATE_LIMIT, "'checkpoint' state file").decode("utf-8")
    except (InspectError, UnicodeDecodeError):
        return None
    found = re.search(r'^\s*model_checkpoint_path\s*:\s*"((?:[^"\\]|\\.)*)"', text, re.M)
    if not found:
        return None
    try:
        named = text_encoding.CUnescape(found.group(1)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    return named if os.path.isabs(named) else os.path.join(folder, named)


def read_checkpoint(path: str) -> Breakdown:
    """Breakdown of the checkpoint at ``path`` (prefix, file or folder), reconciled to the byte."""
    prefix = find_prefix(path)
    index_path = prefix + ".index"
    entries, num_shards = _read_index(index_path)
    shard_bytes = _shard_sizes(prefix, num_shards)
    numeric = _check_entries(index_path, entries, num_shards, shard_bytes)
    shape_of = {k: [int(d.size) for d in entries[k].shape.dim] for k in numeric}
    dtype_of = {k: dtype_name(entries[k].dtype) for k in numeric}
    size_of = {k: math.prod(shape_of[k]) * dtype_size(entries[k].dtype) for k in numeric}
    graph = _object_graph(prefix, entries, num_shards) if OBJECT_GRAPH_KEY in entries else None
    meta = _meta_graph(prefix + ".meta") if graph is None and os.path.lexists(prefix + ".meta") else None
    copies: List[dict] = []
    if graph is not None:
        variables, optimizer, copies = _classify_object_graph(graph, shape_of, dtype_of, size_of)
        source = "checkpoint (TF2 object-based)"
    else:
        trainable = _trainable_names(meta) if meta is not None else None
        variables = _classify_names(shape_of, dtype_of, size_of, trainable)
        optimizer = _tf1_optimizer(meta, variables)
        source = "checkpoint (TF1 name-based)"
    overhead, file_bytes = _reconcile(prefix, shard_bytes, entries, numeric, size_of)
    return Breakdown(source=source, variables=VariableTable.from_rows(variables), model_name=os.path.basename(prefix),
                     optimizer=optimizer, file_bytes=file_bytes, overhead=copies + overhead)


# --- the .index file: a LevelDB-style table of BundleEntryProto ---------------------------

def _read_index(index_path: str) -> Tuple[Dict[str, Any], int]:
    """Every entry of the bundle index (key -> BundleEntryProto) and the number of data shards."""
    data = read_file(index_path, INDEX_LIMIT, "checkpoint index")
    try:
        entries: Dict[str, Any] = {}
        num_shards = 1
        for key, value in _table_items(data):
            if key == b"":
                num_shards = max(1, proto.BundleHeaderProto.FromString(value).num_shards)
            else:
                entries[key.decode("utf-8", "replace")] = proto.BundleEntryProto.FromString(value)
    except Exception as e:  # any fault in the table is a corrupt file for the user
        raise InspectError(f"{index_path}: corrupt checkpoint index ({type(e).__name__}: {e})") from None
    return entries, num_shards


def _table_items(data: bytes) -> Iterator[Tuple[bytes, bytes]]:
    """Key/value pairs of the table; data blocks must follow one another, so a crafted
    index cannot make one block be decoded over and over."""
    if len(data) < _FOOTER_BYTES:
        raise ValueError("file shorter than a table footer")
    footer = data[-_FOOTER_BYTES:]
    if struct.unpack("<Q", footer[-8:])[0] != _TABLE_MAGIC:
        raise ValueError("bad table magic number")
    _, pos = _handle(footer, 0)  # metaindex block: unused by tensor bundles
    index_handle, _ = _handle(footer, pos)
    end_of_last = 0
    for _, handle in _block_items(_block(data, index_handle)):
        block_handle = _handle(handle, 0)[0]
        if block_handle[0] < end_of_last:
            raise ValueError("data blocks overlap")
        end_of_last = block_handle[0] + block_handle[1]
        yield from _block_items(_block(data, block_handle))


def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while shift < 64:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise ValueError("varint longer than 64 bits")


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
    if len(block) < 4:
        raise ValueError("block shorter than its restart count")
    num_restarts = struct.unpack("<I", block[-4:])[0]
    end = len(block) - 4 - 4 * num_restarts
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        value_len, pos = _varint(block, pos)
        if shared > len(key) or pos + unshared + value_len > end:
            raise ValueError("entry runs past its block")
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        yield key, block[pos:pos + value_len]
        pos += value_len


def _shard_sizes(prefix: str, num_shards: int) -> List[int]:
    """Size of each ``.data`` shard, stopping at the first one missing (a crafted header may
    claim 2**31 shards: nothing is built per claimed shard before it is found on disk)."""
    if num_shards > _MAX_SHARDS:
        raise InspectError(f"{prefix}.index: corrupt checkpoint index (header claims {num_shards:,} data shards)")
    sizes = []
    for i in range(num_shards):
        shard = f"{prefix}.data-{i:05d}-of-{num_shards:05d}"
        if not os.path.lexists(shard):
            raise InspectError(f"{prefix}: data shard missing: {os.path.basename(shard)}")
        sizes.append(file_size(shard))
    return sizes


def _check_entries(index_path: str, entries: Dict[str, Any], num_shards: int, shard_bytes: List[int]) -> Set[str]:
    """The keys of fixed-size numeric tensors, after checking every entry against the files:
    a shape must be a real one (rank <= 254, no negative dimension) and its bytes must be
    the bytes the entry occupies in its shard, which must hold them."""
    numeric: Set[str] = set()
    data_bytes = sum(shard_bytes)
    for key, entry in entries.items():
        why = _entry_fault(entry, num_shards, data_bytes)
        if why:
            raise InspectError(f"{index_path}: corrupt checkpoint index ({key[:80]!r}: {why})")
        if entry.offset + entry.size > shard_bytes[entry.shard_id]:
            raise InspectError(f"{index_path[:-len('.index')]}: truncated or corrupt checkpoint "
                               f"({key[:80]!r} runs past the end of its .data shard)")
        if key != OBJECT_GRAPH_KEY and not key.startswith("\x00") and dtype_size(entry.dtype):
            numeric.add(key)  # not the object graph, a slice of a partitioned variable or a string
    return numeric


def _entry_fault(entry: Any, num_shards: int, data_bytes: int) -> str:
    """Why an index entry cannot describe a stored tensor ("" if it can)."""
    if not 0 <= entry.shard_id < num_shards:
        return f"shard {entry.shard_id} of {num_shards}"
    if entry.offset < 0 or entry.size < 0:
        return f"offset {entry.offset}, size {entry.size}"
    dims = [d.size for d in entry.shape.dim]
    if entry.shape.unknown_rank or len(dims) > _MAX_RANK or any(d < 0 for d in dims):
        return f"shape {dims[:8]}{'...' if len(dims) > 8 else ''} is not a stored tensor's"
    item = dtype_size(entry.dtype)
    declared = math.prod(dims) * item
    if item and (declared > data_bytes if entry.slices else declared != entry.size):  # slices hold a sliced one's bytes
        return f"shape {dims} of {dtype_name(entry.dtype)} is {declared:,} bytes, the entry holds {entry.size:,}"
    return ""


# --- reconciliation ------------------------------------------------------------------------

def _reconcile(prefix: str, shard_bytes: List[int], entries: Dict[str, Any], numeric: Set[str],
               size_of: Dict[str, int]) -> Tuple[List[dict], int]:
    """Overhead lines so that variables + overhead == the checkpoint's files on disk."""
    overhead: List[dict] = []
    data_bytes = sum(shard_bytes)
    accounted = sum(size_of.values())
    # Keys starting with NUL are slices of partitioned variables: their bytes are the variable's.
    for key in sorted(k for k in entries if k not in numeric and not k.startswith("\x00") and entries[k].size):
        what = ("object graph (_CHECKPOINTABLE_OBJECT_GRAPH)" if key == OBJECT_GRAPH_KEY
                else f"non-numeric tensor {key!r}")
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
    from tensorboard.compat.proto import meta_graph_pb2

    data = read_file(path, GRAPH_LIMIT, ".meta graph")
    try:
        return meta_graph_pb2.MetaGraphDef.FromString(data)
    except Exception as e:
        raise InspectError(f"{path}: unreadable .meta graph ({type(e).__name__})") from None


def _trainable_names(meta: Any) -> Optional[Set[str]]:
    from tensorboard.compat.proto import variable_pb2

    coll = meta.collection_def.get("trainable_variables")
    if coll is None or not coll.bytes_list.value:
        return None
    names = set()
    for raw in coll.bytes_list.value:
        var = variable_pb2.VariableDef.FromString(raw)
        names.add((var.save_slice_info_def.full_name or var.variable_name).split(":")[0])
    return names


def _classify_names(shape_of: Dict[str, List[int]], dtype_of: Dict[str, str], size_of: Dict[str, int],
                    trainable: Optional[Set[str]]) -> List[VariableRecord]:
    stored = set(shape_of)
    slots = {k: roles.slot_match(k, stored) for k in stored}
    suffixes: Dict[str, Set[str]] = {}
    for hit in filter(None, slots.values()):
        suffixes.setdefault(hit[0], set()).add(hit[1])
    records = []
    for name in sorted(stored):
        slot: Optional[str] = None
        slot_of: Optional[str] = None
        if slots[name]:
            slot_of, suffix = slots[name] or ("", "")
            slot = roles.tf1_slot_name(suffix, suffixes[slot_of])
            role = OPTIMIZER_SLOT
        else:
            role = roles.role(name, dtype_of[name], shape_of[name], None if trainable is None else name in trainable)
        records.append(VariableRecord(name=name, layer=roles.layer_of(slot_of or name), shape=shape_of[name],
                                      dtype=dtype_of[name], bytes=size_of[name], role=role, slot=slot,
                                      slot_of=slot_of))
    return records


def _tf1_optimizer(meta: Any, variables: List[VariableRecord]) -> Optional[dict]:
    """The TF1 optimizer class and its constant hyper-parameters from the graph's training ops;
    argument names from the graph's own op list (``meta_info_def.stripped_op_list``)."""
    if meta is not None:
        nodes = {n.name: n for n in meta.graph_def.node}
        op_args = {op.name: [a.name for a in op.input_arg] for op in meta.meta_info_def.stripped_op_list.op}
        for node in meta.graph_def.node:
            op = re.sub(r"^(Resource)?(Sparse)?", "", node.op)
            if op in _TF1_APPLY_OPS:
                config = {}
                for arg, inp in zip(op_args.get(node.op, []), node.input):
                    value = _const_scalar(nodes, inp)
                    if value is not None:
                        config[arg] = value
                return {"class_name": f"tf.compat.v1.train.{_TF1_APPLY_OPS[op]}", "config": config,
                        "recorded_in": f".meta graph (op {node.op})"}
    opts = set()
    for v in variables:
        if v.role == OPTIMIZER_SLOT:  # "<var>/Adam_1" (TF1) or "Adam/<var>/m" (Keras 2)
            base = re.sub(r"_\d+$", "", v.name.rsplit("/", 1)[1])
            opts.add(base if base in roles.TF1_SLOTS else v.name.split("/", 1)[0])
    if opts:
        return {"class_name": "/".join(sorted(opts)), "config": {}, "recorded_in": "slot variable names only"}
    return None


def _const_scalar(nodes: Dict[str, Any], name: str) -> Any:
    """Value of a scalar Const feeding a training op (through Cast/Identity), else None."""
    node = nodes.get(name.split(":")[0].lstrip("^"))
    for _ in range(16):  # a crafted graph may loop Identity -> Identity
        if node is None or node.op not in ("Cast", "Identity") or not node.input:
            break
        node = nodes.get(node.input[0].split(":")[0])
    if node is None or node.op != "Const":
        return None
    return _scalar_value(node.attr["value"].tensor)


def _scalar_value(tensor: Any) -> Any:
    """The number a scalar TensorProto holds (in its typed field or its raw ``tensor_content``)."""
    import numpy as np

    if tensor.tensor_shape.dim:
        return None
    for field in ("float_val", "double_val", "int64_val", "int_val", "bool_val", "uint32_val", "uint64_val"):
        values = getattr(tensor, field)
        if values:
            return values[0] if field != "bool_val" else bool(values[0])
    name = dtype_name(tensor.dtype)
    if tensor.tensor_content and name in ("float32", "float64", "int32", "int64", "float16", "bool"):
        raw = np.frombuffer(tensor.tensor_content, dtype=name)
        return raw[0].item() if raw.size == 1 else None
    return None


# --- TF2 object-based classification -------------------------------------------------------

def _object_graph(prefix: str, entries: Dict[str, Any], num_shards: int) -> Any:  # TrackableObjectGraph
    """The object graph, read from its bytes in the ``.data`` shard: a DT_STRING scalar is
    stored as its length (varint64), a 4-byte masked crc32c of the lengths, then the bytes."""
    entry = entries[OBJECT_GRAPH_KEY]
    shard = f"{prefix}.data-{entry.shard_id:05d}-of-{num_shards:05d}"
    if entry.dtype != _DT_STRING or entry.shape.dim:
        raise InspectError(f"{prefix}: unreadable object graph (stored as {dtype_name(entry.dtype)}, not a string)")
    raw = read_range(shard, entry.offset, entry.size)
    try:
        length, pos = _varint(raw, 0)
        if pos + 4 + length != len(raw):
            raise ValueError(f"string of {length:,} bytes in an entry of {len(raw):,}")
        return proto.TrackableObjectGraph.FromString(raw[pos + 4:])
    except Exception as e:
        raise InspectError(f"{prefix}: unreadable object graph ({type(e).__name__}: {e})") from None


def _list_items(graph: Any, node_id: Optional[int]) -> List[int]:
    """Children of a tracked list node in index order ("0", "1", ...), or [] if not a list."""
    if node_id is None or not 0 <= node_id < len(graph.nodes):
        return []
    children = graph.nodes[node_id].children
    if not children or not all(c.local_name.isdigit() for c in children):
        return []
    return [c.node_id for c in sorted(children, key=lambda c: int(c.local_name))]


def _classify_object_graph(graph: Any, shape_of: Dict[str, List[int]], dtype_of: Dict[str, str], size_of: Dict[str, int]
                           ) -> Tuple[List[VariableRecord], Optional[dict], List[dict]]:
    """The variables, the optimizers, and an overhead line per list of variables stored twice."""
    key_of: Dict[int, str] = {}
    full_name: Dict[int, str] = {}
    for i, node in enumerate(graph.nodes):
        for attr in node.attributes:
            if attr.name == "VARIABLE_VALUE" and attr.checkpoint_key in shape_of:
                key_of[i], full_name[i] = attr.checkpoint_key, attr.full_name
    copies, copied = [], set()
    for copy, original in _copied_lists(graph, key_of, full_name, shape_of, dtype_of).items():
        items = _list_items(graph, copy)
        copies.append({"what": f"{_list_key(key_of[items[0]])}/*: a second copy of {len(items)} variables stored "
                               f"under {_list_key(key_of[_list_items(graph, original)[0]])}/* too (same names, "
                               "shapes and dtypes)", "bytes": sum(size_of[key_of[v]] for v in items)})
        for v in items:  # counted once, as the variables they copy
            copied.add(key_of.pop(v))
            del full_name[v]
    names = _display_names(graph, key_of, full_name)
    slot_of: Dict[int, Tuple[int, str]] = {}
    state: Set[int] = set()
    trainable: Set[int] = set()
    classes: Dict[int, str] = {}
    for i, node in enumerate(graph.nodes):
        for sv in node.slot_variables:  # legacy optimizers (tf.keras 2, tf.compat.v1 in eager)
            slot_of[sv.slot_variable_node_id] = (sv.original_variable_node_id, sv.slot_name)
            trainable.add(sv.original_variable_node_id)
        child = {c.local_name: c.node_id for c in node.children}
        if "_iterations" in child and "_variables" in child:  # a Keras 3 optimizer
            weights = [w for w in _list_items(graph, child.get("_trainable_variables")) if w in key_of]
            trainable.update(weights)
            own = [v for v in _list_items(graph, child["_variables"]) if v in key_of]
            described = [(full_name[v] or names[v], shape_of[key_of[v]], dtype_of[key_of[v]]) for v in weights]
            described += [(full_name[v], shape_of[key_of[v]], dtype_of[key_of[v]]) for v in own]
            classes[i] = _keras_optimizer_slots(weights, own, described, slot_of, state)
    records = []
    for i, key in sorted(key_of.items(), key=lambda kv: names[kv[0]]):
        name, slot, owner = names[i], None, None
        if i in slot_of:
            weight, slot = slot_of[i]
            owner, role = names.get(weight, ""), OPTIMIZER_SLOT
        elif i in state:
            role = OTHER
        else:
            role = roles.role(name, dtype_of[key], shape_of[key], (i in trainable) if trainable else None)
        records.append(VariableRecord(name=name, layer=roles.layer_of(owner or name), shape=shape_of[key],
                                      dtype=dtype_of[key], bytes=size_of[key], role=role, slot=slot, slot_of=owner))
    seen = set(key_of.values())
    rest = {k: shape_of[k] for k in shape_of if k not in seen and k not in copied}
    if rest:  # keys without an object-graph node: fall back to name rules
        records += _classify_names(rest, dtype_of, size_of, None)
    return records, _object_graph_optimizer(graph, classes, records), copies


def _copied_lists(graph: Any, key_of: Dict[int, str], full_name: Dict[int, str], shape_of: Dict[str, List[int]],
                  dtype_of: Dict[str, str]) -> Dict[int, int]:
    """Tracked lists of variables that are a second copy of another list's: copy node -> its original.
    Keras 3's ``model.export()`` tracks each weight under ``variables`` and again under
    ``_all_variables``, as distinct variables the checkpoint stores twice. A copy's variables are
    held by that list only, each with a name found once in it, and match variables of the original
    one for one by name, shape and dtype; where each list could be the other's copy, neither is."""
    held: Dict[int, int] = {}
    for node in graph.nodes:
        for child in node.children:
            held[child.node_id] = held.get(child.node_id, 0) + 1
    lists = {i: items for i in range(len(graph.nodes))
             for items in [_list_items(graph, i)] if items and all(v in key_of for v in items)}
    signature = {v: (full_name[v], tuple(shape_of[key_of[v]]), dtype_of[key_of[v]]) for items in lists.values()
                 for v in items}
    holding: Dict[Tuple[str, Tuple[int, ...], str], List[int]] = {}  # signature -> the lists holding one
    for i, items in lists.items():
        for v in items:
            holding.setdefault(signature[v], []).append(i)

    def copies(items: List[int], others: List[int]) -> bool:
        wanted = {signature[v] for v in items}
        return (len(wanted) == len(items) and all(held[v] == 1 and full_name[v] for v in items)
                and not set(items) & set(others) and wanted <= {signature[v] for v in others})

    found: Dict[int, int] = {}
    for copy, items in lists.items():
        for original in holding[signature[items[0]]][:_MAX_ORIGINALS]:
            others = lists[original]
            if original != copy and original not in found and copy not in found.values() \
                    and copies(items, others) and not copies(others, items):
                found[copy] = original
                break
    return found


def _list_key(checkpoint_key: str) -> str:
    """The checkpoint's path of the list a variable is an item of ("_all_variables" of
    "_all_variables/0/.ATTRIBUTES/VARIABLE_VALUE")."""
    return checkpoint_key[: -len(_VALUE_SUFFIX)].rsplit("/", 1)[0] if checkpoint_key.endswith(_VALUE_SUFFIX) else \
        checkpoint_key


def _display_names(graph: Any, key_of: Dict[int, str], full_name: Dict[int, str]) -> Dict[int, str]:
    """A variable's name: its own (a Keras path, "model/dense/kernel", the name live capture
    shows) where no other variable shares it, else its path in the object graph."""
    counts: Dict[str, int] = {}
    for i in key_of:
        counts[full_name[i]] = counts.get(full_name[i], 0) + 1
    paths = _object_paths(graph)
    return {i: full_name[i] if full_name[i] and counts[full_name[i]] == 1 else paths.get(i, key_of[i])
            for i in key_of}


def _keras_optimizer_slots(weights: List[int], own: List[int], described: List[Tuple[str, List[int], str]],
                           slot_of: Dict[int, Tuple[int, str]], state: Set[int]) -> str:
    """Mark a Keras 3 optimizer's slots (``slot_of``) and other variables (``state``) among the
    nodes ``own``, for its trained nodes ``weights`` (``described``: (name, shape, dtype) of
    each, weights first; an optimizer variable's name only as the checkpoint stores it). Returns its
    class, inferred from its default name and what it holds (a checkpoint keeps no class)."""
    paths, stored = described[:len(weights)], described[len(weights):]
    opt_name = next((name.split("/", 1)[0] for name, _, _ in stored if "/" in name), "")
    layout = roles.keras_layout(paths, [roles.Stored(shape, dtype, name or None) for name, shape, dtype in stored],
                                [("", None, opt_name)])
    if layout is not None:
        for v, (kind, what) in zip(own, layout.entries):
            if kind == "slot":
                slot_of[v] = (weights[what[0]], what[1])
            else:
                state.add(v)
        return layout.class_name
    by_path = {path: w for (path, _, _), w in zip(paths, weights)}  # a custom optimizer: Keras' slot naming
    for v, (name, shape, _) in zip(own, stored):
        named = roles.keras_slot_by_name(name, by_path)
        if named:
            slot_of[v] = (by_path[named[1]], named[0])
        elif not shape:
            state.add(v)
    return ""


def _object_graph_optimizer(graph: Any, classes: Dict[int, str], records: List[VariableRecord]) -> Optional[dict]:
    """What the checkpoint says of its optimizers: classes inferred from their variables
    ("LossScaleOptimizer(Adam)" for a wrapper), and the slot names found."""
    slots = sorted({r.slot for r in records if r.slot})
    if not slots and not classes:
        return None
    inner = {i: [c.node_id for c in graph.nodes[i].children if c.node_id in classes and c.node_id != i]
             for i in classes}
    wrapped = {j for found in inner.values() for j in found}
    shown = []
    for i in (i for i in classes if i not in wrapped):
        label, seen, j = classes[i], {i}, i
        while inner[j] and inner[j][0] not in seen:  # a wrapper's inner optimizer, and so on
            j = inner[j][0]
            seen.add(j)
            label += f"({classes[j]}"
        shown.append(label + ")" * (len(seen) - 1))
    named = " + ".join(label for label in shown if label and not label.startswith("("))
    return {"class_name": named, "config": {}, "slots": slots,
            "recorded_in": ("inferred from the optimizer's variables: an object-based checkpoint stores "
                            "slots, not the optimizer class") if named else
                           "not recorded: an object-based checkpoint stores slots, not the optimizer class"}


def _object_paths(graph: Any) -> Dict[int, str]:
    """A readable path per node: shortest path from the root, through models before optimizers."""
    optimizers = {i for i, node in enumerate(graph.nodes)
                  if {"_iterations", "_variables"} <= {c.local_name for c in node.children} or node.slot_variables}
    paths: Dict[int, str] = {0: ""} if graph.nodes else {}
    for through_optimizer in (False, True):
        frontier = list(paths) if through_optimizer else [0][:len(paths)]
        while frontier:
            nxt = []
            for nid in frontier:
                if nid in optimizers and not through_optimizer:
                    continue
                for c in graph.nodes[nid].children:
                    if c.node_id not in paths and 0 <= c.node_id < len(graph.nodes):
                        paths[c.node_id] = f"{paths[nid]}/{c.local_name}".lstrip("/")
                        nxt.append(c.node_id)
            frontier = nxt
    return {k: _tidy(v) for k, v in paths.items()}


def _tidy(path: str) -> str:
    """Drop Keras tracking prefixes ("_functional/", leading "_") so paths read like layer names."""
    parts = [p.lstrip("_") or p for p in path.split("/") if p != "_functional"]
    return "/".join(parts)
