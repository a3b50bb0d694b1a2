"""What a projection asks (``WhatIf``) and the resident state it asks for (``State``): the run's variables on
one device, recomputed for another optimizer or policy and split over devices by a sharding. Beside them the
helpers every basis line uses (``basis_line``, ``size_text``). No TF. ``rules.projection`` replays the step.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tb_modelmem.rules import roles, torch_optimizers
from tb_modelmem.rules.peak import is_torch_run, resident_state, state_not_held
from tb_modelmem.schema.dtypes import item_bytes
from tb_modelmem.schema.names import (
    JAX_BREAKDOWN_SOURCES,
    NON_TRAINABLE_CATEGORY,
    OPTIMIZER_SLOT,
    OPTIMIZER_SLOTS_CATEGORY,
    OTHER,
    OTHER_STATE_CATEGORY,
    RESIDENT_CATEGORIES,
    WEIGHT,
    WEIGHTS_CATEGORY,
)
from tb_modelmem.schema.records import Breakdown, OpTrace

# What a data-parallel step splits over its devices besides the batch: nothing (each device holds the whole
# state), the optimizer's state (ZeRO-1), + the gradients (ZeRO-2), + the weights (ZeRO-3, FSDP).
SHARDINGS = {"replicated": "replicated (data parallel)", "optimizer": "optimizer state sharded (ZeRO-1)",
             "gradients": "optimizer state and gradients sharded (ZeRO-2)",
             "weights": "optimizer state, gradients and weights sharded (ZeRO-3 / FSDP)"}
# Keras' mixed-precision policies: bytes of one element in the compute dtype (variables stay float32).
POLICIES = {"float32": 4, "mixed_float16": 2, "mixed_bfloat16": 2}
# What ``build()`` gives a counter or rate whose dtype Keras decides at run time: int64 counters,
# float32 rates and scales (TensorFlow's backend; JAX's default makes counters int32).
_STATE_BYTES = {"iteration": 8, "step_counter": 8}
MOST_ASKED = 10**9  # the largest batch or sequence asked (the route's bound): a length's ratio squared stays a float
_SCALAR_BYTES = 4
# a torch.optim optimizer's param groups, each (its flags, its parameters' places in ``State.trainable``)
ParamGroups = List[Tuple[Tuple[str, ...], List[int]]]


@dataclasses.dataclass
class WhatIf:
    """What to change; None keeps what the trace ran with."""

    batch: Optional[int] = None  # the global batch (split over ``replicas``)
    optimizer: Optional[str] = None  # a Keras 3 optimizer class ("Adam", "SGD", "AdamW"...), "momentum": SGD with it
    policy: Optional[str] = None  # one of POLICIES
    replicas: int = 1  # the devices the step is spread over, data parallel (the batch split over them)
    shard: Optional[str] = None  # what is split over them too (one of SHARDINGS); None: as traced
    seq: Optional[int] = None  # tokens per sample (the traced step's input [batch, seq] says what it ran)

    def check(self) -> None:
        """ValueError naming what is wrong, before anything is projected."""
        for name in ("batch", "seq"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1
                                      or value > MOST_ASKED):
                raise ValueError(f"{name} must be a positive integer up to {MOST_ASKED:,}, got {str(value)[:40]}")
        replicas = self.replicas
        if not isinstance(replicas, int) or isinstance(replicas, bool) or not 1 <= replicas <= MOST_ASKED:
            raise ValueError(f"devices (replicas) must be a positive integer up to {MOST_ASKED:,}, "
                             f"got {str(self.replicas)[:40]}")
        if self.shard is not None and self.shard not in SHARDINGS:
            raise ValueError(f"shard must be one of {', '.join(SHARDINGS)}, got {self.shard!r}")
        if self.policy is not None and self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.optimizer is not None:
            optimizer_class(self.optimizer, None)


@dataclasses.dataclass
class State:
    """The run's variables on one device, by peak category (``rules.peak.resident_state``: the breakdown's,
    else the XLA program's parameters the trace read, else unknown), and what an optimizer change needs."""

    bytes: Dict[str, int]
    trainable: List[roles.Weight]  # (name, shape, dtype) of each trainable weight, in the breakdown's order
    optimizer: Tuple[str, Tuple[str, ...], str]  # the traced (class, flags, wrapper): roles.optimizer_plan
    source: str  # "breakdown", "trace" or "" (unknown)
    whole: Dict[str, int] = dataclasses.field(default_factory=dict)  # each variable once, by category
    torch: bool = False  # a PyTorch step: its optimizers are torch.optim's (``rules.torch_optimizers``)
    jax: bool = False  # JAX without Keras: optax's state, whose slots Keras' rules make (``roles``), its counts its own
    counted: bool = True  # the trace's count holds the state (False: it starts at 0 in the window)
    # a torch.optim optimizer's param groups, each (its flags, its parameters' places in ``trainable``), in the
    # order step() updates them; [] for one group (``torch_optimizers.group_plans``)
    groups: ParamGroups = dataclasses.field(default_factory=list)
    not_held: Dict[str, str] = dataclasses.field(default_factory=dict)  # ``rules.peak.state_not_held``
    # the breakdown's name of an optimizer no plan here knows ("Adam + Adam": a GAN's two; a class of its own)
    named: str = ""

    @classmethod
    def of(cls, breakdown: Optional[Breakdown], trace: OpTrace) -> "State":
        totals = resident_state(trace, breakdown)  # the one rule the peak split reads (``rules.peak``)
        torch, counted = is_torch_run(trace, breakdown), trace.counts_resident
        if totals is None:
            return cls(dict.fromkeys(RESIDENT_CATEGORIES, 0), [], ("", (), ""), "", torch=torch, counted=counted)
        if breakdown is None:
            return cls(totals, [], ("", (), ""), "trace", dict(totals), torch=torch, counted=counted)
        columns = breakdown.variables.columns
        trainable: List[roles.Weight] = [(name, shape, dtype) for name, shape, dtype, role, size in zip(
            columns["name"], columns["shape"], columns["dtype"], columns["role"], columns["bytes"])
            if role == WEIGHT and size]  # a tied weight's alias holds 0 B: its optimizer keeps one state
        plan = torch_optimizers.plan(breakdown.optimizer) + ("",) if torch else roles.optimizer_plan(
            breakdown.optimizer)
        place = {name: index for index, (name, _, _) in enumerate(trainable)}
        groups: ParamGroups = [(flags, places) for flags, params in (
            torch_optimizers.group_plans(breakdown.optimizer) if torch else [])
            if (places := [place[name] for name in params if name in place])]  # a frozen group updates none
        entry = breakdown.optimizer if isinstance(breakdown.optimizer, dict) else {}
        return cls(totals, trainable, plan, "breakdown", resident_state(trace, breakdown, whole=True) or {},
                   torch=torch, counted=counted, groups=groups, not_held=state_not_held(trace, breakdown),
                   jax=breakdown.source in JAX_BREAKDOWN_SOURCES,
                   named="" if plan[0] else str(entry.get("class_name") or "")[:200])

    def optimizer_label(self, path: str = "") -> str:
        """"SGD(momentum, weight_decay)", with a torch step's implementation ``path`` ("AdamW fused"); a flag only
        some param groups set says in how many ("weight_decay in 1 of 2 groups")."""
        cls, flags, wrapper = self.optimizer
        if not cls:
            return wrapper or self.named
        if len(self.groups) > 1:
            every = [set(own) for own, _ in self.groups]
            said = dict.fromkeys(flag for own, _ in self.groups for flag in own)
            flags = tuple(flag if all(flag in own for own in every) else
                          f"{flag} in {sum(flag in own for own in every)} of {len(every)} groups" for flag in said)
        return optimizer_label_of(cls, tuple(flags) + ((path,) if path else ()), wrapper)

    def asked_optimizer(self, name: str) -> Tuple[str, Tuple[str, ...]]:
        """(Class, flags) ``name`` asks of this run (``optimizer_class``): a class at its defaults ("Adam" of an
        Adam(amsgrad) run drops amsgrad, as "SGD" of a momentum one drops momentum); the traced class with only
        an implementation named ("Adam fused") keeps the traced config's flags. ValueError: no such class."""
        cls, flags = optimizer_class(name, self.torch)
        if self._keeps_traced_config(cls, flags):
            flags = tuple(self.optimizer[1]) + tuple(flags)
        return cls, flags

    def _keeps_traced_config(self, cls: str, flags: Sequence[str]) -> bool:
        """Whether an asked (class, flags), ``optimizer_class``'s, is the traced class with only an
        implementation named (``asked_optimizer``)."""
        return self.torch and cls == self.optimizer[0] and bool(flags) and set(flags) <= set(torch_optimizers.PATHS)

    def update_groups(self, name: Optional[str]) -> ParamGroups:
        """Each param group's (flags, places in ``trainable``) of the optimizer ``name`` asks (None: the traced
        one): the traced groups, each with its own flags where the traced config is kept (``asked_optimizer``)
        and the asked flags for every group where not; one group of every trainable weight where the run
        recorded none."""
        groups = self.groups or [(self.optimizer[1], list(range(len(self.trainable))))]
        if name is None:
            return groups
        cls, flags = optimizer_class(name, self.torch)
        if self._keeps_traced_config(cls, flags):
            return [(tuple(own) + tuple(flags), places) for own, places in groups]
        return [(tuple(flags), places) for _, places in groups]

    def projected(self, what: WhatIf, basis: List[Dict[str, Any]], unknown: Dict[str, str],
                  unsplit: List[str]) -> Dict[str, Optional[int]]:
        """The state's bytes on one device after the change, each with its line in ``basis``; what
        cannot be told goes in ``unknown`` (and ``unsplit`` when it stays counted as unattributed)."""
        out: Dict[str, Optional[int]] = dict(self.bytes)
        traced_class, traced_flags, traced_wrapper = self.optimizer
        wrapper = traced_wrapper if self.torch or self.jax else {
            None: traced_wrapper, "mixed_float16": "LossScaleOptimizer"}.get(what.policy, "")
        changed = what.optimizer is not None or wrapper != traced_wrapper
        if not self.source:
            reason = ("no variable breakdown in this run: record one (tb_modelmem.summary.variables or MemoryCallback; "
                      "for PyTorch, a torch.save checkpoint in the run folder) to see it")
            for category in RESIDENT_CATEGORIES:
                out[category] = None
                unknown[category] = reason + ("" if changed else "; counted in unattributed" if self.counted else
                                              "; not in this trace's count, which starts at 0 in the window")
            if not changed:
                unsplit.extend(RESIDENT_CATEGORIES)
            return out
        source = ("the XLA program's parameters" if self.source != "breakdown"
                  else "the run's tensors" if self.torch else "the run's variables")
        kept = "as traced" if self.torch or self.jax else "kept float32 under every Keras policy"  # autocast: too
        for category in (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY):
            basis.append(basis_line(category, self.bytes[category], self.bytes[category], "measured",
                               f"{size_text(self.bytes[category])}: {source} ({kept})"))
        if not changed and self.not_held:  # no optimizer in the breakdown: its state is not none
            for category, reason in self.not_held.items():
                out[category] = None
                unknown[category] = reason
            return out
        if not changed:
            for category in (OPTIMIZER_SLOTS_CATEGORY, OTHER_STATE_CATEGORY):
                basis.append(basis_line(category, self.bytes[category], self.bytes[category], "measured",
                                   f"{size_text(self.bytes[category])}: {source}, "
                                   f"{self.optimizer_label() or 'the optimizer'}'s own, as traced"))
            return out
        try:
            cls, flags = self.asked_optimizer(what.optimizer) if what.optimizer else (traced_class, traced_flags)
            if not cls:
                raise ValueError(f"the run's optimizer ({self.optimizer_label() or 'not named'}) is not a "
                                 f"built-in {'torch.optim' if self.torch else 'optax' if self.jax else 'Keras'} "
                                 "optimizer")
            if not self.trainable:
                raise ValueError("the trainable weights' shapes are not known without a variable breakdown")
        except ValueError as e:
            for category in (OPTIMIZER_SLOTS_CATEGORY, OTHER_STATE_CATEGORY):
                out[category] = None
                unknown[category] = f"{e}: its state is not known"
            return out
        made: Sequence[Tuple[str, str, Sequence[int], Optional[str]]]
        if self.torch:  # each param group's parameters, with that group's flags (``update_groups``)
            made = [tensor for group_flags, places in self.update_groups(what.optimizer) for tensor in
                    torch_optimizers.state_of(cls, group_flags, [self.trainable[i] for i in places])]
        else:
            made = roles.keras_optimizer_variables(cls, self.trainable, flags, wrapper)
        slots = sum(tensor_bytes(shape, dtype) for role, _, shape, dtype in made if role == OPTIMIZER_SLOT)
        counters = [name for role, name, _, _ in made if role == OTHER]
        other = sum(_STATE_BYTES.get(name, _SCALAR_BYTES) for name in counters)
        out[OPTIMIZER_SLOTS_CATEGORY], out[OTHER_STATE_CATEGORY] = slots, other
        label = optimizer_label_of(cls, flags, wrapper)
        per_weight = slots / self.bytes[WEIGHTS_CATEGORY] if self.bytes[WEIGHTS_CATEGORY] else 0
        weights = f"the {len(self.trainable)} trainable weights"
        builds = (f"{label}'s first step()" if self.torch else f"{label}'s init" if self.jax
                  else f"{label}'s build()")
        basis.append(basis_line(OPTIMIZER_SLOTS_CATEGORY, self.bytes[OPTIMIZER_SLOTS_CATEGORY], slots, "computed",
                           f"{size_text(slots)}: {builds} on {weights}, {per_weight:.3g}x their "
                           f"{size_text(self.bytes[WEIGHTS_CATEGORY])}" if slots else
                           f"0 B: {builds} makes no slot for {weights}"))
        if self.torch:
            scalars = sorted({name.rpartition(".")[2] for name in counters})
            said = (f"{size_text(other)}: {len(counters)} float32 scalars {label} keeps "
                    f"({', '.join(scalars)} per parameter)" if counters else f"0 B: {label} keeps no count")
        elif self.jax:  # optax's count and a flax Optimizer's step, as traced: a few bytes no rule here makes
            out[OTHER_STATE_CATEGORY] = other = self.bytes[OTHER_STATE_CATEGORY]
            said = f"{size_text(other)}: the run's own counts (optax's, a flax Optimizer's step), kept as traced"
        else:
            said = (f"{size_text(other)}: {len(counters)} counters and rates of {label} ({', '.join(counters)}; "
                    "int64 counters, float32 rates: TensorFlow's dtypes)")
        basis.append(basis_line(OTHER_STATE_CATEGORY, self.bytes[OTHER_STATE_CATEGORY], other, "computed", said))
        return out


    def grow_tables(self, breakdown: Optional[Breakdown], tables: Sequence[Sequence[int]], what: WhatIf,
                    out: Dict[str, Optional[int]], basis: List[Dict[str, Any]]) -> Dict[str, int]:
        """A position table has a row per traced token (``OpTrace.position_tables``); a longer asked sequence needs
        a row per asked token (a model built for that length: nanoGPT's block_size), so the table's weight and the
        optimizer's state of it grow in ``out`` (each line of ``basis`` saying by how much), where known. A shorter
        one: the model as traced runs it, its table kept. Returns the bytes added, by category."""
        rows = what.seq
        shapes = {tuple(table) for table in tables}
        found = [i for i, (_, shape, _) in enumerate(self.trainable) if tuple(shape) in shapes]
        if not found or not rows or breakdown is None or rows <= self.trainable[found[0]][1][0]:
            return {}
        grown = {i: (name, (rows,) + tuple(shape[1:]), dtype) for i, (name, shape, dtype) in
                 ((i, self.trainable[i]) for i in found)}
        more = {WEIGHTS_CATEGORY: sum(tensor_bytes(grown[i][1], self.trainable[i][2]) -
                                      tensor_bytes(self.trainable[i][1], self.trainable[i][2]) for i in found)}
        try:
            cls = self.asked_optimizer(what.optimizer)[0] if what.optimizer else self.optimizer[0]
        except ValueError:  # a class torch.optim has none of: its state is unknown (``projected``), none to grow
            cls = ""
        if out.get(OPTIMIZER_SLOTS_CATEGORY) is None or (what.optimizer and not cls):
            pass  # unknown, said by ``projected``
        elif cls in torch_optimizers.OPTIMIZERS:  # its state of a table [rows, d] as its first step() makes it
            more[OPTIMIZER_SLOTS_CATEGORY] = sum(
                sign * tensor_bytes(shape, dtype) for group_flags, places in self.update_groups(what.optimizer)
                for sign, weights in ((1, [grown[i] for i in places if i in grown]),
                                      (-1, [self.trainable[i] for i in places if i in grown]))
                for role, _, shape, dtype in torch_optimizers.state_of(cls, group_flags, weights)
                if role == OPTIMIZER_SLOT)
        elif not what.optimizer:  # a class no rule here knows: the run's own state of the table, grown as its rows
            names = {self.trainable[i][0] for i in found}
            columns = breakdown.variables.columns
            kept = sum(size for role, of, size in zip(columns["role"], columns["slot_of"], columns["bytes"])
                       if role == OPTIMIZER_SLOT and of in names)
            more[OPTIMIZER_SLOTS_CATEGORY] = round(kept * (rows / self.trainable[found[0]][1][0] - 1))
        said = ", ".join(f"{self.trainable[i][0]} {list(self.trainable[i][1])}" for i in found)
        lines = {line["category"]: line for line in basis}
        more = {category: size for category, size in more.items() if out.get(category) is not None and size}
        for category, size in more.items():
            out[category] = int(out[category] or 0) + size
            line = lines.get(category)
            if line is not None:
                line.update(projected_bytes=out[category], how="computed",
                            formula=f"{line['formula']}; + {size_text(size)}: the position table {said} at {rows:,} "
                                    "rows, one per asked token")
        return more

    def sharded(self, out: Dict[str, Optional[int]], what: WhatIf, basis: List[Dict[str, Any]]) -> None:
        """The state on each of ``what.replicas`` devices when ``what.shard`` splits it: the global state
        (each variable once) divided where it is sharded, whole where it is replicated. A weight
        sharded is gathered whole while its layer runs: the largest one is counted whole on top."""
        devices, shard = what.replicas, what.shard or "replicated"
        changed = {line["category"]: line for line in basis if line["how"] == "computed"}
        lines = {line["category"]: line for line in basis}
        split = {WEIGHTS_CATEGORY: shard == "weights",
                 OPTIMIZER_SLOTS_CATEGORY: shard in ("optimizer", "gradients", "weights")}
        for category in (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY, OTHER_STATE_CATEGORY):
            whole = out[category] if category in changed else self.whole.get(category, 0)
            if whole is None:
                continue
            value, formula = whole, f"{size_text(whole)}: every variable once, replicated on each device"
            if split.get(category) and devices > 1:
                value = math.ceil(whole / devices)
                formula = f"{size_text(whole)} / {devices} devices = {size_text(value)}"
                if category == WEIGHTS_CATEGORY and self.trainable:
                    gathered = max(tensor_bytes(shape, dtype) for _, shape, dtype in self.trainable)
                    value += gathered - math.ceil(gathered / devices)
                    formula += f", + the largest weight gathered whole for its layer ({size_text(gathered)})"
            out[category] = value
            line = lines.get(category)
            if line is not None:
                line.update(projected_bytes=value, how="computed", formula=f"{formula} ({SHARDINGS[shard]})")


def optimizer_label_of(cls: str, flags: Sequence[str], wrapper: str) -> str:
    """"SGD(momentum)", "AdamW foreach" (a torch step's implementation as the tab's menu names it), "Adam in
    LossScaleOptimizer"."""
    paths = [flag for flag in flags if flag in torch_optimizers.PATHS]
    flags = [flag for flag in flags if flag not in torch_optimizers.PATHS]
    return (f"{cls}{'(' + ', '.join(flags) + ')' if flags else ''}{''.join(' ' + path for path in paths)}"
            + (f" in {wrapper}" if wrapper else ""))


def state_sizes(state: State, projected: Dict[str, Optional[int]]) -> Tuple[float, float]:
    """(The weights and slots on one device after the change, as traced): what an update's scratch grows or
    shrinks with (counters are a few bytes). Equal where one is unknown (kept as traced)."""
    parts = (WEIGHTS_CATEGORY, OPTIMIZER_SLOTS_CATEGORY)
    before = float(sum(state.bytes[c] for c in parts))
    if any(projected.get(c) is None for c in parts):
        return before, before
    return float(sum(projected[c] or 0 for c in parts)), before


def optimizer_choices(torch: bool = False) -> List[str]:
    """The names ``WhatIf.optimizer`` takes: "momentum" (SGD with it), then each built-in Keras class (``torch``:
    each ``torch.optim`` class ``rules.torch_optimizers`` knows, and its implementations by name)."""
    return ["momentum"] + (torch_optimizers.choices() if torch else roles.optimizer_classes())


def optimizer_class(name: str, torch: Optional[bool] = False) -> Tuple[str, Tuple[str, ...]]:
    """(Class, flags) of an optimizer name: a class ("Adam", "adamw"), or "momentum" (SGD with it); a Keras
    class, or a ``torch.optim`` one for ``torch`` (None: either, as ``WhatIf.check`` asks before a run is read),
    whose name may end in the implementation its step takes ("AdamW fused": ``torch_optimizers.split_path``)."""
    if torch is not False:
        base, path = torch_optimizers.split_path(name)
        if path:
            cls, flags = optimizer_class(base, True)
            if path == torch_optimizers.FUSED and cls not in torch_optimizers.FUSED_CLASSES:
                raise ValueError(f"torch.optim's {cls} has no fused kernel (fused: "
                                 f"{', '.join(sorted(torch_optimizers.FUSED_CLASSES))})")
            return cls, flags + (path,)
    if name.lower() == "momentum":
        return "SGD", ("momentum",)
    found = None if torch else torch_optimizers.class_among(name, roles.optimizer_classes())
    if found is None and torch is not False:
        found = torch_optimizers.class_among(name, torch_optimizers.classes())
    if found is None and torch is None:  # asked before the run is read: either kind's names
        raise ValueError(f"no built-in Keras or torch.optim optimizer {name[:40]!r} (Keras: "
                         f"{', '.join(optimizer_choices(False))}; torch.optim: {', '.join(optimizer_choices(True))})")
    if found is None:
        raise ValueError(f"no built-in {'torch.optim' if torch else 'Keras'} optimizer {name[:40]!r} "
                         f"(known: {', '.join(optimizer_choices(bool(torch)))})")
    return found, ()


def tensor_bytes(shape: Sequence[int], dtype: Optional[str]) -> int:
    return math.prod(shape) * (item_bytes(dtype or "float32") or _SCALAR_BYTES)


def basis_line(category: str, traced: float, projected: Optional[float], how: str, formula: str) -> Dict[str, Any]:
    return {"category": category, "traced_bytes": int(round(traced)),
            "projected_bytes": None if projected is None else int(round(projected)), "how": how, "formula": formula,
            "traced_then_bytes": None}  # the traced bytes at the projected peak's moment, where that is another


def size_text(size: float) -> str:
    """Bytes in the largest binary unit below them, to two decimals: "512 B", "3.06 KiB", "14.81 MiB"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(size) >= scale:
            return f"{size / scale:,.2f} {unit}"
    return f"{size:,.0f} B"
