"""A Hugging Face checkpoint folder as one ``Breakdown``, every file named for what it is and reconciled to
its bytes: ``Trainer``'s ``checkpoint-N/`` and Accelerate's ``Accelerator.save_state`` folder (what Accelerate
loops, ``run_*_no_trainer.py`` among them, save). No torch, no TF.

What each writes, and how each is read:

- the model's weights: ``model.safetensors`` (or a sharded set with its ``.index.json``,
  ``readers.safetensors``), else ``pytorch_model.bin`` (``readers.torch_checkpoint``), else a PEFT model's
  adapter alone (``adapter_model.safetensors``: LoRA's matrices, the frozen base model's weights not
  saved); Accelerate numbers a second model's ``model_1.safetensors``, its variables named under ``model_1.``;
- the optimizer's state_dict alone (Trainer's ``optimizer.pt``, Accelerate's ``optimizer.bin``,
  ``optimizer_1.bin``, ...), read beside the one model it can update (``_optimizer``: Accelerate numbers
  models and optimizers apart): its state by key (slots, counters), its family inferred from the keys. Its
  slots are tied to parameters by the parameter order where the weights keep it (``pytorch_model.bin``: a
  state_dict in ``model.parameters()`` order); safetensors keeps none, so there by shape, each shape on its
  own (``roles.torch_pairing_by_shape``); what no rule ties is the optimizer's, with the reason;
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
from collections import Counter
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from tb_modelmem.readers.bounded import JSON_LIMIT, InspectError, file_size, read_file
from tb_modelmem.readers.safetensors import INDEX_SUFFIX, read_safetensors
from tb_modelmem.readers.torch_checkpoint import (
    ModelParameters,
    checkpoint_breakdown,
    load_torch_checkpoint,
    optimizer_slot_shapes,
    optimizers_summary,
    read_torch_checkpoint,
)
from tb_modelmem.rules import roles
from tb_modelmem.schema.names import (
    ACCELERATE_FOLDER_SOURCE,
    TRAINER_FOLDER_SOURCE,
    WEIGHT,
    natural_key,
)
from tb_modelmem.schema.records import Breakdown, LayerTable, VariableTable

TRAINER = "Hugging Face Trainer checkpoint"
ACCELERATE = "Accelerate save_state folder"
_WEIGHTS = ("model.safetensors" + INDEX_SUFFIX[len(".safetensors"):], "model.safetensors",
            "pytorch_model.bin.index.json", "pytorch_model.bin",
            "adapter_model.safetensors", "adapter_model.bin")  # a PEFT model's: its adapter alone
_ADAPTER = ("a PEFT adapter (LoRA, ...): its weights alone; the frozen base model's are not in this checkpoint "
            "(adapter_config.json names it)")
# Accelerate's files of its i-th model, optimizer, ... ("" for the first, "_1" for the second)
_ACCELERATE_WEIGHTS = re.compile(r"(?:model|pytorch_model)(_\d+)?\.(?:safetensors|bin)")
_ACCELERATE_OPTIMIZER = re.compile(r"optimizer(_\d+)?\.bin")
_ACCELERATE_RNG = re.compile(r"random_states_\d+\.pkl")
_STATES = re.compile(r"scheduler\.pt|scheduler(_\d+)?\.bin|scaler\.pt")  # read like a checkpoint
_RNG = "RNG state (Python's, NumPy's and torch's generators): not unpickled, it holds NumPy objects"
_UNPICKLED = "not unpickled, loading it could run code"
_NOT_READ = (("rng_state", _RNG), ("random_states_", _RNG),
             ("training_args.bin", f"training arguments (a pickled TrainingArguments): {_UNPICKLED}"),
             ("custom_checkpoint_", f"an object registered for checkpointing (pickled): {_UNPICKLED}"),
             ("sampler", f"the data loader's sampler (a pickled object): {_UNPICKLED}"),
             ("dl_state_dict", "the data loader's state"), ("trainer_state.json", "Trainer's state (global step, "
                                                                                  "log history)"),
             ("config.json", "the model's config"), ("generation_config.json", "generation config"),
             ("scheduler", "the LR scheduler's state"), ("scaler.pt", "the gradient scaler's state"),
             ("adapter_config.json", "the PEFT adapter's config"), ("README.md", "the model card"))


class _Model(NamedTuple):
    file: str
    prefix: str  # its variables' names under it: "" for the first model, "model_1." for Accelerate's second
    breakdown: Breakdown


def folder_kind(names: Sequence[str]) -> Optional[str]:
    """What a folder holding ``names`` is, when it is a Hugging Face checkpoint (read whole): Trainer's (its
    state file, or an optimizer.pt beside the model's weights) or Accelerate's (its generators' state or an
    optimizer*.bin, beside the weights); else None."""
    found = set(names)
    weights = any(_ACCELERATE_WEIGHTS.fullmatch(n) or n in _WEIGHTS for n in found)
    if "trainer_state.json" in found or ("optimizer.pt" in found and weights):
        return TRAINER
    if weights and any(_ACCELERATE_RNG.fullmatch(n) or _ACCELERATE_OPTIMIZER.fullmatch(n) for n in found):
        return ACCELERATE
    return None


def is_trainer_folder(path: str) -> bool:
    return os.path.isdir(path) and folder_kind(os.listdir(path)) is not None


def read_trainer_folder(path: str) -> Breakdown:
    names = sorted((n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n))), key=natural_key)
    kind = folder_kind(names)
    models = [_Model(name, prefix, _weights(os.path.join(path, name))) for name, prefix in _model_files(names, kind)]
    if not models:
        raise InspectError(f"{path}: this {kind or 'checkpoint folder'} holds none of the model's weights "
                           "(model.safetensors or pytorch_model.bin)")
    read: Dict[str, Breakdown] = {m.file: _prefixed(m.breakdown, m.prefix) for m in models}
    for m in models:
        if m.file.startswith("adapter_model"):
            read[m.file].overhead.append({"what": _ADAPTER, "bytes": 0})
    optimizers = [n for n in names if n == "optimizer.pt" or kind == ACCELERATE and _ACCELERATE_OPTIMIZER.fullmatch(n)]
    for name in optimizers:
        read[name] = _optimizer(os.path.join(path, name), models)
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
    seen: set = set()
    for row in rows:
        if row.name in seen:
            raise InspectError(f"{path}: two of its files name a tensor {row.name[:200]!r} (a model's module named "
                               "like Accelerate's next model?): inspect each file alone")
        seen.add(row.name)
    bd = Breakdown(source=TRAINER_FOLDER_SOURCE if kind == TRAINER else ACCELERATE_FOLDER_SOURCE,
                   variables=VariableTable.from_rows(rows),
                   layers=LayerTable.from_rows([layer for m in models for layer in read[m.file].layers]),
                   model_name=_model_name(path) or os.path.basename(os.path.normpath(path)), overhead=overhead,
                   file_bytes=total)
    bd.optimizer = optimizers_summary([(name, summary) for name in optimizers
                                       for summary in [read[name].optimizer] if summary is not None])
    return bd


def _model_files(names: Sequence[str], kind: Optional[str]) -> List[Tuple[str, str]]:
    """(weights file, the prefix its variables are named under) of each model: Trainer's one; Accelerate's by
    number, a pytorch_model*.bin before a model*.safetensors of the same number (it keeps the parameter
    order, which ties the optimizer's slots without guessing)."""
    if kind == TRAINER:
        return [(name, "") for name in _WEIGHTS if name in names][:1]
    by_number: Dict[str, str] = {}
    for name in sorted(names, key=lambda n: not n.endswith(".bin")):
        found = _ACCELERATE_WEIGHTS.fullmatch(name)
        if found:
            by_number.setdefault(found.group(1) or "", name)
    return [(name, f"model{number}." if number else "")
            for number, name in sorted(by_number.items(), key=lambda kv: natural_key(kv[0]))]


def _optimizer(path: str, models: Sequence[_Model]) -> Breakdown:
    """An optimizer's state_dict read beside the model it updates. Accelerate numbers models and optimizers
    apart, so that is the one model with at least as many parameters of each shape as the optimizer has slots
    of it (frozen parameters are in a model, not in its optimizer), else all the models together (one optimizer
    over two), else none: where several models could be it (a student beside a teacher of its shapes), which
    is not known, and it is said. Its rows are named after its file (``optimizer_1.state.0.exp_avg``), its
    slots after the model's parameters (``model_1.0.weight``)."""
    loaded = load_torch_checkpoint(path)
    stem = os.path.basename(path).rsplit(".", 1)[0]
    found = optimizer_slot_shapes(loaded)
    singles = [_parameters(m) for m in models]
    fitting = [c for c in singles if found is not None and _fits(c, *found)]
    together = ModelParameters([p for c in singles for p in c.named], in_order=False)
    if not fitting and len(models) > 1 and found is not None and _fits(together, *found):
        fitting = [together]
    if len(fitting) == 1:
        parameters = fitting[0]
    else:
        files = ", ".join(m.file for m in models)
        parameters = ModelParameters([], why=(
            f"its slots fit the parameters of {len(fitting)} models ({files}), and which it updates is not known"
            if fitting else f"its slots' shapes fit the parameters of no model here ({files})"))
    bd = checkpoint_breakdown(loaded, parameters)
    if stem == "optimizer":
        return bd
    return dataclasses.replace(bd, variables=VariableTable.from_rows([  # optimizer_1.state.0.exp_avg
        dataclasses.replace(v, name=stem + v.name[len("optimizer"):]) if v.name.startswith("optimizer.") else v
        for v in bd.variables]))


def _fits(parameters: ModelParameters, listed: int, slot_shapes: Dict[Tuple[int, ...], int]) -> bool:
    """The model could be the one an optimizer updates: at least as many parameters of each shape as it has
    slots of (as many parameters as it lists, where it keeps no slots: plain SGD)."""
    if not slot_shapes:
        return len(parameters.named) == listed
    have = Counter(tuple(shape) for _, shape in parameters.named)
    return all(have[shape] >= count for shape, count in slot_shapes.items())


def _parameters(model: _Model) -> ModelParameters:
    """The model's parameters under its prefix, in the file's order where it is the model's (a torch.save'd
    state_dict), a tied weight once (its second name holds no bytes of its own: ``model.parameters()`` lists
    it once too)."""
    return ModelParameters([(model.prefix + v.name, tuple(v.shape)) for v in model.breakdown.variables
                            if v.role == WEIGHT and (v.bytes or not v.params)], in_order=model.file.endswith(".bin"))


def _prefixed(bd: Breakdown, prefix: str) -> Breakdown:
    """A model's breakdown with its tensors named under ``prefix`` (Accelerate's second model: ``model_1.``), each
    on the layer of its new name (``roles.torch_layer``: ``model_1.weight`` on ``model_1``)."""
    if not prefix:
        return bd
    under = prefix.rstrip(".")
    return dataclasses.replace(bd, variables=VariableTable.from_rows([
        dataclasses.replace(v, name=prefix + v.name, layer=roles.torch_layer(prefix + v.name)) for v in bd.variables]),
        layers=LayerTable.from_rows([dataclasses.replace(layer, name=f"{under}/{layer.name}" if layer.name else under)
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
    return next((what for prefix, what in _NOT_READ if name.startswith(prefix)), "another file of the checkpoint")


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
