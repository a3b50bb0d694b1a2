"""A Hugging Face checkpoint folder as one ``Breakdown``, every file named for what it is and reconciled to
its bytes: ``Trainer``'s ``checkpoint-N/`` and Accelerate's ``Accelerator.save_state`` folder (what Accelerate
loops, ``run_*_no_trainer.py`` among them, save). No torch, no TF.

What each writes, and how each is read:

- the model's weights: ``model.safetensors`` (or a sharded set with its ``.index.json``,
  ``readers.safetensors``), else ``pytorch_model.bin`` (``readers.torch_checkpoint``); Accelerate numbers
  a second model's ``model_1.safetensors``, its variables named under ``model_1.``;
- the optimizer's state_dict alone (Trainer's ``optimizer.pt``, Accelerate's ``optimizer.bin``, a second
  one ``optimizer_1.bin``, beside the model of its number): its state by key (slots, counters), its family
  inferred from the keys. Its slots are tied to parameters by the parameter order where the weights keep
  it (``pytorch_model.bin``: a state_dict in ``model.parameters()`` order); safetensors keeps none, so
  there by shape, where shapes tell every layer's bytes (``roles.torch_pairing_by_shape``), else they are
  the optimizer's, with the reason;
- the LR scheduler's (``scheduler.pt``, ``scheduler*.bin``) and the gradient scaler's (``scaler.pt``) state:
  read like a checkpoint (their tensors, if any, are other);
- what holds objects only their classes can rebuild, where loading could run code, is not unpickled, and
  each is a line of its size: ``rng_state*.pth`` and ``random_states_*.pkl`` (the generators'),
  ``training_args.bin`` (a pickled ``TrainingArguments``), ``custom_checkpoint_*.pkl`` (objects registered
  for checkpointing), ``sampler*.bin`` and a state the restricted reader refuses;
- every other file (``trainer_state.json``, ``config.json``, tokenizer files, ...): a line of its size.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tb_modelmem.readers.bounded import JSON_LIMIT, InspectError, file_size, read_file
from tb_modelmem.readers.safetensors import INDEX_SUFFIX, read_safetensors
from tb_modelmem.readers.torch_checkpoint import ModelParameters, read_torch_checkpoint
from tb_modelmem.schema.names import ACCELERATE_FOLDER_SOURCE, TRAINER_FOLDER_SOURCE, WEIGHT, natural_key
from tb_modelmem.schema.records import Breakdown, LayerTable, VariableRecord, VariableTable

TRAINER = "Hugging Face Trainer checkpoint"
ACCELERATE = "Accelerate save_state folder"
_WEIGHTS = ("model.safetensors" + INDEX_SUFFIX[len(".safetensors"):], "model.safetensors",
            "pytorch_model.bin.index.json", "pytorch_model.bin")
# Accelerate's files of the i-th model, optimizer, ... ("" for the first, "_1" for the second)
_ACCELERATE_WEIGHTS = re.compile(r"(?:model|pytorch_model)(_\d+)?\.(?:safetensors|bin)")
_ACCELERATE_OPTIMIZER = re.compile(r"optimizer(_\d+)?\.bin")
_ACCELERATE_RNG = re.compile(r"random_states_\d+\.pkl")
_STATES = re.compile(r"scheduler\.pt|scheduler(_\d+)?\.bin|scaler\.pt")  # read like a checkpoint
_NOT_READ = {
    "rng_state": "RNG state (Python's, NumPy's and torch's generators): not unpickled, it holds NumPy objects",
    "random_states_": "RNG state (Python's, NumPy's and torch's generators): not unpickled, it holds NumPy objects",
    "training_args.bin": "training arguments (a pickled TrainingArguments): not unpickled, loading it could run code",
    "custom_checkpoint_": "an object registered for checkpointing (pickled): not unpickled, loading it could run code",
    "sampler": "the data loader's sampler (a pickled object): not unpickled, loading it could run code",
}
_KNOWN = {"trainer_state.json": "Trainer's state (global step, log history)", "config.json": "the model's config",
          "generation_config.json": "generation config", "scheduler.pt": "the LR scheduler's state",
          "scaler.pt": "the gradient scaler's state", "dl_state_dict.bin": "the data loader's state"}


def folder_kind(names: Sequence[str]) -> Optional[str]:
    """What a folder holding ``names`` is, when it is a Hugging Face checkpoint (read whole): Trainer's (its
    state file, or an optimizer.pt beside the model's weights) or Accelerate's (its generators' state, or an
    optimizer.bin beside the weights); else None."""
    found = set(names)
    weights = any(_ACCELERATE_WEIGHTS.fullmatch(n) or n in _WEIGHTS for n in found)
    if "trainer_state.json" in found or ("optimizer.pt" in found and weights):
        return TRAINER
    if any(_ACCELERATE_RNG.fullmatch(n) for n in found) or ("optimizer.bin" in found and weights):
        return ACCELERATE
    return None


def is_trainer_folder(path: str) -> bool:
    return os.path.isdir(path) and folder_kind(os.listdir(path)) is not None


def read_trainer_folder(path: str) -> Breakdown:
    names = sorted((n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n))), key=natural_key)
    kind = folder_kind(names)
    pairs = _pairs(names, kind)
    if not pairs:
        raise InspectError(f"{path}: this {kind or 'checkpoint folder'} holds none of the model's weights "
                           "(model.safetensors or pytorch_model.bin)")
    read: Dict[str, Breakdown] = {}
    optimizers: List[Tuple[str, Dict[str, Any]]] = []  # (its file, its summary)
    for weights_file, optimizer_file, prefix in pairs:
        model = _weights(os.path.join(path, weights_file))
        read[weights_file] = _prefixed(model, prefix)
        if optimizer_file is not None:
            parameters = ModelParameters([(v.name, tuple(v.shape)) for v in model.variables if v.role == WEIGHT],
                                         in_order=weights_file.endswith(".bin"))  # a torch.save'd state_dict's
            optimizer = read_torch_checkpoint(os.path.join(path, optimizer_file), parameters)
            read[optimizer_file] = _prefixed(optimizer, prefix, optimizer_file.rsplit(".", 1)[0])  # optimizer_1
            if optimizer.optimizer is not None:
                optimizers.append((optimizer_file, optimizer.optimizer))
    for name in names:
        if _STATES.fullmatch(name):
            try:
                read[name] = read_torch_checkpoint(os.path.join(path, name))
            except InspectError:  # a state holding objects of its own: its bytes are still counted below
                pass
    rows, overhead, total = [], [], 0
    for name in names:
        size = file_size(os.path.join(path, name))
        total += size
        found = read.get(name)
        if found is not None:
            rows += list(found.variables)
            overhead += [{"what": f"{name}: {line['what']}", "bytes": line["bytes"]} for line in found.overhead]
        elif _shard_of(name, read):
            continue  # a shard the weights' index read: counted with it
        else:
            overhead.append({"what": f"{name}: {_what(name)}", "bytes": size})
    counted = sum(r.bytes for r in rows) + sum(line["bytes"] for line in overhead)
    if counted != total:  # every file's lines sum to its size: a difference is a shard counted twice or missed
        overhead.append({"what": "files not accounted for (unreadable shards)", "bytes": total - counted})
    layers = [layer for weights_file, _, _ in pairs for layer in read[weights_file].layers]
    bd = Breakdown(source=TRAINER_FOLDER_SOURCE if kind == TRAINER else ACCELERATE_FOLDER_SOURCE,
                   variables=VariableTable.from_rows(rows), layers=LayerTable.from_rows(layers),
                   model_name=_model_name(path) or os.path.basename(os.path.normpath(path)), overhead=overhead,
                   file_bytes=total)
    if len(optimizers) == 1:
        bd.optimizer = optimizers[0][1]
    elif optimizers:  # as a checkpoint holding several (``torch_checkpoint``): each under its file's name
        bd.optimizer = {"class_name": " + ".join(str(o["class_name"]) for _, o in optimizers),
                        "config": dict(optimizers)}
    return bd


def _pairs(names: Sequence[str], kind: Optional[str]) -> List[Tuple[str, Optional[str], str]]:
    """(weights file, its optimizer's file or None, the prefix its variables are named under) of each model."""
    if kind == TRAINER:
        weights_file = next((n for n in _WEIGHTS if n in names), None)
        return [(weights_file, "optimizer.pt" if "optimizer.pt" in names else None, "")] if weights_file else []
    by_number: Dict[str, str] = {}
    for name in names:  # the safetensors file before the .bin where a model has both
        found = _ACCELERATE_WEIGHTS.fullmatch(name)
        if found and (found.group(1) or "") not in by_number:
            by_number[found.group(1) or ""] = name
    optimizers = {(m.group(1) or ""): n for n in names for m in [_ACCELERATE_OPTIMIZER.fullmatch(n)] if m}
    return [(weights_file, optimizers.get(number), f"model{number}." if number else "")
            for number, weights_file in sorted(by_number.items(), key=lambda kv: natural_key(kv[0]))]


def _prefixed(bd: Breakdown, prefix: str, optimizer_name: str = "") -> Breakdown:
    """``bd`` with its variables (and the weights they are slots of, and their layers) named under ``prefix``
    (Accelerate's second model: ``model_1.``), and an optimizer's rows under its file's name (``optimizer_1``)."""
    if not prefix:
        return bd
    under = prefix.rstrip(".").replace(".", "/")

    def renamed(v: VariableRecord) -> VariableRecord:
        if optimizer_name:  # optimizer.state.0.exp_avg -> optimizer_1.state.0.exp_avg
            name = optimizer_name + v.name[len("optimizer"):] if v.name.startswith("optimizer.") else v.name
        else:
            name = prefix + v.name
        return dataclasses.replace(v, name=name, layer=f"{under}/{v.layer}" if v.layer and under else v.layer,
                                   slot_of=prefix + v.slot_of if v.slot_of else v.slot_of)
    return dataclasses.replace(bd, variables=VariableTable.from_rows([renamed(v) for v in bd.variables]),
                               layers=LayerTable.from_rows([dataclasses.replace(layer, name=f"{under}/{layer.name}")
                                                            for layer in bd.layers]))


def _weights(path: str) -> Breakdown:
    if path.endswith((".safetensors", INDEX_SUFFIX)):
        return read_safetensors(path)
    if path.endswith(".index.json"):
        raise InspectError(f"{path}: sharded pytorch_model.bin sets are not read yet: inspect each shard")
    return read_torch_checkpoint(path)


def _shard_of(name: str, read: Dict[str, Breakdown]) -> bool:
    """A safetensors shard a sharded index read (its lines already hold its bytes)."""
    return name.endswith(".safetensors") and any(k.endswith(INDEX_SUFFIX) for k in read)


def _what(name: str) -> str:
    for prefix, what in _NOT_READ.items():
        if name.startswith(prefix):
            return what
    return _KNOWN.get(name, "another file of the checkpoint")


def _model_name(path: str) -> Optional[str]:
    """The architecture config.json names (``GPT2LMHeadModel``), when it says one."""
    config = os.path.join(path, "config.json")
    if not os.path.isfile(config):
        return None
    try:
        found: Any = json.loads(read_file(config, JSON_LIMIT, "config.json"))
    except (InspectError, ValueError):
        return None
    names = found.get("architectures") if isinstance(found, dict) else None
    return str(names[0])[:200] if isinstance(names, list) and names else None
