"""Which breakdown a traced step is read with: one rule for the CLI (``readers.logdir.read_run``) and the tab
(``plugin.ModelMemPlugin``), so that both join a run's ops with the same variables.

A run offers two kinds of breakdown: the ones tb_modelmem wrote as summaries while it trained (the variables as
the process held them, at a step), and checkpoints saved in its folder (a file, or a Trainer, Accelerate or
``torch.distributed.checkpoint`` folder), which have no step. The rule, in order:

1. the summaries, nearest the trace's step (a trace with no step, a profiler's file: each tag's newest);
   checkpoints only where no summary can be read;
2. of those as near, the first that names an optimizer (a weights-only export beside a ``torch.save`` of the
   optimizer says less, as does a summary written before the optimizer made its state);
3. else the newest written, then by name.

One that cannot be read is passed over; the next in that order is taken.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Callable, Iterable, List, Optional, Sequence, Set, Tuple, TypeVar

from tb_modelmem.readers.dcp import METADATA as DCP_METADATA
from tb_modelmem.readers.dcp import SUFFIX as DCP_SUFFIX
from tb_modelmem.readers.safetensors import is_safetensors_name
from tb_modelmem.readers.torch_checkpoint import is_checkpoint_name
from tb_modelmem.readers.torch_snapshot import is_snapshot_name
from tb_modelmem.readers.torch_trace import is_trace_name
from tb_modelmem.readers.trainer_folder import folder_kind
from tb_modelmem.schema.names import newest_first_key

Record = TypeVar("Record")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A breakdown a run offers: a summary at a step, or a checkpoint (``step`` None)."""

    tag: str  # the summary's tag, or the checkpoint's name as its reader names it
    step: Optional[int]
    wall_time: float  # when it was written: the event's time, the file's modification time


def is_checkpoint_file(name: str) -> bool:
    """A file beside a trace that can be its breakdown: ``torch.save`` (``.pt``, ``.pth``, ``.ckpt``, transformers'
    ``pytorch_model*.bin``), safetensors."""
    return is_checkpoint_name(name) or is_safetensors_name(name)


def checkpoint_folder_kind(names: Sequence[str]) -> Optional[str]:
    """What a folder holding the files ``names`` is when it is one checkpoint, read whole (Trainer's,
    Accelerate's, ``torch.distributed.checkpoint``'s); None for any other folder, and for a run's own folder
    (event files, a profiler's traces or a memory snapshot beside a plain loop's ``optimizer.pt`` and
    ``model.safetensors``: those are the run's checkpoints, each read alone)."""
    if any("tfevents" in n or is_trace_name(n) or is_snapshot_name(n) for n in names):
        return None
    hugging_face = folder_kind(names)
    if hugging_face:
        return hugging_face
    if DCP_METADATA in names and any(n.endswith(DCP_SUFFIX) for n in names):
        return "torch.distributed.checkpoint"
    return None


def ranked(candidates: Iterable[Candidate], trace_step: Optional[int]) -> List[List[Candidate]]:
    """The candidates in tiers, best first (rules 1 and 3 above): each tier's candidates are as near the trace's
    step, newest first (with no step to be near, a tag written at many steps is weighed once, at its newest)."""
    def tier(c: Candidate) -> Tuple[int, int]:
        if c.step is None:
            return 1, 0
        return 0, abs(c.step - trace_step) if trace_step is not None else 0

    newest = sorted(candidates, key=lambda c: (newest_first_key(c.wall_time, c.tag), c.step or 0), reverse=True)
    if trace_step is None:
        weighed: Set[str] = set()
        kept = []
        for c in newest:
            if c.step is None or c.tag not in weighed:
                kept.append(c)
                weighed.add(c.tag)
        newest = kept
    return [list(group) for _, group in itertools.groupby(sorted(newest, key=tier), key=tier)]


def choose(candidates: Iterable[Candidate], trace_step: Optional[int],
           read: Callable[[Candidate], Optional[Record]],
           names_optimizer: Callable[[Record], bool]) -> Optional[Tuple[Candidate, Record]]:
    """The candidate the rule picks and its record; ``read`` gives a candidate's record, None where it cannot be
    read (what it raises, a record still being built, goes to the caller). None where none can be read."""
    for tier in ranked(candidates, trace_step):
        first: Optional[Tuple[Candidate, Record]] = None
        for candidate in tier:
            record = read(candidate)
            if record is None:
                continue
            if names_optimizer(record):
                return candidate, record
            first = first or (candidate, record)
        if first is not None:
            return first
    return None
