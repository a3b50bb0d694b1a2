"""DataType enum values as names and element sizes, the one table every reader asks. No TF.

Checkpoints, GraphDefs, RunMetadata and XSpace all carry TensorFlow's ``DataType`` enum;
reading it here keeps "float" == "float32" and a float32 element == 4 bytes one rule.
"""

from __future__ import annotations

import functools

from tensorboard.compat.proto import types_pb2

from tb_modelmem.schema.dtypes import ALIASES, item_bytes

__all__ = ["dtype_name", "dtype_size", "name_size"]

@functools.lru_cache(maxsize=None)
def dtype_name(dtype: int) -> str:
    """numpy-style name of a DataType enum value: DT_FLOAT -> "float32" (a ``_REF`` type as its value type)."""
    try:
        name = types_pb2.DataType.Name(dtype)[len("DT_"):].lower()
    except ValueError:
        return f"dtype{dtype}"
    name = name[:-len("_ref")] if name.endswith("_ref") else name
    return ALIASES.get(name, name)


def dtype_size(dtype: int) -> int:
    """Bytes per element of a DataType enum value; 0 for strings, handles and unknown values."""
    return item_bytes(dtype_name(dtype))


def name_size(name: str) -> int:
    """Bytes per element of a dtype by name ("float32", "float", "torch.bfloat16"); 0 when it has no fixed size."""
    return item_bytes(name)
