"""Summary-writer API in the manner of ``tf.summary``: default writer, ``step=``, name scopes.

Each function captures one record (shapes and dtypes only, never tensor
values) and writes it as a one-element string tensor with data_class
BLOB_SEQUENCE. Work happens only when the default writer will record.
Capture failures warn and return False: they never stop training.
``*_pb`` functions build a ``Summary`` proto without TensorFlow.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, Callable, List, Optional, Tuple

from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

from tb_modelmem import writer as _writer
from tb_modelmem.messages import first_line
from tb_modelmem.schema import metadata, payload
from tb_modelmem.schema.codec import Record
from tb_modelmem.schema.records import Breakdown, LoadBench, OpTrace
from tb_modelmem.writer import adder


def write(name: str, record: "Record | Callable[[], Record]", step: Optional[int] = None,
          description: Optional[str] = None, writer: Any = None) -> bool:
    """Write ``record`` (or the record a callable makes, lazily) under ``name``.

    Where it goes: ``writer`` when given (a TF1 ``tf.compat.v1.summary.FileWriter``, a
    ``create_file_writer(...)``, or a ``torch.utils.tensorboard.SummaryWriter``); else the default
    ``create_file_writer(...).as_default()``; else, in a process that has TensorFlow, the default
    ``tf.summary`` writer (TensorFlow is never imported here: a torch or JAX process keeps none).
    In TF1 graph mode with no writer, that is a mistake reported at once (ValueError). Returns True
    if a summary was written, False if there is no default writer, recording is off, or capture
    failed (with a warning).
    """
    add = adder(writer) if writer is not None else None
    own = _writer.default() if add is None else None
    tf = sys.modules.get("tensorflow") if add is None and own is None else None
    if tf is not None and not tf.executing_eagerly():
        raise ValueError(
            f"tb_modelmem.summary: {name!r} was called in TF1 graph mode (a tf.compat.v1.Session script) with no "
            "writer; pass writer=<your tf.compat.v1.summary.FileWriter>, as in "
            "tb_modelmem.summary.run_metadata('ops', run_metadata, step=i, writer=train_writer)")
    try:
        if own is not None:
            add = own.add_summary
        if add is None and (tf is None or not tf.summary.should_record_summaries()):
            return False
        made = record() if callable(record) else record
        if add is not None:
            add(pb(name, made, description), step)
            return True
        assert tf is not None
        blob = payload.encode(made)
        md = metadata.create_summary_metadata(payload.kind_of(made), description or "")
        with tf.summary.experimental.summary_scope(name, "modelmem_summary") as (tag, _):
            return bool(tf.summary.write(tag=tag, tensor=tf.constant([blob]), step=step, metadata=md))
    except Exception as e:  # capture must never stop training
        warnings.warn(f"tb_modelmem: could not record {name!r}: {type(e).__name__}: {first_line(e)}",
                      RuntimeWarning, stacklevel=2)
        return False


def create_file_writer(logdir: str) -> _writer.FileWriter:
    """A writer of event files in ``logdir`` that needs no TensorFlow, used like ``tf.summary``'s:
    ``with create_file_writer("logs/run1").as_default(): tb_modelmem.summary.variables(...)``."""
    return _writer.FileWriter(logdir)


def pb(tag: str, record: Record, description: Optional[str] = None) -> summary_pb2.Summary:
    """A ``Summary`` proto holding ``record``, for writers outside TensorFlow."""
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]),
        string_val=[payload.encode(record)],
    )
    md = metadata.create_summary_metadata(payload.kind_of(record), description or "")
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=md, tensor=tensor)])


def breakdown(name: str, record: Breakdown, step: Optional[int] = None,
              description: Optional[str] = None, writer: Any = None) -> bool:
    """Write an already-built Breakdown (e.g. from a checkpoint file)."""
    return write(name, record, step, description, writer)


def op_trace(name: str, record: OpTrace, step: Optional[int] = None, description: Optional[str] = None,
             writer: Any = None) -> bool:
    """Write an already-reduced OpTrace."""
    return write(name, record, step, description, writer)


def load_bench(name: str, record: LoadBench, step: Optional[int] = None,
               description: Optional[str] = None, writer: Any = None) -> bool:
    """Write load-cost results of several save formats."""
    return write(name, record, step, description, writer)


def variables(name: str, model: Any = None, optimizer: Any = None, step: Optional[int] = None,
              description: Optional[str] = None, writer: Any = None) -> bool:
    """Record every variable of ``model`` and ``optimizer`` by role and layer.

    ``model`` may be a Keras model or layer, a ``tf.Module``, a ``tf.train.Checkpoint``
    (a GAN's models and optimizers together), a list of variables, or None for the TF1
    graph's global variables; ``optimizer`` one optimizer or a list. Reads shapes and
    dtypes only. In a TF1 session script, pass ``writer=`` your FileWriter.
    """
    def capture() -> Breakdown:
        from tb_modelmem.capture.variables import breakdown_of

        return breakdown_of(model, optimizer)

    return write(name, capture, step, description, writer)


def run_metadata(name: str, run_metadata: Any, step: Optional[int] = None, description: Optional[str] = None,
                 writer: Any = None, graph: Any = None) -> bool:
    """Record the per-op table of a ``tf.compat.v1.RunMetadata`` (FULL_TRACE step stats).

    ``graph``: the session's graph (default: the default graph, in graph mode): which
    variables each op reads places it on its layer. In a TF1 session script, pass
    ``writer=`` your FileWriter (``train_writer.add_run_metadata`` style).
    """
    def capture() -> OpTrace:
        from tb_modelmem.readers.run_metadata import reduce_run_metadata

        graphs, vocabulary = _session_graph(graph)
        return reduce_run_metadata(run_metadata, graphs, vocabulary)

    return write(name, capture, step, description, writer)


def _session_graph(graph: Any) -> Tuple[List[Any], Any]:
    """The TF1 graph's op graph and layers (its global variables), or nothing when eager."""
    import tensorflow as tf

    if graph is None:
        if tf.executing_eagerly():
            return [], None
        graph = tf.compat.v1.get_default_graph()
    from tb_modelmem.capture.opgraph import graph_info
    from tb_modelmem.capture.variables import breakdown_of
    from tb_modelmem.rules.join import Vocabulary

    with graph.as_default():
        vocabulary = Vocabulary.from_breakdown(breakdown_of(None, None)) if graph.get_collection("variables") else None
    return graph_info(graph).graphs, vocabulary


def oom(name: str, error: BaseException, step: Optional[int] = None, where: str = "",
        batch_size: Optional[int] = None, description: Optional[str] = None, writer: Any = None) -> bool:
    """Record a step that ran out of memory (``records.OomReport``): the allocation the error names
    (bytes, shape, dtype, op, device, allocator), the process's and devices' memory then. Call it
    before re-raising; ``MemoryCallback`` and ``trace()`` do. The tab shows it with the run's What if."""
    def capture() -> Any:
        from tb_modelmem.capture.process import oom_report

        return oom_report(error, where, batch_size)

    return write(name, capture, step, description, writer)


def memory(name: str = "memory", step: Optional[int] = None, census: bool = True, label: str = "",
           description: Optional[str] = None, writer: Any = None) -> bool:
    """Record one sample of process-wide memory (``records.MemorySample``): RSS and peak RSS,
    each GPU/TPU's allocator, and with ``census`` what is alive: tf.Variables (count, bytes,
    owner), graph operations by function, Keras models, the most numerous Python types.

    Call it once per model build (``step=`` the build index) or every N steps: the tab's
    Growth view flags what keeps growing and names it. RSS, device memory, live variables
    and graph ops also go to TensorBoard's Scalars dashboard as ``<name>/...`` scalars.
    """
    from tb_modelmem.capture.process import sample

    taken: List[Any] = []

    def capture() -> Any:
        taken.append(sample(census=census, label=label))
        return taken[0]

    written = write(name, capture, step, description, writer)
    if written and taken:
        try:
            _write_scalars(name, _scalars(taken[0]), step, writer)
        except Exception as e:  # the record is written; the Scalars dashboard copy is a convenience
            warnings.warn(f"tb_modelmem: could not write {name!r} scalars: {first_line(e)}", RuntimeWarning,
                          stacklevel=2)
    return written


def _write_scalars(name: str, scalars: List[Tuple[str, float]], step: Optional[int], writer: Any) -> None:
    """``<name>/<key>`` scalars to where ``write`` wrote the record."""
    add = adder(writer) if writer is not None else None
    own = _writer.default() if add is None else None
    if own is not None:
        add = own.add_summary
    if add is not None:
        from tensorboard.plugins.scalar.summary_v2 import scalar_pb

        for key, value in scalars:
            add(scalar_pb(f"{name}/{key}", value), step)
        return
    import tensorflow as tf  # write() wrote through tf.summary: TensorFlow is loaded

    for key, value in scalars:
        tf.summary.scalar(f"{name}/{key}", value, step=step)


def _scalars(found: Any) -> List[Tuple[str, float]]:
    out = [(key, float(getattr(found, key))) for key in ("rss_bytes", "live_variables", "live_variable_bytes",
                                                          "graph_ops") if getattr(found, key) is not None]
    out += [(f"{d.name.strip('/').replace(':', '_')}/bytes_in_use", float(d.current_bytes)) for d in found.devices]
    return out
