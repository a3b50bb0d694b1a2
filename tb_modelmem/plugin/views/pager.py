"""Paging, sorting and filtering one table's columns: what every table of the tab asks for."""

from __future__ import annotations

import collections
import heapq
import re
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

PAGE = 100  # rows per page unless the request asks for another size
FIRST_PAGES = 5000  # rows from the top of a table served without sorting the whole table
MAX_PAGE = 2000
_FIELD_ALIASES = {"type": "op_type", "source": "bytes_source", "op": "name", "variable": "name"}
_TERM = re.compile(r'(?:[^\s"]+|"[^"]*"?)+')  # a run of characters, spaces kept inside "double quotes"


class Pager:
    """Sort orders and filter results over the columns of one table, cached (a few per table)."""

    def __init__(self, columns: Dict[str, list], default_sort: str) -> None:
        self.columns = columns
        self.length = len(next(iter(columns.values()))) if columns else 0
        self.default_sort = default_sort
        self._orders: Dict[Tuple[str, bool], List[int]] = {}
        self._filters: "collections.OrderedDict[str, List[int]]" = collections.OrderedDict()
        self._lowered: Dict[str, List[str]] = {}
        self._lock = threading.Lock()

    def page(self, offset: int = 0, limit: int = PAGE, sort: Optional[str] = None, order: str = "desc",
             query: str = "", fields: Sequence[str] = ()) -> Dict[str, Any]:
        """``{"total", "matched", "offset", "rows": [...]}`` of the rows in the order and filter asked."""
        key = sort if sort in self.columns else self.default_sort
        limit = max(0, min(limit, MAX_PAGE))
        names = [f for f in (fields or self.columns) if f in self.columns]
        matched = self._filter(query)
        if matched is None and not self._cached(key, order != "asc") and offset + limit <= FIRST_PAGES:
            # the first screens of an unfiltered table: the rows asked for, without sorting them all
            chosen = self._first(key, order != "asc", offset + limit)[offset:offset + limit]
            count = self.length
        else:
            indices = self._order(key, order != "asc")
            if matched is not None:
                allowed = set(matched)
                indices = [i for i in indices if i in allowed]
            chosen, count = indices[offset:offset + limit], len(indices)
        return {"total": self.length, "matched": count, "offset": offset, "sort": key,
                "order": "asc" if order == "asc" else "desc", "rows": self.rows(chosen, names)}

    def top(self, key: str, n: int) -> List[int]:
        """Indices of the ``n`` largest positive numbers of a column, largest first (no full sort;
        None, unknown, counts as nothing)."""
        values = self.columns[key]
        if None in values:
            values = [v or 0 for v in values]
        return [i for i in heapq.nlargest(n, range(len(values)), key=values.__getitem__) if values[i] > 0]

    def rows(self, indices: Sequence[int], fields: Sequence[str]) -> List[Dict[str, Any]]:
        return [{f: self.columns[f][i] for f in fields} for i in indices]

    def _match(self, term: str, candidates: Sequence[int]) -> List[int]:
        for op in ("^=", "=", ":"):
            field, sep, value = term.partition(op)
            field = _FIELD_ALIASES.get(field.lower(), field.lower())
            if sep and field in self.columns and (value or op != ":"):
                column = self.columns[field]
                if op == "^=":
                    under = value.rstrip("/") + "/"
                    return [i for i in candidates if str(column[i]) == value or str(column[i]).startswith(under)]
                if op == "=":
                    return [i for i in candidates if ("" if column[i] is None else str(column[i])) == value]
                texts = self._texts(field)
                value = value.lower()
                return [i for i in candidates if value in texts[i]]
        needle = term.lower()
        every = [self._texts(c) for c in self.columns]
        return [i for i in candidates if any(needle in t[i] for t in every)]

    def _texts(self, column: str) -> List[str]:
        """A column's values as lower-case text, made once (filters ask again as the user types)."""
        with self._lock:
            found = self._lowered.get(column)
        if found is None:
            values = self.columns[column]
            if set(map(type, values)) <= {str}:  # once per distinct value: repeated text shares it
                lowered = {value: value.lower() for value in dict.fromkeys(values)}
                found = list(map(lowered.__getitem__, values))
            else:
                found = [_text(v) for v in values]
            with self._lock:
                self._lowered[column] = found
        return found

    def _cached(self, key: str, descending: bool) -> bool:
        with self._lock:
            return (key, descending) in self._orders

    def _first(self, key: str, descending: bool, n: int) -> List[int]:
        """The first ``n`` rows of a numeric column's order (empty values last), by a heap."""
        values = self.columns[key]
        filled = [i for i, v in enumerate(values) if v is not None] if None in values else range(len(values))
        if not all(isinstance(values[i], (int, float)) for i in filled[:64]):
            return self._order(key, descending)[:n]
        pick = heapq.nlargest if descending else heapq.nsmallest
        first = pick(n, filled, key=values.__getitem__)
        if len(first) < n:  # not enough numbers: the empty ones follow
            first += [i for i, v in enumerate(values) if v is None][:n - len(first)]
        return first

    def _order(self, key: str, descending: bool) -> List[int]:
        with self._lock:
            found = self._orders.get((key, descending))
        if found is None:
            values = self.columns[key]
            empty = [i for i, v in enumerate(values) if v is None or v == ""]
            filled = [i for i, v in enumerate(values) if not (v is None or v == "")]
            kinds = {type(values[i]) for i in filled}
            try:
                if kinds <= {int, float}:  # numbers compare as they are: no Python key function per row
                    filled.sort(key=values.__getitem__, reverse=descending)
                else:
                    filled.sort(key=lambda i: _sort_key(values[i]), reverse=descending)
            except TypeError:  # mixed types in one column: compare their text
                filled.sort(key=lambda i: str(values[i]), reverse=descending)
            found = filled + empty  # empty values last either way
            with self._lock:
                self._orders[(key, descending)] = found
        return found

    def _filter(self, query: str) -> Optional[List[int]]:
        """Indices of rows matching every term: ``text`` (any column contains it, any case),
        ``field:text`` (that column contains it), ``field=value`` (that column is exactly it;
        ``field=`` for empty) and ``field^=path`` (a path equal to it or under it, "a/b/..."). Double
        quotes keep spaces in a term: ``name="aten::div (optimizer)"``."""
        terms = split_terms(query)[:16]
        if not terms:
            return None
        with self._lock:
            if query in self._filters:
                self._filters.move_to_end(query)
                return self._filters[query]
        candidates: Sequence[int] = range(self.length)
        for term in terms:
            candidates = self._match(term, candidates)
        found = list(candidates)
        with self._lock:
            self._filters[query] = found
            while len(self._filters) > 8:
                self._filters.popitem(last=False)
        return found


def split_terms(query: str) -> List[str]:
    """A filter's terms: split at spaces outside double quotes, the quotes dropped (an unclosed one
    runs to the end)."""
    return [t for t in (m.replace('"', "") for m in _TERM.findall(query)) if t]


def _sort_key(value: Any) -> Any:
    if isinstance(value, list):
        return len(value)
    if isinstance(value, str):
        return value.lower()
    return value


def _text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(map(str, value)).lower()
    return str(value).lower() if value is not None else ""
