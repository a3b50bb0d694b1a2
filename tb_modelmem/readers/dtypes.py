"""DataType enum values as names and element sizes, the one table every reader asks. No TF.

Checkpoints, GraphDefs, RunMetadata and XSpace all carry TensorFlow's ``DataType`` enum;
reading it here keeps "float" == "float32" and a float32 element == 4 bytes one rule.
"""

from __future__ import annotations

import functools

from tensorboard.compat.proto import types_pb2

__all__ = ["dtype_name", "dtype_size", "name_size"]

_ALIASES = {"float": "float32", "double": "float64", "half": "float16"}
# Bytes per element by dtype name; what is not here (string, resource, variant) is no fixed-size number.
_ITEM_BYTES = {"float32": 4, "float64": 8, "int32": 4, "uint8": 1, "int16": 2, "int8": 1, "complex64": 8, "int64": 8,
               "bool": 1, "qint8": 1, "quint8": 1, "qint32": 4, "bfloat16": 2, "qint16": 2, "quint16": 2,
               "uint16": 2, "complex128": 16, "float16": 2, "uint32": 4, "uint64": 8, "float8_e5m2": 1,
               "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e4m3b11fnuz": 1, "float8_e5m2fnuz": 1,
               "int4": 1, "uint4": 1, "int2": 1, "uint2": 1, "float4_e2m1fn": 1}


@functools.lru_cache(maxsize=None)
def dtype_name(dtype: int) -> str:
    """numpy-style name of a DataType enum value: DT_FLOAT -> "float32" (a ``_REF`` type as its value type)."""
    try:
        name = types_pb2.DataType.Name(dtype)[len("DT_"):].lower()
    except ValueError:
        return f"dtype{dtype}"
    name = name[:-len("_ref")] if name.endswith("_ref") else name
    return _ALIASES.get(name, name)


def dtype_size(dtype: int) -> int:
    """Bytes per element of a DataType enum value; 0 for strings, handles and unknown values."""
    return _ITEM_BYTES.get(dtype_name(dtype), 0)


def name_size(name: str) -> int:
    """Bytes per element of a dtype by name ("float32", "float", "torch.bfloat16"); 0 when it has no fixed size."""
    name = name.rpartition(".")[2].lower()
    return _ITEM_BYTES.get(_ALIASES.get(name, name), 0)
