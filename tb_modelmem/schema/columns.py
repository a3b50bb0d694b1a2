"""Compact forms of a stored column, and their bounded decoding. No TF.

A payload's big columns repeat themselves: a trace's op names share long scope prefixes, its op
types and devices take a handful of values, its memory timeline climbs in steps. These forms
store what does not repeat (what they save: docs/BENCHMARKS.md, ``bench_trace``):

- ``DICTIONARY``: text with few distinct values, ``{"values": [...], "index": [...]}``. When
  rows repeat the row before (an op's layer, in name order), ``index`` holds one entry per run
  of equal rows and ``"runs"`` their lengths; such a column reads back only as long as its
  table's other columns say it is (``rows``), and to at most ``max_text // 32`` rows (4,194,304
  for a payload: more than its 128 MiB of JSON holds), so a few bytes of runs cannot stand for
  a trillion rows, nor each of a table's columns for the most its JSON allows.
- ``FRONT``: text in sorted order, each item as the length of the prefix it shares with the
  item before and the rest, ``{"shared": [...], "rest": [...]}``.
- ``DELTA``: whole numbers that change little, each as its difference from the one before,
  ``{"delta": [...]}``. They read back as ints (a whole float, 1024.0, as 1024: equal). With
  ``"per_unit": n`` they are counted in 1/n units and read back as floats (times, to 0.01 µs).
- ``FIXED``: numbers kept to a resolution, each as a whole count of 1/n units,
  ``{"per_unit": n, "units": [...]}``; they read back as floats (op times, to 0.01 µs).
- ``EXTENDS``: text whose values are mostly another column's (the timeline's op names are the
  op table's), as a dictionary whose values are that column's followed by ``more``:
  ``{"more": [...], "index": [...]}``.

A plain list is a column too, so any writer's payload reads. A record accepts each form only in
the columns its writer puts it in (``records``). Decoding trusts nothing: it raises ValueError
with a short reason, and a column never expands past ``max_text`` characters.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any, Dict, List, Optional, Union

DICTIONARY, FRONT, DELTA, FIXED, EXTENDS = "dictionary", "front", "delta", "fixed", "extends"
Column = Union[list, Dict[str, Any]]
_KEYS = {  # the keys each form may have
    DICTIONARY: ({"values", "index"}, {"values", "index", "runs"}), FRONT: ({"shared", "rest"},),
    DELTA: ({"delta"}, {"delta", "per_unit"}), FIXED: ({"units", "per_unit"},), EXTENDS: ({"more", "index"},),
}
_INT64 = 2**63
MAX_PER_UNIT = 10**9  # the finest resolution a stored column may claim (1e-9 of its unit)


def encode(values: list, form: str, per_unit: Optional[int] = None, base: Optional[list] = None) -> Column:
    """``values`` in ``form``; kept plain when they do not fit it (not text, not whole numbers,
    not finite). ``per_unit``: the resolution of FIXED and of a DELTA of non-whole numbers (they
    are rounded to it); ``base``: the column an EXTENDS column's values start with."""
    if form == DICTIONARY and _all_text(values):
        distinct = list(dict.fromkeys(values))
        position = {value: i for i, value in enumerate(distinct)}
        index = list(map(position.__getitem__, values))
        starts = [0] + list(itertools.compress(range(1, len(index)), map(operator.ne, index[1:], index)))
        if not index or len(starts) * 2 > len(index):  # runs would not save: one entry per row
            return {"values": distinct, "index": index}
        return {"values": distinct, "index": list(map(index.__getitem__, starts)),
                "runs": list(map(operator.sub, starts[1:] + [len(index)], starts))}
    if form == EXTENDS and base is not None and _all_text(values):
        position = dict(zip(reversed(base), range(len(base) - 1, -1, -1)))  # a repeated value: its first place
        more = list(dict.fromkeys(v for v in values if v not in position))
        position.update((value, len(base) + i) for i, value in enumerate(more))
        return {"more": more, "index": list(map(position.__getitem__, values))}
    if form == FRONT and _all_text(values):
        shared = _shared_prefixes(values)
        return {"shared": shared, "rest": [value[n:] for value, n in zip(values, shared)]}
    whole = _units(values, per_unit) if form in (DELTA, FIXED) else None
    if whole is not None and form == FIXED and per_unit is not None:
        return {"per_unit": per_unit, "units": whole}
    if whole is not None and form == DELTA:
        steps = {"delta": [b - a for a, b in zip([0] + whole, whole)]}
        return dict(steps, per_unit=per_unit) if per_unit is not None else steps
    return list(values)


def _units(values: list, per_unit: Optional[int]) -> Optional[List[int]]:
    """``values`` as whole counts of 1/``per_unit`` (rounded), or as they are when whole numbers
    and no ``per_unit``; None when some value is not a finite number or its count leaves int64."""
    if not set(map(type, values)) <= {int, float}:
        return None
    try:
        if per_unit is None:
            if not all(map(float.is_integer, map(float, values))):
                return None
            whole = list(map(int, values))
        else:
            whole = [round(v * per_unit) for v in values]
    except (OverflowError, ValueError):  # an infinity or a NaN
        return None
    return whole if not whole or -_INT64 <= min(whole) <= max(whole) < _INT64 else None


def decode(column: Any, form: str, max_text: int, base: Optional[list] = None, rows: Optional[int] = None) -> list:
    """The plain list a stored column stands for: ``column`` itself, or ``form`` decoded
    (``base``: the checked column an EXTENDS column's values start with; ``rows``: how many rows
    a run-length DICTIONARY column must have, its table's ``length``). ValueError says why it
    cannot be read (another form than the column's is a fault too)."""
    if isinstance(column, list):
        return column
    if not isinstance(column, dict) or set(column) not in _KEYS[form]:
        raise ValueError(f"expected a list or a {form} column")
    if form == DICTIONARY and "runs" in column:
        return _runs(column["values"], column["index"], column["runs"], max_text, rows)
    if form == DICTIONARY:
        return _dictionary(column["values"], column["index"], max_text)
    if form == EXTENDS:
        more = column["more"]
        if not isinstance(more, list) or not _all_text(more):
            raise ValueError("an extends column's more must be a list of text")
        return _dictionary(list(base or []) + more, column["index"], max_text)
    if form == FRONT:
        return _front(column["shared"], column["rest"], max_text)
    per_unit = column.get("per_unit")
    if per_unit is not None and (type(per_unit) is not int or not 1 <= per_unit <= MAX_PER_UNIT):
        raise ValueError(f"a {form} column's per_unit must be an integer from 1 to {MAX_PER_UNIT:,}")
    if form == FIXED:
        return list(map(operator.truediv, _integers(column["units"], "units", -_INT64), itertools.repeat(per_unit)))
    steps = _integers(column["delta"], "delta", -2 * _INT64, 2 * _INT64)  # int64 totals step by less
    totals = list(itertools.accumulate(steps))
    if totals and not -_INT64 <= min(totals) <= max(totals) < _INT64:
        raise ValueError("a delta column adds up past the int64 range")
    return totals if per_unit is None else list(map(operator.truediv, totals, itertools.repeat(per_unit)))


def length(column: Any) -> Optional[int]:
    """How many rows a stored column has, when it says so itself (a list, or any form but a
    run-length dictionary); else None."""
    if isinstance(column, list):
        return len(column)
    if not isinstance(column, dict) or "runs" in column:
        return None
    for key in ("index", "shared", "units", "delta"):
        if isinstance(column.get(key), list):
            return len(column[key])
    return None


def dictionary_values(column: Any) -> Optional[list]:
    """The values a dictionary column's rows take (check these, not every row), None for another
    form. Only for a column ``decode`` read."""
    return column["values"] if isinstance(column, dict) and set(column) in _KEYS[DICTIONARY] else None


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


def _runs(values: Any, index: Any, runs: Any, max_text: int, rows: Optional[int]) -> List[str]:
    if rows is None:
        raise ValueError("a run-length column needs another column that says the table's length")
    lengths = _integers(runs, "runs", 1)
    if len(lengths) != len(index):
        raise ValueError(f"a run-length column has {len(index)} values for {len(lengths)} runs")
    if sum(lengths) != rows:
        raise ValueError(f"a run-length column's runs add up to {sum(lengths):,} rows, not its table's {rows:,}")
    if rows > max_text // 32:
        raise ValueError(f"a run-length column stands for more than {max_text // 32:,} rows; refused")
    each = _dictionary(values, index, max_text)  # the value of each run, checked
    if sum(map(operator.mul, map(len, each), lengths)) > max_text:
        raise ValueError(f"a dictionary column stands for more than {max_text:,} characters; refused")
    return list(itertools.chain.from_iterable(map(itertools.repeat, each, lengths)))


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
