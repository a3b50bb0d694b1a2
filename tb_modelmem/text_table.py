"""Plain-text tables for the terminal (the CLI's reports)."""

from __future__ import annotations

from typing import Sequence


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]], left: int = 1) -> str:
    """Columns padded to their widest cell; the first ``left`` columns flush left, numbers flush right."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]

    def line(cells: Sequence[object]) -> str:
        return "  ".join(str(c).ljust(w) if i < left else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(row) for row in rows])
