"""What an XLA instruction's ``op_name`` says of the framework op it was lowered from. No TF.

TensorFlow (``jit_compile=True``) keeps its node names ("sequential_1/conv1_1/convolution",
"gradient_tape/..."), which ``join`` reads as it reads any TF op. JAX, and Keras 3 on JAX, write
a name stack: "jit(train_step)/transpose(jvp(conv1))/conv_general_dilated" is the backward pass of
layer ``conv1`` (``jvp`` marks what is differentiated, ``transpose(jvp(...))`` its gradient), inner
layers are plain scopes under the outermost one, and transformations (``jit(relu)``,
``vmap(...)``, einsum specs) are no scopes. ``scope_name`` rewrites such a stack as the TF-style
name ``join`` reads, so one rule set places every op on a layer and a phase.
"""

from __future__ import annotations

import collections
import functools
import re
from typing import AbstractSet, Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from tb_modelmem.rules import roles
from tb_modelmem.schema.names import NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, WEIGHT

_BACKWARD = re.compile(r"^transpose\(jvp\((.*)\)\)$")
_FORWARD = re.compile(r"^jvp\((.*)\)$")
# a layer or name scope, or an index in a module's path ("blocks/0/attn"); not "jit(relu)", not "abc,cde->abde"
_SCOPE = re.compile(r"^([A-Za-z_][\w.-]*|\d+)$")
_LOSS = re.compile(r"^(compile_loss|loss)(_\d+)?$")
# Keras 3's JAX trainer calls its compiled step as train_step(state, data), state being
# (trainable variables, non-trainable variables, optimizer variables, metric variables).
_KERAS_STATE = re.compile(r"^state\[(\d)\]\[\d+\]$")
_KERAS_STATE_ROLES = {0: WEIGHT, 1: NON_TRAINABLE, 2: OPTIMIZER_SLOT, 3: OTHER}
_KERAS_DATA = re.compile(r"^data\[\d+\](\[\d+\])*$")
# JAX names an entry parameter by its argument's path: "x", "batch['image']", "model.states[0][3]"
_ARGUMENT = re.compile(r"^([A-Za-z_]\w*)(?:[\[.].*)?$")


@functools.lru_cache(maxsize=1 << 14)  # a program's instructions share a few hundred op_names
def scope_name(op_name: str) -> str:
    """``op_name`` as a TF-style op name: a JAX name stack's backward pass under "gradient_tape/",
    its layers and scopes as name scopes, the primitive last; a TF name unchanged."""
    stack = op_name.split(";", 1)[0]  # two stacks joined: the first is the op's own
    parts = stack.split("/")
    if not any(p.startswith(("jit(", "jvp(", "transpose(", "pjit(", "vmap(")) for p in parts):
        return stack  # a TF node name (or a bare name)
    primitive = parts[-1]
    scopes = parts[:-1]
    backward = False
    kept: List[str] = []
    for part in scopes:
        differentiated = _BACKWARD.match(part) or _FORWARD.match(part)
        if differentiated:
            backward = backward or part.startswith("transpose(")
            kept.extend(p for p in differentiated.group(1).split("/") if _SCOPE.match(p))
        elif _SCOPE.match(part):
            kept.append(part)
    name = "/".join(kept + [primitive])
    return f"gradient_tape/{name}" if backward else name


def layer_paths(op_names: Iterable[str]) -> List[str]:
    """The layers a profile's name stacks differentiate, as paths ("transformer_block/dense"), in
    order of first appearance: the layer tree of a JAX step with no breakdown beside it. The loss
    is no layer."""
    found: Dict[str, None] = {}
    for op_name in op_names:
        stack = op_name.split(";", 1)[0].split("/")
        for part in stack:
            differentiated = _BACKWARD.match(part) or _FORWARD.match(part)
            if differentiated:
                name = scope_name(op_name)
                scopes = name.split("/")[:-1]
                if scopes and scopes[0] == "gradient_tape":
                    scopes = scopes[1:]
                if scopes and not _LOSS.match(scopes[0]):
                    found["/".join(scopes)] = None
                break
    return list(found)


def keras_state_role(op_name: str, dims: Sequence[int]) -> Optional[str]:
    """The role of a Keras-on-JAX train step's entry parameter ("state[0][3]": a trainable weight,
    "state[2][1]": an optimizer variable, a slot unless it is a scalar counter or rate); None for
    anything else (its batch, another program's parameters)."""
    found = _KERAS_STATE.match(op_name)
    role = _KERAS_STATE_ROLES.get(int(found.group(1))) if found else None
    return roles.optimizer_variable_role("", dims) if role == OPTIMIZER_SLOT else role


def is_keras_batch(op_name: str) -> bool:
    """A Keras-on-JAX train step's batch parameter ("data[0]", "data[1]")."""
    return bool(_KERAS_DATA.match(op_name))


def batch_parameters(parameters: Sequence[Any], batch: Optional[int] = None,
                     returned: AbstractSet[Tuple[int, ...]] = frozenset()) -> Set[int]:
    """Numbers of the entry parameters (``readers.hlo.Parameter``) that are a step's batch: Keras on JAX's
    ``data[...]``; in a JAX step without Keras' names (flax, optax, equinox), the arguments every array of
    which leads with the batch (``x``, ``batch['image']``; never ``model.states[...]``, whose arrays lead with
    anything): ``batch`` where an argument leads with it, else (unknown, or each device's piece of it, which
    divides it) the leading dimension shared by the most bytes of such arguments. ``returned``: the shapes
    the program returns; an argument of several arrays, all of which it returns, is state the step updates
    (a uniform MLP's params all lead with its width), never the batch, where another argument is left."""
    keras = {p.number for p in parameters if is_keras_batch(p.op_name)}
    if keras or any(keras_state_role(p.op_name, p.dims) is not None for p in parameters):
        return keras
    arguments: Dict[str, List[Any]] = collections.defaultdict(list)
    for parameter in parameters:
        found = _ARGUMENT.match(parameter.op_name)
        if found is None:
            return set()  # not a JAX argument path (TensorFlow's XLA_Args): no rule here
        arguments[found.group(1)].append(parameter)
    several = len(arguments) > 1  # one argument: the state alone, or all of it in one
    updated = [name for name, members in arguments.items()  # of two arrays or more: a lone label's shape may
               if len(members) > 1 and all(tuple(p.dims) in returned for p in members)]  # be a bias's by chance
    if 0 < len(updated) < len(arguments):
        for name in updated:
            del arguments[name]
    leading: Dict[int, List[Any]] = {}
    for members in arguments.values():
        firsts = {p.dims[0] if p.dims else -1 for p in members}
        if len(firsts) == 1 and -1 not in firsts:
            leading.setdefault(int(firsts.pop()), []).extend(members)
    if batch not in leading:  # unknown, or split over devices: each holds a piece, which divides it
        pieces = [size for size in leading if size > 0 and (batch is None or batch % size == 0)]
        batch = max(pieces, key=lambda size: sum(p.bytes for p in leading[size])) if pieces else None
    if batch is None or not several:
        return set()
    return {p.number for p in leading.get(batch, [])}
