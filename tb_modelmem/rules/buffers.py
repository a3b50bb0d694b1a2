"""What a buffer allocated during a traced step is: its peak category (``step_category``) and whether it
carries the step's batch (``carries_batch``). One rule for every reader, so a byte is categorised the
same way whatever recorded it (RunMetadata, an XSpace, an XLA program, a memory profile, a torch trace)."""

from __future__ import annotations

from typing import AbstractSet, Optional, Tuple

from tb_modelmem.schema.names import (
    ACTIVATIONS_CATEGORY,
    BACKWARD,
    EXECUTOR,
    FORWARD,
    GRADIENTS_CATEGORY,
    INPUT,
    INPUTS_CATEGORY,
    LOSS,
    METRICS,
    OPTIMIZER,
    OPTIMIZER_SLOTS_CATEGORY,
    OPTIMIZER_TEMPORARIES_CATEGORY,
    TEMPORARIES_CATEGORY,
    WEIGHTS_CATEGORY,
)

_SCRATCH_REGIONS = frozenset({"temp", "scratch", "dynamic"})


def step_category(phase: str, region: str = "") -> str:
    """The category of a buffer allocated during the step, from the phase of the op that made it
    (``rules.join``) and its region: one rule for every source."""
    if region in _SCRATCH_REGIONS:
        return TEMPORARIES_CATEGORY
    if region == "persist":  # a variable made during the step (an optimizer building its slots)
        return OPTIMIZER_SLOTS_CATEGORY if phase == OPTIMIZER else WEIGHTS_CATEGORY
    return {FORWARD: ACTIVATIONS_CATEGORY, LOSS: ACTIVATIONS_CATEGORY, BACKWARD: GRADIENTS_CATEGORY,
            OPTIMIZER: OPTIMIZER_TEMPORARIES_CATEGORY, INPUT: INPUTS_CATEGORY, METRICS: TEMPORARIES_CATEGORY,
            EXECUTOR: TEMPORARIES_CATEGORY}.get(phase, TEMPORARIES_CATEGORY)


def carries_batch(shape: str, batch: Optional[int], weights: AbstractSet[Tuple[int, ...]] = frozenset()) -> bool:
    """Whether a buffer of ``shape`` ("[32,28,28,32]") holds one slice per sample of a ``batch``: its
    first dimension is the batch, in a buffer of two or more (a bias of as many units is no batch).
    Given the model's ``weights`` shapes: never a buffer shaped like a weight (nor its transpose), and
    also a first dimension that is a multiple of the batch (a sequence model's [batch x time, units]).
    What-if scales exactly these bytes with the batch (``rules.projection``)."""
    if not batch or not shape.startswith("[") or ";" in shape:
        return False
    texts = shape[1:-1].split(",")
    if len(texts) < 2 or not all(t.isdigit() for t in texts):
        return False
    dims = tuple(map(int, texts))
    while len(dims) > 2 and dims[0] == 1:  # XLA's [1,32,200,4,256]: a unit dimension in front of the batch
        dims = dims[1:]
    if dims in weights or dims[::-1] in weights:
        return False  # a weight's gradient or update, whatever its first dimension
    return dims[0] == batch or (bool(weights) and dims[0] % batch == 0)
