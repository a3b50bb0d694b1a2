"""What the tab shows, computed from decoded records. Pure functions and prepared views; no I/O.

A prepared view (``BreakdownView``, ``TraceView``) is built once per item (and, for a trace,
per breakdown it is joined with) and cached by the store; a request then only pages,
sorts and filters it. Joins and aggregations are linear in ops + layers.
"""

from __future__ import annotations

import collections
import functools
import heapq
import itertools
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tb_modelmem import roles
from tb_modelmem.join import Joiner, LayerTree, Vocabulary, phase_by_name
from tb_modelmem.records import (
    ACTIVATIONS, BACKWARD, BEFORE_WINDOW, EXECUTOR, FORWARD, GRADIENTS, INPUT, LOSS, MEASURED, METRICS,
    NON_TRAINABLE, NON_TRAINABLE_CATEGORY, OPTIMIZER, OPTIMIZER_SLOT, OPTIMIZER_SLOTS_CATEGORY, OTHER,
    PEAK_CATEGORIES, ROLES, STEP_CATEGORIES, UNATTRIBUTED, UNKNOWN_BYTES, WEIGHT, WEIGHTS_CATEGORY, Breakdown,
    LoadBench, OpTrace, element_counts,
)
from tb_modelmem.rollup import layer_columns, owner_column

# Ops whose output is a view of an existing buffer (a variable, an input): no new bytes.
ALIASING_OPS = frozenset({"ReadVariableOp", "Identity", "Reshape", "Squeeze", "ExpandDims", "_Arg", "_Retval",
                          "VarHandleOp", "Const", "NoOp", "StopGradient"})
PAGE = 100  # rows per page unless the request asks for another size
FIRST_PAGES = 5000  # rows from the top of a table served without sorting the whole table
_FIELD_ALIASES = {"type": "op_type", "source": "bytes_source", "op": "name", "variable": "name"}
MAX_PAGE = 2000
MAX_BUFFERS = 5000  # buffers at the peak listed in one answer (the largest; the rest are counted)
_GROUP_LABEL = {FORWARD: "(forward, no layer)", BACKWARD: "(backward, no layer)", OPTIMIZER: "(optimizer)",
                LOSS: "(loss)", METRICS: "(metrics)", INPUT: "(input)", EXECUTOR: "(executor)", "": "(unattributed)"}
OP_FIELDS = ("name", "op_type", "layer", "phase", "device", "calls", "time_us", "mean_us", "output_bytes",
             "output_shape", "output_dtype", "bytes_source", "alloc_bytes", "new_bytes", "fused")
VARIABLE_FIELDS = ("name", "layer", "shape", "dtype", "params", "bytes", "role", "slot", "slot_of", "device",
                   "replicas")


# --- paging ---------------------------------------------------------------------------------

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
        ``field=`` for empty) and ``field^=path`` (a path equal to it or under it, "a/b/...")."""
        terms = [t for t in query.split() if t][:16]
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


# --- layer trees ----------------------------------------------------------------------------

def as_columns(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Rows as ``{field: [value per row]}`` (a dict field as ``{field: {key: [...]}}``): the
    compact form an answer carries a layer tree in, its field names once instead of once per
    row (the tab's api.js ``rowsOf`` turns it back). A row without a field has None there."""
    columns: Dict[str, Any] = {}
    for field in dict.fromkeys(itertools.chain.from_iterable(rows)):
        values = [row.get(field) for row in rows]
        if any(issubclass(kind, dict) for kind in set(map(type, values))):
            parts = [v if isinstance(v, dict) else {} for v in values]
            columns[field] = {k: [part.get(k) for part in parts]
                              for k in dict.fromkeys(itertools.chain.from_iterable(parts))}
        else:
            columns[field] = values
    return {"length": len(rows), "columns": columns}


def layer_tree(paths: Sequence[str], own: Dict[str, Any], sums: Sequence[str] = (),
               nested: Sequence[str] = ()) -> Dict[str, Any]:
    """The layer tree as answers carry it (``as_columns`` form): one row per layer and per
    composite layer above it, depth first in the order given, with ``layer``, ``label``,
    ``depth`` and ``leaf``. ``own``: each path's own figures, ``{field: [value per path]}``
    (a ``nested`` field ``{key: [...]}``). A composite row adds its descendants' ``sums`` and
    ``nested`` numbers to its own; a field no row of it reaches is None (a sum, 0).

    Built column by column, never a dict per row: a 10,000-variable model has ~1,700 rows."""
    tree = LayerTree(paths)
    position = {path: i for i, path in enumerate(paths)}  # the last of a repeated path, as before
    order: List[str] = []
    depth: List[int] = []
    parent: List[int] = []
    leaf: List[bool] = []
    # Depth first, iteratively (a path may have thousands of components).
    stack = [(root, 0, -1) for root in reversed(list(tree.children[""].values()))]
    while stack:
        path, level, up = stack.pop()
        children = tree.children[path]
        order.append(path)
        depth.append(level)
        parent.append(up)
        leaf.append(not children)
        if children:
            here = len(order) - 1
            stack.extend((child, level + 1, here) for child in reversed(list(children.values())))
    source = [position.get(path) for path in order]
    folding = [(row, up) for row, up in zip(range(len(order) - 1, -1, -1), reversed(parent)) if up >= 0]

    def pick(values: Sequence[Any], default: Any) -> List[Any]:
        return [default if i is None else values[i] for i in source]

    def fold(values: List[Any]) -> List[Any]:
        """Each row's figure plus its descendants', deepest first; None adds nothing."""
        for row, up in folding:
            value = values[row]
            if value is not None:
                values[up] = value if values[up] is None else values[up] + value
        return values

    columns: Dict[str, Any] = {}
    for field, values in own.items():
        if field in nested:
            parts = values if isinstance(values, dict) else {}
            columns[field] = {key: fold(pick(part, None)) for key, part in parts.items()}
        elif field in sums:
            columns[field] = fold([0 if v is None else v for v in pick(values, 0)])
        else:
            columns[field] = pick(values, None)
    for field in sums:
        columns.setdefault(field, [0] * len(order))
    columns.update(layer=order, label=[path.rpartition("/")[2] for path in order], depth=depth, leaf=leaf)
    return {"length": len(order), "columns": columns}


def appended(table: Dict[str, Any], rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """``table`` (``as_columns`` form) with ``rows`` after its own rows."""
    more = as_columns(rows)
    n, m = table["length"], more["length"]

    def joined(a: Any, b: Any) -> Any:
        if isinstance(a, dict) or isinstance(b, dict):
            a, b = a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {}
            return {key: joined(a.get(key), b.get(key)) for key in dict.fromkeys([*a, *b])}
        return (a if a is not None else [None] * n) + (b if b is not None else [None] * m)

    columns = {field: joined(table["columns"].get(field), more["columns"].get(field))
               for field in dict.fromkeys([*table["columns"], *more["columns"]])}
    return {"length": n + m, "columns": columns}


# --- breakdowns -----------------------------------------------------------------------------

class BreakdownView:
    """A breakdown ready to serve: totals, the layer tree, and its variables as a pageable table."""

    def __init__(self, record: Breakdown) -> None:
        self.record = record
        columns = dict(record.variables.columns)
        owners = owner_column(record)
        own = layer_columns(record, owners)
        self.totals = {role: sum(values) for role, values in own["bytes"].items()}  # every variable is on one layer
        # as answers carry it: built once, held (and counted) by the store
        self.layer_table = layer_tree(own.pop("name"), own, sums=("params", "total_bytes"), nested=("bytes",))
        self._owners = owners
        columns["params"] = element_counts(columns["shape"])
        self.total_params = sum(itertools.compress(columns["params"], roles.param_flags(columns["name"],
                                                                                        columns["role"])))
        self.variables = Pager({f: columns[f] for f in VARIABLE_FIELDS}, "bytes")

    @functools.cached_property
    def vocabulary(self) -> Vocabulary:
        """Its layers and variable owners, for joining a trace (built when the first trace asks)."""
        return Vocabulary.from_breakdown(self.record, self._owners)

    def summary(self) -> Dict[str, Any]:
        record = self.record
        return {
            "source": record.source, "model_name": record.model_name, "optimizer": record.optimizer,
            "file_bytes": record.file_bytes, "overhead": record.overhead, "totals": self.totals,
            "total_bytes": sum(self.totals.values()), "variable_count": len(record.variables),
            "total_params": self.total_params,
            "layers": self.layer_table,
        }


# --- op traces ------------------------------------------------------------------------------

class TraceView:
    """A trace joined with one breakdown (or none): ops on the model's layer tree, the peak by
    category, and the ops as a pageable table."""

    def __init__(self, trace: OpTrace, breakdown: Optional[BreakdownView]) -> None:
        self.trace = trace
        self.breakdown = breakdown
        ops = trace.ops
        names, types = ops.column("name"), ops.column("op_type")
        phases = [p or phase_by_name(n, t) for p, n, t in zip(ops.column("phase"), names, types)]
        vocabulary = breakdown.vocabulary if breakdown else Vocabulary(
            trace.layers or sorted({layer for layer in ops.column("layer") if layer}))
        self.tree = LayerTree(vocabulary.layers)
        known = self.tree.children
        layers = [layer if layer in known and layer else "" for layer in ops.column("layer")]
        # Ops the trace did not place on one of these layers (an old trace, a trace joined to a
        # breakdown it was not captured with) are placed by name, learning from those names only.
        unplaced = ([i for i, (layer, phase) in enumerate(zip(layers, phases)) if not layer
                     and phase not in (INPUT, EXECUTOR)] if breakdown is not None and "" in layers else [])
        if unplaced:
            joiner = Joiner(vocabulary, (), [names[i] for i in unplaced])
            for i in unplaced:
                layers[i] = joiner.assign(names[i], types[i])[0]
        self.layer_column = layers
        self.phase_column = phases
        calls, time_us = ops.column("calls"), ops.column("time_us")
        new_bytes = [0 if t in ALIASING_OPS or (s == MEASURED and a == 0) else None if s == UNKNOWN_BYTES else o
                     for t, s, o, a in zip(types, ops.column("bytes_source"), ops.column("output_bytes"),
                                           ops.column("alloc_bytes"))]
        columns = dict(ops.columns)
        columns.update(layer=layers, phase=phases, new_bytes=new_bytes,
                       mean_us=[t / c if c else 0.0 for t, c in zip(time_us, calls)])
        # new_bytes: output bytes the op newly allocated (None when unknown); measured ops that got no
        # allocation, and aliasing ops (a ReadVariableOp "outputs" the whole kernel), add nothing
        self.ops = Pager({f: columns[f] for f in OP_FIELDS}, "time_us")
        # the ops that allocated a buffer at the peak, by name (a dict of every op would cost more)
        wanted = set(trace.peak_buffers.column("op"))
        self._of_op = {names[i]: (layers[i], phases[i]) for i in range(len(names)) if names[i] in wanted}
        self.peak = peak_by_category(trace, breakdown)
        # as answers carry it: built once
        self.layer_table = self._layer_table(layers, phases, time_us, calls, new_bytes, ops.column("alloc_bytes"))

    def _layer_of(self, op: str) -> str:
        return self._of_op.get(op, ("", ""))[0]

    def _layer_table(self, layers: List[str], phases: List[str], time_us: List[float], calls: List[int],
                     new_bytes: List[Optional[int]], alloc_bytes: List[int]) -> Dict[str, Any]:
        per_layer: Dict[str, Dict[str, Any]] = collections.defaultdict(_zero_layer)
        per_group: Dict[str, Dict[str, Any]] = collections.defaultdict(_zero_layer)
        # One pass groups op indices by (layer or phase group, phase); the sums run in C over each group.
        groups: Dict[Tuple[str, str], List[int]] = collections.defaultdict(list)
        for i, key in enumerate(zip(layers, phases)):
            groups[key].append(i)
        known_bytes = [nb or 0 for nb in new_bytes]
        for (layer, phase), indices in groups.items():
            agg = per_layer[layer] if layer else per_group[phase]
            spent = sum(map(time_us.__getitem__, indices))
            agg["time_us"] += spent
            agg["ops"] += sum(map(calls.__getitem__, indices))
            agg["output_bytes"] += sum(map(known_bytes.__getitem__, indices))
            agg["unknown_output_ops"] += sum(1 for i in indices if new_bytes[i] is None)  # output_bytes is a floor
            agg["alloc_bytes"] += sum(map(alloc_bytes.__getitem__, indices))
            agg[f"{phase or 'other'}_time_us"] = agg.get(f"{phase or 'other'}_time_us", 0.0) + spent
        for buffer_op, size, category in zip(self.trace.peak_buffers.column("op"),
                                             self.trace.peak_buffers.column("bytes"),
                                             self.trace.peak_buffers.column("category")):
            if category in (ACTIVATIONS, GRADIENTS):
                layer = self._layer_of(buffer_op)
                agg = per_layer[layer] if layer else per_group[self._of_op.get(buffer_op, ("", ""))[1]]
                agg[f"peak_{category}_bytes"] += size
        storage = self.breakdown.layer_table["columns"] if self.breakdown else {}
        at = {path: i for i, path in enumerate(storage.get("layer", ()))}  # every row of the storage tree
        # model order: the breakdown's layers, else the ones the trace joined; then any other layer ops named
        paths = ([p for p, leaf in zip(storage["layer"], storage["leaf"]) if leaf] if self.breakdown
                 else list(self.trace.layers))
        listed = set(paths)
        paths += sorted(p for p in per_layer if p and p not in listed)
        self.joined_time_us = sum(agg["time_us"] for p, agg in per_layer.items() if p and p in self.tree)

        def leaf(path: str) -> Dict[str, Any]:
            row = dict(per_layer.get(path) or _zero_layer())
            i = at.get(path)
            role_bytes = {role: values[i] or 0 for role, values in storage["bytes"].items()} if i is not None else {}
            row["weight_bytes"] = role_bytes.get(WEIGHT, 0) + role_bytes.get(NON_TRAINABLE, 0)
            row["slot_bytes"] = role_bytes.get(OPTIMIZER_SLOT, 0)
            row["class_name"] = storage["class_name"][i] or "" if i is not None else ""
            return row

        sums = ("time_us", "ops", "output_bytes", "alloc_bytes", "unknown_output_ops", "weight_bytes", "slot_bytes",
                f"peak_{ACTIVATIONS}_bytes", f"peak_{GRADIENTS}_bytes") + tuple(f"{p}_time_us" for p in _PHASE_KEYS)
        tree = layer_tree(paths, as_columns([leaf(path) for path in paths])["columns"], sums)
        tree["columns"]["in_breakdown"] = [path in at for path in tree["columns"]["layer"]]
        groups = [dict(agg, layer="", group=phase, label=_GROUP_LABEL.get(phase, f"({phase})"), depth=0, leaf=True,
                       weight_bytes=0, slot_bytes=0, class_name="", in_breakdown=False)
                  for phase, agg in sorted(per_group.items(), key=lambda kv: -kv[1]["time_us"])]
        return appended(tree, groups)

    def summary(self, top: int = 12) -> Dict[str, Any]:
        trace = self.trace
        total = sum(trace.ops.column("time_us"))
        joined = self.joined_time_us
        return {
            "source": trace.source, "steps": trace.steps, "devices": trace.devices, "timed": trace.timed,
            "op_count": len(trace.ops), "total_time_us": total,
            "join": {"joined_time_us": joined, "fraction": joined / total if total else None,
                     "vocabulary": "breakdown" if self.breakdown else ("trace" if self.tree.children[""] else "none")},
            "peak_bytes": self.peak["total"], "peak_time_us": trace.peak_time_us,
            "peak_by_category": self.peak, "allocations": trace.allocations,
            "allocations_note": trace.allocations_note, "allocators": trace.allocators,
            "layers": self.layer_table,
            "top_time": self.ops.rows(self.ops.top("time_us", top), ("name", "time_us", "layer")),
            "top_bytes": self.ops.rows(self.ops.top("new_bytes", top), ("name", "new_bytes", "layer")),
        }

    def timeline(self) -> Dict[str, Any]:
        """Bytes in use over the trace stacked by category, the peak marked, and the buffers in use at it."""
        t = self.trace.timeline
        stacks = _stacks(self.trace, self.peak)
        buffers = self.trace.peak_buffers
        listed = list(range(min(len(buffers), MAX_BUFFERS)))
        rows = [{"op": buffers.column("op")[i], "layer": self._layer_of(buffers.column("op")[i]),
                 "bytes": buffers.column("bytes")[i], "shape": buffers.column("shape")[i],
                 "dtype": buffers.column("dtype")[i], "region": buffers.column("region")[i],
                 "category": _buffer_category(buffers.column("category")[i]),
                 "bytes_source": buffers.column("bytes_source")[i]} for i in listed]
        return {"t_us": t.t_us, "bytes": t.bytes, "op": t.op, "stacks": stacks, "peak_bytes": self.peak["total"],
                "peak_time_us": self.trace.peak_time_us, "counts_resident": self.trace.counts_resident,
                "buffers": rows, "buffer_count": len(buffers), "peak_by_category": self.peak,
                "allocations": self.trace.allocations, "allocations_note": self.trace.allocations_note}


_PHASE_KEYS = (FORWARD, BACKWARD, OPTIMIZER, LOSS, METRICS)


def _zero_layer() -> Dict[str, Any]:
    row: Dict[str, Any] = {"time_us": 0.0, "ops": 0, "output_bytes": 0, "alloc_bytes": 0, "unknown_output_ops": 0,
                           f"peak_{ACTIVATIONS}_bytes": 0, f"peak_{GRADIENTS}_bytes": 0}
    return row


def _buffer_category(category: str) -> str:
    return UNATTRIBUTED if category == BEFORE_WINDOW else category


# --- the peak, by category ----------------------------------------------------------------------

def peak_by_category(trace: OpTrace, breakdown: Optional[BreakdownView]) -> Dict[str, Any]:
    """Every byte in use at the peak in one category, summing to ``total``.

    Buffers allocated during the trace take their category from the op that allocated them.
    What was allocated before the window is the run's weights, non-trainable state and
    optimizer slots (from the breakdown) as far as they go, the rest ``unattributed``. A
    TF2 profile's count includes that resident memory; RunMetadata counts only the step's
    own allocations, so the breakdown's bytes come on top of its peak. A part the data
    cannot give is None, with the reason in ``unknown``.
    """
    if trace.allocations == "none":  # no allocator event: nothing about the peak is known
        reason = trace.allocations_note or "the trace recorded no allocation events"
        return {**{c: None for c in PEAK_CATEGORIES}, "total": None, "step_peak_bytes": None,
                "unknown": {c: reason for c in PEAK_CATEGORIES}}
    step = {c: 0 for c in STEP_CATEGORIES}
    seen = 0
    for size, category in zip(trace.peak_buffers.column("bytes"), trace.peak_buffers.column("category")):
        if category in step:
            step[category] += size
            seen += size
    parts: Dict[str, Any] = {c: 0 for c in PEAK_CATEGORIES}
    for category in (GRADIENTS, ACTIVATIONS, "optimizer_temporaries", "inputs", "temporaries"):
        parts[category] = step[category]
    unknown: Dict[str, str] = {}
    resident_parts = _resident(breakdown)
    in_window_state = {WEIGHTS_CATEGORY: step[WEIGHTS_CATEGORY], OPTIMIZER_SLOTS_CATEGORY: step[OPTIMIZER_SLOTS_CATEGORY]}
    if trace.counts_resident:
        # The buffers live at the peak can add up past the allocator's own count only when a profile's
        # events are inconsistent (sizes missing, an allocator not counted): then they are the floor.
        total = max(trace.peak_bytes, seen)
        resident = total - seen
        if resident_parts is None:
            for category in (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY):
                parts[category] = None
                unknown[category] = "no variable breakdown in this run: record one to split the resident memory"
            parts.update({k: v for k, v in in_window_state.items() if v})
            parts[UNATTRIBUTED] = resident
        else:
            left = resident
            for category in (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY):
                share = min(resident_parts[category], left)
                parts[category] = share + in_window_state.get(category, 0)
                left -= share
            parts[UNATTRIBUTED] = left
    else:
        step_total = max(trace.peak_bytes, seen)
        parts[UNATTRIBUTED] = step_total - seen
        if resident_parts is None:
            for category in (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY):
                parts[category] = in_window_state.get(category) or None
                if not parts[category]:
                    unknown[category] = ("not in this trace (step stats count only the step's own allocations) "
                                         "and the run has no variable breakdown")
            total = step_total
        else:
            for category in (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY):
                parts[category] = resident_parts[category] + in_window_state.get(category, 0)
            total = step_total + sum(resident_parts.values())
    parts["total"] = total
    parts["unknown"] = unknown
    parts["step_peak_bytes"] = trace.peak_bytes if not trace.counts_resident else None
    return parts


def _resident(breakdown: Optional[BreakdownView]) -> Optional[Dict[str, int]]:
    """Bytes of the breakdown's variables by peak category: counters and other state owned by
    a layer count as its non-trainable state, the optimizer's own as its slots."""
    if breakdown is None:
        return None
    owned_by_a_layer = breakdown.vocabulary.variable_layer
    out = {WEIGHTS_CATEGORY: 0, NON_TRAINABLE_CATEGORY: 0, OPTIMIZER_SLOTS_CATEGORY: 0}
    columns = breakdown.record.variables.columns
    for name, role, size in zip(columns["name"], columns["role"], columns["bytes"]):
        if role == WEIGHT:
            out[WEIGHTS_CATEGORY] += size
        elif role == NON_TRAINABLE or (role == OTHER and name in owned_by_a_layer):
            out[NON_TRAINABLE_CATEGORY] += size
        else:
            out[OPTIMIZER_SLOTS_CATEGORY] += size
    return out


def _stacks(trace: OpTrace, peak: Dict[str, Any]) -> Dict[str, List[float]]:
    """Each category's bytes in use at every timeline point; they add up to the point's total
    (RunMetadata: the step's bytes plus the breakdown's, constant)."""
    t = trace.timeline
    n = len(t.t_us)
    stacks: Dict[str, List[float]] = {}
    if peak["total"] is None:
        return stacks
    in_window = {c: t.by_category.get(c, [0.0] * n) for c in STEP_CATEGORIES}
    constants = {c: float(peak[c] or 0) for c in (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY)}
    for c in (WEIGHTS_CATEGORY, OPTIMIZER_SLOTS_CATEGORY):
        constants[c] = max(constants[c] - (in_window[c][-1] if n else 0.0), 0.0)  # in-window part varies below
    rest = []
    for i in range(n):
        counted = sum(v[i] for v in in_window.values())
        if trace.counts_resident:
            resident = max(t.bytes[i] - counted, 0.0)
            left = resident
            for c in (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY):
                share = min(constants[c], left)
                stacks.setdefault(c, []).append(share + (in_window[c][i] if c in in_window else 0.0))
                left -= share
            rest.append(left)
        else:
            for c in (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY):
                stacks.setdefault(c, []).append(constants[c] + (in_window[c][i] if c in in_window else 0.0))
            rest.append(max(t.bytes[i] - counted, 0.0))
    for c in (GRADIENTS, ACTIVATIONS, "optimizer_temporaries", "inputs", "temporaries"):
        stacks[c] = list(in_window[c])
    stacks[UNATTRIBUTED] = rest
    return {c: v for c, v in stacks.items() if any(v)}


def loadbench_view(record: LoadBench) -> Dict[str, Any]:
    return {"model_name": record.model_name, "results": [r.to_dict() for r in record.results]}


__all__ = ["BreakdownView", "TraceView", "Pager", "peak_by_category", "loadbench_view", "layer_tree", "appended", "ROLES"]
