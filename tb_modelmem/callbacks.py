"""Keras callback that records where a model's memory goes, in the manner of
``keras.callbacks.TensorBoard``: give it the same ``log_dir``.

The breakdown is written once the optimizers have built their slots (after the first
train batch) and again only when the set of variables changes. A new or rebuilt optimizer
(recompiling after unfreezing layers) is seen at the next batch; any other change at the
end of the epoch, since comparing every variable costs milliseconds for a ResNet50. A
model that trains with optimizers of its own (a GAN's ``d_optimizer``/``g_optimizer``
beside Keras' unused default) is recorded with those. Process memory is sampled every
``memory_every`` batches (RSS, device memory: microseconds) with a census of what is alive
(variables, graphs, models) at train begin and end and at epoch ends, kept under 1% of the
training time. A failed capture warns and training goes on. It works on every Keras 3 backend
(TensorFlow, JAX, torch) and never imports TensorFlow itself: event files are written with
TensorBoard's own writer (``tb_modelmem.writer``), steps are profiled with the backend's profiler.

What it relies on in Keras beyond the public ``Callback`` API (finding fit's CallbackList, wrapping
what fit calls to see an error raise out of it) is in one place, ``tb_modelmem._keras_fit``, each
behaviour with its test.
"""

from __future__ import annotations

import glob
import os
import time
import warnings
from typing import Any, List, Optional, Tuple, Union

import keras

from tb_modelmem import summary
from tb_modelmem._keras_fit import FitGuard, fit_callback_list, profiling_tensorboard
from tb_modelmem.messages import first_line
from tb_modelmem.readers import oom
from tb_modelmem.schema.records import OpTable, OpTrace
from tb_modelmem.tracing import OOM_TAG, Trace, step_range
from tb_modelmem.writer import FileWriter

CENSUS_BUDGET = 0.02  # share of training time the census may take, by default


class MemoryCallback(keras.callbacks.Callback):
    """Writes a ``records.Breakdown`` under tag ``name`` to ``log_dir/subdir``.

    ``subdir`` defaults to "train", the run the TensorBoard callback writes
    to, so the Storage tab shows up next to the training scalars. The step
    is the number of train batches seen by this callback (across ``fit`` calls).

    ``profile_steps=(10, 12)`` (or ``10``) profiles those train batches (1-based, as
    counted by the step) with the TF profiler and writes their per-op table under tag
    ``ops_name`` at the last of them; off by default, like ``profile_batch``. Step 1 also
    makes the optimizer's slots: profile a later step for the steady state (the tab says
    so of a window that made state).

    ``memory_every=100`` samples process memory every 100 batches under tag
    ``memory_name`` (the Growth view); 0 or None turns it off. A census of what is alive
    (~0.1-0.3 s) is taken at train begin and end, and at epoch ends and samples while all
    censuses stay under ``census_budget`` of the training time (1.0: at every sample).
    """

    def __init__(self, log_dir: str, name: str = "storage", subdir: str = "train",
                 description: Optional[str] = None,
                 profile_steps: Union[None, int, Tuple[int, int]] = None, ops_name: str = "ops",
                 memory_every: Optional[int] = 100, memory_name: str = "memory",
                 census_budget: float = CENSUS_BUDGET) -> None:
        super().__init__()
        self.log_dir = os.fspath(log_dir)
        self.name = name
        self.subdir = subdir
        self.description = description
        self.profile_steps = step_range(profile_steps)
        self.ops_name = ops_name
        if memory_every is not None and (not isinstance(memory_every, int) or memory_every < 0):
            raise ValueError(f"memory_every must be a number of batches >= 0 (0 or None: off), got {memory_every!r}")
        self.memory_every = memory_every or 0
        self.memory_name = memory_name
        if not 0 <= census_budget <= 1:
            raise ValueError(f"census_budget must be a share of training time in [0, 1], got {census_budget!r}")
        self.census_budget = census_budget
        self._writer: Any = None
        self._step = 0
        self._signature: Optional[Tuple[Any, ...]] = None
        self._optimizer_state: Optional[Tuple[Any, ...]] = None
        self._trace: Optional[Trace] = None
        self._first_batch: Optional[int] = None  # the running call's first batch index
        self._last_memory_step = -1
        self._census_seconds = 0.0
        self._last_census = 0.0  # what the last census cost: the next is expected to cost as much
        self._train_started = 0.0
        self._lost_warned = False
        self._failed_tags: set = set()  # tags whose writer could not be made (warned once)
        # For the whole fit, what it calls is wrapped (the train function, evaluate, the hooks of
        # the callback list fit made): whatever raises out of fit closes the window on its way (see _guard).
        self._fit_guard = FitGuard(self._fit_raised)
        self._callbacks: Any = None  # the CallbackList fit made, found when it set the model
        self._oom_seen = 0  # id() of the out-of-memory error last recorded

    def set_model(self, model: Any) -> None:
        super().set_model(model)
        self._callbacks = fit_callback_list(self)

    def on_train_begin(self, logs: Optional[dict] = None) -> None:
        if self._trace is not None:  # the previous fit left the profiled window open in a way no guard saw
            self._cut_short(None, "when the previous fit ended")
        self._unguard()  # what a fit that ended in a way no guard saw left wrapped
        self._train_started = time.monotonic()
        self._guard()
        self._sample_memory(census=True, label="train begin")

    def on_train_batch_begin(self, batch: int, logs: Optional[dict] = None) -> None:
        self._first_batch = batch
        if self.memory_every and self._step // self.memory_every != self._last_memory_step // self.memory_every:
            self._sample_memory(census=self._census_affordable())  # at the step the last batch ended
        if (self.profile_steps and self._trace is None
                and self._step < self.profile_steps[0] <= self._step + self._batches_per_call()):
            self._trace = Trace(self.ops_name, step=self.profile_steps[1],
                                function=getattr(self.model, "train_function", None), model=self.model,
                                optimizer=self._optimizers() or None)
            # another profiler may hold the process's one (keras' TensorBoard(profile_batch=...), ...)
            if not self._trace.start():
                self._record_missing_trace(self._trace.failure)
                self._trace = None

    def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
        # Keras numbers the batches a call ran (begin, end); count them all, as optimizer.iterations does.
        first, self._first_batch = self._first_batch, None
        self._step += batch - first + 1 if first is not None and batch >= first else 1
        if self._optimizer_changed():
            self._record_if_changed()
        if self._trace is not None and self.profile_steps and self._step >= self.profile_steps[1]:
            self._stop_trace()

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._record_if_changed()
        last = epoch + 1 >= int((self.params or {}).get("epochs") or 0)
        if not last and self._census_affordable():  # the last epoch's end is train end's sample
            self._sample_memory(census=True, label=f"epoch {epoch + 1} end")

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        if self._trace is not None:  # fit ended inside the profiled range
            self._stop_trace()
        self._unguard()
        self._sample_memory(census=True, label="train end")
        self._flush()

    def _record_oom(self, error: BaseException, where: str) -> None:
        """A step out of memory under tag ``oom`` (``summary.oom``: what the error names, the memory then),
        never instead of the error: a failure here warns, and the error still goes up."""
        step = self._step + 1
        writer = self._writer_or_warn(OOM_TAG)
        if writer is not None:
            with writer.as_default():
                self._written(lambda: summary.oom(OOM_TAG, error, step, where=f"model.fit, step {step}, {where}"))
        warnings.warn(f"tb_modelmem: step {step} ran out of memory; recorded under tag {OOM_TAG!r} in "
                      f"{self._run_dir()!r} (the tab's What if view says what would fit)", RuntimeWarning, stacklevel=3)

    def _batches_per_call(self) -> int:
        """Batches one train_function call runs (``steps_per_execution``): the profiled window
        starts with the call that holds its first step, even when that is not the call's first."""
        try:
            return max(int(getattr(self.model, "steps_per_execution", 1) or 1), 1)
        except (TypeError, ValueError):
            return 1

    def _guard(self) -> None:
        """For the whole ``fit``, whatever raises out of it (a step out of memory, a data error, an
        interrupt, another callback's exception, a failing validation) is seen on its way, as Keras calls
        no ``on_train_end`` then: a step out of memory is recorded (``_record_oom``), an open profile
        window is closed (a profiler left running makes every later profile in the process fail, "Another
        profiler is running"), and everything is unwrapped. Guarded: the train function, ``evaluate``
        (fit validates through it) and every hook of the callback list fit made."""
        self._fit_guard.wrap_fit(self.model, self._callbacks)

    def _fit_raised(self, error: BaseException, where: str) -> None:
        if oom.is_oom(error) and id(error) != self._oom_seen:  # once, however many guards it passes
            self._oom_seen = id(error)
            self._record_oom(error, where)
        self._cut_short(error, where)

    def _unguard(self) -> None:
        """Put back what ``_guard`` wrapped (what someone replaced meanwhile is left as it is)."""
        self._fit_guard.restore()

    def _cut_short(self, error: Optional[BaseException], where: str) -> None:
        """Close a window ``fit`` left before its last step, saying so once: it is not recorded."""
        trace, self._trace = self._trace, None
        self._unguard()
        if trace is None:
            return
        trace.abort()
        assert self.profile_steps is not None
        why = (f"{type(error).__name__}{': ' + first_line(error) if str(error) else ''} raised {where}"
               if error is not None else where)
        at = self._step + 1 if self._first_batch is not None else self._step  # inside a batch, or after one
        warnings.warn(f"tb_modelmem: the profile of steps {_steps(self.profile_steps)} was cut short at step {at} "
                      f"({why}): it is not recorded, and the profiler is stopped", RuntimeWarning, stacklevel=3)

    def _record_missing_trace(self, reason: str) -> None:
        """The profiler could not start: record why at the step the table would have been written, so the
        tab says it where the table would be (a warning on stderr alone goes unseen)."""
        assert self.profile_steps is not None
        other = profiling_tensorboard(self._callbacks, self.profile_steps)
        if other is not None:
            start, stop = other
            where = (f"keras.callbacks.TensorBoard(profile_batch={_steps((start, stop), ', ')}) in the same fit "
                     "profiles these batches, and a process runs one profiler at a time: its profile is in this "
                     "tab as the run's \"profile/...\" tag. For tb_modelmem's table (ops joined to the layers), "
                     "give the two different batches.")
        else:
            where = ("Something else was profiling this process then (keras.callbacks.TensorBoard(profile_batch=...), "
                     "tf.profiler.experimental.start, a profiler server's capture); a process runs one profiler "
                     "at a time.")
        note = (f"No profile of steps {_steps(self.profile_steps)}: the profiler could not start "
                f"({reason or 'no reason given'}). {where}")
        record = OpTrace(source="no profile", ops=OpTable(), steps=0, allocations="none", allocations_note=note)
        writer = self._writer_or_warn(self.ops_name)
        if writer is not None:
            with writer.as_default():
                self._written(lambda: summary.op_trace(self.ops_name, record, self.profile_steps[1]))

    def _stop_trace(self) -> None:
        """Stop the profiler and write the op table. When no writer can be made, the profiler
        is still stopped (one left running would keep every later profile from starting)."""
        trace, self._trace = self._trace, None
        if trace is None:
            return
        trace.step = self._step
        writer = self._writer_or_warn(self.ops_name)
        if writer is None:
            trace.abort()
            return
        with writer.as_default():
            if trace.stop() is not None:
                self._flush()

    def _optimizers(self) -> List[Any]:
        """The optimizers of the model: ``model.optimizer`` and any other optimizer it holds
        (a GAN's ``d_optimizer``/``g_optimizer``; Keras' default one then stays unbuilt, but its
        counters exist and are counted)."""
        found: List[Any] = []
        model = self.model
        candidates = [getattr(model, "optimizer", None)] + [v for v in vars(model).values()
                                                             if isinstance(v, keras.optimizers.Optimizer)]
        for optimizer in candidates:
            if optimizer is not None and all(optimizer is not o for o in found):
                found.append(optimizer)
        return found

    def _optimizer_changed(self) -> bool:
        """Cheap enough for every batch: the optimizers' identities and variable counts."""
        try:
            state = tuple((id(o), len(o.variables)) for o in self._optimizers())
        except Exception:  # no usable variable list: the epoch-end check still runs
            return False
        changed, self._optimizer_state = state != self._optimizer_state, state
        return changed

    def _record_if_changed(self) -> None:
        """Write a breakdown if the optimizers are built and the variables differ from last time."""
        try:
            optimizers = self._optimizers()
            if optimizers and not any(getattr(o, "built", True) for o in optimizers):
                return  # no slots yet: they appear once an optimizer applies its first gradients
            signature = _signature(self.model, optimizers)
            if signature == self._signature:
                return
            self._signature = signature  # a capture that failed (and warned) is not retried every batch
            with self._file_writer().as_default():
                self._written(lambda: summary.variables(self.name, self.model, optimizers or None, step=self._step,
                                                        description=self.description))
        except Exception as e:  # recording must never stop training
            _warn(self.name, e)

    def _census_affordable(self) -> bool:
        """A census costs ~0.1-0.3 s: take one only while all of them stay under the budget."""
        elapsed = time.monotonic() - self._train_started
        return self._census_seconds + self._last_census <= self.census_budget * max(elapsed, 1e-9)

    def _sample_memory(self, census: bool, label: str = "") -> None:
        """One sample at the current step (never two at one step: a step holds one point)."""
        if not self.memory_every or (self._step == self._last_memory_step and label != "train end"):
            return
        self._last_memory_step = self._step
        writer = self._writer_or_warn(self.memory_name)
        if writer is None:
            return
        started = time.monotonic()
        with writer.as_default():
            self._written(lambda: summary.memory(self.memory_name, step=self._step, census=census, label=label))
        if census:
            self._last_census = time.monotonic() - started
            self._census_seconds += self._last_census

    def _written(self, write: Any) -> None:
        """Run one summary write and flush it; if the flush fails or the event file did not grow,
        the disk is full or read-only (TensorFlow's writer may drop the data without an error)."""
        before = self._event_bytes()
        if write():
            self._flush()
            failed = getattr(self._writer, "failed", None)
            if failed is not None or self._event_bytes() <= before:
                self._say_lost(failed)

    def _say_lost(self, error: Optional[BaseException] = None) -> None:
        """Warn, once per callback, that summaries are being lost (not once per write)."""
        if self._lost_warned:
            return
        self._lost_warned = True
        why = f" ({type(error).__name__}: {first_line(error)})" if error is not None else ""
        warnings.warn(f"tb_modelmem: MemoryCallback's summaries are not reaching {self._run_dir()!r} "
                      f"(disk full or read-only?){why}; what it records from now on may be lost",
                      RuntimeWarning, stacklevel=4)

    def _run_dir(self) -> str:
        return os.path.join(self.log_dir, self.subdir)

    def _event_bytes(self) -> int:
        total = 0
        for path in glob.glob(os.path.join(glob.escape(self._run_dir()), "events.out.tfevents.*")):
            try:
                total += os.path.getsize(path)
            except OSError:
                pass
        return total

    def _file_writer(self) -> Any:
        if self._writer is None:
            self._writer = FileWriter(self._run_dir(), keep_errors=True)
        return self._writer

    def _writer_or_warn(self, tag: str) -> Any:
        """The file writer, or None (with one warning per tag) if it cannot be made, e.g. an
        unwritable log dir."""
        try:
            return self._file_writer()
        except Exception as e:
            if tag not in self._failed_tags:
                self._failed_tags.add(tag)
                _warn(tag, e)
            return None

    def _flush(self) -> None:
        """Flush what was written; a failing disk warns (once) rather than ending ``fit``."""
        try:
            if self._writer is not None:
                self._writer.flush()
        except Exception as e:
            self._say_lost(e)


def _steps(steps: Tuple[int, int], joined: str = "-") -> str:
    """(2, 2) -> "2"; (2, 5) -> "2-5"."""
    return str(steps[0]) if steps[0] == steps[1] else f"{steps[0]}{joined}{steps[1]}"


def _warn(tag: str, error: BaseException) -> None:
    warnings.warn(f"tb_modelmem: MemoryCallback could not record {tag!r}: {type(error).__name__}: "
                  f"{first_line(error)}", RuntimeWarning, stacklevel=3)


def _signature(model: Any, optimizers: List[Any]) -> Tuple[Any, ...]:
    """Which variables exist, their shapes and trainability: cheap, and reads no values."""
    variables = list(model.variables) + [v for o in optimizers for v in o.variables]
    return tuple((id(v), tuple(v.shape), bool(v.trainable)) for v in variables)
