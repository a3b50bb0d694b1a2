"""``paused_gc()``: bulk work without the cyclic garbage collector. No TF.

Decoding a 200,000-op payload, reducing a profile, building a view: each makes millions of
acyclic objects (JSON lists, strings, rows), and every collection they trigger walks every
object of the process (a TensorBoard, a training script) for nothing. Bounded work only.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The collector off for the block (as it was after), whatever the block raises."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
