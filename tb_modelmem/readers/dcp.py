"""A ``torch.distributed.checkpoint`` folder (FSDP2, torchtitan, ``dcp.save``) as a ``Breakdown``: its
``.metadata`` read without torch and with nothing in it run, every tensor by its fully-qualified name and
role, the bytes of each ``.distcp`` file (one per rank and writer thread) reconciled. No TF.

``.metadata`` is a pickled ``Metadata`` dataclass: ``state_dict_metadata`` (each name's dtype, global
shape and chunks), ``storage_data`` (where each item lies: file, offset, length) and ``planner_data``
(each name's path in the state dict saved: ``("model", "0.weight")``,
``("optim", "state", "0.weight", "exp_avg")``). It is read by ``safe_pickle.load_restricted`` with its
dataclasses as ``Inert`` records and torch's dtypes, sizes and layouts as inert stand-ins; any other
class refuses the file. Nothing it names is opened: a file is read only if listing the folder found it.

Roles: under the model's key, parameters are weights and torch's buffers non-trainable; under the
optimizer's ``state``, per-element tensors are slots of the parameter whose name they carry and counters
other; anything else other. A tensor's bytes are its global shape x its dtype's size (each chunk once,
whichever rank holds it). What the files hold beyond the tensors' raw bytes (each item serialized on its
own, non-tensor items such as the optimizer's settings) is overhead, per file, so the lines sum to the folder.
"""

from __future__ import annotations

import math
import os
import zipfile
from typing import Any, Dict, List, Optional, Tuple

from tb_modelmem.readers.bounded import InspectError, Opened, file_size, read_file
from tb_modelmem.readers.safe_pickle import Inert, describe, inert, load_plain, load_restricted, text
from tb_modelmem.readers.torch_checkpoint import TORCH_ALLOWED
from tb_modelmem.rules import roles
from tb_modelmem.rules.layers import scope_layer_records
from tb_modelmem.schema.dtypes import item_bytes
from tb_modelmem.schema.names import DCP_SOURCE, NON_TRAINABLE, OTHER, WEIGHT
from tb_modelmem.schema.records import Breakdown, LayerTable, VariableRecord, VariableTable

SOURCE = DCP_SOURCE
METADATA = ".metadata"
SUFFIX = ".distcp"
METADATA_LIMIT = 256 * 2**20  # a few hundred bytes an item
_MODULE = "torch.distributed.checkpoint.metadata"
_RECORDS = {name: inert(name) for name in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata",
                                           "ChunkStorageMetadata", "TensorProperties", "MetadataIndex",
                                           "StorageMeta", "_StorageInfo")}


def _size(dims: Any = ()) -> Tuple[int, ...]:
    """``torch.Size(...)`` as a tuple of ints."""
    if not isinstance(dims, (list, tuple)) or not all(type(d) is int and d >= 0 for d in dims) or len(dims) > 64:
        raise InspectError(f"a torch.Size of {describe(dims)}")
    return tuple(dims)


def _named(value: Any = "", *rest: Any) -> str:
    """A layout, a memory format or a path, as text (a path is never opened)."""
    return "/".join(text(v) for v in (value, *rest))


_ALLOWED: Dict[Tuple[str, str], Any] = {
    **TORCH_ALLOWED,
    **{(_MODULE, name): cls for name, cls in _RECORDS.items() if name != "_StorageInfo"},
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): _RECORDS["_StorageInfo"],
    (_MODULE, "_MEM_FORMAT_ENCODING"): _named,
    ("torch", "Size"): _size,
    ("torch.serialization", "_get_layout"): _named,
    ("pathlib", "PosixPath"): _named, ("pathlib", "WindowsPath"): _named, ("pathlib", "PurePosixPath"): _named,
}


def is_dcp_folder(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, METADATA)) and any(
        name.endswith(SUFFIX) for name in os.listdir(path))


def read_dcp_folder(path: str) -> Breakdown:
    where = os.path.join(path, METADATA)
    metadata = load_restricted(read_file(where, METADATA_LIMIT, "checkpoint metadata"), where, _ALLOWED,
                               refusal="which torch.distributed.checkpoint's metadata does not hold: not loaded")
    if not isinstance(metadata, Inert) or not isinstance(metadata, _RECORDS["Metadata"]):
        raise InspectError(f"{where}: not torch.distributed.checkpoint metadata (found {describe(metadata)})")
    items = _dict(metadata.fields.get("state_dict_metadata"), where, "state_dict_metadata")
    planned = metadata.fields.get("planner_data")
    paths = planned if isinstance(planned, dict) else {}
    rows: List[VariableRecord] = []
    raw: Dict[str, int] = {}  # fqn -> its tensor's bytes
    for fqn, item in items.items():
        if not isinstance(item, Inert) or not isinstance(item, _RECORDS["TensorStorageMetadata"]):
            continue
        name = text(fqn)
        dtype, shape = _tensor(item, f"{where}: {name}")
        raw[name] = math.prod(shape) * item_bytes(dtype)
        role, layer, slot, slot_of = _role(name, paths.get(fqn), shape)
        rows.append(VariableRecord(name=name, layer=layer, shape=list(shape), dtype=dtype, bytes=raw[name], role=role,
                                   slot=slot, slot_of=slot_of))
    overhead = _files(path, metadata, where, raw)
    bd = Breakdown(source=SOURCE, variables=VariableTable.from_rows(rows), model_name=os.path.basename(
        os.path.normpath(path)), layers=LayerTable.from_rows(scope_layer_records(rows)), overhead=overhead)
    bd.file_bytes = sum(r.bytes for r in rows) + sum(line["bytes"] for line in overhead)
    keys = {r.slot for r in rows if r.slot}
    family = roles.torch_optimizer_family(keys, _decoupled(path, metadata) is True)
    if keys:
        bd.optimizer = {"class_name": family or "optimizer",
                        "config": {"class": f"inferred from its state's keys ({', '.join(sorted(keys))})"}}
    return bd


def _tensor(item: Inert, where: str) -> Tuple[str, Tuple[int, ...]]:
    properties = item.fields.get("properties")
    state = properties.state if isinstance(properties, Inert) else None
    dtype = state[0] if isinstance(state, tuple) and state else (
        properties.fields.get("dtype") if isinstance(properties, Inert) else None)
    shape = item.fields.get("size")
    if not isinstance(dtype, str) or not item_bytes(dtype) or not isinstance(shape, tuple):
        raise InspectError(f"{where}: a tensor without a known dtype and size")
    return dtype.rpartition(".")[2], shape


def _role(name: str, path: Any, shape: Tuple[int, ...]) -> Tuple[str, str, Optional[str], Optional[str]]:
    """(role, layer, slot, its parameter) of a tensor by its path in the state dict saved."""
    parts = [text(p) for p in path] if isinstance(path, tuple) else name.split(".")
    if len(parts) >= 4 and parts[1] == "state":  # ("optim", "state", "<parameter>", "<key>")
        param, key = ".".join(parts[2:-1]), parts[-1]
        role = roles.torch_state_role(key, shape)
        return role, roles.torch_layer(param) if role != OTHER else "", key, param
    if len(parts) >= 2 and parts[0] in ("model", "module", "state_dict"):
        inner = ".".join(parts[1:])
        buffer = inner.rsplit(".", 1)[-1] in roles.TORCH_BUFFER_NAMES
        return NON_TRAINABLE if buffer else WEIGHT, roles.torch_layer(inner), None, None
    return OTHER, "", None, None


def _files(path: str, metadata: Inert, where: str, raw: Dict[str, int]) -> List[Dict[str, Any]]:
    """The metadata file's line, and each data file's: the tensors' serialization beyond their raw bytes,
    the non-tensor items, and bytes no item claims."""
    storage = _dict(metadata.fields.get("storage_data"), where, "storage_data")
    tensor_items: Dict[str, int] = {}
    other_items: Dict[str, int] = {}
    counted_raw: Dict[str, int] = {}
    seen_raw: set = set()
    for index, info in storage.items():
        fqn = text(index.fields.get("fqn")) if isinstance(index, Inert) else ""
        file_name = text(info.fields.get("relative_path")) if isinstance(info, Inert) else ""
        length = info.fields.get("length") if isinstance(info, Inert) else None
        if os.path.basename(file_name) != file_name or type(length) is not int or length < 0:
            raise InspectError(f"{where}: an item stored at {file_name[:100]!r} ({describe(length)} bytes): "
                               "not a file of this folder")
        bucket = tensor_items if fqn in raw else other_items
        bucket[file_name] = bucket.get(file_name, 0) + length
        if fqn in raw and fqn not in seen_raw:
            seen_raw.add(fqn)
            counted_raw[file_name] = counted_raw.get(file_name, 0) + raw[fqn]
    lines = [{"what": f"{METADATA} (names, dtypes, shapes, where each item lies)", "bytes": file_size(where)}]
    for name in sorted(n for n in os.listdir(path) if n.endswith(SUFFIX)):
        size = file_size(os.path.join(path, name))
        tensors, others = tensor_items.get(name, 0), other_items.get(name, 0)
        lines.append({"what": f"{name}: each tensor item serialized on its own (beyond its raw bytes)",
                      "bytes": tensors - counted_raw.get(name, 0)})
        if others:
            lines.append({"what": f"{name}: items that are no tensor (the optimizer's settings, ...)",
                          "bytes": others})
        lines.append({"what": f"{name}: bytes no item claims", "bytes": size - tensors - others})
    unplaced = set(tensor_items) | set(other_items)
    missing = unplaced - {n for n in os.listdir(path) if n.endswith(SUFFIX)}
    if missing:
        raise InspectError(f"{where}: items in {', '.join(sorted(missing)[:3])}, which the folder does not hold")
    return lines


def _decoupled(path: str, metadata: Inert) -> Optional[bool]:
    """The optimizer's ``decoupled_weight_decay`` setting (AdamW's): an item of its own, saved by
    ``torch.save`` in a data file; read with no class allowed. None where there is none."""
    for index, info in _dict(metadata.fields.get("storage_data"), "", "storage_data").items():
        fqn = text(index.fields.get("fqn")) if isinstance(index, Inert) else ""
        if not fqn.endswith(".decoupled_weight_decay") or not isinstance(info, Inert):
            continue
        file_name, offset, length = (info.fields.get(k) for k in ("relative_path", "offset", "length"))
        if (not isinstance(file_name, str) or os.path.basename(file_name) != file_name or type(offset) is not int
                or type(length) is not int or not 0 <= length <= 1 << 20):
            return None
        try:
            with Opened(os.path.join(path, file_name)) as f, zipfile.ZipFile(f.view(offset, length)) as zf:
                pickled = next(n for n in zf.namelist() if n.endswith("data.pkl"))
                value = load_plain(zf.read(pickled), file_name)
        except (InspectError, StopIteration, zipfile.BadZipFile, OSError, ValueError):
            return None
        return value if isinstance(value, bool) else None
    return None


def _dict(value: Any, where: str, what: str) -> Dict[Any, Any]:
    if not isinstance(value, dict):
        raise InspectError(f"{where}: its {what} is {describe(value)}, not a dict")
    return value
