"""One-line error messages for users (TF's can run for pages). No TF import."""

from __future__ import annotations

import re
from typing import Optional

# What TensorFlow wraps its messages in: "{{function_node __wrapped__X_device_/job:...}} ... [Op:X] name: ".
_TF_DECORATION = re.compile(r"\{\{.*?\}\}\s*|\s*\[Op:[^\]]*\](\s*name:\s*\S*)?\s*$")


def first_line(e: BaseException, limit: Optional[int] = 200) -> str:
    """The first line of an error's message without TensorFlow's op decoration, at most
    ``limit`` characters; its type if empty."""
    text = getattr(e, "message", None) or (e.args[0] if isinstance(e, KeyError) and e.args else str(e))
    lines = str(text).strip().splitlines()  # KeyError: its args[0], as str() would quote it
    line = _TF_DECORATION.sub("", lines[0]).strip() if lines else ""
    return (line or type(e).__name__)[:limit]
