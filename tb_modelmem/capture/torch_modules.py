"""Every tensor of a PyTorch ``nn.Module`` and its optimizer, by role and layer: a ``records.Breakdown``.

Named as the module's ``state_dict`` names them, so Storage, a checkpoint of the same model and the
ops of a profiled step (their ranges are named by ``module_layers``) meet on the same names:

- parameters (``named_parameters``): weights, or non-trainable when frozen (``requires_grad=False``);
  a parameter tied to another (GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``) is listed
  under each name it has, its bytes counted once, under the first;
- buffers (``named_buffers``): non-trainable, also those left out of the state_dict;
- the optimizer's state (``optimizer.state[p]``): per-element tensors are slots of the parameter they
  belong to (``exp_avg``, ``exp_avg_sq``, ``momentum_buffer``, ...), counters (``step``) are other;
  named ``optimizer.state.<index>.<key>`` as ``optimizer.state_dict()`` numbers them;
- a ``GradScaler``'s scale and growth tracker: other.

Memory is counted once: two names of one tensor (tied, shared) cost it once. Reads
shapes, dtypes and devices only, never values. Needs torch (the caller's process has it).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from tb_modelmem.rules import roles, torch_optimizers
from tb_modelmem.rules.layers import scope_layer_records
from tb_modelmem.schema.names import NON_TRAINABLE, OTHER, TORCH_MODULE_SOURCE, WEIGHT
from tb_modelmem.schema.records import Breakdown, LayerRecord, LayerTable, VariableRecord, VariableTable

SOURCE = TORCH_MODULE_SOURCE


def is_module(obj: Any) -> bool:
    """Whether ``obj`` is a plain torch ``nn.Module`` (torch is not imported to ask): not a Keras 3 layer,
    which on the torch backend is a module too, and is read as Keras."""
    mro = type(obj).__mro__
    return (any(c.__module__.startswith("torch.nn") and c.__name__ == "Module" for c in mro)
            and not any(c.__module__.startswith("keras") for c in mro))


def as_module(model: Any) -> Any:
    """``model`` as one ``nn.Module``: several models of one loop (pytorch/examples' DCGAN: a generator and a
    discriminator), given as a dict or a list, joined in an ``nn.ModuleDict`` under their names (a dict's keys; a
    list's class names, a compiled or DDP-wrapped model's own, ``Generator``; ``Generator_2`` for a second of one
    name), so that Storage and the ops name their modules ``Generator/main/0``; anything else as it is."""
    if isinstance(model, Mapping):
        pairs = [(str(key), value) for key, value in model.items()]
    elif isinstance(model, (list, tuple)):
        pairs = [(type(_wrapped(value)).__name__, value) for value in model]
    else:
        return model
    if not pairs or not all(is_module(value) for _, value in pairs):
        return model
    import torch

    reserved = set(dir(torch.nn.ModuleDict()))  # a key ModuleDict refuses: an attribute of its own ("training")
    named: Dict[str, Any] = {}
    for key, value in pairs:
        base = key.replace(".", "_") or "model"
        base = f"{base}_" if base in reserved else base
        name, count = base, 1
        while name in named:
            count += 1
            name = f"{base}_{count}"
        named[name] = value
    joined = torch.nn.ModuleDict(named)
    if len(named) > 1:  # its name in Storage: "Generator + Discriminator", not ModuleDict (one: its own path)
        setattr(joined, _JOINED, " + ".join(named))
    return joined


_JOINED = "_tb_modelmem_joined"  # the name ``as_module`` gives the models it joins


def is_joined(module: Any) -> bool:
    """Whether ``module`` is the ModuleDict ``as_module`` made of several models (ours, not the user's)."""
    return isinstance(getattr(module, _JOINED, None), str)


def _wrapped(module: Any) -> Any:
    """The model inside a wrapper that keeps it (``torch.compile``'s ``_orig_mod``, DDP's and DataParallel's
    ``module``), whose class names the model."""
    for _ in range(4):
        inner = getattr(module, "_orig_mod", None) or getattr(module, "module", None)
        if inner is None or not is_module(inner):
            break
        module = inner
    return module


def is_optimizer(obj: Any) -> bool:
    return any(c.__module__.startswith("torch.optim") and c.__name__ == "Optimizer" for c in type(obj).__mro__)


def module_layers(model: Any) -> Dict[int, str]:
    """id(module) -> its layer path (``rules.roles.torch_module_layer``) for every submodule, and for the
    model itself its class name (``root_layer``): what its forward runs outside any submodule (a
    ``transformers`` model's loss) is the model's own work."""
    layers = {id(module): roles.torch_module_layer(path) for path, module in model.named_modules() if path}
    layers[id(model)] = root_layer(model)
    return layers


def root_layer(model: Any) -> str:
    """The layer of a model's own forward, outside its submodules: its class name (a state_dict name
    never is one: those are attribute paths); several models ``as_module`` joined, their names."""
    joined = getattr(model, _JOINED, None)
    return joined if isinstance(joined, str) and joined else type(model).__name__


def breakdown_of_module(model: Any, optimizer: Any = None, scaler: Any = None) -> Breakdown:
    """Breakdown of ``model`` (an ``nn.Module``), ``optimizer`` (a ``torch.optim.Optimizer``, or a list
    of them) and ``scaler`` (a ``torch.amp.GradScaler``)."""
    counted: Set[Tuple[str, int, Tuple[int, ...]]] = set()  # (device, address, shape): each tensor's memory once
    rows: List[VariableRecord] = []
    tied: List[str] = []

    def add(name: str, tensor: Any, role: str, layer: str, slot: Optional[str] = None,
            slot_of: Optional[str] = None) -> None:
        size = tensor_bytes(tensor)
        key = (str(tensor.device), _address(tensor), tuple(tensor.shape))
        if key[1] and key in counted:
            tied.append(name)
            size = 0
        counted.add(key)
        rows.append(VariableRecord(name=name, layer=layer, shape=list(tensor.shape), dtype=dtype_name(tensor),
                                   bytes=size, role=role, device=str(tensor.device), slot=slot, slot_of=slot_of))

    names: Dict[int, str] = {}  # id(parameter) -> its first state_dict name
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), name)
        add(name, param, WEIGHT if param.requires_grad else NON_TRAINABLE, roles.torch_layer(name))
    for name, buffer in model.named_buffers(remove_duplicate=False):
        add(name, buffer, NON_TRAINABLE, roles.torch_layer(name))
    optimizers = [o for o in (optimizer if isinstance(optimizer, (list, tuple)) else [optimizer]) if o is not None]
    for number, opt in enumerate(optimizers):
        prefix = "optimizer" if len(optimizers) == 1 else f"optimizer{number}"
        for index, param in enumerate(p for group in opt.param_groups for p in group["params"]):
            owner = names.get(id(param))
            for key, value, name in _state_tensors(opt.state.get(param, {}), f"{prefix}.state.{index}"):
                role = roles.torch_state_role(key, list(value.shape))
                # a counter is the optimizer's; so is state larger than its parameter, over every parameter at once
                # (LBFGS keys its flat direction and history by the first parameter: no slot of that one)
                own = owner if role != OTHER and value.numel() <= param.numel() else None
                add(name, value, role, roles.torch_layer(own) if own else "", key, own)
    for attr in ("_scale", "_growth_tracker"):
        value = getattr(scaler, attr, None) if scaler is not None else None
        if _is_tensor(value):
            add(f"scaler.{attr.lstrip('_')}", value, OTHER, "")
    overhead = [roles.shared_line(tied)] if tied else []
    breakdown = Breakdown(source=SOURCE, variables=VariableTable.from_rows(rows), model_name=root_layer(model),
                          layers=LayerTable.from_rows(_layers(model, [r for r in rows if r.name not in tied])),
                          overhead=overhead)
    if optimizers:
        breakdown.optimizer = optimizer_record(optimizers, names)
    return breakdown


def _state_tensors(state: Dict[Any, Any], prefix: str) -> Iterable[Tuple[str, Any, str]]:
    """(key, tensor, name) of each tensor of one parameter's optimizer state: a tensor value, or each member of a
    list of them (LBFGS's history, ``old_dirs`` and ``old_stps``, up to ``history_size`` flat copies of every
    parameter: ``prefix.old_dirs.3``)."""
    for key, value in state.items():
        if _is_tensor(value):
            yield str(key), value, f"{prefix}.{key}"
        elif isinstance(value, (list, tuple)):
            for i, member in enumerate(value):
                if _is_tensor(member):
                    yield str(key), member, f"{prefix}.{key}.{i}"


def unwrapped_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside a wrapper keeping it as ``.optimizer`` (accelerate's ``AcceleratedOptimizer``,
    which ``Accelerator.prepare`` returns; Lightning's ``LightningOptimizer`` keeps ``._optimizer``): its class
    and state are the optimizer's, not the wrapper's; a list of them, each."""
    if isinstance(optimizer, (list, tuple)):
        return [unwrapped_optimizer(o) for o in optimizer]
    for _ in range(8):  # a wrapper of a wrapper
        inner = getattr(optimizer, "optimizer", None) or getattr(optimizer, "_optimizer", None)
        if inner is None or inner is optimizer or not hasattr(inner, "param_groups"):
            break
        optimizer = inner
    return optimizer


def optimizer_record(optimizers: List[Any], names: Optional[Dict[int, str]] = None) -> Dict[str, Any]:
    """{"class_name", "config"}: the class, and its first param group's settings (``defaults`` less
    ``params``); several optimizers as "A + B", each under its own number. One optimizer with several param
    groups (Trainer's decay and no-decay ones), or one that holds only some of the model's parameters, adds
    "groups": each group's parameters by name (``names``: id -> state_dict name), the settings it does not
    share with the first, and how many it holds that are not the model's ("others"): ``step()`` updates each
    group apart, with its own settings, and no parameter outside them."""
    def settings(group: Dict[str, Any]) -> Dict[str, Any]:
        return {str(k): _json_value(v) for k, v in group.items() if k != "params"}

    def one(opt: Any) -> Dict[str, Any]:
        config = settings(opt.param_groups[0] if opt.param_groups else opt.defaults)
        entry: Dict[str, Any] = {"class_name": type(opt).__name__, "config": config}
        named = names or {}
        groups: List[Dict[str, Any]] = []
        for group in opt.param_groups:
            params = [named[id(p)] for p in group["params"] if id(p) in named]
            groups.append(torch_optimizers.group_record(params, settings(group), config,
                                                        len(group["params"]) - len(params)))
        if named and (len(groups) > 1 or set(named.values()) - {n for g in groups for n in g["params"]}):
            entry["groups"] = groups
        return entry

    if len(optimizers) == 1:
        return one(optimizers[0])
    each = {f"optimizer{i}": one(o) for i, o in enumerate(optimizers)}
    return {"class_name": " + ".join(e["class_name"] for e in each.values()), "config": each}


def _layers(model: Any, rows: Iterable[VariableRecord]) -> List[LayerRecord]:
    """Every submodule in model order, with its class and the parameters it holds itself (ops of a
    module without any, a ReLU or a pooling, are still on it)."""
    counted = {record.name: record for record in scope_layer_records(rows)}
    out = []
    for path, module in model.named_modules():
        layer = roles.torch_module_layer(path) if path else root_layer(model)
        record = counted.pop(layer, None) or LayerRecord(name=layer, class_name="", params=0)
        record.class_name = type(module).__name__
        out.append(record)
    return out + list(counted.values())  # tensors of the root module itself (layer "")


def tensor_bytes(tensor: Any) -> int:
    return math.prod(tensor.shape) * tensor.element_size()


def dtype_name(tensor: Any) -> str:
    """``torch.float32`` -> ``float32`` (the names ``schema.dtypes`` knows)."""
    return str(tensor.dtype).rsplit(".", 1)[-1]


def _address(tensor: Any) -> int:
    """Where its memory starts: tied parameters start at the same address; 0 where it has none."""
    try:
        return int(tensor.data_ptr()) or 0
    except Exception:  # a tensor without storage (meta, a subclass): never deduplicated
        return 0


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "element_size") and hasattr(value, "device")


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return str(value)
