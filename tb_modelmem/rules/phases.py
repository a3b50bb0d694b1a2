"""What a range around PyTorch ops says of them: the layer they run in and the phase of the step. No TF.

One vocabulary for every range a PyTorch trace can hold, whoever opened it:

- tb_modelmem's own annotations (``capture.torch_profile``): ``tb_modelmem.layer: <path>`` (a module by
  its ``state_dict`` path as a layer path, or a Keras layer), ``tb_modelmem.phase: loss|optimizer|metrics``,
  ``tb_modelmem.step`` (one Keras train step);
- torch's: ``Optimizer.step#Adam.step`` and ``Optimizer.zero_grad#...`` (optimizer),
  ``enumerate(DataLoader)#...__next__`` (input), ``ProfilerStep#N`` (one iteration, between two
  ``profiler.step()`` calls; tb_modelmem's profile opens the same), ``nn.Module: Linear_0``
  (``with_stack`` python ranges: instance numbers, not paths);
- Lightning's ``PyTorchProfiler``: ``[pl][module]<class>: <state_dict path>`` (a module) and
  ``[pl][profile]<hook>`` (``[Strategy]...training_step``: the loss, outside the model's modules;
  ``...backward``; ``...optimizer_step``; ``...batch_to_device``, ``train_dataloader_next``: the input).

An op's phase is the innermost range's that says one (``where``): a module's forward run inside
``Optimizer.step`` (Lightning runs ``training_step`` in the optimizer's closure) is forward, the
update after the closure returns is the optimizer's. A backward op (autograd's
``evaluate_function``) is backward wherever it runs. What no range names is placed by when it runs
in its iteration (``by_iteration``): before the forward pass it feeds the step (input), after the
backward pass it prepares the update (gradient clipping, unscaling: optimizer), in between an op
autograd numbered is the forward pass's.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from tb_modelmem.rules.roles import torch_module_layer
from tb_modelmem.schema.names import BACKWARD, FORWARD, INPUT, LOSS, METRICS, OPTIMIZER, is_class_name

LAYER_ANNOTATION = "tb_modelmem.layer: "  # + a layer path (capture.torch_profile)
PHASE_ANNOTATION = "tb_modelmem.phase: "  # + loss, optimizer or metrics
STEP_ANNOTATION = "tb_modelmem.step"  # one Keras train step (the train function's call)
ITERATION_RANGE = "ProfilerStep#"  # torch.profiler's, one per profiler.step()
MODULE_RANGE = "nn.Module: "  # a plain PyTorch module's python range (with_stack=True)
LIGHTNING_MODULE = "[pl][module]"  # + "<module class>: <named_modules path>"
LIGHTNING_ACTION = "[pl][profile]"  # + a Lightning hook's name
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
# Moving tensors between ranks: torch.distributed's ops (an async one returns at once, the work runs on the
# backend's thread), the backends' own work ranges and kernels, and the profiler's record of each call.
_COLLECTIVES = ("c10d::", "record_param_comms", "gloo:", "nccl:", "ncclKernel", "ncclDevKernel")
# A torch.compile graph run as one op: dynamo's region, AOTAutograd's forward and backward functions. The
# ops it calls (extern kernels: convolutions, matmuls) are their own rows; its own time is the code Inductor
# generated (fused kernels, the wrapper), and no module range survives compilation inside it.
_COMPILED_GRAPHS = ("Torch-Compiled Region", "CompiledFunction")
# An op's layer path, in characters, its innermost end kept: a real model's is tens to a few hundred; each op keeps
# its own, and a crafted trace's 500 long module names would make every op's 50 KB.
MAX_LAYER_PATH = 1024
_OPTIMIZER_STEP = "Optimizer.step#"
# FSDP2's ranges (torch.distributed.fsdp): "FSDP::pre_forward (encoder.layers.0)", "FSDP::all_gather (0)"; the
# module path in parentheses is the unit's (``_fsdp_unit``)
_FSDP_RANGE = "FSDP::"
_ZERO_GRAD = "Optimizer.zero_grad#"
_INPUT_RANGES = ("enumerate(DataLoader)#",)
_ANNOTATED_PHASES = {"loss": LOSS, "optimizer": OPTIMIZER, "metrics": METRICS}
# A Lightning hook's name ending -> the phase of the ops it runs outside the model's modules
_LIGHTNING_PHASES = (
    ((".training_step", ".validation_step", ".test_step", ".predict_step"), LOSS),
    ((".backward",), BACKWARD),
    ((".optimizer_step", ".optimizer_zero_grad", ".lr_scheduler_step"), OPTIMIZER),
    ((".batch_to_device", "train_dataloader_next", ".on_before_batch_transfer", ".transfer_batch_to_device",
      ".on_after_batch_transfer"), INPUT),
)

Range = Tuple[str, str]  # (kind, what): ("layer", path), ("phase", phase), ("optimizer_step", OPTIMIZER),
#                          ("step", ""), ("iteration", ""), ("module", instance name)


def range_of(name: str) -> Optional[Range]:
    """What a range named ``name`` says, or None for a range that says nothing of its ops."""
    if name.startswith(LAYER_ANNOTATION):
        return "layer", name[len(LAYER_ANNOTATION):]
    if name.startswith(LIGHTNING_MODULE):
        return "layer", torch_module_layer(name.rpartition(": ")[2])
    if name.startswith(PHASE_ANNOTATION):
        phase = _ANNOTATED_PHASES.get(name[len(PHASE_ANNOTATION):])
        return ("phase", phase) if phase else None
    if name.startswith(_OPTIMIZER_STEP):
        return "optimizer_step", OPTIMIZER
    if name.startswith(_ZERO_GRAD):
        return "phase", OPTIMIZER
    if name.startswith(_INPUT_RANGES):
        return "phase", INPUT
    if name.startswith(LIGHTNING_ACTION):
        for endings, phase in _LIGHTNING_PHASES:
            if name.endswith(endings):
                return "phase", phase
        return None
    if name == STEP_ANNOTATION:
        return "step", ""
    if name.startswith(ITERATION_RANGE):
        return "iteration", ""
    if name.startswith(MODULE_RANGE):
        return "module", name[len(MODULE_RANGE):]
    if name.startswith(_FSDP_RANGE):
        return "fsdp", name[len(_FSDP_RANGE):]
    return None


def step_range_class(name: str) -> str:
    """The torch.optim class a step's range names ("Optimizer.step#AdamW.step" -> "AdamW"), else "" (a range of
    another kind, or a name no Python class has)."""
    if not name.startswith(_OPTIMIZER_STEP):
        return ""
    cls, dot, method = name[len(_OPTIMIZER_STEP):].rpartition(".")
    return cls if dot and method == "step" and is_class_name(cls) else ""


def _fsdp_unit(action: str) -> Optional[str]:
    """The module path an FSDP2 range names: "all_gather (encoder.0)" -> "encoder.0" (" [pg=1]" after it,
    a unit of several parameter groups, dropped); None for a range of the root unit ("all_gather")."""
    if action.endswith("]"):
        head, sep, _ = action.rpartition(" [pg=")
        action = head if sep else action
    if not action.endswith(")"):
        return None
    _, sep, unit = action[:-1].rpartition(" (")
    return unit or None if sep else None


def collective_place(ranges: Sequence[Range], in_backward_op: bool) -> Tuple[str, str]:
    """(layer, pass) of a collective call inside ``ranges`` (outermost first): FSDP2's unit, the module its
    innermost ``FSDP::<action> (<module path>)`` range names ("" where none does: DDP's bucket holds
    several modules' gradients, and the trace says not which), and the pass it serves, BACKWARD inside a
    backward op (DDP's all-reduce, launched by AccumulateGrad) or an FSDP range of the backward pass
    (``pre_backward``, ``backward_prefetch``, ``post_backward_reduce``), else FORWARD inside one of the
    forward pass, else ""."""
    fsdp = [what for kind, what in ranges if kind == "fsdp"]
    unit = _fsdp_unit(fsdp[-1]) if fsdp else None  # the innermost: a root unit's names none
    layer = torch_module_layer(unit) if unit else ""
    if in_backward_op or any("backward" in what for what in fsdp):
        return layer, BACKWARD
    return layer, FORWARD if any("forward" in what for what in fsdp) else ""


def is_collective(name: str) -> bool:
    """An op, range or kernel that moves tensors between ranks (phase COLLECTIVE wherever it runs: DDP's
    all-reduce is launched inside a backward op, FSDP's all-gather inside a module's forward)."""
    return name.startswith(_COLLECTIVES)


def is_compiled_graph(name: str) -> bool:
    """An op that runs a ``torch.compile`` graph (``CompiledFunctionBackward`` too): opened, its ops its own rows."""
    return name.startswith(_COMPILED_GRAPHS)


def where(ranges: Sequence[Range], backward: bool) -> Tuple[str, str]:
    """(layer, phase) of an op inside ``ranges`` (outermost first): the innermost layer (else the
    ``nn.Module:`` instance names joined as a path), and the phase of the innermost range that says
    one, a layer's being forward; a backward op is backward wherever it runs."""
    layer = next((what for kind, what in reversed(ranges) if kind == "layer"), "")
    if not layer:
        layer = "/".join(what for kind, what in ranges if kind == "module")
    layer = layer[-MAX_LAYER_PATH:]
    if backward:
        return layer, BACKWARD
    for kind, what in reversed(ranges):
        if kind in ("layer", "module"):
            return layer, FORWARD
        if kind in ("phase", "optimizer_step"):
            return layer, what
    return layer, ""


def in_closure(ranges: Sequence[Range]) -> bool:
    """Whether the innermost range that says a phase is torch's ``Optimizer.step``: there an op autograd
    numbered runs in the optimizer's closure (the update runs with gradients off, so none of its ops is
    numbered): outside the model's modules, the loss (``closure_phase``)."""
    return next((kind == "optimizer_step" for kind, _ in reversed(ranges)
                 if kind in ("layer", "module", "phase", "optimizer_step")), False)


def closure_phase(phase: str, in_a_closure: bool, numbered: bool) -> str:
    """``where``'s phase, corrected for an op of an optimizer's closure (``in_closure``): the loss."""
    return LOSS if in_a_closure and numbered and phase == OPTIMIZER else phase


Timed = Tuple[float, float, str, bool]  # (start, end, phase, has a layer)


def by_iteration(ops: Sequence[Timed], autograd: Sequence[bool]) -> list:
    """The phase of each op of one iteration (ops in any order), the ones ranges placed kept: an op in no
    phase after the last backward op is the optimizer's, else before the first forward op on a layer
    input, else forward where autograd numbered it (``autograd``), else none. (An iteration a profiler
    cut runs the step before's backward and update before its own forward: the update stays the
    optimizer's.)"""
    first_forward = min((start for start, _, phase, layered in ops if phase == FORWARD and layered), default=None)
    last_backward = max((end for _, end, phase, _ in ops if phase == BACKWARD), default=None)
    out = []
    for (start, _, phase, _), numbered in zip(ops, autograd):
        if not phase:
            if last_backward is not None and start >= last_backward:
                phase = OPTIMIZER
            elif first_forward is not None and start < first_forward:
                phase = INPUT
            elif numbered:
                phase = FORWARD
        out.append(phase)
    return out
