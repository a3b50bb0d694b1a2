"""Compact forms of a stored column, and their bounded decoding. No TF.

A payload's big columns repeat themselves: a trace's op names share long scope prefixes, its op
types and devices take a handful of values, its memory timeline climbs in steps. These forms
store what does not repeat (what they save: README's benchmark table, ``bench_trace``):

- ``DICTIONARY``: text with few distinct values, ``{"values": [...], "index": [...]}``.
- ``FRONT``: text in sorted order, each item as the length of the prefix it shares with the
  item before and the rest, ``{"shared": [...], "rest": [...]}``.
- ``DELTA``: whole numbers that change little, each as its difference from the one before,
  ``{"delta": [...]}``. They read back as ints (a whole float, 1024.0, as 1024: equal).

A plain list is a column too, so any writer's payload reads. A record accepts each form only in
the columns its writer puts it in (``records``). Decoding trusts nothing: it raises ValueError
with a short reason, and a column never expands past ``max_text`` characters.
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, List, Optional, Union

DICTIONARY, FRONT, DELTA = "dictionary", "front", "delta"
Column = Union[list, Dict[str, list]]
_KEYS = {DICTIONARY: {"values", "index"}, FRONT: {"shared", "rest"}, DELTA: {"delta"}}
_INT64 = 2**63


def encode(values: list, form: str) -> Column:
    """``values`` in ``form``; kept plain when they do not fit it (not text, not whole numbers)."""
    if form == DICTIONARY and _all_text(values):
        distinct = list(dict.fromkeys(values))
        position = {value: i for i, value in enumerate(distinct)}
        return {"values": distinct, "index": list(map(position.__getitem__, values))}
    if form == FRONT and _all_text(values):
        shared = _shared_prefixes(values)
        return {"shared": shared, "rest": [value[n:] for value, n in zip(values, shared)]}
    if form == DELTA and all(type(v) is int or (type(v) is float and v.is_integer()) for v in values):  # noqa: E721
        whole = list(map(int, values))
        if not whole or -_INT64 <= min(whole) <= max(whole) < _INT64:
            return {"delta": [b - a for a, b in zip([0] + whole, whole)]}
    return list(values)


def decode(column: Any, form: str, max_text: int) -> list:
    """The plain list a stored column stands for: ``column`` itself, or ``form`` decoded.
    ValueError says why it cannot be read (another form than the column's is a fault too)."""
    if isinstance(column, list):
        return column
    if not isinstance(column, dict) or set(column) != _KEYS[form]:
        raise ValueError(f"expected a list or a {form} column")
    if form == DICTIONARY:
        return _dictionary(column["values"], column["index"], max_text)
    if form == FRONT:
        return _front(column["shared"], column["rest"], max_text)
    steps = _integers(column["delta"], "delta", -2 * _INT64, 2 * _INT64)  # int64 totals step by less
    totals = list(itertools.accumulate(steps))
    if totals and not -_INT64 <= min(totals) <= max(totals) < _INT64:
        raise ValueError("a delta column adds up past the int64 range")
    return totals


def dictionary_values(column: Any) -> Optional[list]:
    """The values a dictionary column's rows take (check these, not every row), None for another
    form. Only for a column ``decode`` read."""
    return column["values"] if isinstance(column, dict) and set(column) == _KEYS[DICTIONARY] else None


def _dictionary(values: Any, index: Any, max_text: int) -> List[str]:
    if not isinstance(values, list) or not _all_text(values):
        raise ValueError("a dictionary column's values must be a list of text")
    positions = _integers(index, "index", 0)
    if positions and max(positions) >= len(values):
        raise ValueError(f"a dictionary column's index points past its {len(values)} values")
    column = list(map(values.__getitem__, positions))
    if sum(map(len, column)) > max_text:
        raise ValueError(f"a dictionary column stands for more than {max_text:,} characters; refused")
    return column


def _front(shared: Any, rest: Any, max_text: int) -> List[str]:
    lengths = _integers(shared, "shared", 0)
    if not isinstance(rest, list) or not _all_text(rest):
        raise ValueError("a front-coded column's rest must be a list of text")
    if len(lengths) != len(rest):
        raise ValueError(f"a front-coded column has {len(lengths)} shared lengths for {len(rest)} rests")
    size = sum(lengths) + sum(map(len, rest))
    if size > max_text:
        raise ValueError(f"a front-coded column expands past {max_text:,} characters; refused")
    column: List[str] = []
    append, before = column.append, ""
    for n, tail in zip(lengths, rest):
        before = before[:n] + tail
        append(before)
    if sum(map(len, column)) != size:  # an item claimed more of the one before than it has (found only then)
        i = next(i for i, n in enumerate(lengths) if n > (len(column[i - 1]) if i else 0))
        raise ValueError(f"a front-coded column's item {i} shares more characters than the item before has")
    return column


def _integers(values: Any, what: str, low: int, high: int = _INT64) -> List[int]:
    """``values`` when it is a list of integers (not bools) in [low, high); else ValueError."""
    if not isinstance(values, list) or not set(map(type, values)) <= {int}:
        raise ValueError(f"a compact column's {what} must be a list of integers")
    if values and not low <= min(values) <= max(values) < high:
        raise ValueError(f"a compact column's {what} holds an integer out of its range")
    return values


def _all_text(values: list) -> bool:
    return set(map(type, values)) <= {str}


_BLOCK, _MAX_CELLS = 4096, 2**22  # items compared as one array, and its most code points (16 MiB)


def _shared_prefixes(values: List[str]) -> List[int]:
    """For each item, the length of the prefix it shares with the item before (0 for the first).
    A block of items at a time as arrays of code points, compared row against row: a ResNet50
    trace's 8,356 names in ~3 ms, against ~13 ms pair by pair. Long items: pair by pair."""
    import numpy as np

    shared = [0] if values else []
    for start in range(1, len(values), _BLOCK):
        block = values[start - 1:start + _BLOCK]  # the item before the block, then the block
        width = max(1, max(map(len, block)))
        if width * len(block) > _MAX_CELLS:
            shared += map(_common_prefix, block[:-1], block[1:])
            continue
        codes = np.array(block, dtype=f"<U{width}").view(np.uint32).reshape(len(block), width)
        differ = codes[1:] != codes[:-1]  # padding is 0 on both sides: the min of the lengths decides
        first = np.where(differ.any(axis=1), differ.argmax(axis=1), width)
        lengths = np.fromiter(map(len, block), np.int64, len(block))
        shared += np.minimum(first, np.minimum(lengths[1:], lengths[:-1])).tolist()
    return shared


def _common_prefix(a: str, b: str) -> int:
    """Length of the prefix ``a`` and ``b`` share, by bisection: a few slice comparisons in C
    (faster than a loop over characters, or than comparing them as integers)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
