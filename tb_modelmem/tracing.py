"""Profile a few training steps and write their per-op table.

``with tb_modelmem.trace("ops", step=3, function=train_step): train_step(x, y)`` runs the
TF2 profiler around the block (JAX's for Keras 3 on the JAX backend, ``torch.profiler`` on the
torch backend: ``capture.torch_profile``, ``readers.torch_trace``), reduces the XSpace it
writes to an OpTrace (see ``readers.xspace``; an XLA-compiled step's per instruction, see
``readers.xla``) and records it with ``summary.op_trace`` on the default writer.
``Trace.start()`` / ``Trace.stop()`` do the same across callback hooks. Capturing never
stops training: every failure warns and the block runs anyway; the block's own
exceptions propagate unchanged. The raw profile lives in a temp dir that is removed. A JAX model is read
as the window starts, before its step runs: a step that donates its state deletes the arrays it is given.

What ``stop()`` does, in order, and why:

1. for TensorFlow, a thread (``_ModelReading``) does what needs no profile while TensorFlow writes it (``export_to_tb``
   releases the GIL, ~0.1-0.2 s for a ResNet50 step); started before the export, it waits on an event set
   just before it (a thread just started would hold the GIL for a switch interval). It reads the model's
   breakdown as a ``join.Vocabulary`` and its variables, ``opgraph.graph_info`` of the traces
   ``opgraph.likely_run`` guesses ran, ``Joiner.prepare``, then output specs. It runs no TensorFlow op
   (the profiler may still be recording); a failure there is not reported: what is missing is read after
   the profile, and a failure then warns;
2. every ``*.xplane.pb`` is loaded (one per host, merged);
3. ``opgraph.graph_info(function, variables, ran)``: ``ran`` (``xspace.functions_run``) keeps only the
   traces of the function that ran (a step's first call, which made the optimizer's slots, left another);
   the thread's reading is used when its guess equals ``ran``, so a wrong guess costs time, never a
   figure. The last two graph readings are kept for graphs still alive and unchanged (weak references,
   ``Graph.version``); an op's output specs are read when asked for (``opgraph.OutputSpecs``);
4. ``xspace.reduce_xspace``: ``Joiner.reused`` keeps the last two joiners for the same graph reading,
   vocabulary and op names (a loop profiled every N steps), else joins again;
5. ``summary.op_trace`` on the default writer; 6. the temp dir removed. ``atexit`` closes a window left
   open.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import sys
import tempfile
import threading
import warnings
from types import TracebackType
from typing import Any, List, Optional, Set, Tuple, Type, Union

from tb_modelmem import summary
from tb_modelmem.capture.jax_pytrees import is_jax_model
from tb_modelmem.capture.torch_modules import is_module
from tb_modelmem.capture.torch_profile import TorchProfiler
from tb_modelmem.gc_paused import paused_gc
from tb_modelmem.messages import first_line
from tb_modelmem.readers import oom
from tb_modelmem.schema.records import OpTrace

OOM_TAG = "oom"  # where a step that ran out of memory is recorded (summary.oom), in the run being written


class Trace:
    """One profiling window: start it, run steps, stop it; the reduced table is written on stop."""

    def __init__(self, name: str, step: Optional[int] = None, function: Any = None, model: Any = None,
                 optimizer: Any = None, batch_size: Optional[int] = None, description: Optional[str] = None,
                 tmpdir: Optional[str] = None, writer: Any = None, keep_trace: Optional[str] = None,
                 keep_as: Optional[str] = None, write: bool = True) -> None:
        """``function``: the tf.function the steps run (or a ConcreteFunction, tf.Graph, or Python
        function calling tf.functions such as Keras 3 ``model.train_function``): its graph gives
        the output bytes the allocator does not report and which variables each op reads.
        ``model`` (and ``optimizer``), as ``summary.variables`` takes them (a Keras model, a
        tf.Module, a tf.train.Checkpoint holding a GAN's two models and optimizers...), name
        the layers ops are joined to, as the run's breakdown names them.
        A plain PyTorch ``nn.Module`` is profiled with ``torch.profiler``, its ops named by its modules.
        ``batch_size`` fills unknown batch dimensions. ``tmpdir``: where the raw profile is
        written before reduction (the system temp dir by default). ``writer``: where the table is
        written, as ``summary.write`` takes it (the default writer when None). ``keep_trace``: a folder
        the raw profile is copied into before its temp dir is removed (a PyTorch step's Chrome trace,
        for Perfetto or torch's own tools), named ``keep_as`` (else ``<name>_<step>.pt.trace.json``).
        ``write``: False reduces and keeps the trace but writes no summary (a rank other than 0 of a job
        whose rank 0 writes)."""
        self.name, self.step, self.function = name, step, function
        self.model, self.optimizer = model, optimizer
        self.batch_size, self.description, self.tmpdir, self.writer = batch_size, description, tmpdir, writer
        self.keep_trace, self.keep_as, self.write = keep_trace, keep_as, write
        self.profiler = _profiler_of(model, function)
        self.record: Optional[OpTrace] = None  # the reduced table once stopped
        self.xplane_bytes = 0  # size of the raw profile it came from
        self.failure = ""  # why the profiler could not start ("AlreadyExistsError: Another profiler is running")
        self._dir: Optional[str] = None
        self._read_before: Optional[Tuple[Any, List[Any]]] = None  # a JAX model, read before its step ran

    @property
    def active(self) -> bool:
        """True between a successful ``start`` and ``stop``: only then is the profiler ours to stop."""
        return self._dir is not None

    def start(self) -> bool:
        """Start the profiler; False (with a warning) if it cannot, e.g. another profile is running.

        A window tb_modelmem opened earlier and nobody closed (``fit`` raised or was interrupted
        inside ``profile_steps``: Keras then calls no ``on_train_end``) is closed first, so one
        failed run never keeps every later profile from starting."""
        if self.active:
            warnings.warn(f"tb_modelmem: trace {self.name!r} is already started", RuntimeWarning, stacklevel=2)
            return False
        stale = _open_window()
        if stale is not None:
            warnings.warn(f"tb_modelmem: closing the profile window of trace {stale.name!r}, left open when its run "
                          "ended inside it (an exception or interrupt); it is not recorded", RuntimeWarning,
                          stacklevel=2)
            stale.abort()
        try:
            self._dir = tempfile.mkdtemp(prefix="tb_modelmem_trace_", dir=self.tmpdir)
            if isinstance(self.profiler, TorchProfiler):
                self.profiler.start(self._dir, self.model, self.optimizer)
            else:
                if self.profiler is _JAX:
                    _finish_dispatched(self.model, self.optimizer)
                    # a step that donates its state deletes the arrays it was given: read them while they live
                    self._read_before = self._vocabulary()
                self.profiler.start(self._dir)
            _OPEN.append(self)
            return True
        except Exception as e:  # capture must never stop training
            self._cleanup()
            self.failure = f"{type(e).__name__}: {first_line(e)}"
            _warn(self.name, "could not start the profiler", e)
            return False

    def stop(self) -> Optional[OpTrace]:
        """Stop the profiler, reduce its XSpace and write it; the OpTrace, or None on failure."""
        if not self.active:
            return None
        try:
            with paused_gc():  # the reduction makes ~100 objects per op; collections would walk the whole model too
                reading: Optional[_ModelReading] = None
                try:  # the thread is let go in the finally whatever happens once it exists
                    reading = _ModelReading.started(self) if self.profiler is _TENSORFLOW else None
                    if reading is not None:
                        reading.go.set()  # it takes the GIL once the export below releases it
                    self.profiler.stop()
                finally:
                    if reading is not None:
                        reading.go.set()
                        reading.written.set()
                        reading.join()
                self.record = self._reduce(reading)
            if self.record is not None and self.write and not summary.op_trace(self.name, self.record, self.step,
                                                                                  self.description, self.writer):
                warnings.warn(f"tb_modelmem: trace {self.name!r} was not written (no default summary writer, "
                              "or recording is off)", RuntimeWarning, stacklevel=2)
            return self.record
        except Exception as e:
            _warn(self.name, "could not record the trace", e)
            return None
        finally:
            self._cleanup()

    def end_iteration(self) -> None:
        """An iteration of the window ended (torch's ``ProfilerStep#N`` ranges); other profilers need no mark."""
        if self.active and isinstance(self.profiler, TorchProfiler):
            try:
                self.profiler.step()
            except Exception as e:  # capture must never stop training
                _warn(self.name, "could not mark the step", e)

    def abort(self) -> None:
        """Stop the profiler without recording (the window's run failed, or nothing can be written)."""
        if not self.active:
            return
        try:
            self.profiler.stop(save=False)
        except Exception:  # already stopped by someone else: nothing left to release
            pass
        finally:
            self._cleanup()

    def __enter__(self) -> "Trace":
        self.start()
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc is not None and oom.is_oom(exc):  # said before the error goes on up, never instead of it
            summary.oom(OOM_TAG, exc, self.step, where=f"trace({self.name!r})", batch_size=self.batch_size,
                        writer=self.writer)
        self.stop()  # also after a failed step: an OOM step is the one worth seeing

    def _reduce(self, reading: Optional["_ModelReading"]) -> Optional[OpTrace]:
        """What ``reading`` read while the profile was written is used, the rest is read here."""
        from tb_modelmem.readers import xspace

        assert self._dir is not None
        if isinstance(self.profiler, TorchProfiler):
            return self._reduce_torch()
        paths = sorted(glob.glob(os.path.join(self._dir, "**", "*.xplane.pb"), recursive=True))
        if not paths:
            warnings.warn(f"tb_modelmem: the profiler wrote no .xplane.pb for trace {self.name!r}",
                          RuntimeWarning, stacklevel=3)
            return None
        space = xspace.load_xspace(paths[0])
        for path in paths[1:]:  # one file per host
            space.MergeFrom(xspace.load_xspace(path))
        self.xplane_bytes = sum(os.path.getsize(p) for p in paths)
        model = reading.model if reading is not None else self._read_before
        vocabulary, variables = model if model is not None else self._vocabulary()
        ran = xspace.functions_run(space)
        guessed = reading.graph if reading is not None else None
        graph = guessed[1] if guessed is not None and guessed[0] == ran else self._graph_info(variables, ran)
        shapes = {tuple(int(d) for d in v.shape) for v in variables if None not in tuple(v.shape)}
        return xspace.reduce_xspace(space, graph, self.batch_size, vocabulary, shapes)

    def _reduce_torch(self) -> Optional[OpTrace]:
        """The torch profiler's trace (``readers.torch_trace``): its ops carry their layers already."""
        from tb_modelmem.readers import torch_trace

        assert self._dir is not None
        paths = sorted(glob.glob(os.path.join(self._dir, "*.pt.trace.json")))
        if not paths:
            warnings.warn(f"tb_modelmem: the torch profiler wrote no trace for {self.name!r}", RuntimeWarning,
                          stacklevel=4)
            return None
        with open(paths[0], "rb") as f:
            data = f.read()
        self.xplane_bytes = len(data)
        if self.keep_trace:
            os.makedirs(self.keep_trace, exist_ok=True)
            kept = self.keep_as or f"{self.name}_{self.step}.pt.trace.json"
            shutil.copy(paths[0], os.path.join(self.keep_trace, kept))
        record = torch_trace.reduce_trace(torch_trace.load(data))
        if self.batch_size:
            record.batch_size = self.batch_size
        return record

    def _vocabulary(self) -> Tuple[Any, List[Any]]:
        """``_read_model``, warning (and naming no layers) when it cannot."""
        try:
            return self._read_model() or (None, [])
        except Exception as e:
            _warn(self.name, "could not read the model's layers (ops keep their scope names)", e)
            return None, []

    def _read_model(self, profiling: bool = False) -> Optional[Tuple[Any, List[Any]]]:
        """The model's layers and its variables (to name the handles the graph captures). With
        no ``model``, the Keras model ``function`` closes over, if any; else ops keep no layer
        here and the tab joins them to the run's breakdown by name. ``profiling``: the profiler
        may still be recording, so None if a variable's shape is only known by running an op."""
        from tb_modelmem.capture.jax_pytrees import arrays_of
        from tb_modelmem.capture.opgraph import model_in, variables_of
        from tb_modelmem.capture.variables import breakdown_of, fully_defined, static_dims
        from tb_modelmem.rules.join import Vocabulary

        model = self.model if self.model is not None else model_in(self.function)
        if model is None:
            return None, []
        if is_jax_model(model):  # flax, equinox, pytrees: no Keras to ask
            return Vocabulary.from_breakdown(breakdown_of(model, self.optimizer)), arrays_of(model, self.optimizer)
        variables = variables_of(model, self.optimizer)
        if profiling and not all(map(fully_defined, map(static_dims, variables))):
            return None
        return Vocabulary.from_breakdown(breakdown_of(model, self.optimizer)), variables

    def _graph_info(self, variables: List[Any], ran: Set[str]) -> Any:
        """The shapes and dataflow of the traced graphs that ran (``ran``: their function names);
        without them the table still has measured bytes. A JAX step has none: its compiled
        program, in the profile, says it all."""
        from tb_modelmem.capture.opgraph import graph_info

        if self.function is None or self.profiler is not _TENSORFLOW:
            return None
        try:
            return graph_info(self.function, variables, ran)
        except Exception as e:
            _warn(self.name, "could not read the traced graph (output bytes stay unknown)", e)
            return None

    def _cleanup(self) -> None:
        if self in _OPEN:
            _OPEN.remove(self)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


class _ModelReading(threading.Thread):
    """Reads the model and the step's graphs, and joins the graphs to the model, while
    TensorFlow writes the profile (its export releases the GIL): none of it needs the profile,
    and it is most of what a first ``trace()`` adds. Which graphs ran is a guess here
    (``opgraph.likely_run``); the profile decides after (``graph``: used if the guess was right,
    else the graphs that ran are read through ``graph_info``'s cache). What
    time is left goes to reading output specs, until ``written`` is set. Nothing here runs a
    TensorFlow op (the profiler may still be recording). A failure is not reported here: what
    is missing is read again after the profile, and a failure then warns."""

    def __init__(self, window: Trace) -> None:
        super().__init__(name="tb_modelmem-model-reading", daemon=True)
        self.window = window
        self.model: Optional[Tuple[Any, List[Any]]] = None  # (vocabulary, variables) once read
        self.graph: Optional[Tuple[Set[str], Any]] = None  # (the functions guessed to have run, their GraphInfo)
        self.go = threading.Event()  # the profile is being written: start reading
        self.written = threading.Event()  # the profile is written: stop reading ahead

    @classmethod
    def started(cls, window: Trace) -> Optional["_ModelReading"]:
        """The reading, running; None if no thread can start (then it all happens after)."""
        reading = cls(window)
        try:
            reading.start()
        except RuntimeError:  # "can't start new thread": a process at its thread limit
            return None
        return reading

    def run(self) -> None:
        self.go.wait()  # not before: a thread just started holds the GIL for a switch interval (5 ms)
        try:
            from tb_modelmem.capture.opgraph import OutputSpecs, graph_info, likely_run
            from tb_modelmem.readers import xspace  # noqa: F401 (a first trace's imports, here too)
            from tb_modelmem.rules.join import Joiner, Vocabulary

            self.model = self.window._read_model(profiling=True)
            function = self.window.function
            if self.model is not None and function is not None and self.window.profiler is _TENSORFLOW:
                guess = likely_run(function)
                graph = graph_info(function, self.model[1], guess)
                self.graph = guess, graph
                Joiner.prepare(self.model[0] or Vocabulary([]), graph.graphs)
                if isinstance(graph.outputs, OutputSpecs):
                    graph.outputs.read_ahead(self.written)
        except Exception:  # read again, and reported, by the reduction
            pass


def enable_full_memory_trace() -> bool:
    """Make TensorFlow record every CPU allocation in profiles (its BFC allocator:
    ``TF_CPU_ALLOCATOR_USE_BFC=true``), so the peak is split byte for byte; its default CPU
    allocator records only large allocations. Takes effect only if called before TensorFlow
    runs its first op (the allocator is chosen then): returns False, with a warning, when it
    is too late. Costs little: see ``benchmarks/bench_bfc.py``."""
    os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    if "tensorflow" not in sys.modules:
        return True
    try:
        from tensorflow.python.eager import context

        started = bool(context.context()._initialized)
    except Exception:  # a TensorFlow without this private flag: assume it started
        started = True
    if started:
        warnings.warn("tb_modelmem: enable_full_memory_trace() came after TensorFlow started: the CPU allocator is "
                      "already chosen. Call it first thing, or run with TF_CPU_ALLOCATOR_USE_BFC=true",
                      RuntimeWarning, stacklevel=2)
    return not started


def trace(name: str, step: Optional[int] = None, function: Any = None, model: Any = None, optimizer: Any = None,
          batch_size: Optional[int] = None, description: Optional[str] = None, tmpdir: Optional[str] = None) -> Trace:
    """Context manager profiling its block into an op trace summary ``name`` at ``step``."""
    return Trace(name, step, function, model, optimizer, batch_size, description, tmpdir)


class _Profiler:
    """The profiler of one framework: TensorFlow's, or JAX's for Keras 3 on the JAX backend."""

    def __init__(self, name: str) -> None:
        self.name = name

    def start(self, folder: str) -> None:
        if self.name == "jax":
            import jax

            jax.profiler.start_trace(folder)
        else:
            import tensorflow as tf

            tf.profiler.experimental.start(folder)

    def stop(self, save: bool = True) -> None:
        """Stop and write the profile (``save=False``: discard it, where the profiler can)."""
        if self.name == "jax":
            import jax

            jax.effects_barrier()  # the steps' device work, finished, is in the profile
            jax.profiler.stop_trace()
        else:
            import tensorflow as tf

            tf.profiler.experimental.stop(save=save)


_TENSORFLOW, _JAX = _Profiler("tensorflow"), _Profiler("jax")


def _finish_dispatched(*trees: Any) -> None:
    """Wait for the JAX steps dispatched before the window: JAX returns before a step runs, so the steps
    before a traced one would still run inside its profile (a flax loop that blocks only in the traced step
    read 3 executions, each op's time summed over them). Their outputs are the arrays of the model and
    optimizer given (a pytree: a flax nnx module, a linen params dict, an optax state); each device runs
    its steps in order, so those being ready means every earlier step is done."""
    import jax

    for tree in trees:
        try:
            leaves = jax.tree_util.tree_leaves(tree)
        except Exception:  # not a pytree (a Keras model): nothing to wait on here
            continue
        for leaf in leaves:
            try:
                if isinstance(leaf, jax.Array):
                    leaf.block_until_ready()
            except Exception:  # a deleted (donated) array: the step that took it is what the others wait on
                continue


def step_range(steps: Union[None, int, Tuple[int, int]]) -> Optional[Tuple[int, int]]:
    """``profile_steps`` (a step, or a (first, last) pair, 1-based) as a pair, None for none (None or 0);
    like TensorBoard's ``profile_batch``, a bad value fails at once."""
    if steps is None or steps == 0:
        return None
    pair = (steps, steps) if isinstance(steps, int) else tuple(steps)
    if len(pair) != 2 or not all(isinstance(s, int) and not isinstance(s, bool) for s in pair) \
            or not 1 <= pair[0] <= pair[1]:
        raise ValueError(f"profile_steps must be a step or a (start, stop) pair with 1 <= start <= stop, "
                         f"got {steps!r}")
    return pair[0], pair[1]


def _profiler_of(model: Any, function: Any) -> Any:
    """The profiler of the framework the steps run on: for a Keras 3 model, its backend's (TensorFlow's, JAX's,
    or a ``TorchProfiler``); for a JAX model (flax, equinox, a pytree) or a JAX-compiled function, JAX's; else
    TensorFlow's."""
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(model, keras.layers.Layer):
        backend = keras.backend.backend()
        if backend == "torch":
            return TorchProfiler()
        return _JAX if backend == "jax" else _TENSORFLOW
    if is_module(model):  # a plain PyTorch model
        return TorchProfiler()
    if "jax" not in sys.modules:
        return _TENSORFLOW
    if is_jax_model(model):  # flax, equinox, a pytree of JAX arrays
        return _JAX
    return _JAX if hasattr(function, "lower") and hasattr(function, "trace") else _TENSORFLOW


_OPEN: List[Trace] = []  # windows started and not yet stopped (at most one: the profiler is process-wide)


def _open_window() -> Optional[Trace]:
    return _OPEN[0] if _OPEN else None


@atexit.register
def _close_open_windows() -> None:
    """At exit, release a window left open (its temporary profile directory is removed)."""
    for window in list(_OPEN):
        window.abort()


def _warn(name: str, what: str, error: BaseException) -> None:
    warnings.warn(f"tb_modelmem: {what} for trace {name!r}: {type(error).__name__}: {first_line(error)}",
                  RuntimeWarning, stacklevel=3)
