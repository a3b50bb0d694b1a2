"""Breakdown of a saved Keras model or SavedModel from its metadata, never its tensor values. No TF.

Formats: Keras 3 ``.keras`` (zip of config.json + model.weights.h5), ``.weights.h5``,
legacy Keras 2 ``.h5``/``.hdf5`` (``model_weights`` + ``optimizer_weights``) and
SavedModel folders (whose ``variables/`` is a TF2 checkpoint). Shapes and dtypes come
from HDF5 dataset headers; what the format does not let us attribute (config, HDF5 and
zip structure, graphs) is an overhead line, so variables + overhead == file_bytes.
A ``.keras`` archive is read in place: its stored weights member is a byte range of the
file that h5py reads directly, so only the headers it needs are touched, never the values.
Roles, slots and layers follow ``tb_modelmem.rules.roles``, as every other source does; Keras 3
optimizer variables, kept by index, are told apart by ``roles.keras_layout``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import struct
import tempfile
import zipfile
import zlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from tb_modelmem import proto
from tb_modelmem.messages import first_line
from tb_modelmem.readers.bounded import (
    GRAPH_LIMIT,
    JSON_LIMIT,
    FileView,
    InspectError,
    file_size,
    read_file,
    read_range,
)
from tb_modelmem.readers.checkpoint import find_prefix, read_checkpoint
from tb_modelmem.readers.dcp import is_dcp_folder, read_dcp_folder
from tb_modelmem.readers.safetensors import is_safetensors_name, read_safetensors
from tb_modelmem.readers.torch_checkpoint import is_checkpoint_name, read_torch_checkpoint
from tb_modelmem.readers.trainer_folder import is_trainer_folder, read_trainer_folder
from tb_modelmem.rules import roles
from tb_modelmem.rules.layers import scope_layer_records
from tb_modelmem.schema.names import OPTIMIZER_SLOT, OTHER, WEIGHT, natural_key
from tb_modelmem.schema.records import Breakdown, LayerRecord, LayerTable, VariableRecord, VariableTable

_H5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_ZIP_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")  # signature ... file name length, extra field length
_MAX_H5_OBJECTS = 1_000_000  # groups and datasets walked in one HDF5 file (ResNet50 + Adam: ~2,500)
_MAX_H5_HEADER = 1 << 16  # bytes of a group's object header read for its symbol table (h5py writes ~300)
_MAX_INFLATE_RATIO = 200  # a deflated weights member may inflate to this many times its size (weights: ~1.1x)


def read_path(path: str) -> Breakdown:
    """Breakdown of any supported model file, SavedModel folder or checkpoint at ``path``."""
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise InspectError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        if os.path.lexists(os.path.join(path, "saved_model.pb")):
            return read_saved_model(path)
        if is_trainer_folder(path):
            return read_trainer_folder(path)
        if is_dcp_folder(path):
            return read_dcp_folder(path)
        return read_checkpoint(path)  # its error says what the folder lacks
    if os.path.exists(path):
        if is_checkpoint_name(path) or path.endswith(".bin"):  # torch.save: a zip too, told apart by its name
            return read_torch_checkpoint(path)
        if is_safetensors_name(path):
            return read_safetensors(path)
        size = file_size(path)
        head = read_range(path, 0, min(8, size))
        if head[:4] == b"PK\x03\x04":
            return read_keras_archive(path)
        if head == _H5_SIGNATURE:
            return read_h5(path)
    try:
        find_prefix(path)
    except InspectError:
        raise InspectError(f"{path}: not a model file or checkpoint (expected .keras, .h5, .weights.h5, "
                           "a SavedModel folder, a TF checkpoint, a PyTorch .pt/.pth/.bin/.ckpt, .safetensors, a "
                           "Trainer or Accelerate checkpoint folder, a torch.distributed.checkpoint folder)") from None
    return read_checkpoint(path)


# --- SavedModel -----------------------------------------------------------------------------

def read_saved_model(path: str) -> Breakdown:
    """Variables from ``variables/variables``; every other file in the folder is overhead."""
    _check_saved_model_pb(os.path.join(path, "saved_model.pb"))
    prefix = os.path.join(path, "variables", "variables")
    if os.path.lexists(prefix + ".index"):
        bd = read_checkpoint(prefix)
    else:  # a SavedModel without variables (e.g. all constants folded into the graph)
        bd = Breakdown(source="", variables=VariableTable(), file_bytes=0)
    counted = {os.path.abspath(p) for p in _checkpoint_files(prefix)}
    extra: Dict[str, int] = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.abspath(os.path.join(root, name))
            if full in counted or not os.path.isfile(full):  # FIFOs, devices, dangling links hold no bytes
                continue
            rel = os.path.relpath(full, path)
            label = "assets/ (vocabularies and other files)" if rel.startswith("assets" + os.sep) else rel
            extra[label] = extra.get(label, 0) + os.path.getsize(full)
    what = {"saved_model.pb": "saved_model.pb (graphs, functions, signatures)",
            "fingerprint.pb": "fingerprint.pb", "keras_metadata.pb": "keras_metadata.pb (Keras 2 model config)"}
    for label, size in sorted(extra.items()):
        bd.overhead.append({"what": what.get(label, label), "bytes": size})
    bd.file_bytes = (bd.file_bytes or 0) + sum(extra.values())
    bd.source = "savedmodel"
    bd.model_name = os.path.basename(os.path.normpath(path))
    if bd.optimizer is None:
        bd.optimizer = _keras2_metadata_optimizer(os.path.join(path, "keras_metadata.pb"))
    return bd


def _check_saved_model_pb(pb_path: str) -> None:
    """InspectError unless ``pb_path`` parses as a SavedModel proto (its graphs are left unparsed)."""
    folder = os.path.dirname(pb_path)
    data = read_file(pb_path, GRAPH_LIMIT, "saved_model.pb")
    try:
        saved = proto.SavedModel.FromString(data)
    except Exception as e:  # DecodeError, or a RecursionError on crafted nesting
        raise InspectError(f"{folder}: unreadable saved_model.pb ({type(e).__name__}: {first_line(e)})") from None
    if not saved.meta_graphs:
        raise InspectError(f"{folder}: saved_model.pb holds no MetaGraph (not a SavedModel)")


def _checkpoint_files(prefix: str) -> List[str]:
    folder = os.path.dirname(prefix)
    base = os.path.basename(prefix)
    if not os.path.isdir(folder):
        return []
    return [os.path.join(folder, f) for f in os.listdir(folder) if f.startswith(base + ".")]


def _keras2_metadata_optimizer(path: str) -> Optional[Dict[str, Any]]:
    """The optimizer recorded in a Keras 2 SavedModel's keras_metadata.pb, if any."""
    if not os.path.lexists(path):
        return None
    try:
        meta = proto.SavedMetadata.FromString(read_file(path, JSON_LIMIT, "keras_metadata.pb"))
        for node in meta.nodes:
            training = json.loads(node.metadata or "{}").get("training_config")
            if isinstance(training, dict) and training.get("optimizer_config"):
                return _optimizer_entry(training["optimizer_config"], "keras_metadata.pb training_config")
    except Exception:  # metadata is optional: a missing optimizer is shown as such
        return None
    return None


# --- Keras 3 .keras archive and .weights.h5 ---------------------------------------------------

def read_keras_archive(path: str) -> Breakdown:
    """A ``.keras`` zip: weights via h5py on the member, config.json for layers and optimizer."""
    try:
        with zipfile.ZipFile(path) as zf:
            members = zf.infolist()
            names = {m.filename: m for m in members}
            if "config.json" not in names:
                raise InspectError(f"{path}: a zip file but not a .keras archive (no config.json)")
            config = _json_object(_read_member(zf, names["config.json"], JSON_LIMIT), "config.json")
            overhead: List[Dict[str, Any]] = [{"what": f"{m.filename} in the archive", "bytes": m.compress_size}
                        for m in members if m.filename != "model.weights.h5"]
            variables: List[VariableRecord] = []
            optimizer = _compile_optimizer(config)
            if "model.weights.h5" in names:
                member = names["model.weights.h5"]
                variables, copies, _ = _with_member_h5(path, zf, member, lambda h5: _keras3_variables(
                    h5, config, roles.optimizer_chain(_compile_entry(config))))
                overhead += copies
                stored = sum(v.bytes for v in variables) + sum(o["bytes"] for o in copies)
                overhead.append({"what": "HDF5 structure of model.weights.h5 (headers, groups, attributes)",
                                 "bytes": member.file_size - stored})
                if member.compress_size != member.file_size:
                    overhead.append({"what": "zip compression of model.weights.h5",
                                     "bytes": member.compress_size - member.file_size})
    except InspectError as e:
        raise e if str(e).startswith(path) else InspectError(f"{path}: {e}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, zlib.error, NotImplementedError) as e:
        raise InspectError(
            f"{path}: corrupt or truncated .keras archive ({type(e).__name__}: {first_line(e)})") from None
    except (KeyError, ValueError) as e:  # the weights file does not have the layout Keras writes
        raise InspectError(f"{path}: inconsistent .keras archive ({first_line(e)})") from None
    file_bytes = os.path.getsize(path)
    inside = sum(v.bytes for v in variables) + sum(o["bytes"] for o in overhead)
    overhead.append({"what": "zip container (local headers, central directory)", "bytes": file_bytes - inside})
    model_config = config.get("config")
    name = model_config.get("name") if isinstance(model_config, dict) else None
    return Breakdown(source="keras", variables=VariableTable.from_rows(variables),
                     layers=LayerTable.from_rows(_classed_layers(variables, _config_layers(config))),
                     model_name=name if isinstance(name, str) else "",
                     optimizer=optimizer, file_bytes=file_bytes, overhead=overhead)


def _classed_layers(variables: List[VariableRecord], config_layers: Dict[str, Tuple[str, bool]]) -> List[LayerRecord]:
    """The layers of the variables' scopes (params and derivation from the stored shapes, as for
    any file), each with the class its config names ("" where it names none: shown as unknown)."""
    layers = scope_layer_records(variables)
    for layer in layers:
        layer.class_name = config_layers.get(layer.name, ("", True))[0]
    return layers


def _read_member(zf: zipfile.ZipFile, member: zipfile.ZipInfo, limit: int) -> bytes:
    """A small member, inflated at most ``limit`` bytes far (a zip bomb stops there)."""
    if member.file_size > limit:
        raise InspectError(f"{member.filename} declares {member.file_size:,} bytes, more than the "
                           f"{limit:,} this tool reads")
    with zf.open(member) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InspectError(f"{member.filename} inflates past {limit:,} bytes (a zip bomb?)")
    return data


def _json_object(raw: bytes, what: str) -> Dict[str, Any]:
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InspectError(f"{what} is not JSON ({first_line(e)})") from None
    except RecursionError:
        raise InspectError(f"{what} is nested too deeply to be a Keras config") from None
    if not isinstance(value, dict):
        raise InspectError(f"{what} is not a Keras model config (a JSON {type(value).__name__}, not an object)")
    return value


def _with_member_h5(path: str, zf: zipfile.ZipFile, member: zipfile.ZipInfo, read: Any) -> Any:
    """``read(h5)`` of the HDF5 file in a zip member. A stored member is the byte range of the
    archive after its local header: h5py reads it in place (no copy, no CRC pass over the
    values). A deflated one has no such range: it is inflated once into a temporary file,
    as far as its declared size and a ratio no real weights reach, then read the same way."""
    if member.compress_type == zipfile.ZIP_STORED:
        header = read_range(path, member.header_offset, _ZIP_LOCAL_HEADER.size)
        fields = _ZIP_LOCAL_HEADER.unpack(header)
        if fields[0] != 0x04034B50:
            raise InspectError(f"{path}: corrupt .keras archive (no local header for {member.filename})")
        start = member.header_offset + _ZIP_LOCAL_HEADER.size + fields[9] + fields[10]
        if start + member.compress_size > file_size(path):
            raise InspectError(f"{path}: truncated .keras archive ({member.filename} runs past the end)")
        with _h5_view(path, start, member.compress_size) as h5:
            return read(h5)
    if member.file_size > _MAX_INFLATE_RATIO * max(member.compress_size, 1):
        raise InspectError(f"{path}: {member.filename} would inflate {member.compress_size:,} bytes to "
                           f"{member.file_size:,} (over {_MAX_INFLATE_RATIO}x: a zip bomb, not weights)")
    with tempfile.NamedTemporaryFile(prefix="tb_modelmem_", suffix=".h5") as tmp:
        written = 0
        try:
            with zf.open(member) as fh:
                while chunk := fh.read(1 << 22):
                    written += len(chunk)
                    if written > member.file_size:
                        raise InspectError(f"{path}: {member.filename} inflates past its declared size")
                    tmp.write(chunk)
            tmp.flush()
        except OSError as e:  # ENOSPC and the like: the archive is not at fault
            raise InspectError(f"{path}: cannot inflate {member.filename} into {tmp.name} "
                               f"({e.strerror or type(e).__name__}); store it uncompressed, as Keras does") from None
        with _h5_view(tmp.name, 0, written) as h5:
            return read(h5)


@contextlib.contextmanager
def _h5_view(path: str, offset: int, size: int) -> Iterator[Any]:
    """h5py on bytes ``offset .. offset + size`` of a file, through a Python file object: HDF5
    then resolves an external link with that same object, so a crafted link to a FIFO or a
    device is never opened. Buffered: HDF5 reads headers a few hundred bytes at a time."""
    import h5py

    with FileView(path, offset, size) as view, io.BufferedReader(view, 8192) as buffered, \
            h5py.File(buffered, "r") as h5:
        yield h5


def _compile_entry(config: Dict[str, Any]) -> Any:
    compile_config = config.get("compile_config")
    return compile_config.get("optimizer") if isinstance(compile_config, dict) else None


def _compile_optimizer(config: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    entry = _optimizer_entry(_compile_entry(config), "config.json compile_config")
    return {k: entry[k] for k in ("class_name", "config", "recorded_in")} if entry else None


def _optimizer_entry(raw: Any, recorded_in: str) -> Optional[Dict[str, Any]]:
    """``{"class_name", "config", "recorded_in", ...}`` from a file's optimizer entry: an object
    ``{"class_name", "config"}`` or a bare name ("adam"). A field of the wrong JSON type is
    left empty rather than failing the whole inspection."""
    if isinstance(raw, str) and raw:
        return {"class_name": raw, "config": {}, "recorded_in": recorded_in}
    if not isinstance(raw, dict) or not raw:
        return None
    class_name, config = raw.get("class_name"), raw.get("config")
    return {**raw, "class_name": class_name if isinstance(class_name, str) else "",
            "config": config if isinstance(config, dict) else {}, "recorded_in": recorded_in}


def _keras3_variables(h5: Any, config: Optional[Dict[str, Any]], chain: List[roles.Level],
                      read: Optional[Reader] = None
                      ) -> Tuple[List[VariableRecord], List[Dict[str, Any]], Optional[roles.KerasLayout]]:
    """Model weights (``layers/.../vars/i``) then optimizer variables (``optimizer/vars/i``),
    overhead lines for what Keras stores twice (a wrapper's inner optimizer's variables), and
    what the optimizer variables were found to be (None: no optimizer, or none fits).
    ``read(offset, size)``: the file's bytes, for the order Keras wrote it in when no config says."""
    layers = _config_layers(config) if config else {}
    order = {name: i for i, name in enumerate(layers)}
    groups = _vars_groups(h5)
    weights: List[VariableRecord] = []
    model_groups = [(_group_name(h5, n) or n[: -len("/vars")], n, members) for n, members in groups.items()
                    if not n.startswith("optimizer/")]
    written = _write_order(h5, read)

    def rank(group: Tuple[str, str, List[str]]) -> Tuple[Any, ...]:
        """Model order: the config's, else the order Keras wrote the layers in, else where their headers lie."""
        layer, path, members = group
        place = written(path.rpartition("/")[0] or path)  # "layers/conv2d_3" of "layers/conv2d_3/vars"
        return (order.get(layer, len(order)), place, _last_header(h5, path, members) if math.inf in place else 0,
                natural_key(path))

    for layer, name, members in sorted(model_groups, key=rank):
        # Without config.json the h5 key still names the class: "layers/batch_normalization_3/vars".
        class_name, trainable = layers.get(layer, (re.sub(r"(_\d+)?/vars$", "", name).rsplit("/", 1)[-1], True))
        for i, key in enumerate(members):
            record = _record(f"{layer}/{key}", layer, _open(h5, f"{name}/{key}"), WEIGHT)
            record.role = roles.role(record.name, record.dtype, record.shape, trainable,
                                     keras_state=roles.is_keras_state_at(class_name, i, len(members)))
            weights.append(record)
    if "optimizer/vars" not in groups:
        return weights, [], None
    records = [_record("", "", _open(h5, f"optimizer/vars/{key}"), OTHER) for key in groups["optimizer/vars"]]
    if not chain:  # a .weights.h5 keeps no config: which weights train is read from the slots' shapes
        _mark_trainable_by_slots(weights, records)
    layout = _name_keras3_optimizer_vars(records, [w for w in weights if w.role == WEIGHT],
                                         _named_chain(h5, chain, groups))
    copies = [{"what": f"{name}: a second copy of {len(members)} inner optimizer variables (Keras saves a "
                       "wrapper's inner optimizer twice)",
               "bytes": sum(_record("", "", _open(h5, f"{name}/{key}"), OTHER).bytes for key in members)}
              for name, members in groups.items() if name.startswith("optimizer/") and name != "optimizer/vars"]
    return weights + records, copies, layout


def _vars_groups(h5: Any) -> Dict[str, List[str]]:
    """Each ``vars`` group of a Keras 3 weights file -> its members in index order, from one
    walk of the file's links (h5py's low-level API: no object built per member), visiting
    at most ``_MAX_H5_OBJECTS`` links (a crafted file may hold millions)."""
    from h5py import h5l

    links: List[Tuple[bytes, int]] = []

    def visit(name: bytes, info: Any) -> Optional[bool]:
        links.append((name, info.type))
        return True if len(links) > _MAX_H5_OBJECTS else None

    if h5.id.links.visit(visit, info=True):
        raise ValueError(f"more than {_MAX_H5_OBJECTS:,} HDF5 objects: not a Keras weights file")
    groups: Dict[str, List[str]] = {}
    for link, kind in links:
        parent, _, key = link.decode("utf-8", "replace").rpartition("/")
        if parent == "vars" or parent.endswith("/vars"):
            if kind != h5l.TYPE_HARD:
                raise ValueError(f"/{parent}/{key} is a soft or external link; Keras stores weights, not links")
            groups.setdefault(parent, []).append(key)
    return {name: sorted(members, key=_index_key) for name, members in groups.items()}


def _open(h5: Any, path: str) -> Any:
    """The low-level object at ``path`` (an h5py DatasetID for a weight)."""
    from h5py import h5o

    return h5o.open(h5.id, path.encode("utf-8"))


def _group_name(h5: Any, path: str) -> str:
    """A Keras ``vars`` group's ``name`` attribute: the layer or optimizer it belongs to."""
    import h5py

    return _attr_str(h5py.Group(_open(h5, path)).attrs.get("name"))


def _named_chain(h5: Any, chain: List[roles.Level], groups: Dict[str, List[str]]) -> List[roles.Level]:
    """The optimizer chain with every optimizer named: from the config when there is one
    (``chain``), else from the ``name`` attribute of ``optimizer/vars``, then of the group
    of each wrapped optimizer (``optimizer/inner_optimizer/vars``): all a .weights.h5 keeps."""
    named: List[roles.Level] = []
    prefix = "optimizer"
    for depth in range(len(chain) if chain else 8):
        group = prefix + "/vars"
        if not chain and group not in groups:
            break
        class_name, config, name = chain[depth] if chain else ("", None, "")
        stored = _group_name(h5, group) if group in groups else ""
        named.append((class_name, config, name or stored or "optimizer"))
        wraps = roles.wrapped_key(class_name, named[-1][2])
        if not wraps:
            break
        prefix += "/" + wraps
    return named or [("", None, "optimizer")]


def _name_keras3_optimizer_vars(records: List[VariableRecord], trainable: List[VariableRecord],
                                chain: List[roles.Level]) -> Optional[roles.KerasLayout]:
    """Name each optimizer variable stored by index: a slot of its weight (and that weight's
    layer) where ``roles.keras_layout`` can tell; counters and hyper-parameters are OTHER."""
    layout = roles.keras_layout([(w.name, w.shape, w.dtype) for w in trainable],
                                [roles.Stored(r.shape, r.dtype) for r in records], chain)
    top = chain[0][2]
    for i, r in enumerate(records):
        if layout is None:  # unknown optimizer: no owner; non-scalars are still slots
            r.name, r.layer = f"{top}/{i}", top
            r.role = roles.optimizer_variable_role(r.name, r.shape)
            continue
        kind, what = layout.entries[i]
        if kind == "slot":
            weight = trainable[what[0]]
            r.name, r.layer, r.role, r.slot, r.slot_of = (f"{top}/{weight.name}/{what[1]}", weight.layer,
                                                          OPTIMIZER_SLOT, what[1], weight.name)
        else:
            scope = chain[what[0]][2]
            r.name, r.layer, r.role = f"{scope}/{what[1]}", scope, OTHER
    return layout


def _mark_trainable_by_slots(weights: List[VariableRecord], opt_vars: Sequence[VariableRecord]) -> None:
    """Without a config, a weight is trainable if the optimizer's first slots follow its shape
    (k slots per weight, interleaved as ``add_optimizer_variables`` creates them). Known state
    (a BatchNormalization's statistics) has no slots and is not matched: its [C] shape would
    take the slots of the next layer's [C] gamma."""
    slot_shapes = [v.shape for v in opt_vars if v.shape]
    candidates = [w for w in weights if w.role == WEIGHT]
    if not slot_shapes:  # plain SGD keeps no slots: nothing to tell frozen weights by
        return

    def matches(k: int) -> List[bool]:
        j, hits = 0, []
        for w in candidates:
            hit = len(slot_shapes) >= j + k and all(s == w.shape for s in slot_shapes[j:j + k])
            j += k if hit else 0
            hits.append(hit)
        return hits

    full = [hits for k in (1, 2, 3) for hits in [matches(k)] if sum(hits) * k == len(slot_shapes)]
    if not full:  # the stored order does not explain the slots: leave trainability unknown (weight)
        return
    for w, hit in zip(candidates, full[0]):
        if not hit:
            w.role = roles.role(w.name, w.dtype, w.shape, trainable=False)


def _config_layers(config: Dict[str, Any], inherited: bool = True, depth: int = 0) -> Dict[str, Tuple[str, bool]]:
    """Layer name -> (class name, trainable) for every layer in a (nested) model config."""
    out: Dict[str, Tuple[str, bool]] = {}
    cfg = config.get("config") or {}
    if not isinstance(cfg, dict) or depth > 64:
        return out
    trainable = inherited and cfg.get("trainable", True) is not False
    if isinstance(cfg.get("name"), str):
        class_name = config.get("class_name")
        out[cfg["name"]] = (class_name if isinstance(class_name, str) else "", trainable)
    layers = cfg.get("layers")
    for layer in layers if isinstance(layers, list) else []:
        if isinstance(layer, dict):
            out.update(_config_layers(layer, trainable, depth + 1))
    return out


def _last_header(h5: Any, path: str, members: List[str]) -> float:
    """Where HDF5 put the last object header of a layer's ``vars`` group: HDF5 gives headers
    addresses one after the other, except in space it freed (a group's name heap outgrown) and
    reuses, so this orders layers only where ``_write_order`` cannot (a dataset's data is no
    guide at all: HDF5 packs small ones, a BatchNormalization's [64] gamma, into blocks it set
    aside before the large ones written ahead of them, ResNet50's conv kernels)."""
    from h5py import h5o

    return max((h5o.get_info(_open(h5, f"{path}/{key}")).addr for key in members), default=math.inf)


Reader = Callable[[int, int], bytes]


def _write_order(h5: Any, read: Optional[Reader]) -> Callable[[str], Tuple[float, ...]]:
    """``rank(path)`` of a group ("layers/conv2d_3/vars"): the order Keras wrote it in, as each
    part's place among its parent's members in the order they were added; (inf,) where that
    cannot be read. Keras writes layers in model order (``model.layers``, whose variables are
    ``trainable_variables`` in that order); an HDF5 group made by h5py's defaults keeps its
    members in a B-tree sorted by name, but their names in a local heap in the order they were
    added: that heap is read here, bounded and checked (anything unexpected: not used)."""
    sizes = _h5_sizes(read) if read is not None else None
    found: Dict[str, Optional[Dict[str, int]]] = {}

    def rank(path: str) -> Tuple[float, ...]:
        parts = path.split("/")
        out: List[float] = []
        for depth, part in enumerate(parts):
            parent = "/".join(parts[:depth]) or "/"
            if parent not in found:
                found[parent] = _added_order(h5, read, sizes, parent) if read is not None and sizes else None
            place = (found[parent] or {}).get(part)
            if place is None:
                return (math.inf,)
            out.append(place)
        return tuple(out)

    return rank


def _h5_sizes(read: Reader) -> Optional[Tuple[int, int]]:
    """(size of offsets, size of lengths) of an HDF5 file whose superblock (version 0 or 1, the
    one h5py's defaults write) is at byte 0 with base address 0; None otherwise."""
    head = _bytes_at(read, 0, 32)
    if head is None or head[:8] != _H5_SIGNATURE or head[8] not in (0, 1):
        return None
    offsets, lengths = head[13], head[14]
    if offsets not in (2, 4, 8) or lengths not in (2, 4, 8) or len(head) < 24 + offsets:
        return None
    return (offsets, lengths) if int.from_bytes(head[24:24 + offsets], "little") == 0 else None


def _added_order(h5: Any, read: Reader, sizes: Tuple[int, int], group: str) -> Optional[Dict[str, int]]:
    """Member name -> its place in the order the members of ``group`` were added, from the local
    heap its symbol-table message names (in the first chunk of a version 1 object header, where
    h5py writes it); None if the group is not stored so or the heap does not hold exactly its
    members' names."""
    import h5py
    from h5py import h5o

    offsets, lengths = sizes
    number = lambda raw, at, n: int.from_bytes(raw[at:at + n], "little")  # noqa: E731
    oid = _open(h5, group)
    head = _bytes_at(read, h5o.get_info(oid).addr, 16)
    if head is None or head[0] != 1:
        return None
    block = _bytes_at(read, h5o.get_info(oid).addr + 16, min(number(head, 8, 4), _MAX_H5_HEADER))
    pos = 0
    while block is not None and pos + 8 <= len(block):  # messages: type, size, flags, 3 reserved, body
        kind, size = number(block, pos, 2), number(block, pos + 2, 2)
        if kind == 0x11 and size >= 2 * offsets:  # symbol table: B-tree address, local heap address
            heap_at = number(block, pos + 8 + offsets, offsets)
            heap = _bytes_at(read, heap_at, 8 + 2 * lengths + offsets)
            if heap is None or heap[:5] != b"HEAP\0" or number(heap, 8, lengths) > JSON_LIMIT:
                return None
            names = _bytes_at(read, number(heap, 8 + 2 * lengths, offsets), number(heap, 8, lengths))
            members = set(h5py.Group(oid).keys())
            places: Dict[str, int] = {}
            for raw in (names or b"").split(b"\0"):
                name = raw.decode("utf-8", "replace")
                if name in members and name not in places:
                    places[name] = len(places)
            return places if len(places) == len(members) else None
        pos += 8 + size
    return None


def _bytes_at(read: Reader, offset: int, size: int) -> Optional[bytes]:
    """``size`` bytes at ``offset``, or None where the file has none (an address nothing checked)."""
    try:
        return read(offset, size)
    except InspectError:
        return None


def _index_key(key: str) -> Tuple[int, str]:
    return (int(key), "") if key.isdigit() else (1 << 30, key)



def _attr_str(value: Any) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _record(name: str, layer: str, oid: Any, role: str) -> VariableRecord:
    """The record of a dataset (h5py low-level ID), if the file really holds what it declares:
    a numeric dtype, and (uncompressed) as many stored bytes as its shape says (a crafted
    header may declare exabytes over no data at all)."""
    from h5py import h5d, h5i

    where = h5i.get_name(oid).decode("utf-8", "replace")
    if not isinstance(oid, h5d.DatasetID):
        raise ValueError(f"{where}: expected a weight's dataset, found a {type(oid).__name__[:-2].lower()}")
    dtype = oid.dtype
    if dtype.kind not in "biufc":
        raise ValueError(f"{where}: a {dtype} dataset is not a weight")
    shape = [int(d) for d in oid.shape]
    declared = math.prod(shape) * dtype.itemsize
    stored = oid.get_storage_size()
    if declared and stored < declared and (stored == 0 or not oid.get_create_plist().get_nfilters()):
        raise ValueError(f"{where}: declares {shape} {dtype} = {declared:,} bytes, the file stores {stored:,}")
    return VariableRecord(name=name, layer=layer, shape=shape, dtype=str(dtype), bytes=declared, role=role)


# --- HDF5 files: Keras 3 .weights.h5 and legacy Keras 2 .h5 ---------------------------------------

def read_h5(path: str) -> Breakdown:
    """A Keras HDF5 file: legacy full model / weights (Keras 2 layout) or Keras 3 ``.weights.h5``."""
    try:
        with _h5_view(path, 0, file_size(path)) as h5:
            if "model_weights" in h5 or "layer_names" in h5.attrs:
                return _read_legacy_h5(path, h5)
            if "layers" in h5 or "vars" in h5:
                variables, copies, layout = _keras3_variables(
                    h5, None, [], lambda offset, size: read_range(path, offset, size))
                opt = _keras3_weights_optimizer(h5, layout)
                return _h5_breakdown(path, "keras weights.h5", variables, opt, copies)
    except InspectError as e:
        raise e if str(e).startswith(path) else InspectError(f"{path}: {e}") from None
    except OSError as e:
        raise InspectError(f"{path}: corrupt or truncated HDF5 file ({first_line(e)})") from None
    except (KeyError, ValueError, TypeError) as e:  # h5py: a member the file's own attributes list is missing
        raise InspectError(f"{path}: inconsistent Keras HDF5 file ({first_line(e)})") from None
    raise InspectError(f"{path}: an HDF5 file but not a Keras model or weights file")


def _member(group: Any, name: str) -> Any:
    """``group[name]`` for a name the file's own attributes list; ValueError naming it if absent
    or a link (Keras writes none; a crafted one may loop or lead out of the file)."""
    import h5py

    where = f"{group.name.rstrip('/')}/{name}"
    link = group.get(name, getlink=True)
    if link is None:
        raise ValueError(f"{where} is listed in the file's attributes but missing")
    if not isinstance(link, h5py.HardLink):
        raise ValueError(f"{where} is a soft or external link; Keras stores weights, not links")
    return group[name]


def _keras3_weights_optimizer(h5: Any, layout: Optional[roles.KerasLayout]) -> Optional[Dict[str, Any]]:
    """A .weights.h5 keeps the optimizer's name and variables, not its class or config: the
    class is the one whose build() explains the variables (others that also do are named)."""
    if "optimizer" not in h5:
        return None
    if layout is None:
        return {"class_name": "", "config": {},
                "recorded_in": "not recorded: .weights.h5 keeps the optimizer's variables, not its class"}
    also = f"; as well explained by {', '.join(layout.also)}" if layout.also else ""
    return {"class_name": layout.class_name, "config": {"flags": layout.flags} if layout.flags else {},
            "recorded_in": f"inferred from the optimizer's variables (.weights.h5 keeps no class){also}"}


def _h5_breakdown(path: str, source: str, variables: List[VariableRecord], optimizer: Optional[Dict[str, Any]],
                  overhead: List[Dict[str, Any]], layers: Optional[List[LayerRecord]] = None) -> Breakdown:
    file_bytes = os.path.getsize(path)
    rest = file_bytes - sum(v.bytes for v in variables) - sum(o["bytes"] for o in overhead)
    if rest < 0:  # datasets declare more than the file holds: _record checks each, this the sum
        raise InspectError(f"{path}: its datasets declare {file_bytes - rest:,} bytes, the file has {file_bytes:,}")
    overhead.append({"what": "HDF5 structure (headers, groups, other attributes)", "bytes": rest})
    return Breakdown(source=source, variables=VariableTable.from_rows(variables),
                     layers=LayerTable.from_rows(layers or []), model_name=os.path.basename(path),
                     optimizer=optimizer, file_bytes=file_bytes, overhead=overhead)


def _read_legacy_h5(path: str, h5: Any) -> Breakdown:
    weights_group = _member(h5, "model_weights") if "model_weights" in h5 else h5
    model_config = _json_attr(h5, "model_config")
    training = _json_attr(h5, "training_config") or {}
    layers = _config_layers(model_config) if model_config else {}
    variables: List[VariableRecord] = []
    for layer in [_attr_str(n) for n in _list_attr(weights_group, "layer_names")]:
        group = _member(weights_group, layer)
        _, trainable = layers.get(layer, ("", True))
        for wname in [_attr_str(n) for n in _list_attr(group, "weight_names")]:
            name = wname.split(":")[0]
            record = _record(name, layer, _member(group, wname).id, WEIGHT)
            record.role = roles.role(name, record.dtype, record.shape, None if trainable else False)
            variables.append(record)
    optimizer = _optimizer_entry(training.get("optimizer_config"), "training_config attribute")
    if "optimizer_weights" in h5:
        variables += _legacy_optimizer_vars(_member(h5, "optimizer_weights"), variables,
                                            roles.optimizer_chain(training.get("optimizer_config")))
    overhead = [{"what": f"{key} attribute (JSON)", "bytes": len(_attr_str(h5.attrs[key]).encode())}
                for key in ("model_config", "training_config") if key in h5.attrs]
    return _h5_breakdown(path, "keras h5 (legacy)", variables, optimizer, overhead,
                         _classed_layers(variables, layers) if layers else None)


def _list_attr(obj: Any, key: str) -> List[Any]:
    """An attribute that lists names (``layer_names``, ``weight_names``); [] if absent or not a list."""
    value = obj.attrs.get(key)
    if value is None or isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        return []
    return list(value)


def _json_attr(h5: Any, key: str) -> Optional[Dict[str, Any]]:
    raw = h5.attrs.get(key)
    if raw is None:
        return None
    text = _attr_str(raw)
    if len(text) > JSON_LIMIT:
        raise InspectError(f"the {key} attribute is {len(text):,} bytes, more than the {JSON_LIMIT:,} this tool reads")
    try:
        return _json_object(text.encode(), f"the {key} attribute")
    except InspectError:
        return None  # optional metadata of the wrong shape: the weights are still read


def _legacy_optimizer_vars(group: Any, weights: List[VariableRecord], chain: List[roles.Level]) -> List[VariableRecord]:
    """Optimizer weights, named: ``<opt>/<weight path with _>_<slot>`` (Keras 3, told apart by
    ``roles.keras_layout`` with the names checked) or ``<opt>/<var>/<slot>`` (Keras 2)."""
    by_name = {w.name: w for w in weights}
    trainable = [w for w in weights if w.role == WEIGHT]
    records = []
    for raw in [_attr_str(n) for n in _list_attr(group, "weight_names")]:
        name = raw.split(":")[0]
        records.append(_record(name, name.split("/", 1)[0], _member(group, raw).id, OTHER))
    layout = roles.keras_layout([(w.name, w.shape, w.dtype) for w in trainable],
                                [roles.Stored(r.shape, r.dtype, r.name) for r in records],
                                chain or [("", None, records[0].layer if records else "")])
    for i, rec in enumerate(records):
        if layout is not None:
            kind, what = layout.entries[i]
            hit = (trainable[what[0]].name, what[1]) if kind == "slot" else None
        else:  # not a Keras 3 optimizer's layout: Keras 2 names, then Keras 3 naming of a custom one
            hit = roles.slot_match(rec.name, set(by_name))
            named = None if hit else roles.keras_slot_by_name(rec.name, by_name)
            hit = (named[1], named[0]) if named else hit
        if hit and rec.shape and (layout is not None or by_name[hit[0]].shape == rec.shape):
            rec.slot_of, rec.slot, rec.role, rec.layer = hit[0], hit[1], OPTIMIZER_SLOT, by_name[hit[0]].layer
        elif layout is None:
            rec.role = roles.optimizer_variable_role(rec.name, rec.shape)
    return records
