"""The names every stage shares, each defined once: variable roles, where a byte figure comes
from, the phases of a training step, the categories of a step's peak, and how names sort. Nothing of
this package imported: the backend, the readers, live capture and the frontend's tests read them here.
"""

import re
from typing import Tuple

# Variable roles. Every stored byte belongs to exactly one of these.
WEIGHT = "weight"  # trainable parameters
NON_TRAINABLE = "non_trainable"  # model state: BatchNorm moving stats, ...
OPTIMIZER_SLOT = "optimizer_slot"  # Adam m/v, momentum, accumulators, ...
OTHER = "other"  # counters, loss-scale state, learning-rate variables, ...
ROLES = (WEIGHT, NON_TRAINABLE, OPTIMIZER_SLOT, OTHER)

# Where an op's byte figure comes from.
MEASURED = "measured"  # reported by the allocator / step stats
DERIVED = "derived"  # output shape x dtype size, from the traced graph
UNKNOWN_BYTES = "unknown"  # neither: no graph, or a dimension known only at run time (never shown as 0)

# What part of a training step an op belongs to (decided by ``tb_modelmem.rules.join``).
FORWARD = "forward"  # the model's forward pass
BACKWARD = "backward"  # gradients (tf.GradientTape / TF1 gradients/ scopes)
OPTIMIZER = "optimizer"  # applying gradients: slot and weight updates
LOSS = "loss"  # the loss and its reduction
METRICS = "metrics"  # metric state updates (accuracy, mean loss trackers)
INPUT = "input"  # the batch entering the step (iterator, feeds)
EXECUTOR = "executor"  # function call plumbing (_Arg, _Retval, NoOp, call ops) and the step's summaries
COLLECTIVE = "collective"  # moving tensors between devices: all-reduce, all-gather, reduce-scatter, send/recv
PHASES = (FORWARD, BACKWARD, OPTIMIZER, LOSS, METRICS, INPUT, EXECUTOR, COLLECTIVE)
# The op type of an XLA step's kernel time no rule tied to an instruction (a command buffer's kernels in a
# profile without node ids): in no phase and on no layer, its own row.
UNATTRIBUTED_TYPE = "(not attributed)"

# What a byte in use at a step's peak is (the ops view's peak_by_category keys).
WEIGHTS_CATEGORY = "weights"
NON_TRAINABLE_CATEGORY = "non_trainable"
OPTIMIZER_SLOTS_CATEGORY = "optimizer_slots"
OTHER_STATE_CATEGORY = "other_state"  # variables of role OTHER owned by no layer: counters, loss scale, metric state
GRADIENTS_CATEGORY = "gradients"
ACTIVATIONS_CATEGORY = "activations"  # forward outputs still live (kept for the backward pass)
OPTIMIZER_TEMPORARIES_CATEGORY = "optimizer_temporaries"
INPUTS_CATEGORY = "inputs"
TEMPORARIES_CATEGORY = "temporaries"  # scratch space, loss and metric values, executor buffers
# What a count that holds memory from before the trace (a TF2 profile's, BFC's) has beyond the variables and
# the step's own buffers: what earlier steps allocated and this one frees, what stays in use all through the
# trace (the chunks the allocator handed the variables past their size, buffers the runtime keeps), and the
# rest, which no event names.
EARLIER_STEPS_CATEGORY = "earlier_steps"
HELD_CATEGORY = "held_between_steps"
UNATTRIBUTED_CATEGORY = "unattributed"
BEFORE_TRACE_CATEGORIES = (EARLIER_STEPS_CATEGORY, HELD_CATEGORY, UNATTRIBUTED_CATEGORY)
# What-if only: how far the middle of the allocator band is from the traced chunks scaled (signed:
# ``rules.projection._chunking``)
CHUNKING_CATEGORY = "allocator_chunking"
# What if's row under the peak for a CUDA caching allocator: what it would reserve (``rules.caching_allocator``)
RESERVED_ROW = "reserved"
PEAK_CATEGORIES = (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY, OTHER_STATE_CATEGORY,
                   GRADIENTS_CATEGORY, ACTIVATIONS_CATEGORY, OPTIMIZER_TEMPORARIES_CATEGORY, INPUTS_CATEGORY,
                   TEMPORARIES_CATEGORY) + BEFORE_TRACE_CATEGORIES
# Categories of buffers allocated inside a trace window; BEFORE_WINDOW: allocated before it, seen being freed.
STEP_CATEGORIES = (GRADIENTS_CATEGORY, ACTIVATIONS_CATEGORY, OPTIMIZER_TEMPORARIES_CATEGORY, INPUTS_CATEGORY,
                   TEMPORARIES_CATEGORY, WEIGHTS_CATEGORY, OPTIMIZER_SLOTS_CATEGORY)
BEFORE_WINDOW = "before_window"
# A buffer a variable-assigning op made that became the variable's own once its old buffer was freed
# (copy-on-write: the update wrote a copy while the old value was still read): resident state from then on.
MOVED_STATE = "moved_state"

# The variables, which stay resident between steps, by the role the Storage view gives them, in the
# order the peak split and the Timeline's stacks take them from a breakdown.
RESIDENT_CATEGORIES = (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY, OTHER_STATE_CATEGORY)
# What only a step allocates, never resident between steps.
STEP_ONLY_CATEGORIES = (GRADIENTS_CATEGORY, ACTIVATIONS_CATEGORY, OPTIMIZER_TEMPORARIES_CATEGORY, INPUTS_CATEGORY,
                        TEMPORARIES_CATEGORY)

# Where a trace comes from (``OpTrace.source``) when a rule depends on it: PyTorch's own traces place each op
# on the module it ran in by the ranges around it (``rules.phases``), where a TensorFlow trace's ops are
# joined to layers by name and dataflow.
TORCH_PROFILER_SOURCE = "torch profiler"
TORCH_SNAPSHOT_SOURCE = "torch memory snapshot"
PLACED_BY_RANGES = (TORCH_PROFILER_SOURCE, TORCH_SNAPSHOT_SOURCE)
# Where a breakdown comes from (``Breakdown.source``) when it is PyTorch's: What if recomputes its optimizer's
# state as torch.optim keeps it (``rules.torch_optimizers``), not as Keras builds it
TORCH_MODULE_SOURCE = "pytorch"
TORCH_CHECKPOINT_SOURCE = "pytorch checkpoint"
SAFETENSORS_SOURCE = "safetensors"
TRAINER_FOLDER_SOURCE = "transformers Trainer checkpoint"
ACCELERATE_FOLDER_SOURCE = "Accelerate save_state folder"
DCP_SOURCE = "torch.distributed.checkpoint"
TORCH_BREAKDOWN_SOURCES = (TORCH_MODULE_SOURCE, TORCH_CHECKPOINT_SOURCE, SAFETENSORS_SOURCE, TRAINER_FOLDER_SOURCE,
                           ACCELERATE_FOLDER_SOURCE, DCP_SOURCE)
PLANNED_OUTPUTS = " outputs"  # an XLA plan's outputs, one buffer: "<program> outputs" (readers.xla); its state
DONATED_OUTPUTS = " outputs (state donated)"  # given back in place, where a parameter's buffer is an output
JAX_BREAKDOWN_SOURCES = ("flax.nnx", "equinox", "jax")  # capture.jax_pytrees: JAX without Keras, optax's state
UNKNOWN_DIM = -1  # a dimension capture could not know (TF1 variable of unknown shape): no bytes claimed
OTHER_LINE = "(other)"  # a census list's summed tail: one stable name, so samples with a different tail compare


MAX_OPTIMIZER_CLASSES = 8  # the optimizer classes a trace keeps: a job steps a few; a crafted trace names thousands
MAX_POSITION_TABLES = 16  # the position tables a trace keeps: a model has one or two (``OpTrace.position_tables``)


def is_class_name(name: str) -> bool:
    """Whether ``name`` is one a Python class has (ASCII, as torch.optim's and people's are; at most 128
    characters): what a trace's range says of a class is kept only then."""
    return isinstance(name, str) and 0 < len(name) <= 128 and name.isascii() and name.isidentifier()


def natural_key(name: str) -> list:
    """A sort key that counts as people do: ``h.2`` before ``h.10``, ``rank2`` before ``rank10``, ``dense_2``
    before ``dense_10``. Runs of ASCII digits compare as numbers (by length without leading zeros, then
    digit by digit: no ``int()``, which a run past 4,300 digits or a ``²`` would make raise); the split keeps
    text and numbers at alternate places, so two keys never compare a number with text."""
    parts = re.split(r"([0-9]+)", name)
    return [(len(part.lstrip("0")), part.lstrip("0"), part) if i % 2 else part for i, part in enumerate(parts)]


def newest_first_key(mtime: float, name: str) -> Tuple[float, list]:
    """A sort key (``reverse=True``) that puts a run's newest file first, by its time, then by its name counted as
    people do (a remote file has no time; a profiler trace's name holds its time, a Lightning or Trainer
    checkpoint's its step): the CLI reads a run's newest trace that holds ops, and the CLI and the tab alike its
    newest checkpoint that names an optimizer."""
    return mtime, natural_key(name)
