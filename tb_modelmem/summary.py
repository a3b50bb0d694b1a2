"""Summary-writer API in the manner of ``tf.summary``: default writer, ``step=``, name scopes.

Each function captures one record (shapes and dtypes only, never tensor
values) and writes it as a one-element string tensor with data_class
BLOB_SEQUENCE. Work happens only when the default writer will record.
Capture failures warn and return False: they never stop training.
``*_pb`` functions build a ``Summary`` proto without TensorFlow.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional

from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

from tb_modelmem import metadata, payload
from tb_modelmem.records import Breakdown, LoadBench, OpTrace, Record


def write(name: str, record: "Record | Callable[[], Record]", step: Optional[int] = None,
          description: Optional[str] = None) -> bool:
    """Write ``record`` (or the record a callable makes, lazily) under ``name``.

    Returns True if a summary was written, False if there is no default
    writer, recording is off, or capture failed (with a warning).
    """
    import tensorflow as tf

    if not tf.summary.should_record_summaries():
        return False
    try:
        made = record() if callable(record) else record
        blob = payload.encode(made)
        md = metadata.create_summary_metadata(payload.kind_of(made), description or "")
        with tf.summary.experimental.summary_scope(name, "modelmem_summary") as (tag, _):
            return bool(tf.summary.write(tag=tag, tensor=tf.constant([blob]), step=step, metadata=md))
    except Exception as e:  # capture must never stop training
        warnings.warn(f"tb_modelmem: could not record {name!r}: {type(e).__name__}: {e}", RuntimeWarning,
                      stacklevel=2)
        return False


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
              description: Optional[str] = None) -> bool:
    """Write an already-built Breakdown (e.g. from a checkpoint file)."""
    return write(name, record, step, description)


def op_trace(name: str, record: OpTrace, step: Optional[int] = None, description: Optional[str] = None) -> bool:
    """Write an already-reduced OpTrace."""
    return write(name, record, step, description)


def load_bench(name: str, record: LoadBench, step: Optional[int] = None,
               description: Optional[str] = None) -> bool:
    """Write load-cost results of several save formats."""
    return write(name, record, step, description)


def variables(name: str, model: Any = None, optimizer: Any = None, step: Optional[int] = None,
              description: Optional[str] = None) -> bool:
    """Record every variable of ``model`` and ``optimizer`` by role and layer.

    ``model`` may be a Keras model or layer, a ``tf.Module``, a
    ``tf.train.Checkpoint``, a list of variables, or None for the TF1 graph's
    global variables. Reads shapes and dtypes only.
    """
    def capture() -> Breakdown:
        from tb_modelmem.capture.variables import breakdown

        return breakdown(model, optimizer)

    return write(name, capture, step, description)


def run_metadata(name: str, run_metadata: Any, step: Optional[int] = None,
                 description: Optional[str] = None) -> bool:
    """Record the per-op table of a ``tf.compat.v1.RunMetadata`` (FULL_TRACE step stats)."""
    def capture() -> OpTrace:
        from tb_modelmem.capture.run_metadata import reduce_run_metadata

        return reduce_run_metadata(run_metadata)

    return write(name, capture, step, description)
