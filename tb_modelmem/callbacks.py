"""Keras callback that records where a model's memory goes, in the manner of
``keras.callbacks.TensorBoard``: give it the same ``log_dir``.

The breakdown is written once the optimizer has built its slots (after the
first train batch) and again only when the set of variables changes. A new or
rebuilt optimizer (recompiling after unfreezing layers) is seen at the next
batch; any other change at the end of the epoch, since comparing every
variable costs milliseconds for a ResNet50. A failed capture warns and
training goes on.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any, Optional, Tuple, Union

import keras
import tensorflow as tf

from tb_modelmem import summary
from tb_modelmem.tracing import Trace


class MemoryCallback(keras.callbacks.Callback):
    """Writes a ``records.Breakdown`` under tag ``name`` to ``log_dir/subdir``.

    ``subdir`` defaults to "train", the run the TensorBoard callback writes
    to, so the Storage tab shows up next to the training scalars. The step
    is the number of train batches seen by this callback (across ``fit`` calls).

    ``profile_steps=(10, 12)`` (or ``10``) profiles those train batches (1-based, as
    counted by the step) with the TF profiler and writes their per-op table under tag
    ``ops_name`` at the last of them; off by default, like ``profile_batch``.
    """

    def __init__(self, log_dir: str, name: str = "storage", subdir: str = "train",
                 description: Optional[str] = None,
                 profile_steps: Union[None, int, Tuple[int, int]] = None, ops_name: str = "ops") -> None:
        super().__init__()
        self.log_dir = os.fspath(log_dir)
        self.name = name
        self.subdir = subdir
        self.description = description
        self.profile_steps = _step_range(profile_steps)
        self.ops_name = ops_name
        self._writer: Any = None
        self._step = 0
        self._signature: Optional[Tuple[Any, ...]] = None
        self._optimizer_state: Optional[Tuple[int, int]] = None
        self._trace: Optional[Trace] = None
        self._first_batch: Optional[int] = None  # the running call's first batch index

    def on_train_batch_begin(self, batch: int, logs: Optional[dict] = None) -> None:
        self._first_batch = batch
        if (self.profile_steps and self._trace is None
                and self._step < self.profile_steps[0] <= self._step + self._batches_per_call()):
            self._trace = Trace(self.ops_name, step=self.profile_steps[1],
                                function=getattr(self.model, "train_function", None), model=self.model)
            self._trace.start()

    def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
        # Keras numbers the batches a call ran (begin, end); count them all, as optimizer.iterations does.
        first, self._first_batch = self._first_batch, None
        self._step += batch - first + 1 if first is not None and batch >= first else 1
        if self._optimizer_changed():
            self._record_if_changed()
        if self._trace is not None and self._step >= self.profile_steps[1]:
            self._stop_trace()

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._record_if_changed()

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        if self._trace is not None:  # fit ended inside the profiled range
            self._stop_trace()
        self._flush()

    def _batches_per_call(self) -> int:
        """Batches one train_function call runs (``steps_per_execution``): the profiled window
        starts with the call that holds its first step, even when that is not the call's first."""
        try:
            return max(int(getattr(self.model, "steps_per_execution", 1) or 1), 1)
        except (TypeError, ValueError):
            return 1

    def _stop_trace(self) -> None:
        """Stop the profiler and write the op table. The profiler is stopped even when no
        writer can be made (the trace then warns it was not written): one left running
        would keep every later profile from starting."""
        trace, self._trace = self._trace, None
        trace.step = self._step
        writer = self._writer_or_warn(self.ops_name)
        with writer.as_default() if writer is not None else contextlib.nullcontext():
            if trace.stop() is not None:
                self._flush()

    def _optimizer_changed(self) -> bool:
        """Cheap enough for every batch: the optimizer's identity and variable count."""
        optimizer = getattr(self.model, "optimizer", None)
        try:
            state = (id(optimizer), len(optimizer.variables) if optimizer is not None else 0)
        except Exception:  # no usable variable list: the epoch-end check still runs
            return False
        changed, self._optimizer_state = state != self._optimizer_state, state
        return changed

    def _record_if_changed(self) -> None:
        """Write a breakdown if the optimizer is built and the variables differ from last time."""
        try:
            optimizer = getattr(self.model, "optimizer", None)
            if optimizer is not None and not getattr(optimizer, "built", True):
                return
            signature = _signature(self.model, optimizer)
            if signature == self._signature:
                return
            self._signature = signature  # a capture that failed (and warned) is not retried every batch
            with self._file_writer().as_default():
                if summary.variables(self.name, self.model, optimizer, step=self._step,
                                     description=self.description):
                    self._writer.flush()
        except Exception as e:  # recording must never stop training
            _warn(self.name, e)

    def _file_writer(self) -> Any:
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(os.path.join(self.log_dir, self.subdir))
        return self._writer

    def _writer_or_warn(self, tag: str) -> Any:
        """The file writer, or None (with a warning) if it cannot be made, e.g. an unwritable log dir."""
        try:
            return self._file_writer()
        except Exception as e:
            _warn(tag, e)
            return None

    def _flush(self) -> None:
        """Flush what was written; a failing disk warns rather than ending ``fit``."""
        try:
            if self._writer is not None:
                self._writer.flush()
        except Exception as e:
            _warn(self.name, e)


def _warn(tag: str, error: BaseException) -> None:
    warnings.warn(f"tb_modelmem: MemoryCallback could not record {tag!r}: {type(error).__name__}: {error}",
                  RuntimeWarning, stacklevel=3)


def _signature(model: Any, optimizer: Any) -> Tuple[Any, ...]:
    """Which variables exist, their shapes and trainability: cheap, and reads no values."""
    variables = list(model.variables) + (list(optimizer.variables) if optimizer is not None else [])
    return tuple((id(v), tuple(v.shape), bool(v.trainable)) for v in variables)


def _step_range(steps: Union[None, int, Tuple[int, int]]) -> Optional[Tuple[int, int]]:
    """Normalise ``profile_steps``; like TensorBoard's ``profile_batch``, bad values fail early."""
    if steps is None or steps == 0:
        return None
    start, stop = (steps, steps) if isinstance(steps, int) else tuple(steps)
    if not (1 <= start <= stop):
        raise ValueError(f"profile_steps must be a step or a (start, stop) pair with 1 <= start <= stop, got {steps!r}")
    return int(start), int(stop)
