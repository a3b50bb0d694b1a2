"""Write a generated source file, or (``--check``) say whether the one on disk is current.

Shared by the generators in this folder, so each says only what it generates.
"""

from __future__ import annotations

import argparse
import os
from typing import Callable


def main(output: str, render: Callable[[], str], description: str, regenerate: str) -> int:
    """``render()`` the file's text; write it to ``output``, or with ``--check`` exit 1 if it differs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help=f"only check that {os.path.basename(output)} is current")
    args = parser.parse_args()
    text = render()
    if args.check:
        with open(output) as f:
            current = f.read() == text
        print("up to date" if current else f"{output} is out of date: run {regenerate}")
        return 0 if current else 1
    with open(output, "w") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(output)}")
    return 0
