"""The state a ``torch.optim`` optimizer keeps per parameter, by class and the flags its config sets: what What if
recomputes for a PyTorch run when another optimizer is asked (``rules.projection_state``). No torch.

Each entry is what the class's ``step()`` puts in ``optimizer.state[p]`` the first time it runs (torch 2.x):
tensors of the parameter's shape are its slots, ``step`` (and NAdam's ``mu_product``) a float32 scalar, counted
as other state (4 B each: torch keeps it on the CPU unless ``capturable`` or ``fused``, and a figure of the
device counts it there alike). ``tests/integration/test_torch_optimizers.py``
checks every entry against a real optimizer's own ``state``.
"""

from __future__ import annotations

import collections
import re
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from tb_modelmem.schema.names import OPTIMIZER_SLOT, OTHER

Weight = Tuple[str, Sequence[int], str]  # (name, shape, dtype) of a trainable parameter
# class -> (slots always made, {config flag: the slots it adds}, the float32 scalars it keeps)
OPTIMIZERS: Dict[str, Tuple[Tuple[str, ...], Dict[str, Tuple[str, ...]], Tuple[str, ...]]] = {
    "SGD": ((), {"momentum": ("momentum_buffer",)}, ()),
    "Adam": (("exp_avg", "exp_avg_sq"), {"amsgrad": ("max_exp_avg_sq",)}, ("step",)),
    "AdamW": (("exp_avg", "exp_avg_sq"), {"amsgrad": ("max_exp_avg_sq",)}, ("step",)),
    "Adamax": (("exp_avg", "exp_inf"), {}, ("step",)),
    "NAdam": (("exp_avg", "exp_avg_sq"), {}, ("step", "mu_product")),
    "RAdam": (("exp_avg", "exp_avg_sq"), {}, ("step",)),
    "Adagrad": (("sum",), {}, ("step",)),
    "Adadelta": (("square_avg", "acc_delta"), {}, ("step",)),
    "RMSprop": (("square_avg",), {"momentum": ("momentum_buffer",), "centered": ("grad_avg",)}, ("step",)),
    "Adafactor": (("row_var", "col_var"), {}, ("step",)),  # factored for a matrix, one ``variance`` for a vector
}

# The scratch ``step()`` makes, one parameter at a time (torch's single-tensor path, a CPU's default): (how many
# tensors of the parameter's size it holds at once, how many of the previous parameter's it still holds then). A
# tensor bound to a name in the loop (Adam's ``denom``, Adagrad's ``std``) is freed only when the next parameter's
# is made. SGD adds the gradient (or its momentum buffer, scaled in place) into each weight: none. Measured: the
# peak ``Total Allocated`` inside ``Optimizer.step`` over one and two equal parameters
# (tests/integration/test_torch_optimizers.py).
SCRATCH: Dict[str, Tuple[int, int]] = {
    "SGD": (0, 0), "Adam": (2, 1), "AdamW": (2, 1), "Adamax": (1, 0), "NAdam": (2, 1), "RAdam": (2, 0),
    "Adagrad": (1, 1), "Adadelta": (2, 1), "RMSprop": (1, 1), "Adafactor": (1, 1),
}
# Flags that each rebind the loop's ``grad`` to a new copy: maximize negates it, weight decay adds
# ``weight_decay x param`` (not where the decay is decoupled: AdamW, Adafactor, ``decoupled_weight_decay``, which
# scale the weight in place), nesterov adds ``momentum x buf`` (SGD's).
_GRADIENT_COPIES = ("maximize", "weight_decay", "nesterov")
_DECOUPLED = "decoupled_weight_decay"  # Adam's, NAdam's, RAdam's: the decay scales the weight in place
_ALWAYS_DECOUPLED = frozenset({"AdamW", "Adafactor"})


# torch.optim's three implementations of a step, as its docs name them: one parameter at a time (a CPU's
# default), every parameter's tensors as one list per device and dtype (``foreach=True``, CUDA's default), or
# one kernel per list (``fused=True``). ``path_of`` tells which a traced step took from its ops' names.
FOR_LOOP, FOREACH, FUSED = "for-loop", "foreach", "fused"
PATHS = (FOR_LOOP, FOREACH, FUSED)
# The foreach path's scratch. torch groups a step's parameters by device and dtype (a C++ hash map: two groups
# come in the reverse of the order their first parameters do, three or more as their hashes fall) and makes each
# group's lists in turn; a list bound to a name is freed only when the next group's is made. So each class is a
# set of moments (lists of the previous group's size still held, lists of this group's): the most at once is
# the largest over its moments and each group (the first's previous group: none). Without, then with a gradient
# copy (maximize's negation or coupled weight decay's sum; nesterov's adds into a list in place there). Adam,
# AdamW, RAdam and Adamax delete their copy before making their own list, Adamax its own too; SGD adds into the
# weights, in place but for the copy. Over one dtype every parameter is one group: the largest ``cur`` x their
# total. Measured: the peak ``Total Allocated`` inside a real ``step(foreach=True)`` over one, two and two
# unequal parameters, and over float32 and bfloat16 ones in both orders (tests/integration/
# test_torch_optimizers.py).
_HOLDS_ONE_BACK = ((1, 1),)
FOREACH_MOMENTS: Dict[str, Tuple[Tuple[Tuple[int, int], ...], Tuple[Tuple[int, int], ...]]] = {
    "SGD": ((), ((0, 1),)), "Adam": (_HOLDS_ONE_BACK, _HOLDS_ONE_BACK), "AdamW": (_HOLDS_ONE_BACK, _HOLDS_ONE_BACK),
    "RAdam": (_HOLDS_ONE_BACK, _HOLDS_ONE_BACK), "Adamax": (((0, 1),), ((0, 1),)),
    "NAdam": (_HOLDS_ONE_BACK, ((1, 2),)), "RMSprop": (_HOLDS_ONE_BACK, ((1, 2),)),
    "Adafactor": (_HOLDS_ONE_BACK, ((1, 2),)), "Adagrad": (((2, 1), (1, 2)), ((2, 2),)),
    "Adadelta": (((2, 1), (1, 2)), ((1, 3),)),
}
MOST_FOREACH_DTYPES = 2  # more dtypes: their order is the hash map's, not measured (``scratch_peak`` says None)
# Classes with a fused kernel (torch 2.13, CPU and CUDA): it updates every tensor in place, no scratch
# (measured alike, every flag of ``COUNT_CASES``).
FUSED_CLASSES = frozenset({"SGD", "Adam", "AdamW", "Adagrad"})


_FUSED_KERNEL = re.compile(r"\b_fused_(adamw?|sgd|adagrad)_")  # aten::_fused_adamw_, never a fused dropout's


def path_of(update_ops: Sequence[str]) -> str:
    """The implementation a traced step's update took, from the names of the ops it ran: a fused optimizer
    kernel's (``aten::_fused_adamw_``), a ``_foreach_*`` op's, else one parameter at a time. Only the ops inside
    ``Optimizer.step`` say it (``OpTrace.optimizer_path``): clipping the gradients runs ``_foreach_norm``."""
    if any(_FUSED_KERNEL.search(name) for name in update_ops):
        return FUSED
    return FOREACH if any("_foreach_" in name for name in update_ops) else FOR_LOOP


def split_path(name: str) -> Tuple[str, str]:
    """(The class part of an asked optimizer name, the implementation it names, "" for none): "AdamW fused",
    "adamw_fused", "SGD-foreach", "Adam for-loop"."""
    found = re.fullmatch(r"(.+?)[\s_-]+(fused|foreach|for[\s_-]?loop)", name.strip(), re.IGNORECASE)
    if found is None:
        return name, ""
    path = re.sub(r"[\s_-]", "", found.group(2).lower())
    return found.group(1), {"forloop": FOR_LOOP}.get(path, path)


def asked_path(cls: str, flags: Sequence[str], traced: str, cuda: bool) -> str:
    """The implementation ``cls`` with ``flags`` (``split_path``'s path among them where the name said one)
    takes where the traced step took ``traced``: the one named, else the same, but for a fused step asked a
    class with no fused kernel, which takes its device's default (foreach on CUDA)."""
    named = [flag for flag in flags if flag in PATHS]
    if named:
        return named[0]
    if traced == FUSED and cls not in FUSED_CLASSES:
        return FOREACH if cuda else FOR_LOOP
    return traced


def _copies(cls: str, flags: Sequence[str]) -> FrozenSet[str]:
    """The flags of ``flags`` that rebind the update's gradient to a new copy (``_GRADIENT_COPIES``)."""
    decoupled = cls in _ALWAYS_DECOUPLED or _DECOUPLED in flags
    return frozenset(flags) & frozenset(_GRADIENT_COPIES) - ({"weight_decay"} if decoupled else set())


def scratch_counts(cls: str, flags: Sequence[str], path: str = FOR_LOOP) -> Optional[Tuple[int, int]]:
    """(Tensors of a parameter's size ``cls`` with ``flags`` on, ``plan``'s, holds at once in its step on ``path``, of
    the previous parameter's it still holds then: on the foreach path, lists of every parameter's size over one
    dtype, ``FOREACH_MOMENTS``); None for a class this table, or its fused kernels, lack. The gradient's copies
    are made one after another, each freeing the one before once made: two at once while the next is made, one
    after. SGD's step holds nothing else; every other class's own peak comes after them, with one copy beside
    it. SGD's negated gradient alone stays bound until the next parameter's is made (momentum and weight decay
    rebind the name first). Measured: maximize on every class, alone and beside weight decay, coupled or
    decoupled where the class has both, and SGD's flags together (tests/integration/test_torch_optimizers.py)."""
    if cls not in SCRATCH or cls not in FOREACH_MOMENTS:
        return None
    copies = _copies(cls, flags)
    if path == FUSED:
        return (0, 0) if cls in FUSED_CLASSES else None
    if path == FOREACH:  # one list per device and dtype: over one dtype every parameter at once
        return max((cur for _, cur in _foreach_moments(cls, flags)), default=0), 0
    within, held = SCRATCH[cls]
    if copies:
        within = max(min(len(copies), 2), within + 1)
    if cls == "SGD" and copies == {"maximize"} and "momentum" not in flags:
        held += 1
    return within, held


def _foreach_moments(cls: str, flags: Sequence[str]) -> Tuple[Tuple[int, int], ...]:
    """``FOREACH_MOMENTS``' entry of ``cls`` with ``flags`` on."""
    plain, copied = FOREACH_MOMENTS[cls]
    return copied if _copies(cls, flags) - {"nesterov"} else plain


def scratch_peak(cls: str, flags: Sequence[str], sizes: Sequence[int], path: str = FOR_LOOP,
                 dtypes: Optional[Sequence[str]] = None) -> Optional[int]:
    """The most bytes of scratch ``cls``'s step holds at once over parameters of ``sizes`` bytes (of
    ``dtypes``, float32 where not given; on one device), in the order it updates them; None where
    ``scratch_counts`` is, and on the foreach path over more than ``MOST_FOREACH_DTYPES`` dtypes."""
    counts = scratch_counts(cls, flags, path)
    if counts is None:
        return None
    within, held = counts
    if path == FOREACH:
        groups: Dict[str, int] = collections.Counter()
        for size, dtype in zip(sizes, dtypes or [""] * len(sizes), strict=True):
            groups[dtype or "float32"] += size
        if len(groups) > MOST_FOREACH_DTYPES:
            return None
        totals = list(groups.values())[::-1]  # two groups: the reverse of their first parameters' order
        return max((back * before + cur * total for before, total in zip((0, *totals), totals)
                    for back, cur in _foreach_moments(cls, flags)), default=0)
    return max((held * before + within * size for before, size in zip((0, *sizes), sizes)), default=0)


def in_place(cls: str, flags: Sequence[str], path: str = FOR_LOOP) -> bool:
    """Whether ``cls`` with ``flags`` on (``plan``'s) updates every tensor in place on ``path``, allocating
    no scratch."""
    return scratch_counts(cls, flags, path) == (0, 0)


def classes() -> List[str]:
    return list(OPTIMIZERS)


def choices() -> List[str]:
    """The names What if offers a PyTorch run: each class (on the traced step's implementation), then each
    fused kernel and each class's foreach path by name (``split_path``)."""
    return classes() + [f"{cls} {FUSED}" for cls in OPTIMIZERS if cls in FUSED_CLASSES] + [
        f"{cls} {FOREACH}" for cls in OPTIMIZERS]


def class_among(name: str, classes: Sequence[str]) -> Optional[str]:
    """The class of ``classes`` a name means, case and underscores aside ("adamw", "Adam_W": "AdamW"), None
    if none (the one rule for Keras' names and torch.optim's)."""
    return {cls.lower(): cls for cls in classes}.get(name.lower().replace("_", ""))


def plan(entry: Any) -> Tuple[str, Tuple[str, ...]]:
    """(Class, the flags its config turns on: those that add slots, and those that copy the gradient in its
    update, ``scratch_counts``) of a breakdown's optimizer entry ``{"class_name", "config"}``
    as ``capture.torch_modules.optimizer_record`` writes it; class "" for one this table does not know."""
    if not isinstance(entry, dict):
        return "", ()
    cls = OPTIMIZERS.get(str(entry.get("class_name", "")))
    if cls is None:
        return "", ()
    config = entry.get("config")
    config = config if isinstance(config, dict) else {}
    name = str(entry["class_name"])
    # AdamW's decay is always decoupled: neither it nor the flag said
    scratch = (tuple(f for f in _GRADIENT_COPIES if f != "weight_decay") if name in _ALWAYS_DECOUPLED
               else _GRADIENT_COPIES + (_DECOUPLED,))
    flags = dict.fromkeys(tuple(cls[1]) + scratch)  # the slots', the scratch's
    return str(entry["class_name"]), tuple(flag for flag in flags if config.get(flag))


def group_record(params: List[str], settings: Dict[str, Any], first: Dict[str, Any], others: int = 0
                 ) -> Dict[str, Any]:
    """One param group as a breakdown's optimizer entry keeps it under "groups" (``group_plans`` reads it): its
    parameters' names, the ``settings`` that differ from the ``first`` group's, and how many of its parameters
    have no name here (``others``: not the model's, or not tied to it)."""
    own = {key: value for key, value in settings.items() if key != "params" and first.get(key) != value}
    return {"params": params, "config": own, **({"others": others} if others else {})}


def group_plans(entry: Any) -> List[Tuple[Tuple[str, ...], List[str]]]:
    """Each param group's (flags, as ``plan`` reads them from its own settings; its parameters' names) of a
    breakdown's optimizer entry with "groups" (``optimizer_record``'s); [] where it has none (one group)."""
    groups = entry.get("groups") if isinstance(entry, dict) else None
    config = entry.get("config") if isinstance(entry, dict) else None
    if not isinstance(groups, list) or not isinstance(config, dict):
        return []
    out = []
    for group in groups:
        own = group.get("config") if isinstance(group, dict) else None
        params = group.get("params") if isinstance(group, dict) else None
        if not isinstance(own, dict) or not isinstance(params, list):
            return []
        out.append((plan({**entry, "config": {**config, **own}})[1], [str(name) for name in params]))
    return out


Made = Tuple[str, str, Tuple[int, ...], str]  # (role, name, shape, dtype) of one tensor an optimizer keeps


def state_of(cls: str, flags: Sequence[str], trainable: Sequence[Weight]) -> List[Made]:
    """(role, name, shape, dtype) of every tensor ``cls`` keeps for ``trainable`` parameters with ``flags`` on,
    as its first ``step()`` makes them."""
    always, optional, scalars = OPTIMIZERS[cls]
    out: List[Made] = []
    for index, (_, shape, dtype) in enumerate(trainable):
        shape = tuple(shape)
        for slot in always + tuple(s for flag in flags for s in optional.get(flag, ())):
            if cls == "Adafactor":
                out.extend(_factored(index, slot, shape, dtype))
            else:
                out.append((OPTIMIZER_SLOT, f"optimizer.state.{index}.{slot}", shape, dtype))
        out.extend((OTHER, f"optimizer.state.{index}.{scalar}", (), "float32") for scalar in scalars)
    return out


def _factored(index: int, slot: str, shape: Tuple[int, ...], dtype: str) -> List[Made]:
    """Adafactor's second moment: a row and a column of a matrix (``row_var`` with the last dimension 1,
    ``col_var`` with the one before it 1), the whole ``variance`` of a vector."""
    if len(shape) < 2:
        return [(OPTIMIZER_SLOT, f"optimizer.state.{index}.variance", shape, dtype)] if slot == "row_var" else []
    reduced = shape[:-1] + (1,) if slot == "row_var" else shape[:-2] + (1, shape[-1])
    return [(OPTIMIZER_SLOT, f"optimizer.state.{index}.{slot}", reduced, dtype)]
