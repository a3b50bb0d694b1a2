"""A Hugging Face ``Trainer`` checkpoint folder (``checkpoint-N/``) as one ``Breakdown``, every file named for
what it is and reconciled to its bytes. No torch, no TF.

What ``Trainer._save_checkpoint`` writes, and how each is read:

- the model's weights: ``model.safetensors`` (or a sharded set with its ``.index.json``,
  ``readers.safetensors``), else ``pytorch_model.bin`` (``readers.torch_checkpoint``);
- ``optimizer.pt``: the optimizer's state_dict alone, its state by key (slots, counters), its family
  inferred from the keys. Its slots are tied to parameters by the parameter order where the weights keep
  it (``pytorch_model.bin``: a state_dict in ``model.parameters()`` order); safetensors keeps none, so
  there by shape, where shapes tell every layer's bytes (``roles.torch_pairing_by_shape``), else they are
  the optimizer's, with the reason;
- ``scheduler.pt``: the LR scheduler's state (read like a checkpoint: its tensors, if any, are other);
- ``rng_state*.pth`` (Python's, NumPy's and torch's generators) and ``training_args.bin`` (a pickled
  ``TrainingArguments``): not unpickled, as they hold objects only their classes can rebuild and
  loading them could run code; each is a line of its size;
- every other file (``trainer_state.json``, ``config.json``, tokenizer files, ...): a line of its size.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from tb_modelmem.readers.bounded import JSON_LIMIT, InspectError, file_size, read_file
from tb_modelmem.readers.safetensors import INDEX_SUFFIX, read_safetensors
from tb_modelmem.readers.torch_checkpoint import ModelParameters, read_torch_checkpoint
from tb_modelmem.schema.names import TRAINER_FOLDER_SOURCE, WEIGHT
from tb_modelmem.schema.records import Breakdown, VariableTable

SOURCE = TRAINER_FOLDER_SOURCE
_WEIGHTS = ("model.safetensors" + INDEX_SUFFIX[len(".safetensors"):], "model.safetensors",
            "pytorch_model.bin.index.json", "pytorch_model.bin")
_NOT_READ = {
    "rng_state": "RNG state (Python's, NumPy's and torch's generators): not unpickled, it holds NumPy objects",
    "training_args.bin": "training arguments (a pickled TrainingArguments): not unpickled, loading it could run code",
}
_KNOWN = {"trainer_state.json": "Trainer's state (global step, log history)", "config.json": "the model's config",
          "generation_config.json": "generation config", "scheduler.pt": "the LR scheduler's state"}


def is_trainer_folder(path: str) -> bool:
    """A folder Trainer saved: its state file, or an optimizer beside the model's weights."""
    if not os.path.isdir(path):
        return False
    names = set(os.listdir(path))
    return "trainer_state.json" in names or ("optimizer.pt" in names and bool(names & set(_WEIGHTS)))


def read_trainer_folder(path: str) -> Breakdown:
    names = sorted(n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n)))
    weights_file = next((n for n in _WEIGHTS if n in names), None)
    if weights_file is None:
        raise InspectError(f"{path}: a Trainer checkpoint folder without the model's weights (model.safetensors "
                           "or pytorch_model.bin)")
    read: Dict[str, Breakdown] = {}
    model = _weights(os.path.join(path, weights_file))
    read[weights_file] = model
    if "optimizer.pt" in names:
        parameters = ModelParameters([(v.name, tuple(v.shape)) for v in model.variables if v.role == WEIGHT],
                                     in_order=weights_file.endswith(".bin"))  # a torch.save'd state_dict's order
        read["optimizer.pt"] = read_torch_checkpoint(os.path.join(path, "optimizer.pt"), parameters)
    if "scheduler.pt" in names:
        try:
            read["scheduler.pt"] = read_torch_checkpoint(os.path.join(path, "scheduler.pt"))
        except InspectError:  # a scheduler holding objects of its own: its bytes are still counted below
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
    bd = Breakdown(source=SOURCE, variables=VariableTable.from_rows(rows), layers=model.layers,
                   model_name=_model_name(path) or os.path.basename(os.path.normpath(path)), overhead=overhead,
                   file_bytes=total)
    if "optimizer.pt" in read:
        bd.optimizer = read["optimizer.pt"].optimizer
    return bd


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
