"""A ``.safetensors`` file (Hugging Face, timm, diffusers), or a sharded set of them, as a ``Breakdown``
read from the header alone: no tensor data is read, no torch needed. No TF.

The format: 8 bytes (the header's length, little-endian), a JSON header ``{name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {...}}`` padded with spaces, then the tensors' bytes, each at
its offsets from the data's start. Every entry is checked before it is counted: a known dtype, a shape
of non-negative ints, ``end - begin`` = elements x the dtype's size, offsets within the file and not
overlapping another's. What the file holds beside the tensors (the length field, the header and its
padding, bytes no tensor claims) is overhead, so tensors + overhead = the file's size.

Roles: every tensor is a weight but torch's buffers (``running_mean``, ``running_var``,
``num_batches_tracked``: ``rules.roles.TORCH_BUFFER_NAMES``); layers are the ``state_dict`` names'
module paths (``rules.roles.torch_layer``).
"""

from __future__ import annotations

import json
import math
import os
import struct
from typing import Any, Dict, List, Tuple

import orjson

from tb_modelmem.readers.bounded import JSON_LIMIT, InspectError, Opened, read_file
from tb_modelmem.rules import roles
from tb_modelmem.schema.dtypes import item_bytes
from tb_modelmem.schema.names import NON_TRAINABLE, SAFETENSORS_SOURCE, WEIGHT
from tb_modelmem.schema.records import Breakdown, VariableTable

SOURCE = SAFETENSORS_SOURCE
SUFFIX = ".safetensors"
INDEX_SUFFIX = ".safetensors.index.json"
HEADER_LIMIT = 100 * 2**20  # safetensors' own reader refuses headers past 100 MB
# safetensors' dtype names -> (the name schema.dtypes knows, its bytes per element)
_DTYPES = {code: (name, item_bytes(name)) for code, name in {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
    "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool",
    "F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3fn", "F8_E4M3FN": "float8_e4m3fn", "F8_E8M0": "uint8",
    "C64": "complex64"}.items()}
MAX_DIMS = 64


def is_safetensors_name(name: str) -> bool:
    return name.endswith((SUFFIX, INDEX_SUFFIX))


def read_safetensors(path: str) -> Breakdown:
    """Breakdown of one ``.safetensors`` file, or of the shards a ``.safetensors.index.json`` names."""
    if path.endswith(INDEX_SUFFIX):
        return _read_index(path)
    columns, overhead, size = _read_file(path)
    return _breakdown(columns, overhead, size, os.path.basename(path))


def _read_index(path: str) -> Breakdown:
    try:
        index = json.loads(read_file(path, JSON_LIMIT, "safetensors index"))
    except ValueError as e:
        raise InspectError(f"{path}: not a readable safetensors index ({str(e)[:200]})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise InspectError(f"{path}: a safetensors index without a weight_map of file names")
    folder = os.path.dirname(path)
    columns: Dict[str, List[Any]] = {}
    overhead: List[Dict[str, Any]] = [{"what": f"{os.path.basename(path)} (which shard holds which tensor)",
                                       "bytes": os.path.getsize(path)}]
    total = overhead[0]["bytes"]
    for shard in sorted(set(weight_map.values())):
        if os.path.basename(shard) != shard:  # a name only: never a path out of the folder
            raise InspectError(f"{path}: shard {shard[:200]!r} is not a file name in its folder")
        found, extra, size = _read_file(os.path.join(folder, shard))
        for key, values in found.items():
            columns.setdefault(key, []).extend(values)
        overhead += [{"what": f"{shard}: {line['what']}", "bytes": line["bytes"]} for line in extra]
        total += size
    missing = set(weight_map) - set(columns.get("name", ()))
    if missing:
        raise InspectError(f"{path}: the index names {len(missing):,} tensors no shard holds "
                           f"({', '.join(sorted(missing)[:3])})")
    return _breakdown(columns, overhead, total, os.path.basename(path))


def _read_file(path: str) -> Tuple[Dict[str, List[Any]], List[Dict[str, Any]], int]:
    """The tensors of one file (the variable table's columns), its overhead lines and its size."""
    with Opened(path) as f:
        if f.size < 8:
            raise InspectError(f"{path}: {f.size} bytes, too short for a safetensors file")
        (length,) = struct.unpack("<Q", f.read_exactly(0, 8))
        if length > min(HEADER_LIMIT, f.size - 8):
            raise InspectError(f"{path}: a header of {length:,} bytes, past the file ({f.size:,} bytes) or the "
                               f"{HEADER_LIMIT:,} safetensors allows: not a safetensors file")
        raw = f.read_exactly(8, length)
        size = f.size
    try:
        header = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise InspectError(f"{path}: its header is not JSON ({str(e)[:200]})") from None
    if not isinstance(header, dict):
        raise InspectError(f"{path}: its header is not a JSON object")
    data_size = size - 8 - length
    columns: Dict[str, List[Any]] = {"name": [], "layer": [], "shape": [], "dtype": [], "bytes": [], "role": []}
    spans: List[Tuple[int, int, str]] = []
    buffers = roles.TORCH_BUFFER_NAMES
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, begin, end = _entry(path, name, entry, data_size)
        spans.append((begin, end, name))
        columns["name"].append(name)
        columns["layer"].append(roles.torch_layer(name))
        columns["shape"].append(shape)
        columns["dtype"].append(dtype)
        columns["bytes"].append(end - begin)
        columns["role"].append(NON_TRAINABLE if name.rpartition(".")[2] in buffers else WEIGHT)
    spans.sort()
    for (a0, a1, first), (b0, _, second) in zip(spans, spans[1:]):
        if b0 < a1:
            raise InspectError(f"{path}: tensors {first[:100]!r} and {second[:100]!r} overlap in the data")
    unclaimed = data_size - sum(columns["bytes"])
    overhead = [{"what": "header length (8 bytes)", "bytes": 8},
                {"what": "header (JSON: names, dtypes, shapes, offsets; padded to alignment)", "bytes": length}]
    if unclaimed:
        overhead.append({"what": "data no tensor claims", "bytes": unclaimed})
    return columns, overhead, size


def _entry(path: str, name: str, entry: Any, data_size: int) -> Tuple[str, List[int], int, int]:
    """(dtype, shape, begin, end) of one header entry, each checked."""
    try:
        dtype, item = _DTYPES[entry["dtype"]]
        shape, (begin, end) = entry["shape"], entry["data_offsets"]
        if (type(shape) is list and len(shape) <= MAX_DIMS and type(begin) is int and type(end) is int
                and 0 <= begin <= end <= data_size and all(type(d) is int and d >= 0 for d in shape)
                and end - begin == math.prod(shape) * item):
            return dtype, shape, begin, end
    except (KeyError, TypeError, ValueError):
        pass
    raise InspectError(f"{path}: tensor {name[:100]!r}: {_fault(entry, data_size)}")


def _fault(entry: Any, data_size: int) -> str:
    """What is wrong with an entry ``_entry`` refused."""
    if not isinstance(entry, dict):
        return "not an object in the header"
    given = entry.get("dtype")
    if not isinstance(given, str) or given not in _DTYPES:
        return f"dtype {str(given)[:40]!r}, which safetensors does not define"
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(type(d) is int and d >= 0 for d in shape):
        return "a malformed shape"
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data_size):
        return f"offsets past the file's {data_size:,} bytes of data"
    dtype, item = _DTYPES[given]
    return f"spans {offsets[1] - offsets[0]:,} bytes, its shape {shape} of {dtype} needs {math.prod(shape) * item:,}"


def _breakdown(columns: Dict[str, List[Any]], overhead: List[Dict[str, Any]], size: int, name: str) -> Breakdown:
    """The layers are left to the views (``rules.rollup``: one per module path, from the shapes), as for
    every source without a model's own: a header read costs what safetensors' own listing does."""
    n = len(columns.get("name", ()))
    table = VariableTable({**{k: columns.get(k, []) for k in ("name", "layer", "shape", "dtype", "bytes", "role")},
                           "device": [""] * n, "replicas": [1] * n, "slot": [None] * n, "slot_of": [None] * n,
                           "device_bytes": [[] for _ in range(n)], "shards": [1] * n})
    return Breakdown(source=SOURCE, variables=table, model_name=name, overhead=overhead, file_bytes=size)
