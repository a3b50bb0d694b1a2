"""Write tb_modelmem/rules/_keras_slots.py: how each built-in Keras 3 optimizer creates its variables.

Keras 3 weight files (``.keras``, ``.weights.h5``) keep optimizer variables by index, with
no names. Which index is which weight's slot is the order ``build()`` creates them in, and
that order belongs to Keras, so it is read from Keras rather than copied by hand: every
optimizer class in ``keras.optimizers`` is built on probe weights (one per
``roles.KINDS``, twice, in two orders), with each config flag that changes what it
creates, and every variable it makes is recorded in order with its slot name (found by
identity, as live capture finds it), shape and dtype relative to its weight, and how Keras
named it. The plan is then replayed on the probes in a third order and must reproduce
what Keras built, or this script fails: a Keras change it cannot describe is never
written silently.

    python scripts/gen_keras_slots.py          # regenerate after upgrading Keras
    python scripts/gen_keras_slots.py --check  # exit 1 if _keras_slots.py is out of date

tests/integration/test_keras_slots.py runs the check against the installed Keras.
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import pprint
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

import generated_file  # this folder's (the script's own folder is first on sys.path)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
OUTPUT = os.path.join(HERE, "..", "tb_modelmem", "rules", "_keras_slots.py")
BASE_FLAGS = ("use_ema", "gradient_accumulation_steps")  # Optimizer's own: tried last when no config is stored


def _probe_weights(order: List[str]) -> List[Any]:
    import keras
    import numpy as np

    from tb_modelmem.rules.roles import KINDS, weight_kind

    made = []
    for i, kind in enumerate(order):
        name = f"{kind}_probe_{i}"
        made.append(keras.Variable(np.zeros(KINDS[kind], "float32"), name=name))
        assert weight_kind(made[-1].path, KINDS[kind]) == kind, (made[-1].path, kind)
    return made


def _built(cls: type, kwargs: Dict[str, Any], weights: List[Any]) -> Any:
    optimizer = cls(**kwargs)
    optimizer.build(weights)
    return optimizer


def _observe(optimizer: Any, weights: List[Any]) -> List[Tuple]:
    """Every variable of a built optimizer, in creation order: ("state", name, shape) or
    ("slot", weight index, slot, shape rule, dtype rule, naming)."""
    from tb_modelmem.capture.variables import keras_slot_map

    slots = keras_slot_map(optimizer)
    index = {id(w): i for i, w in enumerate(weights)}
    seen = []
    for var in optimizer.variables:
        if id(var) not in slots:
            name = re.sub(r"_\d+$", "", var.name)  # Keras numbers unnamed variables: "variable_3"
            seen.append(("state", name, tuple(int(d) for d in var.shape)))
            continue
        slot, weight = slots[id(var)]
        shape, wshape = [int(d) for d in var.shape], [int(d) for d in weight.shape]
        rule = next(r for r, f in _shape_rules().items() if f(wshape) == shape)
        dtype = "same" if var.dtype == weight.dtype else str(var.dtype)
        naming = ("ref" if var.name == f"{weight.path.replace('/', '_')}_{slot}"
                  else "weight" if var.name == weight.name else None)
        seen.append(("slot", index[id(weight)], slot, rule, dtype, naming))
    return seen


def _shape_rules():
    from tb_modelmem.rules.roles import SHAPE_RULES

    return SHAPE_RULES


def _infer_plan(seen: List[Tuple], kinds: List[str]) -> List[list]:
    """Steps of a plan from one observation: runs of state, and passes over the weights
    (a pass ends where the weight index goes back); a kind's slots are its first weight's."""
    steps: List[list] = []
    last = None
    for item in seen:
        if item[0] == "state":
            if not steps or steps[-1][0] != "state":
                steps.append(["state", []])
            steps[-1][1].append([item[1], list(item[2])])
            last = None
            continue
        _, index, slot, rule, dtype, naming = item
        if not steps or steps[-1][0] != "slots" or (last is not None and index < last):
            steps.append(["slots", {}])
        steps[-1][1].setdefault(index, []).append([slot, rule, dtype, naming])
        last = index
    for step in steps:
        if step[0] == "slots":
            by_index = step[1]
            step[1] = _fold_kinds({kind: by_index.get(kinds.index(kind), []) for kind in dict.fromkeys(kinds)})
    return steps


def _fold_kinds(per_kind: Dict[str, list]) -> Dict[str, list]:
    """All kinds alike: one "*" entry; else every kind listed (no slots: [])."""
    from tb_modelmem.rules.roles import KINDS

    values = [per_kind[kind] for kind in KINDS]
    return {"*": values[0]} if all(v == values[0] for v in values) else dict(per_kind)


def _replay(steps: List[list], weights: List[Any]) -> List[Tuple]:
    """What the plan says Keras creates for ``weights``, in ``_observe``'s form."""
    from tb_modelmem.rules.roles import weight_kind

    out: List[Tuple] = []
    for step in steps:
        if step[0] == "state":
            out += [("state", name, tuple(shape)) for name, shape in step[1]]
            continue
        for i, w in enumerate(weights):
            specs = step[1].get(weight_kind(w.path, w.shape), step[1].get("*", []))
            out += [("slot", i, *spec) for spec in specs]
    return out


def _plan(cls: type, kwargs: Dict[str, Any]) -> Optional[List[list]]:
    """The plan of ``cls(**kwargs)``, checked on a second order of the probes; None if this
    config cannot be built (Keras refuses the combination)."""
    from tb_modelmem.rules.roles import KINDS

    kinds = list(KINDS) + list(reversed(KINDS))
    try:
        weights = _probe_weights(kinds)
        steps = _infer_plan(_observe(_built(cls, kwargs, weights), weights), kinds)
    except (ValueError, TypeError):
        return None
    check_order = kinds[3:] + kinds[:3]
    check = _probe_weights(check_order)
    seen = _observe(_built(cls, kwargs, check), check)
    if _replay(steps, check) != seen:
        raise SystemExit(f"{cls.__name__}({kwargs}): its build() order is not a sequence of passes over the "
                         "weights by kind; tb_modelmem.rules.roles.keras_layout cannot describe it")
    return steps


def _toggled(value: Any) -> Any:
    """A value that switches a flag away from its default: bools flip, 0 and None become set."""
    if isinstance(value, bool):
        return not value
    if value is None or (isinstance(value, (int, float)) and value == 0):
        return 2 if value is None else 0.5
    return None


def _default_name(name: str) -> str:
    """Keras numbers a name already taken in this process ("sgd_1"): the default is "sgd"."""
    return re.sub(r"_\d+$", "", name)


def describe(cls: type) -> Dict[str, Any]:
    """The record of one optimizer class: default name, flags that change its variables, plans."""
    config = cls().get_config()
    base = _plan(cls, {})
    flags = []
    for key, value in config.items():
        new = _toggled(value)
        if key != "name" and new is not None and _plan(cls, {key: new}) not in (None, base):
            flags.append(key)
    flags = [f for f in flags if f not in BASE_FLAGS] + [f for f in flags if f in BASE_FLAGS]
    default = "+".join(f for f in flags if config[f])
    plans = {}
    for chosen in itertools.product([False, True], repeat=len(flags)):
        kwargs = {f: (_toggled(config[f]) if on != bool(config[f]) else config[f]) for f, on in zip(flags, chosen)}
        plan = _plan(cls, kwargs)
        if plan is not None:
            plans["+".join(f for f, on in zip(flags, chosen) if on)] = plan
    return {"default_name": _default_name(config["name"]), "flags": flags, "default": default, "plans": plans}


def describe_wrapper(cls: type, inner_key: str) -> Dict[str, Any]:
    """A wrapper (LossScaleOptimizer): its own variables, created before its inner optimizer's."""
    import keras

    weights = _probe_weights(["rank2"])
    inner = keras.optimizers.SGD()
    wrapper = _built(cls, {inner_key: inner}, weights)
    inner_ids = {id(v) for v in inner.variables}
    own = [v for v in wrapper.variables if id(v) not in inner_ids]
    if [id(v) for v in wrapper.variables] != [id(v) for v in own] + [id(v) for v in inner.variables]:
        raise SystemExit(f"{cls.__name__}: its variables are not its own followed by its inner optimizer's")
    state = [[v.name, [int(d) for d in v.shape]] for v in own]
    return {"default_name": _default_name(wrapper.get_config()["name"]), "wraps": inner_key, "flags": [], "default": "",
            "plans": {"": [["state", state]]}}


def collect() -> Tuple[str, Dict[str, Any], Dict[str, str]]:
    """(Keras version, class name -> record, skipped class -> why) for keras.optimizers."""
    import keras

    table, skipped = {}, {}
    for name, cls in sorted(vars(keras.optimizers).items()):
        base = keras.optimizers.Optimizer
        if not inspect.isclass(cls) or not issubclass(cls, base) or cls is base:
            continue
        params = inspect.signature(cls.__init__).parameters
        required = [p for p in params.values() if p.default is p.empty and p.name != "self"
                    and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        if not required:
            table[name] = describe(cls)
        elif [p.name for p in required] == ["inner_optimizer"]:
            table[name] = describe_wrapper(cls, "inner_optimizer")
        else:
            skipped[name] = f"needs {', '.join(p.name for p in required)}: slots found by name only"
    return keras.__version__, table, skipped


HEADER = '''"""Generated by scripts/gen_keras_slots.py from Keras {version}. Do not edit: regenerate.

How each built-in Keras 3 optimizer creates its variables in ``build()``, for files that
keep them by index (``.keras``, ``.weights.h5``). Per class: its default ``name``, the
config ``flags`` that change what it creates (``default``: those set by default), and one
plan per combination of them ("amsgrad+use_ema"). A plan is a list of steps:
``["state", [[name, shape], ...]]`` (counters, learning rate) or ``["slots", {{kind: [[slot,
shape rule, dtype rule, naming], ...]}}]``, one pass over the trainable weights creating
the listed slots for each weight of that kind (``roles.weight_kind``; "*": every kind).
Shape rules: same, scalar, rows (shape[:-1]), cols (shape[:-2] + shape[-1:]); dtype: same
as the weight or a fixed dtype; naming: "ref" ("<weight path with _>_<slot>"), "weight"
(the weight's own name) or None. ``tb_modelmem.rules.roles.keras_layout`` replays them.
"""

from typing import Any, Dict

KERAS_VERSION = {version!r}

'''


def _render_table(table: Dict[str, Any]) -> str:
    """The table as Python literals, one plan step a line (json.dumps is valid Python for it)."""
    lines = ["OPTIMIZERS: Dict[str, Dict[str, Any]] = {"]
    for cls, entry in table.items():
        lines.append(f"    {cls!r}: {{")
        for key in ("default_name", "wraps", "flags", "default"):
            if key in entry:
                lines.append(f"        {key!r}: {json.dumps(entry[key])},")
        lines.append("        'plans': {")
        for flags, steps in entry["plans"].items():
            lines.append(f"            {flags!r}: [")
            lines += [f"                {json.dumps(step)}," for step in steps]
            lines.append("            ],")
        lines += ["        },", "    },"]
    return "\n".join(lines + ["}"]).replace("null", "None")


def render() -> str:
    version, table, skipped = collect()
    return (HEADER.format(version=version) + _render_table(table) + "\n\n"
            f"SKIPPED = {pprint.pformat(skipped, width=110)}\n")


if __name__ == "__main__":
    sys.exit(generated_file.main(OUTPUT, render, __doc__.splitlines()[0],
                                 "python scripts/gen_keras_slots.py (for this Keras)"))
