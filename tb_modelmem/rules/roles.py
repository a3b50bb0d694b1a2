"""The one rule set for what a stored variable is: role, slot name, owning weight, layer. No TF.

Every source asks these functions (live capture, TF1 and TF2 checkpoints, ``.keras``,
``.weights.h5``, legacy ``.h5``, SavedModel), so one variable gets one answer wherever it
is read. Sources that know more use it first: live capture finds slots by identity in the
optimizer's own lists. Keras 3 weight files keep optimizer variables by index only; the
order Keras creates them in is not copied by hand but generated from Keras itself
(``_keras_slots.py``, ``scripts/gen_keras_slots.py``) and replayed by ``keras_layout``.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from tb_modelmem.rules import _keras_slots
from tb_modelmem.schema.names import (
    NON_TRAINABLE,
    NON_TRAINABLE_CATEGORY,
    OPTIMIZER_SLOT,
    OPTIMIZER_SLOTS_CATEGORY,
    OTHER,
    OTHER_STATE_CATEGORY,
    WEIGHT,
    WEIGHTS_CATEGORY,
    natural_key,
)

__all__ = ["NON_TRAINABLE", "OPTIMIZER_SLOT", "OTHER", "WEIGHT", "role", "is_other_name", "layer_of",
           "is_param", "param_flags", "slot_match", "tf1_slot_name", "keras_slot_by_name", "weight_kind",
           "keras_layout", "KerasLayout"]

# Last name component of training state that is neither a weight nor a per-weight slot:
# step counters, hyper-parameters, loss-scale state (TF1, Keras 2 and Keras 3 names).
_OTHER_NAME = re.compile(
    r"beta\d*_power(_\d+)?|global_step|iter|iterations?|learning_rate|lr|decay|beta_[12]|epsilon|rho|"
    r"save_counter|loss_scale\w*|current_loss_scale|good_steps|num_good_steps|step_counter|dynamic_scale|"
    r"momentum_cache|u_product"
)
# Last name component of the RNG state of a Keras 3 Dropout or random-augmentation layer: model
# state (one of ``model.non_trainable_variables``) but no parameter (``count_params()`` skips it).
_RNG_STATE_NAMES = frozenset({"seed_generator_state"})
_RNG_STATE_ENDINGS = tuple(_RNG_STATE_NAMES)
_PARAM_ROLES = frozenset({WEIGHT, NON_TRAINABLE})
# Last name component of model state that is never trained (BatchNorm statistics, RNG state).
NON_TRAINABLE_NAMES = frozenset({"moving_mean", "moving_variance", "moving_avg", "moving_stddev",
                                 "num_batches_tracked"}) | _RNG_STATE_NAMES
_TRAINABLE_DTYPES = ("float", "bfloat", "half", "complex")  # dtype names a gradient can update
_BATCH_NORM = re.compile(r"BatchNormalization|batch_normalization")


def is_other_name(name: str) -> bool:
    """True for counters and hyper-parameters ("global_step", "adam/iteration", "beta1_power_1")."""
    return bool(_OTHER_NAME.fullmatch(name.rsplit("/", 1)[-1]))


def role(name: str, dtype: str, shape: Sequence[int], trainable: Optional[bool] = None,
         keras_state: bool = False) -> str:
    """Role of a variable that is not an optimizer slot.

    ``trainable``: what the source records (None: not recorded, e.g. a checkpoint without
    its graph). ``keras_state``: Keras lists it among a layer's non-trainable weights.
    An integer or bool scalar is a counter (``tf.Variable(1)`` is "trainable" to TF, but
    no gradient can update it), so it is OTHER in every source.
    """
    if keras_state:
        return NON_TRAINABLE
    numeric = dtype.startswith(_TRAINABLE_DTYPES)
    if is_other_name(name) or (not numeric and not list(shape)):
        return OTHER
    if trainable and numeric:
        return WEIGHT
    if trainable is False or not numeric or name.rsplit("/", 1)[-1] in NON_TRAINABLE_NAMES:
        return NON_TRAINABLE
    return WEIGHT


def peak_category(role_: str, owned_by_a_layer: bool) -> str:
    """The peak category of a resident variable, its role in the Storage view: state of role
    "other" owned by a layer (a Dropout's seed) is that layer's non-trainable state."""
    if role_ == WEIGHT:
        return WEIGHTS_CATEGORY
    if role_ == NON_TRAINABLE or (role_ == OTHER and owned_by_a_layer):
        return NON_TRAINABLE_CATEGORY
    return OPTIMIZER_SLOTS_CATEGORY if role_ == OPTIMIZER_SLOT else OTHER_STATE_CATEGORY


def is_keras_state_at(class_name: str, index: int, count: int) -> bool:
    """A layer variable a file keeps by index (``vars/0``, ``vars/1``, ...) that Keras holds as
    non-trainable state: BatchNormalization's last two, its moving mean and variance."""
    return bool(_BATCH_NORM.search(class_name)) and index >= count - 2


def optimizer_variable_role(name: str, shape: Sequence[int]) -> str:
    """Role of an optimizer variable whose weight could not be told (an unknown optimizer's layout):
    a counter or hyper-parameter when it is a scalar or named like one, else a slot."""
    return OTHER if not list(shape) or is_other_name(name) else OPTIMIZER_SLOT


def is_param(name: str, role_: str) -> bool:
    """Counted in a model's parameters, as Keras' ``count_params()`` counts: its weights and
    non-trainable weights, not the RNG state of its random layers."""
    return role_ in _PARAM_ROLES and name.rsplit("/", 1)[-1] not in _RNG_STATE_NAMES


def param_flags(names: Sequence[str], roles_: Sequence[str]) -> List[bool]:
    """``is_param`` of each variable: asked by role in C, and by name only of the few whose
    name ends like an RNG state (a 10,000-variable breakdown is served in tens of ms)."""
    flags = list(map(_PARAM_ROLES.__contains__, roles_))
    for i in itertools.compress(range(len(flags)), map(str.endswith, names, itertools.repeat(_RNG_STATE_ENDINGS))):
        flags[i] = is_param(names[i], roles_[i])
    return flags


def layer_of(owner: str) -> str:
    """The layer a variable (or, for a slot, its weight) is charged to: its name scope;
    "" (no layer) for one outside any scope (TF1 ``beta1_power``, ``Variable_3``)."""
    return owner.rsplit("/", 1)[0] if "/" in owner else ""


# --- TF1 and Keras 2: slots named after their weight ----------------------------------------

# TF1 optimizers name slots "<var>/<Optimizer>", "<var>/<Optimizer>_1", ... in creation order;
# these are the names ``get_slot_names()`` gives the same slots.
TF1_SLOTS = {
    "Adam": ["m", "v"], "Momentum": ["momentum"], "RMSProp": ["rms", "momentum"],
    "Adagrad": ["accumulator"], "ProximalAdagrad": ["accumulator"], "Adadelta": ["accum", "accum_update"],
    "Ftrl": ["accum", "linear"], "AdagradDA": ["gradient_accumulator", "gradient_squared_accumulator"],
    "AdaMax": ["m", "v"], "ExponentialMovingAverage": ["average"],
}
_CENTERED_RMSPROP = ["rms", "mg", "momentum"]


def slot_match(name: str, stored: Set[str]) -> Optional[Tuple[str, str]]:
    """(weight, suffix) if ``name`` is "<weight>/<suffix>" (TF1) or "<optimizer>/<weight>/<suffix>"
    (Keras 2) for a ``weight`` in ``stored``."""
    if "/" not in name:
        return None
    base, suffix = name.rsplit("/", 1)
    if base in stored:
        return base, suffix
    if "/" in base and base.split("/", 1)[1] in stored:
        return base.split("/", 1)[1], suffix
    return None


def tf1_slot_name(suffix: str, siblings: Set[str]) -> str:
    """The slot name ``get_slot_names()`` uses for a TF1 slot suffix ("Adam_1" -> "v");
    ``siblings``: every suffix stored for the same weight (centered RMSProp has three)."""
    m = re.fullmatch(r"(.*?)(?:_(\d+))?", suffix)  # matches every string
    opt, index = (m.group(1), int(m.group(2) or 0)) if m else (suffix, 0)
    names = _CENTERED_RMSPROP if opt == "RMSProp" and f"{opt}_2" in siblings else TF1_SLOTS.get(opt)
    return names[index] if names and index < len(names) else suffix


# --- Keras 3: slots named "<weight path with _>_<slot>" --------------------------------------

def keras_slot_by_name(name: str, weights: Iterable[str]) -> Optional[Tuple[str, str]]:
    """(slot, weight path) for an optimizer variable Keras named after its weight
    (``add_variable_from_reference``: "<optimizer>/<weight path with _>_<slot>"); the
    longest weight prefix wins, so "dense_1_kernel_m" is not charged to "dense"."""
    last = name.rsplit("/", 1)[-1]
    best: Optional[Tuple[str, str]] = None
    for path in weights:
        prefix = path.replace("/", "_") + "_"
        if last.startswith(prefix) and len(last) > len(prefix) and (best is None or len(prefix) > len(best[1]) + 1):
            best = (last[len(prefix):], path)
    return best


# --- Keras 3: slots by creation order, replayed from Keras' own build() ---------------------

KINDS = {"rank0": (), "rank1": (3,), "rank2": (4, 5), "rank3": (2, 3, 4), "rank4": (2, 2, 3, 4),
         "embedding": (6, 7)}  # the probe shape of each weight kind (scripts/gen_keras_slots.py)


def weight_kind(path: str, shape: Sequence[int]) -> str:
    """Which probe of ``KINDS`` a weight behaves like in ``build()``: by rank (4 and up alike),
    and a 2-D weight whose path names an embedding apart (Muon keeps Adam slots for those)."""
    if len(shape) == 2 and "embedding" in path.lower():
        return "embedding"
    return f"rank{min(len(shape), 4)}"


SHAPE_RULES: Dict[str, Callable[[List[int]], List[int]]] = {
    "same": lambda s: list(s), "scalar": lambda s: [], "rows": lambda s: list(s[:-1]),
    "cols": lambda s: list(s[:-2]) + list(s[-1:]),
}


@dataclasses.dataclass
class Stored:
    """An optimizer variable as a file stores it; ``name`` when the format keeps one."""

    shape: List[int]
    dtype: str
    name: Optional[str] = None


@dataclasses.dataclass
class KerasLayout:
    """What each stored optimizer variable is: ``entries[i]`` is ("state", (level, name)), a
    counter or hyper-parameter of the chain's ``level``-th optimizer, or ("slot", (weight
    index, slot name))."""

    class_name: str  # "Adam", or "LossScaleOptimizer(Adam)"
    flags: str  # the config flags the plan assumes ("amsgrad+use_ema"), "" for none
    entries: List[Tuple[str, Any]]
    also: List[str]  # other plans the stored shapes fit with other slot names (config not recorded)


Weight = Tuple[str, Sequence[int], str]  # (path, shape, dtype) of a trainable weight, in build() order
Level = Tuple[str, Optional[Dict[str, Any]], str]  # (class name, config or None, optimizer name)


def keras_layout(weights: Sequence[Weight], stored: Sequence[Stored], chain: Sequence[Level]) -> Optional[KerasLayout]:
    """Which stored optimizer variable is which, for a Keras 3 optimizer built on ``weights``.

    ``chain``: the optimizer and the ones it wraps (LossScaleOptimizer, then its inner one);
    a class that is "" or not built into Keras is looked up by its default name, then tried
    as every built-in class. A config that is None (not recorded) tries every flag
    combination, closest to Keras' defaults first. The first plan whose shapes, dtypes and
    (where stored) names all fit wins; None if no plan fits. Names are first compared whole,
    then, if no plan fits so, as ``_ref_name_fits`` allows for weight names that are not
    Keras paths (a checkpoint's).
    """
    options = [_level_options(*level) for level in chain]
    for loose in (False, True):
        found: Optional[KerasLayout] = None
        for combo in itertools.product(*options):
            steps = [(level, step) for level, (_, _, plan) in enumerate(combo) for step in plan]
            for entries in _fits(steps, weights, stored, loose):
                label = "(".join(cls for cls, _, _ in combo) + ")" * (len(combo) - 1)
                flags = "+".join(key for _, key, _ in combo if key)
                if found is None:
                    found = KerasLayout(label, flags, entries, [])
                elif entries != found.entries and label not in found.also:
                    found.also.append(f"{label}[{flags}]" if flags else label)
                break
        if found is not None or not any(s.name for s in stored):
            return found
    return None


def _level_options(class_name: str, config: Optional[Dict[str, Any]], name: str) -> List[Tuple[str, str, list]]:
    """(class, flags key, plan) candidates for one optimizer of a chain, most likely first."""
    table = _keras_slots.OPTIMIZERS
    class_name = _class_of(class_name, name)
    classes = [class_name] if class_name in table else list(table)
    out = []
    for cls in classes:
        entry = table[cls]
        if isinstance(config, dict) and cls == class_name:
            key = "+".join(flag for flag in entry["flags"] if config.get(flag, flag in entry["default"].split("+")))
            keys = [key] if key in entry["plans"] else []
        else:
            default = set(filter(None, entry["default"].split("+")))

            def distance(key: str) -> Tuple[int, List[int]]:  # fewest flags off their default, the class's own first
                changed = default ^ set(filter(None, key.split("+")))
                return len(changed), sorted(entry["flags"].index(f) for f in changed)

            keys = sorted(entry["plans"], key=distance)
        out += [(cls, key, entry["plans"][key]) for key in keys]
    return out


def _fits(steps: List[Tuple[int, list]], weights: Sequence[Weight], stored: Sequence[Stored], loose: bool
          ) -> Iterable[List[Tuple[str, Any]]]:
    """The entries of ``steps`` expanded over ``weights``, if they fit ``stored`` one for one
    (compared as they are expanded: a plan that does not fit stops at its first misfit); a
    "learning_rate" state may be absent (a schedule replaces the variable)."""
    for without_learning_rate in (False, True):
        entries: List[Tuple[str, Any]] = []
        for expected in _expand(steps, weights):
            if without_learning_rate and expected[0] == "state" and expected[1][1] == "learning_rate":
                continue
            if len(entries) == len(stored) or not _same(expected, stored[len(entries)], loose):
                break
            entries.append((expected[0], expected[1]))
        else:
            if len(entries) == len(stored):
                yield entries
                return


Expected = Tuple[str, Any, List[int], Optional[str], Tuple[Optional[str], str, str]]


def _expand(steps: List[Tuple[int, list]], weights: Sequence[Weight]) -> Iterable[Expected]:
    """(kind, what, shape, dtype, (naming, name, slot)) per variable a plan creates, in order:
    a state's own name, or a slot's naming rule with its weight's path."""
    for level, step in steps:
        if step[0] == "state":
            for name, shape in step[1]:
                yield "state", (level, name), list(shape), None, ("state", name, "")
            continue
        for index, (path, shape, dtype) in enumerate(weights):
            per_kind = step[1]
            for slot, shape_rule, dtype_rule, naming in per_kind.get(weight_kind(path, shape), per_kind.get("*", [])):
                yield ("slot", (index, slot), SHAPE_RULES[shape_rule](list(shape)),
                       dtype if dtype_rule == "same" else dtype_rule, (naming, path, slot))


def _same(expected: Expected, stored: Stored, loose: bool) -> bool:
    _, _, shape, dtype, (naming, name, slot) = expected
    if list(stored.shape) != shape or (dtype is not None and stored.dtype != dtype):
        return False
    if stored.name is None:
        return True
    last = stored.name.rsplit("/", 1)[-1]
    if naming == "state":
        return re.sub(r"_\d+$", "", last) == name  # "variable_3": numbered by Keras
    if naming == "ref":
        return _ref_name_fits(last, name, slot, loose)
    if naming == "weight":
        return last == name.rsplit("/", 1)[-1]
    return True


def _ref_name_fits(stored: str, path: str, slot: str, loose: bool) -> bool:
    """Whether ``stored`` is Keras' name for ``slot`` of the weight at ``path``
    (``add_variable_from_reference``: "my_model_dense_kernel_momentum"). ``loose``: ``path`` is
    only the weight's TF variable name, which is its name scope when it was built (a subclassed
    model's Dense kernel: "my_model/kernel"), so only its first and last parts must be there."""
    if stored == f"{path.replace('/', '_')}_{slot}":
        return True
    parts = path.split("/")
    return loose and stored.endswith(f"_{parts[-1]}_{slot}") and (len(parts) == 1 or stored.startswith(parts[0] + "_"))


def optimizer_chain(entry: Any) -> List[Level]:
    """The chain ``keras_layout`` takes, from a file's optimizer entry ``{"class_name", "config"}``:
    a wrapper (LossScaleOptimizer) then the optimizer its config wraps."""
    chain: List[Level] = []
    while isinstance(entry, dict) and len(chain) < 8:
        config = entry["config"] if isinstance(entry.get("config"), dict) else None
        class_name = entry["class_name"] if isinstance(entry.get("class_name"), str) else ""
        name = (config or {}).get("name")
        chain.append((class_name, config, name if isinstance(name, str) else ""))
        wraps = wrapped_key(class_name)
        entry = (config or {}).get(wraps) if wraps else None
    return chain


def wrapped_key(class_name: str, name: str = "") -> Optional[str]:
    """The config key under which a Keras wrapper optimizer keeps the one it wraps ("inner_optimizer")."""
    return _keras_slots.OPTIMIZERS.get(_class_of(class_name, name), {}).get("wraps")


def _class_of(class_name: str, name: str) -> str:
    """A built-in class by its name, else by its default optimizer name ("adam_w_1" -> "AdamW"), else ""."""
    table = _keras_slots.OPTIMIZERS
    if class_name in table:
        return class_name
    base = re.sub(r"_\d+$", "", name or "")
    return next((cls for cls, entry in table.items() if entry["default_name"] == base), "")


def optimizer_plan(entry: Any) -> Tuple[str, Tuple[str, ...], str]:
    """(built-in class, the flags its config sets, wrapper class or "") of a breakdown's optimizer
    entry ``{"class_name", "config"}``: a LossScaleOptimizer's inner optimizer is the class; class
    "" when the entry names no built-in Keras optimizer (a custom one, several of them)."""
    chain = optimizer_chain(entry)
    wrapper = ""
    if len(chain) > 1 and wrapped_key(chain[0][0], chain[0][2]):
        wrapper, chain = _class_of(chain[0][0], chain[0][2]), chain[1:]
    cls = _class_of(chain[0][0], chain[0][2]) if chain else ""
    if not cls or "wraps" in _keras_slots.OPTIMIZERS[cls]:
        return "", (), wrapper
    table, config = _keras_slots.OPTIMIZERS[cls], chain[0][1] or {}
    defaults = table["default"].split("+")
    return cls, tuple(flag for flag in table["flags"] if config.get(flag, flag in defaults)), wrapper


def optimizer_classes() -> List[str]:
    """The built-in Keras 3 optimizers whose variables ``keras_optimizer_variables`` knows."""
    return sorted(name for name, entry in _keras_slots.OPTIMIZERS.items() if "wraps" not in entry)


def keras_optimizer_variables(class_name: str, weights: Sequence[Weight], flags: Sequence[str] = (),
                              wrapper: str = "") -> List[Tuple[str, str, List[int], Optional[str]]]:
    """(role, name, shape, dtype or None when Keras decides it at run time) of each variable a
    built-in Keras 3 optimizer creates for ``weights`` (trainable, in ``build()`` order), with
    ``flags`` on ("momentum" for SGD, "amsgrad", ...), as its own ``build()`` does
    (``_keras_slots``); wrapped in ``wrapper`` ("LossScaleOptimizer") when given; a slot's name
    is its slot's. KeyError for a class Keras does not build in."""
    entry = _keras_slots.OPTIMIZERS[_class_of(class_name, class_name.lower())]
    key = "+".join(flag for flag in entry["flags"] if flag in flags)
    steps = [(1, step) for step in entry["plans"][key]]
    if wrapper:
        steps = [(0, step) for step in _keras_slots.OPTIMIZERS[wrapper]["plans"][""]] + steps
    return [(OTHER if kind == "state" else OPTIMIZER_SLOT, what[1], shape, dtype)
            for kind, what, shape, dtype, _ in _expand(steps, weights)]


# --- PyTorch: state_dict names and optimizer state keys -------------------------------------

# Buffers of torch's own modules, by the last part of their state_dict name: what a checkpoint read
# without its module says is a buffer (a live module says so itself: ``named_buffers``).
TORCH_BUFFER_NAMES = frozenset({"running_mean", "running_var", "num_batches_tracked"})
# Optimizer state that counts, not per-element state: the step (a 0-d tensor in torch >= 1.12).
TORCH_COUNTERS = frozenset({"step"})
# Per-element state of torch.optim, transformers' and bitsandbytes' optimizers, each key -> the family it
# tells (first match in TORCH_FAMILIES wins), for a bare optimizer state_dict that names no class.
TORCH_FAMILIES: List[Tuple[str, Set[str]]] = [
    ("Adafactor", {"exp_avg_sq_row", "exp_avg_sq_col"}),
    ("Adam8bit (bitsandbytes)", {"state1", "state2", "qmap1", "qmap2"}),
    ("Adam", {"exp_avg", "exp_avg_sq"}),
    ("SGD", {"momentum_buffer"}),
    ("RMSprop", {"square_avg"}),
    ("Adadelta", {"acc_delta"}),
    ("Adagrad", {"sum"}),
    ("ASGD", {"ax", "eta", "mu"}),
    ("Rprop", {"prev", "step_size"}),
]


def shared_line(names: Sequence[str]) -> Dict[str, Any]:
    """The breakdown's line for tensors that share another's memory (tied, saved twice), each counted 0 B."""
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    what = ("1 tensor shares its storage with one counted before it" if len(names) == 1 else
            f"{len(names)} tensors share their storage with one counted before them")
    return {"what": f"{what} ({shown}): 0 bytes{'' if len(names) == 1 else ' each'}", "bytes": 0}


def torch_layer(name: str) -> str:
    """The layer path of a state_dict name: its module's path, "/"-separated as every layer path is
    (``encoder.layers.0.fc1.weight`` -> ``encoder/layers/0/fc1``); "" for a top-level tensor."""
    return name.rsplit(".", 1)[0].replace(".", "/") if "." in name else ""


def torch_module_layer(path: str) -> str:
    """The layer path of a module's ``named_modules()`` path (``encoder.layers.0``)."""
    return path.replace(".", "/")


def torch_state_role(key: str, shape: Sequence[int]) -> str:
    """Role of one tensor of an optimizer's per-parameter state: a counter (``step``, any 0-d
    tensor) is other, per-element state (``exp_avg``, ``momentum_buffer``, ...) a slot."""
    return OTHER if key in TORCH_COUNTERS or not list(shape) else OPTIMIZER_SLOT


def torch_optimizer_family(keys: Iterable[str], decoupled: bool = False) -> Optional[str]:
    """The optimizer family a state's keys tell (``exp_avg`` + ``exp_avg_sq``: Adam, AdamW when its
    param_groups say ``decoupled_weight_decay``), None when they tell none (plain SGD keeps no state)."""
    found = set(keys)
    for family, needed in TORCH_FAMILIES:
        if needed <= found:
            return ("AdamW" if decoupled else "Adam") if family == "Adam" else family
    return None


def torch_parameter_orders(params: Sequence[Tuple[str, Sequence[int]]]) -> List[Tuple[str, list]]:
    """The orders an optimizer's ``param_groups`` list a model's parameters in (``params``: name and shape in
    ``model.parameters()`` order), each with what it is ("" for the model's own order). A saved optimizer
    numbers its parameters by their place in its groups; one group, or groups made in model order, keep
    the model's order; the weight-decay split transformers' Trainer and most training scripts make puts
    the matrices first (decayed), then the biases and norm weights (no decay), each in model order. The
    reader ties slots by the first order whose shapes agree with every slot."""
    matrices = [p for p in params if len(p[1]) >= 2]
    rest = [p for p in params if len(p[1]) < 2]
    orders: List[Tuple[str, list]] = [("", list(params))]
    if matrices and rest:
        orders.append(("as a weight-decay split groups them (matrices first, then biases and norm weights)",
                       matrices + rest))
    return orders


class ShapePairing(NamedTuple):
    """``torch_pairing_by_shape``'s answer: ``owners``, {index: (name, shape)} of the indices it paired; ``twins``,
    how many of them share their shape with another parameter (which index is which of those is not known);
    ``groups_known``: every index paired and no shape in two groups, so each group's members are known;
    ``why``: what it left untied or unknown, and why ("" where nothing)."""
    owners: Dict[Any, Tuple[str, Tuple[int, ...]]]
    twins: int
    groups_known: bool
    why: str


def torch_pairing_by_shape(params: Sequence[Tuple[str, Sequence[int]]], groups: Sequence[Sequence[Any]],
                           slots: Dict[Any, Tuple[Tuple[str, Tuple[int, ...], str], ...]],
                           in_order: bool = False) -> ShapePairing:
    """An optimizer's indices paired with parameters by shape, for weights whose file keeps no parameter
    order (safetensors sorts its tensors by dtype, then name). ``slots``: each index's slots as (key, shape,
    dtype), counters left out (``torch_state_role``).

    The parameters of one shape are paired with the indices whose slots have that shape, in ``params``'
    order where it is the model's (``in_order``: an optimizer lists each group's parameters in model order),
    else in name order, where they are as many and those slots alike: which twin takes which index then
    moves no byte between layers. A shape where they are not (a parameter never stepped or frozen, factored
    state, unlike slots) stays untied, with the reason; the others are paired all the same."""
    listed = [index for group in groups for index in group]
    group_of = {index: g for g, group in enumerate(groups) for index in group}
    by_shape: Dict[Tuple[int, ...], List[str]] = {}
    for name, shape in params:
        by_shape.setdefault(tuple(shape), []).append(name)
    wanted: Dict[Tuple[int, ...], List[Any]] = {}
    odd = []  # indices whose slots are of several shapes (factored state)
    for index in listed:
        shapes = {shape for _, shape, _ in slots.get(index, ())}
        if len(shapes) == 1:
            wanted.setdefault(next(iter(shapes)), []).append(index)
        elif shapes:
            odd.append(index)
    owners: Dict[Any, Tuple[str, Tuple[int, ...]]] = {}
    reasons: List[str] = [f"{len(odd)} with slots of several shapes (factored state)"] if odd else []
    twins = 0
    for shape, indices in wanted.items():
        names = by_shape.get(shape, []) if in_order else sorted(by_shape.get(shape, []), key=natural_key)
        if len(names) != len(indices):
            reasons.append(f"{len(indices)} with slots of shape {list(shape)[:8]} for {len(names)} weights of it " + (
                "(one frozen or never stepped?)" if len(names) > len(indices) else "(one missing from the weights?)"))
        elif len({slots[i] for i in indices}) > 1:
            reasons.append(f"{len(indices)} of shape {list(shape)[:8]} whose slots differ (keys or dtypes)")
        else:
            owners.update((index, (name, shape)) for index, name in zip(indices, names))
            twins += len(indices) if len(indices) > 1 else 0
    slotless = len(listed) - sum(map(len, wanted.values())) - len(odd)
    if slotless and owners:
        reasons.append(f"{slotless} with no slots (never stepped, or a 0-d parameter)")
    split = [shape for shape, indices in wanted.items() if len({group_of[i] for i in indices}) > 1]
    parts = [f"{len(listed) - len(owners)} of its {len(listed)} parameters untied ({'; '.join(reasons[:3])})"
             ] if reasons else []
    if split and owners:
        parts.append(f"its parameters of shape {list(split[0])[:8]} sit in several param groups, and no order tells "
                     "which is in which")
    why = "; ".join(parts)
    return ShapePairing(owners, twins, len(owners) == len(listed) and not split, why)
