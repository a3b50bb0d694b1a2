"""The layer tree as answers carry it: column by column, composite layers summing their sublayers."""

from __future__ import annotations

import itertools
from typing import Any, Dict, List, Optional, Sequence

from tb_modelmem.rules.join import LayerTree


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
               nested: Sequence[str] = (), composite: Optional[Dict[str, str]] = None,
               floors: Optional[Dict[str, str]] = None, root: str = "") -> Dict[str, Any]:
    """The layer tree as answers carry it (``as_columns`` form): one row per layer and per
    composite layer above it, depth first in the order given, with ``layer``, ``label``,
    ``depth`` and ``leaf``. ``own``: each path's own figures, ``{field: [value per path]}``
    (a ``nested`` field ``{key: [...]}``). A composite row adds its descendants' ``sums`` and
    ``nested`` numbers to its own; a field no row of it reaches is None (a sum, 0).

    Each figure is a path's own, so a composite counts each once: a path given twice is one row
    (its last figures), and what a layer reachable at two paths holds is given at one of them.
    ``composite``: ``{field: summed}``, a field whose composite rows are the sum of another
    (a leaf shows a shared layer's parameters, its parents sum the ones it owns). ``floors``:
    ``{field: count}``, a sum that adds known figures only, ``count`` its unknown ones (summed
    too): where nothing known adds to it and some are unknown, it is None (unknown, not 0).
    ``root``: the model's own layer where its submodules' paths do not start with it (a PyTorch or flax
    model's class name, beside ``encoder/...``): every other top-level layer goes under it, so it sums
    the model as a Keras model's row does; its row says ``whole_model`` (its layers are not under its path).

    Built column by column, never a dict per row: a 10,000-variable model has ~1,700 rows."""
    tree = LayerTree(paths)
    tops = tree.children[""]
    nested_under_root = root in tops and not tree.children[root] and len(tops) > 1
    if nested_under_root:
        tree.children[root] = {name: path for name, path in tops.items() if name != root}
        tree.children[""] = {root: root}
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
    for field, summed in (composite or {}).items():
        shown, totals = columns[field], columns[summed]
        columns[field] = [value if is_leaf else total for value, total, is_leaf in zip(shown, totals, leaf)]
    for field, count in (floors or {}).items():
        columns[field] = unknown_where(columns[field], columns[count])
    columns.update(layer=order, label=[path.rpartition("/")[2] for path in order], depth=depth, leaf=leaf)
    if nested_under_root:
        columns["whole_model"] = [path == root for path in order]
    return {"length": len(order), "columns": columns}


def unknown_where(sums: Sequence[Any], unknown: Sequence[Any]) -> List[Any]:
    """Sums of known figures, None where nothing known adds to one and ``unknown`` counts
    figures left out: unknown, never 0."""
    return [None if not total and missing else total for total, missing in zip(sums, unknown)]


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
