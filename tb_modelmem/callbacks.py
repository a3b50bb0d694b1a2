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

import os
import warnings
from typing import Any, Optional, Tuple

import keras
import tensorflow as tf

from tb_modelmem import summary


class MemoryCallback(keras.callbacks.Callback):
    """Writes a ``records.Breakdown`` under tag ``name`` to ``log_dir/subdir``.

    ``subdir`` defaults to "train", the run the TensorBoard callback writes
    to, so the Storage tab shows up next to the training scalars. The step
    is the number of train batches seen by this callback (across ``fit`` calls).
    """

    def __init__(self, log_dir: str, name: str = "storage", subdir: str = "train",
                 description: Optional[str] = None) -> None:
        super().__init__()
        self.log_dir = os.fspath(log_dir)
        self.name = name
        self.subdir = subdir
        self.description = description
        self._writer: Any = None
        self._step = 0
        self._signature: Optional[Tuple[Any, ...]] = None
        self._optimizer_state: Optional[Tuple[int, int]] = None

    def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
        self._step += 1
        if self._optimizer_changed():
            self._record_if_changed()
        # Op tracing over a step range (a later ``profile_steps`` option) belongs
        # here, as its own method next to this one.

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._record_if_changed()

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        if self._writer is not None:
            self._writer.flush()

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
            warnings.warn(f"tb_modelmem: MemoryCallback could not record {self.name!r}: "
                          f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)

    def _file_writer(self) -> Any:
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(os.path.join(self.log_dir, self.subdir))
        return self._writer


def _signature(model: Any, optimizer: Any) -> Tuple[Any, ...]:
    """Which variables exist, their shapes and trainability: cheap, and reads no values."""
    variables = list(model.variables) + (list(optimizer.variables) if optimizer is not None else [])
    return tuple((id(v), tuple(v.shape), bool(v.trainable)) for v in variables)

