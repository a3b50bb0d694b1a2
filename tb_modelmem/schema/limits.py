"""What a record or payload may hold, and the bounded helpers that check untrusted values
against it: one hostile summary costs the backend a bounded amount, once.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

MAX_NESTING = 32  # deepest free-form JSON (optimizer config, timeline point) a record accepts
MAX_STRING = 65536  # longest string a record accepts (a name, a shape, a config value)
MAX_INT = 2**63  # integers are int64, as TensorFlow's sizes are: a 10**4000 "size" is refused

# What one payload may inflate to: a 200,000-op trace is 1.9 MB stored and 13 MB of JSON
# (benchmarks/bench_serving.py), a bomb is refused, so one hostile summary costs the backend a
# bounded amount, once. Its one front-coded column (op names) expands to at most this many
# characters, and each dictionary column stands for at most this many (its rows share the strings).
MAX_DECODED_BYTES = 128 * 2**20


_PREVIEW = reprlib.Repr()  # bounded depth and length: repr() of decoded JSON could recurse past the limit
_PREVIEW.maxlevel, _PREVIEW.maxstring, _PREVIEW.maxother = 4, 60, 60


def preview(value: Any) -> str:
    """A short repr of a value from untrusted JSON, for error messages (at most 60 characters)."""
    text = _PREVIEW.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_number(value: Any) -> bool:
    """A finite JSON number (not a bool, not NaN or Infinity, not an integer past a float's range)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False

