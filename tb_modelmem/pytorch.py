"""PyTorch, recorded like Keras: a model's storage by role, and profiled iterations, from a plain loop.

    model, optimizer = ..., torch.optim.AdamW(model.parameters())
    with tb_modelmem.pytorch.profile(model, optimizer, "logs/run1", profile_steps=(3, 4)) as prof:
        for batch in loader:
            loss = model(batch).loss
            loss.backward(); optimizer.step(); optimizer.zero_grad()
            prof.step()

``prof.step()`` ends an iteration, as ``torch.profiler.profile``'s does. A loop of several models (a GAN's
generator and discriminator) passes them as a list or a dict, and their optimizers as a list: their modules are
named under each model's class name (or key), ``Generator/main/0``. What is written to
``log_dir`` (TensorBoard's event files, no TensorFlow):

- ``storage``: every parameter, buffer and optimizer-state tensor by its ``state_dict`` name, shape,
  dtype, bytes and role (``capture.torch_modules``), once the optimizer holds its state (after the
  first iteration) and again when the window closes;
- ``ops``: iterations ``profile_steps`` (1-based, whole iterations: the window opens at the ``step()``
  before the first and closes at the last's), profiled by ``torch.profiler`` with memory and shapes,
  each op on the module it ran in, named as Storage names it, so the peak's weights and optimizer
  slots are Storage's (``tracing.Trace``, ``readers.torch_trace``).

Nothing here stops training: a capture that fails warns. Torch is imported only by the calls that
need it (this process has it). ``breakdown(model, optimizer)`` gives the record itself.
"""

from __future__ import annotations

import os
import warnings
from types import TracebackType
from typing import Any, Optional, Tuple, Type, Union

from tb_modelmem import summary
from tb_modelmem.capture import torch_ranges
from tb_modelmem.capture.torch_modules import as_module, breakdown_of_module, is_module, unwrapped_optimizer
from tb_modelmem.messages import first_line
from tb_modelmem.schema.records import Breakdown, OpTrace
from tb_modelmem.tracing import Trace, step_range
from tb_modelmem.writer import FileWriter

__all__ = ["breakdown", "profile", "Profile"]


def breakdown(model: Any, optimizer: Any = None, scaler: Any = None) -> Breakdown:
    """Every tensor of ``model`` (an ``nn.Module``, or several in a dict or a list: ``as_module``), ``optimizer``
    (or a list of them) and ``scaler`` (a ``GradScaler``) by role and layer, as Storage shows it."""
    return breakdown_of_module(as_module(model), optimizer, scaler)


class Profile:
    """Records ``model``'s storage and profiles iterations ``profile_steps`` of a training loop that calls
    ``step()`` at the end of each iteration (see the module docstring)."""

    def __init__(self, model: Any, optimizer: Any = None, log_dir: Optional[str] = None,
                 profile_steps: Union[None, int, Tuple[int, int]] = (3, 4), scaler: Any = None,
                 writer: Any = None, storage_name: str = "storage", ops_name: str = "ops",
                 trace_dir: Optional[str] = None, memory_every: Optional[int] = 100,
                 memory_name: str = "memory", rank_traces: bool = True) -> None:
        """``log_dir``: where event files go (a ``tb_modelmem.writer.FileWriter`` on it), unless ``writer``
        is given (a ``torch.utils.tensorboard.SummaryWriter``, or any writer ``summary.write`` takes).
        ``profile_steps``: None records storage only. ``trace_dir``: a folder the window's raw Chrome trace
        is also kept in (``<ops_name>_<step>.pt.trace.json``, for Perfetto; not in the log dir, where the
        tab would list it beside the table made of it). ``memory_every``: every N iterations a sample of the
        process's memory (RSS, each CUDA device's allocated bytes) for the Growth view, with a census of the
        live tensors by role (parameters, gradients, optimizer state, other) at the first and the last; None
        turns it off. ``rank_traces``: in a job of several ranks, keep each rank's window trace (False where
        only rank 0 runs a ``Profile``, as the Trainer and Lightning callbacks do)."""
        if log_dir is None and writer is None:
            raise ValueError("tb_modelmem.pytorch.profile needs log_dir= (a folder for event files) or writer=")
        # several models (a GAN's two) as one; Accelerate's optimizer unwrapped
        self.model, self.optimizer, self.scaler = _one_module(model), unwrapped_optimizer(optimizer), scaler
        self.profile_steps = step_range(profile_steps)
        self.storage_name, self.ops_name, self.trace_dir = storage_name, ops_name, trace_dir
        self.memory_every, self.memory_name = memory_every, memory_name
        self.rank, world = _rank()
        # In a job of several ranks, rank 0 writes the event files (as Trainer's and Lightning's loggers do:
        # the ranks would write the same tags); every rank keeps its window's trace in <log_dir>/ranks, one
        # file a rank, which the tab shows as the job's Ranks table.
        self.writes = self.rank == 0
        self.ranks_dir = (os.path.join(log_dir, RANKS_FOLDER) if rank_traces and world > 1 and log_dir is not None
                          else None)
        self._own_writer = FileWriter(log_dir) if writer is None and log_dir is not None and self.writes else None
        self.writer = writer if writer is not None else self._own_writer
        self.step_num = 0  # iterations ended so far
        self.trace: Optional[Trace] = None
        self.record: Optional[OpTrace] = None  # the window's table, once written
        self._storage_written = False
        self._ranges: Any = None  # the modules' ranges (capture.torch_ranges), installed from start to stop

    def start(self) -> "Profile":
        if self.profile_steps is not None:
            self._ranges = _installed_ranges(self.model)
        self._maybe_open()
        return self

    def step(self) -> None:
        """An iteration ended."""
        self.step_num += 1
        if not self._storage_written and self._optimizer_has_state():
            self._storage_written = self.write_storage()
        if self.writes and self.memory_every and (self.step_num == 1 or self.step_num % self.memory_every == 0):
            summary.memory(self.memory_name, self.step_num, census=self.step_num == 1, writer=self.writer)
        if self.trace is not None:
            if self.profile_steps is not None and self.step_num >= self.profile_steps[1]:
                self._close()
            else:
                self.trace.end_iteration()
        self._maybe_open()

    def stop(self) -> None:
        """Ends the window early (what it profiled is written) and closes the writer this made."""
        if self.trace is not None:
            self._close()
        if not self._storage_written:
            self._storage_written = self.write_storage()
        if self.writes and self.memory_every and self.step_num > 1:
            summary.memory(self.memory_name, self.step_num, census=True, label="end", writer=self.writer)
        if self._ranges is not None:
            self._ranges.remove()
            self._ranges = None
        if self._own_writer is not None:
            self._own_writer.close()

    def write_storage(self) -> bool:
        """Writes the storage breakdown now, at the current step (on rank 0 of a job of several)."""
        if not self.writes:
            return True
        return summary.write(self.storage_name, lambda: breakdown(self.model, self.optimizer, self.scaler),
                             self.step_num, writer=self.writer)

    def _maybe_open(self) -> None:
        if self.profile_steps is None or self.trace is not None or self.step_num + 1 != self.profile_steps[0]:
            return
        keep, keep_as = self.trace_dir, None
        if self.ranks_dir is not None:  # <worker>.<number>.pt.trace.json, as tensorboard_trace_handler names
            keep, keep_as = self.ranks_dir, f"rank{self.rank}.{self.profile_steps[1]}.pt.trace.json"
        self.trace = Trace(self.ops_name, step=self.profile_steps[1], model=self.model, optimizer=self.optimizer,
                           writer=self.writer, keep_trace=keep, keep_as=keep_as, write=self.writes)
        if not self.trace.start():
            self.trace = None

    def _close(self) -> None:
        trace, self.trace = self.trace, None
        assert trace is not None
        self.record = trace.stop()
        try:
            self.write_storage()  # the state as the window left it: what its peak held
        except Exception as e:  # write() warns itself; anything else must not stop training either
            warnings.warn(f"tb_modelmem: could not record storage: {first_line(e)}", RuntimeWarning, stacklevel=3)

    def _optimizer_has_state(self) -> bool:
        optimizers = self.optimizer if isinstance(self.optimizer, (list, tuple)) else [self.optimizer]
        return all(o is None or len(getattr(o, "state", {})) > 0 for o in optimizers)

    def __enter__(self) -> "Profile":
        return self.start()

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc is not None and self.trace is not None:
            from tb_modelmem.readers import oom

            if oom.is_oom(exc):  # the step that ran out is the one worth seeing: recorded as it was
                summary.oom("oom", exc, self.step_num + 1, where="tb_modelmem.pytorch.profile", writer=self.writer)
        self.stop()


RANKS_FOLDER = "ranks"  # under the log dir: each rank's window trace, a job of several ranks


def _rank() -> Tuple[int, int]:
    """(this process's rank, the world size) of an initialized ``torch.distributed`` job, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _one_module(model: Any) -> Any:
    """``as_module``, which must not stop training: where it fails, the model as given, with a warning."""
    try:
        return as_module(model)
    except Exception as e:
        warnings.warn(f"tb_modelmem: the models could not be joined into one: {first_line(e)}", RuntimeWarning,
                      stacklevel=3)
        return model


def _installed_ranges(model: Any) -> Any:
    """The ranges naming ``model``'s modules, installed before the model is compiled so that they are compiled
    with it (``capture.torch_ranges``); None, with a warning, where they cannot be (ops then on no module)."""
    try:
        return torch_ranges.install(model) if is_module(model) else None
    except Exception as e:  # naming modules must not stop training
        warnings.warn(f"tb_modelmem: ops will be on no module: {first_line(e)}", RuntimeWarning, stacklevel=3)
        return None


def profile(model: Any, optimizer: Any = None, log_dir: Optional[str] = None,
            profile_steps: Union[None, int, Tuple[int, int]] = (3, 4), scaler: Any = None,
            writer: Any = None, trace_dir: Optional[str] = None, memory_every: Optional[int] = 100) -> Profile:
    """A ``Profile`` to use as a context manager around a training loop (see the module docstring)."""
    return Profile(model, optimizer, log_dir, profile_steps, scaler, writer, trace_dir=trace_dir,
                   memory_every=memory_every)
