"""A PyTorch checkpoint (``torch.save`` of a ``state_dict``, or of ``{"model": ..., "optimizer": ...}``)
as a ``Breakdown``, reconciled to the bytes on disk. No torch, and nothing pickled is run.

``torch.save`` writes a zip (``<name>/data.pkl`` and one ``<name>/data/<key>`` entry per storage),
or before PyTorch 1.6 (and with ``_use_new_zipfile_serialization=False``) a stream of pickles
followed by the storages, each after an 8-byte element count. ``data.pkl`` is read by
``safe_pickle.load_restricted``: the names it may use are torch's tensor and parameter rebuild
functions, its storage types, its dtypes and ``collections.OrderedDict``, each replaced by a
stand-in of this module that only records its arguments (nothing is imported); a pickled
``nn.Module``, a tensor subclass or any other class refuses the file. A tensor's bytes are its
elements x its dtype's size; a second name of what a counted tensor views (a tied weight) holds none, no
storage is counted past its size (views of one flat buffer each hold theirs), and what else the file holds
(the pickle, zip headers and padding, storage the tensors do not view) is an overhead line, so variables +
overhead == file bytes.

Roles: in the model's state_dict, BatchNorm's ``running_mean``/``running_var``/``num_batches_tracked``
are buffers (non-trainable), the rest parameters. An optimizer's ``state`` tensors are slots
(``exp_avg``, ``exp_avg_sq``, ``momentum_buffer``, ...; ``step`` is a counter: other). A slot is tied
to its parameter through the ``param_groups``' indices: by an order of the state_dict's parameters
(``model.parameters()`` order, buffers left out) whose shapes agree with every slot, else by shape, each
shape on its own (``roles.torch_pairing_by_shape``); a slot no rule ties has no parameter (``slot_of`` None),
and a line says why.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import zipfile
import zlib
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from tb_modelmem.readers.bounded import InspectError, Opened
from tb_modelmem.readers.safe_pickle import (
    UnsafePickle,
    checked_frozenset,
    checked_ordered_dict,
    checked_set,
    describe,
    load_restricted,
    text,
)
from tb_modelmem.rules import roles, torch_optimizers
from tb_modelmem.rules.layers import scope_layer_records
from tb_modelmem.schema.dtypes import item_bytes
from tb_modelmem.schema.names import NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, TORCH_CHECKPOINT_SOURCE, WEIGHT
from tb_modelmem.schema.records import Breakdown, LayerTable, VariableRecord, VariableTable

SOURCE = TORCH_CHECKPOINT_SOURCE
SUFFIXES = (".pt", ".pth", ".ckpt")  # .ckpt: Lightning's
_BIN_PREFIX = "pytorch_model"  # transformers' torch.save weights: pytorch_model.bin, pytorch_model-00001-of-00002.bin
MiB = 1 << 20
PICKLE_LIMIT = 256 * MiB  # data.pkl: names, shapes and settings (~100 bytes a tensor)
MAX_STORAGES = 10_000_000
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_MODEL_KEYS = ("model", "state_dict", "model_state_dict", "model_state", "net", "network", "module")
_OPTIMIZER_KEYS = ("optimizer", "optimizer_state_dict", "optimizer_state", "optim", "opt")
# torch.<Name>Storage -> its dtype (bytes per element: schema.dtypes)
_STORAGES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32",
    "UntypedStorage": "uint8",
}
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
           "complex64", "complex128", "float", "double", "half", "long", "int")


MAX_DIMS = 64  # torch allows 64 dimensions


@dataclasses.dataclass(frozen=True, slots=True)  # no __dict__: nothing a pickle's BUILD could change
class _StorageType:
    name: str
    dtype: str
    itemsize: int


@dataclasses.dataclass
class _Storage:
    key: str
    dtype: str
    itemsize: int
    numel: int
    location: str


@dataclasses.dataclass
class _Tensor:
    storage: _Storage
    offset: int
    shape: Tuple[int, ...]
    parameter: bool = False

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * self.storage.itemsize


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any = None, *rest: Any) -> _Tensor:
    if not isinstance(storage, _Storage):
        raise InspectError("a tensor whose storage is not a saved storage")
    if (not isinstance(size, (tuple, list)) or len(size) > MAX_DIMS or not all(type(d) is int and d >= 0 for d in size)
            or type(offset) is not int or offset < 0):
        raise InspectError("a tensor with a malformed shape or offset")
    if stride is None:  # torch._utils._rebuild_tensor: contiguous
        stride, step = [], 1
        for d in reversed(size):
            stride.insert(0, step)
            step *= d
    if (not isinstance(stride, (tuple, list)) or len(stride) != len(size)
            or not all(type(s) is int and s >= 0 for s in stride)):
        raise InspectError("a tensor with a malformed stride")
    if all(size):  # the last element it views must lie in its storage
        last = offset + sum((d - 1) * s for d, s in zip(size, stride))
        if last >= storage.numel:
            raise InspectError(f"a tensor of shape {list(size)} at offset {offset:,} views element {last:,} of a "
                               f"storage of {storage.numel:,} (corrupt or crafted)")
    return _Tensor(storage, offset, tuple(size))


def _rebuild_parameter(data: Any, *rest: Any) -> _Tensor:
    if not isinstance(data, _Tensor):
        raise InspectError("a parameter that holds no saved tensor")
    data.parameter = True
    return data


def _encode(text: Any, encoding: str = "latin1") -> bytes:  # protocol 2's bytes: _codecs.encode(str, "latin1")
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise InspectError("an unexpected _codecs.encode call")
    return text.encode("latin1")


class _Dtype(str):
    """torch.float32 and its kin, as their names."""

    __slots__ = ()


# What a torch pickle may name beside its tensors: its containers, storage types and dtypes (``dcp`` adds its own)
TORCH_ALLOWED: Dict[Tuple[str, str], Any] = {
    ("collections", "OrderedDict"): checked_ordered_dict,
    ("_codecs", "encode"): _encode,
    ("builtins", "set"): checked_set, ("builtins", "frozenset"): checked_frozenset,
    **{("torch", name): _StorageType(name, dtype, item_bytes(dtype)) for name, dtype in _STORAGES.items()},
    **{("torch", name): _Dtype(name) for name in _DTYPES},
}
_ALLOWED: Dict[Tuple[str, str], Any] = {
    **TORCH_ALLOWED,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
}
_REFUSAL = ("which a state_dict checkpoint does not hold (a whole pickled nn.Module, a tensor subclass or an "
            "object of the training script): it is not loaded, as loading it could run code; save "
            "model.state_dict() and optimizer.state_dict() to inspect it")


class ModelParameters(NamedTuple):
    """A model's parameters, (name, shape) each, for an optimizer state_dict saved without them (Trainer's
    ``optimizer.pt``). ``in_order``: listed in ``model.parameters()`` order (a torch.save'd state_dict keeps
    it); safetensors sorts its tensors by dtype and name, so there only shapes can tie the slots."""
    named: List[Tuple[str, Tuple[int, ...]]]
    in_order: bool = True
    why: str = ""  # where ``named`` is empty: why the slots cannot be tied (its folder's reader knows)


class LoadedCheckpoint(NamedTuple):
    """A ``torch.save`` file unpickled (no class run), before its breakdown: a folder's reader asks its optimizer's
    slot shapes (``optimizer_slot_shapes``) to choose the model it updates, then has it broken down once."""
    obj: Any
    path: str
    on_disk: Dict[str, int]  # storage key -> its bytes in the file
    size: int
    overhead: List[Dict[str, Any]]  # the format's own lines
    rest: str  # what the file's bytes no line counts are


def is_checkpoint_name(name: str) -> bool:
    """A ``torch.save`` file by its name (any ``.bin`` is read by ``inspect`` by its content; in a log dir only
    transformers' ``pytorch_model*.bin`` are listed: other ``.bin`` files are no checkpoints)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return name.endswith(SUFFIXES) or (base.startswith(_BIN_PREFIX) and base.endswith(".bin"))


def read_torch_checkpoint(path: str, parameters: Optional[ModelParameters] = None) -> Breakdown:
    """Breakdown of a ``torch.save`` file (zip or legacy), to the byte, read through ``bounded.Opened``
    (local or remote). ``parameters``: the model's, for an optimizer state_dict saved alone (``_breakdown``)."""
    return checkpoint_breakdown(load_torch_checkpoint(path), parameters)


def load_torch_checkpoint(path: str) -> LoadedCheckpoint:
    """A ``torch.save`` file's pickle (zip or legacy) unpickled with no class run, its storages checked
    against the file; only the pickle and the zip's directory (or the storages' headers) are read."""
    with Opened(path) as f:
        head = f.read_exactly(0, min(4, f.size))
        if head == b"PK\x03\x04":
            return _load_zip(f)
        if head[:1] == b"\x80":
            return _load_legacy(f)
    raise InspectError(f"{path}: not a PyTorch checkpoint (neither a torch.save zip nor its legacy format)")


def checkpoint_breakdown(loaded: LoadedCheckpoint, parameters: Optional[ModelParameters] = None) -> Breakdown:
    """``loaded``'s breakdown, every byte of the file on a line."""
    bd = _breakdown(loaded.obj, loaded.path, loaded.on_disk, parameters)
    _close(bd, loaded.size, [dict(line) for line in loaded.overhead], loaded.rest)
    return bd


def _storage_loader(storages: Dict[str, _Storage]) -> Any:
    def persistent_load(pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise UnsafePickle(f"an unknown persistent id ({describe(pid)})")
        storage_type, key, location, numel = pid[1], text(pid[2], 100), text(pid[3], 100), pid[4]
        if not isinstance(storage_type, _StorageType) or type(numel) is not int or not 0 <= numel < 1 << 62:
            raise InspectError("a storage of unknown type or size")
        if key not in storages:
            if len(storages) >= MAX_STORAGES:
                raise InspectError(f"more than {MAX_STORAGES:,} storages")
            storages[key] = _Storage(key, storage_type.dtype, storage_type.itemsize, numel, location)
        return storages[key]
    return persistent_load


def _load_zip(f: Opened) -> LoadedCheckpoint:
    path, size = f.path, f.size
    try:
        with zipfile.ZipFile(f.view()) as zf:
            members = zf.infolist()
            pickles = [m for m in members if m.filename.endswith("/data.pkl") or m.filename == "data.pkl"]
            if len(pickles) != 1:
                if any(m.filename.endswith("constants.pkl") for m in members):
                    raise InspectError(f"{path}: a TorchScript archive (torch.jit.save), not a torch.save checkpoint")
                raise InspectError(f"{path}: a zip without one data.pkl: not a torch.save checkpoint")
            pkl = pickles[0]
            if pkl.file_size > PICKLE_LIMIT:
                raise InspectError(f"{path}: data.pkl of {pkl.file_size:,} bytes, more than the {PICKLE_LIMIT:,} "
                                   "this tool reads")
            with zf.open(pkl) as pickled:
                data = pickled.read(PICKLE_LIMIT + 1)
    except zipfile.BadZipFile as e:
        raise InspectError(f"{path}: corrupt zip ({e})") from None
    except (OSError, EOFError, zlib.error) as e:
        raise InspectError(f"{path}: unreadable zip ({type(e).__name__}: {e})") from None
    prefix = pkl.filename[:-len("data.pkl")]
    storages: Dict[str, _Storage] = {}
    obj = load_restricted(data, path, _ALLOWED, _storage_loader(storages), _REFUSAL)
    entries = {m.filename[len(prefix) + len("data/"):]: m for m in members
               if m.filename.startswith(prefix + "data/")}
    on_disk: Dict[str, int] = {}
    for key, storage in storages.items():
        member = entries.get(key)
        if member is None:
            raise InspectError(f"{path}: storage {key!r} is not in the archive (truncated or foreign file)")
        if member.file_size != storage.numel * storage.itemsize:
            raise InspectError(f"{path}: storage {key!r} holds {member.file_size:,} bytes, its pickle says "
                               f"{storage.numel * storage.itemsize:,}")
        on_disk[key] = member.compress_size
    overhead = [{"what": "data.pkl (the pickled structure: names, shapes, optimizer settings)",
                 "bytes": pkl.compress_size}]
    return LoadedCheckpoint(obj, path, on_disk, size, overhead, "zip structure: headers, alignment padding, "
                            "directory, small records (version, byteorder)")


def _load_legacy(f: Opened) -> LoadedCheckpoint:
    path, size = f.path, f.size
    data = f.read_exactly(0, min(size, PICKLE_LIMIT))
    values, start = [], 0
    for what in ("magic number", "protocol version", "system info"):
        values.append(load_restricted(data[start:], path, {}, None))
        start += _pickle_length(data[start:], path, what)
        if what == "magic number" and values[0] != _LEGACY_MAGIC:
            raise InspectError(f"{path}: not a PyTorch checkpoint (a pickle without torch.save's magic number)")
    storages: Dict[str, _Storage] = {}
    obj = load_restricted(data[start:], path, _ALLOWED, _storage_loader(storages), _REFUSAL)
    offset = start + _pickle_length(data[start:], path, "the checkpoint")
    keys = load_restricted(data[offset:], path, {}, None)
    offset += _pickle_length(data[offset:], path, "the storage keys")
    if not isinstance(keys, list) or set(map(str, keys)) != set(storages):
        raise InspectError(f"{path}: its storage list does not match its tensors (corrupt file)")
    pickled = offset
    on_disk: Dict[str, int] = {}
    for key in map(str, keys):
        storage = storages[key]
        (count,) = struct.unpack("<q", f.read_exactly(offset, 8))
        if count != storage.numel:
            raise InspectError(f"{path}: storage {key!r} holds {count:,} elements, its pickle says {storage.numel:,}")
        on_disk[key] = count * storage.itemsize
        offset += 8 + on_disk[key]
    if offset > size:
        raise InspectError(f"{path}: truncated (its storages end at byte {offset:,} of {size:,})")
    overhead = [{"what": "pickles (magic number, protocol, system info, names, shapes, optimizer settings)",
                 "bytes": pickled},
                {"what": "storage headers (an 8-byte element count each)", "bytes": 8 * len(keys)}]
    return LoadedCheckpoint(obj, path, on_disk, size, overhead, "bytes after the last storage")


def _pickle_length(data: bytes, where: str, what: str) -> int:
    """Bytes of the pickle at the start of ``data`` (to its STOP opcode)."""
    import pickletools

    try:
        for opcode, _, position in pickletools.genops(data):
            if opcode.name == "STOP" and position is not None:
                return position + 1
    except Exception as e:
        raise InspectError(f"{where}: {what} is not a readable pickle ({type(e).__name__})") from None
    raise InspectError(f"{where}: {what} is truncated")


def _close(bd: Breakdown, size: int, overhead: List[Dict[str, Any]], rest: str) -> None:
    counted = sum(bd.variables.column("bytes")) + sum(int(line["bytes"]) for line in bd.overhead + overhead)
    bd.overhead = overhead + bd.overhead + [{"what": rest, "bytes": size - counted}]
    bd.file_bytes = size


# --- roles ---------------------------------------------------------------------------------------------------

def _is_tensors(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(isinstance(v, _Tensor) for v in value.values())


def _is_optimizer(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("state"), dict) and isinstance(value.get("param_groups"),
                                                                                         list)


def _parts(obj: Any) -> Tuple[Optional[Dict[str, Any]], List[Tuple[str, Dict[str, Any]]]]:
    """The model's state_dict and the optimizers' (each with the name its tensors take) a checkpoint holds:
    a bare state_dict, a bare optimizer state_dict (Trainer's ``optimizer.pt``), a dict of them under the
    usual keys, or Lightning's ``state_dict`` with its ``optimizer_states`` list."""
    if _is_optimizer(obj):
        return None, [("optimizer", obj)]
    if _is_tensors(obj):
        return obj, []
    if not isinstance(obj, dict):
        return None, []
    keys = [k for k in obj if isinstance(k, str)]
    model = next((obj[k] for k in list(_MODEL_KEYS) + keys if _is_tensors(obj.get(k))), None)
    listed = obj.get("optimizer_states")  # Lightning: one per optimizer
    if isinstance(listed, list) and any(_is_optimizer(o) for o in listed):
        found = [o for o in listed if _is_optimizer(o)]
        return model, [("optimizer" if len(found) == 1 else f"optimizer{i}", o) for i, o in enumerate(found)]
    optimizer = next((obj[k] for k in list(_OPTIMIZER_KEYS) + keys if _is_optimizer(obj.get(k))), None)
    return model, [("optimizer", optimizer)] if optimizer is not None else []


def _breakdown(obj: Any, path: str, on_disk: Dict[str, int],
               parameters: Optional[ModelParameters] = None) -> Breakdown:
    """``parameters``: the model's, when the checkpoint holds no state_dict but its folder does (Trainer's
    ``optimizer.pt``): what its slots are tied to."""
    model, optimizers = _parts(obj)
    records: List[VariableRecord] = []
    viewed: Dict[str, int] = {}  # storage key -> bytes the counted tensors take of it
    counted: set = set()  # (storage, offset, shape) of each tensor counted: a second name of one is tied to it
    shared: List[str] = []

    def add(name: str, tensor: _Tensor, role: str, layer: str, slot: Optional[str] = None,
            slot_of: Optional[str] = None) -> None:
        """One row. A tensor viewing what one counted already views (a tied weight's second name) holds no
        bytes of its own; other views of one storage (an RNN's weights flattened into one buffer on CUDA)
        each hold theirs, never more in all than the storage has."""
        key = tensor.storage.key
        first = _region(tensor) not in counted
        counted.add(_region(tensor))
        if not first:
            shared.append(name)
        size = min(tensor.nbytes, tensor.storage.numel * tensor.storage.itemsize - viewed.get(key, 0)) if first else 0
        viewed[key] = viewed.get(key, 0) + size
        records.append(VariableRecord(name=name, layer=layer, shape=list(tensor.shape), dtype=tensor.storage.dtype,
                                      bytes=size, role=role, device=tensor.storage.location, slot=slot,
                                      slot_of=slot_of))

    params: List[Tuple[str, Tuple[int, ...]]] = []
    if model is not None:
        for name, tensor in model.items():
            name = text(name)
            buffer = name.rsplit(".", 1)[-1] in roles.TORCH_BUFFER_NAMES
            tied = _region(tensor) in counted  # a tied weight's second name: model.parameters() lists it once
            add(name, tensor, NON_TRAINABLE if buffer else WEIGHT, roles.torch_layer(name))
            if not buffer and not tied:
                params.append((name, tensor.shape))
    overhead: List[Dict[str, Any]] = []
    summaries = []
    for prefix, optimizer in optimizers:
        weights = ModelParameters(params) if params else (parameters or ModelParameters([]))  # its own first
        summary, note = _optimizer_records(optimizer, prefix, weights, add)
        summaries.append(summary)
        if note:
            overhead.append({"what": note, "bytes": 0})
    seen = {id(model)} | {id(o) for _, o in optimizers} | ({id(obj.get("optimizer_states"))} if optimizers and
                                                            isinstance(obj, dict) else set())
    if isinstance(obj, dict) and model is not obj and not _is_optimizer(obj):  # tensors anywhere else: other
        for key, value in obj.items():
            if id(value) not in seen:
                for name, tensor in _tensors(value, text(key)):
                    add(name, tensor, OTHER, "")
    # storage on disk no tensor views (a saved slice of a larger tensor): overhead, never hidden
    beyond = sum(on_disk[k] - viewed.get(k, 0) for k in on_disk)
    if beyond:
        overhead.append({"what": "storage the saved tensors do not view (a slice of a larger tensor saved whole)",
                         "bytes": beyond})
    if shared:
        overhead.append(roles.shared_line(shared))
    bd = Breakdown(source=SOURCE, variables=VariableTable.from_rows(records), model_name=os.path.basename(path),
                   layers=LayerTable.from_rows(scope_layer_records(records)), overhead=overhead)
    bd.optimizer = optimizers_summary([(prefix, s) for (prefix, _), s in zip(optimizers, summaries)])
    return bd


def optimizers_summary(named: Sequence[Tuple[str, Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """A breakdown's optimizer from each saved optimizer's summary, named by where it was saved (a key of
    the checkpoint, a file of a folder): the one, or all of them ("AdamW + SGD"), each under its name."""
    if len(named) <= 1:
        return named[0][1] if named else None
    return {"class_name": " + ".join(str(summary["class_name"]) for _, summary in named), "config": dict(named)}


def _region(tensor: _Tensor) -> Tuple[str, int, Tuple[int, ...]]:
    """What a tensor views: its storage, offset and shape (two names of one region are one tensor, tied)."""
    return tensor.storage.key, tensor.offset, tensor.shape


def _tensors(value: Any, prefix: str, depth: int = 0) -> List[Tuple[str, _Tensor]]:
    if isinstance(value, _Tensor):
        return [(prefix, value)]
    if depth > 20:
        return []
    items = (value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple))
             else [])
    out: List[Tuple[str, _Tensor]] = []
    for key, item in items:
        out += _tensors(item, f"{prefix}.{text(key)}", depth + 1)
    return out


def _optimizer_records(optimizer: Dict[str, Any], prefix: str, weights: ModelParameters, add: Any
                       ) -> Tuple[Dict[str, Any], str]:
    """Adds an optimizer's state tensors (named ``<prefix>.state.<index>.<key>``); returns its summary
    (its class, inferred from its state's keys: a state_dict names none, and its first group's settings)
    and why its slots are not tied to parameters, if they are not. A slot is tied by the param_groups'
    indices when they list as many parameters as the model has and each slot is shaped as its parameter:
    by the first order of ``roles.torch_parameter_orders`` whose shapes agree, else (and where the model's
    order is not known) by shape alone (``roles.torch_pairing_by_shape``)."""
    params = weights.named
    listed = [g for g in optimizer["param_groups"] if isinstance(g, dict) and isinstance(g.get("params"), list)]
    indices: List[Any] = [i for g in listed for i in g["params"]]
    state = optimizer["state"]
    owner: Dict[Any, Tuple[str, Tuple[int, ...]]] = {}
    groups_known = True  # each group's members known, where its slots are tied
    note = ""
    if not params:
        note = f"{prefix} state not tied to parameters: {weights.why or 'no model state_dict beside it'}"
    elif any(type(i) is not int for i in indices) or len(set(indices)) != len(indices):
        note = (f"{prefix} state not tied to parameters: its param_groups list a parameter twice, or something "
                "other than parameter numbers")
    else:
        slots_of = _slot_signatures(state)
        orders = roles.torch_parameter_orders(params) if weights.in_order and len(indices) == len(params) else []
        for rule, ordered in orders:
            candidate = dict(zip(indices, ordered))
            if all({shape for _, shape, _ in found} <= {tuple(candidate[i][1])}
                   for i, found in slots_of.items() if i in candidate):
                owner = candidate
                if rule:
                    note = f"{prefix} state tied to parameters {rule}"
                break
        else:
            unordered = ("the weights' file keeps no parameter order: safetensors sorts by dtype and name"
                         if not weights.in_order else
                         f"its param_groups list {len(indices)} parameters and the state_dict {len(params)} (frozen "
                         "or shared parameters)" if len(indices) != len(params) else
                         f"its slots' shapes fit no order of the state_dict's {len(params)} parameters: neither "
                         "model order nor weights before biases and norms")
            paired = roles.torch_pairing_by_shape(params, [g["params"] for g in listed], slots_of, weights.in_order)
            owner, groups_known = paired.owners, paired.groups_known
            if owner:
                note = f"{prefix} state tied to parameters by shape, as {unordered}"
                if paired.twins:
                    note += (f"; {paired.twins} parameters share their shape with another, so which of them each "
                             f"numbered state is, is not known: paired in {'model' if weights.in_order else 'name'} "
                             "order, which moves no byte between layers")
                note += f"; {paired.why}" if paired.why else ""
            elif any(slots_of.values()):
                note = f"{prefix} state not tied to parameters: {unordered}, and {paired.why or 'no shape fits'}"
    keys: set = set()

    def order(kv: Tuple[Any, Any]) -> Tuple[int, int, str]:  # indices, then any other key as text
        return (0, kv[0], "") if type(kv[0]) is int else (1, 0, text(kv[0]))

    for index, slots in sorted(state.items(), key=order):
        for key, tensor in (slots.items() if isinstance(slots, dict) else []):
            if not isinstance(tensor, _Tensor):
                continue
            keys.add(text(key))
            param = owner.get(index)
            role = roles.torch_state_role(text(key), tensor.shape)
            layer = roles.torch_layer(param[0]) if param and role != OTHER else ""  # a counter is the optimizer's
            add(f"{prefix}.state.{text(index)}.{text(key)}", tensor, role, layer, text(key),
                param[0] if param else None)
    groups = optimizer["param_groups"]
    decoupled = any(isinstance(g, dict) and g.get("decoupled_weight_decay") for g in groups)
    family = roles.torch_optimizer_family(keys, decoupled)
    config = _plain_settings(groups[0] if groups and isinstance(groups[0], dict) else {})  # "params" is a list
    config["class"] = (f"inferred from its state's keys ({', '.join(sorted(keys))})" if family else
                       "unknown: its state names no per-parameter tensor a known optimizer keeps")
    entry: Dict[str, Any] = {"class_name": family or "optimizer", "config": config}
    if owner and groups_known and len(listed) > 1:  # each group's parameters by name (``torch_optimizers.group_plans``)
        entry["groups"] = [torch_optimizers.group_record(
            [owner[i][0] for i in g["params"] if i in owner], _plain_settings(g), _plain_settings(listed[0]),
            sum(i not in owner for i in g["params"])) for g in listed]
    return entry, note


def _slot_signatures(state: Dict[Any, Any]) -> Dict[Any, Tuple[Tuple[str, Tuple[int, ...], str], ...]]:
    """Each index's slots as (key, shape, dtype), counters left out (``roles.torch_state_role``)."""
    return {index: tuple(sorted((text(key), tuple(t.shape), t.storage.dtype) for key, t in slots.items()
                                if isinstance(t, _Tensor)
                                and roles.torch_state_role(text(key), t.shape) == OPTIMIZER_SLOT))
            for index, slots in state.items() if isinstance(slots, dict)}


def optimizer_slot_shapes(loaded: LoadedCheckpoint) -> Optional[Tuple[int, Dict[Tuple[int, ...], int]]]:
    """Of the one optimizer state_dict ``loaded`` holds (Trainer's ``optimizer.pt``, Accelerate's
    ``optimizer.bin``): how many parameters its param_groups list, and how many of them have slots of each
    shape (a model it updates has at least as many parameters of each). None where it holds not one."""
    _, optimizers = _parts(loaded.obj)
    if len(optimizers) != 1:
        return None
    optimizer = optimizers[0][1]
    listed = sum(len(g["params"]) for g in optimizer["param_groups"]
                 if isinstance(g, dict) and isinstance(g.get("params"), list))
    shapes: Dict[Tuple[int, ...], int] = {}
    for found in _slot_signatures(optimizer["state"]).values():
        one = {shape for _, shape, _ in found}
        if len(one) == 1:
            shape = next(iter(one))
            shapes[shape] = shapes.get(shape, 0) + 1
    return listed, shapes


def _plain_settings(group: Dict[Any, Any]) -> Dict[Any, Any]:
    """A param group's settings a summary can show as they are: numbers, text, booleans and None."""
    return {k: v for k, v in group.items() if v is None or isinstance(v, (int, float, str, bool))}
