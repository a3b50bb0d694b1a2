"""What an out-of-memory error says, read from the text TensorFlow or XLA put in it: the allocation
that failed (bytes, shape, dtype) and where (device, allocator, op). No TF.

TensorFlow: ``OOM when allocating tensor with shape[64,1048576] and type float on
/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc`` and the node in
``[[{{node functional/dense/MatMul}}]]`` (or ``[Op:MatMul]`` eagerly). XLA (JAX, Keras on JAX, TF
``jit_compile``): ``RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1073741824 bytes``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, Optional

from tb_modelmem.schema.dtypes import item_bytes

_TF = re.compile(r"OOM when allocating tensor with shape\s*\[([0-9, ]*)\] and type (\w+) on (\S+) by allocator (\S+)")
_NODE = re.compile(r"\{\{node ([^}]{1,1000})\}\}")
_EAGER_OP = re.compile(r"\[Op:([\w.]{1,200})")
_XLA_BYTES = re.compile(r"(?:Out of memory (?:while trying to allocate|allocating)|[Ff]ailed to allocate"
                        r"(?: request for)?) ([0-9][0-9,.]*)\s*(B|bytes|KiB|MiB|GiB|TiB)?")
_UNITS = {None: 1, "B": 1, "bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_TF_TYPES = ("ResourceExhaustedError",)
_XLA_TYPES = ("XlaRuntimeError", "JaxRuntimeError")  # jaxlib's, jax.errors'
_OOM_WORDS = ("RESOURCE_EXHAUSTED", "OOM when allocating", "Out of memory while trying to allocate")


def is_oom(error: BaseException) -> bool:
    """Whether ``error`` is a device or host running out of memory (TF's ResourceExhaustedError, an
    XLA runtime error saying RESOURCE_EXHAUSTED), without importing TF or JAX."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if names.intersection(_TF_TYPES):
        return True
    return bool(names.intersection(_XLA_TYPES)) and "RESOURCE_EXHAUSTED" in str(error)[:4000]


def parse(message: str) -> Dict[str, Any]:
    """``{"requested_bytes", "shape", "dtype", "device", "allocator", "op"}`` from an OOM message;
    what it does not say is None or ""."""
    text = message[:100_000]
    found: Dict[str, Any] = {"requested_bytes": None, "shape": "", "dtype": "", "device": "", "allocator": "",
                             "op": ""}
    tf = _TF.search(text)
    if tf:
        dims = [int(d) for d in tf.group(1).replace(" ", "").split(",") if d]
        found.update(shape=f"[{','.join(map(str, dims))}]", dtype=_dtype(tf.group(2)), device=tf.group(3),
                     allocator=tf.group(4))
        size = item_bytes(tf.group(2))
        found["requested_bytes"] = math.prod(dims) * size if size else None
    else:
        xla = _XLA_BYTES.search(text)
        if xla:
            found["requested_bytes"] = _bytes(xla.group(1), xla.group(2))
    node = _NODE.search(text) or _EAGER_OP.search(text)
    if node:
        found["op"] = node.group(1)
    return found


def key_lines(message: str, most: int = 4000) -> str:
    """The lines of an OOM message that say what failed (TF puts them after the traceback of where
    the op was defined), else its start; at most ``most`` characters."""
    lines = message[:100_000].splitlines()
    key = [line.strip() for line in lines if any(w in line for w in _OOM_WORDS + ("{{node ", "[Op:"))]
    text = "\n".join(dict.fromkeys(key)) if key else message
    return text if len(text) <= most else text[:most] + " ..."


def _dtype(name: str) -> str:
    return {"float": "float32", "double": "float64", "half": "float16"}.get(name, name)


def _bytes(number: str, unit: Optional[str]) -> Optional[int]:
    try:
        return int(float(number.replace(",", "")) * _UNITS.get(unit, 1))
    except ValueError:
        return None
