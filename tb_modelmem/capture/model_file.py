"""Breakdown of a saved Keras model or SavedModel from its metadata, never its tensor values.

Formats: Keras 3 ``.keras`` (zip of config.json + model.weights.h5), ``.weights.h5``,
legacy Keras 2 ``.h5``/``.hdf5`` (``model_weights`` + ``optimizer_weights``) and
SavedModel folders (whose ``variables/`` is a TF2 checkpoint). Shapes and dtypes come
from HDF5 dataset headers; what the format does not let us attribute (config, HDF5 and
zip structure, graphs) is an overhead line, so variables + overhead == file_bytes.
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile
import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tb_modelmem.capture.checkpoint import (NON_TRAINABLE_NAMES, OTHER_NAMES, InspectError, find_prefix,
                                            read_checkpoint, slot_match)
from tb_modelmem.messages import first_line
from tb_modelmem.records import NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, WEIGHT, Breakdown, VariableRecord

_H5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# Keras 3 optimizers' default ``name`` -> class, for files that keep only the name.
_DEFAULT_OPTIMIZER_NAMES = {c.lower(): c for c in ("Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "Ftrl",
                                                    "Lamb", "Lion", "Nadam", "RMSprop", "SGD")}


def _keras3_slot_calls(class_name: str, config: Dict[str, Any]) -> List[List[str]]:
    """Slot names a Keras 3 optimizer creates per trainable variable, grouped by
    ``add_optimizer_variables`` call (keras/src/optimizers/*.py ``build``), in creation order."""
    calls: List[List[str]] = []
    if config.get("use_ema"):
        calls.append(["average"])
    if config.get("gradient_accumulation_steps"):
        calls.append(["gradient_accumulator"])
    if class_name in ("Adam", "AdamW", "Lamb", "Nadam", "ScheduleFreeAdamW"):
        calls.append(["momentum", "velocity"])
        if config.get("amsgrad"):
            calls.append(["velocity_hat"])
    elif class_name == "SGD" and config.get("momentum"):
        calls.append(["momentum"])
    elif class_name == "RMSprop":
        calls.append(["velocity"])
        if config.get("momentum"):
            calls.append(["momentum"])
        if config.get("centered"):
            calls.append(["average_gradient"])
    elif class_name == "Adagrad":
        calls.append(["accumulator"])
    elif class_name == "Adadelta":
        calls.append(["accumulated_grad", "accumulated_delta"])
    elif class_name == "Adamax":
        calls.append(["m", "u"])
    elif class_name == "Ftrl":
        calls.append(["accumulator", "linear"])
    elif class_name == "Lion":
        calls.append(["momentum"])
    return calls


def read_path(path: str) -> Breakdown:
    """Breakdown of any supported model file, SavedModel folder or checkpoint at ``path``."""
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise InspectError(f"{path}: no such file or folder")
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "saved_model.pb")):
        return read_saved_model(path)
    if os.path.isfile(path):
        with open(path, "rb") as f:
            head = f.read(8)
        if head[:4] == b"PK\x03\x04":
            return read_keras_archive(path)
        if head == _H5_SIGNATURE:
            return read_h5(path)
    if os.path.isdir(path):
        return read_checkpoint(path)  # its error says what the folder lacks
    try:
        find_prefix(path)
    except InspectError:
        raise InspectError(f"{path}: not a model file or checkpoint (expected .keras, .h5, .weights.h5, "
                           "a SavedModel folder, or a TF checkpoint)") from None
    return read_checkpoint(path)


# --- SavedModel -----------------------------------------------------------------------------

def read_saved_model(path: str) -> Breakdown:
    """Variables from ``variables/variables``; every other file in the folder is overhead."""
    _check_saved_model_pb(os.path.join(path, "saved_model.pb"))
    prefix = os.path.join(path, "variables", "variables")
    if os.path.exists(prefix + ".index"):
        bd = read_checkpoint(prefix)
    else:  # a SavedModel without variables (e.g. all constants folded into the graph)
        bd = Breakdown(source="", variables=[], file_bytes=0)
    counted = {os.path.abspath(p) for p in _checkpoint_files(prefix)}
    extra: Dict[str, int] = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.abspath(os.path.join(root, name))
            if full in counted:
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
    """InspectError unless ``pb_path`` parses as a SavedModel proto (graphs only, no tensor values)."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2

    try:
        with open(pb_path, "rb") as f:
            saved = saved_model_pb2.SavedModel.FromString(f.read())
    except (OSError, DecodeError) as e:
        raise InspectError(f"{os.path.dirname(pb_path)}: unreadable saved_model.pb ({first_line(e)})") from None
    if not saved.meta_graphs:
        raise InspectError(f"{os.path.dirname(pb_path)}: saved_model.pb holds no MetaGraph (not a SavedModel)")


def _checkpoint_files(prefix: str) -> List[str]:
    folder = os.path.dirname(prefix)
    base = os.path.basename(prefix)
    if not os.path.isdir(folder):
        return []
    return [os.path.join(folder, f) for f in os.listdir(folder) if f.startswith(base + ".")]


def _keras2_metadata_optimizer(path: str) -> Optional[Dict[str, Any]]:
    """The optimizer recorded in a Keras 2 SavedModel's keras_metadata.pb, if any."""
    if not os.path.exists(path):
        return None
    try:
        from tensorflow.python.keras.protobuf import saved_metadata_pb2

        with open(path, "rb") as f:
            meta = saved_metadata_pb2.SavedMetadata.FromString(f.read())
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
    import h5py

    try:
        with zipfile.ZipFile(path) as zf:
            members = zf.infolist()
            names = {m.filename: m for m in members}
            if "config.json" not in names:
                raise InspectError(f"{path}: a zip file but not a .keras archive (no config.json)")
            try:
                config = json.loads(zf.read("config.json"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise InspectError(f"{path}: config.json is not JSON ({first_line(e)})") from None
            if not isinstance(config, dict):
                raise InspectError(f"{path}: config.json is not a Keras model config (a JSON "
                                   f"{type(config).__name__}, not an object)")
            overhead = [{"what": f"{m.filename} in the archive", "bytes": m.compress_size}
                        for m in members if m.filename != "model.weights.h5"]
            variables: List[VariableRecord] = []
            optimizer = _compile_optimizer(config)
            if "model.weights.h5" in names:
                member = names["model.weights.h5"]
                with zf.open(member) as fh, h5py.File(fh, "r") as h5:
                    variables = _keras3_variables(h5, config, optimizer)
                stored = sum(v.bytes for v in variables)
                overhead.append({"what": "HDF5 structure of model.weights.h5 (headers, groups, attributes)",
                                 "bytes": member.file_size - stored})
                if member.compress_size != member.file_size:
                    overhead.append({"what": "zip compression of model.weights.h5",
                                     "bytes": member.compress_size - member.file_size})
    except InspectError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
        raise InspectError(f"{path}: corrupt or truncated .keras archive ({type(e).__name__}: {first_line(e)})") from None
    except (KeyError, ValueError) as e:  # the weights file does not have the layout Keras writes
        raise InspectError(f"{path}: inconsistent .keras archive ({first_line(e)})") from None
    file_bytes = os.path.getsize(path)
    inside = sum(v.bytes for v in variables) + sum(o["bytes"] for o in overhead)
    overhead.append({"what": "zip container (local headers, central directory)", "bytes": file_bytes - inside})
    model_config = config.get("config")
    name = model_config.get("name") if isinstance(model_config, dict) else None
    return Breakdown(source="keras", variables=variables, model_name=name if isinstance(name, str) else "",
                     optimizer=optimizer, file_bytes=file_bytes, overhead=overhead)


def _compile_optimizer(config: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    compile_config = config.get("compile_config")
    opt = compile_config.get("optimizer") if isinstance(compile_config, dict) else None
    entry = _optimizer_entry(opt, "config.json compile_config")
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


def _keras3_variables(h5: Any, config: Optional[Dict[str, Any]], optimizer: Optional[Dict[str, Any]]) -> List[VariableRecord]:
    """Model weights (``layers/.../vars/i``) then optimizer variables (``optimizer/vars/i``)."""
    layers = _config_layers(config) if config else {}
    order = list(layers)
    groups: List[Tuple[str, Any]] = []
    opt_group = None

    def visit(name: str, obj: Any) -> None:
        nonlocal opt_group
        if (name == "vars" or name.endswith("/vars")) and hasattr(obj, "keys") and len(obj):
            if name == "optimizer/vars":
                opt_group = obj
            else:
                groups.append((name, obj))

    h5.visititems(visit)
    weights: List[VariableRecord] = []
    for name, group in sorted(groups, key=lambda g: _layer_rank(g[1], order)):
        layer = _attr_str(group.attrs.get("name")) or name[: -len("/vars")]
        # Without config.json the h5 key still names the class: "layers/batch_normalization_3/vars".
        class_name, trainable = layers.get(layer, (re.sub(r"(_\d+)?/vars$", "", name).rsplit("/", 1)[-1], True))
        datasets = [group[k] for k in sorted(group.keys(), key=_index_key)]
        for i, ds in enumerate(datasets):
            role = WEIGHT if trainable else NON_TRAINABLE
            if re.search(r"BatchNormalization|batch_normalization", class_name) and i >= len(datasets) - 2:
                role = NON_TRAINABLE  # moving_mean, moving_variance come last
            weights.append(_record(f"{layer}/{ds.name.rsplit('/', 1)[-1]}", layer, ds, role))
    if opt_group is None:
        return weights
    opt_name = _attr_str(opt_group.attrs.get("name")) or "optimizer"
    opt_vars = [opt_group[k] for k in sorted(opt_group.keys(), key=_index_key)]
    if not config:
        _mark_trainable_by_slots(weights, opt_vars)
    cls = (optimizer or {}).get("class_name") or _DEFAULT_OPTIMIZER_NAMES.get(re.sub(r"_\d+$", "", opt_name), "")
    calls = _keras3_slot_calls(cls, (optimizer or {}).get("config", {}))
    return weights + _keras3_optimizer_vars(opt_name, opt_vars, [w for w in weights if w.role == WEIGHT], calls)


def _keras3_optimizer_vars(opt_name: str, opt_vars: Sequence[Any], trainable: List[VariableRecord],
                           calls: List[List[str]]) -> List[VariableRecord]:
    """Scalars are counters/hyper-parameters; the rest are slots, mapped to weights when the
    optimizer's known creation order matches the stored shapes, else left unmapped."""
    records = []
    for i, ds in enumerate(opt_vars):
        scalar = ds.shape == ()
        role = OTHER if scalar else OPTIMIZER_SLOT
        name = {0: "iteration", 1: "learning_rate"}.get(i, str(i)) if scalar else str(i)
        records.append(_record(f"{opt_name}/{name}", opt_name, ds, role))
    slots = [r for r in records if r.role == OPTIMIZER_SLOT]
    expected = [(w, slot) for call in calls for w in trainable for slot in call]
    if len(expected) == len(slots) and all(list(s.shape) == w.shape for s, (w, _) in zip(slots, expected)):
        for s, (w, slot) in zip(slots, expected):
            s.slot, s.slot_of, s.layer = slot, w.name, w.layer
            s.name = f"{opt_name}/{w.name}/{slot}"
    return records


def _mark_trainable_by_slots(weights: List[VariableRecord], opt_vars: Sequence[Any]) -> None:
    """Without a config, a weight is trainable if the optimizer's first slots follow its shape
    (k slots per weight, interleaved as ``add_optimizer_variables`` creates them)."""
    slot_shapes = [list(ds.shape) for ds in opt_vars if ds.shape != ()]

    def matches(k: int) -> List[bool]:
        j, hits = 0, []
        for w in weights:
            hit = len(slot_shapes) >= j + k and all(s == w.shape for s in slot_shapes[j:j + k])
            j += k if hit else 0
            hits.append(hit)
        return hits

    full = [hits for k in (1, 2, 3) for hits in [matches(k)] if sum(hits) * k == len(slot_shapes)]
    if not full:  # the stored order does not explain the slots: leave trainability unknown (weight)
        return
    for w, hit in zip(weights, full[0]):
        if not hit and w.role == WEIGHT:
            w.role = NON_TRAINABLE


def _config_layers(config: Dict[str, Any], inherited: bool = True) -> Dict[str, Tuple[str, bool]]:
    """Layer name -> (class name, trainable) for every layer in a (nested) model config."""
    out: Dict[str, Tuple[str, bool]] = {}
    cfg = config.get("config") or {}
    if not isinstance(cfg, dict):
        return out
    trainable = inherited and cfg.get("trainable", True) is not False
    if cfg.get("name"):
        out[cfg["name"]] = (config.get("class_name", ""), trainable)
    for layer in cfg.get("layers") or []:
        if isinstance(layer, dict):
            out.update(_config_layers(layer, trainable))
    return out


def _layer_rank(group: Any, order: List[str]) -> Tuple[int, List[Any]]:
    name = _attr_str(group.attrs.get("name"))
    return (order.index(name) if name in order else len(order), _natural(group.name))


def _index_key(key: str) -> Tuple[int, str]:
    return (int(key), "") if key.isdigit() else (1 << 30, key)


def _natural(name: str) -> List[Any]:
    """"dense_2" before "dense_10", as Keras numbered them."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _attr_str(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _record(name: str, layer: str, ds: Any, role: str) -> VariableRecord:
    import h5py

    if not isinstance(ds, h5py.Dataset):
        raise ValueError(f"{ds.name}: expected a weight's dataset, found a {type(ds).__name__.lower()}")
    shape = [int(d) for d in ds.shape]
    return VariableRecord(name=name, layer=layer, shape=shape, dtype=str(ds.dtype),
                          bytes=math.prod(shape) * ds.dtype.itemsize, role=role)


# --- HDF5 files: Keras 3 .weights.h5 and legacy Keras 2 .h5 ---------------------------------------

def read_h5(path: str) -> Breakdown:
    """A Keras HDF5 file: legacy full model / weights (Keras 2 layout) or Keras 3 ``.weights.h5``."""
    import h5py

    try:
        with h5py.File(path, "r") as h5:
            if "model_weights" in h5 or "layer_names" in h5.attrs:
                return _read_legacy_h5(path, h5)
            if "layers" in h5 or "vars" in h5:
                variables = _keras3_variables(h5, None, None)
                opt = _keras3_weights_optimizer(h5)
                return _h5_breakdown(path, "keras weights.h5", variables, opt, [])
    except InspectError:
        raise
    except OSError as e:
        raise InspectError(f"{path}: corrupt or truncated HDF5 file ({first_line(e)})") from None
    except (KeyError, ValueError) as e:  # h5py: a member the file's own attributes list is missing
        raise InspectError(f"{path}: inconsistent Keras HDF5 file ({first_line(e)})") from None
    raise InspectError(f"{path}: an HDF5 file but not a Keras model or weights file")


def _member(group: Any, name: str) -> Any:
    """``group[name]`` for a name the file's own attributes list; ValueError naming it if absent."""
    if name not in group:
        raise ValueError(f"{group.name.rstrip('/')}/{name} is listed in the file's attributes but missing")
    return group[name]


def _keras3_weights_optimizer(h5: Any) -> Optional[Dict[str, Any]]:
    group = h5.get("optimizer/vars")
    if group is None:
        return None
    return {"class_name": "", "config": {}, "name": _attr_str(group.attrs.get("name")),
            "recorded_in": "not recorded: .weights.h5 keeps the optimizer's variables, not its class"}


def _h5_breakdown(path: str, source: str, variables: List[VariableRecord], optimizer: Optional[Dict[str, Any]],
                  overhead: List[Dict[str, Any]]) -> Breakdown:
    file_bytes = os.path.getsize(path)
    rest = file_bytes - sum(v.bytes for v in variables) - sum(o["bytes"] for o in overhead)
    overhead.append({"what": "HDF5 structure (headers, groups, other attributes)", "bytes": rest})
    return Breakdown(source=source, variables=variables, model_name=os.path.basename(path), optimizer=optimizer,
                     file_bytes=file_bytes, overhead=overhead)


def _read_legacy_h5(path: str, h5: Any) -> Breakdown:
    weights_group = h5["model_weights"] if "model_weights" in h5 else h5
    model_config = _json_attr(h5, "model_config")
    training = _json_attr(h5, "training_config") or {}
    layers = _config_layers(model_config) if model_config else {}
    variables: List[VariableRecord] = []
    for layer in [_attr_str(n) for n in weights_group.attrs.get("layer_names", [])]:
        group = _member(weights_group, layer)
        _, trainable = layers.get(layer, ("", True))
        for wname in [_attr_str(n) for n in group.attrs.get("weight_names", [])]:
            last = wname.split(":")[0].rsplit("/", 1)[-1]
            role = NON_TRAINABLE if (not trainable or last in NON_TRAINABLE_NAMES) else WEIGHT
            variables.append(_record(wname.split(":")[0], layer, _member(group, wname), role))
    if "optimizer_weights" in h5:
        variables += _legacy_optimizer_vars(h5["optimizer_weights"], variables)
    optimizer = _optimizer_entry(training.get("optimizer_config"), "training_config attribute")
    overhead = [{"what": f"{key} attribute (JSON)", "bytes": len(_attr_str(h5.attrs[key]).encode())}
                for key in ("model_config", "training_config") if key in h5.attrs]
    return _h5_breakdown(path, "keras h5 (legacy)", variables, optimizer, overhead)


def _json_attr(h5: Any, key: str) -> Optional[Dict[str, Any]]:
    raw = h5.attrs.get(key)
    if raw is None:
        return None
    try:
        value = json.loads(_attr_str(raw))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _legacy_optimizer_vars(group: Any, weights: List[VariableRecord]) -> List[VariableRecord]:
    """Optimizer weights named ``<opt>/<var>/<slot>`` (Keras 2) or ``<opt>/<var_path_>_<slot>`` (Keras 3)."""
    by_name = {w.name: w for w in weights}
    flat = sorted(((w.name.replace("/", "_"), w) for w in weights), key=lambda fw: -len(fw[0]))
    records = []
    for raw in [_attr_str(n) for n in group.attrs.get("weight_names", [])]:
        name = raw.split(":")[0]
        opt, _, rest = name.partition("/")
        ds = _member(group, raw)
        rec = _record(name, opt, ds, OTHER if getattr(ds, "shape", None) == () else OPTIMIZER_SLOT)
        hit = slot_match(name, set(by_name))
        if hit:
            rec.slot_of, rec.slot = hit
        else:
            for prefix, w in flat:
                if rest.startswith(prefix + "_"):
                    rec.slot_of, rec.slot = w.name, rest[len(prefix) + 1:]
                    break
        if rec.slot_of and rec.role == OPTIMIZER_SLOT:
            rec.layer = by_name[rec.slot_of].layer
        elif rec.name.rsplit("/", 1)[-1] in OTHER_NAMES:
            rec.role = OTHER
        records.append(rec)
    return records
