"""What a buffer allocated during a traced step is: its peak category (``step_category``, refined by how
long it lived where a reader knows: ``lived_categories``), whether it
carries the step's batch (``carries_batch``), how many times its sequence length (``sequence_power``), and
what it would be under a Keras mixed-precision policy (``under_mixed_policy``).
One rule for every reader, so a byte is categorised the same way whatever recorded it (RunMetadata, an
XSpace, an XLA program, a memory profile, a torch trace)."""

from __future__ import annotations

import bisect
import dataclasses
import re
from typing import AbstractSet, Any, Dict, Iterable, List, Optional, Sequence, Tuple

from tb_modelmem.rules.join import strip_calls
from tb_modelmem.schema.dtypes import item_bytes
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
    UNATTRIBUTED_CATEGORY,
    WEIGHTS_CATEGORY,
)

_SCRATCH_REGIONS = frozenset({"temp", "scratch", "dynamic"})
# What Keras and KerasHub compute in float32 under a mixed policy, by default names in an op's scope:
# normalization (layer_normalization_4, batch_normalization, KerasHub's self_attention_layernorm), softmax
# (KerasHub's attention_softmax): "functional/layer_normalization_4_1/mul"; and the product of an embedding
# table (Keras' Embedding, its ReversibleEmbedding, KerasHub's token_embedding do not autocast the table, so a
# tied LM head's logits stay float32, as a real mixed_bfloat16 Llama step's `token_embedding_1/Tensordot/
# MatMul` [1024,8000] is; its lookup is cast to 16 bits in the layer, and a rotary or a position embedding
# autocasts).
_FLOAT32_SCOPE = re.compile(r"(?:^|/)(?:[a-z_]*(?:normalization|norm|softmax)(?:_\d+)*/"
                            r"|(?:token_|reversible_)?embedding(?:_\d+)*/(?:[^/]+/)*(?:Tensordot|MatMul|[Ee]insum))")
# What a buffer is under a mixed policy, besides 16-bit (``under_mixed_policy``).
KEEPS_WIDTH = "keeps_width"
LOSS_COPY = "loss_copy"
CAST_COPY = "cast_copy"  # a mixed step's cast between float widths: under float32 it is not made at all
_CAST = re.compile(r"(?:^|/)Cast(?:_\d+)?$")  # TensorFlow's Cast op, as a Keras layer's autocast names it
_SIXTEEN_BIT = ("bfloat16", "float16", "half")
_MIXED_SHARE = 0.25  # of the forward pass's floating-point outputs 16-bit: a mixed policy's step (float32 makes none)


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


@dataclasses.dataclass(frozen=True)
class Lived:
    """A buffer a step allocated: the phase of what made it, its region, when it was allocated and freed
    (None: alive at the end), in one clock (an event index or a time)."""

    phase: str
    start: float
    end: Optional[float]
    region: str = ""


def lived_categories(buffers: Sequence[Lived], unplaced: str = UNATTRIBUTED_CATEGORY) -> List[str]:
    """Each buffer's category (in allocation order), where its lifetime is known (a PyTorch trace's and a
    memory snapshot's allocator events): as ``step_category``, except that a forward buffer freed before the
    next backward pass starts was no activation (nothing saved it for the backward pass) and a backward
    buffer freed within its pass no gradient (an intermediate one): both temporaries. A backward pass runs
    from its first allocation to its last while no other phase allocates between. A buffer no phase names
    is ``unplaced``: unattributed where nothing says who made it (a snapshot's frames in no known code);
    a reader that knows the op that made it says what that makes it."""
    passes: List[List[float]] = []  # [first, last] allocation of each backward pass
    pass_of: List[int] = []  # each buffer's pass (-1: none)
    in_pass = False
    for buffer in buffers:
        if buffer.phase != BACKWARD:
            in_pass = False
            pass_of.append(-1)
            continue
        if in_pass:
            passes[-1][1] = buffer.start
        else:
            passes.append([buffer.start, buffer.start])
            in_pass = True
        pass_of.append(len(passes) - 1)
    starts = [p[0] for p in passes]
    categories = []
    for buffer, own_pass in zip(buffers, pass_of):
        end = buffer.end if buffer.end is not None else float("inf")
        known = buffer.phase or buffer.region == "persist"  # state the model or optimizer made is known
        category = step_category(buffer.phase, buffer.region) if known else unplaced
        if buffer.phase == BACKWARD and buffer.region not in _SCRATCH_REGIONS and end <= passes[own_pass][1]:
            category = TEMPORARIES_CATEGORY
        elif buffer.phase == FORWARD and buffer.region not in _SCRATCH_REGIONS and passes:
            following = bisect.bisect_right(starts, buffer.start)  # the first pass after it
            if following == len(starts) or end <= starts[following]:
                category = TEMPORARIES_CATEGORY
        categories.append(category)
    return categories


def batch_of(dims: Sequence[Any]) -> Optional[int]:
    """The batch an input's shape says: its first dimension, known and positive, in a shape of two or more
    (a step's input is [batch, ...]; a 1-D one is labels or a scalar). Each reader says which input to ask."""
    if len(dims) < 2:
        return None
    first = dims[0]
    if isinstance(first, str):
        first = int(first) if first.isascii() and first.isdigit() and len(first) <= 18 else None
    return first if isinstance(first, int) and not isinstance(first, bool) and first > 0 else None


def weight_shaped(dims: Tuple[int, ...], weights: AbstractSet[Tuple[int, ...]]) -> bool:
    """Whether ``dims`` are a weight's shape or its transpose (a weight's gradient, update or copy)."""
    return dims in weights or dims[::-1] in weights


def carries_batch(shape: str, batch: Optional[int], weights: AbstractSet[Tuple[int, ...]] = frozenset()) -> bool:
    """Whether a buffer of ``shape`` ("[32,28,28,32]") holds one slice per sample of a ``batch``: its
    first dimension is the batch, in a buffer of two or more (a bias of as many units is no batch).
    Given the model's ``weights`` shapes: never a buffer shaped like a weight (nor its transpose), and
    also a first dimension that is a multiple of the batch (a sequence model's [batch x time, units]).
    What-if scales exactly these bytes with the batch (``rules.projection``)."""
    if not batch:
        return False
    dims = _dims(shape)
    if len(dims) < 2:
        return False
    if weight_shaped(dims, weights):
        return False  # a weight's gradient or update, whatever its first dimension
    return dims[0] == batch or (bool(weights) and dims[0] % batch == 0)


def sequence_power(shape: str, batch: Optional[int], seq: Optional[int]) -> int:
    """How many times a batch-carrying buffer of ``shape`` holds the sequence length ``seq``: 1 for
    [batch, seq, d] or a flattened [batch x seq, vocab], 2 for attention scores [batch, heads, seq, seq]
    (what grows with the square of the length), 0 for none. The caller says the buffer carries the batch
    (``carries_batch``) and that ``seq`` is no other dimension of the model (``rules.projection``)."""
    if not batch or not seq:
        return 0
    dims = _dims(shape)
    if len(dims) < 2:
        return 0
    rest = dims[1:]
    power = sum(d == seq for d in rest)
    if dims[0] != batch and dims[0] % (batch * seq) == 0:  # [batch x seq, ...] (and [batch x heads x seq, ...])
        power += 1
    elif seq_first(dims, batch, seq) and dims[0] == seq:  # [seq, batch, d]: the length in front
        power += 1
    return min(power, 2)


def seq_first(dims: Sequence[int], batch: int, seq: Optional[int]) -> bool:
    """Whether ``dims`` hold the sequence length then the batch side by side: a time-first layout, as
    ``nn.MultiheadAttention`` works in whatever its module's ``batch_first`` ([seq, batch, d]; its packed
    projections [3, seq, batch, d])."""
    return bool(seq) and seq != batch and any(a == seq and b == batch for a, b in zip(dims, dims[1:]))


def once_per_token(count: int, per_step: int, seq: Optional[int]) -> bool:
    """Whether an op that ran (or allocated) ``count`` times in a window, where an op run once a training step
    runs ``per_step`` times, runs once per token of ``seq``: a loop over the sequence (a Python loop of
    recurrent cells, a TensorFlow ``while``), its count a positive multiple of the length times ``per_step``.
    Not below ``SHORTEST_LOOP`` tokens, where a step's few calls or an op's several outputs could read as
    a loop's turns: the one rule every reader asks."""
    return seq is not None and seq >= SHORTEST_LOOP and count > 0 and count % (seq * per_step) == 0


SHORTEST_LOOP = 4  # tokens


def carried(shape: str, batch: Optional[int], weights: AbstractSet[Tuple[int, ...]] = frozenset(),
            seq: Optional[int] = None) -> Tuple[bool, int]:
    """(Whether a buffer of ``shape`` carries the batch, how many times it holds the sequence length): the
    two rules above as every reader asks them of a buffer; and, the length known, a time-first buffer
    (``seq_first``: nn.MultiheadAttention's [3, seq, batch, d] packed projections, where the batch is no
    first dimension; a new user's nn.TransformerEncoder read -5.1% at 2x the batch, -13.4% at 4x and 4x the
    length without it). But not a buffer with a row per position, [seq, d] (a rotary embedding's cos and sin, [1,
    64, 24]), whose length is a multiple of the batch by chance: a flattened [batch x time, units] is seq x batch
    long (a LoRA Mistral at batch 4 read +0.2% more at 4x the batch). At batch 1 one shape says both, and a sample's
    [1, seq, d] is the step's: it carries the batch."""
    dims = _dims(shape)
    positions = bool(seq) and (batch or 0) > 1 and seq != batch and len(dims) == 2 and dims[0] == seq  # at batch 1,
    # [1, seq, d] is a sample's too
    batch_carried = (carries_batch(shape, batch, weights) and not positions) or (
        bool(batch) and len(dims) >= 3 and seq_first(dims, batch or 0, seq) and not weight_shaped(dims, weights))
    return batch_carried, sequence_power(shape, batch, seq) if batch_carried else 0


def input_carried(shape: str, batch: Optional[int], seq: Optional[int] = None) -> Tuple[bool, int]:
    """``carried`` for a step's input: it is the batch, whatever its shape (a [batch] vector of labels too,
    which ``carries_batch`` would not tell from a bias)."""
    return True, sequence_power(shape, batch, seq)


def forward_bytes_by_width(phases: Iterable[str], dtypes: Iterable[str], sizes: Iterable[int]) -> Dict[int, int]:
    """Bytes of the forward pass's op outputs (``sizes``: 0 for a temporary), by element width, floating-point
    only. Outputs, not every allocation: a bfloat16 MatMul on a CPU without AVX-512 allocates float32 copies of
    its operands and output (TensorFlow's BaseBatchMatMulOp), and a variable's read allocates nothing (a mixed
    policy's float32 weights do not count)."""
    held: Dict[int, int] = {}
    for phase, dtype, size in zip(phases, dtypes, sizes):
        width = item_bytes(dtype) if phase == FORWARD and dtype.startswith(("float", "bfloat", "half")) else 0
        if width and size:
            held[width] = held.get(width, 0) + (size or 0)
    return held


def mixed_step(forward_by_width: Dict[int, int]) -> bool:
    """Whether a step ran under a mixed policy, from ``forward_bytes_by_width``: a quarter or more of its forward
    pass's outputs 16-bit (a float32 policy makes none). Not most: a mixed policy's norms, loss and tied logits
    stay float32 (KerasHub's GPT-2 under mixed_bfloat16: 56% of them bfloat16; a tied head's logits over 8000
    words leave 31%)."""
    total = sum(forward_by_width.values())
    return bool(total) and forward_by_width.get(2, 0) >= _MIXED_SHARE * total


def under_mixed_policy(ops: Sequence[str], phases: Sequence[str], batch: Sequence[bool],
                       dtypes: Sequence[str], sizes: Sequence[int]) -> Dict[int, str]:
    """What the batch-carrying buffers of a step would be under another Keras precision policy besides its own
    width, by index among the step's allocations (``ops``, their ``phases``, whether each carries the batch, their
    ``dtypes`` and output ``sizes``, in time order). A float32 step (not ``mixed_step``): KEEPS_WIDTH for what a mixed
    policy leaves as traced: integers and booleans (a mask, an index), the loss's buffers (Keras computes a loss
    in float32), a normalization layer's (``ops.layer_normalization``, ``moments``, BatchNormalization,
    KerasHub's layer norms: float32, forward and backward), a softmax layer's (KerasHub's attention softmax) and
    an embedding table's product (a tied LM head's logits); LOSS_COPY for the model's output (the last
    floating-point batch-carrying forward buffer: the output depends on every other), which the loss reads as a
    float32 copy beside its 16-bit self (none where it is float32 already). The output is a layer's: an op in no
    scope (TensorFlow's "sub_2", a gradient's helper it hoists into the forward pass) is not it. Layers are known
    by Keras' and KerasHub's default names: one its user renamed counts as 16-bit. A mixed step, asked float32:
    its dtypes say what is wide already (KEEPS_WIDTH: every buffer not 16-bit), and CAST_COPY for what its casts
    made, which a float32 step does not make (KerasHub's GPT-2 under mixed_bfloat16, asked float32, against real
    float32 runs: -15.7% read as a float32 step, +3.6 ... +4.9% with its 16-bit buffers doubled, -2.2 ... -4.4%
    with its casts not made too; a tied-head LM +10.3 ... +17.6% so, -2.7 ... -3.8% now)."""
    floating = [not dtype or dtype.startswith(("float", "bfloat", "half")) for dtype in dtypes]
    if mixed_step(forward_bytes_by_width(phases, dtypes, sizes)):
        casts = [bool(_CAST.search(strip_calls(op))) for op in ops]
        return {i: CAST_COPY if cast else KEEPS_WIDTH
                for i, (cast, carries, dtype) in enumerate(zip(casts, batch, dtypes))
                if carries and (cast or dtype not in _SIXTEEN_BIT)}
    out = {i: KEEPS_WIDTH for i, (op, phase, carries, real) in enumerate(zip(ops, phases, batch, floating))
           if carries and (not real or phase == LOSS or _FLOAT32_SCOPE.search(op))}
    forward = [i for i, (op, phase, carries, real) in enumerate(zip(ops, phases, batch, floating))
               if carries and real and phase == FORWARD and "/" in strip_calls(op)]
    if forward and forward[-1] not in out:
        out[forward[-1]] = LOSS_COPY
    return out


def input_sequence(dims: Sequence[Optional[int]], dtype: str) -> Optional[int]:
    """Tokens per sample of a step's input of ``dims`` and ``dtype``, if it is a sequence: token ids
    [batch, seq] (integers), or vectors [batch, seq, features] whose two inner sizes differ (a grayscale
    image's [batch, 28, 28] is no sequence); None otherwise (an image, a [batch, features] table)."""
    if len(dims) == 2 and dtype.startswith(("int", "uint")):
        return dims[1] or None
    if len(dims) == 3 and dims[1] != dims[2]:
        return dims[1] or None
    return None


def format_shape(dims: Iterable[Optional[int]]) -> str:
    """"[1,28,28,32]" (unknown dimensions as "?"): how every reader writes a buffer's shape, as ``_dims`` reads it."""
    return "[" + ",".join("?" if d is None or d < 0 else str(d) for d in dims) + "]"


def shape_dims(shape: str) -> Tuple[int, ...]:
    """A shape's dimensions, () when it is not one fully known shape (see ``_dims``)."""
    return _dims(shape)


def _dims(shape: str) -> Tuple[int, ...]:
    """A shape's dimensions ("[32,28,28,32]"), without a unit dimension in front of the batch (XLA's
    [1,32,200,4,256]); () when it is not one fully known shape."""
    if not shape.startswith("[") or ";" in shape:
        return ()
    texts = shape[1:-1].split(",")
    if not all(t.isascii() and t.isdigit() and len(t) <= 18 for t in texts):
        return ()
    dims = tuple(map(int, texts))
    while len(dims) > 2 and dims[0] == 1:
        dims = dims[1:]
    return dims
