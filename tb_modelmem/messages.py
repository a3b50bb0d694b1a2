"""One-line error messages for users (TF's can run for pages). No TF import."""

from __future__ import annotations

from typing import Optional


def first_line(e: BaseException, limit: Optional[int] = 200) -> str:
    """The first line of an error's message, at most ``limit`` characters; its type if empty."""
    text = getattr(e, "message", None) or (e.args[0] if isinstance(e, KeyError) and e.args else str(e))
    lines = str(text).strip().splitlines()  # KeyError: its args[0], as str() would quote it
    return (lines[0] if lines else type(e).__name__)[:limit]
